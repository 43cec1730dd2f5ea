//! User statistics (`UserPageAnalytics`, contract section 4) and agent statistics
//! (`AgentAnalytics`, section 5) over the columnar store.
//!
//! User statistics read each usage table once: the rows of the users asked for are found
//! through a flag per `api_key` code, then their times give the latest time per user and
//! kind and the (user, UTC date) pairs of the range, counted in a bitmap. Agent statistics
//! select the rows of each agent table with the same compiled predicates as custom queries
//! (api_key codes, `ide_type` codes, a range of times), then sum by day or tool, or sort
//! the runs.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};

use super::TeamData;
use super::select::{Bitmap, Pred, Sel, scan, select, text_pred, time_range_pred};
use super::store::{Column, Table};
use crate::ident::{Ident, WireEnum};
use crate::load::Record;
use crate::plan::{AgentPlan, AgentSource, TimeRange};
use crate::schema::TeamStatus;
use crate::schema::records::{self, RecordKind, agent_lines, agent_runs, agent_tool_usage, users};
use crate::time::{Date, MICROS_PER_DAY, Timestamp};
use crate::wire::{
    AgentLines, AgentLinesEntry, AgentQueryResult, AgentRunEntry, AgentRuns, AgentToolUsage,
    AgentToolUsageEntry, UserStats,
};

/// The most bits the (user, day) bitmap of `activeDays` may have (tiny in tests, so that
/// the differential tests count days both ways).
const DAY_BITS_MAX: u64 = if cfg!(test) { 12 } else { 1 << 28 };

/// A user's statistics from what was found of their activity: the user record gives the
/// name, e-mail, api_key, status (default `USER_TEAM_STATUS_APPROVED`), `disableVendor`
/// (only when `true`) and `signupTime`; `lastUpdateTime` is the latest of the three times.
pub fn user_row(
    user: &Record,
    active_days: i64,
    last_autocomplete: Option<Timestamp>,
    last_chat: Option<Timestamp>,
    last_command: Option<Timestamp>,
) -> UserStats {
    UserStats {
        name: user.text(users::NAME.name()).to_string(),
        email: user.text(users::EMAIL.name()).to_string(),
        last_update_time: last_autocomplete.max(last_chat).max(last_command),
        api_key: user.text(users::API_KEY.name()).to_string(),
        active_days,
        disable_vendor: (user.get(users::DISABLE_VENDOR.name()).as_bool() == Some(true))
            .then_some(true),
        last_autocomplete_usage_time: last_autocomplete,
        last_chat_usage_time: last_chat,
        last_command_usage_time: last_command,
        team_status: Ident::Known(
            user.get(users::TEAM_STATUS.name())
                .as_text()
                .and_then(TeamStatus::from_identifier)
                .unwrap_or(TeamStatus::Approved),
        ),
        signup_time: user.get(users::SIGNUP_TIME.name()).as_time(),
    }
}

/// Distinct (user, day) pairs: a bitmap over users × days when the span allows, else a
/// sorted list.
enum DayPairs {
    Bits { set: Bitmap, first: i64, span: u64 },
    List(Vec<(u32, i64)>),
}

impl DayPairs {
    fn new(users: usize, days: Option<(i64, i64)>) -> DayPairs {
        match days {
            Some((first, last)) => {
                let span = (last - first + 1) as u64;
                match (users as u64).checked_mul(span) {
                    Some(bits) if bits <= DAY_BITS_MAX => DayPairs::Bits {
                        set: Bitmap::new(bits),
                        first,
                        span,
                    },
                    _ => DayPairs::List(Vec::new()),
                }
            }
            None => DayPairs::List(Vec::new()),
        }
    }

    #[inline]
    fn add(&mut self, user: u32, day: i64) {
        match self {
            DayPairs::Bits { set, first, span } => {
                set.insert(u64::from(user) * *span + (day - *first) as u64);
            }
            DayPairs::List(v) => v.push((user, day)),
        }
    }

    /// The number of days of each user.
    fn counts(self, users: usize) -> Vec<i64> {
        let mut out = vec![0i64; users];
        match self {
            DayPairs::Bits { set, span, .. } => {
                for (u, n) in out.iter_mut().enumerate() {
                    *n = set.count(u as u64 * span..(u as u64 + 1) * span) as i64;
                }
            }
            DayPairs::List(mut v) => {
                v.sort_unstable();
                v.dedup();
                for (u, _) in v {
                    out[u as usize] += 1;
                }
            }
        }
        out
    }
}

