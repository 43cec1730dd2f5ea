//! The reference evaluator: a deliberately naive, row-by-row implementation of custom
//! queries (contract section 3), user statistics (section 4) and agent statistics
//! (section 5), written straight from the contract over a naive store of records
//! ([`Model`]: a `BTreeMap` per kind). It is the oracle the columnar store and evaluator
//! ([`super::TeamData`]) and the SQL stores are tested against; it is not meant to be fast.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::EvalError;
use super::answer::{Value, item, metadata};
use super::value::{average, passes as filter_passes, percent};
use crate::ident::Ident;
use crate::load::{Batch, FieldValue, Record};
use crate::plan::{
    AgentPlan, AgentSource, AnalyticsPlan, Limits, QueryPlan, QueryShape, TimeRange, UserPagePlan,
};
use crate::schema::records::{self, RecordKind};
use crate::schema::{Agg, Expr, FieldRef, ValueType};
use crate::time::{Date, Timestamp};
use crate::wire::{
    AgentAnalyticsResponse, AgentLines, AgentLinesEntry, AgentQueryResult, AgentRunEntry,
    AgentRuns, AgentToolUsage, AgentToolUsageEntry, AnalyticsResponse, QueryResult,
    UserPageAnalyticsResponse, UserStats,
};

/// What a query runs over: the records of its source and who they belong to.
pub struct Input<'a> {
    /// Every record of the query's source kind (one per identity).
    pub records: &'a [&'a Record],
    /// The e-mail of the user owning each api_key.
    pub email_of_key: &'a HashMap<String, String>,
    /// The api_keys a group restriction allows (`None`: every record counts).
    pub allowed_keys: Option<&'a HashSet<String>>,
    /// The request's range (PCW only).
    pub range: TimeRange,
}

/// The value of a per-record field (not of `distinct_*` or derived PCW fields).
pub fn field_value(rec: &Record, f: FieldRef, email_of_key: &HashMap<String, String>) -> Value {
    let time = || rec.time().unwrap_or_default();
    match f.field().expr {
        Expr::Column(c) => match rec.get(c) {
            FieldValue::Text(s) => Value::Text(s.clone()),
            FieldValue::Count(n) => Value::Int(i128::from(*n)),
            FieldValue::Bool(b) => Value::Bool(*b),
            FieldValue::Time(t) => Value::Time(*t),
            FieldValue::Day(d) => Value::Date(*d),
            FieldValue::Absent => match f.field().ty {
                ValueType::Int => Value::Int(0),
                _ => Value::Null,
            },
            FieldValue::Groups(_) => Value::Null,
        },
        Expr::Time => Value::Time(time()),
        Expr::UtcDate => Value::Date(time().date()),
        Expr::LocalDate => Value::Date(time().plus_minutes(f.offset_minutes()).date()),
        Expr::UserMetadata => Value::Text(metadata(
            email_of_key.get(rec.text("api_key")).map(String::as_str),
        )),
        _ => Value::Null,
    }
}

fn passes(rec: &Record, plan: &QueryPlan, input: &Input<'_>) -> bool {
    if let Some(allowed) = input.allowed_keys
        && !allowed.contains(rec.text("api_key"))
    {
        return false;
    }
    if plan.shape == QueryShape::Pcw && !input.range.contains(rec.time().unwrap_or_default()) {
        return false;
    }
    plan.filters.iter().all(|f| {
        let v = field_value(rec, f.field, input.email_of_key);
        filter_passes(&v, &f.test, f.field.field().ty)
    })
}

