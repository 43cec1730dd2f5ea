//! `memory:`: everything in this process's memory (tests, demos). Private to its process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use async_trait::async_trait;
use usage_core::credits::{Caps, Terms, UserCredits};
use usage_core::eval::TeamData;
use usage_core::load::{Batch, Record};
use usage_core::plan::{AgentPlan, AnalyticsPlan, CapAction, CapScope, Limits, UserPagePlan};
use usage_core::schema::records::{BILLING, RecordKind};
use usage_core::time::Timestamp;
use usage_core::wire::{AgentAnalyticsResponse, AnalyticsResponse, UserPageAnalyticsResponse};

use super::shared::{closed, poisoned};
use super::webhooks::{
    Attempt, Delivery, Emitted, Outgoing, Webhook, WebhookStore, emit, wants_credits,
};
use super::{
    AuditEntry, Billing, BillingStore, CapStore, Change, IMPORT_ACTOR, KeyInfo, KeyListing,
    KeyRecord, NewTeam, RecordStore, RecordStream, StoreError, StoreOps, StoreResult, Team,
    TeamStore, prepare, terms_of,
};
use usage_core::alerts::{DELIVERY_LOG, Known, MAX_WEBHOOKS};

#[derive(Default)]
struct Meta {
    teams: Vec<Team>,
    /// Each key, with when it was revoked.
    keys: HashMap<String, (KeyRecord, Option<Timestamp>)>,
    billing: HashMap<String, Billing>,
    caps: HashMap<(String, CapScope), i64>,
    audit: HashMap<String, Vec<AuditEntry>>,
    /// Each team's webhooks, oldest first.
    hooks: HashMap<String, Vec<Webhook>>,
    /// What each webhook knows, by its id.
    known: HashMap<String, Known>,
    /// Every event, in the order made: its team, webhook and body with its log entry.
    outbox: Vec<Queued>,
    closed: bool,
}

/// An event in the memory store's outbox.
struct Queued {
    team: String,
    webhook_id: String,
    body: String,
    log: Delivery,
}

/// Deletes the webhook's finished events (delivered or given up) older than its last
/// [`DELIVERY_LOG`] (docs/decisions.md, "Webhooks and their events").
fn prune(outbox: &mut Vec<Queued>, team: &str, webhook_id: &str) {
    let of = |q: &Queued| q.team == team && q.webhook_id == webhook_id;
    let Some((cut, _)) = outbox
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, q)| of(q))
        .nth(DELIVERY_LOG - 1)
    else {
        return;
    };
    let mut i = 0;
    outbox.retain(|q| {
        let keep = i >= cut || !of(q) || q.log.next_attempt.is_some();
        i += 1;
        keep
    });
}

impl Meta {
    /// Appends an entry to the team's audit log.
    fn append_audit(&mut self, team: &str, by: &str, now: Timestamp, change: Change) {
        self.audit
            .entry(team.to_string())
            .or_default()
            .push(AuditEntry {
                time: now,
                key_id: by.to_string(),
                change,
            });
    }

    /// Makes and queues the events of a write to `team` (contract section 12): `data` is
    /// the team's data after it, `audit` the cap change it made.
    fn alert(
        &mut self,
        team: &str,
        data: &TeamData,
        audit: Option<&AuditEntry>,
        now: Timestamp,
        tell: bool,
    ) -> StoreResult<Emitted> {
        let hooks: Vec<(Webhook, Known)> = self
            .hooks
            .get(team)
            .into_iter()
            .flatten()
            .map(|h| {
                (
                    h.clone(),
                    self.known.get(&h.id).cloned().unwrap_or_default(),
                )
            })
            .collect();
        if hooks.is_empty() {
            return Ok(Emitted::default());
        }
        let after = if wants_credits(hooks.iter().map(|(h, _)| h)) {
            Some(data.credits(&self.terms(team, now)?))
        } else {
            None
        };
        let out = emit(&hooks, after.as_deref(), audit, now, tell);
        for (hook, email, cycle, t) in &out.fired {
            let k = self.known.entry(hook.clone()).or_default();
            k.fired.insert((email.clone(), *cycle, *t));
        }
        for (hook, email, access) in &out.access {
            let k = self.known.entry(hook.clone()).or_default();
            k.access.insert(email.clone(), *access);
        }
        for e in &out.events {
            self.outbox.push(Queued {
                team: team.to_string(),
                webhook_id: e.webhook_id.clone(),
                body: e.body.clone(),
                log: Delivery {
                    event_id: e.event_id.clone(),
                    event_type: e.event_type.name().to_string(),
                    created: now,
                    attempts: 0,
                    last_status: None,
                    last_error: None,
                    next_attempt: Some(now),
                    delivered: None,
                },
            });
        }
        Ok(out)
    }

