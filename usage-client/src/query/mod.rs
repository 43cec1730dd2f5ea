//! The typed query builder.
//!
//! Every data source has a module of typed fields, generated from usage-core's schema
//! tables ([`autocomplete`], [`chat`], [`command`], [`pcw`], [`agent`]). A field's type
//! says what it can do: metrics offer `sum()/avg()/min()/max()`, dimensions `count()`
//! and `group_by(alias)`, booleans `sum()/count()` and `eq(bool)`; filters take values of
//! the field's type. So a field of another source, or an aggregation the field does not
//! allow, does not compile:
//!
//! ```compile_fail
//! use usage_client::query::{autocomplete, chat};
//! // A chat field in an autocomplete query.
//! let q = autocomplete::query().select(chat::num_chats_received().sum());
//! ```
//!
//! ```compile_fail
//! use usage_client::query::autocomplete;
//! // SUM of a dimension.
//! let q = autocomplete::query().select(autocomplete::api_key().sum());
//! ```
//!
//! What only the whole query can tell (rule 1: all selections aggregated or none; alias
//! uniqueness) is checked by usage-core's validator in [`QueryBuilder::build`], with the
//! same violations the server would answer:
//!
//! ```
//! use chrono::NaiveDate;
//! use usage_client::query::autocomplete as ac;
//!
//! let q = ac::query()
//!     .select(ac::num_acceptances().sum())
//!     .select(ac::distinct_users())
//!     .filter(ac::date().ge(NaiveDate::from_ymd_opt(2025, 5, 1).unwrap()))
//!     .filter(ac::version().ge("1.10.0"))
//!     .group_by(ac::language().group_by("lang"))
//!     .build()
//!     .unwrap();
//! assert_eq!(q.plan().selections[0].alias, "sum_num_acceptances");
//!
//! let err = ac::query()
//!     .select(ac::num_acceptances().sum().alias("x"))
//!     .select(ac::num_lines_accepted().sum().alias("x"))
//!     .build()
//!     .unwrap_err();
//! assert_eq!(err.violations()[0].path(), "query_requests[0].selections[1].name");
//! assert_eq!(err.violations()[0].rule().as_str(), "duplicate_alias");
//! ```

use std::marker::PhantomData;

use chrono::{DateTime, NaiveDate, Utc};
use usage_core::Violation;
use usage_core::ident::Ident;
use usage_core::plan::{Limits, QueryPlan};
use usage_core::schema::{Agg, FilterOp, Source};
use usage_core::wire::{
    Aggregation, AnalyticsRequest, Filter, QueryRequest, Selection as WireSelection,
};

/// A data source, as a type.
pub trait DataSource: Copy + Default + 'static {
    /// The source.
    const SOURCE: Source;
}

/// The name of a `date UTC±HH:MM` field.
pub fn local_date_name(offset_minutes: i32) -> String {
    let sign = if offset_minutes < 0 { '-' } else { '+' };
    let m = offset_minutes.abs();
    format!("date UTC{sign}{:02}:{:02}", m / 60, m % 60)
}

include!(concat!(env!("OUT_DIR"), "/fields.rs"));

/// A field selection of source `S`, with its aggregation function and optional alias.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Selection<S> {
    field: String,
    agg: Agg,
    alias: Option<String>,
    source: PhantomData<S>,
}

impl<S: DataSource> Selection<S> {
    fn new(field: String, agg: Agg) -> Self {
        Selection {
            field,
            agg,
            alias: None,
            source: PhantomData,
        }
    }

    /// Names the result column (default: `{function}_{field}`, or the field).
    pub fn alias(mut self, alias: impl Into<String>) -> Self {
        self.alias = Some(alias.into());
        self
    }
}

/// A filter on a field of source `S`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct FilterOn<S> {
    field: String,
    op: FilterOp,
    value: String,
    source: PhantomData<S>,
}

/// A group-by field of source `S` with its alias.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct GroupBy<S> {
    field: String,
    alias: String,
    source: PhantomData<S>,
}

fn filter<S>(field: &str, op: FilterOp, value: String) -> FilterOn<S> {
    FilterOn {
        field: field.to_string(),
        op,
        value,
        source: PhantomData,
    }
}

