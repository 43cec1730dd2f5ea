//! The OpenAPI 3.1 document of the HTTP API (`GET /openapi.json`, `docs/openapi.json`).
//!
//! [`document`] builds it from the code that serves the API, so it cannot drift from it:
//! request bodies from each request's [`ObjectSpec`] (the field list the server decodes,
//! both spellings of every field), enums from the identifier lists of
//! [`usage_core::schema`], the fields of each data source and the record kinds of `Ingest`
//! from the schema tables, error responses from [`Code`]. No field list is written here.
//!
//! Each endpoint is one [`Endpoint`] in [`endpoints`]: to document a new one, add an entry
//! there (and its schemas to [`components`] if it has its own). A `GET` endpoint with query
//! parameters lists them in [`Endpoint::parameters`]; one that answers something other than
//! JSON (a metrics page) sets [`Endpoint::media_type`]. `UPDATE_DOCS=1 cargo test -p
//! usage-server --lib -- openapi_docs_are_current` then rewrites `docs/openapi.json`.
//!
//! The file is longer than the project's 700 lines on purpose: it is the document's
//! builder, one schema after another, and split by topic its pieces would name each
//! other's helpers in a circle; the v2 endpoints' entries, which read v2.rs's tables, are
//! a child (`openapi/v2.rs`).

use serde_json::{Map, Value, json};
use usage_core::plan::MAX_CAP;
use usage_core::schema::records::{KINDS, RecordKind, RecordType};
use usage_core::schema::{
    AgentMode, Agg, ChatIntent, CommandSource, FilterOp, IdeType, Permission, Plan, ProviderSource,
    SOURCES, Source, SourceSpec, TeamStatus, Tool,
};
use usage_core::wire::decode::{Kind, ObjectSpec, Request, camel};
use usage_core::wire::export::Format;
use usage_core::wire::{
    AgentAnalyticsRequest, AnalyticsRequest, GetTeamCreditBalanceRequest, GetUsageConfigRequest,
    IngestRequest, UsageConfigRequest, UserPageAnalyticsRequest, UserStats,
};
use usage_core::{Ident, time::Timestamp};

use super::Op;
use super::ops::permission;
use crate::error::Code;
use usage_core::validate::{ACTION_FIELDS as ACTIONS, SCOPE_FIELDS as SCOPES};

mod errors;
mod v2;
mod webhooks;

/// The media type of JSON bodies.
pub(super) const JSON: &str = "application/json";

/// The media types of `GET /metrics` (without their parameters): the Prometheus text
/// format 0.0.4, and OpenMetrics when the scraper's `Accept` asks for it.
const METRICS: [&str; 2] = ["text/plain", "application/openmetrics-text"];

/// What a tool identifier is, in `Tool` and in a record's `tool`.
const TOOL: &str = "A tool identifier of agent tool usage; records may carry others.";

/// The path the document is served at.
pub const PATH: &str = "/openapi.json";

/// One endpoint of the document: a path, its methods, and what each answers.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The path (`/api/v1/Analytics`).
    pub path: String,
    /// The methods, lowercase (`post`; `get` and `head` for reads).
    pub methods: &'static [&'static str],
    /// The operation id (one per method: `head` gets the id with a `Head` suffix).
    pub operation_id: String,
    /// A tag grouping related endpoints.
    pub tag: &'static str,
    /// One line.
    pub summary: String,
    /// More, Markdown.
    pub description: String,
    /// The JSON request body's schema, if the endpoint takes one.
    pub request: Option<Value>,
    /// The schema of the 200 answer's JSON body.
    pub ok: Value,
    /// The failures it answers, besides 200.
    pub errors: Vec<Code>,
    /// The media type of the 200 answer (`application/json`; `text/plain` for a metrics page).
    pub media_type: &'static str,
    /// Other media types of the 200 answer, chosen by `Accept`, with their schemas.
    pub also: Vec<(&'static str, Value)>,
    /// Path, query and header parameters, as OpenAPI Parameter Objects.
    pub parameters: Vec<Value>,
}

/// The OpenAPI 3.1 document of every endpoint, as JSON.
pub fn document() -> Value {
    let mut paths = Map::new();
    for e in endpoints() {
        let item = paths
            .entry(e.path.clone())
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("a path item is an object");
        for &m in e.methods {
            item.insert(m.to_string(), operation(&e, m));
        }
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "usage",
            "version": env!("CARGO_PKG_VERSION"),
            "summary": "Usage analytics, usage caps and team credit administration.",
            "description": "Every operation is `POST /api/v1/<Operation>` with a JSON body that carries \
                the `service_key`. Request fields are snake_case; the lowerCamelCase spelling of every \
                field is accepted too (not both at once). A JSON `false`, `\"\"`, `0`, `null`, `[]` or `{}` \
                for an optional field means \"not given\". Responses are lowerCamelCase; numbers in \
                `Analytics` results and agent entries are strings. Every response carries `x-request-id`; \
                every failure has the error body (`ErrorBody`). Generated from the server's code: \
                `docs/openapi.json`, served at `GET /openapi.json`.",
            "license": {"name": "MIT OR Apache-2.0", "identifier": "MIT OR Apache-2.0"},
        },
        "servers": [{"url": "http://127.0.0.1:8080", "description": "`usage-server serve` (default --listen)"}],
        "tags": [
            {"name": "analytics", "description": "Custom queries, agent data and user activity."},
            {"name": "billing", "description": "Add-on credit caps and the team credit balance."},
            {"name": "ingest", "description": "Loading records (extension)."},
            {"name": "service", "description": "Health and this document."},
        ],
        "paths": paths,
        "components": components(),
    })
}

