//! The reference evaluator (tests and feature `testing` only): a deliberately naive,
//! row-by-row implementation of custom queries (contract section 3), user statistics
//! (section 4) and agent statistics (section 5), written straight from the contract over a
//! naive store of records ([`Model`]: a `BTreeMap` per kind). It is the oracle the columnar
//! store and evaluator ([`super::TeamData`]) and the SQL stores are tested against; it is
//! not meant to be fast.
//!
//! It shares no code with the engine but the wire types, the record model and the answer
//! helpers of [`super::answer`] (how a value prints): group membership, filters, ordering,
//! aggregates, PCW arithmetic, user rows and agent sums are all written here again, in loops
//! over records, so that a bug of the engine is not mirrored here.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::EvalError;
use super::answer::{Value, item, metadata, result_bytes};
use crate::ident::Ident;
use crate::load::{Batch, FieldValue, Record};
use crate::plan::{
    AgentPlan, AgentSource, AnalyticsPlan, FilterTest, FilterValue, Limits, QueryPlan, QueryShape,
    TimeRange, UserPagePlan,
};
use crate::schema::records::{self, RecordKind};
use crate::schema::{Agg, Expr, FieldRef, FilterOp, TeamStatus, ValueType};
use crate::time::{Date, Timestamp};
use crate::wire::{
    AgentAnalyticsResponse, AgentLines, AgentLinesEntry, AgentQueryResult, AgentRunEntry,
    AgentRuns, AgentToolUsage, AgentToolUsageEntry, AnalyticsResponse, QueryResult,
    UserPageAnalyticsResponse, UserStats,
};
use crate::zone::LocalZone;

/// A naive store: every record of every kind by identity, in a `BTreeMap` per kind. It
/// applies batches that [`super::TeamData::prepare`] prepared.
#[derive(Debug, Default, Clone)]
pub struct Model {
    kinds: HashMap<&'static str, BTreeMap<String, Record>>,
}

impl Model {
    /// An empty store.
    pub fn new() -> Model {
        Model::default()
    }

    /// Applies a prepared batch: each record replaces the stored one with its identity.
    /// `billing` records are not team data and are ignored.
    pub fn apply(&mut self, batch: &Batch) {
        if batch.kind == &records::BILLING {
            return;
        }
        let map = self.kinds.entry(batch.kind.name).or_default();
        for r in &batch.records {
            map.insert(r.identity(), r.clone());
        }
    }

    /// Every stored record of a kind, in identity order.
    pub fn records(&self, kind: &RecordKind) -> impl Iterator<Item = &Record> {
        self.kinds
            .get(kind.name)
            .into_iter()
            .flat_map(|m| m.values())
    }

    /// The e-mail of the user whose `api_key` this is, found by looking at every user.
    fn email_of(&self, api_key: &str) -> Option<&str> {
        self.records(&records::USERS)
            .find(|u| u.text("api_key") == api_key)
            .map(|u| u.text("email"))
    }

    /// The members of the group with this name, in identity order; `None` when there is no
    /// such group. A user is a member when one of the group ids it lists is the id of a
    /// group record with this name.
    pub fn members(&self, group_name: &str) -> Option<Vec<&Record>> {
        let groups: Vec<&Record> = self.records(&records::GROUPS).collect();
        if !groups.iter().any(|g| g.text("group_name") == group_name) {
            return None;
        }
        let mut out = Vec::new();
        for u in self.records(&records::USERS) {
            let FieldValue::Groups(ids) = u.get("groups") else {
                continue;
            };
            let mut member = false;
            for id in ids {
                for g in &groups {
                    if g.text("group_id") == id && g.text("group_name") == group_name {
                        member = true;
                    }
                }
            }
            if member {
                out.push(u);
            }
        }
        Some(out)
    }

