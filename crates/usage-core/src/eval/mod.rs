//! Evaluation: a team's records in memory, and the answers of `Analytics`,
//! `UserPageAnalytics` and `AgentAnalytics` computed from them.
//!
//! [`TeamData`] holds one team's users, groups and usage records, accepts batches of
//! records (upserting by identity, contract section 8) and answers validated plans.

pub mod reference;
pub mod stats;
pub mod value;

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::error::{JsonPath, Rule, Violation};
use crate::load::{Batch, FieldValue, Record};
use crate::plan::{AgentPlan, AnalyticsPlan, Limits, UserPagePlan};
use crate::schema::Source;
use crate::schema::records::{self, RecordKind};
use crate::time::Timestamp;
use crate::wire::specs::INGEST;
use crate::wire::{AgentAnalyticsResponse, AnalyticsResponse, UserPageAnalyticsResponse};

/// Why a plan could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// `group_name` names no group of the team (404).
    #[error("group `{0}` was not found")]
    GroupNotFound(String),
    /// A query has more items than the limit (400, `too_many` at `query_requests[i]`).
    #[error("query_requests[{query}] has more than {limit} items; narrow its filters or group it")]
    TooManyItems {
        /// The query's index.
        query: usize,
        /// The limit.
        limit: usize,
    },
}

impl EvalError {
    /// The violation a `TooManyItems` answers with (`too_many` at `query_requests[i]`).
    pub fn violation(&self) -> Option<Violation> {
        match self {
            EvalError::TooManyItems { query, .. } => Some(Violation::new(
                crate::wire::specs::ANALYTICS
                    .path(&JsonPath::root(), "query_requests")
                    .index(*query),
                Rule::TooMany,
                self.to_string(),
            )),
            EvalError::GroupNotFound(_) => None,
        }
    }
}

/// One team's data: users, groups and usage records of every kind.
#[derive(Debug, Default, Clone)]
pub struct TeamData {
    /// Records of every kind but `billing`, by kind name, then identity.
    kinds: HashMap<&'static str, BTreeMap<String, Record>>,
    /// api_key -> e-mail of its user.
    email_of_key: HashMap<String, String>,
}

impl TeamData {
    /// An empty team.
    pub fn new() -> TeamData {
        TeamData::default()
    }

    fn of(&self, kind: &RecordKind) -> impl Iterator<Item = &Record> {
        self.kinds
            .get(kind.name)
            .into_iter()
            .flat_map(|m| m.values())
    }

    /// The number of stored records of a kind.
    pub fn len(&self, kind: &RecordKind) -> usize {
        self.kinds.get(kind.name).map_or(0, BTreeMap::len)
    }

    /// Whether the team has no records at all.
    pub fn is_empty(&self) -> bool {
        self.kinds.values().all(BTreeMap::is_empty)
    }

    /// The user with this e-mail.
    pub fn user(&self, email: &str) -> Option<&Record> {
        self.kinds.get(records::USERS.name)?.get(&key_of(email))
    }

    /// Whether a group with this id exists.
    pub fn has_group_id(&self, group_id: &str) -> bool {
        self.kinds
            .get(records::GROUPS.name)
            .is_some_and(|m| m.contains_key(&key_of(group_id)))
    }

    /// The group ids a user is a member of (ids of groups that exist), sorted bytewise.
    pub fn groups_of(&self, email: &str) -> Vec<String> {
        let Some(u) = self.user(email) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = match u.get("groups") {
            FieldValue::Groups(g) => g.iter().filter(|g| self.has_group_id(g)).cloned().collect(),
            _ => Vec::new(),
        };
        ids.sort();
        ids.dedup();
        ids
    }

    /// The id of the group with this name.
    pub fn group_id_by_name(&self, name: &str) -> Option<String> {
        self.of(&records::GROUPS)
            .find(|g| g.text("group_name") == name)
            .map(|g| g.text("group_id").to_string())
    }

    /// The users who are members of the group with this name; `None` when there is no such
    /// group.
    pub fn members(&self, group_name: &str) -> Option<Vec<&Record>> {
        let id = self.group_id_by_name(group_name)?;
        Some(
            self.of(&records::USERS)
                .filter(|u| matches!(u.get("groups"), FieldValue::Groups(g) if g.contains(&id)))
                .collect(),
        )
    }

