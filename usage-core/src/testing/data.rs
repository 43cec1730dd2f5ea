//! Random datasets of every record kind, built from the record tables
//! ([`crate::schema::records`]) and the shared [`Pool`], so that generated queries' filters
//! hit their values.
//!
//! A [`Dataset`] is a list of batches of JSON records in load order, the form `Ingest` and
//! `import` take, so any store can load it: groups (one of them without members), users
//! (each with its own api_key from the pool; the pool's last api_key is never a user's, so
//! some records always belong to no user; some users name a group that is never loaded),
//! then every kind of usage record. Values come from the kind's field table: text from
//! the pool by field name, enums from their identifiers, times across every hour of the
//! pool's days (so local dates cross midnight) with offsets and fractions of seconds
//! (beyond microseconds too), counts that are often 0 and sometimes near `i64::MAX`.
//! Kinds are sometimes empty or have one record; records often repeat an earlier
//! record's identity (within a batch and across batches), so that later ones replace it,
//! or its time and `api_key` and maybe more, so that raw rows tie on their first sort keys.
//!
//! ```
//! use proptest::strategy::{Strategy, ValueTree};
//! use proptest::test_runner::TestRunner;
//! use usage_core::testing::{Pool, data::arb_dataset};
//!
//! let mut runner = TestRunner::deterministic();
//! let data = arb_dataset(Pool::default()).new_tree(&mut runner).unwrap().current();
//! for batch in data.parsed() {
//!     assert!(batch.records.len() <= 40);
//! }
//! ```

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::query::{Choices, Pool};
use crate::error::JsonPath;
use crate::load::{Batch, parse_record};
use crate::schema::records::{self, RecordField, RecordKind, RecordType};
use crate::time::Timestamp;

/// Records of several kinds, as batches of JSON objects in load order.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// The batches: a kind and its records, loaded in this order.
    pub batches: Vec<(&'static RecordKind, Vec<Value>)>,
}

impl Dataset {
    /// The batches parsed as the loader parses them (event ids filled in, times cut to
    /// microseconds).
    ///
    /// # Panics
    /// When a generated record does not parse: a bug of the generator.
    pub fn parsed(&self) -> Vec<Batch> {
        self.batches
            .iter()
            .map(|(kind, recs)| Batch {
                kind,
                records: recs
                    .iter()
                    .map(|r| {
                        parse_record(kind, r, &JsonPath::root())
                            .unwrap_or_else(|e| panic!("generated {} record {r}: {e:?}", kind.name))
                    })
                    .collect(),
            })
            .collect()
    }

