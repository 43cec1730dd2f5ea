//! The wire model: request and response types of every operation (spec, contract section 1).
//!
//! Requests are *as sent*: every field optional, enum values kept even when unknown
//! ([`Ident`]), so that the validator can report every violation with its path. Read a
//! body with [`decode::decode`], which applies the contract's spelling, kind and "not
//! given" rules; the serde derives accept both spellings too, for programs that build or
//! read requests directly. Responses are lowerCamelCase; their integers decode from a
//! JSON number or a decimal string, and an absent number reads as zero.

pub mod decode;
pub mod lenient;

use serde::{Deserialize, Serialize};

use crate::ident::Ident;
use crate::schema::{AgentMode, Agg, FilterOp, IdeType, Source, TeamStatus};
use crate::time::Timestamp;
use decode::{FieldSpec, Kind, ObjectSpec, Request};

const fn f(name: &'static str, kind: Kind) -> FieldSpec {
    FieldSpec { name, kind }
}

// ---------------------------------------------------------------------------------------
// Analytics

/// `POST /api/v1/Analytics`: custom analytics queries.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnalyticsRequest {
    /// The service key (Analytics Read).
    #[serde(default, alias = "serviceKey", skip_serializing_if = "Option::is_none")]
    pub service_key: Option<String>,
    /// Restricts every query to members of this group.
    #[serde(default, alias = "groupName", skip_serializing_if = "Option::is_none")]
    pub group_name: Option<String>,
    /// RFC 3339; restricts PCW queries to records with `start <= hour`.
    #[serde(
        default,
        alias = "startTimestamp",
        skip_serializing_if = "Option::is_none"
    )]
    pub start_timestamp: Option<String>,
    /// RFC 3339; restricts PCW queries to records with `hour < end`.
    #[serde(
        default,
        alias = "endTimestamp",
        skip_serializing_if = "Option::is_none"
    )]
    pub end_timestamp: Option<String>,
    /// The queries, answered in this order.
    #[serde(
        default,
        alias = "queryRequests",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub query_requests: Vec<QueryRequest>,
}

/// One custom query.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryRequest {
    /// The data source.
    #[serde(default, alias = "dataSource", skip_serializing_if = "Option::is_none")]
    pub data_source: Option<Ident<Source>>,
    /// The fields to retrieve.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selections: Vec<Selection>,
    /// Filters (AND, except several EQUAL on one field: any of their values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<Filter>,
    /// Group-by fields.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregations: Vec<Aggregation>,
}

/// A field to retrieve.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// A field of the data source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The alias; default `{function}_{field}` in lower case, or the field for UNSPECIFIED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The aggregation function (default `QUERY_AGGREGATION_UNSPECIFIED`).
    #[serde(
        default,
        alias = "aggregationFunction",
        skip_serializing_if = "Option::is_none"
    )]
    pub aggregation_function: Option<Ident<Agg>>,
}

/// A filter.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// The field to filter on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<Ident<FilterOp>>,
    /// The comparison value, as a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// A group-by field.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aggregation {
    /// The field to group by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The alias of the group's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

pub(crate) static SELECTION: ObjectSpec = ObjectSpec {
    fields: &[
        f("field", Kind::Text),
        f("name", Kind::Text),
        f("aggregation_function", Kind::Text),
    ],
};
pub(crate) static FILTER: ObjectSpec = ObjectSpec {
    fields: &[
        f("name", Kind::Text),
        f("filter", Kind::Text),
        f("value", Kind::TextKeepEmpty),
    ],
};
pub(crate) static AGGREGATION: ObjectSpec = ObjectSpec {
    fields: &[f("field", Kind::Text), f("name", Kind::Text)],
};
pub(crate) static QUERY: ObjectSpec = ObjectSpec {
    fields: &[
        f("data_source", Kind::Text),
        f("selections", Kind::Array(&Kind::Object(&SELECTION))),
        f("filters", Kind::Array(&Kind::Object(&FILTER))),
        f("aggregations", Kind::Array(&Kind::Object(&AGGREGATION))),
    ],
};
pub(crate) static ANALYTICS: ObjectSpec = ObjectSpec {
    fields: &[
        f("service_key", Kind::Text),
        f("group_name", Kind::Text),
        f("start_timestamp", Kind::Text),
        f("end_timestamp", Kind::Text),
        f("query_requests", Kind::Array(&Kind::Object(&QUERY))),
    ],
};

