//! Cursors, pages and conditional answers of the v2 endpoints: a cursor is the hex of the
//! key of a page's last row bound to the endpoint's parameters (their fingerprint); a page
//! is the rows after it; every answer carries a strong `ETag` and `If-None-Match` gets a
//! `304` (see the parent module's doc).

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use usage_core::Rule;
use warp::http::{HeaderMap, HeaderValue, StatusCode, header};
use warp::reply::Response;

use super::{Params, bad};
use crate::error::ApiError;

/// Lower-case hex of `bytes`.
pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A cursor: the key of the last row of a page, bound to its endpoint's parameters.
fn cursor_of(fingerprint: &str, key: &[String]) -> String {
    hex(json!([fingerprint, key]).to_string().as_bytes())
}

/// The key a `cursor` parameter names (`None`: the first page).
pub(super) fn cursor_key(
    params: &Params,
    fingerprint: &str,
) -> Result<Option<Vec<String>>, ApiError> {
    let Some(c) = params.get("cursor").filter(|c| !c.is_empty()) else {
        return Ok(None);
    };
    let invalid = || {
        bad(
            "cursor",
            Rule::InvalidValue,
            "`cursor` is not a cursor of this endpoint with these parameters; take `next_cursor` of the previous page",
        )
    };
    let bytes = unhex(c).ok_or_else(invalid)?;
    let (fp, key): (String, Vec<String>) = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
    if fp != fingerprint {
        return Err(invalid());
    }
    Ok(Some(key))
}

/// The page of `rows` (each with its key, sorted by key) after `after`, and the cursor of
/// the next page.
pub(super) fn page(
    rows: &[(Vec<String>, Value)],
    after: Option<&[String]>,
    limit: usize,
    fingerprint: &str,
) -> (Vec<Value>, Option<String>) {
    let start = after.map_or(0, |a| rows.partition_point(|(k, _)| k.as_slice() <= a));
    let rest = &rows[start..];
    let taken = &rest[..rest.len().min(limit)];
    let next = (rest.len() > limit).then(|| cursor_of(fingerprint, &taken[taken.len() - 1].0));
    (taken.iter().map(|(_, v)| v.clone()).collect(), next)
}

/// The answer, or `304 Not Modified` when `If-None-Match` names its `ETag`.
pub(super) fn conditional(headers: &HeaderMap, body: &Value) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let etag = format!("\"{}\"", hex(&Sha256::digest(&bytes)[..16]));
    let matches = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().trim_start_matches("W/"))
        .any(|t| t == etag || t == "*");
    let mut res = if matches {
        let mut r = Response::new(Vec::<u8>::new().into());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let mut r = Response::new(bytes.into());
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    };
    if let Ok(v) = HeaderValue::from_str(&etag) {
        res.headers_mut().insert(header::ETAG, v);
    }
    res.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-cache"),
    );
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;
    use crate::http::v2::Endpoint;

    #[test]
    fn a_page_starts_after_the_cursor_key() {
        let rows: Vec<(Vec<String>, Value)> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|k| (vec![k.to_string()], json!(k)))
            .collect();
        let (p, next) = page(&rows, None, 2, "f");
        assert_eq!(p, [json!("a"), json!("b")]);
        let next = next.unwrap();
        assert_eq!(unhex(&next).unwrap(), br#"["f",["b"]]"#);
        let (p, next) = page(&rows, Some(&["b".to_string()]), 2, "f");
        assert_eq!(p, [json!("c"), json!("d")]);
        assert!(next.is_some());
        let (p, next) = page(&rows, Some(&["d".to_string()]), 2, "f");
        assert_eq!((p, next), (vec![json!("e")], None));
        // A key that is gone: the page starts after where it was.
        let (p, _) = page(&rows, Some(&["bb".to_string()]), 1, "f");
        assert_eq!(p, [json!("c")]);
    }

    #[test]
    fn a_cursor_is_bound_to_its_parameters() {
        let a = Params(vec![("start".into(), "2025-01-01".into())]);
        let b = Params(vec![("start".into(), "2025-01-02".into())]);
        let fa = a.fingerprint(Endpoint::Daily);
        assert_ne!(fa, b.fingerprint(Endpoint::Daily));
        assert_ne!(fa, a.fingerprint(Endpoint::Activity));
        let c = cursor_of(&fa, &["2025-01-01".into()]);
        let with = |p: &Params, c: &str| {
            let mut v = p.0.clone();
            v.push(("cursor".into(), c.into()));
            Params(v)
        };
        assert_eq!(
            cursor_key(&with(&a, &c), &fa).unwrap(),
            Some(vec!["2025-01-01".to_string()])
        );
        let fb = b.fingerprint(Endpoint::Daily);
        assert_eq!(
            cursor_key(&with(&b, &c), &fb).unwrap_err().code,
            Code::InvalidArgument
        );
        assert_eq!(
            cursor_key(&with(&a, "zz"), &fa).unwrap_err().code,
            Code::InvalidArgument
        );
    }
}