    /// The team's terms at `now`.
    fn terms(&self, team: &str, now: Timestamp) -> StoreResult<Terms> {
        let billing = self
            .billing
            .get(team)
            .ok_or_else(|| StoreError::UnknownTeam(team.to_string()))?;
        let caps = Caps::from_entries(
            self.caps
                .iter()
                .filter(|((t, _), _)| t == team)
                .map(|((_, scope), cap)| (scope.clone(), *cap)),
        );
        Ok(terms_of(caps, billing, now))
    }
}

/// The in-memory store.
#[derive(Default)]
pub struct MemoryStore {
    meta: Mutex<Meta>,
    data: RwLock<HashMap<String, Arc<RwLock<TeamData>>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn meta(&self) -> StoreResult<MutexGuard<'_, Meta>> {
        let m = self.meta.lock().map_err(poisoned)?;
        if m.closed {
            return Err(closed());
        }
        Ok(m)
    }

    fn team(&self, team: &str) -> StoreResult<Arc<RwLock<TeamData>>> {
        let m = self.meta()?;
        self.team_in(&m, team)
    }

    /// The team's data, with the metadata locked by the caller.
    fn team_in(&self, m: &Meta, team: &str) -> StoreResult<Arc<RwLock<TeamData>>> {
        if !m.teams.iter().any(|t| t.id == team) {
            return Err(StoreError::UnknownTeam(team.to_string()));
        }
        let data = self.data.read().map_err(poisoned)?;
        data.get(team)
            .cloned()
            .ok_or_else(|| StoreError::UnknownTeam(team.to_string()))
    }

    fn read<T>(&self, team: &str, f: impl FnOnce(&TeamData) -> StoreResult<T>) -> StoreResult<T> {
        let d = self.team(team)?;
        let g = d.read().map_err(poisoned)?;
        f(&g)
    }

    fn write_batch(
        &self,
        team: &str,
        batch: Batch,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let n = batch.records.len() as u64;
        // The metadata stays locked through the write and its events: one writer at a
        // time, and the events read the caps and billing the write saw.
        let mut m = self.meta()?;
        let d = self.team_in(&m, team)?;
        if batch.kind == &BILLING {
            let b = m
                .billing
                .get_mut(team)
                .ok_or_else(|| StoreError::UnknownTeam(team.to_string()))?;
            let old = *b;
            for r in &batch.records {
                b.apply(r, now);
            }
            let new = *b;
            if new != old {
                m.audit
                    .entry(team.to_string())
                    .or_default()
                    .push(AuditEntry {
                        time: now,
                        key_id: key_id.to_string(),
                        change: Change::Billing { old, new },
                    });
            }
            m.alert(team, &*d.read().map_err(poisoned)?, None, now, true)?;
            return Ok(n);
        }
        let mut g = d.write().map_err(poisoned)?;
        let prepared = prepare(&g, &batch, now)?;
        g.apply(&prepared);
        m.alert(team, &g, None, now, true)?;
        Ok(n)
    }
}

#[async_trait]
impl TeamStore for MemoryStore {
    async fn create_team(&self, team: NewTeam, by: &str, now: Timestamp) -> StoreResult<Team> {
        let mut m = self.meta()?;
        if team.unique_name
            && let Some(t) = m.teams.iter().find(|t| t.name == team.name)
        {
            return Err(StoreError::NameTaken {
                name: team.name,
                id: t.id.clone(),
            });
        }
        let id = crate::auth::new_id("team");
        let t = Team {
            id: id.clone(),
            name: team.name,
            created: now,
        };
        m.teams.push(t.clone());
        let b = Billing::new(team.plan, team.seats, team.credits_per_seat, now);
        m.append_audit(&id, by, now, Change::team_created(&id, &t.name, &b));
        m.billing.insert(id.clone(), b);
        self.data
            .write()
            .map_err(poisoned)?
            .insert(id, Arc::default());
        Ok(t)
    }

