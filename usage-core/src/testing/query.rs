//! Valid query requests generated from the schema tables.
//!
//! Generation interprets a stream of random choices ([`Choices`]): proptest shrinks the
//! stream towards zeros, which means towards the first option of every choice, so a
//! failing case shrinks to a small query.

use std::collections::BTreeMap;

use proptest::prelude::*;

use crate::ident::{Ident, WireEnum};
use crate::schema::{Agg, Expr, Field, FilterOp, Role, Source, ValueType};
use crate::time::{Date, MICROS_PER_HOUR, MICROS_PER_SECOND, Timestamp};
use crate::wire::{Aggregation, AnalyticsRequest, Filter, QueryRequest, Selection};

/// A stream of random choices; exhausted streams choose 0.
#[derive(Debug, Clone)]
pub struct Choices {
    values: Vec<u32>,
    next: usize,
}

impl Choices {
    /// A stream over these values.
    pub fn new(values: Vec<u32>) -> Choices {
        Choices { values, next: 0 }
    }

    /// A number in `0..n` (0 when `n` is 0 or the stream is exhausted).
    pub fn pick(&mut self, n: usize) -> usize {
        let v = self.values.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        if n == 0 { 0 } else { v as usize % n }
    }

    /// One element of a non-empty slice.
    pub fn one<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.pick(items.len())]
    }

    /// True with probability about `1/n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.pick(n) == n.saturating_sub(1) && n > 0
    }
}

/// Values that generated filters (and generated datasets) draw from.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    /// Candidate values of text, version and `api_key` columns, by record column name;
    /// columns not listed use `other`.
    pub text: BTreeMap<&'static str, Vec<String>>,
    /// Values of text columns not in `text`.
    pub other: Vec<String>,
    /// The first day of data.
    pub first_day: Date,
    /// How many days data spans.
    pub days: i32,
    /// Small integers for metric filters.
    pub ints: Vec<i64>,
    /// Offsets (minutes) for `date UTC±H[:MM]` fields.
    pub offsets: Vec<i32>,
    /// IANA zones for `date <zone>` fields.
    pub zones: Vec<&'static str>,
}

impl Default for Pool {
    fn default() -> Pool {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let mut text = BTreeMap::new();
        text.insert("api_key", s(&["k0", "k1", "k2", "k3", "orphan"]));
        text.insert("language", s(&["PYTHON", "GO", "KOTLIN", "rust"]));
        text.insert("ide", s(&["vscode", "jetbrains", "editor", "plugin"]));
        text.insert("ide_type", s(&["editor", "plugin"]));
        text.insert(
            "version",
            s(&[
                "1.9", "1.10", "1.9.12", "1.10.0", "1.10.x", "1.2", "1.02", "1.2.0",
            ]),
        );
        text.insert("model_id", s(&["m-a", "m-b", "M-c"]));
        text.insert("model", s(&["gpt", "claude", "Sonnet"]));
        text.insert("agent_id", s(&["c1", "c2", "c3"]));
        Pool {
            text,
            other: s(&["x", "y", ""]),
            // The days around the end of daylight saving time in Europe and the Levant
            // (26 October 2025): local dates in those zones cross it.
            first_day: Date::parse("2025-10-24").expect("date"),
            days: 4,
            ints: vec![0, 1, 2, 3, 5, 10],
            offsets: vec![0, -480, 330, 840, -720, 60, -90],
            zones: vec![
                // Fall back on 26 October 2025 (Dublin's winter time is its negative DST;
                // Beirut's change is at midnight, Jerusalem's the Sunday's 02:00).
                "Europe/Berlin",
                "Europe/Dublin",
                "Asia/Beirut",
                "Asia/Jerusalem",
                // No change in these days, at unusual offsets.
                "America/New_York",
                "Asia/Kathmandu",
                "Pacific/Chatham",
                "Australia/Lord_Howe",
                "America/St_Johns",
                "Pacific/Kiritimati",
                "Etc/GMT+12",
            ],
        }
    }
}

impl Pool {
    /// Candidate values of a text column.
    pub fn texts(&self, column: &str) -> &[String] {
        self.text.get(column).map_or(&self.other, Vec::as_slice)
    }

