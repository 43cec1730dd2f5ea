//! Reading a request body the way the contract orders its checks (section 2).
//!
//! [`decode`] parses the body, checks JSON kinds against the request's [`ObjectSpec`] and
//! normalizes it: both spellings of a field (snake_case, lowerCamelCase) map to the
//! snake_case name, values that mean "not given" are dropped (proto3 rules, section 1),
//! integers given as decimal strings become numbers. It separates two classes of problems:
//! *kind* errors (body not JSON, wrong JSON type of a known field, nesting too deep), which
//! answer before the key is checked, and *validation* violations (unknown fields, both
//! spellings, integers out of range), which answer after it, together with the
//! operation's own validation.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::{JsonPath, Rule, UNKNOWN_KEY_RANK, Violation, Violations, did_you_mean, echo};

/// The maximum JSON nesting of a request body, the body's object being level 1.
pub const MAX_DEPTH: usize = 64;

/// The JSON kind a field takes.
#[derive(Debug)]
pub enum Kind {
    /// A string; `""` means not given.
    Text,
    /// A string; `""` is a value.
    TextKeepEmpty,
    /// A boolean; `false` means not given.
    Bool,
    /// An integer (number or decimal string) with explicit presence: `0` is a value, `""`
    /// is invalid, only `null` or absence mean not given.
    Int,
    /// An array of elements of a kind; `[]` means not given.
    Array(&'static Kind),
    /// An object of a spec; `{}` means not given.
    Object(&'static ObjectSpec),
    /// An object of a spec whose presence is its meaning: `{}` is a value.
    Marker(&'static ObjectSpec),
    /// Any JSON object, checked later by its own rules (Ingest records).
    AnyObject,
}

/// One field of a request object.
#[derive(Debug)]
pub struct FieldSpec {
    /// The snake_case name.
    pub name: &'static str,
    /// Its JSON kind.
    pub kind: Kind,
}

/// The fields of a request object, in the spec's order (document order of violations).
#[derive(Debug)]
pub struct ObjectSpec {
    /// The fields.
    pub fields: &'static [FieldSpec],
}

impl ObjectSpec {
    /// The path of field `name` of the object at `at`.
    ///
    /// # Panics
    /// In debug builds, when `name` is not a field of this object (a bug).
    pub fn path(&self, at: &JsonPath, name: &'static str) -> JsonPath {
        let rank = self.fields.iter().position(|f| f.name == name);
        debug_assert!(rank.is_some(), "{name} is not in the spec");
        at.key(name, rank.map_or(UNKNOWN_KEY_RANK, |r| r as u32))
    }

    /// The snake_case names of the fields.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.fields.iter().map(|f| f.name)
    }
}

/// A request type read with [`decode`].
pub trait Request: DeserializeOwned {
    /// The request's top-level object.
    const SPEC: &'static ObjectSpec;
}

/// Whether `key` is `name` in lowerCamelCase ([`camel`]), without making the camelCase
/// string (field lookups run once per key of every request).
pub fn is_camel(name: &str, key: &str) -> bool {
    let mut k = key.chars();
    let mut up = false;
    for c in name.chars() {
        if c == '_' {
            up = true;
            continue;
        }
        let want = if up { c.to_ascii_uppercase() } else { c };
        up = false;
        if k.next() != Some(want) {
            return false;
        }
    }
    k.next().is_none()
}

/// The lowerCamelCase spelling of a snake_case name.
pub fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut up = false;
    for c in name.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.push(c.to_ascii_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A body read so far: the typed request and the validation violations found while
/// reading it (kind errors stop earlier, see [`decode`]).
#[derive(Debug)]
pub struct Decoded<T> {
    /// The request, with every given field in its snake_case place.
    pub request: T,
    /// Unknown fields, both spellings, integers out of range: the first ones in document
    /// order kept, all counted.
    pub violations: Violations,
    /// The given top-level fields (snake_case) in the body's key order.
    pub given_order: Vec<&'static str>,
}

/// What stops a body before its key is checked: not JSON, not an object, a known field
/// of the wrong JSON kind, nesting too deep. Every such problem is counted, the first ones
/// in document order kept ([`Violations`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("; "))]
pub struct KindErrors(pub Violations);

/// Parses and normalizes a request body.
///
/// # Errors
/// [`KindErrors`] when the body is not JSON (`malformed_json`), not an object
/// (`malformed_json`), nested over [`MAX_DEPTH`] (`too_many`), or a known field has the
/// wrong JSON kind (`invalid_value` at its path).
///
/// # Example
/// ```
/// use usage_core::wire::{decode::decode, GetUsageConfigRequest};
/// let d = decode::<GetUsageConfigRequest>(br#"{"serviceKey":"k","team_level":false,"user_email":"a@b.c"}"#).unwrap();
/// assert_eq!(d.request.service_key.as_deref(), Some("k"));
/// assert_eq!(d.request.team_level, None);
/// assert!(d.violations.is_empty());
/// ```
pub fn decode<T: Request>(body: &[u8]) -> Result<Decoded<T>, KindErrors> {
    // A body with kind errors is answered from a scan that builds no JSON tree: memory for
    // a body of many wrong elements stays bounded (contract section 11, Error size). Only a
    // body that passes it is read into a tree, which gives the same answer (see `scan`).
    match scan(body, T::SPEC) {
        Scan::Errors(e) => Err(e),
        Scan::Clean => decode_value(&parse_body(body)?),
    }
}

/// Parses a body as a JSON object within the nesting limit.
///
/// # Errors
/// `malformed_json` or `too_many` at `""`.
pub fn parse_body(body: &[u8]) -> Result<Value, KindErrors> {
    let root = |rule, msg: &str| KindErrors(Violation::new(JsonPath::root(), rule, msg).into());
    if let Some(depth) = excess_depth(body) {
        return Err(root(
            Rule::TooMany,
            &format!(
                "the body nests JSON {depth} levels deep or more; at most {MAX_DEPTH} are allowed"
            ),
        ));
    }
    let value: Value = parse_json(body).map_err(|e| {
        root(
            Rule::MalformedJson,
            &format!("the body is not valid JSON: {e}"),
        )
    })?;
    if !value.is_object() {
        return Err(root(
            Rule::MalformedJson,
            &format!("the body must be a JSON object, not {}", kind_name(&value)),
        ));
    }
    Ok(value)
}

/// Normalizes a parsed body (see [`decode`]).
///
/// # Errors
/// [`KindErrors`] as [`decode`].
pub fn decode_value<T: Request>(value: &Value) -> Result<Decoded<T>, KindErrors> {
    let mut cx = Cx::default();
    let normalized = cx.object(value, T::SPEC, &JsonPath::root());
    if !cx.kind_errors.is_empty() {
        return Err(KindErrors(cx.kind_errors));
    }
    let request = serde_path_to_error::deserialize::<_, T>(normalized).map_err(|e| {
        // The normalized value matches the spec, so this is a bug in a spec; report it
        // where it happened rather than panic.
        KindErrors(
            Violation::new(
                JsonPath::root(),
                Rule::InvalidValue,
                format!(
                    "internal: request could not be read at `{}`: {}",
                    e.path(),
                    e.inner()
                ),
            )
            .into(),
        )
    })?;
    Ok(Decoded {
        request,
        violations: cx.violations,
        given_order: cx.given_order,
    })
}

/// What [`scan`] found.
enum Scan {
    /// The body is a JSON object within the nesting limit whose known fields have their
    /// JSON kinds: it is read into a tree.
    Clean,
    /// What [`parse_body`] and [`decode_value`] answer for this body.
    Errors(KindErrors),
}

/// The kind errors of a body, found the way [`parse_body`] and [`decode_value`] find
/// them, with exactly their paths, messages and order, but in one pass over the bytes
/// that builds no tree: its memory is bounded by the nesting depth and [`Violations`]'
/// limit, not by the size of the body.
///
/// Both read the body with serde_json's `deserialize_any` at every value (so one parser
/// reports the same syntax errors at the same place, and validates every string, ignored
/// or not), a repeated key counts only with its last value (as in a `serde_json::Map`),
/// and the two spellings of a field are checked snake_case first.
fn scan(body: &[u8], spec: &'static ObjectSpec) -> Scan {
    use serde::de::DeserializeSeed as _;
    let root = |rule, msg: String| {
        Scan::Errors(KindErrors(
            Violation::new(JsonPath::root(), rule, msg).into(),
        ))
    };
    if let Some(depth) = excess_depth(body) {
        return root(
            Rule::TooMany,
            format!(
                "the body nests JSON {depth} levels deep or more; at most {MAX_DEPTH} are allowed"
            ),
        );
    }
    let mut errors = Violations::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let top = scan::Top {
        spec,
        out: &mut errors,
    }
    .deserialize(&mut de)
    .and_then(|top| de.end().map(|()| top));
    match top {
        Err(e) => root(
            Rule::MalformedJson,
            format!("the body is not valid JSON: {e}"),
        ),
        Ok(Some(kind)) => root(
            Rule::MalformedJson,
            format!("the body must be a JSON object, not {kind}"),
        ),
        Ok(None) if errors.is_empty() => Scan::Clean,
        Ok(None) => Scan::Errors(KindErrors(errors)),
    }
}

mod scan;

/// The nesting depth over [`MAX_DEPTH`], if the body exceeds it (strings are skipped).
fn excess_depth(body: &[u8]) -> Option<usize> {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for &b in body {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(depth);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// The JSON kind of a value, for messages.
pub fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses JSON text as serde_json does, except that the number `-0` is the integer 0
/// (contract section 11). serde_json reads `-0` as the float -0.0, as it reads `-0.0` and
/// `-0e0`, which are fractions and exponents: so the text's `-0` tokens are read as `0`
/// ([`integer_zeros`]) and every -0.0 left is a fraction. Parse request bodies and records
/// with this to get the contract's integers from [`read_int`].
///
/// # Errors
/// serde_json's, at the same line and column as for the text given.
pub fn parse_json<T: DeserializeOwned>(text: &[u8]) -> serde_json::Result<T> {
    serde_json::from_slice(&integer_zeros(text))
}

/// The JSON text with each number `-0` (no fraction, no exponent) written ` 0`: the same
/// length, so that error positions stay; strings are left as they are. Borrowed when the
/// text has no such number.
pub fn integer_zeros(text: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !text.windows(2).any(|w| w == b"-0") {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out: Option<Vec<u8>> = None;
    let (mut in_str, mut esc) = (false, false);
    for (i, &b) in text.iter().enumerate() {
        if in_str {
            if esc {
                esc = false;
            } else if b == b'\\' {
                esc = true;
            } else if b == b'"' {
                in_str = false;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'-' if text.get(i + 1) == Some(&b'0')
                && !matches!(text.get(i + 2), Some(b'.' | b'e' | b'E' | b'0'..=b'9'))
                && !matches!(i.checked_sub(1).map(|j| text[j]), Some(b'e' | b'E')) =>
            {
                out.get_or_insert_with(|| text.to_vec())[i] = b' ';
            }
            _ => {}
        }
    }
    out.map_or(std::borrow::Cow::Borrowed(text), std::borrow::Cow::Owned)
}

/// Reads an integer given as a JSON number or a decimal string. A JSON -0.0 is a fraction:
/// the text `-0` reads as 0 through [`parse_json`].
///
/// # Errors
/// A message naming the value when it has a fraction, an exponent, is out of `i64`'s
/// range or is not a decimal string.
pub fn read_int(v: &Value) -> Result<i64, String> {
    match v {
        Value::Number(n) => n.as_i64().ok_or_else(|| {
            // serde_json reads an integer beyond 64 bits as a float (`1e+23`).
            let huge = n
                .as_f64()
                .is_some_and(|f| f.fract() == 0.0 && f.abs() >= 9.2e18);
            if n.is_u64() || huge {
                format!("{n} is out of range (integers are 64-bit)")
            } else {
                format!("{n} is not an integer (no fraction or exponent allowed)")
            }
        }),
        Value::String(s) => {
            let digits = s.strip_prefix('-').unwrap_or(s);
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return Err(format!("\"{}\" is not a decimal integer", echo(s)));
            }
            s.parse::<i64>()
                .map_err(|_| format!("\"{}\" is out of range", echo(s)))
        }
        other => Err(format!("expected an integer, got {}", kind_name(other))),
    }
}

#[derive(Default)]
struct Cx {
    kind_errors: Violations,
    violations: Violations,
    given_order: Vec<&'static str>,
}

impl Cx {
    fn kind(&mut self, path: JsonPath, expected: &str, got: &Value) {
        let msg = format!(
            "`{}` must be {expected}, not {}",
            display(&path),
            kind_name(got)
        );
        self.kind_errors
            .push(Violation::new(path, Rule::InvalidValue, msg));
    }

    fn object(&mut self, value: &Value, spec: &'static ObjectSpec, at: &JsonPath) -> Value {
        let Some(map) = value.as_object() else {
            self.kind(at.clone(), "a JSON object", value);
            return Value::Null;
        };
        // Which spec field each body key is, in body order.
        let mut occurrences: Vec<Vec<(usize, &str, &Value)>> = vec![Vec::new(); spec.fields.len()];
        let mut unknown_rank = UNKNOWN_KEY_RANK;
        for (pos, (key, v)) in map.iter().enumerate() {
            match spec
                .fields
                .iter()
                .position(|f| f.name == key || is_camel(f.name, key))
            {
                Some(i) => occurrences[i].push((pos, key.as_str(), v)),
                None => {
                    let path = at.key(echo(key).into_owned(), unknown_rank);
                    unknown_rank += 1;
                    if !self.violations.would_keep(&path) {
                        // Past the cap of details: counted, and no message is made.
                        self.violations.count();
                        continue;
                    }
                    let candidates: Vec<String> = spec
                        .fields
                        .iter()
                        .flat_map(|f| [f.name.to_string(), camel(f.name)])
                        .collect();
                    let hint = did_you_mean(key, candidates.iter().map(String::as_str))
                        .map(|c| format!("; did you mean `{c}`?"))
                        .unwrap_or_default();
                    let key = echo(key);
                    let msg = if spec.fields.is_empty() {
                        format!("unknown field `{key}`: this object takes no fields")
                    } else {
                        let known: Vec<_> = spec.names().collect();
                        format!("unknown field `{key}` (known: {}){hint}", known.join(", "))
                    };
                    self.violations
                        .push(Violation::new(path, Rule::UnknownField, msg));
                }
            }
        }
        let mut out = Map::new();
        let mut order: Vec<(usize, &'static str)> = Vec::new();
        for (rank, (field, occ)) in spec.fields.iter().zip(occurrences).enumerate() {
            let path = at.key(field.name, rank as u32);
            let mut given: Option<(&str, Value)> = None;
            // The snake_case spelling wins over the camelCase one (the key is read from
            // `service_key`, else `serviceKey`); the pair is a violation anyway.
            let mut occ = occ;
            occ.sort_by_key(|(_, spelling, _)| *spelling != field.name);
            for (pos, spelling, v) in occ {
                let Some(norm) = self.value(v, &field.kind, &path) else {
                    continue;
                };
                match &given {
                    None => {
                        order.push((pos, field.name));
                        given = Some((spelling, norm));
                    }
                    Some((first, _)) => {
                        let msg = format!(
                            "`{spelling}` and `{first}` are two spellings of one field; give only one"
                        );
                        self.violations.push(Violation::new(
                            path.clone(),
                            Rule::ConflictingFields,
                            msg,
                        ));
                    }
                }
            }
            if let Some((_, v)) = given {
                out.insert(field.name.to_string(), v);
            }
        }
        if at.is_root() {
            order.sort_unstable();
            self.given_order = order.into_iter().map(|(_, n)| n).collect();
        }
        Value::Object(out)
    }

    /// Checks the kind of a value and normalizes it; `None` when it means "not given"
    /// or has the wrong kind (reported).
    fn value(&mut self, v: &Value, kind: &'static Kind, path: &JsonPath) -> Option<Value> {
        if v.is_null() {
            return None;
        }
        match kind {
            Kind::Text | Kind::TextKeepEmpty => match v {
                Value::String(s) if s.is_empty() && matches!(kind, Kind::Text) => None,
                Value::String(_) => Some(v.clone()),
                _ => {
                    self.kind(path.clone(), "a string", v);
                    None
                }
            },
            Kind::Bool => match v {
                Value::Bool(false) => None,
                Value::Bool(true) => Some(v.clone()),
                _ => {
                    self.kind(path.clone(), "a boolean", v);
                    None
                }
            },
            Kind::Int => match v {
                Value::Number(_) | Value::String(_) => match read_int(v) {
                    Ok(n) => Some(Value::from(n)),
                    Err(msg) => {
                        let msg = format!("`{}`: {msg}", display(path));
                        self.violations
                            .push(Violation::new(path.clone(), Rule::InvalidValue, msg));
                        // A placeholder keeps the field present, so no rule reports it missing.
                        Some(Value::from(0))
                    }
                },
                _ => {
                    self.kind(path.clone(), "an integer (a number or a decimal string)", v);
                    None
                }
            },
            Kind::Array(elem) => match v {
                Value::Array(a) if a.is_empty() => None,
                Value::Array(a) => {
                    let items = a
                        .iter()
                        .enumerate()
                        .map(|(i, e)| {
                            let p = path.index(i);
                            if e.is_null() {
                                self.kind(p, expected(elem), e);
                                return Value::Null;
                            }
                            match (elem, e) {
                                // An element is there even when empty: `[{}]` is one
                                // selection with its required fields missing, `[""]` one
                                // e-mail that matches nobody.
                                (Kind::Object(spec), Value::Object(_)) => self.object(e, spec, &p),
                                (Kind::Text, Value::String(_)) => e.clone(),
                                _ => self.value(e, elem, &p).unwrap_or(Value::Null),
                            }
                        })
                        .collect();
                    Some(Value::Array(items))
                }
                _ => {
                    self.kind(path.clone(), "an array", v);
                    None
                }
            },
            Kind::Object(spec) => match v {
                Value::Object(m) if m.is_empty() => None,
                Value::Object(_) => Some(self.object(v, spec, path)),
                _ => {
                    self.kind(path.clone(), "a JSON object", v);
                    None
                }
            },
            Kind::Marker(spec) => match v {
                Value::Object(_) => Some(self.object(v, spec, path)),
                _ => {
                    self.kind(path.clone(), "a JSON object (`{}`)", v);
                    None
                }
            },
            Kind::AnyObject => match v {
                Value::Object(_) => Some(v.clone()),
                _ => {
                    self.kind(path.clone(), "a JSON object", v);
                    None
                }
            },
        }
    }
}

fn expected(kind: &Kind) -> &'static str {
    match kind {
        Kind::Text | Kind::TextKeepEmpty => "a string",
        Kind::Bool => "a boolean",
        Kind::Int => "an integer (a number or a decimal string)",
        Kind::Array(_) => "an array",
        Kind::Object(_) | Kind::Marker(_) | Kind::AnyObject => "a JSON object",
    }
}

fn display(path: &JsonPath) -> String {
    if path.is_root() {
        "(body)".to_string()
    } else {
        path.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{AnalyticsRequest, GetUsageConfigRequest, UsageConfigRequest};

    fn kinds(body: &str) -> Vec<(String, &'static str)> {
        match decode::<AnalyticsRequest>(body.as_bytes()) {
            Err(KindErrors(v)) => v.iter().map(|v| (v.path(), v.rule().as_str())).collect(),
            Ok(_) => vec![],
        }
    }

    #[test]
    fn body_must_be_a_json_object() {
        assert_eq!(kinds("{"), [(String::new(), "malformed_json")]);
        assert_eq!(kinds("[]"), [(String::new(), "malformed_json")]);
        assert_eq!(kinds("\"x\""), [(String::new(), "malformed_json")]);
        let deep = "[".repeat(64) + &"]".repeat(64);
        assert_eq!(
            kinds(&format!("{{\"x\":{deep}}}")),
            [(String::new(), "too_many")]
        );
        let ok = "[".repeat(63) + &"]".repeat(63);
        assert_eq!(kinds(&format!("{{\"x\":{ok}}}")), []);
    }

    #[test]
    fn wrong_kinds_are_listed_before_validation() {
        let got = kinds(r#"{"service_key": 5, "query_requests": [{"selections": "x"}, 3]}"#);
        assert_eq!(
            got,
            [
                ("service_key".to_string(), "invalid_value"),
                ("query_requests[0].selections".to_string(), "invalid_value"),
                ("query_requests[1]".to_string(), "invalid_value"),
            ]
        );
    }

    #[test]
    fn spellings_and_unknown_fields() {
        let d = decode::<AnalyticsRequest>(
            br#"{"queryRequests":[{"dataSource":"QUERY_DATA_SOURCE_USER_DATA","agregations":[]}],"service_key":"a","serviceKey":"b"}"#,
        )
        .unwrap();
        let v: Vec<_> = d
            .violations
            .iter()
            .map(|v| (v.path(), v.rule().as_str()))
            .collect();
        assert_eq!(
            v,
            [
                ("service_key".to_string(), "conflicting_fields"),
                ("query_requests[0].agregations".to_string(), "unknown_field"),
            ]
        );
        assert!(
            d.violations[1]
                .message()
                .contains("did you mean `aggregations`?"),
            "{}",
            d.violations[1].message()
        );
        assert_eq!(d.request.service_key.as_deref(), Some("a"));
        assert_eq!(d.request.query_requests.len(), 1);
    }

    #[test]
    fn not_given_values_do_not_conflict() {
        let d = decode::<GetUsageConfigRequest>(
            br#"{"team_level": false, "teamLevel": true, "group_id": ""}"#,
        )
        .unwrap();
        assert!(d.violations.is_empty());
        assert_eq!(d.request.team_level, Some(true));
        assert_eq!(d.request.group_id, None);
    }

    #[test]
    fn set_cap_has_explicit_presence() {
        let d = decode::<UsageConfigRequest>(br#"{"set_add_on_credit_cap": 0}"#).unwrap();
        assert_eq!(d.request.set_add_on_credit_cap, Some(0));
        let d = decode::<UsageConfigRequest>(br#"{"set_add_on_credit_cap": "500"}"#).unwrap();
        assert_eq!(d.request.set_add_on_credit_cap, Some(500));
        for bad in [r#""""#, "1.5", "1e3", "\"1.0\"", "9223372036854775808"] {
            let body = format!(r#"{{"set_add_on_credit_cap": {bad}}}"#);
            let d = decode::<UsageConfigRequest>(body.as_bytes()).unwrap();
            assert_eq!(d.violations.len(), 1, "{bad}");
            assert_eq!(d.violations[0].rule(), Rule::InvalidValue);
            assert_eq!(d.violations[0].path(), "set_add_on_credit_cap");
        }
        let d = decode::<UsageConfigRequest>(br#"{"set_add_on_credit_cap": null}"#).unwrap();
        assert_eq!(d.request.set_add_on_credit_cap, None);
        assert!(decode::<UsageConfigRequest>(br#"{"set_add_on_credit_cap": true}"#).is_err());
    }

    #[test]
    fn minus_zero_is_zero() {
        for body in ["-0", "\"-0\"", "0", "\"0\"", " -0 ", "[-0]"] {
            let v: Value = parse_json(body.as_bytes()).unwrap();
            let v = v.as_array().map_or(&v, |a| &a[0]);
            assert_eq!(read_int(v), Ok(0), "{body}");
        }
        // Fractions and exponents, of zero too (contract section 11, v5).
        for body in [
            "0.0", "1.0", "-1.5", "1e3", "-0.0", "-0e0", "-0E0", "-0.0e0", "0e0",
        ] {
            let v: Value = parse_json(body.as_bytes()).unwrap();
            assert!(
                read_int(&v).unwrap_err().contains("not an integer"),
                "{body}"
            );
        }
        // Only number tokens change, and nothing moves.
        for (text, read) in [
            (r#"{"a":"-0","b":-0}"#, r#"{"a":"-0","b": 0}"#),
            (
                r#"{"a\"-0":[-0,-0.5,1e-0,-0e1]}"#,
                r#"{"a\"-0":[ 0,-0.5,1e-0,-0e1]}"#,
            ),
            ("-01", "-01"),
        ] {
            assert_eq!(&*integer_zeros(text.as_bytes()), read.as_bytes());
        }
        let d = decode::<crate::wire::UsageConfigRequest>(
            br#"{"service_key":"k","set_add_on_credit_cap":-0,"team_level":true}"#,
        )
        .unwrap();
        assert_eq!(d.request.set_add_on_credit_cap, Some(0));
        assert!(d.violations.is_empty());
    }

    /// The answer of the tree path, which `decode` gave alone before the scan.
    fn via_tree<T: Request>(body: &[u8]) -> Result<Decoded<T>, KindErrors> {
        decode_value(&parse_body(body)?)
    }

    /// `decode` and the tree path agree: the same kind errors (paths, messages, order,
    /// count), or the same request, violations and key order.
    fn agree<T: Request + PartialEq + std::fmt::Debug>(body: &[u8]) {
        let shown = String::from_utf8_lossy(body);
        match (decode::<T>(body), via_tree::<T>(body)) {
            (Err(a), Err(b)) => assert_eq!(a, b, "{shown}"),
            (Ok(a), Ok(b)) => {
                assert_eq!(a.request, b.request, "{shown}");
                assert_eq!(a.violations, b.violations, "{shown}");
                assert_eq!(a.given_order, b.given_order, "{shown}");
            }
            (a, b) => panic!("{shown}\nscan: {a:?}\ntree: {b:?}"),
        }
    }

    /// A small deterministic generator of request bodies as text (so keys can repeat).
    struct Gen(u64);

    impl Gen {
        fn next(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) % n as u64) as usize
        }

        fn pick(&mut self, xs: &[&str]) -> String {
            xs[self.next(xs.len())].to_string()
        }

        /// Any JSON value: often of the wrong kind for where it is put.
        fn stray(&mut self) -> String {
            self.pick(&[
                "null",
                "true",
                "false",
                "5",
                "-0",
                "1.5",
                "1e400",
                r#""s""#,
                r#""""#,
                "[]",
                "[1, null]",
                "{}",
                r#"{"a": [1]}"#,
                r#""\u00e9""#,
                r#""\ud800""#,
                "18446744073709551616",
            ])
        }

        fn value(&mut self, kind: &'static Kind, depth: usize) -> String {
            if self.next(6) == 0 || depth > 4 {
                return self.stray();
            }
            match kind {
                Kind::Text | Kind::TextKeepEmpty => {
                    self.pick(&[r#""a""#, r#""""#, r#""QUERY_AGGREGATION_SUM""#, r#""k\n""#])
                }
                Kind::Bool => self.pick(&["true", "false"]),
                Kind::Int => self.pick(&["7", r#""7""#, "-0", r#""x""#, "1.5"]),
                Kind::Array(elem) => {
                    let n = self.next(4);
                    let items: Vec<String> = (0..n).map(|_| self.value(elem, depth + 1)).collect();
                    format!("[{}]", items.join(", "))
                }
                Kind::Object(spec) | Kind::Marker(spec) => self.object(spec, depth + 1),
                Kind::AnyObject => self.pick(&["{}", r#"{"api_key": 1, "x": [null]}"#]),
            }
        }

        fn object(&mut self, spec: &'static ObjectSpec, depth: usize) -> String {
            let n = self.next(6);
            let mut entries = Vec::new();
            for _ in 0..n {
                if spec.fields.is_empty() || self.next(8) == 0 {
                    entries.push(format!(r#""zz_unknown": {}"#, self.stray()));
                    continue;
                }
                let f = &spec.fields[self.next(spec.fields.len())];
                let key = if self.next(2) == 0 {
                    f.name.to_string()
                } else {
                    camel(f.name)
                };
                entries.push(format!(r#""{key}": {}"#, self.value(&f.kind, depth)));
            }
            format!("{{{}}}", entries.join(", "))
        }

        /// A body of `spec`, sometimes broken: cut short, an invalid UTF-8 byte in it,
        /// trailing text, or not an object.
        fn body(&mut self, spec: &'static ObjectSpec) -> Vec<u8> {
            let mut b = if self.next(20) == 0 {
                self.stray().into_bytes()
            } else {
                self.object(spec, 1).into_bytes()
            };
            match self.next(12) {
                0 => {
                    let cut = self.next(b.len());
                    b.truncate(cut);
                }
                1 => {
                    let at = self.next(b.len());
                    b.insert(at, 0xff);
                }
                2 => b.extend_from_slice(b" x"),
                3 => b.extend_from_slice(b" \n"),
                _ => {}
            }
            b
        }
    }

    #[test]
    fn the_scan_answers_as_the_tree_does() {
        use crate::wire::{AgentAnalyticsRequest, IngestRequest};
        let mut g = Gen(1);
        for _ in 0..4000 {
            agree::<AnalyticsRequest>(&g.body(AnalyticsRequest::SPEC));
            agree::<AgentAnalyticsRequest>(&g.body(AgentAnalyticsRequest::SPEC));
            agree::<UsageConfigRequest>(&g.body(UsageConfigRequest::SPEC));
            agree::<IngestRequest>(&g.body(IngestRequest::SPEC));
        }
        // The cases the generator is there for, each once for sure.
        for body in [
            r#"{"service_key": 5, "service_key": "k"}"#,
            r#"{"service_key": "k", "service_key": 5}"#,
            r#"{"serviceKey": 5, "service_key": true}"#,
            r#"{"query_requests": [null, 1, {"selections": [null, {"field": 1}], "dataSource": []}]}"#,
            r#"{"query_requests": [{"selections": [{"field": "\ud800"}]}]}"#,
            r#"{"zz": "\ud800", "query_requests": 1}"#,
            r#"{"query_requests": 1} {}"#,
            "[1, 2]",
            r#""x""#,
            "",
        ] {
            agree::<AnalyticsRequest>(body.as_bytes());
        }
        agree::<AnalyticsRequest>(b"{\"zz\": \"\xff\", \"query_requests\": 1}");
        agree::<UsageConfigRequest>(br#"{"team_level": {}, "clear_add_on_credit_cap": null}"#);
    }

    /// `{prefix}1,1,…]}` with `n` ones.
    fn ones(prefix: &str, n: usize, suffix: &str) -> Vec<u8> {
        let mut body = prefix.as_bytes().to_vec();
        for i in 0..n {
            body.extend_from_slice(if i == 0 { b"1" } else { b",1" });
        }
        body.extend_from_slice(suffix.as_bytes());
        body
    }

    #[test]
    fn half_a_million_wrong_kinds_keep_the_first_hundred_and_count_all() {
        let body = ones(
            r#"{"query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA"}, {"selections": ["#,
            500_000,
            "]}]}",
        );
        assert!(body.len() < 1 << 20, "{}", body.len());
        let Err(KindErrors(v)) = decode::<AnalyticsRequest>(&body) else {
            panic!("kind errors expected");
        };
        assert_eq!(v.total(), 500_000);
        assert_eq!(v.len(), 100);
        assert_eq!(v[0].path(), "query_requests[1].selections[0]");
        assert_eq!(v[99].path(), "query_requests[1].selections[99]");
        assert_eq!(
            v[99].message(),
            "`query_requests[1].selections[99]` must be a JSON object, not a number"
        );

        let body = ones(r#"{"kind": "autocomplete", "records": ["#, 1_000_000, "]}");
        let Err(KindErrors(v)) = decode::<crate::wire::IngestRequest>(&body) else {
            panic!("kind errors expected");
        };
        assert_eq!(v.total(), 1_000_000);
        assert_eq!(v.len(), 100);
        assert_eq!(v[0].path(), "records[0]");
        assert_eq!(v[99].path(), "records[99]");
        assert_eq!(
            v[99].message(),
            "`records[99]` must be a JSON object, not a number"
        );
    }

    #[test]
    fn camel_case() {
        assert_eq!(camel("query_requests"), "queryRequests");
        assert_eq!(camel("set_add_on_credit_cap"), "setAddOnCreditCap");
        assert_eq!(camel("kind"), "kind");
        for name in [
            "query_requests",
            "set_add_on_credit_cap",
            "kind",
            "a_b",
            "x__y",
            "trailing_",
        ] {
            assert!(is_camel(name, &camel(name)), "{name}");
            assert!(!is_camel(name, &format!("{}x", camel(name))), "{name}");
            assert!(!is_camel(name, &camel(name)[1..]), "{name}");
        }
        assert!(!is_camel("query_requests", "query_requests"));
    }
}
