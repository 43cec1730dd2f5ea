//! Step 2 of a query ([`super`]): dense codes of the selected rows over the group-by fields
//! ([`Keys`]), which keep the contract's order so that groups come out sorted without
//! comparing values.

use super::super::answer::metadata;
use super::super::select::{Sel, scan};
use super::super::store::Packed;
use super::{Access, Ctx, LUT_MAX};
use crate::schema::ValueType;
use crate::zone::{MAX_OFFSET_MICROS, Zone};
use std::collections::HashMap;

/// The bucket of a stored value `v` in `unit`: `floor((v * unit + offset) / period)`, the
/// offset being the zone's at that instant when there is a zone.
#[inline]
pub(super) fn bucket_of(
    unit: i64,
    offset: i64,
    period: i64,
    zone: Option<Zone>,
) -> impl Fn(i64) -> i64 {
    move |v: i64| {
        let t = v * unit;
        let offset = zone.map_or(offset, |z| z.offset_at(t));
        (t + offset).div_euclid(period)
    }
}

/// The ranks of a dictionary's values under a field's order: `rank[code]`.
fn ranks(values: &[Box<str>], ty: ValueType) -> Vec<u32> {
    let mut order: Vec<u32> = (0..values.len() as u32).collect();
    order.sort_unstable_by(|&a, &b| {
        let (x, y) = (&*values[a as usize], &*values[b as usize]);
        if ty == ValueType::Version {
            crate::version::compare(x, y)
        } else {
            x.as_bytes().cmp(y.as_bytes())
        }
    });
    let mut rank = vec![0u32; values.len()];
    for (r, &c) in order.iter().enumerate() {
        rank[c as usize] = r as u32;
    }
    rank
}

/// Dense codes of the selected rows over one or more fields: `codes[k]` in `0..card` for
/// the `k`-th selected row; equal values give equal codes, and with `order` given the codes
/// ascend with the values (first field most significant).
pub(super) struct Keys {
    pub(super) codes: Vec<u64>,
    pub(super) card: u64,
    /// Beyond this many codes, renumber to the distinct ones.
    max_card: u64,
    /// The most distinct codes wanted: past it, the keys stop being computed (`over`).
    bound: u64,
    /// More than `bound` distinct codes were found; `codes` are then meaningless.
    pub(super) over: bool,
}

impl Keys {
    pub(super) fn new(n: usize, max_card: u64) -> Keys {
        Keys {
            codes: vec![0; n],
            card: 1,
            // At most 2^32, so that after renumbering (at most one code per row, fewer
            // than 2^32 rows) a product with the next field fits a u64.
            max_card: max_card.clamp(1, 1 << 32),
            bound: u64::MAX,
            over: false,
        }
    }

    /// [`Keys::new`] that stops, marked `over`, as soon as it knows of more than `bound`
    /// distinct codes: each field only splits the groups of the ones before it, so the
    /// groups can only grow from there.
    pub(super) fn bounded(n: usize, max_card: u64, bound: u64) -> Keys {
        Keys {
            bound,
            ..Keys::new(n, max_card)
        }
    }

    /// Marks the keys `over` when `distinct` codes are more than wanted.
    pub(super) fn check(&mut self, distinct: usize) -> bool {
        self.over |= distinct as u64 > self.bound;
        self.over
    }

    /// Renumbers the codes to the distinct ones, keeping their order (or stops, `over`,
    /// at the first code past the bound).
    pub(super) fn compact(&mut self) {
        if self.over {
            return;
        }
        let mut ids: HashMap<u64, u32> = HashMap::new();
        let mut distinct: Vec<u64> = Vec::new();
        for c in &mut self.codes {
            let id = *ids.entry(*c).or_insert_with(|| {
                distinct.push(*c);
                (distinct.len() - 1) as u32
            });
            *c = u64::from(id);
            if distinct.len() as u64 > self.bound {
                self.over = true;
                return;
            }
        }
        let mut order: Vec<u32> = (0..distinct.len() as u32).collect();
        order.sort_unstable_by_key(|&i| distinct[i as usize]);
        let mut renumber = vec![0u64; distinct.len()];
        for (new, &old) in order.iter().enumerate() {
            renumber[old as usize] = new as u64;
        }
        for c in &mut self.codes {
            *c = renumber[*c as usize];
        }
        self.card = (distinct.len() as u64).max(1);
    }

