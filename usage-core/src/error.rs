//! Violations of request rules: a JSON path, a rule code and a message (contract section 2).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

/// The rule a request broke. Its wire identifier is [`Rule::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// Query rule 1: some selections aggregated, some not.
    MixedAggregation,
    /// Query rule 2: a `distinct_*` field in `aggregations`.
    DistinctInAggregations,
    /// Query rule 3: an alias used twice (default aliases included).
    DuplicateAlias,
    /// Query rule 5, a group-by on a metric or boolean, any group-by on PCW.
    InvalidAggregation,
    /// A field the data source does not have, or a request field the spec does not have.
    UnknownField,
    /// A `data_source` that is not one of the five sources.
    UnknownDataSource,
    /// A required field is absent (or empty).
    MissingField,
    /// A value that does not parse for its type, or a time range whose start is after its end.
    InvalidValue,
    /// An unknown enum identifier.
    UnknownEnumValue,
    /// An ordered operator on a boolean field.
    InvalidOperator,
    /// Shape 3: an unaggregated selection that is not a group-by field.
    UngroupedField,
    /// Both spellings of one field, `group_name` with `emails`, or two agent sources in one object.
    ConflictingFields,
    /// Not exactly one scope (`team_level`, `group_id`, `user_email`).
    Scope,
    /// Not exactly one action (`clear_add_on_credit_cap`, `set_add_on_credit_cap`).
    Action,
    /// A limit exceeded, or JSON nested too deeply.
    TooMany,
    /// The body is not JSON, or not a JSON object.
    MalformedJson,
}

impl Rule {
    /// Every rule, in declaration order.
    pub const ALL: &'static [Rule] = &[
        Rule::MixedAggregation,
        Rule::DistinctInAggregations,
        Rule::DuplicateAlias,
        Rule::InvalidAggregation,
        Rule::UnknownField,
        Rule::UnknownDataSource,
        Rule::MissingField,
        Rule::InvalidValue,
        Rule::UnknownEnumValue,
        Rule::InvalidOperator,
        Rule::UngroupedField,
        Rule::ConflictingFields,
        Rule::Scope,
        Rule::Action,
        Rule::TooMany,
        Rule::MalformedJson,
    ];

    /// The rule's wire identifier, e.g. `mixed_aggregation`.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::MixedAggregation => "mixed_aggregation",
            Rule::DistinctInAggregations => "distinct_in_aggregations",
            Rule::DuplicateAlias => "duplicate_alias",
            Rule::InvalidAggregation => "invalid_aggregation",
            Rule::UnknownField => "unknown_field",
            Rule::UnknownDataSource => "unknown_data_source",
            Rule::MissingField => "missing_field",
            Rule::InvalidValue => "invalid_value",
            Rule::UnknownEnumValue => "unknown_enum_value",
            Rule::InvalidOperator => "invalid_operator",
            Rule::UngroupedField => "ungrouped_field",
            Rule::ConflictingFields => "conflicting_fields",
            Rule::Scope => "scope",
            Rule::Action => "action",
            Rule::TooMany => "too_many",
            Rule::MalformedJson => "malformed_json",
        }
    }

    /// The rule with this wire identifier.
    pub fn from_identifier(s: &str) -> Option<Rule> {
        Rule::ALL.iter().copied().find(|r| r.as_str() == s)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// One segment of a [`JsonPath`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Segment {
    /// An object key and its rank in the document order of its object.
    Key(Cow<'static, str>, u32),
    /// An array index.
    Index(usize),
}

/// A path into a request document, such as `query_requests[0].selections[2].field`.
///
/// Besides its text, a path knows each key's place in its object's field order, so that
/// violations sort in the order of the request document (contract section 2): depth
/// first, array elements in index order, an object's fields in the spec's order.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct JsonPath {
    segments: Vec<Segment>,
}

/// Rank given to keys that are not in the spec: after every known field.
pub(crate) const UNKNOWN_KEY_RANK: u32 = 1 << 16;

impl JsonPath {
    /// The whole body (`""`).
    pub fn root() -> JsonPath {
        JsonPath::default()
    }

    /// This path extended by an object key with its rank in the object's field order.
    pub fn key(&self, name: impl Into<Cow<'static, str>>, rank: u32) -> JsonPath {
        let mut p = self.clone();
        p.segments.push(Segment::Key(name.into(), rank));
        p
    }

    /// This path extended by an array index.
    pub fn index(&self, i: usize) -> JsonPath {
        let mut p = self.clone();
        p.segments.push(Segment::Index(i));
        p
    }

