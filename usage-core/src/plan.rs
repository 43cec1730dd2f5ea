//! Validated requests ("parse, don't validate"): what the evaluator and the stores accept.
//!
//! A plan can only be made by the validator ([`crate::validate`]), so every plan holds
//! resolved fields, parsed values and a known shape, and the evaluator and the SQL
//! generator need not check them again. The plan structs ([`AnalyticsPlan`],
//! [`QueryPlan`], [`SelectionPlan`], [`GroupPlan`], [`FilterPlan`], [`UserPagePlan`],
//! [`AgentPlan`]) are `#[non_exhaustive]`: other crates read their fields but cannot build
//! one, so a plan from outside this crate comes from the validator.
//!
//! ```compile_fail,E0639
//! // Outside usage-core, a plan cannot be written by hand:
//! let plan = usage_core::plan::UserPagePlan {
//!     group_name: None,
//!     range: Default::default(),
//! };
//! ```
//!
//! ```
//! // It comes from the validator, and reads as usual.
//! let plan = usage_core::validate::user_page(&Default::default()).unwrap();
//! assert_eq!(plan.group_name, None);
//! assert!(plan.range.is_all());
//! ```

use crate::schema::{Agg, FieldRef, FilterOp, IdeType, Source};
use crate::time::{Date, Timestamp};

/// Limits of one request (contract section 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Query requests per `Analytics` request.
    pub query_requests: usize,
    /// Selections per query.
    pub selections: usize,
    /// Filters per query.
    pub filters: usize,
    /// Aggregations (group-by fields) per query.
    pub aggregations: usize,
    /// E-mails per `AgentAnalytics` request.
    pub emails: usize,
    /// Records per `Ingest` request.
    pub ingest_records: usize,
    /// Items of a whole `Analytics` answer, its queries together (contract section 11).
    pub result_items: usize,
    /// Bytes of a whole `Analytics` answer, counted as the lengths of its items' aliases
    /// and values (an extension of section 9: an answer's memory grows with its cells,
    /// not only its items).
    pub result_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            query_requests: 20,
            selections: 100,
            filters: 100,
            aggregations: 10,
            emails: 10_000,
            ingest_records: 10_000,
            result_items: 100_000,
            result_bytes: 64 << 20,
        }
    }
}

/// A half-open time range `[start, end)`; either end may be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimeRange {
    /// Inclusive start.
    pub start: Option<Timestamp>,
    /// Exclusive end.
    pub end: Option<Timestamp>,
}

impl TimeRange {
    /// Whether `t` lies in the range.
    pub fn contains(&self, t: Timestamp) -> bool {
        self.start.is_none_or(|s| s <= t) && self.end.is_none_or(|e| t < e)
    }

    /// Whether both ends are open.
    pub fn is_all(&self) -> bool {
        self.start.is_none() && self.end.is_none()
    }
}

/// A validated `Analytics` request.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AnalyticsPlan {
    /// Restricts every query to this group's members.
    pub group_name: Option<String>,
    /// Restricts PCW queries (other sources ignore it).
    pub range: TimeRange,
    /// The queries, in request order.
    pub queries: Vec<QueryPlan>,
}

/// The shape of a query's answer (contract section 3, Shapes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryShape {
    /// 1: aggregated selections, no group-by: one item.
    Total,
    /// 2: aggregated selections with group-by: one item per group.
    Grouped,
    /// 3: unaggregated selections with group-by: one item per group, group values only.
    GroupValues,
    /// 4: unaggregated selections, no group-by: one item per record.
    Raw,
    /// PCW: one item over all matching records.
    Pcw,
}

/// A validated query.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct QueryPlan {
    /// The data source.
    pub source: Source,
    /// The answer's shape.
    pub shape: QueryShape,
    /// The selections, in request order, with their aliases.
    pub selections: Vec<SelectionPlan>,
    /// The filters; all must pass.
    pub filters: Vec<FilterPlan>,
    /// The group-by fields, in request order.
    pub group_by: Vec<GroupPlan>,
}

/// A resolved selection.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SelectionPlan {
    /// The alias (explicit or default).
    pub alias: String,
    /// The field.
    pub field: FieldRef,
    /// The aggregation function.
    pub agg: Agg,
}

/// A resolved group-by field.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GroupPlan {
    /// The alias of the group's value.
    pub alias: String,
    /// The field.
    pub field: FieldRef,
}

/// A resolved filter on one field.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FilterPlan {
    /// The field.
    pub field: FieldRef,
    /// The test.
    pub test: FilterTest,
}

/// What a filter tests.
#[derive(Debug, Clone, PartialEq)]
pub enum FilterTest {
    /// An operator and a value (every operator but EQUAL).
    Compare(FilterOp, FilterValue),
    /// Equal to any of these values (every EQUAL filter on the field).
    AnyOf(Vec<FilterValue>),
}

/// A parsed filter value.
#[derive(Debug, Clone, PartialEq)]
pub enum FilterValue {
    /// A date (for `date`, `date UTC±H`).
    Date(Date),
    /// An instant (for `hour`, `timestamp`).
    Time(Timestamp),
    /// A `YYYY-MM-DD` given for `hour` or `timestamp`: compares the record's UTC date.
    TimeDate(Date),
    /// Text, an enum identifier, a version, or JSON text.
    Text(String),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
}

/// A validated `UserPageAnalytics` request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UserPagePlan {
    /// Restrict to this group's members.
    pub group_name: Option<String>,
    /// `activeDays` counts days in this range.
    pub range: TimeRange,
}

/// One agent data source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentSource {
    /// `agent_lines`.
    Lines,
    /// `agent_runs`.
    Runs,
    /// `agent_tool_usage`.
    ToolUsage,
}

/// A validated `AgentAnalytics` request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentPlan {
    /// Restrict to this group's members.
    pub group_name: Option<String>,
    /// Restrict to these e-mails (`None`: everyone).
    pub emails: Option<Vec<String>>,
    /// The IDE types to include (never empty).
    pub ide_types: Vec<IdeType>,
    /// `start <= time < end`.
    pub range: TimeRange,
    /// The queries, in request order.
    pub queries: Vec<AgentSource>,
}

/// The scope of a cap.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapScope {
    /// Every user of the team.
    Team,
    /// Every user of the group with this id.
    Group(String),
    /// The user with this e-mail.
    User(String),
}

impl CapScope {
    /// The audit log's form: `team`, `group:<id>`, `user:<email>`.
    pub fn label(&self) -> String {
        match self {
            CapScope::Team => "team".to_string(),
            CapScope::Group(g) => format!("group:{g}"),
            CapScope::User(u) => format!("user:{u}"),
        }
    }
}

/// What `UsageConfig` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapAction {
    /// Set the cap.
    Set(i64),
    /// Clear it.
    Clear,
}

/// The largest cap.
pub const MAX_CAP: i64 = 1_000_000_000;
