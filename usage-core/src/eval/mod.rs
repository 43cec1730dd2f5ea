//! Evaluation: a team's records in memory, and the answers of `Analytics`,
//! `UserPageAnalytics` and `AgentAnalytics` computed from them.
//!
//! [`TeamData`] holds one team's users, groups and usage records, accepts batches of
//! records (upserting by identity, contract section 8) and answers validated plans. Usage
//! records are stored column by column, one table per record kind (`store`): text
//! dictionary-coded per column, times and counts as packed integers, an identity index to
//! replace records in place. Custom queries run on those columns (`columnar`), as do user
//! and agent statistics ([`stats`]); both pick rows with the same selection primitives
//! (`select`). [`value`] holds the engine's semantics of values (ordering, filters, AVG),
//! [`answer`] the form of answers that every evaluator and store shares on purpose.
//!
//! The naive row-by-row oracle the engine is tested against, `reference`, is compiled
//! only for this crate's tests and with the `testing` feature.

pub mod answer;
mod columnar;
mod credits;
#[cfg(any(test, feature = "testing"))]
pub mod reference;
pub mod segment;
pub(crate) mod select;
pub mod stats;
mod store;
pub mod value;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;

use crate::error::{JsonPath, Rule, Violation, Violations, echo};
use crate::load::{Batch, FieldValue, Record};
use crate::plan::{AgentPlan, AnalyticsPlan, Limits, UserPagePlan};
use crate::schema::Source;
use crate::schema::records::{self, RecordKind, groups, users};
use crate::time::Timestamp;
use crate::wire::specs::INGEST;
use crate::wire::{AgentAnalyticsResponse, AnalyticsResponse, UserPageAnalyticsResponse};
use store::Table;

/// Why a plan could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// `group_name` names no group of the team (404).
    #[error("group `{}` was not found", echo(.0))]
    GroupNotFound(String),
    /// The answer has more items than the limit of a whole request, counted over its
    /// queries in order; `query` is the first that passes it (400, `too_many` at
    /// `query_requests[i]`).
    #[error(
        "the answer has more than {limit} items (the limit of a whole request) from query_requests[{query}] on; narrow its filters or group it"
    )]
    TooManyItems {
        /// The index of the query that passes the limit.
        query: usize,
        /// The limit.
        limit: usize,
    },
    /// The answer holds more bytes of aliases and values than the limit of a whole request
    /// ([`Limits::result_bytes`]); `query` is the first that passes it (400, `too_many` at
    /// `query_requests[i]`).
    #[error(
        "the answer holds more than {limit} bytes of aliases and values (the limit of a whole request) from query_requests[{query}] on; select fewer fields, narrow its filters or group it"
    )]
    TooLarge {
        /// The index of the query that passes the limit.
        query: usize,
        /// The limit, in bytes.
        limit: usize,
    },
}

impl EvalError {
    /// The violation a `TooManyItems` or `TooLarge` answers with (`too_many` at
    /// `query_requests[i]`).
    pub fn violation(&self) -> Option<Violation> {
        match self {
            EvalError::TooManyItems { query, .. } | EvalError::TooLarge { query, .. } => {
                Some(Violation::new(
                    crate::wire::specs::ANALYTICS
                        .path(&JsonPath::root(), "query_requests")
                        .index(*query),
                    Rule::TooMany,
                    self.to_string(),
                ))
            }
            EvalError::GroupNotFound(_) => None,
        }
    }
}

/// One team's data: users, groups and usage records of every kind.
///
/// Users and groups are kept as records by identity; usage records (autocomplete, chat,
/// command, PCW, agent lines, runs and tool usage) column by column, one table per kind.
#[derive(Debug, Clone)]
pub struct TeamData {
    /// `users` records by identity.
    users: BTreeMap<String, Record>,
    /// `groups` records by identity.
    groups: BTreeMap<String, Record>,
    /// One table per kind of usage data ([`records::USAGE`]), in its order.
    tables: Vec<Table>,
    /// api_key -> e-mail of its user.
    email_of_key: HashMap<String, String>,
    /// The records of each table as [`TeamData::records`] returns them, made on first use
    /// after a change.
    materialized: Vec<OnceLock<Vec<Record>>>,
    /// The spend by `api_key` last computed, for its range ([`TeamData::spend_by_key`]).
    spend: credits::SpendMemo,
}