    /// Which records a restriction lets through: `None` for every record, else the
    /// api_keys of the users it names (a record whose key no user has never passes).
    fn restriction(
        &self,
        group_name: Option<&str>,
        emails: Option<&[String]>,
    ) -> Result<Option<Vec<String>>, EvalError> {
        if let Some(name) = group_name {
            let members = self
                .members(name)
                .ok_or_else(|| EvalError::GroupNotFound(name.to_string()))?;
            let mut keys = Vec::new();
            for u in members {
                keys.push(u.text("api_key").to_string());
            }
            return Ok(Some(keys));
        }
        if let Some(emails) = emails {
            let mut keys = Vec::new();
            for u in self.records(&records::USERS) {
                if emails.iter().any(|e| e == u.text("email")) {
                    keys.push(u.text("api_key").to_string());
                }
            }
            return Ok(Some(keys));
        }
        Ok(None)
    }

    /// Answers an `Analytics` plan.
    ///
    /// # Errors
    /// As [`super::TeamData::analytics`].
    pub fn analytics(
        &self,
        plan: &AnalyticsPlan,
        limits: &Limits,
    ) -> Result<AnalyticsResponse, EvalError> {
        let allowed = self.restriction(plan.group_name.as_deref(), None)?;
        let mut results = Vec::new();
        let (mut items, mut bytes) = (0, 0);
        for (i, q) in plan.queries.iter().enumerate() {
            let mut recs: Vec<&Record> = Vec::new();
            for r in self.records(q.source.spec().record) {
                if let Some(keys) = &allowed
                    && !keys.iter().any(|k| k == r.text("api_key"))
                {
                    continue;
                }
                if q.shape == QueryShape::Pcw && !in_range(&plan.range, record_time(r)) {
                    continue;
                }
                if q.filters.iter().all(|f| {
                    let v = self.field_value(r, f.field);
                    passes(&v, &f.test, f.field.field().ty)
                }) {
                    recs.push(r);
                }
            }
            let r = self.evaluate(q, recs);
            items += r.response_items.len();
            bytes += result_bytes(&r);
            if items > limits.result_items {
                return Err(EvalError::TooManyItems {
                    query: i,
                    limit: limits.result_items,
                });
            }
            if bytes > limits.result_bytes {
                return Err(EvalError::TooLarge {
                    query: i,
                    limit: limits.result_bytes,
                });
            }
            results.push(r);
        }
        Ok(AnalyticsResponse {
            query_results: results,
        })
    }

    /// The value of a per-record field (not of `distinct_*` or derived PCW fields).
    fn field_value(&self, rec: &Record, f: FieldRef) -> Value {
        let time = record_time(rec);
        match f.field().expr {
            Expr::Column(c) => match rec.get(c) {
                FieldValue::Text(s) => Value::Text(s.clone()),
                FieldValue::Count(n) => Value::Int(i128::from(*n)),
                FieldValue::Bool(b) => Value::Bool(*b),
                FieldValue::Time(t) => Value::Time(*t),
                FieldValue::Day(d) => Value::Date(*d),
                // An integer that was not given is 0; other values are absent.
                FieldValue::Absent if f.field().ty == ValueType::Int => Value::Int(0),
                FieldValue::Absent | FieldValue::Groups(_) => Value::Null,
            },
            Expr::Time => Value::Time(time),
            Expr::UtcDate => Value::Date(time.date()),
            // An IANA zone's offset straight from jiff, not the engine's table of spans.
            Expr::LocalDate => Value::Date(match f.zone() {
                LocalZone::Fixed(m) => time.plus_minutes(i32::from(m)).date(),
                LocalZone::Iana(z) => Timestamp(time.0 + z.offset_by_jiff(time.0)).date(),
            }),
            Expr::UserMetadata => Value::Text(metadata(self.email_of(rec.text("api_key")))),
            _ => Value::Null,
        }
    }

