//! Comparing answers of two evaluators or stores, and random plans over a dataset: shared
//! by the differential tests of the in-memory evaluator and of the SQL stores.

use proptest::prelude::*;

use super::data::Dataset;
use super::query::{Choices, Pool};
use crate::eval::EvalError;
use crate::plan::{AgentPlan, AgentSource, AnalyticsPlan, TimeRange, UserPagePlan};
use crate::schema::{Agg, Expr, IdeType};
use crate::wire::AnalyticsResponse;

/// A group name to restrict to: none, one of the dataset's, or an unknown one.
pub fn group_choice(data: &Dataset, c: &mut Choices) -> Option<String> {
    let mut names = data.group_names();
    names.push("no-such-group".into());
    match c.pick(3) {
        0 => None,
        _ => Some(c.one(&names).clone()),
    }
}

/// A random PCW/statistics range: open, half-open or closed, around the pool's days.
pub fn range_choice(pool: &Pool, c: &mut Choices) -> TimeRange {
    let mut t = || {
        let hour_start = c.pick(2) == 0;
        (c.pick(3) != 0).then(|| pool.instant(c, hour_start))
    };
    let (a, b) = (t(), t());
    match (a, b) {
        (Some(a), Some(b)) => TimeRange {
            start: Some(a.min(b)),
            end: Some(a.max(b)),
        },
        (start, end) => TimeRange { start, end },
    }
}

/// The aliases whose values are floats.
pub fn float_aliases(plan: &AnalyticsPlan, q: usize) -> Vec<&str> {
    plan.queries[q]
        .selections
        .iter()
        .filter(|s| s.agg == Agg::Avg || s.field.field().expr == Expr::PcwPercent)
        .map(|s| s.alias.as_str())
        .collect()
}

/// Floats equal to 1e-12 relative (or equal text when not numbers).
pub fn same_float(a: &str, b: &str) -> bool {
    match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
        _ => a == b,
    }
}

/// Two answers of one plan are equal: same errors, same items in the same order, same
/// aliases, equal values (AVG and `percent_code_written` to 1e-12 relative).
///
/// # Errors
/// A failed case naming the query and alias that differ.
pub fn check_analytics(
    plan: &AnalyticsPlan,
    got: &Result<AnalyticsResponse, EvalError>,
    want: &Result<AnalyticsResponse, EvalError>,
) -> Result<(), TestCaseError> {
    let (got, want) = match (got, want) {
        (Ok(g), Ok(w)) => (g, w),
        _ => {
            prop_assert_eq!(got, want);
            return Ok(());
        }
    };
    prop_assert_eq!(got.query_results.len(), want.query_results.len());
    for (q, (g, w)) in got
        .query_results
        .iter()
        .zip(&want.query_results)
        .enumerate()
    {
        let floats = float_aliases(plan, q);
        prop_assert_eq!(
            g.response_items.len(),
            w.response_items.len(),
            "query {}: {:?}\nwant {:?}",
            q,
            g,
            w
        );
        for (gi, wi) in g.response_items.iter().zip(&w.response_items) {
            let keys = |i: &crate::wire::Item| i.keys().map(str::to_string).collect::<Vec<_>>();
            prop_assert_eq!(keys(&gi.item), keys(&wi.item), "query {}", q);
            for ((k, gv), (_, wv)) in gi.item.0.iter().zip(&wi.item.0) {
                if floats.contains(&k.as_str()) {
                    prop_assert!(same_float(gv, wv), "query {} {}: {} != {}", q, k, gv, wv);
                } else {
                    prop_assert_eq!(gv, wv, "query {} {}: {:?}\nwant {:?}", q, k, gi, wi);
                }
            }
        }
    }
    Ok(())
}

/// A random `UserPageAnalytics` plan over a dataset.
pub fn user_page_plan(data: &Dataset, c: &mut Choices) -> UserPagePlan {
    UserPagePlan {
        group_name: group_choice(data, c),
        range: range_choice(&Pool::default(), c),
    }
}

/// A random `AgentAnalytics` plan over a dataset: a group, some e-mails (one not on the
/// team), IDE types, a range and 1-3 queries.
pub fn agent_plan(data: &Dataset, c: &mut Choices) -> AgentPlan {
    let group_name = group_choice(data, c);
    let emails = (group_name.is_none() && c.pick(2) == 0).then(|| {
        let mut all = data.emails();
        all.push("stranger@x.test".into());
        all.into_iter().filter(|_| c.pick(2) == 0).collect()
    });
    let ide_types = match c.pick(3) {
        0 => vec![IdeType::Editor],
        1 => vec![IdeType::Plugin],
        _ => vec![IdeType::Editor, IdeType::Plugin],
    };
    let sources = [
        AgentSource::Lines,
        AgentSource::Runs,
        AgentSource::ToolUsage,
    ];
    let queries = (0..1 + c.pick(3)).map(|_| *c.one(&sources)).collect();
    AgentPlan {
        group_name,
        emails,
        ide_types,
        range: range_choice(&Pool::default(), c),
        queries,
    }
}
