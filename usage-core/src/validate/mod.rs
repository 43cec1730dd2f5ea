//! The validator: wire requests in, plans or every violation out.
//!
//! Each function takes a request as sent and returns its plan, or every violation with its
//! JSON path and rule, in the order of the request document (contract section 2).
//!
//! ```
//! use usage_core::validate;
//! use usage_core::wire::decode::decode;
//! use usage_core::wire::AnalyticsRequest;
//! use usage_core::plan::Limits;
//!
//! let body = br#"{"query_requests": [{
//!     "data_source": "QUERY_DATA_SOURCE_USER_DATA",
//!     "selections": [
//!         {"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"},
//!         {"field": "api_key", "aggregation_function": "QUERY_AGGREGATION_SUM"}
//!     ],
//!     "aggregations": [{"field": "distinct_users", "name": "u"}]
//! }]}"#;
//! let decoded = decode::<AnalyticsRequest>(body).unwrap();
//! let errors = validate::analytics(&decoded.request, &Limits::default()).unwrap_err();
//! let got: Vec<_> = errors.iter().map(|v| (v.path(), v.rule().as_str())).collect();
//! assert_eq!(got, [
//!     ("query_requests[0].selections[1].aggregation_function".to_string(), "invalid_aggregation"),
//!     ("query_requests[0].aggregations[0].field".to_string(), "distinct_in_aggregations"),
//! ]);
//! ```

mod analytics;

pub use analytics::{analytics, default_alias as default_alias_of};

use crate::error::{JsonPath, Rule, Violation, Violations, echo};
use crate::ident::{Ident, WireEnum};
use crate::plan::{
    AgentPlan, AgentSource, CapAction, CapScope, Limits, MAX_CAP, TimeRange, UserPagePlan,
};
use crate::time::{TimeError, Timestamp};
use crate::wire::decode::{Decoded, ObjectSpec, Request};
use crate::wire::specs::{AGENT_ANALYTICS, GET_USAGE_CONFIG, USAGE_CONFIG, USER_PAGE};
use crate::wire::{
    AgentAnalyticsRequest, GetUsageConfigRequest, UsageConfigRequest, UserPageAnalyticsRequest,
};

/// The violations, or the value when there are none.
pub(crate) fn finish<T>(v: Violations, value: impl FnOnce() -> T) -> Result<T, Violations> {
    if v.is_empty() { Ok(value()) } else { Err(v) }
}