    /// Evaluates one query over its matching records. The caller applies the result-size
    /// limit.
    fn evaluate(&self, plan: &QueryPlan, mut recs: Vec<&Record>) -> QueryResult {
        let items = match plan.shape {
            QueryShape::Pcw => {
                // The contract's definitions: three sums, vendor bytes the first two, total
                // bytes all three, percent the one over the other ("0" for no bytes).
                let (mut by_autocomplete, mut by_command, mut user) = (0i128, 0i128, 0i128);
                for r in &recs {
                    by_autocomplete += i128::from(r.count(records::VENDOR_BYTES_BY_AUTOCOMPLETE));
                    by_command += i128::from(r.count(records::VENDOR_BYTES_BY_COMMAND));
                    user += i128::from(r.count(records::USER_BYTES));
                }
                let vendor = by_autocomplete + by_command;
                let total = vendor + user;
                let mut pairs = Vec::new();
                for s in &plan.selections {
                    let v = match s.field.field().expr {
                        Expr::PcwPercent if total == 0 => Value::Float(0.0),
                        Expr::PcwPercent => Value::Float(vendor as f64 / total as f64),
                        Expr::PcwVendorBytes => Value::Int(vendor),
                        Expr::PcwTotalBytes => Value::Int(total),
                        // `user_bytes` and the two vendor columns: the sum of the column.
                        Expr::Column(c) => {
                            let mut sum = 0i128;
                            for r in &recs {
                                sum += i128::from(r.count(c));
                            }
                            Value::Int(sum)
                        }
                        _ => Value::Null,
                    };
                    pairs.push((s.alias.clone(), v));
                }
                vec![item(pairs)]
            }
            QueryShape::Total => {
                let pairs = plan
                    .selections
                    .iter()
                    .map(|s| (s.alias.clone(), self.aggregate(&recs, s.field, s.agg)));
                vec![item(pairs)]
            }
            QueryShape::Raw => {
                recs.sort_by(|a, b| raw_order(a, b));
                let mut items = Vec::new();
                for r in recs {
                    let pairs = plan
                        .selections
                        .iter()
                        .map(|s| (s.alias.clone(), self.field_value(r, s.field)));
                    items.push(item(pairs));
                }
                items
            }
            QueryShape::Grouped | QueryShape::GroupValues => {
                let mut groups: Vec<(Vec<Value>, Vec<&Record>)> = Vec::new();
                for r in recs {
                    let key: Vec<Value> = plan
                        .group_by
                        .iter()
                        .map(|g| self.field_value(r, g.field))
                        .collect();
                    match groups.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, members)) => members.push(r),
                        None => groups.push((key, vec![r])),
                    }
                }
                groups.sort_by(|(a, _), (b, _)| {
                    for (g, (x, y)) in plan.group_by.iter().zip(a.iter().zip(b)) {
                        let o = order(x, y, g.field.field().ty);
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                    Ordering::Equal
                });
                let mut items = Vec::new();
                for (key, members) in &groups {
                    let mut pairs = Vec::new();
                    for s in &plan.selections {
                        let v = if plan.shape == QueryShape::GroupValues {
                            let g = plan
                                .group_by
                                .iter()
                                .position(|g| g.field == s.field)
                                .unwrap_or(0);
                            key[g].clone()
                        } else {
                            self.aggregate(members, s.field, s.agg)
                        };
                        pairs.push((s.alias.clone(), v));
                    }
                    for (g, v) in plan.group_by.iter().zip(key) {
                        pairs.push((g.alias.clone(), v.clone()));
                    }
                    items.push(item(pairs));
                }
                items
            }
        };
        QueryResult {
            response_items: items,
        }
    }

    /// The aggregate of a selection over a set of records.
    fn aggregate(&self, recs: &[&Record], f: FieldRef, agg: Agg) -> Value {
        let field = f.field();
        match field.expr {
            Expr::DistinctUsers => {
                let set: BTreeSet<&str> = recs.iter().map(|r| r.text("api_key")).collect();
                return Value::Int(set.len() as i128);
            }
            Expr::DistinctDeveloperDays => {
                let set: BTreeSet<(&str, Date)> = recs
                    .iter()
                    .map(|r| (r.text("api_key"), record_time(r).date()))
                    .collect();
                return Value::Int(set.len() as i128);
            }
            Expr::DistinctDeveloperHours => {
                let set: BTreeSet<(&str, Timestamp)> = recs
                    .iter()
                    .map(|r| (r.text("api_key"), record_time(r).hour_start()))
                    .collect();
                return Value::Int(set.len() as i128);
            }
            _ => {}
        }
        let values: Vec<Value> = recs.iter().map(|r| self.field_value(r, f)).collect();
        match agg {
            Agg::Count => Value::Int(recs.len() as i128),
            Agg::Sum => {
                // Integers add up; a boolean counts its `true`s.
                let mut sum = 0i128;
                for v in &values {
                    match v {
                        Value::Int(n) => sum += n,
                        Value::Bool(true) => sum += 1,
                        _ => {}
                    }
                }
                Value::Int(sum)
            }
            Agg::Avg => {
                if values.is_empty() {
                    return Value::Null;
                }
                let mut sum = 0i128;
                for v in &values {
                    if let Value::Int(n) = v {
                        sum += n;
                    }
                }
                Value::Float(sum as f64 / values.len() as f64)
            }
            Agg::Max | Agg::Min => {
                let mut best: Option<Value> = None;
                for v in values {
                    let better = match &best {
                        None => true,
                        Some(b) if agg == Agg::Max => order(&v, b, field.ty) == Ordering::Greater,
                        Some(b) => order(&v, b, field.ty) == Ordering::Less,
                    };
                    if better {
                        best = Some(v);
                    }
                }
                best.unwrap_or(Value::Null)
            }
            Agg::Unspecified => Value::Null,
        }
    }

    /// Answers a `UserPageAnalytics` plan.
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
        let mut stats: Vec<UserStats> = users.iter().map(|u| self.user_stats(u, plan)).collect();
        stats.sort_by(|a, b| a.email.as_bytes().cmp(b.email.as_bytes()));
        Ok(UserPageAnalyticsResponse {
            user_table_stats: stats,
            error: None,
        })
    }

    /// One user's row (contract section 4), from every record of the user's api_key.
    fn user_stats(&self, user: &Record, plan: &UserPagePlan) -> UserStats {
        let key = user.text("api_key");
        let mut days: BTreeSet<Date> = BTreeSet::new();
        let (mut autocomplete, mut chat, mut command) = (None, None, None);
        // Kinds that make a day active; PCW does not.
        let kinds = [
            &records::AUTOCOMPLETE,
            &records::CHAT,
            &records::COMMAND,
            &records::AGENT_LINES,
            &records::AGENT_RUNS,
            &records::AGENT_TOOL_USAGE,
        ];
        for kind in kinds {
            for r in self.records(kind).filter(|r| r.text("api_key") == key) {
                let t = record_time(r);
                if in_range(&plan.range, t) {
                    days.insert(t.date());
                }
                let latest = match kind.name {
                    "autocomplete" => &mut autocomplete,
                    // The latest chat response or agent run.
                    "chat" | "agent_runs" => &mut chat,
                    "command" => &mut command,
                    _ => continue,
                };
                if latest.is_none_or(|l| t > l) {
                    *latest = Some(t);
                }
            }
        }
        let last_update = [autocomplete, chat, command].into_iter().flatten().max();
        let team_status = match user.get("team_status") {
            FieldValue::Text(s) => Ident::parse(s),
            _ => Ident::Known(TeamStatus::Approved),
        };
        UserStats {
            name: user.text("name").to_string(),
            email: user.text("email").to_string(),
            last_update_time: last_update,
            api_key: key.to_string(),
            active_days: days.len() as i64,
            disable_vendor: match user.get("disable_vendor") {
                FieldValue::Bool(true) => Some(true),
                _ => None,
            },
            last_autocomplete_usage_time: autocomplete,
            last_chat_usage_time: chat,
            last_command_usage_time: command,
            team_status,
            signup_time: match user.get(records::SIGNUP_TIME) {
                FieldValue::Time(t) => Some(*t),
                _ => None,
            },
        }
    }

    /// Answers an `AgentAnalytics` plan.
    ///
    /// # Errors
    /// As [`super::TeamData::agent`].
    pub fn agent(&self, plan: &AgentPlan) -> Result<AgentAnalyticsResponse, EvalError> {
        let keys = self.restriction(plan.group_name.as_deref(), plan.emails.as_deref())?;
        let pick = |kind: &RecordKind| -> Vec<&Record> {
            let mut out = Vec::new();
            for r in self.records(kind) {
                let key_ok = match &keys {
                    Some(keys) => keys.iter().any(|k| k == r.text("api_key")),
                    None => true,
                };
                let ide_ok = plan
                    .ide_types
                    .iter()
                    .any(|t| t.as_str() == r.text("ide_type"));
                if key_ok && ide_ok && in_range(&plan.range, record_time(r)) {
                    out.push(r);
                }
            }
            out
        };
        let mut results = Vec::new();
        for q in &plan.queries {
            results.push(match q {
                AgentSource::Lines => AgentQueryResult {
                    agent_lines: Some(AgentLines {
                        agent_lines: agent_lines(&pick(&records::AGENT_LINES)),
                    }),
                    ..Default::default()
                },
                AgentSource::Runs => AgentQueryResult {
                    agent_runs: Some(AgentRuns {
                        agent_runs: agent_runs(pick(&records::AGENT_RUNS)),
                    }),
                    ..Default::default()
                },
                AgentSource::ToolUsage => AgentQueryResult {
                    agent_tool_usage: Some(AgentToolUsage {
                        agent_tool_usage: agent_tool_usage(&pick(&records::AGENT_TOOL_USAGE)),
                    }),
                    ..Default::default()
                },
            });
        }
        Ok(AgentAnalyticsResponse {
            query_results: results,
        })
    }
}

