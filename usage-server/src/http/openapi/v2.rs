//! The v2 `GET` endpoints in the OpenAPI document, from the tables their handlers use
//! ([`crate::http::v2`]): paths, parameters, permissions and page shapes.

use serde_json::{Value, json};
use usage_core::WireEnum;
use usage_core::credits::{CapSource, Cycle, Spend, UserCredits};
use usage_core::time::Timestamp;

use super::super::v2::{DEFAULT_LIMIT, Endpoint, GROUPS, MAX_LIMIT, MAX_MIN_PERCENT, SOURCES};
use super::{Endpoint as Doc, JSON, schema_ref};
use crate::error::Code;

/// The GET endpoints in the OpenAPI document, from the same tables the handlers use.
pub(super) fn endpoints() -> Vec<Doc> {
    let param = |name: &str, required: bool, schema: Value, description: &str| json!({"name": name, "in": "query", "required": required, "schema": schema, "description": description});
    let day = json!({"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"});
    let tz_param = || {
        param(
            "tz",
            false,
            json!({"type": "string", "pattern": "^(UTC([+-][0-9]{1,2}(:[0-9]{2})?)?|[A-Za-z][A-Za-z0-9_+/-]*)$"}),
            "The zone of the days: UTC (the default), an offset UTC±H[:MM] (−12:00 to +14:00) \
             or an IANA time zone name (America/New_York), daylight saving time applied per \
             instant.",
        )
    };
    let paging = || {
        vec![
            param(
                "limit",
                false,
                json!({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}),
                "Rows a page.",
            ),
            param(
                "cursor",
                false,
                json!({"type": "string"}),
                "`next_cursor` of the previous page, with the same other parameters.",
            ),
        ]
    };
    let page = |field: &str, item: Value| {
        json!({
            "type": "object",
            "required": [field, "next_cursor"],
            "properties": {
                field: {"type": "array", "items": item},
                "next_cursor": {"type": ["string", "null"], "description": "The next page's cursor; null on the last page."},
            },
        })
    };
    let errors = || {
        vec![
            Code::InvalidArgument,
            Code::Unauthenticated,
            Code::PermissionDenied,
            Code::ResourceExhausted,
            Code::Unavailable,
        ]
    };
    let desc = |e: Endpoint| {
        format!(
            "Extension. Key: `Authorization: Bearer` with `{}`. Keyset pages: every row that existed \
             when paging began is returned once even while records are ingested. Unknown or repeated \
             parameters are 400s naming the parameter. Takes {}.",
            e.permission().identifier(),
            e.params().join(", ")
        )
    };
    let mut daily_params = vec![
        param("start", true, day.clone(), "First day, included."),
        param("end", true, day.clone(), "Last day, included."),
        param(
            "source",
            false,
            json!({"type": "string", "enum": SOURCES.map(|(n, _)| n), "default": "autocomplete"}),
            "The data source.",
        ),
        param(
            "group_by",
            false,
            json!({"type": "string", "enum": GROUPS.map(|(n, _)| n)}),
            "Rows per day and per this (`user`: the developer's api_key).",
        ),
        tz_param(),
    ];
    daily_params.extend(paging());
    let mut activity_params = vec![
        param("start", true, day.clone(), "First day, included."),
        param("end", true, day, "Last day, included."),
        param(
            "group",
            false,
            json!({"type": "string"}),
            "Only this group's members (its name).",
        ),
    ];
    activity_params.push(tz_param());
    activity_params.extend(paging());
    vec![
        Doc {
            path: "/api/v2/usage/daily".into(),
            // HEAD is served too (the same headers); documented as GET only, since
            // schemathesis 4.32 crashes generating HEAD cases of these (its own error).
            methods: &["get"],
            operation_id: "UsageDaily".into(),
            tag: "analytics",
            summary: "Usage per day (and per user, language or IDE).".into(),
            description: format!(
                "{} Each row: `date`, the group's value, the sums of the source's count fields and \
                 `distinct_users` (not when grouped by user), as strings.",
                desc(Endpoint::Daily)
            ),
            request: None,
            ok: page(
                "data",
                json!({"type": "object", "additionalProperties": {"type": "string"}}),
            ),
            errors: errors(),
            media_type: JSON,
            also: vec![],
            parameters: daily_params,
        },
        Doc {
            path: "/api/v2/users/activity".into(),
            // HEAD is served too (the same headers); documented as GET only, since
            // schemathesis 4.32 crashes generating HEAD cases of these (its own error).
            methods: &["get"],
            operation_id: "UsersActivity".into(),
            tag: "analytics",
            summary: "Every user's activity in a period, by e-mail.".into(),
            description: format!(
                "{} The rows of `UserPageAnalytics`. 404 when `group` names no group of the \
                 team.",
                desc(Endpoint::Activity)
            ),
            request: None,
            ok: page("data", schema_ref("UserStats")),
            errors: [errors(), vec![Code::NotFound]].concat(),
            media_type: JSON,
            also: vec![],
            parameters: activity_params,
        },
        Doc {
            path: "/api/v2/audit".into(),
            // HEAD is served too (the same headers); documented as GET only, since
            // schemathesis 4.32 crashes generating HEAD cases of these (its own error).
            methods: &["get"],
            operation_id: "Audit".into(),
            tag: "billing",
            summary:
                "The team's audit log (caps, billing, keys, the team, webhooks), oldest first."
                    .into(),
            description: desc(Endpoint::Audit),
            request: None,
            ok: page(
                "entries",
                json!({
                    "type": "object",
                    "required": ["time", "action", "key_id", "key_name", "scope", "old", "new"],
                    "properties": {
                        "time": {"type": "string"},
                        "action": {"type": "string", "enum": audit_actions()},
                        "key_id": {"type": "string", "description": "The key that made the change; `cli` (and `cli:import`, `cli:demo`) for the admin commands, `-` for code that embeds the store."},
                        "key_name": {"type": ["string", "null"], "description": "That key's name (null: it has none); `cli` for the admin commands."},
                        "scope": {"type": "string", "description": "`team`, `group:ID` or `user:EMAIL` for a cap; `billing` for a change of plan, seats, credits or cycle; `team:ID`, `key:ID` or `webhook:ID` for the team's creation, a key or a webhook."},
                        "old": {"description": "The cap before (null: none), for `billing` the state before, for a key or webhook its state before (null: it did not exist).", "anyOf": [{"type": "integer"}, {"type": "null"}, {"$ref": "#/components/schemas/BillingState"}, {"type": "object"}]},
                        "new": {"description": "The cap after (null: none), for `billing` the state after, for the team, a key or webhook its state after (null: revoked or removed).", "anyOf": [{"type": "integer"}, {"type": "null"}, {"$ref": "#/components/schemas/BillingState"}, {"type": "object"}]},
                    },
                }),
            ),
            errors: errors(),
            media_type: JSON,
            also: vec![],
            parameters: paging(),
        },
        Doc {
            path: "/api/v2/credits/users".into(),
            methods: &["get"],
            operation_id: "CreditsUsers".into(),
            tag: "billing",
            summary: "Every user's credits in the current cycle against their cap, by e-mail."
                .into(),
            description: desc(Endpoint::Credits),
            request: None,
            ok: page("data", schema_ref("UserCredits")),
            errors: errors(),
            media_type: JSON,
            also: vec![],
            parameters: [
                vec![param(
                    "min_percent",
                    false,
                    json!({"type": "integer", "minimum": 0, "maximum": MAX_MIN_PERCENT}),
                    "Only users with a cap who used at least this percentage of it (a cap of \
                     0 is reached by any use).",
                )],
                paging(),
            ]
            .concat(),
        },
        Doc {
            path: USER_PATH.into(),
            methods: &["get"],
            operation_id: "CreditsUser".into(),
            tag: "billing",
            summary: "One user's credits in the current cycle against their cap.".into(),
            description: format!(
                "Extension. Key: `Authorization: Bearer` with `{}`. Answered from memory: the \
                 check an assistant's backend makes before a costly request (`has_access`). \
                 404 when the e-mail is not a user of the team.",
                Endpoint::UserCredits.permission().identifier()
            ),
            request: None,
            ok: schema_ref("UserCredits"),
            errors: [errors(), vec![Code::NotFound]].concat(),
            media_type: JSON,
            also: vec![],
            parameters: vec![
                json!({"name": path_parameter(USER_PATH), "in": "path", "required": true,
                "schema": {"type": "string", "minLength": 1},
                "description": "The user's e-mail (percent-encoded where needed)."}),
            ],
        },
        Doc {
            path: "/api/v2/caps/preview".into(),
            methods: &["post"],
            operation_id: "CapsPreview".into(),
            tag: "billing",
            summary: "What a cap change would change, changing nothing.".into(),
            description: format!(
                "Extension. Key: `Authorization: Bearer` with `{}`; the body is `UsageConfig`'s \
                 (a key in it is not read), checked by the same rules. Every user whose cap, its \
                 source or `has_access` would change, with their credits before and after, in \
                 e-mail order, in keyset pages (`limit` and `cursor` in the query string; a \
                 cursor is bound to the body too). 404 for a group or user the team lacks.",
                Endpoint::Preview.permission().identifier()
            ),
            request: Some(schema_ref("UsageConfigRequest")),
            ok: page("data", change_schema()),
            errors: [
                errors(),
                vec![
                    Code::NotFound,
                    Code::PayloadTooLarge,
                    Code::UnsupportedMediaType,
                ],
            ]
            .concat(),
            media_type: JSON,
            also: vec![],
            parameters: paging(),
        },
    ]
}