/// The aggregate of a selection over a set of records.
fn aggregate(recs: &[&Record], f: FieldRef, agg: Agg, input: &Input<'_>) -> Value {
    let field = f.field();
    let distinct = |key: &dyn Fn(&Record) -> String| -> Value {
        let set: BTreeSet<String> = recs.iter().map(|r| key(r)).collect();
        Value::Int(set.len() as i128)
    };
    match field.expr {
        Expr::DistinctUsers => return distinct(&|r| r.text("api_key").to_string()),
        Expr::DistinctDeveloperDays => {
            return distinct(&|r| {
                format!(
                    "{}\u{0}{}",
                    r.text("api_key"),
                    r.time().unwrap_or_default().date().0
                )
            });
        }
        Expr::DistinctDeveloperHours => {
            return distinct(&|r| {
                format!(
                    "{}\u{0}{}",
                    r.text("api_key"),
                    r.time().unwrap_or_default().hour_start().0
                )
            });
        }
        _ => {}
    }
    let values: Vec<Value> = recs
        .iter()
        .map(|r| field_value(r, f, input.email_of_key))
        .collect();
    match agg {
        Agg::Count => Value::Int(recs.len() as i128),
        Agg::Sum => Value::Int(
            values
                .iter()
                .map(|v| match v {
                    Value::Int(n) => *n,
                    Value::Bool(b) => i128::from(*b),
                    _ => 0,
                })
                .sum(),
        ),
        Agg::Avg => {
            let sum: i128 = values
                .iter()
                .map(|v| if let Value::Int(n) = v { *n } else { 0 })
                .sum();
            average(sum, values.len() as u64).map_or(Value::Null, Value::Float)
        }
        Agg::Max => values
            .into_iter()
            .max_by(|a, b| a.cmp_as(b, field.ty))
            .unwrap_or(Value::Null),
        Agg::Min => values
            .into_iter()
            .min_by(|a, b| a.cmp_as(b, field.ty))
            .unwrap_or(Value::Null),
        Agg::Unspecified => Value::Null,
    }
}

/// The order of raw rows: time, `api_key`, the other identity fields in their order, `id`.
fn raw_order(a: &Record, b: &Record) -> Ordering {
    let kind = a.kind();
    let mut o = a.time().cmp(&b.time()).then_with(|| {
        a.text("api_key")
            .as_bytes()
            .cmp(b.text("api_key").as_bytes())
    });
    for name in kind
        .identity
        .iter()
        .filter(|n| **n != "api_key" && Some(**n) != kind.time)
    {
        if o != Ordering::Equal {
            return o;
        }
        let (x, y) = (a.text(name), b.text(name));
        o = if *name == "version" {
            crate::version::compare(x, y)
        } else {
            x.as_bytes().cmp(y.as_bytes())
        };
    }
    o
}

/// Evaluates one validated query. The caller applies the result-size limit.
pub fn evaluate(plan: &QueryPlan, input: &Input<'_>) -> QueryResult {
    let mut recs: Vec<&Record> = input
        .records
        .iter()
        .copied()
        .filter(|r| passes(r, plan, input))
        .collect();
    let items =
        match plan.shape {
            QueryShape::Pcw => {
                let sum = |c: &str| -> i128 { recs.iter().map(|r| i128::from(r.count(c))).sum() };
                let (auto, cmd, user) = (
                    sum("vendor_bytes_by_autocomplete"),
                    sum("vendor_bytes_by_command"),
                    sum("user_bytes"),
                );
                let vendor = auto + cmd;
                let total = vendor + user;
                vec![item(plan.selections.iter().map(|s| {
                    let v = match s.field.field().expr {
                        Expr::PcwPercent => Value::Float(percent(vendor, total)),
                        Expr::PcwVendorBytes => Value::Int(vendor),
                        Expr::PcwTotalBytes => Value::Int(total),
                        Expr::Column("user_bytes") => Value::Int(user),
                        Expr::Column("vendor_bytes_by_autocomplete") => Value::Int(auto),
                        Expr::Column("vendor_bytes_by_command") => Value::Int(cmd),
                        _ => Value::Null,
                    };
                    (s.alias.clone(), v)
                }))]
            }
            QueryShape::Total => {
                vec![item(plan.selections.iter().map(|s| {
                    (s.alias.clone(), aggregate(&recs, s.field, s.agg, input))
                }))]
            }
            QueryShape::Raw => {
                recs.sort_by(|a, b| raw_order(a, b));
                recs.iter()
                    .map(|r| {
                        item(plan.selections.iter().map(|s| {
                            (s.alias.clone(), field_value(r, s.field, input.email_of_key))
                        }))
                    })
                    .collect()
            }
            QueryShape::Grouped | QueryShape::GroupValues => {
                let mut groups: Vec<(Vec<Value>, Vec<&Record>)> = Vec::new();
                for r in recs {
                    let key: Vec<Value> = plan
                        .group_by
                        .iter()
                        .map(|g| field_value(r, g.field, input.email_of_key))
                        .collect();
                    match groups.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, members)) => members.push(r),
                        None => groups.push((key, vec![r])),
                    }
                }
                groups.sort_by(|(a, _), (b, _)| {
                    plan.group_by
                        .iter()
                        .zip(a.iter().zip(b))
                        .map(|(g, (x, y))| x.cmp_as(y, g.field.field().ty))
                        .find(|o| *o != Ordering::Equal)
                        .unwrap_or(Ordering::Equal)
                });
                groups
                    .iter()
                    .map(|(key, members)| {
                        let sels = plan.selections.iter().map(|s| {
                            let v = if plan.shape == QueryShape::GroupValues {
                                let g = plan
                                    .group_by
                                    .iter()
                                    .position(|g| g.field == s.field)
                                    .unwrap_or(0);
                                key[g].clone()
                            } else {
                                aggregate(members, s.field, s.agg, input)
                            };
                            (s.alias.clone(), v)
                        });
                        let grp = plan
                            .group_by
                            .iter()
                            .zip(key)
                            .map(|(g, v)| (g.alias.clone(), v.clone()));
                        item(sels.chain(grp).collect::<Vec<_>>())
                    })
                    .collect()
            }
        };
    QueryResult {
        response_items: items,
    }
}