    /// A day within the data's span, one day either side included.
    pub fn day(&self, c: &mut Choices) -> Date {
        Date(self.first_day.0 - 1 + c.pick((self.days + 2) as usize) as i32)
    }

    /// An instant within the data's span: an hour start, sometimes with minutes, seconds
    /// and a fraction.
    pub fn instant(&self, c: &mut Choices, hour_start: bool) -> Timestamp {
        let base = self.day(c).start().0 + c.pick(24) as i64 * MICROS_PER_HOUR;
        if hour_start || c.pick(2) == 0 {
            return Timestamp(base);
        }
        let secs = c.pick(3600) as i64 * MICROS_PER_SECOND;
        let frac = [0, 250_000, 1, 999_999][c.pick(4)];
        Timestamp(base + secs + frac)
    }
}

/// The name a field is written with: its table name, or a `date UTC±H[:MM]` or
/// `date <IANA zone>` spelling.
fn written(field: &Field, pool: &Pool, c: &mut Choices) -> String {
    if !field.is_local_date() {
        return field.name.to_string();
    }
    if !pool.zones.is_empty() && c.pick(2) == 0 {
        let zone = *c.one(&pool.zones);
        // Zone names are taken in any case.
        return match c.pick(4) {
            0 => format!("date {}", zone.to_lowercase()),
            _ => format!("date {zone}"),
        };
    }
    let m = *c.one(&pool.offsets);
    let sign = if m < 0 { '-' } else { '+' };
    let (h, mm) = (m.abs() / 60, m.abs() % 60);
    match (mm, c.pick(2)) {
        (0, 0) => format!("date UTC{sign}{h}"),
        (0, _) => format!("date UTC{sign}{h:02}:00"),
        (_, 0) => format!("date UTC{sign}{h}:{mm:02}"),
        _ => format!("date UTC{sign}{h:02}:{mm:02}"),
    }
}

fn column_of(field: &Field) -> &'static str {
    match field.expr {
        Expr::Column(c) => c,
        _ => "",
    }
}

/// A valid filter value of a field, in one of the forms the contract accepts.
fn filter_value(field: &Field, pool: &Pool, c: &mut Choices) -> String {
    match field.ty {
        ValueType::Date => pool.day(c).to_iso(),
        ValueType::Hour | ValueType::Timestamp => {
            let hour_start = field.ty == ValueType::Hour && c.pick(3) != 0;
            let t = pool.instant(c, hour_start);
            match c.pick(4) {
                0 => t.to_rfc3339(),
                1 => t.to_go(),
                2 => t.date().to_iso(),
                _ => {
                    // RFC 3339 at another offset.
                    let shifted = t.plus_minutes(330);
                    let s = shifted.to_rfc3339();
                    format!("{}+05:30", s.trim_end_matches('Z'))
                }
            }
        }
        ValueType::Text | ValueType::Version => c.one(pool.texts(column_of(field))).clone(),
        ValueType::Enum(ids) => c.one(ids).to_string(),
        ValueType::Int => c.one(&pool.ints).to_string(),
        ValueType::Bool => ["true", "false"][c.pick(2)].to_string(),
        ValueType::Ratio | ValueType::Json => String::new(),
    }
}

fn filters(source: Source, pool: &Pool, c: &mut Choices) -> Vec<Filter> {
    let spec = source.spec();
    let fields: Vec<&Field> = spec.fields.iter().filter(|f| f.filter).collect();
    let n = [0, 0, 1, 1, 2, 3, 4][c.pick(7)];
    let mut out = Vec::new();
    for _ in 0..n {
        let f = *c.one(&fields);
        let op = if f.ty == ValueType::Bool {
            *c.one(&[FilterOp::Equal, FilterOp::NotEqual])
        } else {
            *c.one(FilterOp::ALL)
        };
        let name = written(f, pool, c);
        // Several EQUAL filters on one field: an IN list.
        let repeats = if op == FilterOp::Equal && c.one_in(3) {
            2 + c.pick(2)
        } else {
            1
        };
        for _ in 0..repeats {
            out.push(Filter {
                name: Some(name.clone()),
                filter: Some(Ident::Known(op)),
                value: Some(filter_value(f, pool, c)),
            });
        }
    }
    out
}

