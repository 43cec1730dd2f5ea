//! Storage behind a few async traits, so the HTTP layer never knows which store it talks
//! to: teams and keys ([`TeamStore`]), users, groups and usage records ([`RecordStore`]),
//! caps with their audit log ([`CapStore`]), billing ([`BillingStore`]) and webhooks with
//! their outbox ([`WebhookStore`]).
//!
//! Record queries take validated plans and answer them, so a store may evaluate them in
//! memory (the memory and SQLite stores keep one [`TeamData`] per team) or push them down
//! to SQL (the PostgreSQL store). Every method is scoped by a team id: no name resolves
//! outside its team.
//!
//! The durable stores are folders with one file per trait (`schema`, `teams`, `caps`,
//! `billing`, `records`); what both do alike lives once, in `shared.rs`.

mod audit;
pub mod billing;
pub mod cached;
#[cfg(any(test, feature = "testing"))]
pub mod conformance;
pub mod memory;
mod open;
mod ops;
pub mod postgres;
mod shared;
pub mod sqlite;
mod team_cache;
pub mod webhooks;

use async_trait::async_trait;
use usage_core::Violations;
use usage_core::credits::{Caps, Cycle, Terms, UserCredits};
use usage_core::eval::{EvalError, TeamData};
use usage_core::load::{Batch, Record};
use usage_core::plan::{AgentPlan, AnalyticsPlan, CapAction, CapScope, Limits, UserPagePlan};
use usage_core::schema::records::RecordKind;
use usage_core::schema::{Permission, Plan};
use usage_core::time::Timestamp;
use usage_core::wire::{AgentAnalyticsResponse, AnalyticsResponse, UserPageAnalyticsResponse};

pub use audit::{
    AdminAction, AuditEntry, CLI_ACTOR, Change, DEMO_ACTOR, IMPORT_ACTOR, KeyListing, audit_log,
};
pub use billing::Billing;
pub use open::{missing_store, open, open_sqlite, open_with};
pub use ops::{CacheConfig, CacheStats, StoreOps, Token};
pub use webhooks::WebhookStore;

/// Why a store call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be reached or is busy (503, retry later).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A broken invariant of the store (500).
    #[error("store error: {0}")]
    Internal(String),
    /// No team has this id.
    #[error("no team has the id `{0}`")]
    UnknownTeam(String),
    /// No key has this id.
    #[error("no key has the id `{0}`")]
    UnknownKey(String),
    /// A team of this name exists already (a creation with [`NewTeam::unique_name`]).
    #[error("a team named `{name}` exists already ({id})")]
    NameTaken {
        /// The name.
        name: String,
        /// The existing team's id (the oldest, when several have the name).
        id: String,
    },
    /// The records break a rule that needs the stored data (section 8: unique `api_key`
    /// and `group_name`).
    #[error("{} invalid records", .0.total())]
    Invalid(Violations),
    /// A plan could not be answered.
    #[error(transparent)]
    Eval(#[from] EvalError),
}

/// Result of a store call.
pub type StoreResult<T> = Result<T, StoreError>;

/// A team.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Team {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// When it was created.
    pub created: Timestamp,
}

/// What `team create` sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTeam {
    /// The name.
    pub name: String,
    /// The plan.
    pub plan: Plan,
    /// Seats.
    pub seats: i64,
    /// Prompt credits per seat.
    pub credits_per_seat: i64,
    /// Refuse the team ([`StoreError::NameTaken`]) when a team of this name exists,
    /// checked in the creating transaction (two creations of one name at once make one).
    pub unique_name: bool,
}

/// A stored service key: never the key itself, only its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    /// The key's public id.
    pub key_id: String,
    /// The team it belongs to.
    pub team_id: String,
    /// An optional name.
    pub name: Option<String>,
    /// SHA-256 of the key.
    pub hash: [u8; 32],
    /// Its permissions.
    pub permissions: Vec<Permission>,
    /// When it was made.
    pub created: Timestamp,
}

/// An active key found by its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    /// The key's id.
    pub key_id: String,
    /// Its team.
    pub team_id: String,
    /// SHA-256 of the key (compared in constant time by the caller).
    pub hash: [u8; 32],
    /// Its permissions.
    pub permissions: Vec<Permission>,
}

/// Records of one kind for a streaming import: `Err(())` marks a bad record (reported by
/// the producer); after one, the store writes nothing and drains the rest.
pub type RecordStream = Box<dyn Iterator<Item = Result<Record, ()>> + Send>;

