//! `UserPageAnalytics` and `AgentAnalytics` in SQL (contract sections 4 and 5).

use tokio_postgres::Row;
use usage_core::eval::stats;
use usage_core::ident::Ident;
use usage_core::plan::{AgentPlan, AgentSource, TimeRange};
use usage_core::schema::records::{self, RecordKind};
use usage_core::time::{MICROS_PER_DAY, Timestamp};
use usage_core::wire::{
    AgentLines, AgentLinesEntry, AgentQueryResult, AgentRunEntry, AgentRuns, AgentToolUsage,
    AgentToolUsageEntry, UserStats,
};

use super::dialect;
use super::expr::{Param, Statement};
use super::names::{READABLE, table};
use super::people;
use super::rows::DecodeError;
use crate::store::StoreResult;

struct Params {
    list: Vec<Param>,
}

impl Params {
    fn add(&mut self, p: Param) -> String {
        self.list.push(p);
        dialect::placeholder(self.list.len())
    }
}

fn time_col(kind: &RecordKind) -> String {
    format!(
        "\"{}\"",
        kind.time.expect("record kinds with tables have a time")
    )
}

/// The result column of the latest time of the `i`-th kind of [`records::ACTIVITY`].
fn last_column(i: usize) -> String {
    format!("last{i}")
}

/// The result column of the user's count of active days.
const ACTIVE_DAYS: &str = "active_days";

/// One statement listing the team's users (or a group's members) ordered by e-mail, with
/// their activity: the user's record in the columns of [`people::user_columns`], the
/// active days in [`ACTIVE_DAYS`], and per kind of [`records::ACTIVITY`] that feeds a
/// latest time, that time in [`last_column`]. [`user_row`] reads it back.
pub fn user_page(team_id: &str, group_name: Option<&str>, range: TimeRange) -> Statement {
    let mut p = Params { list: Vec::new() };
    let team = p.add(Param::Text(team_id.to_string()));
    let mut range_sql = String::new();
    let mut days = Vec::new();
    let (start, end) = (
        range.start.map(|s| p.add(Param::Int(s.0))),
        range.end.map(|e| p.add(Param::Int(e.0))),
    );
    let mut with = Vec::new();
    let mut cols = Vec::new();
    let mut joins = String::new();
    // One grouped scan per table (no per-user lookups: the record tables have no index by
    // user, which would cost every write more than it saves here).
    for (i, (kind, last)) in records::ACTIVITY.iter().enumerate() {
        let t = time_col(kind);
        range_sql.clear();
        if let Some(s) = &start {
            range_sql.push_str(&format!(" AND x.{t} >= {s}"));
        }
        if let Some(e) = &end {
            range_sql.push_str(&format!(" AND x.{t} < {e}"));
        }
        days.push(format!(
            "SELECT x.api_key, {} AS day FROM {} x WHERE x.team_id = {team} AND x.{READABLE}{range_sql}",
            dialect::floor_div(&format!("x.{t}"), MICROS_PER_DAY),
            table(kind)
        ));
        if last.is_some() {
            let l = last_column(i);
            with.push(format!(
                "{l} AS (SELECT x.api_key, MAX(x.{t}) AS t FROM {} x WHERE x.team_id = {team} AND x.{READABLE} \
                 GROUP BY x.api_key)",
                table(kind)
            ));
            cols.push(format!("{l}.t AS {l}"));
            joins.push_str(&format!(" LEFT JOIN {l} ON {l}.api_key = u.api_key"));
        }
    }
    with.insert(
        0,
        format!(
            "active AS (SELECT a.api_key, COUNT(DISTINCT a.day) AS n FROM ({}) a GROUP BY a.api_key)",
            days.join(" UNION ALL ")
        ),
    );
    let mut sql = format!(
        "WITH {} SELECT {}, COALESCE(a.n, 0) AS {ACTIVE_DAYS}, {} FROM users u \
         LEFT JOIN active a ON a.api_key = u.api_key{joins} WHERE u.team_id = {team}",
        with.join(", "),
        people::user_columns("u", &team),
        cols.join(", "),
    );
    if let Some(g) = group_name {
        let gp = p.add(Param::Text(g.to_string()));
        sql.push_str(&format!(
            " AND u.email IN (SELECT m.email FROM user_groups m JOIN groups g ON g.team_id = m.team_id AND g.group_id = m.group_id \
             WHERE m.team_id = {team} AND g.group_name = {gp})"
        ));
    }
    sql.push_str(&format!(" ORDER BY {}", dialect::bytewise("u.email")));
    Statement {
        sql,
        params: p.list,
    }
}

