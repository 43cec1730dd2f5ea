//! The groups of a query's selected rows ([`Groups`]), from their [`Keys`](super::keys::Keys),
//! and the exact sums every aggregate reads ([`total`]).

use super::super::select::{Bitmap, Sel, scan};
use super::super::store::Packed;
use super::keys::Keys;
use super::{Access, BITS_MAX, Ctx, DENSE_MAX};
use crate::schema::ValueType;

/// The exact sum of the selected values. Below 2^32 rows, values of at most 32 bits cannot
/// overflow a `u64`, which the compiler can vectorise.
pub(super) fn total(data: &Packed, sel: &Sel) -> i128 {
    if let Packed::I64(_) = data {
        let mut t = 0i128;
        scan(data, sel, |_, v| t += i128::from(v));
        t
    } else {
        let mut t = 0u64;
        scan(data, sel, |_, v| t = t.wrapping_add(v as u64));
        i128::from(t)
    }
}

/// The groups of the selected rows: each row's group, and per group its row count and
/// first row.
pub(super) struct Groups {
    /// The group of each selected row (`None`: one group).
    pub(super) codes: Option<Vec<u32>>,
    /// The number of group codes (some may be empty).
    pub(super) card: usize,
    pub(super) counts: Vec<u64>,
    pub(super) reps: Vec<u32>,
}

impl Groups {
    /// The groups of the selected rows by `fields`; `Err(())` as soon as it is known that
    /// they are more than `limit`.
    pub(super) fn new(
        fields: &[(Access<'_>, ValueType)],
        sel: &Sel,
        ctx: &Ctx<'_>,
        limit: usize,
    ) -> Result<Groups, ()> {
        let (codes, card) = if fields.is_empty() {
            (None, 1)
        } else {
            // Accumulators are indexed by code: keep them near the number of rows.
            let max_card = DENSE_MAX.min(4 * sel.len() as u64 + 1024);
            let mut keys = Keys::bounded(sel.len(), max_card, limit as u64);
            for (acc, ty) in fields {
                keys.push(*acc, sel, Some(*ty), ctx);
                if keys.over {
                    return Err(());
                }
            }
            let codes: Vec<u32> = keys.codes.iter().map(|&c| c as u32).collect();
            (Some(codes), keys.card as usize)
        };
        let mut counts = vec![0u64; card];
        let mut reps = vec![u32::MAX; card];
        match &codes {
            None if sel.len() > 0 => {
                counts[0] = sel.len() as u64;
                reps[0] = sel.row(0) as u32;
            }
            None => {}
            Some(codes) => {
                for (k, &g) in codes.iter().enumerate() {
                    let g = g as usize;
                    counts[g] += 1;
                    if reps[g] == u32::MAX {
                        reps[g] = sel.row(k) as u32;
                    }
                }
            }
        }
        Ok(Groups {
            codes,
            card,
            counts,
            reps,
        })
    }

    #[inline]
    pub(super) fn of(&self, k: usize) -> usize {
        self.codes.as_ref().map_or(0, |c| c[k] as usize)
    }

    /// The groups that have rows, in order.
    pub(super) fn present(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.card).filter(|&g| self.counts[g] > 0)
    }

    /// Exact sums per group.
    pub(super) fn sums(&self, data: &Packed, sel: &Sel) -> Vec<i128> {
        let mut acc = vec![0i128; self.card];
        match &self.codes {
            None => acc[0] = total(data, sel),
            Some(codes) => scan(data, sel, |k, v| acc[codes[k] as usize] += i128::from(v)),
        }
        acc
    }

    /// The number of distinct values of `fields` per group.
    pub(super) fn count_distinct(
        &self,
        fields: &[Access<'_>],
        sel: &Sel,
        ctx: &Ctx<'_>,
    ) -> Vec<u64> {
        let bitmap = |p: u64| (self.card as u64).checked_mul(p).filter(|b| *b <= BITS_MAX);
        let mut out = vec![0u64; self.card];
        // One dictionary column (distinct users): its codes are the keys.
        if let [Access::Text(col)] = fields
            && let Some(bits) = bitmap(col.dict.as_ref().map_or(1, |d| d.values().len()) as u64)
        {
            let p = bits / self.card as u64;
            let mut seen = Bitmap::new(bits);
            scan(&col.data, sel, |k, v| {
                let g = self.of(k);
                out[g] += u64::from(seen.insert(g as u64 * p + v as u64));
            });
            return out;
        }
        let mut keys = Keys::new(sel.len(), BITS_MAX / self.card as u64);
        for f in fields {
            keys.push(*f, sel, None, ctx);
        }
        if keys.card > u64::from(u32::MAX) {
            keys.compact();
        }
        let p = keys.card;
        match bitmap(p) {
            Some(bits) => {
                let mut seen = Bitmap::new(bits);
                for (k, &key) in keys.codes.iter().enumerate() {
                    let g = self.of(k);
                    out[g] += u64::from(seen.insert(g as u64 * p + key));
                }
            }
            None => {
                let mut pairs: Vec<u64> = keys
                    .codes
                    .iter()
                    .enumerate()
                    .map(|(k, &key)| self.of(k) as u64 * p + key)
                    .collect();
                pairs.sort_unstable();
                pairs.dedup();
                for x in pairs {
                    out[(x / p) as usize] += 1;
                }
            }
        }
        out
    }
}