    /// Checks a batch against the team's data and fills the values the store must keep:
    /// within a team a `users` record may not take another user's `api_key`, a `groups`
    /// record may not take another group's `group_name`, and a user without
    /// `signup_time` keeps the stored one or gets `now` (whole seconds) when first stored.
    ///
    /// # Errors
    /// Every such violation, at `records[i].api_key` / `records[i].group_name`.
    pub fn prepare(&self, batch: &Batch, now: Timestamp) -> Result<Batch, Vec<Violation>> {
        let mut out = batch.clone();
        let mut v = Vec::new();
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
            for (i, r) in out.records.iter_mut().enumerate() {
                let (email, key) = (r.text("email").to_string(), r.text("api_key").to_string());
                if let Some(other) = owner.get(&key)
                    && *other != email
                {
                    let msg = format!(
                        "`api_key` \"{key}\" belongs to another user of the team ({other}); api_keys are unique among users"
                    );
                    v.push(Violation::new(
                        at(i, "api_key", &records::USERS),
                        Rule::InvalidValue,
                        msg,
                    ));
                    continue;
                }
                if let Some(prev) = self.user(&email) {
                    owner.remove(prev.text("api_key"));
                }
                owner.retain(|_, e| *e != email);
                owner.insert(key, email.clone());
                let stored = self
                    .user(&email)
                    .and_then(|u| u.get("signup_time").as_time());
                let first = *signup.entry(email).or_insert_with(|| stored.unwrap_or(now));
                if r.get("signup_time") == &FieldValue::Absent {
                    let mut values = r.values().to_vec();
                    values[records::USERS.position("signup_time").expect("signup_time")] =
                        FieldValue::Time(first);
                    *r = Record::from_values(&records::USERS, values);
                }
            }
        } else if batch.kind == &records::GROUPS {
            let mut owner: HashMap<String, String> = self
                .of(&records::GROUPS)
                .map(|g| {
                    (
                        g.text("group_name").to_string(),
                        g.text("group_id").to_string(),
                    )
                })
                .collect();
            for (i, r) in out.records.iter().enumerate() {
                let (id, name) = (
                    r.text("group_id").to_string(),
                    r.text("group_name").to_string(),
                );
                if let Some(other) = owner.get(&name)
                    && *other != id
                {
                    let msg = format!(
                        "`group_name` \"{name}\" is taken by group `{other}`; group names are unique within a team"
                    );
                    v.push(Violation::new(
                        at(i, "group_name", &records::GROUPS),
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

    /// Applies a prepared batch: each record replaces the stored one with its identity.
    /// `billing` batches are not team data and are ignored here.
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
                .of(&records::USERS)
                .map(|u| (u.text("api_key").to_string(), u.text("email").to_string()))
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
                .map(|u| u.text("api_key").to_string())
                .collect(),
        ))
    }

    /// Answers an `Analytics` plan.
    ///
    /// # Errors
    /// [`EvalError::GroupNotFound`] for an unknown `group_name`, [`EvalError::TooManyItems`]
    /// when a query's answer exceeds `limits.result_items`.
    pub fn analytics(
        &self,
        plan: &AnalyticsPlan,
        limits: &Limits,
    ) -> Result<AnalyticsResponse, EvalError> {
        let allowed = self.allowed_keys(plan.group_name.as_deref())?;
        let mut results = Vec::with_capacity(plan.queries.len());
        for (i, q) in plan.queries.iter().enumerate() {
            let recs: Vec<&Record> = self.of(source_kind(q.source)).collect();
            let input = reference::Input {
                records: &recs,
                email_of_key: &self.email_of_key,
                allowed_keys: allowed.as_ref(),
                range: plan.range,
            };
            let r = reference::evaluate(q, &input);
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

    /// Answers a `UserPageAnalytics` plan: every user (of the group), ordered by e-mail.
    ///
    /// # Errors
    /// [`EvalError::GroupNotFound`] for an unknown `group_name`.
    pub fn user_page(&self, plan: &UserPagePlan) -> Result<UserPageAnalyticsResponse, EvalError> {
        let users: Vec<&Record> = match &plan.group_name {
            Some(g) => self
                .members(g)
                .ok_or_else(|| EvalError::GroupNotFound(g.clone()))?,
            None => self.of(&records::USERS).collect(),
        };
        let by_key = |kind: &RecordKind| -> HashMap<&str, Vec<&Record>> {
            let mut m: HashMap<&str, Vec<&Record>> = HashMap::new();
            for r in self.of(kind) {
                m.entry(r.text("api_key")).or_default().push(r);
            }
            m
        };
        let auto = by_key(&records::AUTOCOMPLETE);
        let chat = by_key(&records::CHAT);
        let command = by_key(&records::COMMAND);
        let mut agent: HashMap<&str, Vec<&Record>> = HashMap::new();
        for kind in [
            &records::AGENT_LINES,
            &records::AGENT_RUNS,
            &records::AGENT_TOOL_USAGE,
        ] {
            for r in self.of(kind) {
                agent.entry(r.text("api_key")).or_default().push(r);
            }
        }
        let empty = Vec::new();
        let mut stats: Vec<_> = users
            .iter()
            .map(|u| {
                let k = u.text("api_key");
                stats::user_stats(
                    &stats::UserActivity {
                        user: u,
                        autocomplete: auto.get(k).unwrap_or(&empty),
                        chat: chat.get(k).unwrap_or(&empty),
                        command: command.get(k).unwrap_or(&empty),
                        agent: agent.get(k).unwrap_or(&empty),
                    },
                    plan.range,
                )
            })
            .collect();
        stats.sort_by(|a, b| a.email.as_bytes().cmp(b.email.as_bytes()));
        Ok(UserPageAnalyticsResponse {
            user_table_stats: stats,
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
                    .map(|u| u.text("api_key").to_string())
                    .collect(),
            ),
            (None, None) => None,
        };
        let pick = |kind: &RecordKind| -> Vec<&Record> {
            self.of(kind)
                .filter(|r| keys.as_ref().is_none_or(|k| k.contains(r.text("api_key"))))
                .collect()
        };
        let input = stats::AgentInput {
            lines: pick(&records::AGENT_LINES),
            runs: pick(&records::AGENT_RUNS),
            tools: pick(&records::AGENT_TOOL_USAGE),
        };
        Ok(AgentAnalyticsResponse {
            query_results: stats::agent(plan, &input),
        })
    }

    /// Every stored record of a kind, in identity order.
    pub fn records(&self, kind: &RecordKind) -> impl Iterator<Item = &Record> {
        self.of(kind)
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
mod tests;