/// A record's time (its `hour`, `timestamp` or the start of its `day`).
fn record_time(r: &Record) -> Timestamp {
    r.time().unwrap_or_default()
}

/// `start <= t < end`, either end open.
fn in_range(range: &TimeRange, t: Timestamp) -> bool {
    let after_start = match range.start {
        Some(s) => s <= t,
        None => true,
    };
    let before_end = match range.end {
        Some(e) => t < e,
        None => true,
    };
    after_start && before_end
}

/// How two values of a field of type `ty` order (contract section 3, Ordering): dates and
/// times chronologically, integers numerically, versions part by part, other text bytewise,
/// `false` before `true`; an absent value before any other.
fn order(a: &Value, b: &Value, ty: ValueType) -> Ordering {
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => x.total_cmp(y),
        (Value::Date(x), Value::Date(y)) => x.0.cmp(&y.0),
        (Value::Time(x), Value::Time(y)) => x.0.cmp(&y.0),
        (Value::Bool(x), Value::Bool(y)) => u8::from(*x).cmp(&u8::from(*y)),
        (Value::Text(x), Value::Text(y)) if ty == ValueType::Version => {
            crate::version::compare(x, y)
        }
        (Value::Text(x), Value::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
        // One field's values are of one type.
        _ => Ordering::Equal,
    }
}