    async fn teams(&self) -> StoreResult<Vec<Team>> {
        Ok(self.meta()?.teams.clone())
    }

    async fn insert_key(&self, key: KeyRecord, by: &str) -> StoreResult<()> {
        let mut m = self.meta()?;
        if !m.teams.iter().any(|t| t.id == key.team_id) {
            return Err(StoreError::UnknownTeam(key.team_id));
        }
        m.append_audit(&key.team_id, by, key.created, Change::key_created(&key));
        m.keys.insert(key.key_id.clone(), (key, None));
        Ok(())
    }

    async fn key_by_hash(&self, hash: &[u8; 32]) -> StoreResult<Option<KeyInfo>> {
        let m = self.meta()?;
        Ok(m.keys
            .values()
            .find(|(k, revoked)| revoked.is_none() && crate::auth::ct_eq(&k.hash, hash))
            .map(|(k, _)| KeyInfo {
                key_id: k.key_id.clone(),
                team_id: k.team_id.clone(),
                hash: k.hash,
                permissions: k.permissions.clone(),
            }))
    }

    async fn revoke_key(&self, key_id: &str, by: &str) -> StoreResult<()> {
        let mut m = self.meta()?;
        let (k, revoked) = m
            .keys
            .get_mut(key_id)
            .ok_or_else(|| StoreError::UnknownKey(key_id.to_string()))?;
        if revoked.is_some() {
            return Ok(());
        }
        let now = Timestamp::now();
        *revoked = Some(now);
        let change = Change::key_revoked(key_id, k.name.as_deref(), &k.permissions);
        let team = k.team_id.clone();
        m.append_audit(&team, by, now, change);
        Ok(())
    }

    async fn keys(&self, team: &str) -> StoreResult<Vec<KeyListing>> {
        let m = self.meta()?;
        let mut keys: Vec<KeyListing> = m
            .keys
            .values()
            .filter(|(k, _)| k.team_id == team)
            .map(|(k, revoked)| KeyListing {
                key_id: k.key_id.clone(),
                name: k.name.clone(),
                permissions: k.permissions.clone(),
                created: k.created,
                revoked: *revoked,
            })
            .collect();
        keys.sort_by(|a, b| (a.created, &a.key_id).cmp(&(b.created, &b.key_id)));
        Ok(keys)
    }
}

#[async_trait]
impl RecordStore for MemoryStore {
    async fn ingest_by(
        &self,
        team: &str,
        batch: Batch,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<u64> {
        self.write_batch(team, batch, key_id, now)
    }

    async fn import(
        &self,
        team: &str,
        kind: &'static RecordKind,
        records: RecordStream,
        now: Timestamp,
    ) -> StoreResult<Option<u64>> {
        let mut all: Vec<Record> = Vec::new();
        let mut bad = false;
        for r in records {
            match r {
                Ok(r) if !bad => all.push(r),
                Ok(_) => {}
                Err(()) => {
                    bad = true;
                    all.clear();
                }
            }
        }
        if bad {
            return Ok(None);
        }
        self.write_batch(team, Batch { kind, records: all }, IMPORT_ACTOR, now)
            .map(Some)
    }

    async fn analytics(
        &self,
        team: &str,
        plan: &AnalyticsPlan,
        limits: &Limits,
    ) -> StoreResult<AnalyticsResponse> {
        self.read(team, |d| Ok(d.analytics(plan, limits)?))
    }

    async fn user_page(
        &self,
        team: &str,
        plan: &UserPagePlan,
    ) -> StoreResult<UserPageAnalyticsResponse> {
        self.read(team, |d| Ok(d.user_page(plan)?))
    }

    async fn agent(&self, team: &str, plan: &AgentPlan) -> StoreResult<AgentAnalyticsResponse> {
        self.read(team, |d| Ok(d.agent(plan)?))
    }

    async fn has_group_id(&self, team: &str, group_id: &str) -> StoreResult<bool> {
        self.read(team, |d| Ok(d.has_group_id(group_id)))
    }

    async fn has_user(&self, team: &str, email: &str) -> StoreResult<bool> {
        self.read(team, |d| Ok(d.user(email).is_some()))
    }

    async fn groups_of(&self, team: &str, email: &str) -> StoreResult<Vec<String>> {
        self.read(team, |d| Ok(d.groups_of(email)))
    }

    async fn credits(&self, team: &str, terms: &Terms) -> StoreResult<Vec<UserCredits>> {
        self.read(team, |d| Ok(d.credits(terms)))
    }

    async fn credits_of(
        &self,
        team: &str,
        email: &str,
        terms: &Terms,
    ) -> StoreResult<Option<UserCredits>> {
        self.read(team, |d| Ok(d.credits_of(email, terms)))
    }
}

#[async_trait]
impl CapStore for MemoryStore {
    async fn cap(&self, team: &str, scope: &CapScope) -> StoreResult<Option<i64>> {
        Ok(self
            .meta()?
            .caps
            .get(&(team.to_string(), scope.clone()))
            .copied())
    }