pub(crate) mod specs {
    //! The object specs, for building paths in validators.
    pub(crate) use super::{
        AGENT_ANALYTICS, ANALYTICS, GET_USAGE_CONFIG, INGEST, QUERY, USAGE_CONFIG, USER_PAGE,
    };
    pub(crate) use super::{AGGREGATION, FILTER, SELECTION};
}

impl Request for AnalyticsRequest {
    const SPEC: &'static ObjectSpec = &ANALYTICS;
}

/// The answer of `Analytics`: one result per query request, in request order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AnalyticsResponse {
    /// One element per query request.
    #[serde(rename = "queryResults", alias = "query_results", default)]
    pub query_results: Vec<QueryResult>,
}

/// The items of one query.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct QueryResult {
    /// One item per group, per record (raw rows) or one item (no group-by).
    #[serde(rename = "responseItems", alias = "response_items", default)]
    pub response_items: Vec<ResponseItem>,
}

/// One result row.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResponseItem {
    /// Alias -> value.
    #[serde(default)]
    pub item: Item,
}

/// A result row: aliases and their values as strings, in order (selection aliases in
/// request order, then aggregation aliases). Decoding accepts numbers and booleans too.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Item(pub Vec<(String, String)>);

impl Item {
    /// The value of an alias.
    pub fn get(&self, alias: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == alias)
            .map(|(_, v)| v.as_str())
    }

    /// The aliases, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_str())
    }
}

impl Serialize for Item {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let m = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let mut out = Vec::with_capacity(m.len());
        for (k, v) in m {
            let s = match v {
                serde_json::Value::String(s) => s,
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                serde_json::Value::Null => continue,
                other => other.to_string(),
            };
            out.push((k, s));
        }
        Ok(Item(out))
    }
}

// ---------------------------------------------------------------------------------------
// UserPageAnalytics

/// `POST /api/v1/UserPageAnalytics`: per-user activity.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserPageAnalyticsRequest {
    /// The service key (Teams Read-only).
    #[serde(default, alias = "serviceKey", skip_serializing_if = "Option::is_none")]
    pub service_key: Option<String>,
    /// Restricts to members of this group.
    #[serde(default, alias = "groupName", skip_serializing_if = "Option::is_none")]
    pub group_name: Option<String>,
    /// RFC 3339; `activeDays` counts days in `[start, end)`.
    #[serde(
        default,
        alias = "startTimestamp",
        skip_serializing_if = "Option::is_none"
    )]
    pub start_timestamp: Option<String>,
    /// RFC 3339.
    #[serde(
        default,
        alias = "endTimestamp",
        skip_serializing_if = "Option::is_none"
    )]
    pub end_timestamp: Option<String>,
}

pub(crate) static USER_PAGE: ObjectSpec = ObjectSpec {
    fields: &[
        f("service_key", Kind::Text),
        f("group_name", Kind::Text),
        f("start_timestamp", Kind::Text),
        f("end_timestamp", Kind::Text),
    ],
};

impl Request for UserPageAnalyticsRequest {
    const SPEC: &'static ObjectSpec = &USER_PAGE;
}

/// The answer of `UserPageAnalytics`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UserPageAnalyticsResponse {
    /// Every user of the team (or group), ordered by e-mail.
    #[serde(rename = "userTableStats", alias = "user_table_stats", default)]
    pub user_table_stats: Vec<UserStats>,
    /// On failure, what went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One user's activity (an element of `userTableStats`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserStats {
    /// Display name.
    #[serde(default)]
    pub name: String,
    /// E-mail address.
    #[serde(default)]
    pub email: String,
    /// The latest of the three last-usage times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Timestamp>,
    /// Hashed API key.
    #[serde(default)]
    pub api_key: String,
    /// Days with any activity in the queried period.
    #[serde(default, deserialize_with = "lenient::int")]
    pub active_days: i64,
    /// Present (and `true`) only when an administrator disabled the user's access.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_vendor: Option<bool>,
    /// Latest autocomplete use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_autocomplete_usage_time: Option<Timestamp>,
    /// Latest agent run or chat response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_chat_usage_time: Option<Timestamp>,
    /// Latest command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_command_usage_time: Option<Timestamp>,
    /// Status on the team.
    pub team_status: Ident<TeamStatus>,
    /// When the user signed up (read by clients of the hosted service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signup_time: Option<Timestamp>,
}