/// A row of [`user_page`] as the user's statistics, by the engine's rule
/// ([`usage_core::eval::stats::user_row`]): the user's record, the active days, and the
/// latest time of each kind folded into the time it feeds ([`records::LastUse`]).
///
/// # Errors
/// A column that does not decode.
pub fn user_row(row: &Row) -> StoreResult<UserStats> {
    let user = people::user_record(row)?;
    let active_days: i64 = row.try_get(ACTIVE_DAYS).map_err(DecodeError::from)?;
    let mut latest: [Option<Timestamp>; 3] = [None; 3];
    for (i, (_, last)) in records::ACTIVITY.iter().enumerate() {
        if let Some(last) = last {
            let t: Option<i64> = row
                .try_get(last_column(i).as_str())
                .map_err(DecodeError::from)?;
            let slot = &mut latest[last.index()];
            *slot = (*slot).max(t.map(Timestamp));
        }
    }
    let [autocomplete, chat, command] = latest;
    Ok(stats::user_row(
        &user,
        active_days,
        autocomplete,
        chat,
        command,
    ))
}

/// The statements of an agent plan, one per query, and the sources they answer.
pub fn agent(team_id: &str, plan: &AgentPlan) -> Vec<(AgentSource, Statement)> {
    plan.queries
        .iter()
        .map(|q| {
            let mut p = Params { list: Vec::new() };
            let team = p.add(Param::Text(team_id.to_string()));
            let kind = match q {
                AgentSource::Lines => &records::AGENT_LINES,
                AgentSource::Runs => &records::AGENT_RUNS,
                AgentSource::ToolUsage => &records::AGENT_TOOL_USAGE,
            };
            let t = format!("r.{}", time_col(kind));
            let ides = p.add(Param::TextArray(plan.ide_types.iter().map(|i| i.as_str().to_string()).collect()));
            let mut wh = vec![
                format!("r.team_id = {team}"),
                format!("r.{READABLE}"),
                dialect::any_text("r.ide_type", &ides),
            ];
            if let Some(s) = plan.range.start {
                let x = p.add(Param::Int(s.0));
                wh.push(format!("{t} >= {x}"));
            }
            if let Some(e) = plan.range.end {
                let x = p.add(Param::Int(e.0));
                wh.push(format!("{t} < {x}"));
            }
            if let Some(g) = &plan.group_name {
                let gp = p.add(Param::Text(g.clone()));
                wh.push(format!(
                    "r.api_key IN (SELECT u.api_key FROM users u JOIN user_groups m ON m.team_id = u.team_id AND m.email = u.email \
                     JOIN groups g ON g.team_id = m.team_id AND g.group_id = m.group_id WHERE u.team_id = {team} AND g.group_name = {gp})"
                ));
            } else if let Some(emails) = &plan.emails {
                let ep = p.add(Param::TextArray(emails.clone()));
                wh.push(format!(
                    "r.api_key IN (SELECT u.api_key FROM users u WHERE u.team_id = {team} AND {})",
                    dialect::any_text("u.email", &ep)
                ));
            }
            let wh = wh.join(" AND ");
            let sql = match q {
                AgentSource::Lines => format!(
                    "SELECT {day}::text, SUM(r.lines_suggested)::text, SUM(r.lines_accepted)::text FROM {tb} r WHERE {wh} GROUP BY {day} ORDER BY {day}",
                    day = dialect::floor_div(&t, MICROS_PER_DAY),
                    tb = table(kind)
                ),
                AgentSource::Runs => format!(
                    "SELECT {t}::text, r.model, r.mode, r.messages_sent::text, r.agent_id, r.prompts_used::text FROM {tb} r WHERE {wh} ORDER BY {t}, {}, {}",
                    dialect::bytewise("r.agent_id"),
                    dialect::bytewise("r.id"),
                    tb = table(kind)
                ),
                AgentSource::ToolUsage => format!(
                    // Ordered by the count the answer shows (sums clamp at i64::MAX), then tool.
                    "SELECT r.tool, SUM(r.count)::text FROM {tb} r WHERE {wh} GROUP BY r.tool \
                     ORDER BY LEAST(SUM(r.count), 9223372036854775807) DESC, {}",
                    dialect::bytewise("r.tool"),
                    tb = table(kind)
                ),
            };
            (*q, Statement { sql, params: p.list })
        })
        .collect()
}