/// Gives every selection and aggregation a unique alias: default ones where they are
/// unique, else (or at random) explicit `a{i}`.
fn unique_aliases(sels: &mut [Selection], groups: &mut [Aggregation], c: &mut Choices) {
    let mut seen = std::collections::HashSet::new();
    let mut n = 0;
    let mut fresh = |seen: &mut std::collections::HashSet<String>| loop {
        n += 1;
        let a = format!("a{n}");
        if seen.insert(a.clone()) {
            return a;
        }
    };
    for s in sels.iter_mut() {
        let agg = s
            .aggregation_function
            .as_ref()
            .and_then(Ident::known)
            .unwrap_or(Agg::Unspecified);
        let default =
            crate::validate::default_alias_of(s.field.as_deref().unwrap_or_default(), agg);
        if c.one_in(4) || seen.contains(&default) {
            s.name = Some(fresh(&mut seen));
        } else {
            seen.insert(default);
        }
    }
    for g in groups.iter_mut() {
        let name = g
            .field
            .as_deref()
            .unwrap_or_default()
            .to_lowercase()
            .replace(' ', "_");
        g.name = Some(if seen.insert(name.clone()) {
            name
        } else {
            fresh(&mut seen)
        });
    }
}

/// Builds one valid query request of `source` from a choice stream.
pub fn build_query(source: Source, pool: &Pool, c: &mut Choices) -> QueryRequest {
    let spec = source.spec();
    let selectable: Vec<&Field> = spec.fields.iter().filter(|f| f.select).collect();
    let groupable: Vec<&Field> = spec.fields.iter().filter(|f| f.group).collect();
    let agg_of = |f: &Field, c: &mut Choices| -> Agg {
        if f.role == Role::Distinct {
            *c.one(&[Agg::Unspecified, Agg::Count])
        } else {
            let valid: Vec<Agg> = f
                .aggs
                .iter()
                .copied()
                .filter(|a| *a != Agg::Unspecified)
                .collect();
            *c.one(&valid)
        }
    };
    let mut q = QueryRequest {
        data_source: Some(Ident::Known(source)),
        ..Default::default()
    };
    q.filters = filters(source, pool, c);
    if source == Source::PcwData {
        let n = 1 + c.pick(selectable.len());
        for _ in 0..n {
            let f = c.one(&selectable);
            q.selections.push(Selection {
                field: Some(f.name.to_string()),
                name: None,
                aggregation_function: None,
            });
        }
    } else {
        // Shapes 1-4.
        let shape = c.pick(4);
        let n_groups = if matches!(shape, 1 | 2) {
            1 + c.pick(3)
        } else {
            0
        };
        for _ in 0..n_groups {
            let f = c.one(&groupable);
            q.aggregations.push(Aggregation {
                field: Some(written(f, pool, c)),
                name: None,
            });
        }
        match shape {
            0 | 1 => {
                let aggregatable: Vec<&Field> = selectable
                    .iter()
                    .copied()
                    .filter(|f| {
                        f.role == Role::Distinct || f.aggs.iter().any(|a| *a != Agg::Unspecified)
                    })
                    .collect();
                for _ in 0..1 + c.pick(4) {
                    let f = c.one(&aggregatable);
                    let agg = agg_of(f, c);
                    let explicit = agg != Agg::Unspecified || c.one_in(2);
                    q.selections.push(Selection {
                        field: Some(written(f, pool, c)),
                        name: None,
                        aggregation_function: explicit.then_some(Ident::Known(agg)),
                    });
                }
            }
            2 => {
                // Shape 3: group values only; every selection is a group-by field.
                for _ in 0..1 + c.pick(3) {
                    let g = c.pick(q.aggregations.len());
                    let field = q.aggregations[g].field.clone();
                    q.selections.push(Selection {
                        field,
                        name: None,
                        aggregation_function: None,
                    });
                }
            }
            _ => {
                let raw: Vec<&Field> = selectable
                    .iter()
                    .copied()
                    .filter(|f| f.role != Role::Distinct)
                    .collect();
                for _ in 0..1 + c.pick(5) {
                    let f = c.one(&raw);
                    let explicit = c.one_in(3);
                    q.selections.push(Selection {
                        field: Some(written(f, pool, c)),
                        name: None,
                        aggregation_function: explicit.then_some(Ident::Known(Agg::Unspecified)),
                    });
                }
            }
        }
    }
    unique_aliases(&mut q.selections, &mut q.aggregations, c);
    q
}

