//! User statistics (`UserPageAnalytics`, contract section 4) and agent statistics
//! (`AgentAnalytics`, section 5): pure functions over a team's records.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};

use super::reference::latest;
use crate::ident::Ident;
use crate::load::Record;
use crate::plan::{AgentPlan, AgentSource, TimeRange};
use crate::schema::TeamStatus;
use crate::time::{Date, Timestamp};
use crate::wire::{
    AgentLines, AgentLinesEntry, AgentQueryResult, AgentRunEntry, AgentRuns, AgentToolUsage,
    AgentToolUsageEntry, UserStats,
};

/// What user statistics read for one user.
pub struct UserActivity<'a> {
    /// The user's record.
    pub user: &'a Record,
    /// Autocomplete records of the user's api_key.
    pub autocomplete: &'a [&'a Record],
    /// Chat records.
    pub chat: &'a [&'a Record],
    /// Command records.
    pub command: &'a [&'a Record],
    /// Agent lines, runs and tool usage records.
    pub agent: &'a [&'a Record],
}

fn latest_time(recs: &[&Record]) -> Option<Timestamp> {
    recs.iter().filter_map(|r| r.time()).max()
}

/// One user's statistics over `range` (`activeDays`) and all time (last usage times).
pub fn user_stats(a: &UserActivity<'_>, range: TimeRange) -> UserStats {
    let u = a.user;
    let mut days: HashSet<Date> = HashSet::new();
    for r in a
        .autocomplete
        .iter()
        .chain(a.chat)
        .chain(a.command)
        .chain(a.agent)
    {
        if let Some(t) = r.time()
            && range.contains(t)
        {
            days.insert(t.date());
        }
    }
    let auto = latest_time(a.autocomplete);
    let chat = latest(
        latest_time(a.chat),
        latest_time(
            &a.agent
                .iter()
                .copied()
                .filter(|r| r.kind().name == "agent_runs")
                .collect::<Vec<_>>(),
        ),
    );
    let command = latest_time(a.command);
    UserStats {
        name: u.text("name").to_string(),
        email: u.text("email").to_string(),
        last_update_time: latest(latest(auto, chat), command),
        api_key: u.text("api_key").to_string(),
        active_days: days.len() as i64,
        disable_vendor: (u.get("disable_vendor").as_bool() == Some(true)).then_some(true),
        last_autocomplete_usage_time: auto,
        last_chat_usage_time: chat,
        last_command_usage_time: command,
        team_status: Ident::Known(
            u.get("team_status")
                .as_text()
                .and_then(<TeamStatus as crate::ident::WireEnum>::from_identifier)
                .unwrap_or(TeamStatus::Approved),
        ),
        signup_time: u.get("signup_time").as_time(),
    }
}

/// The agent records a plan selects, by kind.
pub struct AgentInput<'a> {
    /// `agent_lines` records of the selected users, any IDE type and time.
    pub lines: Vec<&'a Record>,
    /// `agent_runs` records.
    pub runs: Vec<&'a Record>,
    /// `agent_tool_usage` records.
    pub tools: Vec<&'a Record>,
}

/// Evaluates an `AgentAnalytics` plan over records already restricted to its users.
pub fn agent(plan: &AgentPlan, input: &AgentInput<'_>) -> Vec<AgentQueryResult> {
    let keep = |r: &&&Record| {
        let ide_ok = plan
            .ide_types
            .iter()
            .any(|t| t.as_str() == r.text("ide_type"));
        ide_ok && r.time().is_some_and(|t| plan.range.contains(t))
    };
    plan.queries
        .iter()
        .map(|q| match q {
            AgentSource::Lines => {
                let mut by_day: BTreeMap<Date, (i64, i64)> = BTreeMap::new();
                for r in input.lines.iter().filter(keep) {
                    let e = by_day
                        .entry(r.time().unwrap_or_default().date())
                        .or_default();
                    e.0 = e.0.saturating_add(r.count("lines_suggested"));
                    e.1 = e.1.saturating_add(r.count("lines_accepted"));
                }
                let entries = by_day
                    .into_iter()
                    .map(|(d, (s, a))| AgentLinesEntry {
                        day: d.start(),
                        lines_suggested: s,
                        lines_accepted: a,
                    })
                    .collect();
                AgentQueryResult {
                    agent_lines: Some(AgentLines {
                        agent_lines: entries,
                    }),
                    ..Default::default()
                }
            }
            AgentSource::Runs => {
                let mut runs: Vec<&Record> = input.runs.iter().filter(keep).copied().collect();
                runs.sort_by(|a, b| {
                    a.time()
                        .cmp(&b.time())
                        .then_with(|| {
                            a.text("agent_id")
                                .as_bytes()
                                .cmp(b.text("agent_id").as_bytes())
                        })
                        .then_with(|| a.text("id").as_bytes().cmp(b.text("id").as_bytes()))
                });
                let entries = runs
                    .iter()
                    .map(|r| AgentRunEntry {
                        day: r.time().unwrap_or_default().date().start(),
                        model: r.text("model").to_string(),
                        mode: Ident::parse(r.text("mode")),
                        messages_sent: r.count("messages_sent"),
                        agent_id: r.text("agent_id").to_string(),
                        prompts_used: r.count("prompts_used"),
                    })
                    .collect();
                AgentQueryResult {
                    agent_runs: Some(AgentRuns {
                        agent_runs: entries,
                    }),
                    ..Default::default()
                }
            }
            AgentSource::ToolUsage => {
                let mut by_tool: BTreeMap<&str, i64> = BTreeMap::new();
                for r in input.tools.iter().filter(keep) {
                    let e = by_tool.entry(r.text("tool")).or_default();
                    *e = e.saturating_add(r.count("count"));
                }
                let mut entries: Vec<AgentToolUsageEntry> = by_tool
                    .into_iter()
                    .map(|(t, c)| AgentToolUsageEntry {
                        tool: t.to_string(),
                        count: c,
                    })
                    .collect();
                entries.sort_by(|a, b| match b.count.cmp(&a.count) {
                    Ordering::Equal => a.tool.as_bytes().cmp(b.tool.as_bytes()),
                    o => o,
                });
                AgentQueryResult {
                    agent_tool_usage: Some(AgentToolUsage {
                        agent_tool_usage: entries,
                    }),
                    ..Default::default()
                }
            }
        })
        .collect()
}