fn time(s: Option<&str>) -> Result<Option<Timestamp>, DecodeError> {
    s.map(|s| {
        s.parse::<i64>()
            .map(Timestamp)
            .map_err(|_| DecodeError(format!("`{s}` is not a time")))
    })
    .transpose()
}

fn count(s: Option<&str>) -> Result<i64, DecodeError> {
    let n: i128 = s
        .unwrap_or("0")
        .parse()
        .map_err(|_| DecodeError(format!("`{s:?}` is not a count")))?;
    Ok(n.clamp(0, i128::from(i64::MAX)) as i64)
}

/// Decodes the rows of one agent statement.
///
/// # Errors
/// A column that does not decode.
pub fn agent_result(
    source: AgentSource,
    rows: &[Vec<Option<String>>],
) -> Result<AgentQueryResult, DecodeError> {
    let col = |r: &[Option<String>], i: usize| r.get(i).and_then(|v| v.clone());
    Ok(match source {
        AgentSource::Lines => {
            let mut entries = Vec::with_capacity(rows.len());
            for r in rows {
                let day: i64 = col(r, 0)
                    .unwrap_or_default()
                    .parse()
                    .map_err(|_| DecodeError("day".into()))?;
                entries.push(AgentLinesEntry {
                    day: Timestamp(day * MICROS_PER_DAY),
                    lines_suggested: count(col(r, 1).as_deref())?,
                    lines_accepted: count(col(r, 2).as_deref())?,
                });
            }
            AgentQueryResult {
                agent_lines: Some(AgentLines {
                    agent_lines: entries,
                }),
                ..Default::default()
            }
        }
        AgentSource::Runs => {
            let mut entries = Vec::with_capacity(rows.len());
            for r in rows {
                let t = time(col(r, 0).as_deref())?.unwrap_or_default();
                entries.push(AgentRunEntry {
                    day: t.date().start(),
                    model: col(r, 1).unwrap_or_default(),
                    mode: Ident::parse(&col(r, 2).unwrap_or_default()),
                    messages_sent: count(col(r, 3).as_deref())?,
                    agent_id: col(r, 4).unwrap_or_default(),
                    prompts_used: count(col(r, 5).as_deref())?,
                });
            }
            AgentQueryResult {
                agent_runs: Some(AgentRuns {
                    agent_runs: entries,
                }),
                ..Default::default()
            }
        }
        AgentSource::ToolUsage => {
            let mut entries = Vec::with_capacity(rows.len());
            for r in rows {
                entries.push(AgentToolUsageEntry {
                    tool: col(r, 0).unwrap_or_default(),
                    count: count(col(r, 1).as_deref())?,
                });
            }
            AgentQueryResult {
                agent_tool_usage: Some(AgentToolUsage {
                    agent_tool_usage: entries,
                }),
                ..Default::default()
            }
        }
    })
}