// ---------------------------------------------------------------------------------------
// AgentAnalytics

/// `POST /api/v1/AgentAnalytics`: agent lines, runs and tool usage.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentAnalyticsRequest {
    /// The service key (Teams Read-only).
    #[serde(default, alias = "serviceKey", skip_serializing_if = "Option::is_none")]
    pub service_key: Option<String>,
    /// Restricts to members of this group; not with `emails`.
    #[serde(default, alias = "groupName", skip_serializing_if = "Option::is_none")]
    pub group_name: Option<String>,
    /// RFC 3339; records with `start <= time`.
    #[serde(
        default,
        alias = "startTimestamp",
        skip_serializing_if = "Option::is_none"
    )]
    pub start_timestamp: Option<String>,
    /// RFC 3339; records with `time < end`.
    #[serde(
        default,
        alias = "endTimestamp",
        skip_serializing_if = "Option::is_none"
    )]
    pub end_timestamp: Option<String>,
    /// Restricts to these users; not with `group_name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub emails: Vec<String>,
    /// `editor`, `plugin`; empty means both.
    #[serde(default, alias = "ideTypes", skip_serializing_if = "Vec::is_empty")]
    pub ide_types: Vec<Ident<IdeType>>,
    /// One data source per object.
    #[serde(
        default,
        alias = "queryRequests",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub query_requests: Vec<AgentQueryRequest>,
}

/// An empty JSON object, `{}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// One agent query: exactly one of the three sources, with the value `{}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentQueryRequest {
    /// Lines suggested and accepted per day.
    #[serde(default, alias = "agentLines", skip_serializing_if = "Option::is_none")]
    pub agent_lines: Option<Empty>,
    /// Agent runs.
    #[serde(default, alias = "agentRuns", skip_serializing_if = "Option::is_none")]
    pub agent_runs: Option<Empty>,
    /// Tool usage counts.
    #[serde(
        default,
        alias = "agentToolUsage",
        skip_serializing_if = "Option::is_none"
    )]
    pub agent_tool_usage: Option<Empty>,
}

static EMPTY: ObjectSpec = ObjectSpec { fields: &[] };
pub(crate) static AGENT_QUERY: ObjectSpec = ObjectSpec {
    fields: &[
        f("agent_lines", Kind::Marker(&EMPTY)),
        f("agent_runs", Kind::Marker(&EMPTY)),
        f("agent_tool_usage", Kind::Marker(&EMPTY)),
    ],
};
pub(crate) static AGENT_ANALYTICS: ObjectSpec = ObjectSpec {
    fields: &[
        f("service_key", Kind::Text),
        f("group_name", Kind::Text),
        f("start_timestamp", Kind::Text),
        f("end_timestamp", Kind::Text),
        f("emails", Kind::Array(&Kind::TextKeepEmpty)),
        f("ide_types", Kind::Array(&Kind::TextKeepEmpty)),
        f("query_requests", Kind::Array(&Kind::Object(&AGENT_QUERY))),
    ],
};

impl Request for AgentAnalyticsRequest {
    const SPEC: &'static ObjectSpec = &AGENT_ANALYTICS;
}

/// The answer of `AgentAnalytics`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentAnalyticsResponse {
    /// One element per query request.
    #[serde(rename = "queryResults", alias = "query_results", default)]
    pub query_results: Vec<AgentQueryResult>,
}

/// The result of one agent query: the key of its data source.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentQueryResult {
    /// For `agent_lines`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_lines: Option<AgentLines>,
    /// For `agent_runs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_runs: Option<AgentRuns>,
    /// For `agent_tool_usage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_tool_usage: Option<AgentToolUsage>,
}

/// `agentLines`: one entry per UTC day.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentLines {
    /// The entries, ascending by day.
    #[serde(default)]
    pub agent_lines: Vec<AgentLinesEntry>,
}

/// Lines suggested and accepted on one day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentLinesEntry {
    /// The day's start, RFC 3339.
    #[serde(deserialize_with = "day")]
    pub day: Timestamp,
    /// Lines suggested.
    #[serde(
        default,
        serialize_with = "lenient::as_string",
        deserialize_with = "lenient::int"
    )]
    pub lines_suggested: i64,
    /// Lines accepted (omitted when zero).
    #[serde(
        default,
        serialize_with = "lenient::as_string",
        deserialize_with = "lenient::int",
        skip_serializing_if = "lenient::is_zero"
    )]
    pub lines_accepted: i64,
}