/// The path of a user's credits, and the name of its parameter (between the braces).
const USER_PATH: &str = "/api/v2/credits/users/{email}";

fn path_parameter(path: &str) -> &str {
    path.rsplit('{')
        .next()
        .unwrap_or_default()
        .trim_end_matches('}')
}

/// The schema of a row of a preview, read off its serialization: the e-mail, and the
/// credits before and after.
fn change_schema() -> Value {
    let cycle = Cycle {
        start: Timestamp(0),
        end: Timestamp(0),
    };
    let c = UserCredits::new("", cycle, 0, Spend::default(), None);
    let row = serde_json::to_value(usage_core::credits::Change {
        email: "",
        before: &c,
        after: &c,
    })
    .expect("a change serializes");
    let Value::Object(row) = row else {
        unreachable!("a change is an object")
    };
    let properties: serde_json::Map<String, Value> = row
        .iter()
        .map(|(name, v)| {
            let schema = match v {
                Value::Object(_) => schema_ref("UserCredits"),
                _ => json!({"type": "string"}),
            };
            (name.clone(), schema)
        })
        .collect();
    json!({"type": "object", "required": row.keys().collect::<Vec<_>>(), "properties": properties})
}

/// The schema of a user's credits (contract section 12), read off its serialization so
/// that no property name is spelt here: a capped user shows every property, an uncapped
/// one those that are always present (required).
pub(super) fn credits_schema(time: &Value) -> Value {
    let cycle = Cycle {
        start: Timestamp(0),
        end: Timestamp(0),
    };
    let sample = |spend: Spend, cap| {
        serde_json::to_value(UserCredits::new("", cycle, 0, spend, cap)).expect("credits serialize")
    };
    let one = Spend {
        prompts: 1,
        flex: 1,
    };
    let (Value::Object(full), Value::Object(always)) = (
        sample(one, Some((1, CapSource::Team))),
        sample(Spend::default(), None),
    ) else {
        unreachable!("credits are an object")
    };
    let epoch = serde_json::to_value(Timestamp(0)).expect("a time serializes");
    let properties: serde_json::Map<String, Value> = full
        .into_iter()
        .map(|(name, v)| {
            let schema = match &v {
                Value::Bool(_) => json!({"type": "boolean"}),
                Value::Number(_) => json!({"type": "integer", "minimum": 0}),
                v if *v == epoch => time.clone(),
                // Credits with two decimals ("0.01", "-0.99"); the percentage with one.
                Value::String(t) if t.ends_with(".0") => {
                    json!({"type": "string", "pattern": "^[0-9]+\\.[0-9]$"})
                }
                Value::String(t) if t.starts_with("0.") => {
                    json!({"type": "string", "pattern": "^-?[0-9]+\\.[0-9]{2}$"})
                }
                _ => json!({"type": "string"}),
            };
            (name, schema)
        })
        .collect();
    json!({
        "type": "object",
        "description": "A user's credits in the team's current billing cycle against the cap \
            that applies to them (contract section 12). Amounts are decimal strings; without a \
            cap the cap's fields are absent and `has_access` is true.",
        "required": always.keys().collect::<Vec<_>>(),
        "properties": properties,
    })
}

/// The `action` of every audit entry: the caps', billing's and each [`AdminAction`]'s.
///
/// [`AdminAction`]: crate::store::AdminAction
fn audit_actions() -> Vec<&'static str> {
    let mut out = vec!["cap.change", "billing.change"];
    out.extend(crate::store::AdminAction::ALL.map(crate::store::AdminAction::as_str));
    out
}
