//! The wire model: request and response types of every operation (spec, contract section 1).
//!
//! Requests are *as sent*: every field optional, enum values kept even when unknown
//! ([`Ident`]), so that the validator can report every violation with its path. Read a
//! body with [`decode::decode`], which applies the contract's spelling, kind and "not
//! given" rules; the serde derives accept both spellings too, for programs that build or
//! read requests directly. Responses are lowerCamelCase; their integers decode from a
//! JSON number or a decimal string, and an absent number reads as zero.

pub mod decode;
pub mod export;
pub mod lenient;

use serde::{Deserialize, Serialize};

use crate::ident::Ident;
use crate::schema::{AgentMode, Agg, FilterOp, IdeType, Source, TeamStatus};
use crate::time::Timestamp;
use decode::{FieldSpec, Kind, ObjectSpec, Request};

/// Declares a request object once: the serde struct (every field optional, both
/// spellings accepted, "not given" fields left out when serializing) and its
/// [`ObjectSpec`] for the first parse step ([`decode::decode`]), from one field list.
///
/// Each field is written `name | "camelAlias": Type = Kind`, the alias only where the two
/// spellings differ; a compile-time check refuses an alias that is not the camelCase of
/// the name, and a multi-word name without one. Extra field attributes (docs,
/// `deserialize_with`) are passed through.
///
/// `key "Permission"` puts the service key first, naming the permission the operation
/// needs; `scoped` adds the group and period every analytics request takes after it;
/// `cap_scope` ends the fields with the three scopes of a cap.
macro_rules! request {
    (@object $(#[$meta:meta])* $name:ident as $spec:ident {
        $(
            $(#[$fmeta:meta])*
            $field:ident $(| $alias:literal)? : $ty:ty = $kind:expr
        ),* $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $(
                $(#[$fmeta])*
                #[serde(default, skip_serializing_if = "Unset::is_unset")]
                $(#[serde(alias = $alias)])?
                pub $field: $ty,
            )*
        }

        #[doc = concat!("The fields of [`", stringify!($name), "`], for the first parse step.")]
        pub(crate) static $spec: ObjectSpec = ObjectSpec {
            fields: &[$(FieldSpec { name: stringify!($field), kind: $kind }),*],
        };

        impl Request for $name {
            const SPEC: &'static ObjectSpec = &$spec;
        }

        $(const _: () = assert!(
            alias_is_camel_case(stringify!($field), &[$($alias)?]),
            concat!("`", stringify!($field), "`: the alias must be its camelCase spelling, given exactly when it differs"),
        );)*
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident as $spec:ident, key $perm:literal, scoped { $($fields:tt)* }
    ) => {
        request! { $(#[$meta])* pub struct $name as $spec, key $perm {
            /// Restricts the answer to the members of this group.
            group_name | "groupName": Option<String> = Kind::Text,
            /// RFC 3339: the period starts here (inclusive).
            start_timestamp | "startTimestamp": Option<String> = Kind::Text,
            /// RFC 3339: the period ends here (exclusive).
            end_timestamp | "endTimestamp": Option<String> = Kind::Text,
            $($fields)*
        } }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident as $spec:ident, key $perm:literal, cap_scope { $($fields:tt)* }
    ) => {
        request! { $(#[$meta])* pub struct $name as $spec, key $perm {
            $($fields)*
            /// Scope: the team (`true`; `false` means not given).
            team_level | "teamLevel": Option<bool> = Kind::Bool,
            /// Scope: a group.
            group_id | "groupId": Option<String> = Kind::Text,
            /// Scope: one user.
            user_email | "userEmail": Option<String> = Kind::Text,
        } }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident as $spec:ident, key $perm:literal { $($fields:tt)* }
    ) => {
        request! { @object $(#[$meta])* $name as $spec {
            #[doc = concat!("The service key (", $perm, ").")]
            service_key | "serviceKey": Option<String> = Kind::Text,
            $($fields)*
        } }
    };
    ($(#[$meta:meta])* pub struct $name:ident as $spec:ident { $($fields:tt)* }) => {
        request! { @object $(#[$meta])* $name as $spec { $($fields)* } }
    };
}

/// Whether `aliases` is the camelCase spelling of the snake_case `name` when that differs
/// from the name, and empty when it does not (checked at compile time by `request!`).
const fn alias_is_camel_case(name: &str, aliases: &[&str]) -> bool {
    let n = name.as_bytes();
    let mut has_underscore = false;
    let mut i = 0;
    while i < n.len() {
        if n[i] == b'_' {
            has_underscore = true;
        }
        i += 1;
    }
    if !has_underscore {
        return aliases.is_empty();
    }
    if aliases.len() != 1 {
        return false;
    }
    let a = aliases[0].as_bytes();
    let (mut i, mut j, mut up) = (0, 0, false);
    while i < n.len() {
        if n[i] == b'_' {
            up = true;
        } else {
            let want = if up { n[i].to_ascii_uppercase() } else { n[i] };
            if j >= a.len() || a[j] != want {
                return false;
            }
            j += 1;
            up = false;
        }
        i += 1;
    }
    j == a.len()
}

/// A field that serializes only when given: `Option` when `Some`, `Vec` when not empty.
trait Unset {
    /// Whether the field is not given.
    fn is_unset(&self) -> bool;
}

impl<T> Unset for Option<T> {
    fn is_unset(&self) -> bool {
        self.is_none()
    }
}

impl<T> Unset for Vec<T> {
    fn is_unset(&self) -> bool {
        self.is_empty()
    }
}

// ---------------------------------------------------------------------------------------
// Analytics

request! {
    /// `POST /api/v1/Analytics`: custom analytics queries.
    ///
    /// The group restricts every query; the period restricts PCW queries only, to records
    /// with `start <= hour < end`.
    pub struct AnalyticsRequest as ANALYTICS, key "Analytics Read", scoped {
        /// The queries, answered in this order.
        query_requests | "queryRequests": Vec<QueryRequest> = Kind::Array(&Kind::Object(&QUERY)),
    }
}

request! {
    /// One custom query.
    pub struct QueryRequest as QUERY {
        /// The data source.
        data_source | "dataSource": Option<Ident<Source>> = Kind::Text,
        /// The fields to retrieve.
        selections: Vec<Selection> = Kind::Array(&Kind::Object(&SELECTION)),
        /// Filters (AND, except several EQUAL on one field: any of their values).
        filters: Vec<Filter> = Kind::Array(&Kind::Object(&FILTER)),
        /// Group-by fields.
        aggregations: Vec<Aggregation> = Kind::Array(&Kind::Object(&AGGREGATION)),
    }
}

request! {
    /// A field to retrieve.
    pub struct Selection as SELECTION {
        /// A field of the data source.
        field: Option<String> = Kind::Text,
        /// The alias; default `{function}_{field}` in lower case, or the field for UNSPECIFIED.
        name: Option<String> = Kind::Text,
        /// The aggregation function (default `QUERY_AGGREGATION_UNSPECIFIED`).
        aggregation_function | "aggregationFunction": Option<Ident<Agg>> = Kind::Text,
    }
}

request! {
    /// A filter.
    pub struct Filter as FILTER {
        /// The field to filter on.
        name: Option<String> = Kind::Text,
        /// The comparison.
        filter: Option<Ident<FilterOp>> = Kind::Text,
        /// The comparison value, as a string.
        value: Option<String> = Kind::TextKeepEmpty,
    }
}

request! {
    /// A group-by field.
    pub struct Aggregation as AGGREGATION {
        /// The field to group by.
        field: Option<String> = Kind::Text,
        /// The alias of the group's value.
        name: Option<String> = Kind::Text,
    }
}

pub(crate) mod specs {
    //! The object specs, for building paths in validators.
    pub(crate) use super::{
        AGENT_ANALYTICS, ANALYTICS, GET_USAGE_CONFIG, INGEST, QUERY, USAGE_CONFIG, USER_PAGE,
    };
    pub(crate) use super::{AGGREGATION, FILTER, SELECTION};
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

request! {
    /// `POST /api/v1/UserPageAnalytics`: per-user activity.
    ///
    /// The group restricts the users listed; `activeDays` counts days in the period.
    pub struct UserPageAnalyticsRequest as USER_PAGE, key "Teams Read-only", scoped {}
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

request! {
    /// `POST /api/v1/AgentAnalytics`: agent lines, runs and tool usage.
    ///
    /// The group (not with `emails`) restricts the users counted; the period the records,
    /// `start <= time < end`.
    pub struct AgentAnalyticsRequest as AGENT_ANALYTICS, key "Teams Read-only", scoped {
        /// Restricts to these users; not with `group_name`.
        emails: Vec<String> = Kind::Array(&Kind::TextKeepEmpty),
        /// `editor`, `plugin`; empty means both.
        ide_types | "ideTypes": Vec<Ident<IdeType>> = Kind::Array(&Kind::TextKeepEmpty),
        /// One data source per object.
        query_requests | "queryRequests": Vec<AgentQueryRequest> =
            Kind::Array(&Kind::Object(&AGENT_QUERY)),
    }
}

request! {
    /// An empty JSON object, `{}`.
    pub struct Empty as EMPTY {}
}

impl Copy for Empty {}

request! {
    /// One agent query: exactly one of the three sources, with the value `{}`.
    pub struct AgentQueryRequest as AGENT_QUERY {
        /// Lines suggested and accepted per day.
        agent_lines | "agentLines": Option<Empty> = Kind::Marker(&EMPTY),
        /// Agent runs.
        agent_runs | "agentRuns": Option<Empty> = Kind::Marker(&EMPTY),
        /// Tool usage counts.
        agent_tool_usage | "agentToolUsage": Option<Empty> = Kind::Marker(&EMPTY),
    }
}

/// The answer of `AgentAnalytics`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AgentAnalyticsResponse {
    /// One element per query request.
    #[serde(rename = "queryResults", alias = "query_results", default)]
    pub query_results: Vec<AgentQueryResult>,
}

/// Declares the answer of one agent data source: an object holding the list of its entries
/// under the source's own key (`{"agentRuns": [...]}`).
macro_rules! agent_list {
    ($(#[$meta:meta])* $name:ident { $(#[$fmeta:meta])* $field:ident: $entry:ty }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct $name {
            $(#[$fmeta])*
            #[serde(default)]
            pub $field: Vec<$entry>,
        }
    };
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

agent_list! {
    /// `agentLines`: one entry per UTC day.
    AgentLines {
        /// The entries, ascending by day.
        agent_lines: AgentLinesEntry
    }
}

/// Lines suggested and accepted on one day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentLinesEntry {
    /// The day's start, RFC 3339.
    #[serde(deserialize_with = "day")]
    pub day: Timestamp,
    /// Lines suggested.
    #[serde(default, with = "lenient::string_int")]
    pub lines_suggested: i64,
    /// Lines accepted (omitted when zero).
    #[serde(
        default,
        with = "lenient::string_int",
        skip_serializing_if = "lenient::is_zero"
    )]
    pub lines_accepted: i64,
}

agent_list! {
    /// `agentRuns`: one entry per run.
    AgentRuns {
        /// The entries, ascending by time then `agentId`.
        agent_runs: AgentRunEntry
    }
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
    #[serde(default, with = "lenient::string_int")]
    pub messages_sent: i64,
    /// Conversation id.
    #[serde(default)]
    pub agent_id: String,
    /// Credits used in hundredths (omitted when zero).
    #[serde(
        default,
        with = "lenient::string_int",
        skip_serializing_if = "lenient::is_zero"
    )]
    pub prompts_used: i64,
}

agent_list! {
    /// `agentToolUsage`: one entry per tool.
    AgentToolUsage {
        /// The entries, by count descending then tool.
        agent_tool_usage: AgentToolUsageEntry
    }
}

/// A tool and how often it was used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentToolUsageEntry {
    /// Tool identifier.
    pub tool: String,
    /// Uses.
    #[serde(default, with = "lenient::string_int")]
    pub count: i64,
}

/// Reads a day as RFC 3339 or `YYYY-MM-DD`.
fn day<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
    let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    Timestamp::parse_rfc3339_unbounded(&s)
        .or_else(|| crate::time::Date::parse_unbounded(&s).map(|d| d.start()))
        .ok_or_else(|| serde::de::Error::custom(format!("`{s}` is not a day")))
}

// ---------------------------------------------------------------------------------------
// Caps and balance

request! {
    /// `POST /api/v1/GetUsageConfig`: the cap set at exactly one scope.
    pub struct GetUsageConfigRequest as GET_USAGE_CONFIG, key "Billing Read", cap_scope {}
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

request! {
    /// `POST /api/v1/UsageConfig`: sets or clears a cap at one scope.
    pub struct UsageConfigRequest as USAGE_CONFIG, key "Billing Write", cap_scope {
        /// Action: clear the cap (`true`).
        clear_add_on_credit_cap | "clearAddOnCreditCap": Option<bool> = Kind::Bool,
        /// Action: set this cap (`0` is a cap of 0).
        #[serde(deserialize_with = "lenient::opt_int")]
        set_add_on_credit_cap | "setAddOnCreditCap": Option<i64> = Kind::Int,
    }
}

/// The answer of `UsageConfig`: the empty message `{}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UsageConfigResponse {}

request! {
    /// `POST /api/v1/GetTeamCreditBalance`.
    pub struct GetTeamCreditBalanceRequest as GET_BALANCE, key "Billing Read" {}
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

request! {
    /// `POST /api/v1/Ingest` (extension): loads records of one kind (contract section 8).
    pub struct IngestRequest as INGEST, key "Usage Write" {
        /// The record kind (`autocomplete`, `users`, …).
        kind: Option<String> = Kind::Text,
        /// The records, as JSON objects.
        records: Vec<serde_json::Value> = Kind::Array(&Kind::AnyObject),
    }
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

impl From<&crate::error::Violation> for ErrorDetail {
    /// The wire form of a violation, an element of an error body's `details`.
    fn from(v: &crate::error::Violation) -> ErrorDetail {
        ErrorDetail {
            path: v.path(),
            rule: v.rule().as_str().to_string(),
            message: v.message().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_check_accepts_exactly_the_camel_case_spelling() {
        assert!(alias_is_camel_case("service_key", &["serviceKey"]));
        assert!(alias_is_camel_case(
            "clear_add_on_credit_cap",
            &["clearAddOnCreditCap"]
        ));
        assert!(alias_is_camel_case("field", &[]));
        assert!(!alias_is_camel_case("service_key", &[]));
        assert!(!alias_is_camel_case("service_key", &["servicekey"]));
        assert!(!alias_is_camel_case("service_key", &["serviceKeys"]));
        assert!(!alias_is_camel_case("service_key", &["serviceKe"]));
        assert!(!alias_is_camel_case("field", &["field"]));
        assert!(!alias_is_camel_case("group_id", &["groupId", "groupID"]));
    }

    /// Every field of every request reads the same from either spelling through serde alone
    /// (not only through `decode`), and serializes under its snake_case name.
    #[test]
    fn both_spellings_through_serde() {
        let camel = serde_json::json!({
            "serviceKey": "k", "groupName": "g", "startTimestamp": "s", "endTimestamp": "e",
            "queryRequests": [{"dataSource": "QUERY_DATA_SOURCE_USER_DATA",
                "selections": [{"field": "f", "name": "n", "aggregationFunction": "QUERY_AGGREGATION_SUM"}],
                "filters": [{"name": "f", "filter": "QUERY_FILTER_EQUAL", "value": ""}],
                "aggregations": [{"field": "f", "name": "a"}]}]
        });
        let req: AnalyticsRequest = serde_json::from_value(camel).unwrap();
        let snake = serde_json::to_value(&req).unwrap();
        assert_eq!(
            snake["query_requests"][0]["selections"][0]["aggregation_function"],
            "QUERY_AGGREGATION_SUM"
        );
        assert_eq!(snake["service_key"], "k");
        assert_eq!(snake["end_timestamp"], "e");
        let back: AnalyticsRequest = serde_json::from_value(snake).unwrap();
        assert_eq!(back, req);

        let cap: UsageConfigRequest = serde_json::from_value(serde_json::json!({
            "clearAddOnCreditCap": true, "setAddOnCreditCap": "7", "teamLevel": true,
            "groupId": "g", "userEmail": "u"
        }))
        .unwrap();
        assert_eq!(cap.set_add_on_credit_cap, Some(7));
        assert_eq!(cap.clear_add_on_credit_cap, Some(true));
        assert_eq!(
            serde_json::to_value(GetUsageConfigRequest::default()).unwrap(),
            serde_json::json!({})
        );
    }

    /// The spec of each request names exactly the struct's fields, in declaration order.
    #[test]
    fn specs_list_the_struct_fields() {
        let names: Vec<_> = USAGE_CONFIG.names().collect();
        assert_eq!(
            names,
            [
                "service_key",
                "clear_add_on_credit_cap",
                "set_add_on_credit_cap",
                "team_level",
                "group_id",
                "user_email"
            ]
        );
        let full = serde_json::to_value(AgentQueryRequest {
            agent_lines: Some(Empty {}),
            agent_runs: Some(Empty {}),
            agent_tool_usage: Some(Empty {}),
        })
        .unwrap();
        let keys: Vec<_> = full.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, AGENT_QUERY.names().collect::<Vec<_>>());
        assert!(EMPTY.fields.is_empty());
    }
}
