//! The columnar evaluator of custom queries (contract section 3) over one [`Table`].
//!
//! A query runs in three steps.
//! 1. **Selection** ([`select`], with the primitives of [`super::select`]). Each filter is
//!    compiled once against the table ([`Pred`]): on a dictionary column into a pass/fail
//!    flag per code (the filter is tested once per distinct value, with [`passes`], so
//!    every ordering rule of `value.rs` holds; several `EQUAL` filters are one IN list), on
//!    a count or a time into a set of integer ranges of the stored values (a date,
//!    `date UTC±H[:MM]` or `YYYY-MM-DD` test on a time is a range of instants). The group
//!    restriction is a flag per `api_key` code, the PCW range a range of times. Filters on
//!    one column are intersected; then each remaining one narrows a vector of row numbers.
//! 2. **Keys** ([`Keys`]). Group-by fields map each selected row to a dense code that
//!    preserves the contract's order: dictionary codes through a rank table (bytewise, or
//!    version order), dates and hours as offsets from the smallest one (through a lookup
//!    table from the stored hour), other integers as offsets or, when sparse, their rank
//!    among the distinct values. Several fields combine as one mixed-radix number, first
//!    field most significant; when the product grows too large the codes are renumbered
//!    to the distinct ones (keeping their order). So groups come out sorted without
//!    comparing values.
//! 3. **Aggregates.** One pass per selection over the selected rows into a vector indexed
//!    by group: counts, exact sums in `i128`, min and max, and `distinct_*` as the number
//!    of distinct (group, key) pairs, in a bitmap when small enough, else by sorting.
//!    Group values are read from the first row of each group.

mod groups;
mod keys;

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use super::answer::item_bytes;
use super::answer::{item, metadata};
use super::select::{Pred, Sel, scan, select, text_pred, time_range_pred};
use super::store::{Column, Table};
use super::value::{Value, average, passes, pcw_value};
use crate::plan::{FilterTest, FilterValue, QueryPlan, QueryShape, SelectionPlan, TimeRange};
use crate::ranges::{RangeSet, instant_set, key_range};
use crate::schema::records::{self, RecordType};
use crate::schema::{Agg, Expr, FieldRef, FilterOp, PCW_COLUMNS, ValueType};
use crate::time::{Date, MICROS_PER_DAY, MICROS_PER_HOUR, MICROS_PER_SECOND, Timestamp};
use crate::wire::{QueryResult, ResponseItem};
use crate::zone::{LocalZone, Zone};
use groups::{Groups, total};
use keys::{Keys, bucket_of};

// Sizes that choose between a dense and a sparse way of computing the same thing. Tests
// use tiny ones, so that the small datasets of the differential tests take both ways.

/// The most codes a group-by key may span before it is renumbered.
const DENSE_MAX: u64 = if cfg!(test) { 48 } else { 1 << 20 };
/// The largest stored-value span turned into a lookup table.
const LUT_MAX: i64 = if cfg!(test) { 64 } else { 1 << 22 };
/// The most bits a distinct-count bitmap may have.
const BITS_MAX: u64 = if cfg!(test) { 16 } else { 1 << 28 };

/// What a query runs over.
pub(crate) struct Ctx<'a> {
    /// The table of the query's source.
    pub(crate) table: &'a Table,
    /// The e-mail of the user owning each api_key.
    pub(crate) email_of_key: &'a HashMap<String, String>,
    /// The api_keys a group restriction allows (`None`: every record counts).
    pub(crate) allowed_keys: Option<&'a HashSet<String>>,
    /// The request's range (PCW only).
    pub(crate) range: TimeRange,
}

