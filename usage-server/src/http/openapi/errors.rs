//! The failures in the OpenAPI document: the error body of the contract (`ErrorBody`,
//! `ErrorDetail`), one named schema per [`Code`] (`Error_<code>`), and one response per
//! code that answers with it.
//!
//! Each code's schema is an object of its own with `code` a `const`, not an `allOf` of
//! `ErrorBody` narrowed by a `const`: the two are the same set of bodies, but generators
//! (openapi-python-client) cannot merge an `enum` with a `const` and drop the response, so
//! a client could not read a typed 401. `details` is a required property of the 400's
//! schema and no property of the others (`additionalProperties: false`), which says what
//! `not: {required: [details]}` said.

use serde_json::{Map, Value, json};
use usage_core::Rule;

use super::schema_ref;
use crate::error::{Code, MAX_DETAILS};

/// The name of the schema of `code`'s error body (`Error_unauthenticated`).
pub(super) fn schema_name(code: Code) -> String {
    format!("Error_{}", code.as_str())
}

/// Adds `ErrorDetail`, `ErrorBody` (any failure) and one `Error_<code>` per code.
pub(super) fn schemas(schemas: &mut Map<String, Value>) {
    schemas.insert("ErrorDetail".into(), json!({
        "type": "object",
        "description": "One violation.",
        "required": ["path", "rule", "message"],
        "additionalProperties": false,
        "properties": {
            "path": {"type": "string", "description": "JSON path into the request, snake_case names (`\"\"` is the body)."},
            "rule": {"type": "string", "enum": Rule::ALL.iter().map(|r| r.as_str()).collect::<Vec<_>>()},
            "message": {"type": "string", "description": "Names the field, the value and the rule."},
        },
    }));
    let details =
        json!({"type": "array", "maxItems": MAX_DETAILS, "items": schema_ref("ErrorDetail")});
    schemas.insert("ErrorBody".into(), json!({
        "type": "object",
        "description": "The body of every failure (each status's own schema is `Error_<code>`). `error` repeats `message`; `details` is present on every 400 and on no other status.",
        "required": ["error", "code", "message", "requestId"],
        "additionalProperties": false,
        "properties": {
            "error": {"type": "string"},
            "code": {"type": "string", "enum": Code::ALL.iter().map(|c| c.as_str()).collect::<Vec<_>>()},
            "message": {"type": "string"},
            "details": details,
            "requestId": {"type": "string", "description": "Equals the `x-request-id` header."},
        },
    }));
    for &c in Code::ALL {
        let mut required = vec!["error", "code", "message", "requestId"];
        let mut properties = json!({
            "error": {"type": "string"},
            "code": {"type": "string", "const": c.as_str()},
            "message": {"type": "string"},
            "requestId": {"type": "string", "description": "Equals the `x-request-id` header."},
        });
        if c == Code::InvalidArgument {
            properties["details"] = details.clone();
            required.push("details");
        }
        schemas.insert(
            schema_name(c),
            json!({
                "type": "object",
                "description": format!("The error body of {}", description(c)),
                "required": required,
                "additionalProperties": false,
                "properties": properties,
            }),
        );
    }
}

/// One response per code: its description, headers and `Error_<code>` body.
pub(super) fn responses() -> Map<String, Value> {
    let mut responses = Map::new();
    for &c in Code::ALL {
        let mut headers = json!({"x-request-id": {"$ref": "#/components/headers/RequestId"}});
        if matches!(c, Code::ResourceExhausted | Code::Unavailable) {
            headers["Retry-After"] = json!({
                "description": "Seconds to wait before retrying.",
                "required": c == Code::ResourceExhausted,
                "schema": {"type": "integer", "minimum": 1},
            });
        }
        responses.insert(
            c.as_str().into(),
            json!({
                "description": description(c),
                "headers": headers,
                "content": {"application/json": {"schema": schema_ref(&schema_name(c))}},
            }),
        );
    }
    responses
}

/// `401 `unauthenticated`: the service key is missing, unknown or revoked.`
pub(super) fn description(c: Code) -> String {
    let when = match c {
        Code::InvalidArgument => {
            "malformed JSON, wrong JSON kinds, rule violations, bad values; `details` lists every violation"
        }
        Code::Unauthenticated => "the service key is missing, unknown or revoked",
        Code::PermissionDenied => {
            "the key lacks the operation's permission, or the team's plan lacks the feature"
        }
        Code::NotFound => "a group or user named in the request is not in the key's team",
        Code::MethodNotAllowed => {
            "the method is not allowed on the path (`Allow` lists those that are)"
        }
        Code::RequestTimeout => "the body did not arrive in time",
        Code::PayloadTooLarge => {
            "the body is over the limit (1 MiB for queries, 16 MiB for Ingest, by default)"
        }
        Code::UnsupportedMediaType => "`Content-Type` is not `application/json`",
        Code::ResourceExhausted => "the key's rate limit is exceeded",
        Code::Internal => "a bug; the server log has the details under the request id",
        Code::Unavailable => "the store is unavailable or the server is shutting down",
        Code::UriTooLong => "the request's target is longer than the server reads",
        Code::HeadersTooLarge => "the request's headers are larger than the server reads",
    };
    format!("{} `{}`: {when}.", c.status().as_u16(), c.as_str())
}