/// Values of text fields.
#[derive(Debug, Clone, Copy)]
pub struct TextValue;
/// Values of version fields (compared part by part: `1.9` < `1.10`).
#[derive(Debug, Clone, Copy)]
pub struct VersionValue;
/// Values of closed-enum fields (identifiers; an unknown one fails in `build`).
#[derive(Debug, Clone, Copy)]
pub struct EnumValue;
/// Values of date fields.
#[derive(Debug, Clone, Copy)]
pub struct DateValue;
/// Values of `hour` and `timestamp` fields.
#[derive(Debug, Clone, Copy)]
pub struct TimeValue;

/// A dimension: selected as is, counted, grouped by, filtered on.
#[derive(Debug, Clone)]
pub struct Dimension<S, K> {
    name: String,
    kind: PhantomData<(S, K)>,
}

/// A filter-only field (PCW's `language`, `ide`, `version`).
#[derive(Debug, Clone)]
pub struct FilterOnly<S, K> {
    name: String,
    kind: PhantomData<(S, K)>,
}

/// An integer metric: summed, averaged, min/max, selected raw, filtered on.
#[derive(Debug, Clone)]
pub struct Metric<S> {
    name: String,
    source: PhantomData<S>,
}

/// A boolean metric: summed (number of `true`), counted, selected raw, filtered on equality.
#[derive(Debug, Clone)]
pub struct Flag<S> {
    name: String,
    source: PhantomData<S>,
}

/// A `distinct_*` count: selected (UNSPECIFIED) or counted (COUNT); never grouped.
#[derive(Debug, Clone)]
pub struct Distinct<S> {
    name: String,
    source: PhantomData<S>,
}

/// A field that can only be selected, as is (PCW fields, the agent source's `metadata`).
#[derive(Debug, Clone)]
pub struct SelectOnly<S> {
    name: String,
    source: PhantomData<S>,
}

impl<S, K> Dimension<S, K> {
    pub(crate) fn new(name: String) -> Self {
        Dimension {
            name,
            kind: PhantomData,
        }
    }
}
impl<S, K> FilterOnly<S, K> {
    pub(crate) fn new(name: String) -> Self {
        FilterOnly {
            name,
            kind: PhantomData,
        }
    }
}
impl<S> Metric<S> {
    pub(crate) fn new(name: String) -> Self {
        Metric {
            name,
            source: PhantomData,
        }
    }
}
impl<S> Flag<S> {
    pub(crate) fn new(name: String) -> Self {
        Flag {
            name,
            source: PhantomData,
        }
    }
}
impl<S> Distinct<S> {
    pub(crate) fn new(name: String) -> Self {
        Distinct {
            name,
            source: PhantomData,
        }
    }
}
impl<S> SelectOnly<S> {
    pub(crate) fn new(name: String) -> Self {
        SelectOnly {
            name,
            source: PhantomData,
        }
    }
}

impl<S: DataSource, K> Dimension<S, K> {
    /// The field as is (raw rows, or a group's value when it is also a group-by field).
    pub fn select(&self) -> Selection<S> {
        Selection::new(self.name.clone(), Agg::Unspecified)
    }

    /// Number of records (`QUERY_AGGREGATION_COUNT`).
    pub fn count(&self) -> Selection<S> {
        Selection::new(self.name.clone(), Agg::Count)
    }

    /// Groups by this field; `alias` names the group's value in each item.
    pub fn group_by(&self, alias: impl Into<String>) -> GroupBy<S> {
        GroupBy {
            field: self.name.clone(),
            alias: alias.into(),
            source: PhantomData,
        }
    }
}

impl<S: DataSource> Metric<S> {
    /// The record's own value (raw rows only).
    pub fn select(&self) -> Selection<S> {
        Selection::new(self.name.clone(), Agg::Unspecified)
    }
    /// Exact sum.
    pub fn sum(&self) -> Selection<S> {
        Selection::new(self.name.clone(), Agg::Sum)
    }
    /// Mean (absent over no records).
    pub fn avg(&self) -> Selection<S> {
        Selection::new(self.name.clone(), Agg::Avg)
    }
    /// Minimum (absent over no records).
    pub fn min(&self) -> Selection<S> {
        Selection::new(self.name.clone(), Agg::Min)
    }
    /// Maximum (absent over no records).
    pub fn max(&self) -> Selection<S> {
        Selection::new(self.name.clone(), Agg::Max)
    }
}