/// For each code of a table's `api_key` column, the index of its user in `users` (by
/// api_key), or `u32::MAX`.
fn user_of_code(table: &Table, index: &HashMap<&str, u32>) -> Vec<u32> {
    table
        .column(records::API_KEY)
        .and_then(|c| c.dict.as_ref())
        .map_or_else(Vec::new, |d| {
            d.values()
                .iter()
                .map(|k| index.get(&**k).copied().unwrap_or(u32::MAX))
                .collect()
        })
}

/// Statistics of these users (in this order), with `activeDays` counted in `range`.
pub(crate) fn user_page(team: &TeamData, users: &[&Record], range: TimeRange) -> Vec<UserStats> {
    let index: HashMap<&str, u32> = users
        .iter()
        .enumerate()
        .map(|(i, u)| (u.text(users::API_KEY.name()), i as u32))
        .collect();
    // Which latest time each kind feeds: autocomplete, chat (chat and agent runs), command.
    let tables: Vec<(&Table, Option<usize>)> = records::ACTIVITY
        .iter()
        .filter_map(|(k, last)| {
            team.table(k)
                .map(|t| (t, last.map(records::LastUse::index)))
        })
        .collect();
    let days = tables
        .iter()
        .filter_map(|(t, _)| t.time_bounds)
        .map(|(lo, hi)| (lo.div_euclid(MICROS_PER_DAY), hi.div_euclid(MICROS_PER_DAY)))
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
    let mut pairs = DayPairs::new(users.len(), days);
    let mut latest: [Vec<Option<i64>>; 3] = std::array::from_fn(|_| vec![None; users.len()]);
    for (table, slot) in tables {
        let (Some(key), Some(time)) = (table.column(records::API_KEY), table.time_column()) else {
            continue;
        };
        let owner = user_of_code(table, &index);
        if owner.iter().all(|&u| u == u32::MAX) {
            continue;
        }
        let sel = select(table.len(), vec![owner_pred(key, &owner)]);
        let mut user_at = Vec::with_capacity(sel.len());
        scan(&key.data, &sel, |_, c| user_at.push(owner[c as usize]));
        scan(&time.data, &sel, |k, v| {
            let (u, t) = (user_at[k], v * time.unit);
            if let Some(s) = slot {
                let l = &mut latest[s][u as usize];
                *l = Some(l.map_or(t, |x| x.max(t)));
            }
            if range.contains(Timestamp(t)) {
                pairs.add(u, t.div_euclid(MICROS_PER_DAY));
            }
        });
    }
    let active = pairs.counts(users.len());
    let at = |s: usize, u: usize| latest[s][u].map(Timestamp);
    users
        .iter()
        .enumerate()
        .map(|(u, rec)| user_row(rec, active[u], at(0, u), at(1, u), at(2, u)))
        .collect()
}

fn owner_pred<'a>(key: &'a Column, owner: &[u32]) -> Pred<'a> {
    Pred::Codes(&key.data, owner.iter().map(|&u| u != u32::MAX).collect())
}

/// The rows of an agent table that a plan selects.
fn agent_rows(table: &Table, plan: &AgentPlan, keys: Option<&HashSet<String>>) -> Sel {
    let mut preds = Vec::new();
    if let Some(keys) = keys
        && let Some(col) = table.column(records::API_KEY)
    {
        preds.push(text_pred(col, |k| keys.contains(k)));
    }
    // Every agent kind has an `ide_type`.
    if let Some(col) = table.column(agent_lines::IDE_TYPE.name()) {
        preds.push(text_pred(col, |t| {
            plan.ide_types.iter().any(|i| i.as_str() == t)
        }));
    }
    if let Some(col) = table.time_column() {
        preds.push(time_range_pred(col, plan.range));
    }
    select(table.len(), preds)
}

/// The text of a row in a column (`""` without the column).
fn text_at(col: &Column, row: usize) -> &str {
    col.text(row)
}

/// The count of a row in a column.
fn count_at(col: &Column, row: usize) -> i64 {
    col.data.get(row)
}

fn saturate(x: i128) -> i64 {
    x.min(i128::from(i64::MAX)) as i64
}