/// Every endpoint, in the order of the document.
pub fn endpoints() -> Vec<Endpoint> {
    let mut out = vec![
        Endpoint {
            path: "/healthz".into(),
            methods: &["get", "head"],
            operation_id: "Health".into(),
            tag: "service",
            summary: "Whether the server and its store are up.".into(),
            description: "No key needed. `unreadable_records` counts stored rows that cannot be \
                read (they are left out of answers; `usage-server check` lists them). Other \
                methods: 405 with `Allow: GET, HEAD`."
                .into(),
            request: None,
            ok: schema_ref("Health"),
            errors: vec![Code::Unavailable],
            media_type: JSON,
            also: vec![],
            parameters: vec![],
        },
        Endpoint {
            path: PATH.into(),
            methods: &["get", "head"],
            operation_id: "OpenApi".into(),
            tag: "service",
            summary: "This document (OpenAPI 3.1).".into(),
            description: "No key needed. Other methods: 405 with `Allow: GET, HEAD`.".into(),
            request: None,
            ok: json!({"type": "object", "description": "An OpenAPI 3.1 document."}),
            errors: vec![],
            media_type: JSON,
            also: vec![],
            parameters: vec![],
        },
    ];
    out.push(Endpoint {
        path: "/metrics".into(),
        methods: &["get", "head"],
        operation_id: "Metrics".into(),
        tag: "service",
        summary: "Server metrics (Prometheus text format; OpenMetrics on request).".into(),
        description: "No key needed. Requests by operation and status, latencies, rate-limit \
            refusals, records ingested and held, the build and the process. The Prometheus \
            text format 0.0.4, or OpenMetrics 1.0 when `Accept` names \
            `application/openmetrics-text`. Not on the API's address when `serve \
            --metrics-listen` gives it one of its own (404 there). Other methods: 405."
            .into(),
        request: None,
        ok: json!({"type": "string"}),
        errors: vec![],
        media_type: METRICS[0],
        also: vec![(METRICS[1], json!({"type": "string"}))],
        parameters: vec![],
    });
    out.extend(Op::ALL.into_iter().map(op_endpoint));
    out.extend(v2::endpoints());
    out.extend(webhooks::endpoints());
    out
}

/// The endpoint of an operation of `/api/v1/{op}`.
fn op_endpoint(op: Op) -> Endpoint {
    let (tag, summary) = match op {
        Op::Analytics => (
            "analytics",
            "Custom analytics queries over a data source: selections, filters, group-by.",
        ),
        Op::UserPageAnalytics => ("analytics", "Every user of the team with their activity."),
        Op::AgentAnalytics => ("analytics", "Agent lines, runs and tool usage."),
        Op::GetUsageConfig => ("billing", "The add-on credit cap set at exactly one scope."),
        Op::UsageConfig => (
            "billing",
            "Sets or clears the add-on credit cap at one scope.",
        ),
        Op::GetTeamCreditBalance => (
            "billing",
            "The team's credit balance for the current billing cycle (enterprise plan).",
        ),
        Op::Ingest => ("ingest", "Loads records of one kind (extension)."),
    };
    let p = permission(op);
    // `Analytics` answers one query as CSV or NDJSON when `Accept` asks for it (export).
    let also = if op == Op::Analytics {
        Format::ALL
            .iter()
            .map(|f| {
                let media = f.content_type().split(';').next().unwrap_or_default().trim();
                (media, json!({
                    "type": "string",
                    "description": format!("Export (`Accept: {media}`): the one query's items as {}; a request with several queries is a 400.", f.name()),
                }))
            })
            .collect()
    } else {
        vec![]
    };
    let mut errors = vec![
        Code::InvalidArgument,
        Code::Unauthenticated,
        Code::PermissionDenied,
    ];
    // Names that resolve within the key's team (group, user) answer 404 when unknown.
    if !matches!(op, Op::GetTeamCreditBalance | Op::Ingest) {
        errors.push(Code::NotFound);
    }
    errors.extend([
        Code::RequestTimeout,
        Code::PayloadTooLarge,
        Code::UnsupportedMediaType,
        Code::ResourceExhausted,
        Code::Internal,
        Code::Unavailable,
    ]);
    Endpoint {
        path: format!("/api/v1/{}", op.name()),
        methods: &["post"],
        operation_id: op.name().into(),
        tag,
        summary: summary.into(),
        description: format!(
            "Needs a key with the permission `{}` ({}). Checks run in this order, the first \
             failure answering: size (413), `Content-Type` (415), JSON syntax and kinds (400), key \
             (401), rate (429), permission (403), validation (400, every violation listed), names \
             (404). Other methods: 405 with `Allow: POST`.",
            p.as_str(),
            p.title()
        ),
        request: Some(schema_ref(&format!("{}Request", op.name()))),
        ok: schema_ref(&format!("{}Response", op.name())),
        errors,
        media_type: JSON,
        also,
        parameters: vec![],
    }
}