    /// Whether this is the whole body.
    pub fn is_root(&self) -> bool {
        self.segments.is_empty()
    }
}

impl Ord for JsonPath {
    fn cmp(&self, other: &Self) -> Ordering {
        for (a, b) in self.segments.iter().zip(&other.segments) {
            let o = match (a, b) {
                (Segment::Key(x, rx), Segment::Key(y, ry)) => rx.cmp(ry).then_with(|| x.cmp(y)),
                (Segment::Index(x), Segment::Index(y)) => x.cmp(y),
                (Segment::Key(..), Segment::Index(_)) => Ordering::Less,
                (Segment::Index(_), Segment::Key(..)) => Ordering::Greater,
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        self.segments.len().cmp(&other.segments.len())
    }
}

impl PartialOrd for JsonPath {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, s) in self.segments.iter().enumerate() {
            match s {
                Segment::Key(k, _) if i == 0 => f.write_str(k)?,
                Segment::Key(k, _) => write!(f, ".{k}")?,
                Segment::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// One violation of a request rule: where, which rule, and a message that names the field,
/// the value and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {rule}: {message}", if path.is_root() { "(body)".to_string() } else { path.to_string() })]
pub struct Violation {
    path: JsonPath,
    rule: Rule,
    message: String,
}

impl Violation {
    /// A violation of `rule` at `path`.
    pub fn new(path: JsonPath, rule: Rule, message: impl Into<String>) -> Violation {
        Violation {
            path,
            rule,
            message: message.into(),
        }
    }

    /// The JSON path into the request, e.g. `query_requests[0].selections[2].aggregation_function`;
    /// `""` is the whole body.
    pub fn path(&self) -> String {
        self.path.to_string()
    }

    /// The structured path (orders violations in document order).
    pub fn json_path(&self) -> &JsonPath {
        &self.path
    }

    /// The rule that was broken.
    pub fn rule(&self) -> Rule {
        self.rule
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Sorts violations in the order of the request document; violations at one path keep the
/// order they were found in.
pub fn sort_violations(v: &mut [Violation]) {
    v.sort_by(|a, b| a.path.cmp(&b.path));
}

/// Edit distance, for "did you mean" suggestions.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The closest candidate to `given`, if one is close enough to be a likely typo.
pub(crate) fn did_you_mean<'a>(
    given: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let given_l = given.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (edit_distance(&given_l, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4) && *d < c.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// ` (did you mean `x`?)` or nothing.
pub(crate) fn suggestion<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    match did_you_mean(given, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_display() {
        let p = JsonPath::root()
            .key("query_requests", 4)
            .index(0)
            .key("selections", 1)
            .index(2)
            .key("field", 0);
        assert_eq!(p.to_string(), "query_requests[0].selections[2].field");
        assert_eq!(JsonPath::root().to_string(), "");
    }

    #[test]
    fn document_order() {
        let q = JsonPath::root().key("query_requests", 4).index(0);
        let sel = q.key("selections", 1);
        let fil = q.key("filters", 2);
        let mut v = vec![
            Violation::new(fil.index(0).key("name", 0), Rule::UnknownField, "b"),
            Violation::new(sel.index(1).key("field", 0), Rule::UnknownField, "a2"),
            Violation::new(sel.clone(), Rule::MixedAggregation, "a0"),
            Violation::new(
                sel.index(0).key("zzz", UNKNOWN_KEY_RANK),
                Rule::UnknownField,
                "a1",
            ),
        ];
        sort_violations(&mut v);
        let m: Vec<_> = v.iter().map(|v| v.message()).collect();
        assert_eq!(m, ["a0", "a1", "a2", "b"]);
    }

    #[test]
    fn suggestions() {
        assert_eq!(
            did_you_mean("agregations", ["aggregations", "selections"]),
            Some("aggregations")
        );
        assert_eq!(did_you_mean("xyz", ["aggregations", "selections"]), None);
        assert_eq!(
            did_you_mean("dataSorce", ["data_source", "dataSource"]),
            Some("dataSource")
        );
    }

    #[test]
    fn display_is_readable() {
        let v = Violation::new(
            JsonPath::root().key("emails", 0),
            Rule::ConflictingFields,
            "no",
        );
        assert_eq!(v.to_string(), "emails: conflicting_fields: no");
        let v = Violation::new(JsonPath::root(), Rule::MalformedJson, "bad");
        assert_eq!(v.to_string(), "(body): malformed_json: bad");
    }
}