/// How a field's value is read from a row.
#[derive(Clone, Copy)]
enum Access<'a> {
    /// A dictionary-coded text or enum.
    Text(&'a Column),
    /// A boolean.
    Bool(&'a Column),
    /// A count.
    Int(&'a Column),
    /// An instant (`hour`, `timestamp`).
    Instant(&'a Column),
    /// `floor((time + offset) / period)` of a time column: a date when `period` is a day,
    /// an hour start when it is an hour. With a `zone`, the offset is the zone's at each
    /// instant (a local date in an IANA zone) and `offset` is 0.
    Bucket {
        col: &'a Column,
        offset: i64,
        period: i64,
        zone: Option<Zone>,
    },
    /// The `metadata` of the row's `api_key`.
    Metadata(&'a Column),
    /// No per-row value (`distinct_*`, derived PCW fields, a column the table lacks).
    None,
}

impl<'a> Access<'a> {
    fn of(table: &'a Table, f: FieldRef) -> Access<'a> {
        let time = || table.time_column();
        let date = |offset: i64, zone: Option<Zone>| {
            time().map_or(Access::None, |col| Access::Bucket {
                col,
                offset,
                period: MICROS_PER_DAY,
                zone,
            })
        };
        match f.field().expr {
            Expr::Column(c) => match table.column(c) {
                Some(col) => match col.field.ty {
                    RecordType::Text | RecordType::Enum(_) => Access::Text(col),
                    RecordType::Bool => Access::Bool(col),
                    RecordType::Count => Access::Int(col),
                    RecordType::Hour | RecordType::Timestamp => Access::Instant(col),
                    RecordType::Day => Access::Bucket {
                        col,
                        offset: 0,
                        period: MICROS_PER_DAY,
                        zone: None,
                    },
                    RecordType::GroupIds => Access::None,
                },
                None => Access::None,
            },
            Expr::Time => time().map_or(Access::None, Access::Instant),
            Expr::UtcDate => date(0, None),
            Expr::LocalDate => match f.zone() {
                LocalZone::Fixed(m) => date(i64::from(m) * 60 * MICROS_PER_SECOND, None),
                LocalZone::Iana(z) => date(0, Some(z)),
            },
            Expr::UserMetadata => table
                .column(records::API_KEY)
                .map_or(Access::None, Access::Metadata),
            _ => Access::None,
        }
    }

    fn column(&self) -> Option<&'a Column> {
        match *self {
            Access::Text(c)
            | Access::Bool(c)
            | Access::Int(c)
            | Access::Instant(c)
            | Access::Metadata(c) => Some(c),
            Access::Bucket { col, .. } => Some(col),
            Access::None => None,
        }
    }

    /// The value at `row`.
    fn value(&self, row: usize, ctx: &Ctx<'_>) -> Value {
        let Some(col) = self.column() else {
            return Value::Null;
        };
        if col.is_absent(row) && !matches!(self, Access::Int(_)) {
            return Value::Null;
        }
        let x = col.data.get(row);
        match *self {
            Access::Text(c) => Value::Text(c.text(row).to_string()),
            Access::Bool(_) => Value::Bool(x != 0),
            Access::Int(_) => Value::Int(i128::from(x)),
            Access::Instant(c) => Value::Time(Timestamp(x * c.unit)),
            Access::Bucket {
                col,
                offset,
                period,
                zone,
            } => {
                let b = bucket_of(col.unit, offset, period, zone)(x);
                if period == MICROS_PER_DAY {
                    Value::Date(Date(b as i32))
                } else {
                    Value::Time(Timestamp(b * period - offset))
                }
            }
            Access::Metadata(c) => Value::Text(metadata_of(c, x, ctx)),
            Access::None => Value::Null,
        }
    }

    /// How a filter value compares with this field as a monotone key of the stored value
    /// `u` of a column in `unit`: `floor((u * unit + a) / m)` against `c`, as `(c, a, m)`;
    /// `None` for a value of another type.
    fn monotone_key(&self, fv: &FilterValue) -> Option<(i64, i64, i64)> {
        match (*self, fv) {
            (Access::Int(_), FilterValue::Int(c)) => Some((*c, 0, 1)),
            (Access::Instant(_), FilterValue::Time(t)) => Some((t.0, 0, 1)),
            (Access::Instant(_), FilterValue::TimeDate(d)) => {
                Some((i64::from(d.0), 0, MICROS_PER_DAY))
            }
            (
                Access::Bucket {
                    offset,
                    period,
                    zone: None,
                    ..
                },
                FilterValue::Date(d),
            ) if period == MICROS_PER_DAY => Some((i64::from(d.0), offset, period)),
            _ => None,
        }
    }

    /// The compiled form of a filter on this field (`None`: every row passes).
    fn filter(&self, test: &FilterTest, ty: ValueType, ctx: &Ctx<'_>) -> Option<Pred<'a>> {
        let col = match *self {
            Access::Text(col) => {
                return Some(text_pred(col, |s| {
                    passes(&Value::Text(s.to_string()), test, ty)
                }));
            }
            Access::Metadata(col) => {
                return Some(text_pred(col, |s| {
                    let m = metadata(ctx.email_of_key.get(s).map(String::as_str));
                    passes(&Value::Text(m), test, ty)
                }));
            }
            Access::Bool(col) => {
                let pass = [false, true]
                    .iter()
                    .map(|b| passes(&Value::Bool(*b), test, ty))
                    .collect();
                return Some(Pred::Codes(&col.data, pass));
            }
            Access::None => return (!passes(&Value::Null, test, ty)).then_some(Pred::Never),
            Access::Int(col) | Access::Instant(col) | Access::Bucket { col, .. } => col,
        };
        let set = match test {
            FilterTest::Compare(op, fv) => match self.monotone_key(fv) {
                Some((c, a, m)) => key_range(*op, c, a, m, col.unit),
                // Values of another type compare as less (`compare_filter`).
                None if op.accepts(Ordering::Less) => RangeSet::full(),
                None => RangeSet::empty(),
            },
            FilterTest::AnyOf(values) => values
                .iter()
                .filter_map(|fv| self.monotone_key(fv))
                .map(|(c, a, m)| key_range(FilterOp::Equal, c, a, m, col.unit))
                .fold(RangeSet::empty(), RangeSet::union),
        };
        Some(Pred::Ranges(&col.data, set))
    }
}

fn metadata_of(api_key: &Column, code: i64, ctx: &Ctx<'_>) -> String {
    let key = api_key.dict.as_ref().map_or("", |d| d.value(code));
    metadata(ctx.email_of_key.get(key).map(String::as_str))
}

/// The value of a selection in every group.
fn aggregate(s: &SelectionPlan, groups: &Groups, sel: &Sel, ctx: &Ctx<'_>) -> Vec<Value> {
    let table = ctx.table;
    let acc = Access::of(table, s.field);
    let ints = |v: Vec<i128>| v.into_iter().map(Value::Int).collect();
    let api_key = table
        .column(records::API_KEY)
        .map_or(Access::None, Access::Text);
    let time_bucket = |period| {
        table
            .time_column()
            .map_or(Access::None, |col| Access::Bucket {
                col,
                offset: 0,
                period,
                zone: None,
            })
    };
    let distinct = |fields: &[Access<'_>]| -> Vec<Value> {
        groups
            .count_distinct(fields, sel, ctx)
            .into_iter()
            .map(|n| Value::Int(i128::from(n)))
            .collect()
    };
    match s.field.field().expr {
        Expr::DistinctUsers => return distinct(&[api_key]),
        Expr::DistinctDeveloperDays => return distinct(&[api_key, time_bucket(MICROS_PER_DAY)]),
        Expr::DistinctDeveloperHours => {
            return distinct(&[api_key, time_bucket(MICROS_PER_HOUR)]);
        }
        _ => {}
    }
    let numeric = match acc {
        Access::Int(c) => Some(c),
        Access::Bool(c) if s.agg == Agg::Sum => Some(c),
        _ => None,
    };
    match s.agg {
        Agg::Count => groups
            .counts
            .iter()
            .map(|&n| Value::Int(i128::from(n)))
            .collect(),
        Agg::Sum => match numeric {
            Some(c) => ints(groups.sums(&c.data, sel)),
            None => vec![Value::Int(0); groups.card],
        },
        Agg::Avg => {
            let sums = match numeric {
                Some(c) => groups.sums(&c.data, sel),
                None => vec![0; groups.card],
            };
            sums.iter()
                .zip(&groups.counts)
                .map(|(&s, &n)| average(s, n).map_or(Value::Null, Value::Float))
                .collect()
        }
        Agg::Max | Agg::Min => {
            let max = s.agg == Agg::Max;
            if let Access::Int(c) = acc {
                let init = if max { i64::MIN } else { i64::MAX };
                let mut best = vec![init; groups.card];
                scan(&c.data, sel, |k, v| {
                    let b = &mut best[groups.of(k)];
                    *b = if max { (*b).max(v) } else { (*b).min(v) };
                });
                return best
                    .iter()
                    .zip(&groups.counts)
                    .map(|(&b, &n)| {
                        if n > 0 {
                            Value::Int(i128::from(b))
                        } else {
                            Value::Null
                        }
                    })
                    .collect();
            }
            // Other types: the row with the extreme ordered code.
            let mut keys = Keys::new(sel.len(), u64::MAX);
            keys.push(acc, sel, Some(s.field.field().ty), ctx);
            let mut best: Vec<Option<(u64, usize)>> = vec![None; groups.card];
            for (k, &code) in keys.codes.iter().enumerate() {
                let b = &mut best[groups.of(k)];
                let better = b.is_none_or(|(c, _)| if max { code > c } else { code < c });
                if better {
                    *b = Some((code, sel.row(k)));
                }
            }
            best.iter()
                .map(|b| b.map_or(Value::Null, |(_, row)| acc.value(row, ctx)))
                .collect()
        }
        Agg::Unspecified => vec![Value::Null; groups.card],
    }
}

/// Sorts rows in the order of raw rows: time, `api_key`, the other identity fields in
/// their order (versions by version order), which ends with `id` for events.
fn sort_raw(table: &Table, rows: &mut [usize]) {
    let kind = table.kind;
    let keys: Vec<(&Column, bool)> = std::iter::once(records::API_KEY)
        .chain(
            kind.identity
                .iter()
                .copied()
                .filter(|n| *n != records::API_KEY && Some(*n) != kind.time),
        )
        .filter_map(|n| Some((table.column(n)?, n == "version")))
        .collect();
    let time = table.time_column();
    rows.sort_by(|&a, &b| {
        let by_time = time.map_or(Ordering::Equal, |t| t.micros(a).cmp(&t.micros(b)));
        by_time.then_with(|| {
            keys.iter()
                .map(|&(col, version)| {
                    let (x, y) = (col.text(a), col.text(b));
                    if version {
                        crate::version::compare(x, y)
                    } else {
                        x.as_bytes().cmp(y.as_bytes())
                    }
                })
                .find(|o| *o != Ordering::Equal)
                .unwrap_or(Ordering::Equal)
        })
    });
}

/// What an answer may still hold (contract section 11, cost bounds).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Room {
    /// Items.
    pub(crate) items: usize,
    /// Bytes of aliases and values ([`item_bytes`]).
    pub(crate) bytes: usize,
}

/// The bound an answer passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Over {
    /// More items than [`Room::items`].
    Items,
    /// More bytes than [`Room::bytes`].
    Bytes,
}

/// The items of `items` while they fit in `bytes`: the answer stops at the first item past
/// them.
fn within(
    items: impl Iterator<Item = ResponseItem>,
    n: usize,
    bytes: usize,
) -> Result<Vec<ResponseItem>, Over> {
    let mut used = 0usize;
    let mut out = Vec::with_capacity(n);
    for it in items {
        used += item_bytes(&it);
        if used > bytes {
            return Err(Over::Bytes);
        }
        out.push(it);
    }
    Ok(out)
}

/// Evaluates one validated query within `room`. Past the room's items, it stops as soon as
/// that is known: before raw rows are sorted or read, and while a group-by's keys are
/// computed; past its bytes, at the item that passes them. The item bound is checked
/// first.
pub(crate) fn evaluate(plan: &QueryPlan, ctx: &Ctx<'_>, room: Room) -> Result<QueryResult, Over> {
    let limit = room.items;
    let table = ctx.table;
    let mut preds = Vec::new();
    if let Some(allowed) = ctx.allowed_keys {
        match table.column(records::API_KEY) {
            Some(col) => preds.push(text_pred(col, |k| allowed.contains(k))),
            None => preds.push(Pred::Never),
        }
    }
    if plan.shape == QueryShape::Pcw
        && !ctx.range.is_all()
        && let Some(col) = table.time_column()
    {
        preds.push(time_range_pred(col, ctx.range));
    }
    for f in &plan.filters {
        // The record's time and its dates: ranges of the time column (a local date in an
        // IANA zone is only ever filtered here).
        if let (Some(set), Some(col)) = (instant_set(f.field, &f.test), table.time_column()) {
            preds.push(Pred::Ranges(&col.data, set.to_units(col.unit)));
            continue;
        }
        let acc = Access::of(table, f.field);
        if let Some(p) = acc.filter(&f.test, f.field.field().ty, ctx) {
            preds.push(p);
        }
    }
    let sel = select(table.len(), preds);
    let items: Vec<ResponseItem> = match plan.shape {
        QueryShape::Pcw => {
            // Each column of the outputs is summed once; every output is made of the sums.
            let sums: Vec<i128> = PCW_COLUMNS
                .iter()
                .map(|name| table.column(name).map_or(0, |c| total(&c.data, &sel)))
                .collect();
            if limit == 0 {
                return Err(Over::Items);
            }
            let one = item(plan.selections.iter().map(|s| {
                let v = pcw_value(s.field.field().expr, &sums).unwrap_or(Value::Null);
                (s.alias.clone(), v)
            }));
            within(std::iter::once(one), 1, room.bytes)?
        }
        QueryShape::Raw => {
            if sel.len() > limit {
                return Err(Over::Items);
            }
            let mut rows: Vec<usize> = (0..sel.len()).map(|k| sel.row(k)).collect();
            sort_raw(table, &mut rows);
            let access: Vec<Access<'_>> = plan
                .selections
                .iter()
                .map(|s| Access::of(table, s.field))
                .collect();
            let items = rows.iter().map(|&r| {
                item(
                    plan.selections
                        .iter()
                        .zip(&access)
                        .map(|(s, a)| (s.alias.clone(), a.value(r, ctx))),
                )
            });
            within(items, rows.len(), room.bytes)?
        }
        QueryShape::Total | QueryShape::Grouped | QueryShape::GroupValues => {
            let fields: Vec<(Access<'_>, ValueType)> = plan
                .group_by
                .iter()
                .map(|g| (Access::of(table, g.field), g.field.field().ty))
                .collect();
            let bound = if plan.shape == QueryShape::Total {
                usize::MAX
            } else {
                limit
            };
            let Ok(groups) = Groups::new(&fields, &sel, ctx, bound) else {
                return Err(Over::Items);
            };
            let present: Vec<usize> = if plan.shape == QueryShape::Total {
                vec![0]
            } else {
                groups.present().collect()
            };
            if present.len() > limit {
                return Err(Over::Items);
            }
            let values: Vec<Vec<Value>> = if plan.shape == QueryShape::GroupValues {
                Vec::new()
            } else {
                plan.selections
                    .iter()
                    .map(|s| aggregate(s, &groups, &sel, ctx))
                    .collect()
            };
            let items = present.iter().map(|&g| {
                let rep = groups.reps[g] as usize;
                let group_value = |i: usize| fields[i].0.value(rep, ctx);
                let sels = plan.selections.iter().enumerate().map(|(j, s)| {
                    let v = if plan.shape == QueryShape::GroupValues {
                        let i = plan
                            .group_by
                            .iter()
                            .position(|gp| gp.field == s.field)
                            .unwrap_or(0);
                        group_value(i)
                    } else {
                        values[j][g].clone()
                    };
                    (s.alias.clone(), v)
                });
                let grp = plan
                    .group_by
                    .iter()
                    .enumerate()
                    .map(|(i, gp)| (gp.alias.clone(), group_value(i)));
                item(sels.chain(grp).collect::<Vec<_>>())
            });
            within(items, present.len(), room.bytes)?
        }
    };
    Ok(QueryResult {
        response_items: items,
    })
}

#[cfg(test)]
mod bound_tests {
    use super::*;
    use crate::eval::TeamData;
    use crate::load::ingest;
    use crate::plan::Limits;
    use crate::schema::Source;
    use crate::schema::records;
    use crate::wire::IngestRequest;
    use serde_json::json;

    /// A team with `n` autocomplete records in `n` distinct hours, two languages.
    fn team(n: i64) -> TeamData {
        let records: Vec<_> = (0..n)
            .map(|i| {
                json!({"api_key": "k", "language": if i % 2 == 0 { "GO" } else { "RUST" },
                       "ide": "vscode", "version": "1", "num_acceptances": i,
                       "num_lines_accepted": 0, "num_bytes_accepted": 0,
                       "hour": Timestamp(i * 3_600_000_000 * 7).to_rfc3339()})
            })
            .collect();
        let req = IngestRequest {
            service_key: None,
            kind: Some("autocomplete".into()),
            records,
        };
        let mut t = TeamData::new();
        let batch = ingest(&req, &Limits::default()).unwrap();
        let batch = t.prepare(&batch, Timestamp(0)).unwrap();
        t.apply(&batch);
        t
    }

    /// The keys of every row by `fields` of the autocomplete source, bounded by `bound`.
    fn keys(t: &TeamData, fields: &[&str], bound: u64) -> Keys {
        let table = t.table(&records::AUTOCOMPLETE).unwrap();
        let email_of_key = HashMap::new();
        let ctx = Ctx {
            table,
            email_of_key: &email_of_key,
            allowed_keys: None,
            range: TimeRange::default(),
        };
        let sel = select(table.len(), Vec::new());
        let spec = Source::UserData.spec();
        let mut keys = Keys::bounded(sel.len(), DENSE_MAX, bound);
        for f in fields {
            let f = spec.resolve(f).unwrap();
            keys.push(Access::of(table, f), &sel, Some(f.field().ty), &ctx);
        }
        keys
    }

    #[test]
    fn keys_stop_as_soon_as_the_groups_pass_the_bound() {
        let t = team(300);
        // 300 distinct hours: a bound of 299 is passed by the first field, which a second
        // field could only split further; the codes are not finished.
        let k = keys(&t, &["hour"], 299);
        assert!(k.over);
        let k = keys(&t, &["hour", "language"], 299);
        assert!(k.over);
        // At the bound exactly, every group is coded.
        let k = keys(&t, &["hour", "language"], 300);
        assert!(!k.over);
        let mut codes = k.codes.clone();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), 300);
        // Few groups of many rows: never over, whatever the fields.
        let k = keys(&t, &["language"], 2);
        assert!(!k.over);
        let k = keys(&t, &["language"], 1);
        assert!(
            !k.over,
            "two codes of a dense field are not counted until compacted"
        );
    }
}