impl Default for TeamData {
    fn default() -> TeamData {
        TeamData {
            users: BTreeMap::new(),
            groups: BTreeMap::new(),
            tables: records::USAGE.iter().map(|k| Table::new(k)).collect(),
            email_of_key: HashMap::new(),
            materialized: records::USAGE.iter().map(|_| OnceLock::new()).collect(),
            spend: credits::SpendMemo::default(),
        }
    }
}

impl TeamData {
    /// An empty team.
    pub fn new() -> TeamData {
        TeamData::default()
    }

    fn table_index(kind: &RecordKind) -> Option<usize> {
        records::USAGE.iter().position(|k| k.name == kind.name)
    }

    /// Drops what was computed from table `i` (it changed).
    fn table_changed(&mut self, i: usize) {
        self.materialized[i] = OnceLock::new();
        self.spend = credits::SpendMemo::default();
    }

    /// The table of a kind of usage records.
    fn table(&self, kind: &RecordKind) -> Option<&Table> {
        TeamData::table_index(kind).map(|i| &self.tables[i])
    }

    /// The records kept by identity (users, groups).
    fn by_identity(&self, kind: &RecordKind) -> Option<&BTreeMap<String, Record>> {
        match kind.name {
            "users" => Some(&self.users),
            "groups" => Some(&self.groups),
            _ => None,
        }
    }

    /// The number of stored records of a kind.
    pub fn len(&self, kind: &RecordKind) -> usize {
        match (self.by_identity(kind), self.table(kind)) {
            (Some(m), _) => m.len(),
            (None, Some(t)) => t.len(),
            (None, None) => 0,
        }
    }

