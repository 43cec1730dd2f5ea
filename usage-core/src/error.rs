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

/// The most violations a request reports (contract section 11, Error size): a 400 lists at
/// most this many `details`, the first ones in document order, and its message says how
/// many there were in all.
pub const MAX_DETAILS: usize = 100;

/// The violations of one request, bounded: at most a limit of them are kept (by default
/// [`MAX_DETAILS`]), the first ones in document order, and all are counted.
///
/// Violations may be pushed in any order. The kept ones are always in document order
/// (the order [`sort_violations`] gives: violations at one path keep the order they were
/// pushed in), and they are exactly the first ones of that order among all pushed, so
/// memory for a request is bounded by the limit, not by the number of its errors.
///
/// It derefs to the slice of kept violations: `len()` and indexing see only those;
/// [`Violations::total`] counts every violation pushed.
///
/// ```
/// use usage_core::error::Violations;
/// use usage_core::{JsonPath, Rule, Violation};
///
/// let mut v = Violations::with_limit(2);
/// for i in (0..5).rev() {
///     v.push(Violation::new(JsonPath::root().index(i), Rule::InvalidValue, format!("bad {i}")));
/// }
/// assert_eq!(v.total(), 5);
/// let kept: Vec<_> = v.iter().map(|v| v.message()).collect();
/// assert_eq!(kept, ["bad 0", "bad 1"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violations {
    kept: Vec<Violation>,
    total: usize,
    limit: usize,
}

impl Default for Violations {
    fn default() -> Violations {
        Violations::new()
    }
}

impl Violations {
    /// No violations yet; keeps at most [`MAX_DETAILS`].
    pub fn new() -> Violations {
        Violations::with_limit(MAX_DETAILS)
    }

    /// No violations yet; keeps at most `limit` (every violation is still counted).
    pub fn with_limit(limit: usize) -> Violations {
        Violations {
            kept: Vec::new(),
            total: 0,
            limit,
        }
    }

    /// Whether a violation at `path` pushed now would be kept. A caller may skip building
    /// the message of one that would not, as long as it then calls [`Violations::count`].
    pub fn would_keep(&self, path: &JsonPath) -> bool {
        // A later violation at a path equal to the last kept one comes after it.
        self.kept.len() < self.limit || self.kept.last().is_some_and(|last| *path < last.path)
    }

    /// Counts one violation without keeping it: for one that [`Violations::would_keep`]
    /// said would be dropped.
    pub fn count(&mut self) {
        self.total += 1;
    }

    /// Adds a violation: counted, and kept if it is among the first `limit` in document
    /// order so far.
    pub fn push(&mut self, v: Violation) {
        self.total += 1;
        if !self.would_keep(&v.path) {
            return;
        }
        // After every kept violation at a path up to its own: a stable sort's place.
        let at = self.kept.partition_point(|k| k.path <= v.path);
        if self.kept.len() == self.limit {
            self.kept.pop();
        }
        self.kept.insert(at, v);
    }

    /// Adds every violation of `other` (counted in full: its total adds to this one's).
    pub fn append(&mut self, other: Violations) {
        let dropped = other.total - other.kept.len();
        for v in other.kept {
            self.push(v);
        }
        self.total += dropped;
    }

    /// How many violations were pushed, kept or not.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Whether no violation was pushed.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The most this keeps.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The kept violations, in document order.
    pub fn as_slice(&self) -> &[Violation] {
        &self.kept
    }

    /// The kept violations, in document order.
    pub fn into_vec(self) -> Vec<Violation> {
        self.kept
    }
}

impl std::ops::Deref for Violations {
    type Target = [Violation];

    fn deref(&self) -> &[Violation] {
        &self.kept
    }
}

impl Extend<Violation> for Violations {
    fn extend<I: IntoIterator<Item = Violation>>(&mut self, iter: I) {
        for v in iter {
            self.push(v);
        }
    }
}

impl From<Violation> for Violations {
    fn from(v: Violation) -> Violations {
        let mut out = Violations::new();
        out.push(v);
        out
    }
}

impl From<Vec<Violation>> for Violations {
    /// The violations in document order, the first [`MAX_DETAILS`] kept, all counted.
    fn from(v: Vec<Violation>) -> Violations {
        let mut out = Violations::new();
        out.extend(v);
        out
    }
}

impl From<Violations> for Vec<Violation> {
    fn from(v: Violations) -> Vec<Violation> {
        v.kept
    }
}

impl IntoIterator for Violations {
    type Item = Violation;
    type IntoIter = std::vec::IntoIter<Violation>;

    fn into_iter(self) -> Self::IntoIter {
        self.kept.into_iter()
    }
}