/// Answers the queries of an `AgentAnalytics` plan over the records of these api_keys
/// (`None`: every record).
pub(crate) fn agent(
    team: &TeamData,
    plan: &AgentPlan,
    keys: Option<&HashSet<String>>,
) -> Vec<AgentQueryResult> {
    let rows = |kind: &RecordKind| -> Option<(&Table, Sel)> {
        let t = team.table(kind)?;
        Some((t, agent_rows(t, plan, keys)))
    };
    plan.queries
        .iter()
        .map(|q| match q {
            AgentSource::Lines => {
                let mut by_day: BTreeMap<i64, (i128, i128)> = BTreeMap::new();
                if let Some((t, sel)) = rows(&records::AGENT_LINES)
                    && let Some(time) = t.time_column()
                {
                    let (suggested, accepted) = (
                        t.col(agent_lines::LINES_SUGGESTED),
                        t.col(agent_lines::LINES_ACCEPTED),
                    );
                    for k in 0..sel.len() {
                        let r = sel.row(k);
                        let e = by_day
                            .entry(time.micros(r).div_euclid(MICROS_PER_DAY))
                            .or_default();
                        e.0 += i128::from(count_at(suggested, r));
                        e.1 += i128::from(count_at(accepted, r));
                    }
                }
                let entries = by_day
                    .into_iter()
                    .map(|(d, (s, a))| AgentLinesEntry {
                        day: Date(d as i32).start(),
                        lines_suggested: saturate(s),
                        lines_accepted: saturate(a),
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
                let mut entries = Vec::new();
                if let Some((t, sel)) = rows(&records::AGENT_RUNS)
                    && let Some(time) = t.time_column()
                {
                    let col = |f| t.col(f);
                    let (agent_id, id) = (col(agent_runs::AGENT_ID), col(agent_runs::ID));
                    let mut runs: Vec<usize> = (0..sel.len()).map(|k| sel.row(k)).collect();
                    runs.sort_by(|&a, &b| {
                        let by = |c, r| text_at(c, r).as_bytes();
                        time.micros(a)
                            .cmp(&time.micros(b))
                            .then_with(|| by(agent_id, a).cmp(by(agent_id, b)))
                            .then_with(|| by(id, a).cmp(by(id, b)))
                    });
                    entries = runs
                        .into_iter()
                        .map(|r| AgentRunEntry {
                            day: Timestamp(time.micros(r)).date().start(),
                            model: text_at(col(agent_runs::MODEL), r).to_string(),
                            mode: Ident::parse(text_at(col(agent_runs::MODE), r)),
                            messages_sent: count_at(col(agent_runs::MESSAGES_SENT), r),
                            agent_id: text_at(agent_id, r).to_string(),
                            prompts_used: count_at(col(agent_runs::PROMPTS_USED), r),
                        })
                        .collect();
                }
                AgentQueryResult {
                    agent_runs: Some(AgentRuns {
                        agent_runs: entries,
                    }),
                    ..Default::default()
                }
            }
            AgentSource::ToolUsage => {
                let mut entries = Vec::new();
                if let Some((t, sel)) = rows(&records::AGENT_TOOL_USAGE) {
                    let (tool, count) = (
                        t.col(agent_tool_usage::TOOL),
                        t.col(agent_tool_usage::COUNT),
                    );
                    let dict = tool.dict.as_ref().map_or(&[][..], |d| d.values());
                    let mut sums: Vec<Option<i128>> = vec![None; dict.len()];
                    let mut tool_at = Vec::with_capacity(sel.len());
                    scan(&tool.data, &sel, |_, c| tool_at.push(c as usize));
                    scan(&count.data, &sel, |k, v| {
                        let s = &mut sums[tool_at[k]];
                        *s = Some(s.unwrap_or(0) + i128::from(v));
                    });
                    entries = sums
                        .iter()
                        .enumerate()
                        .filter_map(|(c, s)| {
                            s.map(|s| AgentToolUsageEntry {
                                tool: dict[c].to_string(),
                                count: saturate(s),
                            })
                        })
                        .collect();
                    entries.sort_by(|a, b| match b.count.cmp(&a.count) {
                        Ordering::Equal => a.tool.as_bytes().cmp(b.tool.as_bytes()),
                        o => o,
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
        .collect()
}