/// Valid query requests of `source` for every shape, drawn from the schema table.
pub fn arb_query_request(source: Source, pool: Pool) -> impl Strategy<Value = QueryRequest> {
    proptest::collection::vec(any::<u32>(), 96)
        .prop_map(move |v| build_query(source, &pool, &mut Choices::new(v)))
}

/// Valid `Analytics` requests: 1-3 queries of any sources, sometimes a PCW range.
pub fn arb_analytics_request(pool: Pool) -> impl Strategy<Value = AnalyticsRequest> {
    proptest::collection::vec(any::<u32>(), 320).prop_map(move |v| {
        let mut c = Choices::new(v);
        let n = 1 + c.pick(3);
        let mut req = AnalyticsRequest::default();
        for _ in 0..n {
            let source = *c.one(Source::ALL);
            req.query_requests.push(build_query(source, &pool, &mut c));
        }
        if c.one_in(3) {
            let a = pool.instant(&mut c, true);
            let b = pool.instant(&mut c, true);
            let (s, e) = (a.min(b), a.max(b));
            req.start_timestamp = Some(s.to_rfc3339());
            req.end_timestamp = Some(e.to_rfc3339());
        }
        req
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Limits;

    /// The differential tests see every field of every source in each place it may take:
    /// selected in raw rows (metrics, booleans and the agent source's `metadata` included),
    /// filtered on and grouped by. The lists come from the schema tables.
    #[test]
    fn generated_requests_cover_every_field_in_every_place() {
        use proptest::strategy::ValueTree;
        use std::collections::HashSet;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = arb_analytics_request(Pool::default());
        let (mut raw, mut filtered, mut grouped) = (HashSet::new(), HashSet::new(), HashSet::new());
        for _ in 0..3000 {
            let req = strategy.new_tree(&mut runner).expect("a request").current();
            for q in &req.query_requests {
                let source = q
                    .data_source
                    .as_ref()
                    .and_then(Ident::known)
                    .expect("a source");
                let resolve = |name: &Option<String>| {
                    let name = name.as_deref().unwrap_or_default();
                    source.spec().resolve(name).expect("a field").field()
                };
                let field = |name: &Option<String>| (source, resolve(name).name);
                // Shape 4: no group-by, no aggregated selection (`distinct_*` counts as one).
                let is_raw = source != Source::PcwData
                    && q.aggregations.is_empty()
                    && q.selections.iter().all(|s| {
                        let agg = s.aggregation_function.as_ref().and_then(Ident::known);
                        agg.unwrap_or(Agg::Unspecified) == Agg::Unspecified
                            && resolve(&s.field).role != Role::Distinct
                    });
                if is_raw {
                    raw.extend(q.selections.iter().map(|s| field(&s.field)));
                }
                filtered.extend(q.filters.iter().map(|f| field(&f.name)));
                grouped.extend(q.aggregations.iter().map(|g| field(&g.field)));
            }
        }
        for spec in crate::schema::SOURCES {
            for f in spec.fields {
                let key = (spec.source, f.name);
                if spec.groupable && f.select && f.role != Role::Distinct {
                    assert!(raw.contains(&key), "raw selection of {key:?}");
                }
                assert!(!f.filter || filtered.contains(&key), "filter on {key:?}");
                assert!(!f.group || grouped.contains(&key), "group-by on {key:?}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn generated_requests_are_valid(req in arb_analytics_request(Pool::default())) {
            let r = crate::validate::analytics(&req, &Limits::default());
            prop_assert!(r.is_ok(), "{:?}\n{}", r.err(), serde_json::to_string(&req).unwrap());
        }
    }
}