    async fn caps(&self, team: &str) -> StoreResult<Caps> {
        Ok(Caps::from_entries(
            self.meta()?
                .caps
                .iter()
                .filter(|((t, _), _)| t == team)
                .map(|((_, scope), cap)| (scope.clone(), *cap)),
        ))
    }

    async fn change_cap(
        &self,
        team: &str,
        scope: &CapScope,
        action: CapAction,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<()> {
        let mut m = self.meta()?;
        let d = self.team_in(&m, team)?;
        let k = (team.to_string(), scope.clone());
        let old = m.caps.get(&k).copied();
        let new = match action {
            CapAction::Set(n) => Some(n),
            CapAction::Clear => None,
        };
        match new {
            Some(n) => m.caps.insert(k, n),
            None => m.caps.remove(&k),
        };
        let entry = AuditEntry {
            time: now,
            key_id: key_id.to_string(),
            change: Change::Cap {
                scope: scope.clone(),
                old,
                new,
            },
        };
        m.alert(team, &*d.read().map_err(poisoned)?, Some(&entry), now, true)?;
        m.audit.entry(team.to_string()).or_default().push(entry);
        Ok(())
    }

    async fn audit(&self, team: &str) -> StoreResult<Vec<AuditEntry>> {
        Ok(self.meta()?.audit.get(team).cloned().unwrap_or_default())
    }
}

#[async_trait]
impl WebhookStore for MemoryStore {
    async fn add_webhook(
        &self,
        team: &str,
        hook: Webhook,
        by: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let mut m = self.meta()?;
        let d = self.team_in(&m, team)?;
        let hooks = m.hooks.entry(team.to_string()).or_default();
        if hooks.len() >= MAX_WEBHOOKS {
            return Ok(false);
        }
        hooks.push(hook.clone());
        m.append_audit(team, by, now, Change::webhook(&hook, true));
        let hooks = m.hooks.entry(team.to_string()).or_default();
        // Only the new webhook learns: the others' state does not move.
        let others: Vec<Webhook> = std::mem::replace(hooks, vec![hook]);
        let learnt = m.alert(team, &*d.read().map_err(poisoned)?, None, now, false);
        m.hooks.insert(team.to_string(), others);
        learnt.map(|_| true)
    }

    async fn webhooks(&self, team: &str) -> StoreResult<Vec<Webhook>> {
        let m = self.meta()?;
        self.team_in(&m, team)?;
        Ok(m.hooks.get(team).cloned().unwrap_or_default())
    }

    async fn remove_webhook(
        &self,
        team: &str,
        id: &str,
        by: &str,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let mut m = self.meta()?;
        self.team_in(&m, team)?;
        let Some(hooks) = m.hooks.get_mut(team) else {
            return Ok(false);
        };
        let Some(at) = hooks.iter().position(|h| h.id == id) else {
            return Ok(false);
        };
        let hook = hooks.remove(at);
        m.append_audit(team, by, now, Change::webhook(&hook, false));
        m.known.remove(id);
        m.outbox.retain(|q| !(q.team == team && q.webhook_id == id));
        Ok(true)
    }

