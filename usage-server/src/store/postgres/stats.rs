//! `UserPageAnalytics` and `AgentAnalytics` in SQL (contract sections 4 and 5).

use usage_core::ident::Ident;
use usage_core::plan::{AgentPlan, AgentSource, TimeRange};
use usage_core::schema::TeamStatus;
use usage_core::schema::records::{self, RecordKind};
use usage_core::time::{MICROS_PER_DAY, Timestamp};
use usage_core::wire::{
    AgentLines, AgentLinesEntry, AgentQueryResult, AgentRunEntry, AgentRuns, AgentToolUsage,
    AgentToolUsageEntry, UserStats,
};

use super::dialect;
use super::rows::DecodeError;
use super::sql::{Param, READABLE, Statement, table};

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

/// The kinds whose records make a user active (contract section 4).
const ACTIVITY: [&RecordKind; 6] = [
    &records::AUTOCOMPLETE,
    &records::CHAT,
    &records::COMMAND,
    &records::AGENT_LINES,
    &records::AGENT_RUNS,
    &records::AGENT_TOOL_USAGE,
];

/// One statement listing the team's users (or a group's members) ordered by e-mail, with
/// their activity. Columns (all text): email, name, api_key, team_status, disable_vendor,
/// signup_time, active_days, last_autocomplete, last_chat, last_agent_run, last_command.
pub fn user_page(team_id: &str, group_name: Option<&str>, range: TimeRange) -> Statement {
    let mut p = Params { list: Vec::new() };
    let team = p.add(Param::Text(team_id.to_string()));
    let mut range_sql = String::new();
    let mut days = Vec::new();
    let (start, end) = (
        range.start.map(|s| p.add(Param::Int(s.0))),
        range.end.map(|e| p.add(Param::Int(e.0))),
    );
    // One grouped scan per table (no per-user lookups: the record tables have no index by
    // user, which would cost every write more than it saves here).
    for kind in ACTIVITY {
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
    }
    let last = [
        &records::AUTOCOMPLETE,
        &records::CHAT,
        &records::AGENT_RUNS,
        &records::COMMAND,
    ];
    let mut with = vec![format!(
        "active AS (SELECT a.api_key, COUNT(DISTINCT a.day) AS n FROM ({}) a GROUP BY a.api_key)",
        days.join(" UNION ALL ")
    )];
    let mut cols = Vec::new();
    let mut joins = String::new();
    for (i, kind) in last.iter().enumerate() {
        with.push(format!(
            "last{i} AS (SELECT x.api_key, MAX(x.{}) AS t FROM {} x WHERE x.team_id = {team} AND x.{READABLE} \
             GROUP BY x.api_key)",
            time_col(kind),
            table(kind)
        ));
        cols.push(format!("l{i}.t::text"));
        joins.push_str(&format!(
            " LEFT JOIN last{i} l{i} ON l{i}.api_key = u.api_key"
        ));
    }
    let mut sql = format!(
        "WITH {} SELECT u.email, u.name, u.api_key, u.team_status, u.disable_vendor::text, u.{signup}::text, \
         COALESCE(a.n, 0)::text, {} FROM users u LEFT JOIN active a ON a.api_key = u.api_key{joins} \
         WHERE u.team_id = {team}",
        with.join(", "),
        cols.join(", "),
        signup = records::SIGNUP_TIME,
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

fn time(s: Option<&str>) -> Result<Option<Timestamp>, DecodeError> {
    s.map(|s| {
        s.parse::<i64>()
            .map(Timestamp)
            .map_err(|_| DecodeError(format!("`{s}` is not a time")))
    })
    .transpose()
}

/// Decodes a row of [`user_page`].
///
/// # Errors
/// A column that does not decode.
pub fn user_row(row: &[Option<String>]) -> Result<UserStats, DecodeError> {
    let col = |i: usize| row.get(i).and_then(|v| v.as_deref());
    let auto = time(col(7))?;
    let chat = time(col(8))?.max(time(col(9))?);
    let command = time(col(10))?;
    Ok(UserStats {
        email: col(0).unwrap_or_default().to_string(),
        name: col(1).unwrap_or_default().to_string(),
        api_key: col(2).unwrap_or_default().to_string(),
        team_status: Ident::Known(
            col(3)
                .and_then(<TeamStatus as usage_core::WireEnum>::from_identifier)
                .unwrap_or(TeamStatus::Approved),
        ),
        disable_vendor: matches!(col(4), Some("true")).then_some(true),
        signup_time: time(col(5))?,
        active_days: col(6)
            .unwrap_or("0")
            .parse()
            .map_err(|_| DecodeError("active days".into()))?,
        last_update_time: auto.max(chat).max(command),
        last_autocomplete_usage_time: auto,
        last_chat_usage_time: chat,
        last_command_usage_time: command,
    })
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