/// How a record's value compares with a filter value (contract section 3, Filters); a
/// `YYYY-MM-DD` given for a time compares the time's UTC date. The validator never pairs a
/// field with a value of another type; such a pair compares as less.
fn against(v: &Value, fv: &FilterValue, ty: ValueType) -> Ordering {
    match (v, fv) {
        (Value::Time(t), FilterValue::TimeDate(d)) => t.date().0.cmp(&d.0),
        (Value::Time(t), FilterValue::Time(f)) => t.0.cmp(&f.0),
        (Value::Date(d), FilterValue::Date(f)) => d.0.cmp(&f.0),
        (Value::Int(n), FilterValue::Int(f)) => n.cmp(&i128::from(*f)),
        (Value::Bool(b), FilterValue::Bool(f)) => u8::from(*b).cmp(&u8::from(*f)),
        (Value::Text(s), FilterValue::Text(f)) if ty == ValueType::Version => {
            crate::version::compare(s, f)
        }
        (Value::Text(s), FilterValue::Text(f)) => s.as_bytes().cmp(f.as_bytes()),
        _ => Ordering::Less,
    }
}

/// Whether a record's value passes a filter: an operator and a value, or any of several
/// `EQUAL` values.
fn passes(v: &Value, test: &FilterTest, ty: ValueType) -> bool {
    match test {
        FilterTest::AnyOf(values) => values
            .iter()
            .any(|fv| against(v, fv, ty) == Ordering::Equal),
        FilterTest::Compare(op, fv) => {
            let o = against(v, fv, ty);
            match op {
                FilterOp::Equal => o == Ordering::Equal,
                FilterOp::NotEqual => o != Ordering::Equal,
                FilterOp::LessThan => o == Ordering::Less,
                FilterOp::Le => o == Ordering::Less || o == Ordering::Equal,
                FilterOp::GreaterThan => o == Ordering::Greater,
                FilterOp::Ge => o == Ordering::Greater || o == Ordering::Equal,
            }
        }
    }
}