/// Teams and service keys.
#[async_trait]
pub trait TeamStore: Send + Sync {
    /// Creates a team with its plan and a first billing cycle from `now`'s day (00:00Z)
    /// to one month later.
    /// The new team's audit log records it ([`AdminAction::TeamCreate`]) as made by `by`.
    async fn create_team(&self, team: NewTeam, by: &str, now: Timestamp) -> StoreResult<Team>;
    /// Every team, oldest first.
    async fn teams(&self) -> StoreResult<Vec<Team>>;
    /// Stores a key ([`StoreError::UnknownTeam`] when its team does not exist); its team's
    /// audit log records it ([`AdminAction::KeyCreate`]) as made by `by`, in the same
    /// transaction.
    async fn insert_key(&self, key: KeyRecord, by: &str) -> StoreResult<()>;
    /// The active (not revoked) key with this SHA-256.
    async fn key_by_hash(&self, hash: &[u8; 32]) -> StoreResult<Option<KeyInfo>>;
    /// Revokes a key ([`StoreError::UnknownKey`] when no key has the id); the first
    /// revocation is recorded in its team's audit log ([`AdminAction::KeyRevoke`]) as made
    /// by `by`, a repeated one changes nothing.
    async fn revoke_key(&self, key_id: &str, by: &str) -> StoreResult<()>;
    /// The team's keys, revoked ones included, oldest first (never their hashes).
    async fn keys(&self, team: &str) -> StoreResult<Vec<KeyListing>>;
}

/// Users, groups and usage records; answers plans.
#[async_trait]
pub trait RecordStore: Send + Sync {
    /// [`RecordStore::ingest`] by `key_id`: the key named in the audit entry of a change
    /// of billing, written in the same transaction as the change.
    ///
    /// # Errors
    /// As [`RecordStore::ingest`].
    async fn ingest_by(
        &self,
        team: &str,
        batch: Batch,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<u64>;
    /// Validates a batch against the team's data (section 8) and stores it durably,
    /// `billing` records included (audited under the key id `-`). Returns the number of
    /// records sent.
    async fn ingest(&self, team: &str, batch: Batch, now: Timestamp) -> StoreResult<u64> {
        self.ingest_by(team, batch, "-", now).await
    }
    /// Imports a stream of records of one kind all-or-nothing, without holding the
    /// stream in memory. `Ok(None)` when the stream had a bad record (nothing written).
    /// A change of billing is audited under [`IMPORT_ACTOR`].
    async fn import(
        &self,
        team: &str,
        kind: &'static RecordKind,
        records: RecordStream,
        now: Timestamp,
    ) -> StoreResult<Option<u64>>;
    /// Answers an `Analytics` plan.
    async fn analytics(
        &self,
        team: &str,
        plan: &AnalyticsPlan,
        limits: &Limits,
    ) -> StoreResult<AnalyticsResponse>;
    /// Answers a `UserPageAnalytics` plan.
    async fn user_page(
        &self,
        team: &str,
        plan: &UserPagePlan,
    ) -> StoreResult<UserPageAnalyticsResponse>;
    /// Answers an `AgentAnalytics` plan.
    async fn agent(&self, team: &str, plan: &AgentPlan) -> StoreResult<AgentAnalyticsResponse>;
    /// Whether the team has a group with this id.
    async fn has_group_id(&self, team: &str, group_id: &str) -> StoreResult<bool>;
    /// Whether the team has a user with this e-mail.
    async fn has_user(&self, team: &str, email: &str) -> StoreResult<bool>;
    /// The ids of the existing groups the user is a member of, sorted bytewise.
    async fn groups_of(&self, team: &str, email: &str) -> StoreResult<Vec<String>>;
    /// Every user's credits against `terms`, in e-mail order (contract section 12).
    async fn credits(&self, team: &str, terms: &Terms) -> StoreResult<Vec<UserCredits>>;
    /// One user's credits against `terms`; `None` when the e-mail is no user of the team.
    async fn credits_of(
        &self,
        team: &str,
        email: &str,
        terms: &Terms,
    ) -> StoreResult<Option<UserCredits>>;
}

/// Add-on credit caps and their audit log.
#[async_trait]
pub trait CapStore: Send + Sync {
    /// The cap set at exactly this scope.
    async fn cap(&self, team: &str, scope: &CapScope) -> StoreResult<Option<i64>>;
    /// Every cap of the team, at every scope.
    async fn caps(&self, team: &str) -> StoreResult<Caps>;
    /// Sets or clears a cap durably and appends the change to the audit log.
    async fn change_cap(
        &self,
        team: &str,
        scope: &CapScope,
        action: CapAction,
        key_id: &str,
        now: Timestamp,
    ) -> StoreResult<()>;
    /// The audit log, oldest first.
    async fn audit(&self, team: &str) -> StoreResult<Vec<AuditEntry>>;
}

/// A stored record row that cannot be read: a hand edit, or an older version's bug
/// (contract section 11). `usage-server check` prints one per line as JSON.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct UnreadableRow {
    /// The team the row belongs to.
    pub team: String,
    /// The record kind (`autocomplete`, `users`, …), or the stored kind name when the
    /// store holds a kind this version does not know.
    pub kind: String,
    /// Where the row is: the SQLite store's `records.seq`, the PostgreSQL store's
    /// `identity_key` in hex.
    pub row: String,
    /// Why it cannot be read.
    pub reason: String,
}