impl<S: DataSource> Flag<S> {
    /// The record's own value (raw rows only).
    pub fn select(&self) -> Selection<S> {
        Selection::new(self.name.clone(), Agg::Unspecified)
    }
    /// Number of `true` records.
    pub fn sum(&self) -> Selection<S> {
        Selection::new(self.name.clone(), Agg::Sum)
    }
    /// Number of records.
    pub fn count(&self) -> Selection<S> {
        Selection::new(self.name.clone(), Agg::Count)
    }
    /// Records whose value is `v`.
    pub fn eq(&self, v: bool) -> FilterOn<S> {
        filter(&self.name, FilterOp::Equal, v.to_string())
    }
    /// Records whose value is not `v`.
    pub fn ne(&self, v: bool) -> FilterOn<S> {
        filter(&self.name, FilterOp::NotEqual, v.to_string())
    }
}

impl<S: DataSource> Distinct<S> {
    /// The distinct count (`QUERY_AGGREGATION_COUNT`; same value as selecting it as is).
    pub fn count(&self) -> Selection<S> {
        Selection::new(self.name.clone(), Agg::Count)
    }
}

impl<S: DataSource> From<Distinct<S>> for Selection<S> {
    fn from(d: Distinct<S>) -> Self {
        Selection::new(d.name, Agg::Unspecified)
    }
}

impl<S: DataSource> SelectOnly<S> {
    /// The field as is.
    pub fn select(&self) -> Selection<S> {
        Selection::new(self.name.clone(), Agg::Unspecified)
    }
}

impl<S: DataSource> From<SelectOnly<S>> for Selection<S> {
    fn from(f: SelectOnly<S>) -> Self {
        f.select()
    }
}

/// The six comparisons, for a field type and the Rust type of its values.
macro_rules! comparisons {
    ($field:ident, $kind:ty, $input:ty, |$v:ident| $render:expr) => {
        impl<S: DataSource> $field<S, $kind> {
            /// Equal (several `eq` on one field match any of their values).
            pub fn eq(&self, $v: $input) -> FilterOn<S> {
                filter(&self.name, FilterOp::Equal, $render)
            }
            /// Not equal.
            pub fn ne(&self, $v: $input) -> FilterOn<S> {
                filter(&self.name, FilterOp::NotEqual, $render)
            }
            /// Greater than.
            pub fn gt(&self, $v: $input) -> FilterOn<S> {
                filter(&self.name, FilterOp::GreaterThan, $render)
            }
            /// Less than.
            pub fn lt(&self, $v: $input) -> FilterOn<S> {
                filter(&self.name, FilterOp::LessThan, $render)
            }
            /// Greater than or equal.
            pub fn ge(&self, $v: $input) -> FilterOn<S> {
                filter(&self.name, FilterOp::Ge, $render)
            }
            /// Less than or equal.
            pub fn le(&self, $v: $input) -> FilterOn<S> {
                filter(&self.name, FilterOp::Le, $render)
            }
        }
    };
}

comparisons!(Dimension, TextValue, &str, |v| v.to_string());
comparisons!(Dimension, VersionValue, &str, |v| v.to_string());
comparisons!(Dimension, EnumValue, &str, |v| v.to_string());
comparisons!(Dimension, DateValue, NaiveDate, |v| v
    .format("%Y-%m-%d")
    .to_string());
comparisons!(Dimension, TimeValue, DateTime<Utc>, |v| v
    .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true));
comparisons!(FilterOnly, TextValue, &str, |v| v.to_string());
comparisons!(FilterOnly, VersionValue, &str, |v| v.to_string());

impl<S: DataSource> Dimension<S, TimeValue> {
    /// Records on or after the start of UTC day `d` (`YYYY-MM-DD` compares the UTC date).
    pub fn ge_day(&self, d: NaiveDate) -> FilterOn<S> {
        filter(&self.name, FilterOp::Ge, d.format("%Y-%m-%d").to_string())
    }
    /// Records on or before UTC day `d`, the whole day included.
    pub fn le_day(&self, d: NaiveDate) -> FilterOn<S> {
        filter(&self.name, FilterOp::Le, d.format("%Y-%m-%d").to_string())
    }
}