    fn texts(&self, kind: &RecordKind, field: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .batches
            .iter()
            .filter(|(k, _)| k.name == kind.name)
            .flat_map(|(_, recs)| recs.iter())
            .filter_map(|r| r.get(field)?.as_str().map(str::to_string))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The names of the groups loaded.
    pub fn group_names(&self) -> Vec<String> {
        self.texts(&records::GROUPS, "group_name")
    }

    /// The e-mails of the users loaded.
    pub fn emails(&self) -> Vec<String> {
        self.texts(&records::USERS, "email")
    }
}

/// Group ids and names; users may also name [`MISSING_GROUP`].
const GROUPS: [(&str, &str); 3] = [("g0", "eng"), ("g1", "ops"), ("g2", "empty")];
/// A group id users name but no `groups` record has.
pub const MISSING_GROUP: &str = "g-missing";

/// A count: mostly small (often 0), sometimes huge, so that sums need more than 64 bits;
/// sometimes written as a decimal string.
fn count(pool: &Pool, c: &mut Choices) -> Value {
    let n = match c.pick(12) {
        0 => *c.one(&[i64::MAX, i64::MAX / 2 + 1, 1 << 62]),
        1 | 2 => 0,
        _ => *c.one(&pool.ints),
    };
    if c.one_in(5) {
        Value::String(n.to_string())
    } else {
        json!(n)
    }
}

/// An instant as RFC 3339: in UTC or at +05:30, with a fraction beyond microseconds at
/// times (cut when loaded).
fn instant(t: Timestamp, c: &mut Choices) -> String {
    let utc = t.to_rfc3339();
    match c.pick(4) {
        0 => {
            let shifted = t.plus_minutes(330).to_rfc3339();
            format!("{}+05:30", shifted.trim_end_matches('Z'))
        }
        1 => {
            let base = utc.trim_end_matches('Z');
            if base.contains('.') {
                let digits = base.split('.').nth(1).map_or(0, str::len);
                format!("{base}{}7Z", "0".repeat(6 - digits))
            } else {
                format!("{base}.0000007Z")
            }
        }
        _ => utc,
    }
}

/// A value of a field of a usage record.
fn value(f: &RecordField, pool: &Pool, c: &mut Choices) -> Value {
    match f.ty {
        RecordType::Text => {
            let texts: Vec<&String> = pool
                .texts(f.name)
                .iter()
                .filter(|s| !s.is_empty())
                .collect();
            match texts.is_empty() {
                true => Value::String("x".into()),
                false => Value::String((*c.one(&texts)).clone()),
            }
        }
        RecordType::Enum(ids) => Value::String(c.one(ids).to_string()),
        RecordType::Hour => Value::String(instant(pool.instant(c, true), c)),
        RecordType::Timestamp => Value::String(instant(pool.instant(c, false), c)),
        RecordType::Day => Value::String(pool.day(c).to_iso()),
        RecordType::Count => count(pool, c),
        RecordType::Bool => Value::Bool(c.pick(2) == 0),
        RecordType::GroupIds => Value::Array(Vec::new()),
    }
}

/// What a new record takes from an earlier one.
#[derive(Clone, Copy, PartialEq)]
enum Like {
    /// Its whole identity: it replaces the earlier record.
    Identity,
    /// Its time and `api_key`: a new record that ties with it on the first sort keys.
    TimeAndKey,
    /// Its identity but the field at this position (mod their number) of those after the
    /// time and `api_key`: a new record that ties with it on all sort keys but one.
    AllBut(usize),
}

/// One record of a usage kind, maybe like an earlier record.
fn usage_record(
    kind: &RecordKind,
    pool: &Pool,
    c: &mut Choices,
    like: Option<(&Map<String, Value>, Like)>,
) -> Value {
    let mut m = Map::new();
    for f in kind.fields {
        if f.name == "id" {
            // Events: a hashed id, or one of a few explicit ids (which repeat).
            if c.pick(3) != 0 {
                m.insert("id".into(), json!(format!("e{}", c.pick(6))));
            }
            continue;
        }
        if !f.required && c.one_in(3) {
            continue;
        }
        m.insert(f.name.into(), value(f, pool, c));
    }
    if let Some((prev, how)) = like {
        let names: Vec<&str> = match how {
            Like::Identity => kind.identity.to_vec(),
            Like::TimeAndKey => kind.time.into_iter().chain(["api_key"]).collect(),
            Like::AllBut(i) => {
                let rest: Vec<&str> = kind
                    .identity
                    .iter()
                    .copied()
                    .filter(|n| *n != "api_key" && Some(*n) != kind.time)
                    .collect();
                let skip = rest.get(i % rest.len().max(1)).copied();
                kind.time
                    .into_iter()
                    .chain(["api_key"])
                    .chain(rest.iter().copied().filter(|n| Some(*n) != skip))
                    .collect()
            }
        };
        for name in names {
            match prev.get(name) {
                Some(v) => m.insert(name.to_string(), v.clone()),
                None => m.remove(name),
            };
        }
    }
    Value::Object(m)
}

/// Builds a dataset from a choice stream.
pub fn build_dataset(pool: &Pool, c: &mut Choices) -> Dataset {
    let mut batches: Vec<(&'static RecordKind, Vec<Value>)> = Vec::new();

    let n_groups = c.pick(GROUPS.len() + 1);
    if n_groups > 0 {
        let groups = GROUPS[..n_groups]
            .iter()
            .map(|(id, name)| json!({"group_id": id, "group_name": name}))
            .collect();
        batches.push((&records::GROUPS, groups));
    }

    // Users: each takes its own api_key, never the pool's last one.
    let keys = pool.texts("api_key");
    let mut users = Vec::new();
    for (i, key) in keys.iter().take(keys.len().saturating_sub(1)).enumerate() {
        if c.pick(4) == 0 {
            continue;
        }
        let mut groups: Vec<&str> = GROUPS[..2]
            .iter()
            .map(|g| g.0)
            .filter(|_| c.pick(2) == 0)
            .collect();
        if c.one_in(6) {
            groups.push(MISSING_GROUP);
        }
        // Some e-mails need escaping in the agent source's `metadata` or are not ASCII.
        let email = match c.pick(4) {
            0 => format!("u{i}\"q\\@x.test"),
            1 => format!("u{i}ë@x.test"),
            _ => format!("u{i}@x.test"),
        };
        let mut u = json!({"email": email, "name": format!("User {i}"), "api_key": key});
        if !groups.is_empty() {
            u["groups"] = json!(groups);
        }
        if c.one_in(3) {
            u["team_status"] = json!(c.one(crate::schema::TeamStatus::IDENTIFIERS));
        }
        if c.one_in(3) {
            u["disable_vendor"] = json!(c.pick(2) == 0);
        }
        if c.one_in(2) {
            u[records::SIGNUP_TIME] = json!(instant(pool.instant(c, false), c));
        }
        users.push(u);
    }
    if let Some(first) = users.first().cloned()
        && c.one_in(3)
    {
        // The same user again, renamed: it replaces the first.
        let mut again = first;
        again["name"] = json!("Renamed");
        users.push(again);
    }
    if !users.is_empty() {
        batches.push((&records::USERS, users));
    }

    for kind in records::USAGE {
        let n = [0, 1, 2, 4, 8, 15, 25, 40][c.pick(8)];
        let mut recs: Vec<Value> = Vec::with_capacity(n);
        for _ in 0..n {
            let how = match c.pick(9) {
                0 | 1 => Some(Like::Identity),
                2 => Some(Like::TimeAndKey),
                3 => Some(Like::AllBut(c.pick(4))),
                _ => None,
            };
            let like = how
                .filter(|_| !recs.is_empty())
                .and_then(|how| Some((recs[c.pick(recs.len())].as_object()?.clone(), how)));
            recs.push(usage_record(
                kind,
                pool,
                c,
                like.as_ref().map(|(m, how)| (m, *how)),
            ));
        }
        // One or two batches: replacements within a batch and across batches.
        let split = if recs.len() > 1 && c.one_in(2) {
            c.pick(recs.len())
        } else {
            recs.len()
        };
        let rest = recs.split_off(split);
        for part in [recs, rest] {
            if !part.is_empty() {
                batches.push((kind, part));
            }
        }
    }
    Dataset { batches }
}

/// Random datasets drawn from `pool`.
pub fn arb_dataset(pool: Pool) -> impl Strategy<Value = Dataset> {
    proptest::collection::vec(any::<u32>(), 2400)
        .prop_map(move |v| build_dataset(&pool, &mut Choices::new(v)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::FieldValue;
    use proptest::strategy::ValueTree;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn datasets_parse_and_cover_kinds(data in arb_dataset(Pool::default())) {
            for b in data.parsed() {
                prop_assert!(!b.records.is_empty());
            }
        }
    }

    #[test]
    fn datasets_have_the_edge_cases() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let (mut orphan, mut replaced, mut huge, mut empty_kind) = (false, false, false, false);
        let (mut flex_absent, mut flex_given, mut escaped_email) = (false, false, false);
        for _ in 0..200 {
            let data = arb_dataset(Pool::default())
                .new_tree(&mut runner)
                .expect("a dataset")
                .current();
            let parsed = data.parsed();
            for b in &parsed {
                if b.kind == &records::AUTOCOMPLETE {
                    orphan |= b.records.iter().any(|r| r.text("api_key") == "orphan");
                    let mut ids: Vec<String> = b.records.iter().map(|r| r.identity()).collect();
                    let n = ids.len();
                    ids.sort();
                    ids.dedup();
                    replaced |= ids.len() < n;
                    huge |= b
                        .records
                        .iter()
                        .any(|r| r.count("num_acceptances") > 1 << 61);
                }
            }
            empty_kind |= !parsed.iter().any(|b| b.kind == &records::CHAT);
            for b in &parsed {
                if b.kind == &records::AGENT_RUNS {
                    for r in &b.records {
                        let absent = r.get("flex_credits_used") == &FieldValue::Absent;
                        flex_absent |= absent;
                        flex_given |= !absent && r.count("flex_credits_used") > 0;
                    }
                }
                if b.kind == &records::USERS {
                    escaped_email |= b.records.iter().any(|r| r.text("email").contains('"'));
                }
            }
        }
        assert!(orphan && replaced && huge && empty_kind);
        assert!(flex_absent && flex_given && escaped_email);
    }
}