    async fn deliveries(&self, team: &str, id: &str) -> StoreResult<Vec<Delivery>> {
        let m = self.meta()?;
        Ok(m.outbox
            .iter()
            .rev()
            .filter(|q| q.team == team && q.webhook_id == id)
            .take(DELIVERY_LOG)
            .map(|q| q.log.clone())
            .collect())
    }

    async fn alerting_teams(&self) -> StoreResult<Vec<String>> {
        let m = self.meta()?;
        let mut teams: Vec<String> = m
            .outbox
            .iter()
            .filter(|q| q.log.next_attempt.is_some())
            .map(|q| q.team.clone())
            .collect();
        teams.sort();
        teams.dedup();
        Ok(teams)
    }

    async fn claim(
        &self,
        team: &str,
        now: Timestamp,
        lease: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<Outgoing>> {
        let mut m = self.meta()?;
        let Meta { hooks, outbox, .. } = &mut *m;
        let mut out = Vec::new();
        let mut turns: HashMap<String, i64> = HashMap::new();
        for q in outbox.iter_mut().filter(|q| q.team == team) {
            if out.len() == limit {
                break;
            }
            if q.log.next_attempt.is_none_or(|t| t > now) {
                continue;
            }
            let Some(h) = hooks
                .get(team)
                .into_iter()
                .flatten()
                .find(|h| h.id == q.webhook_id)
            else {
                continue;
            };
            let turn = turns.entry(q.webhook_id.clone()).or_insert(0);
            *turn += 1;
            let held = Timestamp(now.0 + *turn * (lease.0 - now.0));
            q.log.next_attempt = Some(held);
            out.push(Outgoing {
                team: team.to_string(),
                webhook_id: h.id.clone(),
                event_id: q.log.event_id.clone(),
                url: h.url.clone(),
                secret: h.secret.clone(),
                body: q.body.clone(),
                attempts: q.log.attempts,
                created: q.log.created,
                lease: held,
            });
        }
        Ok(out)
    }

    async fn attempted(
        &self,
        team: &str,
        webhook_id: &str,
        event_id: &str,
        attempt: &Attempt,
        now: Timestamp,
    ) -> StoreResult<()> {
        let mut m = self.meta()?;
        if let Some(q) = m.outbox.iter_mut().find(|q| {
            q.team == team
                && q.webhook_id == webhook_id
                && q.log.event_id == event_id
                && q.log.next_attempt == Some(attempt.claimed)
        }) {
            q.log.attempts += 1;
            q.log.last_status = attempt.status;
            q.log.last_error = attempt.error.clone();
            q.log.next_attempt = attempt.next;
            if attempt.error.is_none() {
                q.log.delivered = Some(now);
            }
            if attempt.next.is_none() {
                prune(&mut m.outbox, team, webhook_id);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl BillingStore for MemoryStore {
    async fn billing(&self, team: &str) -> StoreResult<Billing> {
        self.meta()?
            .billing
            .get(team)
            .copied()
            .ok_or_else(|| StoreError::UnknownTeam(team.to_string()))
    }
}

#[async_trait]
impl StoreOps for MemoryStore {
    async fn health(&self) -> StoreResult<()> {
        self.meta().map(|_| ())
    }

    async fn migrate(&self) -> StoreResult<u32> {
        Ok(0)
    }

    async fn record_counts(&self) -> StoreResult<Vec<(&'static str, u64)>> {
        let teams: Vec<Arc<RwLock<TeamData>>> = self
            .data
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        Ok(super::shared::count_records(teams.iter().map(|t| &**t)))
    }

    async fn close(&self) -> StoreResult<()> {
        self.meta()?.closed = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn conformance() {
        super::super::conformance::run_all(|| async {
            std::sync::Arc::new(super::MemoryStore::new())
                as std::sync::Arc<dyn crate::store::Store>
        })
        .await;
    }

    #[tokio::test]
    async fn finished_deliveries_are_pruned() {
        let s = super::MemoryStore::new();
        let (team, id) =
            super::super::conformance::webhooks::finished_deliveries_are_pruned(&s).await;
        let m = s.meta().unwrap();
        let held = m
            .outbox
            .iter()
            .filter(|q| q.team == team && q.webhook_id == id)
            .count();
        assert_eq!(held, usage_core::alerts::DELIVERY_LOG + 1);
    }
}