impl<'a> IntoIterator for &'a Violations {
    type Item = &'a Violation;
    type IntoIter = std::slice::Iter<'a, Violation>;

    fn into_iter(self) -> Self::IntoIter {
        self.kept.iter()
    }
}

/// The most bytes of a value that an error message repeats (contract section 11).
pub const ECHO_BYTES: usize = 256;

/// The longest name (in bytes) that gets a "did you mean" (contract section 11): the
/// comparison costs the product of the lengths, so a longer name is no typo worth it.
pub const SUGGEST_BYTES: usize = 64;

/// A value as an error message repeats it: whole when it is at most [`ECHO_BYTES`] bytes,
/// else its first bytes (up to a character boundary) marked `…`.
///
/// ```
/// use usage_core::error::echo;
/// assert_eq!(echo("PYTHON"), "PYTHON");
/// let long = "é".repeat(200);
/// assert_eq!(echo(&long), format!("{}…", "é".repeat(128)));
/// ```
pub fn echo(s: &str) -> std::borrow::Cow<'_, str> {
    if s.len() <= ECHO_BYTES {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut end = ECHO_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &s[..end]))
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
    if given.len() > SUGGEST_BYTES {
        return None;
    }
    let given_l = given.to_ascii_lowercase();
    let given_chars = given.chars().count();
    candidates
        .into_iter()
        // The distance is at least the difference of the lengths: skip what cannot pass.
        .filter(|c| given_chars.abs_diff(c.chars().count()) <= 2.max(c.len() / 4))
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
    fn violations_keep_the_first_in_document_order_whatever_the_order_pushed() {
        // Paths with ties (several violations at one path keep the order pushed).
        let mut seed = 7u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for round in 0..200 {
            let n = next(300) as usize;
            let pushed: Vec<Violation> = (0..n)
                .map(|i| {
                    let q = JsonPath::root()
                        .key("query_requests", 4)
                        .index(next(3) as usize);
                    let path = match next(3) {
                        0 => q.key("selections", 1).index(next(40) as usize),
                        1 => q.key("filters", 2),
                        _ => q,
                    };
                    Violation::new(path, Rule::InvalidValue, format!("{i}"))
                })
                .collect();
            let mut sorted = pushed.clone();
            sort_violations(&mut sorted);
            for limit in [0, 1, 5, 100] {
                let mut v = Violations::with_limit(limit);
                for x in pushed.iter().cloned() {
                    v.push(x);
                }
                assert_eq!(v.total(), n, "round {round}");
                assert_eq!(v.as_slice(), &sorted[..n.min(limit)], "round {round}");
                // Two halves merged keep the same.
                let (a, b) = pushed.split_at(n / 2);
                let (mut va, mut vb) =
                    (Violations::with_limit(limit), Violations::with_limit(limit));
                va.extend(a.iter().cloned());
                vb.extend(b.iter().cloned());
                va.append(vb);
                assert_eq!(va, v, "round {round}");
            }
        }
        let v = Violations::from(vec![
            Violation::new(JsonPath::root(), Rule::Scope, "x");
            250
        ]);
        assert_eq!((v.total(), v.len(), v.limit()), (250, MAX_DETAILS, 100));
        assert!(!v.is_empty());
        assert!(Violations::new().is_empty());
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
        // Names of at most SUGGEST_BYTES get one; one byte more gets none.
        let long = "a".repeat(SUGGEST_BYTES);
        let typo = format!("{}b", &long[1..]);
        assert_eq!(did_you_mean(&typo, [long.as_str()]), Some(long.as_str()));
        let longer = format!("{long}c");
        let typo = format!("{}b", &longer[1..]);
        assert_eq!(typo.len(), SUGGEST_BYTES + 1);
        assert_eq!(did_you_mean(&typo, [longer.as_str()]), None);
        // The length difference alone rules a candidate out, in characters.
        assert_eq!(did_you_mean("éée", ["eee"]), Some("eee"));
        assert_eq!(did_you_mean("ab", ["abcdef"]), None);
    }

    #[test]
    fn echoes_are_cut_at_256_bytes_on_a_character() {
        assert_eq!(echo(""), "");
        let edge = "x".repeat(ECHO_BYTES);
        assert_eq!(echo(&edge), edge.as_str());
        let over = format!("{edge}y");
        assert_eq!(echo(&over), format!("{edge}…"));
        // A 4-byte character across the cut is left out whole.
        let s = format!("{}{}", "x".repeat(ECHO_BYTES - 2), "𝄞".repeat(3));
        assert_eq!(echo(&s), format!("{}…", "x".repeat(ECHO_BYTES - 2)));
        assert!(echo(&"€".repeat(10_000)).len() <= ECHO_BYTES + '…'.len_utf8());
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