/// The order of raw rows: time, `api_key`, the other identity fields in their order
/// (versions part by part), which ends with `id` for events.
fn raw_order(a: &Record, b: &Record) -> Ordering {
    let kind = a.kind();
    let by_time = record_time(a).0.cmp(&record_time(b).0);
    if by_time != Ordering::Equal {
        return by_time;
    }
    let by_key = a
        .text("api_key")
        .as_bytes()
        .cmp(b.text("api_key").as_bytes());
    if by_key != Ordering::Equal {
        return by_key;
    }
    for name in kind.identity {
        if *name == "api_key" || Some(*name) == kind.time {
            continue;
        }
        let (x, y) = (a.text(name), b.text(name));
        let o = if *name == "version" {
            crate::version::compare(x, y)
        } else {
            x.as_bytes().cmp(y.as_bytes())
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// A sum of counts as the answer shows it: at most `i64::MAX`.
fn add(sum: i64, n: i64) -> i64 {
    sum.checked_add(n).unwrap_or(i64::MAX)
}

/// Agent lines: one entry per UTC day, summed, by day.
fn agent_lines(recs: &[&Record]) -> Vec<AgentLinesEntry> {
    let mut by_day: BTreeMap<Date, (i64, i64)> = BTreeMap::new();
    for r in recs {
        let e = by_day.entry(record_time(r).date()).or_default();
        e.0 = add(e.0, r.count("lines_suggested"));
        e.1 = add(e.1, r.count("lines_accepted"));
    }
    by_day
        .into_iter()
        .map(|(d, (s, a))| AgentLinesEntry {
            day: d.start(),
            lines_suggested: s,
            lines_accepted: a,
        })
        .collect()
}

/// Agent runs: one entry per run, by time, then `agent_id`, then `id`.
fn agent_runs(mut recs: Vec<&Record>) -> Vec<AgentRunEntry> {
    recs.sort_by(|a, b| {
        record_time(a)
            .0
            .cmp(&record_time(b).0)
            .then_with(|| {
                a.text("agent_id")
                    .as_bytes()
                    .cmp(b.text("agent_id").as_bytes())
            })
            .then_with(|| a.text("id").as_bytes().cmp(b.text("id").as_bytes()))
    });
    recs.iter()
        .map(|r| AgentRunEntry {
            day: record_time(r).date().start(),
            model: r.text("model").to_string(),
            mode: Ident::parse(r.text("mode")),
            messages_sent: r.count("messages_sent"),
            agent_id: r.text("agent_id").to_string(),
            prompts_used: r.count("prompts_used"),
        })
        .collect()
}

/// Agent tool usage: one entry per tool with its summed count (as shown, at most
/// `i64::MAX`), the largest count first, ties by tool bytewise. Ordered by picking the
/// first remaining entry again and again.
fn agent_tool_usage(recs: &[&Record]) -> Vec<AgentToolUsageEntry> {
    let mut sums: Vec<(String, i64)> = Vec::new();
    for r in recs {
        let tool = r.text("tool");
        match sums.iter_mut().find(|(t, _)| t == tool) {
            Some((_, c)) => *c = add(*c, r.count("count")),
            None => sums.push((tool.to_string(), r.count("count"))),
        }
    }
    let comes_first = |a: &(String, i64), b: &(String, i64)| {
        a.1 > b.1 || (a.1 == b.1 && a.0.as_bytes() < b.0.as_bytes())
    };
    let mut out = Vec::new();
    while !sums.is_empty() {
        let mut first = 0;
        for i in 1..sums.len() {
            if comes_first(&sums[i], &sums[first]) {
                first = i;
            }
        }
        let (tool, count) = sums.remove(first);
        out.push(AgentToolUsageEntry { tool, count });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::MICROS_PER_DAY;

    fn tool_record(tool: &str, count: i64) -> Record {
        let v = serde_json::json!({"api_key": "k", "day": "2025-05-01", "ide_type": "editor",
                                   "tool": tool, "count": count});
        crate::load::parse_record(
            &records::AGENT_TOOL_USAGE,
            &v,
            &crate::error::JsonPath::root(),
        )
        .unwrap()
    }

    #[test]
    fn tool_usage_by_count_then_tool_with_sums_shown_clamped() {
        let recs = [
            tool_record("b", 2),
            tool_record("a", 2),
            tool_record("c", 5),
            tool_record("y", i64::MAX),
            tool_record("y", 1),
            tool_record("x", i64::MAX),
            tool_record("b", 1),
        ];
        let refs: Vec<&Record> = recs.iter().collect();
        let got: Vec<(String, i64)> = agent_tool_usage(&refs)
            .into_iter()
            .map(|e| (e.tool, e.count))
            .collect();
        let want = [
            ("x", i64::MAX),
            ("y", i64::MAX),
            ("c", 5),
            ("b", 3),
            ("a", 2),
        ];
        assert_eq!(got, want.map(|(t, c)| (t.to_string(), c)));
    }

    #[test]
    fn filters_and_order() {
        let d = |n| Value::Date(Date(n));
        assert_eq!(order(&d(1), &d(2), ValueType::Date), Ordering::Less);
        assert_eq!(
            order(
                &Value::Text("1.10".into()),
                &Value::Text("1.9".into()),
                ValueType::Version
            ),
            Ordering::Greater
        );
        assert_eq!(
            order(
                &Value::Text("1.10".into()),
                &Value::Text("1.9".into()),
                ValueType::Text
            ),
            Ordering::Less
        );
        let day2 = Timestamp(2 * MICROS_PER_DAY + 5);
        let le_day2 = FilterTest::Compare(FilterOp::Le, FilterValue::TimeDate(Date(2)));
        assert!(passes(&Value::Time(day2), &le_day2, ValueType::Hour));
        let gt_day2 = FilterTest::Compare(FilterOp::GreaterThan, FilterValue::TimeDate(Date(2)));
        assert!(!passes(&Value::Time(day2), &gt_day2, ValueType::Hour));
        let any = FilterTest::AnyOf(vec![FilterValue::Int(3), FilterValue::Int(7)]);
        assert!(passes(&Value::Int(7), &any, ValueType::Int));
        assert!(!passes(&Value::Int(5), &any, ValueType::Int));
    }

    #[test]
    fn ranges_are_half_open() {
        let r = TimeRange {
            start: Some(Timestamp(10)),
            end: Some(Timestamp(20)),
        };
        assert!(in_range(&r, Timestamp(10)) && in_range(&r, Timestamp(19)));
        assert!(!in_range(&r, Timestamp(20)) && !in_range(&r, Timestamp(9)));
        assert!(in_range(&TimeRange::default(), Timestamp(i64::MIN)));
    }
}