    /// Whether the team has no records at all.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty() && self.tables.iter().all(|t| t.len() == 0)
    }

    /// The user with this e-mail.
    pub fn user(&self, email: &str) -> Option<&Record> {
        self.users.get(&key_of(email))
    }

    /// Whether a group with this id exists.
    pub fn has_group_id(&self, group_id: &str) -> bool {
        self.groups.contains_key(&key_of(group_id))
    }

    /// The group ids a user is a member of (ids of groups that exist), sorted bytewise.
    pub fn groups_of(&self, email: &str) -> Vec<String> {
        let Some(u) = self.user(email) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = match u.get(users::GROUPS.name()) {
            FieldValue::Groups(g) => g.iter().filter(|g| self.has_group_id(g)).cloned().collect(),
            _ => Vec::new(),
        };
        ids.sort();
        ids.dedup();
        ids
    }

    /// The id of the group with this name.
    pub fn group_id_by_name(&self, name: &str) -> Option<String> {
        self.groups
            .values()
            .find(|g| g.text(groups::GROUP_NAME.name()) == name)
            .map(|g| g.text(groups::GROUP_ID.name()).to_string())
    }

    /// The users who are members of the group with this name; `None` when there is no such
    /// group.
    pub fn members(&self, group_name: &str) -> Option<Vec<&Record>> {
        let id = self.group_id_by_name(group_name)?;
        Some(
            self.users
                .values()
                .filter(|u| matches!(u.get(users::GROUPS.name()), FieldValue::Groups(g) if g.contains(&id)))
                .collect(),
        )
    }

    /// Checks a batch against the team's data and fills the values the store must keep:
    /// within a team a `users` record may not take another user's `api_key`, a `groups`
    /// record may not take another group's `group_name`, and a user without
    /// `signup_time` keeps the stored one or gets `now` (whole seconds) when first stored.
    ///
    /// The prepared batch is the given one, borrowed, unless a value had to be filled in:
    /// batches of other kinds, and users batches whose records all have `signup_time`,
    /// are not copied.
    ///
    /// # Errors
    /// Every such violation, at `records[i].api_key` / `records[i].group_name`.
    pub fn prepare<'b>(
        &self,
        batch: &'b Batch,
        now: Timestamp,
    ) -> Result<Cow<'b, Batch>, Violations> {
        let mut out = Cow::Borrowed(batch);
        let mut v = Violations::new();
        let rpath = INGEST.path(&JsonPath::root(), "records");
        let at = |i: usize, field: &'static str, kind: &RecordKind| {
            rpath
                .index(i)
                .key(field, kind.position(field).unwrap_or(0) as u32)
        };
        if batch.kind == &records::USERS {
            // The owner of each api_key as the batch goes on.
            let mut owner: HashMap<String, String> = self.email_of_key.clone();
            let mut signup: HashMap<String, Timestamp> = HashMap::new();
            let now = now.whole_seconds();
            for (i, r) in batch.records.iter().enumerate() {
                let (email, key) = (
                    r.text(users::EMAIL.name()).to_string(),
                    r.text(users::API_KEY.name()).to_string(),
                );
                if let Some(other) = owner.get(&key)
                    && *other != email
                {
                    let msg = format!(
                        "`api_key` \"{}\" belongs to another user of the team ({}); api_keys are unique among users",
                        echo(&key),
                        echo(other)
                    );
                    v.push(Violation::new(
                        at(i, users::API_KEY.name(), &records::USERS),
                        Rule::InvalidValue,
                        msg,
                    ));
                    continue;
                }
                if let Some(prev) = self.user(&email) {
                    owner.remove(prev.text(users::API_KEY.name()));
                }
                owner.retain(|_, e| *e != email);
                owner.insert(key, email.clone());
                let stored = self
                    .user(&email)
                    .and_then(|u| u.get(records::SIGNUP_TIME).as_time());
                let first = *signup
                    .entry(email.clone())
                    .or_insert_with(|| stored.unwrap_or(now));
                if let Some(given) = r.get(records::SIGNUP_TIME).as_time() {
                    // A later record of the batch without one keeps this one.
                    signup.insert(email, given);
                } else if r.get(records::SIGNUP_TIME) == &FieldValue::Absent {
                    let mut values = r.values().to_vec();
                    values[records::USERS
                        .position(records::SIGNUP_TIME)
                        .expect("a field of users")] = FieldValue::Time(first);
                    out.to_mut().records[i] = Record::from_values(&records::USERS, values);
                }
            }
        } else if batch.kind == &records::GROUPS {
            let mut owner: HashMap<String, String> = self
                .groups
                .values()
                .map(|g| {
                    (
                        g.text(groups::GROUP_NAME.name()).to_string(),
                        g.text(groups::GROUP_ID.name()).to_string(),
                    )
                })
                .collect();
            for (i, r) in batch.records.iter().enumerate() {
                let (id, name) = (
                    r.text(groups::GROUP_ID.name()).to_string(),
                    r.text(groups::GROUP_NAME.name()).to_string(),
                );
                if let Some(other) = owner.get(&name)
                    && *other != id
                {
                    let msg = format!(
                        "`group_name` \"{}\" is taken by group `{}`; group names are unique within a team",
                        echo(&name),
                        echo(other)
                    );
                    v.push(Violation::new(
                        at(i, groups::GROUP_NAME.name(), &records::GROUPS),
                        Rule::InvalidValue,
                        msg,
                    ));
                    continue;
                }
                owner.retain(|_, g| *g != id);
                owner.insert(name, id);
            }
        }
        crate::validate::finish(v, || out)
    }

    /// Applies a prepared batch: each record replaces the stored one with its identity
    /// (a replaced usage record keeps its row). `billing` batches are not team data and
    /// are ignored here.
    pub fn apply(&mut self, batch: &Batch) {
        let map = match batch.kind.name {
            "users" => &mut self.users,
            "groups" => &mut self.groups,
            _ => {
                if let Some(i) = TeamData::table_index(batch.kind) {
                    for r in &batch.records {
                        self.tables[i].upsert(r);
                    }
                    self.table_changed(i);
                }
                return;
            }
        };
        for r in &batch.records {
            map.insert(r.identity(), r.clone());
        }
        if batch.kind.name == "users" {
            self.email_of_key = self
                .users
                .values()
                .map(|u| {
                    (
                        u.text(users::API_KEY.name()).to_string(),
                        u.text(users::EMAIL.name()).to_string(),
                    )
                })
                .collect();
        }
    }

    /// The api_keys of a group's members; `Err` when the group does not exist.
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
                .map(|u| u.text(users::API_KEY.name()).to_string())
                .collect(),
        ))
    }

    /// Answers an `Analytics` plan.
    ///
    /// # Errors
    /// [`EvalError::GroupNotFound`] for an unknown `group_name`, [`EvalError::TooManyItems`]
    /// when the answers of the queries together exceed `limits.result_items` (found out
    /// in the query that passes it, before its answer is computed whole).
    pub fn analytics(
        &self,
        plan: &AnalyticsPlan,
        limits: &Limits,
    ) -> Result<AnalyticsResponse, EvalError> {
        let allowed = self.allowed_keys(plan.group_name.as_deref())?;
        let mut results = Vec::with_capacity(plan.queries.len());
        let mut room = columnar::Room {
            items: limits.result_items,
            bytes: limits.result_bytes,
        };
        for (i, q) in plan.queries.iter().enumerate() {
            let table = self
                .table(source_kind(q.source))
                .expect("every data source reads a kind stored in columns");
            let ctx = columnar::Ctx {
                table,
                email_of_key: &self.email_of_key,
                allowed_keys: allowed.as_ref(),
                range: plan.range,
            };
            let r = columnar::evaluate(q, &ctx, room).map_err(|over| match over {
                columnar::Over::Items => EvalError::TooManyItems {
                    query: i,
                    limit: limits.result_items,
                },
                columnar::Over::Bytes => EvalError::TooLarge {
                    query: i,
                    limit: limits.result_bytes,
                },
            })?;
            room.items -= r.response_items.len();
            room.bytes -= answer::result_bytes(&r);
            results.push(r);
        }
        Ok(AnalyticsResponse {
            query_results: results,
        })
    }

    /// Answers a `UserPageAnalytics` plan: every user (of the group), ordered by e-mail.
    ///
    /// # Errors
    /// [`EvalError::GroupNotFound`] for an unknown `group_name`.
    pub fn user_page(&self, plan: &UserPagePlan) -> Result<UserPageAnalyticsResponse, EvalError> {
        let mut users: Vec<&Record> = match &plan.group_name {
            Some(g) => self
                .members(g)
                .ok_or_else(|| EvalError::GroupNotFound(g.clone()))?,
            None => self.users.values().collect(),
        };
        users.sort_by(|a, b| {
            a.text(users::EMAIL.name())
                .as_bytes()
                .cmp(b.text(users::EMAIL.name()).as_bytes())
        });
        Ok(UserPageAnalyticsResponse {
            user_table_stats: stats::user_page(self, &users, plan.range),
            error: None,
        })
    }

    /// Answers an `AgentAnalytics` plan.
    ///
    /// # Errors
    /// [`EvalError::GroupNotFound`] for an unknown `group_name`.
    pub fn agent(&self, plan: &AgentPlan) -> Result<AgentAnalyticsResponse, EvalError> {
        let keys: Option<HashSet<String>> = match (&plan.group_name, &plan.emails) {
            (Some(g), _) => self.allowed_keys(Some(g))?,
            (None, Some(emails)) => Some(
                emails
                    .iter()
                    .filter_map(|e| self.user(e))
                    .map(|u| u.text(users::API_KEY.name()).to_string())
                    .collect(),
            ),
            (None, None) => None,
        };
        Ok(AgentAnalyticsResponse {
            query_results: stats::agent(self, plan, keys.as_ref()),
        })
    }

    /// Every stored record of a kind: users and groups in identity order, usage records
    /// in the order they were first stored (a replaced record keeps its place). Usage
    /// records are rebuilt from their columns on the first call after a change and kept
    /// until the next one.
    pub fn records(&self, kind: &RecordKind) -> impl Iterator<Item = &Record> {
        let rows: &[Record] = match TeamData::table_index(kind) {
            Some(i) => self.materialized[i].get_or_init(|| {
                let t = &self.tables[i];
                (0..t.len()).map(|r| t.record(r)).collect()
            }),
            None => &[],
        };
        self.by_identity(kind)
            .into_iter()
            .flat_map(BTreeMap::values)
            .chain(rows)
    }

    /// Bytes held on the heap by the usage tables (columns, dictionaries and identity
    /// indexes), for capacity planning; users, groups and [`TeamData::records`]' copies
    /// are not counted.
    pub fn usage_heap_bytes(&self) -> usize {
        self.tables.iter().map(Table::heap_bytes).sum()
    }

    /// The usage records held, all kinds together (no scan: one count per kind).
    pub fn usage_rows(&self) -> usize {
        self.tables.iter().map(Table::len).sum()
    }
}

/// The record kind a data source reads.
pub fn source_kind(source: Source) -> &'static RecordKind {
    source.spec().record
}

fn key_of(text: &str) -> String {
    format!("{}:{text}", text.len())
}

#[cfg(test)]
mod differential;
#[cfg(test)]
mod tests;