/// The schema of a user row of `UserPageAnalytics`, read off the wire type's own
/// serialization, so that its property names are serde's and never spelt here: a row with
/// every field set shows every property and its kind, and the properties an empty row
/// still has are required.
fn user_stats_schema(time: &Value) -> Value {
    let at = Timestamp(0);
    let row = |full: bool| {
        let some = |t| full.then_some(t);
        serde_json::to_value(UserStats {
            name: String::new(),
            email: String::new(),
            last_update_time: some(at),
            api_key: String::new(),
            active_days: 0,
            disable_vendor: full.then_some(true),
            last_autocomplete_usage_time: some(at),
            last_chat_usage_time: some(at),
            last_command_usage_time: some(at),
            team_status: Ident::Known(TeamStatus::Approved),
            signup_time: some(at),
        })
        .expect("a user row serializes")
    };
    let (Value::Object(full), Value::Object(empty)) = (row(true), row(false)) else {
        unreachable!("a user row is an object")
    };
    let epoch = serde_json::to_value(at).expect("a time serializes");
    let status = serde_json::to_value(Ident::Known(TeamStatus::Approved)).expect("serializes");
    let properties: Map<String, Value> = full
        .into_iter()
        .map(|(name, v)| {
            let schema = match v {
                // `enum: [true]`, not `const: true`: openapi-python-client 0.29 writes a
                // boolean `const` into Python it cannot parse.
                Value::Bool(_) => json!({"type": "boolean", "enum": [true], "description": "Present only when an administrator disabled the user's access."}),
                Value::Number(_) => json!({"type": "integer", "minimum": 0}),
                v if v == epoch => time.clone(),
                v if v == status => schema_ref("TeamStatus"),
                _ => json!({"type": "string"}),
            };
            (name, schema)
        })
        .collect();
    json!({
        "type": "object",
        "required": empty.keys().collect::<Vec<_>>(),
        "properties": properties,
    })
}

pub(super) fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