/// `agentRuns`: one entry per run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRuns {
    /// The entries, ascending by time then `agentId`.
    #[serde(default)]
    pub agent_runs: Vec<AgentRunEntry>,
}

/// One agent run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentRunEntry {
    /// The run's day, RFC 3339 (the day's start).
    #[serde(deserialize_with = "day")]
    pub day: Timestamp,
    /// Model name.
    #[serde(default)]
    pub model: String,
    /// Agent mode.
    pub mode: Ident<AgentMode>,
    /// Messages sent.
    #[serde(
        default,
        serialize_with = "lenient::as_string",
        deserialize_with = "lenient::int"
    )]
    pub messages_sent: i64,
    /// Conversation id.
    #[serde(default)]
    pub agent_id: String,
    /// Credits used in hundredths (omitted when zero).
    #[serde(
        default,
        serialize_with = "lenient::as_string",
        deserialize_with = "lenient::int",
        skip_serializing_if = "lenient::is_zero"
    )]
    pub prompts_used: i64,
}

/// `agentToolUsage`: one entry per tool.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentToolUsage {
    /// The entries, by count descending then tool.
    #[serde(default)]
    pub agent_tool_usage: Vec<AgentToolUsageEntry>,
}

/// A tool and how often it was used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentToolUsageEntry {
    /// Tool identifier.
    pub tool: String,
    /// Uses.
    #[serde(
        default,
        serialize_with = "lenient::as_string",
        deserialize_with = "lenient::int"
    )]
    pub count: i64,
}

/// Reads a day as RFC 3339 or `YYYY-MM-DD`.
fn day<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
    let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    Timestamp::parse_rfc3339(&s)
        .or_else(|| crate::time::Date::parse(&s).map(|d| d.start()))
        .ok_or_else(|| serde::de::Error::custom(format!("`{s}` is not a day")))
}

// ---------------------------------------------------------------------------------------
// Caps and balance

/// `POST /api/v1/GetUsageConfig`: the cap set at exactly one scope.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetUsageConfigRequest {
    /// The service key (Billing Read).
    #[serde(default, alias = "serviceKey", skip_serializing_if = "Option::is_none")]
    pub service_key: Option<String>,
    /// Scope: the team (`true`; `false` means not given).
    #[serde(default, alias = "teamLevel", skip_serializing_if = "Option::is_none")]
    pub team_level: Option<bool>,
    /// Scope: a group.
    #[serde(default, alias = "groupId", skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// Scope: one user.
    #[serde(default, alias = "userEmail", skip_serializing_if = "Option::is_none")]
    pub user_email: Option<String>,
}

pub(crate) static GET_USAGE_CONFIG: ObjectSpec = ObjectSpec {
    fields: &[
        f("service_key", Kind::Text),
        f("team_level", Kind::Bool),
        f("group_id", Kind::Text),
        f("user_email", Kind::Text),
    ],
};

impl Request for GetUsageConfigRequest {
    const SPEC: &'static ObjectSpec = &GET_USAGE_CONFIG;
}

/// The answer of `GetUsageConfig`: `{"addOnCreditCap": N}` or `{}` (no cap at that scope).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GetUsageConfigResponse {
    /// The per-user cap set at the scope.
    #[serde(
        rename = "addOnCreditCap",
        alias = "add_on_credit_cap",
        default,
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub add_on_credit_cap: Option<i64>,
}

/// `POST /api/v1/UsageConfig`: sets or clears a cap at one scope.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageConfigRequest {
    /// The service key (Billing Write).
    #[serde(default, alias = "serviceKey", skip_serializing_if = "Option::is_none")]
    pub service_key: Option<String>,
    /// Action: clear the cap (`true`).
    #[serde(
        default,
        alias = "clearAddOnCreditCap",
        skip_serializing_if = "Option::is_none"
    )]
    pub clear_add_on_credit_cap: Option<bool>,
    /// Action: set this cap (`0` is a cap of 0).
    #[serde(
        default,
        alias = "setAddOnCreditCap",
        deserialize_with = "lenient::opt_int",
        skip_serializing_if = "Option::is_none"
    )]
    pub set_add_on_credit_cap: Option<i64>,
    /// Scope: the team.
    #[serde(default, alias = "teamLevel", skip_serializing_if = "Option::is_none")]
    pub team_level: Option<bool>,
    /// Scope: a group.
    #[serde(default, alias = "groupId", skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// Scope: one user.
    #[serde(default, alias = "userEmail", skip_serializing_if = "Option::is_none")]
    pub user_email: Option<String>,
}