/// A naive store: every record of every kind by identity, in a `BTreeMap` per kind, and the
/// owner of each api_key. It applies batches that [`super::TeamData::prepare`] prepared.
#[derive(Debug, Default, Clone)]
pub struct Model {
    kinds: HashMap<&'static str, BTreeMap<String, Record>>,
    email_of_key: HashMap<String, String>,
}

impl Model {
    /// An empty store.
    pub fn new() -> Model {
        Model::default()
    }

    /// Applies a prepared batch: each record replaces the stored one with its identity.
    pub fn apply(&mut self, batch: &Batch) {
        if batch.kind == &records::BILLING {
            return;
        }
        let map = self.kinds.entry(batch.kind.name).or_default();
        for r in &batch.records {
            map.insert(r.identity(), r.clone());
        }
        if batch.kind == &records::USERS {
            self.email_of_key = self
                .records(&records::USERS)
                .map(|u| (u.text("api_key").to_string(), u.text("email").to_string()))
                .collect();
        }
    }

    /// Every stored record of a kind, in identity order.
    pub fn records(&self, kind: &RecordKind) -> impl Iterator<Item = &Record> {
        self.kinds
            .get(kind.name)
            .into_iter()
            .flat_map(|m| m.values())
    }

    /// The user with this e-mail.
    pub fn user(&self, email: &str) -> Option<&Record> {
        self.records(&records::USERS)
            .find(|u| u.text("email") == email)
    }

    /// The members of the group with this name; `None` when there is no such group.
    pub fn members(&self, group_name: &str) -> Option<Vec<&Record>> {
        let id = self
            .records(&records::GROUPS)
            .find(|g| g.text("group_name") == group_name)?
            .text("group_id")
            .to_string();
        Some(
            self.records(&records::USERS)
                .filter(|u| matches!(u.get("groups"), FieldValue::Groups(g) if g.contains(&id)))
                .collect(),
        )
    }

    fn allowed_keys(&self, group_name: Option<&str>) -> Result<Option<HashSet<String>>, EvalError> {
        let Some(name) = group_name else {
            return Ok(None);
        };
        let members = self
            .members(name)
            .ok_or_else(|| EvalError::GroupNotFound(name.to_string()))?;
        Ok(Some(
            members
                .iter()
                .map(|u| u.text("api_key").to_string())
                .collect(),
        ))
    }

