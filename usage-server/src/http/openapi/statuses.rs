//! The table of docs/openapi.md: every path of the document, its methods and every status
//! each answers, read off [`super::document`] so that the page and the document cannot
//! disagree (`openapi_md_is_current` checks the page).

use serde_json::Value;

/// The markers around the generated table in docs/openapi.md.
pub(super) const MARKERS: (&str, &str) = ("<!-- statuses:begin -->\n", "<!-- statuses:end -->");

/// The Markdown table of `doc`'s paths: one row per path and method, its statuses in
/// increasing order, each with its error code (or the success's reason phrase).
pub(super) fn table(doc: &Value) -> String {
    let mut out = String::from("| path | method | statuses |\n|---|---|---|\n");
    let paths = doc["paths"].as_object().expect("paths is an object");
    for (path, item) in paths {
        let item = item.as_object().expect("a path item is an object");
        for (method, op) in item {
            let responses = op["responses"].as_object().expect("responses");
            let mut responses: Vec<_> = responses.iter().collect();
            responses.sort_by_key(|(status, _)| *status);
            let statuses: Vec<String> = responses
                .into_iter()
                .map(|(status, r)| format!("{status} {}", what(status, r)))
                .collect();
            out.push_str(&format!(
                "| `{path}` | {} | {} |\n",
                method.to_uppercase(),
                statuses.join(", ")
            ));
        }
    }
    out
}

/// A response's short name: the error code of an error response (`` `not_found` ``), else
/// the status's reason phrase (`OK`, `Created`, `Not Modified`).
fn what(status: &str, r: &Value) -> String {
    if let Some(Value::String(name)) = r.get("$ref") {
        return format!("`{}`", name.rsplit('/').next().unwrap_or_default());
    }
    status
        .parse()
        .ok()
        .and_then(|s| warp::http::StatusCode::from_u16(s).ok())
        .and_then(|s| s.canonical_reason())
        .unwrap_or_default()
        .to_string()
}