/// Runs a validator on a decoded body, adding the decoder's violations.
///
/// # Errors
/// Every violation of the body, in document order: the first [`MAX_DETAILS`] kept, all
/// counted ([`Violations`]).
///
/// [`MAX_DETAILS`]: crate::error::MAX_DETAILS
pub fn with_decoded<T: Request, P>(
    d: &Decoded<T>,
    validate: impl FnOnce(&T, &[&'static str]) -> Result<P, Violations>,
) -> Result<P, Violations> {
    let mut all = d.violations.clone();
    match validate(&d.request, &d.given_order) {
        Ok(p) if all.is_empty() => Ok(p),
        Ok(_) => Err(all),
        Err(more) => {
            all.append(more);
            Err(all)
        }
    }
}

/// Parses `start_timestamp`/`end_timestamp`; a start after the end is `invalid_value` at
/// `end_timestamp` (contract section 3, Request-level fields).
pub(crate) fn time_range(
    start: Option<&str>,
    end: Option<&str>,
    spec: &ObjectSpec,
    v: &mut Violations,
) -> TimeRange {
    let root = JsonPath::root();
    let mut one = |name: &'static str, s: Option<&str>| -> Option<Timestamp> {
        let s = s?;
        let t = Timestamp::read_rfc3339(s);
        if let Err(e) = t {
            let shown = echo(s);
            v.push(Violation::new(
                spec.path(&root, name),
                Rule::InvalidValue,
                match e {
                    TimeError::Syntax => format!(
                        "`{name}` \"{shown}\" is not an RFC 3339 timestamp (e.g. 2025-05-01T00:00:00Z)"
                    ),
                    TimeError::Range => format!("`{name}` \"{shown}\" {e}"),
                },
            ));
        }
        t.ok()
    };
    let range = TimeRange {
        start: one("start_timestamp", start),
        end: one("end_timestamp", end),
    };
    if let (Some(s), Some(e)) = (range.start, range.end)
        && s > e
    {
        v.push(Violation::new(
            spec.path(&root, "end_timestamp"),
            Rule::InvalidValue,
            format!("`end_timestamp` {e} is before `start_timestamp` {s}"),
        ));
    }
    range
}

pub(crate) fn missing(path: JsonPath, what: &str) -> Violation {
    let msg = format!("`{path}` is required{what}");
    Violation::new(path, Rule::MissingField, msg)
}

pub(crate) fn too_many(path: JsonPath, n: usize, max: usize) -> Violation {
    let msg = format!("`{path}` has {n} elements; at most {max} are allowed");
    Violation::new(path, Rule::TooMany, msg)
}

pub(crate) fn unknown_enum<T: WireEnum>(path: JsonPath, given: &str) -> Violation {
    let msg = format!(
        "`{path}`: unknown {} `{}` (allowed: {})",
        T::WHAT,
        echo(given),
        T::allowed()
    );
    Violation::new(path, Rule::UnknownEnumValue, msg)
}

/// Validates a `UserPageAnalytics` request.
///
/// # Errors
/// Every violation: timestamps that do not parse, a start after the end.
pub fn user_page(req: &UserPageAnalyticsRequest) -> Result<UserPagePlan, Violations> {
    let mut v = Violations::new();
    let range = time_range(
        req.start_timestamp.as_deref(),
        req.end_timestamp.as_deref(),
        &USER_PAGE,
        &mut v,
    );
    finish(v, || UserPagePlan {
        group_name: req.group_name.clone(),
        range,
    })
}

/// Validates an `AgentAnalytics` request.
///
/// # Errors
/// Every violation: `group_name` with `emails`, unknown `ide_types`, query objects without
/// exactly one source, timestamps, limits.
pub fn agent(req: &AgentAnalyticsRequest, limits: &Limits) -> Result<AgentPlan, Violations> {
    let mut v = Violations::new();
    let root = JsonPath::root();
    let range = time_range(
        req.start_timestamp.as_deref(),
        req.end_timestamp.as_deref(),
        &AGENT_ANALYTICS,
        &mut v,
    );
    if req.group_name.is_some() && !req.emails.is_empty() {
        v.push(Violation::new(
            AGENT_ANALYTICS.path(&root, "emails"),
            Rule::ConflictingFields,
            "`emails` cannot be combined with `group_name`; give one of them",
        ));
    }
    if req.emails.len() > limits.emails {
        v.push(too_many(
            AGENT_ANALYTICS.path(&root, "emails"),
            req.emails.len(),
            limits.emails,
        ));
    }
    let ide_path = AGENT_ANALYTICS.path(&root, "ide_types");
    let mut ide_types = Vec::new();
    for (i, t) in req.ide_types.iter().enumerate() {
        match t {
            Ident::Known(t) => {
                if !ide_types.contains(t) {
                    ide_types.push(*t);
                }
            }
            Ident::Unknown(s) => {
                v.push(unknown_enum::<crate::schema::IdeType>(ide_path.index(i), s))
            }
        }
    }
    if ide_types.is_empty() {
        ide_types = crate::schema::IdeType::ALL.to_vec();
    }
    let qpath = AGENT_ANALYTICS.path(&root, "query_requests");
    if req.query_requests.is_empty() {
        v.push(missing(qpath.clone(), ": give at least one of {\"agent_lines\": {}}, {\"agent_runs\": {}}, {\"agent_tool_usage\": {}}"));
    } else if req.query_requests.len() > limits.query_requests {
        v.push(too_many(
            qpath.clone(),
            req.query_requests.len(),
            limits.query_requests,
        ));
    }
    let mut queries = Vec::new();
    for (i, q) in req.query_requests.iter().enumerate() {
        let given: Vec<(&str, AgentSource)> = [
            (q.agent_lines.is_some(), "agent_lines", AgentSource::Lines),
            (q.agent_runs.is_some(), "agent_runs", AgentSource::Runs),
            (
                q.agent_tool_usage.is_some(),
                "agent_tool_usage",
                AgentSource::ToolUsage,
            ),
        ]
        .into_iter()
        .filter(|(g, _, _)| *g)
        .map(|(_, n, s)| (n, s))
        .collect();
        let p = qpath.index(i);
        match given.as_slice() {
            [] => v.push(missing(
                p,
                ": give exactly one data source key (`agent_lines`, `agent_runs` or `agent_tool_usage`) with the value {}",
            )),
            [(_, s)] => queries.push(*s),
            [..] => {
                let names: Vec<_> = given.iter().map(|(n, _)| format!("`{n}`")).collect();
                let msg = format!("`{p}` holds {}; an agent query holds exactly one data source", names.join(" and "));
                v.push(Violation::new(p, Rule::ConflictingFields, msg));
            }
        }
    }
    finish(v, || AgentPlan {
        group_name: req.group_name.clone(),
        emails: (!req.emails.is_empty()).then(|| req.emails.clone()),
        ide_types,
        range,
        queries,
    })
}

/// The scope fields of `GetUsageConfig` and `UsageConfig`: exactly one is given (rule
/// `scope`, contract section 6); `team_level` counts when `true`.
pub const SCOPE_FIELDS: [&str; 3] = ["team_level", "group_id", "user_email"];

/// The action fields of `UsageConfig`: exactly one is given (rule `action`);
/// `clear_add_on_credit_cap` counts when `true`.
pub const ACTION_FIELDS: [&str; 2] = ["clear_add_on_credit_cap", "set_add_on_credit_cap"];

/// The scope fields given, in body order.
fn scope_of(
    team: Option<bool>,
    group: Option<&String>,
    user: Option<&String>,
    order: &[&'static str],
) -> Vec<(&'static str, CapScope)> {
    let mut given = Vec::new();
    if team == Some(true) {
        given.push((SCOPE_FIELDS[0], CapScope::Team));
    }
    if let Some(g) = group {
        given.push((SCOPE_FIELDS[1], CapScope::Group(g.clone())));
    }
    if let Some(u) = user {
        given.push((SCOPE_FIELDS[2], CapScope::User(u.clone())));
    }
    given.sort_by_key(|(n, _)| order.iter().position(|o| o == n).unwrap_or(usize::MAX));
    given
}

/// Exactly one of `given`: rule `rule` at `""` when none, else one detail per extra one.
fn exactly_one<T>(
    given: Vec<(&'static str, T)>,
    spec: &ObjectSpec,
    rule: Rule,
    names: &str,
    v: &mut Violations,
) -> Option<T> {
    let root = JsonPath::root();
    if given.is_empty() {
        v.push(Violation::new(
            root,
            rule,
            format!("give exactly one {rule} field: one of {names}; none was given"),
        ));
        return None;
    }
    let first = given[0].0;
    let mut it = given.into_iter();
    let (_, value) = it.next()?;
    let mut extra = false;
    for (name, _) in it {
        extra = true;
        v.push(Violation::new(
            spec.path(&root, name),
            rule,
            format!("`{name}` is a second {rule} after `{first}`; give exactly one of {names}"),
        ));
    }
    (!extra).then_some(value)
}

const SCOPES: &str = "`team_level: true`, `group_id`, `user_email`";

/// Validates a `GetUsageConfig` request. `order` is the body's key order
/// ([`Decoded::given_order`]); it decides which scope is "the second".
///
/// # Errors
/// Not exactly one scope (rule `scope`).
pub fn get_usage_config(
    req: &GetUsageConfigRequest,
    order: &[&'static str],
) -> Result<CapScope, Violations> {
    let mut v = Violations::new();
    let given = scope_of(
        req.team_level,
        req.group_id.as_ref(),
        req.user_email.as_ref(),
        order,
    );
    let scope = exactly_one(given, &GET_USAGE_CONFIG, Rule::Scope, SCOPES, &mut v);
    finish(v, || scope.expect("one scope when there is no violation"))
}

/// Validates a `UsageConfig` request.
///
/// # Errors
/// Not exactly one action (rule `action`), not exactly one scope (rule `scope`), a cap
/// outside `0..=1_000_000_000` (`invalid_value`).
pub fn usage_config(
    req: &UsageConfigRequest,
    order: &[&'static str],
) -> Result<(CapScope, CapAction), Violations> {
    let mut v = Violations::new();
    let mut actions = Vec::new();
    if req.clear_add_on_credit_cap == Some(true) {
        actions.push((ACTION_FIELDS[0], CapAction::Clear));
    }
    if let Some(n) = req.set_add_on_credit_cap {
        if !(0..=MAX_CAP).contains(&n) {
            v.push(Violation::new(
                USAGE_CONFIG.path(&JsonPath::root(), "set_add_on_credit_cap"),
                Rule::InvalidValue,
                format!("`set_add_on_credit_cap` {n} is out of range: a cap is an integer from 0 to {MAX_CAP}"),
            ));
        }
        actions.push((ACTION_FIELDS[1], CapAction::Set(n)));
    }
    actions.sort_by_key(|(n, _)| order.iter().position(|o| o == n).unwrap_or(usize::MAX));
    let action = exactly_one(
        actions,
        &USAGE_CONFIG,
        Rule::Action,
        "`clear_add_on_credit_cap: true`, `set_add_on_credit_cap`",
        &mut v,
    );
    let given = scope_of(
        req.team_level,
        req.group_id.as_ref(),
        req.user_email.as_ref(),
        order,
    );
    let scope = exactly_one(given, &USAGE_CONFIG, Rule::Scope, SCOPES, &mut v);
    finish(v, || (scope.expect("scope"), action.expect("action")))
}

#[cfg(test)]
mod tests;