    /// Multiplies in one field: `code = code * card(field) + code(field)`.
    pub(super) fn push(
        &mut self,
        acc: Access<'_>,
        sel: &Sel,
        order: Option<ValueType>,
        ctx: &Ctx<'_>,
    ) {
        let Some(col) = acc.column() else {
            return;
        };
        if self.over {
            return;
        }
        let data = &col.data;
        // Each arm picks a coding: a lookup table, an offset, a computed bucket, or the rank
        // among the distinct values (sparse fields).
        match acc {
            Access::Text(col) => {
                let dict = col.dict.as_ref().map_or(&[][..], |d| d.values());
                let card = dict.len().max(1) as u64;
                match order {
                    Some(ty) => {
                        let rank = ranks(dict, ty);
                        self.combine(data, sel, card, |v| u64::from(rank[v as usize]));
                    }
                    None => self.combine(data, sel, card, |v| v as u64),
                }
            }
            Access::Metadata(col) => {
                let keys = col.dict.as_ref().map_or(&[][..], |d| d.values());
                let meta: Vec<String> = keys
                    .iter()
                    .map(|k| metadata(ctx.email_of_key.get(&**k).map(String::as_str)))
                    .collect();
                // Keys without a user share `{}`: code the distinct texts.
                let mut distinct: Vec<&str> = meta.iter().map(String::as_str).collect();
                distinct.sort_unstable();
                distinct.dedup();
                let code: Vec<u64> = meta
                    .iter()
                    .map(|m| distinct.binary_search(&m.as_str()).unwrap_or(0) as u64)
                    .collect();
                self.combine(data, sel, distinct.len().max(1) as u64, |v| {
                    code[v as usize]
                });
            }
            Access::Bool(_) => self.combine(data, sel, 2, |v| v as u64),
            Access::Int(_) | Access::Instant(_) => {
                let Some((lo, hi)) = min_max(data, sel) else {
                    return;
                };
                let span = i128::from(hi) - i128::from(lo) + 1;
                if span <= i128::from(self.max_card) {
                    self.combine(data, sel, span as u64, |v| (v - lo) as u64);
                } else {
                    self.sparse(data, sel, |v| v);
                }
            }
            Access::Bucket {
                col,
                offset,
                period,
                zone,
            } => {
                let unit = col.unit;
                let bucket = bucket_of(unit, offset, period, zone);
                let Some((lo, hi)) = min_max(data, sel) else {
                    return;
                };
                // A zone's local date is not monotone: bound it by the greatest offset.
                let (blo, bhi) = match zone {
                    None => (bucket(lo), bucket(hi)),
                    Some(_) => (
                        (lo * unit - MAX_OFFSET_MICROS).div_euclid(period),
                        (hi * unit + MAX_OFFSET_MICROS).div_euclid(period),
                    ),
                };
                let card = (bhi - blo + 1) as u64;
                let span = hi - lo;
                if span < LUT_MAX && span as u64 <= 4 * sel.len() as u64 + 4096 {
                    let lut: Vec<u32> = (lo..=hi).map(|v| (bucket(v) - blo) as u32).collect();
                    self.combine(data, sel, card, |v| u64::from(lut[(v - lo) as usize]));
                } else if card <= self.max_card {
                    self.combine(data, sel, card, |v| (bucket(v) - blo) as u64);
                } else {
                    self.sparse(data, sel, bucket);
                }
            }
            Access::None => {}
        }
    }

    /// Combines with a field coded by `code` in `0..card`.
    pub(super) fn combine(
        &mut self,
        data: &Packed,
        sel: &Sel,
        card: u64,
        code: impl Fn(i64) -> u64,
    ) {
        if self.card.checked_mul(card).is_none_or(|p| p > u64::MAX / 2) {
            self.compact();
        }
        if self.over {
            return;
        }
        let codes = &mut self.codes;
        if self.card == 1 {
            scan(data, sel, |k, v| codes[k] = code(v));
        } else {
            scan(data, sel, |k, v| codes[k] = codes[k] * card + code(v));
        }
        self.card *= card;
        if self.card > self.max_card {
            self.compact();
        }
    }

    /// Combines with a field coded by the rank of `key(value)` among the selected rows.
    pub(super) fn sparse(&mut self, data: &Packed, sel: &Sel, key: impl Fn(i64) -> i64) {
        let mut distinct = Vec::with_capacity(sel.len());
        scan(data, sel, |_, v| distinct.push(key(v)));
        distinct.sort_unstable();
        distinct.dedup();
        if self.check(distinct.len()) {
            return;
        }
        let card = distinct.len().max(1) as u64;
        self.combine(data, sel, card, |v| {
            distinct.binary_search(&key(v)).unwrap_or(0) as u64
        });
    }
}

pub(super) fn min_max(data: &Packed, sel: &Sel) -> Option<(i64, i64)> {
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    scan(data, sel, |_, v| {
        lo = lo.min(v);
        hi = hi.max(v);
    });
    (lo <= hi).then_some((lo, hi))
}