fn operation(e: &Endpoint, method: &str) -> Value {
    let mut responses = Map::new();
    let ok = if method == "head" {
        json!({"description": "OK (no body).", "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}}})
    } else {
        json!({
            "description": "OK.",
            "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
            "content": {e.media_type: {"schema": e.ok}},
        })
    };
    let mut ok = ok;
    // A HEAD answer has no body, so no media types.
    for (media, schema) in e.also.iter().filter(|_| method != "head") {
        ok["content"][*media] = json!({"schema": schema});
    }
    match webhooks::STATUS
        .iter()
        .find(|(id, _)| *id == e.operation_id)
    {
        Some((_, 204)) => {
            responses.insert(
                "204".into(),
                json!({"description": "No content.", "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}}}),
            );
        }
        Some((_, status)) => {
            responses.insert(status.to_string(), ok);
        }
        None => {
            responses.insert("200".into(), ok);
        }
    }
    for c in &e.errors {
        responses.insert(
            c.status().as_u16().to_string(),
            json!({"$ref": format!("#/components/responses/{}", c.as_str())}),
        );
    }
    let mut op = json!({
        "operationId": if method == "head" { format!("{}Head", e.operation_id) } else { e.operation_id.clone() },
        "tags": [e.tag],
        "summary": e.summary,
        "description": e.description,
        "responses": responses,
    });
    if !e.parameters.is_empty() {
        op["parameters"] = json!(e.parameters);
    }
    if e.path.starts_with("/api/v2/") {
        // The GET endpoints: the key only by `Authorization: Bearer`; ETag and 304.
        op["security"] = json!([{"bearerKey": []}]);
    }
    if e.path.starts_with("/api/v2/") && !e.path.starts_with(crate::http::v2::webhooks::PATH) {
        if method == "get" {
            op["responses"]["200"]["headers"]["ETag"] = json!({
                "description": "A digest of the body: send it in If-None-Match to get 304 while the answer is unchanged.",
                "schema": {"type": "string"},
            });
        }
        op["responses"]["304"] = json!({
            "description": "Not modified: `If-None-Match` names the answer's ETag (no body).",
            "headers": {"x-request-id": {"$ref": "#/components/headers/RequestId"}},
        });
    }
    if let Some(schema) = &e.request {
        op["requestBody"] = json!({
            "required": true,
            "content": {"application/json": {"schema": schema}},
        });
        // The key travels in the body; `Authorization: Bearer` is the extension's fallback.
        if !e.path.starts_with("/api/v2/") {
            op["security"] = json!([{}, {"bearerKey": []}]);
        }
    }
    op
}

/// The shared parts: schemas, error responses, headers, the bearer scheme.
pub fn components() -> Value {
    let mut schemas = Map::new();
    let enums: [(&str, &str, &[&str]); 11] = [
        (
            "DataSource",
            "A data source of custom queries.",
            Source::IDENTIFIERS,
        ),
        (
            "AggregationFunction",
            "The aggregation function of a selection.",
            Agg::IDENTIFIERS,
        ),
        (
            "FilterOperator",
            "The comparison of a filter.",
            FilterOp::IDENTIFIERS,
        ),
        (
            "ChatIntent",
            "Values of `latest_intent_type`.",
            ChatIntent::IDENTIFIERS,
        ),
        (
            "CommandSource",
            "Values of `command_source`.",
            CommandSource::IDENTIFIERS,
        ),
        (
            "ProviderSource",
            "Values of `provider_source`.",
            ProviderSource::IDENTIFIERS,
        ),
        ("AgentMode", "Agent modes (`mode`).", AgentMode::IDENTIFIERS),
        (
            "IdeType",
            "Where agent data came from.",
            IdeType::IDENTIFIERS,
        ),
        (
            "TeamStatus",
            "A user's status on the team.",
            TeamStatus::IDENTIFIERS,
        ),
        ("Plan", "A team's plan.", Plan::IDENTIFIERS),
        (
            "Permission",
            "A permission a service key can hold.",
            Permission::IDENTIFIERS,
        ),
    ];
    for (name, what, ids) in enums {
        schemas.insert(
            name.into(),
            json!({"type": "string", "description": what, "enum": ids}),
        );
    }
    schemas.insert(
        "RecordKind".into(),
        json!({"type": "string", "description": "A record kind of `Ingest`.",
               "enum": KINDS.iter().map(|k| k.name).collect::<Vec<_>>()}),
    );
    schemas.insert(
        "Tool".into(),
        json!({"type": "string", "description": TOOL, "examples": Tool::IDENTIFIERS}),
    );
    schemas.insert(
        "Empty".into(),
        json!({"type": "object", "properties": {}, "additionalProperties": false, "description": "The empty object `{}`."}),
    );
    requests(&mut schemas);
    responses(&mut schemas);
    errors::schemas(&mut schemas);
    let responses = errors::responses();
    json!({
        "schemas": schemas,
        "responses": responses,
        "headers": {
            "RequestId": {
                "description": "The request id: a valid incoming `x-request-id` (1-128 of `[A-Za-z0-9._:-]`) echoed, else a new one.",
                "required": true,
                "schema": {"type": "string"},
            },
        },
        "securitySchemes": {
            "bearerKey": {
                "type": "http",
                "scheme": "bearer",
                "description": "Extension: the service key as `Authorization: Bearer <key>`, read only when the body has no `service_key`/`serviceKey`.",
            },
        },
    })
}

// -----------------------------------------------------------------------------------------
// Requests

/// The schema of a field of `kind`; `required` makes strings non-empty and arrays non-empty
/// (an empty value means "not given", and a required field not given is `missing_field`).
fn kind_schema(kind: &Kind, required: bool) -> Value {
    match kind {
        Kind::Text if required => json!({"type": "string", "minLength": 1}),
        Kind::Text | Kind::TextKeepEmpty => json!({"type": "string"}),
        Kind::Bool => json!({"type": "boolean"}),
        Kind::Int => json!({"anyOf": [
            {"type": "integer"},
            {"type": "string", "pattern": "^-?[0-9]+$", "description": "a decimal integer"},
        ]}),
        Kind::Array(elem) => {
            let mut s = json!({"type": "array", "items": kind_schema(elem, false)});
            if required {
                s["minItems"] = json!(1);
            }
            s
        }
        // A marker without fields is the named `Empty`: inline, the two spellings of its
        // field would make two classes of one name in a generated client.
        Kind::Marker(spec) if spec.fields.is_empty() => schema_ref("Empty"),
        Kind::Object(spec) | Kind::Marker(spec) => object(spec, &[], &[], ""),
        Kind::AnyObject => json!({"type": "object"}),
    }
}

/// `schema` or `null` ("not given").
fn nullable(mut schema: Value) -> Value {
    match schema.get("type").cloned() {
        Some(Value::String(t)) if schema.get("enum").is_none() => {
            schema["type"] = json!([t, "null"]);
            schema
        }
        _ => json!({"anyOf": [schema, {"type": "null"}]}),
    }
}

/// The schema of a request object: each field of `spec` under both spellings (the
/// lowerCamelCase one described as an alias), with `over` replacing the schema of a field
/// whose [`Kind`] does not say enough (enums, per-source field names). `required` fields
/// must be given under one of their spellings; the others may be `null`.
fn object(
    spec: &ObjectSpec,
    required: &[&str],
    over: &[(&str, Value)],
    description: &str,
) -> Value {
    let names: Vec<Prop> = spec
        .fields
        .iter()
        .map(|f| {
            let req = required.contains(&f.name);
            let schema = over
                .iter()
                .find(|(n, _)| *n == f.name)
                .map_or_else(|| kind_schema(&f.kind, req), |(_, s)| s.clone());
            Prop {
                snake: f.name,
                camel: camel(f.name),
                required: req,
                schema: if req { schema } else { nullable(schema) },
                not_given: not_given(&f.kind),
            }
        })
        .collect();
    fields_object(&names, description)
}

/// What a value of `kind` must be to count as given (section 1: `""`, `false`, `null`, `[]`
/// and `{}` mean "not given"; an integer is given unless `null`; a marker `{}` is a value).
fn given(kind: &Kind) -> Value {
    match kind {
        Kind::Text => json!({"type": "string", "minLength": 1}),
        Kind::TextKeepEmpty => json!({"type": "string"}),
        Kind::Bool => json!({"type": "boolean", "enum": [true]}),
        Kind::Int => kind_schema(kind, true),
        Kind::Array(_) => json!({"type": "array", "items": {}, "minItems": 1}),
        Kind::Object(_) => json!({"type": "object", "minProperties": 1}),
        Kind::Marker(_) | Kind::AnyObject => json!({"type": "object"}),
    }
}

/// The values of `kind` that mean "not given" (section 1).
fn not_given(kind: &Kind) -> Value {
    match kind {
        Kind::Text => json!({"enum": ["", null]}),
        Kind::Bool => json!({"enum": [false, null]}),
        Kind::Array(_) => {
            json!({"anyOf": [{"type": "array", "items": {}, "maxItems": 0}, {"type": "null"}]})
        }
        Kind::Object(_) => {
            json!({"anyOf": [{"type": "object", "maxProperties": 0}, {"type": "null"}]})
        }
        Kind::TextKeepEmpty | Kind::Int | Kind::Marker(_) | Kind::AnyObject => {
            json!({"type": "null"})
        }
    }
}

/// Field `name` of `spec` is given, in one of its spellings.
fn given_any(spec: &ObjectSpec, name: &str) -> Value {
    let f = spec
        .fields
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("`{name}` is not a field"));
    let g = given(&f.kind);
    let c = camel(name);
    let mut branches = vec![json!({"required": [name], "properties": {name: g}})];
    if c != name {
        branches.push(json!({"required": [c], "properties": {c: g}}));
    }
    json!({"anyOf": branches})
}

/// Fields `a` and `b` of `spec` are not both given, in any of their spellings.
fn not_together(spec: &ObjectSpec, a: &str, b: &str) -> Vec<Value> {
    let field = |name: &str| {
        let f = spec
            .fields
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("`{name}` is not a field"));
        let mut names = vec![f.name.to_string()];
        if camel(f.name) != f.name {
            names.push(camel(f.name));
        }
        (names, given(&f.kind))
    };
    let ((an, ag), (bn, bg)) = (field(a), field(b));
    let mut out = Vec::new();
    for x in &an {
        for y in &bn {
            out.push(json!({"not": {"required": [x, y], "properties": {x.as_str(): ag, y.as_str(): bg}}}));
        }
    }
    out
}

/// Exactly one of `names` (fields of `spec`) is given: a scope, an action, an agent source.
fn exactly_one(spec: &ObjectSpec, names: &[&str]) -> Value {
    json!({"oneOf": names.iter().map(|n| given_any(spec, n)).collect::<Vec<_>>()})
}

/// `schema` with `extra` constraints added to its `allOf`.
fn with_all_of(mut schema: Value, extra: impl IntoIterator<Item = Value>) -> Value {
    let mut all = schema
        .get("allOf")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    all.extend(extra);
    schema["allOf"] = json!(all);
    schema
}

/// A field of a request object or record, for [`fields_object`].
struct Prop {
    /// The snake_case name.
    snake: &'static str,
    /// The lowerCamelCase name (the same for one-word names).
    camel: String,
    /// Whether it must be given.
    required: bool,
    /// Its schema when given (for an optional field, also its "not given" values).
    schema: Value,
    /// The values that mean "not given".
    not_given: Value,
}

/// An object of these fields, no others: a required field given in one of its spellings
/// (the other may then hold a "not given" value). That both spellings are not given at once
/// (rule `conflicting_fields`) is said in words only: as `not` constraints, one per field,
/// it makes the schema too large for schemathesis to generate from.
fn fields_object(fields: &[Prop], description: &str) -> Value {
    let mut props = Map::new();
    let mut plain = Vec::new();
    let mut all = Vec::new();
    for p in fields {
        let (snake, camel) = (p.snake, p.camel.as_str());
        if camel == snake {
            props.insert(snake.into(), p.schema.clone());
            if p.required {
                plain.push(json!(snake));
            }
            continue;
        }
        let schema = if p.required {
            json!({"anyOf": [p.schema, p.not_given]})
        } else {
            p.schema.clone()
        };
        props.insert(snake.into(), schema.clone());
        let mut alias = schema;
        if let Some(o) = alias.as_object_mut() {
            o.insert(
                "description".into(),
                json!(format!(
                    "The lowerCamelCase spelling of `{snake}`. Give one of the two: both with \
                     values is a 400 (`conflicting_fields`)."
                )),
            );
        }
        props.insert(camel.into(), alias);
        if p.required {
            all.push(json!({"anyOf": [
                {"required": [snake], "properties": {snake: p.schema}},
                {"required": [camel], "properties": {camel: p.schema}},
            ]}));
        }
    }
    let mut s = json!({"type": "object", "properties": props, "additionalProperties": false});
    if !description.is_empty() {
        s["description"] = json!(description);
    }
    if !plain.is_empty() {
        s["required"] = json!(plain);
    }
    if !all.is_empty() {
        s["allOf"] = json!(all);
    }
    s
}

/// The object spec of field `name` of `spec` (through arrays).
fn nested(spec: &'static ObjectSpec, name: &str) -> &'static ObjectSpec {
    let f = spec
        .fields
        .iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("`{name}` is not a field"));
    let mut k = &f.kind;
    loop {
        match k {
            Kind::Array(e) => k = e,
            Kind::Object(s) | Kind::Marker(s) => return s,
            _ => panic!("`{name}` holds no object"),
        }
    }
}

/// The names of a source's fields that satisfy `pred`: an enum, and for the
/// `date UTC±H[:MM]` and `date <IANA zone>` family, patterns.
fn field_names(s: &SourceSpec, pred: impl Fn(&usage_core::schema::Field) -> bool) -> Value {
    let names: Vec<&str> = s
        .fields
        .iter()
        .filter(|f| pred(f) && !f.is_local_date())
        .map(|f| f.name)
        .collect();
    let names = json!({"type": "string", "enum": names});
    if s.fields.iter().any(|f| pred(f) && f.is_local_date()) {
        json!({"anyOf": [names, {
            "type": "string",
            "pattern": "^date UTC[+-][0-9]{1,2}(:[0-9]{2})?$",
            "description": "The date at an offset from UTC, −12:00 to +14:00 (`date UTC-8`, `date UTC+5:30`).",
        }, {
            "type": "string",
            "pattern": "^date [A-Za-z][A-Za-z0-9_+/-]*$",
            "description": "Extension: the date in an IANA time zone of the server's database, any case \
                (`date America/New_York`), daylight saving time applied per instant.",
        }]})
    } else {
        names
    }
}

/// Request schemas: one per operation, a query schema per data source, a record schema per
/// record kind.
fn requests(schemas: &mut Map<String, Value>) {
    let key_note = "The service key is read from `service_key`, else `serviceKey`, else `Authorization: Bearer`; \
        without any: 401.";

    // Analytics: one query schema per data source, its field names from the table.
    let analytics = AnalyticsRequest::SPEC;
    let query = nested(analytics, "query_requests");
    let (selection, filter, aggregation) = (
        nested(query, "selections"),
        nested(query, "filters"),
        nested(query, "aggregations"),
    );
    let mut variants = Vec::new();
    for s in SOURCES {
        let id = s.source.as_str();
        let name = format!("Query_{id}");
        let sel = object(
            selection,
            &["field"],
            &[
                ("field", field_names(s, |f| f.select)),
                ("aggregation_function", schema_ref("AggregationFunction")),
            ],
            "A field to retrieve. Default alias: the field for UNSPECIFIED, else `{function}_{field}` in lower case.",
        );
        let fil = object(
            filter,
            &["name", "filter", "value"],
            &[
                ("name", field_names(s, |f| f.filter)),
                ("filter", schema_ref("FilterOperator")),
            ],
            "A filter (AND; several QUERY_FILTER_EQUAL on one field match any of their values).",
        );
        let aggs = if s.groupable {
            json!({"type": "array", "items": object(
                aggregation,
                &["field", "name"],
                &[("field", field_names(s, |f| f.group))],
                "A group-by field and the alias of its value.",
            )})
        } else {
            json!({"type": "array", "items": {}, "maxItems": 0, "description": "This source has no group-by fields."})
        };
        schemas.insert(
            name.clone(),
            object(
                query,
                &["data_source", "selections"],
                &[
                    ("data_source", json!({"type": "string", "enum": [id]})),
                    (
                        "selections",
                        json!({"type": "array", "minItems": 1, "items": sel}),
                    ),
                    ("filters", json!({"type": "array", "items": fil})),
                    ("aggregations", aggs),
                ],
                &format!("A query of {}: {}.", id, s.title),
            ),
        );
        variants.push(schema_ref(&name));
    }
    schemas.insert(
        "AnalyticsRequest".into(),
        object(
            analytics,
            &["query_requests"],
            &[(
                "query_requests",
                json!({"type": "array", "minItems": 1, "items": {"oneOf": variants}}),
            )],
            &format!(
                "Custom queries. `group_name` restricts every query to its members; the period \
                 (RFC 3339) restricts PCW queries only. Query rules: all selections aggregated or \
                 none; no `distinct_*` in `aggregations`; aliases unique; each aggregation valid for \
                 its field. {key_note}"
            ),
        ),
    );

    schemas.insert(
        "UserPageAnalyticsRequest".into(),
        object(
            UserPageAnalyticsRequest::SPEC,
            &[],
            &[],
            &format!(
                "`group_name` restricts the users listed; the period (RFC 3339, start inclusive, end exclusive) the days counted. {key_note}"
            ),
        ),
    );

    let agent = AgentAnalyticsRequest::SPEC;
    let agent_query = nested(agent, "query_requests");
    let sources: Vec<&str> = agent_query.names().collect();
    // Named, not inline: under both spellings of `query_requests` an inline object would
    // be two classes of one name in a generated client.
    schemas.insert(
        "AgentQuery".into(),
        with_all_of(
            object(
                agent_query,
                &[],
                &[],
                "Exactly one data source key, with the value `{}`.",
            ),
            [exactly_one(agent_query, &sources)],
        ),
    );
    schemas.insert(
        "AgentAnalyticsRequest".into(),
        with_all_of(object(
            agent,
            &["query_requests"],
            &[
                (
                    "ide_types",
                    json!({"type": "array", "items": schema_ref("IdeType")}),
                ),
                (
                    "query_requests",
                    json!({"type": "array", "minItems": 1, "items": schema_ref("AgentQuery")}),
                ),
            ],
            &format!(
                "`group_name` and `emails` restrict the users (not both); `ide_types` the sources (empty: both). {key_note}"
            ),
        ), not_together(agent, "group_name", "emails")),
    );

    let [team, group, user] = SCOPES;
    let scope = format!("Exactly one scope: `{team}: true`, `{group}` or `{user}` (rule `scope`).");
    let get = GetUsageConfigRequest::SPEC;
    schemas.insert(
        "GetUsageConfigRequest".into(),
        with_all_of(
            object(get, &[], &[], &format!("{scope} {key_note}")),
            [exactly_one(get, &SCOPES)],
        ),
    );
    let set = UsageConfigRequest::SPEC;
    schemas.insert(
        "UsageConfigRequest".into(),
        with_all_of(object(
            set,
            &[],
            &[(
                ACTIONS[1],
                json!({"anyOf": [
                    {"type": "integer", "minimum": 0, "maximum": MAX_CAP},
                    {"type": "string", "pattern": "^-?[0-9]+$", "description": "a decimal integer"},
                ]}),
            )],
            &format!(
                "{scope} Exactly one action: `{clear}: true` or `{set}` \
                 (an integer in 0..={MAX_CAP}; `0` sets a cap of 0) (rule `action`). {key_note}",
                clear = ACTIONS[0],
                set = ACTIONS[1],
            ),
        ), [exactly_one(set, &SCOPES), exactly_one(set, &ACTIONS)]),
    );
    schemas.insert(
        "GetTeamCreditBalanceRequest".into(),
        object(GetTeamCreditBalanceRequest::SPEC, &[], &[], key_note),
    );

    // Ingest: one variant per record kind, its record schema from the kind's table.
    let mut variants = Vec::new();
    for k in KINDS {
        let name = format!("Record_{}", k.name);
        schemas.insert(name.clone(), record(k));
        let variant = format!("Ingest_{}", k.name);
        schemas.insert(
            variant.clone(),
            object(
                IngestRequest::SPEC,
                &["kind"],
                &[
                    ("kind", json!({"type": "string", "enum": [k.name]})),
                    (
                        "records",
                        json!({"type": "array", "items": schema_ref(&name)}),
                    ),
                ],
                &format!("Ingest of `{}` records.", k.name),
            ),
        );
        variants.push(schema_ref(&variant));
    }
    schemas.insert(
        "IngestRequest".into(),
        json!({
            "description": format!(
                "Loads records of one kind, all or nothing (at most 10,000 by default). A record with \
                 the identity of a stored one replaces it. Needs `usage-write`. {key_note}"
            ),
            "oneOf": variants,
        }),
    );
}

/// The schema of one record of `kind`: every field of its table, both spellings.
fn record(kind: &RecordKind) -> Value {
    let fields: Vec<Prop> = kind
        .fields
        .iter()
        .map(|f| {
            let s = match f.ty {
                RecordType::Text if f.required => json!({"type": "string", "minLength": 1}),
                RecordType::Text => json!({"type": "string"}),
                RecordType::Hour => {
                    json!({"type": "string", "format": "date-time", "description": "RFC 3339, the start of a UTC hour."})
                }
                RecordType::Timestamp => json!({"type": "string", "format": "date-time"}),
                RecordType::Day => json!({"type": "string", "format": "date"}),
                RecordType::Count => json!({"anyOf": [
                    {"type": "integer", "minimum": 0},
                    {"type": "string", "pattern": "^[0-9]+$"},
                ]}),
                RecordType::Bool => json!({"type": "boolean"}),
                RecordType::Enum(ids) => json!({"type": "string", "enum": ids}),
                RecordType::GroupIds => {
                    json!({"type": "array", "items": {"type": "string", "minLength": 1}})
                }
            };
            // A tool is a string of the record's and `Tool`'s examples, in one schema: an
            // `allOf` of a string is not an object, which generators cannot take.
            let s = if f.name == "tool" {
                let mut s = s;
                s["examples"] = json!(Tool::IDENTIFIERS);
                s["description"] = json!(TOOL);
                s
            } else {
                s
            };
            // In a record, only `null` means "not given".
            Prop {
                snake: f.name,
                camel: camel(f.name),
                required: f.required,
                schema: if f.required { s } else { nullable(s) },
                not_given: json!({"type": "null"}),
            }
        })
        .collect();
    let identity = if kind.identity.is_empty() {
        "the team".to_string()
    } else {
        kind.identity.join(", ")
    };
    fields_object(
        &fields,
        &format!(
            "A `{}` record (identity: {identity}). Text values are at most 1024 bytes of UTF-8; times within years 1970-9999.",
            kind.name
        ),
    )
}

// -----------------------------------------------------------------------------------------
// Responses

fn responses(schemas: &mut Map<String, Value>) {
    let string_int = json!({"type": "string", "pattern": "^[0-9]+$"});
    let time = json!({"type": "string", "format": "date-time"});
    schemas.insert(
        "Health".into(),
        json!({
            "type": "object",
            "required": ["status", "unreadable_records"],
            "properties": {
                "status": {"const": "ok"},
                "unreadable_records": {"type": "integer", "minimum": 0},
            },
        }),
    );
    let fields: Vec<String> = SOURCES
        .iter()
        .map(|s| {
            format!(
                "{}: {}",
                s.source.as_str(),
                s.fields
                    .iter()
                    .map(|f| format!("`{}`", f.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    schemas.insert("AnalyticsResponse".into(), json!({
        "type": "object",
        "required": ["queryResults"],
        "properties": {"queryResults": {
            "type": "array",
            "description": "One result per query request, in request order.",
            "items": {
                "type": "object",
                "required": ["responseItems"],
                "properties": {"responseItems": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["item"],
                        "properties": {"item": {
                            "type": "object",
                            "description": format!(
                                "Alias -> value, every value a string (numbers too): selection aliases in request order, \
                                 then aggregation aliases. Fields by source: {}.",
                                fields.join("; ")
                            ),
                            "additionalProperties": {"type": "string"},
                        }},
                    },
                }},
            },
        }},
    }));
    schemas.insert("UserStats".into(), user_stats_schema(&time));
    schemas.insert("UserCredits".into(), v2::credits_schema(&time));
    schemas.insert("BillingState".into(), json!({
        "type": "object",
        "description": "A team's billing, as an audit entry of scope `billing` shows it (the fields of a `billing` record).",
        "required": ["plan", "num_seats", "prompt_credits_per_seat", "billing_cycle_start", "billing_cycle_end", "add_on_credits_available", "add_on_credits_used"],
        "properties": {
            "plan": {"type": "string", "enum": usage_core::schema::Plan::IDENTIFIERS},
            "num_seats": {"type": "integer", "minimum": 0},
            "prompt_credits_per_seat": {"type": "integer", "minimum": 0},
            "billing_cycle_start": time,
            "billing_cycle_end": time,
            "add_on_credits_available": {"type": "integer", "minimum": 0},
            "add_on_credits_used": {"type": "integer", "minimum": 0},
        },
    }));
    schemas.insert("UserPageAnalyticsResponse".into(), json!({
        "type": "object",
        "required": ["userTableStats"],
        "properties": {
            "userTableStats": {"type": "array", "items": schema_ref("UserStats"), "description": "Ordered by e-mail."},
        },
    }));
    let list = |key: &str, entry: Value| json!({"type": "object", "required": [key], "properties": {key: {"type": "array", "items": entry}}});
    schemas.insert("AgentAnalyticsResponse".into(), json!({
        "type": "object",
        "required": ["queryResults"],
        "properties": {"queryResults": {
            "type": "array",
            "description": "One result per query request: the key of its data source.",
            "items": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "properties": {
                    "agentLines": list("agentLines", json!({
                        "type": "object",
                        "required": ["day", "linesSuggested"],
                        "properties": {"day": time, "linesSuggested": string_int, "linesAccepted": string_int},
                    })),
                    "agentRuns": list("agentRuns", json!({
                        "type": "object",
                        "required": ["day", "model", "mode", "messagesSent", "agentId"],
                        "properties": {
                            "day": time,
                            "model": {"type": "string"},
                            "mode": schema_ref("AgentMode"),
                            "messagesSent": string_int,
                            "agentId": {"type": "string"},
                            "promptsUsed": string_int,
                        },
                    })),
                    "agentToolUsage": list("agentToolUsage", json!({
                        "type": "object",
                        "required": ["tool", "count"],
                        "properties": {"tool": schema_ref("Tool"), "count": string_int},
                    })),
                },
            },
        }},
    }));
    schemas.insert(
        "GetUsageConfigResponse".into(),
        json!({
            "type": "object",
            "description": "`{}` when no cap is set at the scope.",
            "properties": {"addOnCreditCap": {"type": "integer", "minimum": 0}},
        }),
    );
    schemas.insert("UsageConfigResponse".into(), json!({
        "type": "object", "maxProperties": 0, "description": "The empty message `{}`, once the change is durable.",
    }));
    schemas.insert("GetTeamCreditBalanceResponse".into(), json!({
        "type": "object",
        "required": ["promptCreditsPerSeat", "numSeats", "addOnCreditsAvailable", "addOnCreditsUsed", "billingCycleStart", "billingCycleEnd"],
        "properties": {
            "promptCreditsPerSeat": {"type": "integer"},
            "numSeats": {"type": "integer"},
            "addOnCreditsAvailable": {"type": "integer"},
            "addOnCreditsUsed": {"type": "integer"},
            "billingCycleStart": time,
            "billingCycleEnd": time,
        },
    }));
    schemas.insert("IngestResponse".into(), json!({
        "type": "object",
        "required": ["accepted"],
        "properties": {"accepted": {"type": "integer", "minimum": 0, "description": "The number of records sent."}},
    }));
}

#[cfg(test)]
mod statuses;
#[cfg(test)]
mod tests;