/// The team's plan, seats, credits and billing cycle.
#[async_trait]
pub trait BillingStore: Send + Sync {
    /// The stored billing state ([`StoreError::UnknownTeam`] for an unknown team).
    async fn billing(&self, team: &str) -> StoreResult<Billing>;
}

/// A whole store: the data the HTTP layer reads and writes, and the operations a server
/// runs on it ([`StoreOps`]). Every type that implements the six traits is one.
pub trait Store:
    TeamStore + RecordStore + CapStore + BillingStore + WebhookStore + StoreOps
{
}

impl<T: TeamStore + RecordStore + CapStore + BillingStore + WebhookStore + StoreOps + ?Sized> Store
    for T
{
}

/// The cap that applies to a user, and where it comes from (section 6): their own cap,
/// else the minimum over their groups' caps (tie: bytewise smallest group id), else the
/// team cap ([`Caps::effective`]).
pub async fn effective_cap(
    store: &dyn Store,
    team: &str,
    email: &str,
) -> StoreResult<Option<(i64, String)>> {
    let caps = store.caps(team).await?;
    Ok(caps
        .effective(email, &store.groups_of(team, email).await?)
        .map(|(cap, source)| (cap, source.to_string())))
}

/// What a cap scope names that the team lacks (section 6: a cap is set on a group or a
/// user of the team): the request field (`group_id`, `user_email`) and its value; `None`
/// when the team has it (the team scope always).
pub async fn missing_in_scope(
    store: &dyn Store,
    team: &str,
    scope: &CapScope,
) -> StoreResult<Option<(&'static str, String)>> {
    Ok(match scope {
        CapScope::Team => None,
        CapScope::Group(g) => {
            (!store.has_group_id(team, g).await?).then(|| ("group_id", g.clone()))
        }
        CapScope::User(e) => (!store.has_user(team, e).await?).then(|| ("user_email", e.clone())),
    })
}

/// What the team's users' credits are computed against at `now`: its caps, the billing
/// cycle containing `now` and its prompt credits per seat.
pub async fn terms(store: &dyn Store, team: &str, now: Timestamp) -> StoreResult<Terms> {
    let billing = store.billing(team).await?;
    Ok(terms_of(store.caps(team).await?, &billing, now))
}

/// Every user's credits now and as they would be with a cap change (`scope` set or
/// cleared), both in e-mail order: the two sides of the preview of a change
/// ([`usage_core::credits::changed`]; `POST /api/v2/caps/preview`, `cap preview`).
pub async fn credits_with_change(
    store: &dyn Store,
    team: &str,
    scope: &CapScope,
    action: CapAction,
    now: Timestamp,
) -> StoreResult<(Vec<UserCredits>, Vec<UserCredits>)> {
    let before = terms(store, team, now).await?;
    let mut after = before.clone();
    after.caps.set(
        scope,
        match action {
            CapAction::Set(n) => Some(n),
            CapAction::Clear => None,
        },
    );
    Ok((
        store.credits(team, &before).await?,
        store.credits(team, &after).await?,
    ))
}

/// What the team's users' credits are computed against at `now`, from its caps and its
/// stored billing (a store's own reads, in a write's transaction).
pub(crate) fn terms_of(caps: Caps, billing: &Billing, now: Timestamp) -> Terms {
    let billing = billing.current(now);
    Terms {
        caps,
        cycle: Cycle {
            start: billing.cycle_start,
            end: billing.cycle_end,
        },
        prompt_credits_per_seat: billing.prompt_credits_per_seat,
    }
}

/// Checks a batch with [`TeamData::prepare`] for the kinds whose rules read stored data.
pub(crate) fn prepare(data: &TeamData, batch: &Batch, now: Timestamp) -> StoreResult<Batch> {
    data.prepare(batch, now)
        .map(std::borrow::Cow::into_owned)
        .map_err(StoreError::Invalid)
}