impl<S: DataSource> Metric<S> {
    /// Equal.
    pub fn eq(&self, v: i64) -> FilterOn<S> {
        filter(&self.name, FilterOp::Equal, v.to_string())
    }
    /// Not equal.
    pub fn ne(&self, v: i64) -> FilterOn<S> {
        filter(&self.name, FilterOp::NotEqual, v.to_string())
    }
    /// Greater than.
    pub fn gt(&self, v: i64) -> FilterOn<S> {
        filter(&self.name, FilterOp::GreaterThan, v.to_string())
    }
    /// Less than.
    pub fn lt(&self, v: i64) -> FilterOn<S> {
        filter(&self.name, FilterOp::LessThan, v.to_string())
    }
    /// Greater than or equal.
    pub fn ge(&self, v: i64) -> FilterOn<S> {
        filter(&self.name, FilterOp::Ge, v.to_string())
    }
    /// Less than or equal.
    pub fn le(&self, v: i64) -> FilterOn<S> {
        filter(&self.name, FilterOp::Le, v.to_string())
    }
}

/// Builds one query of source `S`. Nothing is checked until [`QueryBuilder::build`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a query builder does nothing until .build()"]
pub struct QueryBuilder<S> {
    selections: Vec<Selection<S>>,
    filters: Vec<FilterOn<S>>,
    groups: Vec<GroupBy<S>>,
}

impl<S: DataSource> Default for QueryBuilder<S> {
    fn default() -> Self {
        QueryBuilder {
            selections: Vec::new(),
            filters: Vec::new(),
            groups: Vec::new(),
        }
    }
}

impl<S: DataSource> QueryBuilder<S> {
    /// An empty query.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a selection (a metric's `sum()`, a dimension's `count()` or `select()`, a
    /// `distinct_*` field, …).
    pub fn select(mut self, s: impl Into<Selection<S>>) -> Self {
        self.selections.push(s.into());
        self
    }

    /// Adds a filter (filters combine with AND, except several `eq` on one field).
    pub fn filter(mut self, f: FilterOn<S>) -> Self {
        self.filters.push(f);
        self
    }

    /// Adds a group-by field.
    pub fn group_by(mut self, g: GroupBy<S>) -> Self {
        self.groups.push(g);
        self
    }

    /// The query as sent on the wire.
    pub fn to_request(&self) -> QueryRequest {
        QueryRequest {
            data_source: Some(Ident::Known(S::SOURCE)),
            selections: self
                .selections
                .iter()
                .map(|s| WireSelection {
                    field: Some(s.field.clone()),
                    name: s.alias.clone(),
                    aggregation_function: (s.agg != Agg::Unspecified)
                        .then_some(Ident::Known(s.agg)),
                })
                .collect(),
            filters: self
                .filters
                .iter()
                .map(|f| Filter {
                    name: Some(f.field.clone()),
                    filter: Some(Ident::Known(f.op)),
                    value: Some(f.value.clone()),
                })
                .collect(),
            aggregations: self
                .groups
                .iter()
                .map(|g| Aggregation {
                    field: Some(g.field.clone()),
                    name: Some(g.alias.clone()),
                })
                .collect(),
        }
    }

    /// Checks the query with usage-core's validator, as the server would.
    ///
    /// # Errors
    /// [`InvalidQuery`] with every violation (paths as in a request whose only query is this
    /// one: `query_requests[0]....`).
    pub fn build(self) -> Result<Query, InvalidQuery> {
        Query::from_request(self.to_request())
    }
}

/// A query the validator accepted: its wire form and its plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    request: QueryRequest,
    plan: QueryPlan,
}

impl Query {
    /// Validates a query as sent (for queries built by hand or read from JSON).
    ///
    /// # Errors
    /// [`InvalidQuery`] with every violation.
    pub fn from_request(request: QueryRequest) -> Result<Query, InvalidQuery> {
        let req = AnalyticsRequest {
            query_requests: vec![request],
            ..Default::default()
        };
        match usage_core::validate::analytics(&req, &Limits::default()) {
            Ok(mut plan) => {
                let plan = plan.queries.remove(0);
                let request = req.query_requests.into_iter().next().expect("one query");
                Ok(Query { request, plan })
            }
            Err(violations) => Err(InvalidQuery {
                violations: violations.into_vec(),
            }),
        }
    }

    /// The wire form.
    pub fn request(&self) -> &QueryRequest {
        &self.request
    }

    /// The validated plan (shape, resolved fields, aliases).
    pub fn plan(&self) -> &QueryPlan {
        &self.plan
    }

    /// The data source.
    pub fn source(&self) -> Source {
        self.plan.source
    }
}

/// A query the validator rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid query: {}", .violations.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("; "))]
pub struct InvalidQuery {
    violations: Vec<Violation>,
}

impl InvalidQuery {
    /// The violations in document order: every one, up to the server's limit of
    /// [`usage_core::error::MAX_DETAILS`] (the first ones).
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }
}