pub(crate) static USAGE_CONFIG: ObjectSpec = ObjectSpec {
    fields: &[
        f("service_key", Kind::Text),
        f("clear_add_on_credit_cap", Kind::Bool),
        f("set_add_on_credit_cap", Kind::Int),
        f("team_level", Kind::Bool),
        f("group_id", Kind::Text),
        f("user_email", Kind::Text),
    ],
};

impl Request for UsageConfigRequest {
    const SPEC: &'static ObjectSpec = &USAGE_CONFIG;
}

/// The answer of `UsageConfig`: the empty message `{}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UsageConfigResponse {}

/// `POST /api/v1/GetTeamCreditBalance`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetTeamCreditBalanceRequest {
    /// The service key (Billing Read).
    #[serde(default, alias = "serviceKey", skip_serializing_if = "Option::is_none")]
    pub service_key: Option<String>,
}

static GET_BALANCE: ObjectSpec = ObjectSpec {
    fields: &[f("service_key", Kind::Text)],
};

impl Request for GetTeamCreditBalanceRequest {
    const SPEC: &'static ObjectSpec = &GET_BALANCE;
}

/// The answer of `GetTeamCreditBalance`: the current billing cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTeamCreditBalanceResponse {
    /// Prompt credits per seat for the cycle.
    #[serde(default, deserialize_with = "lenient::int")]
    pub prompt_credits_per_seat: i64,
    /// Seats on the team.
    #[serde(default, deserialize_with = "lenient::int")]
    pub num_seats: i64,
    /// Add-on credits available in this cycle.
    #[serde(default, deserialize_with = "lenient::int")]
    pub add_on_credits_available: i64,
    /// Add-on credits used in this cycle.
    #[serde(default, deserialize_with = "lenient::int")]
    pub add_on_credits_used: i64,
    /// Start of the cycle.
    pub billing_cycle_start: Timestamp,
    /// End of the cycle.
    pub billing_cycle_end: Timestamp,
}

// ---------------------------------------------------------------------------------------
// Ingest (extension)

/// `POST /api/v1/Ingest` (extension): loads records of one kind (contract section 8).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IngestRequest {
    /// The service key (Usage Write).
    #[serde(default, alias = "serviceKey", skip_serializing_if = "Option::is_none")]
    pub service_key: Option<String>,
    /// The record kind (`autocomplete`, `users`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The records, as JSON objects.
    #[serde(default)]
    pub records: Vec<serde_json::Value>,
}

pub(crate) static INGEST: ObjectSpec = ObjectSpec {
    fields: &[
        f("service_key", Kind::Text),
        f("kind", Kind::Text),
        f("records", Kind::Array(&Kind::AnyObject)),
    ],
};

impl Request for IngestRequest {
    const SPEC: &'static ObjectSpec = &INGEST;
}

/// The answer of `Ingest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IngestResponse {
    /// Records accepted (the number sent).
    #[serde(default, deserialize_with = "lenient::int")]
    pub accepted: i64,
}

// ---------------------------------------------------------------------------------------
// Errors

/// The body of every failure (contract section 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    /// Repeats `message` (clients of the hosted service read `error`).
    #[serde(default)]
    pub error: String,
    /// `invalid_argument`, `unauthenticated`, …
    #[serde(default)]
    pub code: String,
    /// What went wrong.
    #[serde(default)]
    pub message: String,
    /// Every violation (on every 400, on no other status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Vec<ErrorDetail>>,
    /// The request id (equals the `x-request-id` header).
    #[serde(default)]
    pub request_id: String,
}

/// One violation in an error body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// JSON path into the request (`""` is the body).
    pub path: String,
    /// The rule (`mixed_aggregation`, …).
    pub rule: String,
    /// What is wrong, naming the field, the value and the rule.
    pub message: String,
}