    /// Answers an `Analytics` plan with [`evaluate`].
    ///
    /// # Errors
    /// As [`super::TeamData::analytics`].
    pub fn analytics(
        &self,
        plan: &AnalyticsPlan,
        limits: &Limits,
    ) -> Result<AnalyticsResponse, EvalError> {
        let allowed = self.allowed_keys(plan.group_name.as_deref())?;
        let mut results = Vec::with_capacity(plan.queries.len());
        for (i, q) in plan.queries.iter().enumerate() {
            let recs: Vec<&Record> = self.records(q.source.spec().record).collect();
            let input = Input {
                records: &recs,
                email_of_key: &self.email_of_key,
                allowed_keys: allowed.as_ref(),
                range: plan.range,
            };
            let r = evaluate(q, &input);
            if r.response_items.len() > limits.result_items {
                return Err(EvalError::TooManyItems {
                    query: i,
                    limit: limits.result_items,
                });
            }
            results.push(r);
        }
        Ok(AnalyticsResponse {
            query_results: results,
        })
    }

    /// Answers a `UserPageAnalytics` plan with [`user_stats`].
    ///
    /// # Errors
    /// As [`super::TeamData::user_page`].
    pub fn user_page(&self, plan: &UserPagePlan) -> Result<UserPageAnalyticsResponse, EvalError> {
        let users: Vec<&Record> = match &plan.group_name {
            Some(g) => self
                .members(g)
                .ok_or_else(|| EvalError::GroupNotFound(g.clone()))?,
            None => self.records(&records::USERS).collect(),
        };
        let of_key = |kinds: &[&RecordKind], key: &str| -> Vec<&Record> {
            kinds
                .iter()
                .flat_map(|k| self.records(k))
                .filter(|r| r.text("api_key") == key)
                .collect()
        };
        let mut stats: Vec<UserStats> = users
            .iter()
            .map(|u| {
                let k = u.text("api_key");
                let activity = UserActivity {
                    user: u,
                    autocomplete: &of_key(&[&records::AUTOCOMPLETE], k),
                    chat: &of_key(&[&records::CHAT], k),
                    command: &of_key(&[&records::COMMAND], k),
                    agent: &of_key(
                        &[
                            &records::AGENT_LINES,
                            &records::AGENT_RUNS,
                            &records::AGENT_TOOL_USAGE,
                        ],
                        k,
                    ),
                };
                user_stats(&activity, plan.range)
            })
            .collect();
        stats.sort_by(|a, b| a.email.as_bytes().cmp(b.email.as_bytes()));
        Ok(UserPageAnalyticsResponse {
            user_table_stats: stats,
            error: None,
        })
    }

    /// Answers an `AgentAnalytics` plan with [`agent`].
    ///
    /// # Errors
    /// As [`super::TeamData::agent`].
    pub fn agent(&self, plan: &AgentPlan) -> Result<AgentAnalyticsResponse, EvalError> {
        let keys: Option<HashSet<String>> = match (&plan.group_name, &plan.emails) {
            (Some(g), _) => self.allowed_keys(Some(g))?,
            (None, Some(emails)) => Some(
                emails
                    .iter()
                    .filter_map(|e| self.user(e))
                    .map(|u| u.text("api_key").to_string())
                    .collect(),
            ),
            (None, None) => None,
        };
        let pick = |kind: &RecordKind| -> Vec<&Record> {
            self.records(kind)
                .filter(|r| keys.as_ref().is_none_or(|k| k.contains(r.text("api_key"))))
                .collect()
        };
        let input = AgentInput {
            lines: pick(&records::AGENT_LINES),
            runs: pick(&records::AGENT_RUNS),
            tools: pick(&records::AGENT_TOOL_USAGE),
        };
        Ok(AgentAnalyticsResponse {
            query_results: agent(plan, &input),
        })
    }
}

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
    let runs: Vec<&Record> = a
        .agent
        .iter()
        .copied()
        .filter(|r| r.kind().name == "agent_runs")
        .collect();
    super::stats::user_row(
        a.user,
        days.len() as i64,
        latest_time(a.autocomplete),
        latest_time(a.chat).max(latest_time(&runs)),
        latest_time(a.command),
    )
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
