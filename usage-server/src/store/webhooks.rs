//! Webhooks and their outbox ([`WebhookStore`], contract section 12): a team's webhooks,
//! what each knows of the team's users ([`Known`]), and the events waiting for delivery.
//!
//! A write that can change credits (agent runs, users, groups, caps, billing) makes its
//! events in its own transaction: the store reads the team's webhooks and what they
//! know, computes every user's credits after the write, and [`emit`] answers the events
//! and what the webhooks know after them; the store writes both before it commits. So an
//! acknowledged write's events are stored with it, and a crash loses neither (at least
//! once). A team without webhooks pays one read of an empty table.

use async_trait::async_trait;
use usage_core::alerts::{self, EventType, Known, Subscription};
use usage_core::credits::UserCredits;
use usage_core::schema::records::{AGENT_RUNS, BILLING, GROUPS, RecordKind, USERS};
use usage_core::time::Timestamp;

use super::{AuditEntry, StoreResult};

/// A registered webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// Its id (`whk_…`).
    pub id: String,
    /// Where events go.
    pub url: String,
    /// What it asks for.
    pub subscription: Subscription,
    /// Its signing secret (`whsec_` + base64), shown once, at creation.
    pub secret: String,
    /// When it was registered.
    pub created: Timestamp,
}

impl Webhook {
    /// The webhook as `GET /api/v2/webhooks` lists it and the CLI prints it: `id`, `url`,
    /// `events`, `thresholds`, `created` (RFC 3339), and `secret` when `with_secret` (only
    /// at registration).
    pub fn to_json(&self, with_secret: bool) -> serde_json::Value {
        let mut v = serde_json::json!({
            "id": self.id,
            "url": self.url,
            "events": self.subscription.events.iter().map(|e| e.name()).collect::<Vec<_>>(),
            "thresholds": self.subscription.thresholds,
            "created": self.created.to_rfc3339(),
        });
        if with_secret {
            v["secret"] = serde_json::json!(self.secret);
        }
        v
    }
}

/// One event for one webhook, as the delivery log shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The event's id (`webhook-id`), the same on every attempt.
    pub event_id: String,
    /// Its type's name.
    pub event_type: String,
    /// When the write that made it was.
    pub created: Timestamp,
    /// Attempts made.
    pub attempts: i64,
    /// The receiver's last HTTP status.
    pub last_status: Option<i64>,
    /// Why the last attempt failed, when it did.
    pub last_error: Option<String>,
    /// When the next attempt is due; `None` once delivered or given up.
    pub next_attempt: Option<Timestamp>,
    /// When it was delivered (a 2xx).
    pub delivered: Option<Timestamp>,
}

/// An event claimed for an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The team.
    pub team: String,
    /// The webhook.
    pub webhook_id: String,
    /// The event's id.
    pub event_id: String,
    /// The webhook's URL.
    pub url: String,
    /// The webhook's secret.
    pub secret: String,
    /// The body, as stored (the same bytes on every attempt).
    pub body: String,
    /// Attempts made before this one.
    pub attempts: i64,
    /// When the event was made.
    pub created: Timestamp,
    /// Until when this claim holds it.
    pub lease: Timestamp,
}

/// How an attempt went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The lease of the claim that made the attempt ([`Outgoing::lease`]): an attempt is
    /// recorded only while the event is still under that claim, so a process whose claim
    /// ran out (and was claimed again elsewhere) changes nothing.
    pub claimed: Timestamp,
    /// The receiver's status, when it answered.
    pub status: Option<i64>,
    /// Why it failed (`None`: a 2xx).
    pub error: Option<String>,
    /// When to try again; `None`: delivered, or given up.
    pub next: Option<Timestamp>,
}

/// A new event of a write, for one webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// The webhook.
    pub webhook_id: String,
    /// The event's id (`msg_…`).
    pub event_id: String,
    /// Its type.
    pub event_type: EventType,
    /// Its body.
    pub body: String,
}

/// What a write adds: its events, and what each webhook learnt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Emitted {
    /// The events.
    pub events: Vec<NewEvent>,
    /// New `(webhook, email, cycle start, threshold)` entries of what was told.
    pub fired: Vec<(String, String, Timestamp, i64)>,
    /// New or changed `(webhook, email, access)` entries.
    pub access: Vec<(String, String, bool)>,
}

/// Whether a write of this kind can move credits (and so make events): agent runs,
/// users, groups and billing.
pub fn moves_credits(kind: &RecordKind) -> bool {
    [&AGENT_RUNS, &USERS, &GROUPS, &BILLING]
        .iter()
        .any(|k| std::ptr::eq(*k, kind))
}

/// Whether any of the webhooks needs the users' credits after a write.
pub fn wants_credits<'a>(hooks: impl IntoIterator<Item = &'a Webhook>) -> bool {
    hooks.into_iter().any(|h| {
        h.subscription.wants(EventType::Threshold) || h.subscription.wants(EventType::AccessChanged)
    })
}

/// The events of a write for each webhook with what it knew (`after`: every user's
/// credits after the write, when [`wants_credits`]; `audit`: the cap change the write
/// made, for `caps.changed`). `tell` false learns without telling (a new webhook's
/// baseline).
pub fn emit(
    hooks: &[(Webhook, Known)],
    after: Option<&[UserCredits]>,
    audit: Option<&AuditEntry>,
    now: Timestamp,
    tell: bool,
) -> Emitted {
    let mut out = Emitted::default();
    for (hook, known) in hooks {
        // The cap change first: the cause before what it made.
        if let Some(entry) = audit.filter(|_| tell)
            && matches!(entry.change, super::Change::Cap { .. })
            && hook.subscription.wants(EventType::CapsChanged)
        {
            let t = EventType::CapsChanged;
            out.events.push(new_event(
                &hook.id,
                t,
                alerts::body(t, now, entry.event_json()),
            ));
        }
        if let Some(after) = after {
            let w = alerts::watch(&hook.subscription, known, after, tell);
            for a in w.alerts {
                out.events.push(new_event(
                    &hook.id,
                    a.event_type(),
                    alerts::body(a.event_type(), now, a.data()),
                ));
            }
            out.fired.extend(
                w.fired
                    .into_iter()
                    .map(|(e, c, t)| (hook.id.clone(), e, c, t)),
            );
            out.access
                .extend(w.access.into_iter().map(|(e, a)| (hook.id.clone(), e, a)));
        }
    }
    out
}

/// A new event with a fresh id.
pub fn new_event(webhook_id: &str, event_type: EventType, body: String) -> NewEvent {
    NewEvent {
        webhook_id: webhook_id.to_string(),
        event_id: crate::auth::new_id("msg"),
        event_type,
        body,
    }
}

/// Webhooks, what they know and their outbox.
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Registers a webhook, with what it knows from the start (the thresholds already
    /// reached in this cycle, each user's access: nothing before it is told). `Ok(false)`
    /// when the team has [`MAX_WEBHOOKS`](usage_core::alerts::MAX_WEBHOOKS) already. The
    /// team's audit log records it ([`AdminAction::WebhookAdd`]) as made by `by`, in the
    /// same transaction.
    ///
    /// [`AdminAction::WebhookAdd`]: crate::store::AdminAction::WebhookAdd
    async fn add_webhook(
        &self,
        team: &str,
        hook: Webhook,
        by: &str,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// The team's webhooks, oldest first.
    async fn webhooks(&self, team: &str) -> StoreResult<Vec<Webhook>>;
    /// Removes a webhook with its outbox and what it knew; `false` when the team has none
    /// with this id.
    /// The removal is recorded in the team's audit log ([`AdminAction::WebhookRemove`]) as
    /// made by `by`, in the same transaction.
    ///
    /// [`AdminAction::WebhookRemove`]: crate::store::AdminAction::WebhookRemove
    async fn remove_webhook(
        &self,
        team: &str,
        id: &str,
        by: &str,
        now: Timestamp,
    ) -> StoreResult<bool>;
    /// The webhook's last [`DELIVERY_LOG`](usage_core::alerts::DELIVERY_LOG) events,
    /// newest first.
    async fn deliveries(&self, team: &str, id: &str) -> StoreResult<Vec<Delivery>>;
    /// The teams with an event waiting (an admin read for the delivery task).
    async fn alerting_teams(&self) -> StoreResult<Vec<String>>;
    /// Claims up to `limit` of the team's events due at `now`, in the order made. The
    /// events of one webhook are sent one after another, so the k-th of a webhook is held
    /// for k leases (`lease` is when the first one's ends): each is due again only once its
    /// turn and its attempt could have ended (a process that dies mid-attempt leaves it to
    /// be retried then).
    async fn claim(
        &self,
        team: &str,
        now: Timestamp,
        lease: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<Outgoing>>;
    /// Records an attempt of a claimed event, while the event is still under the claim
    /// that made it ([`Attempt::claimed`]). An attempt that finishes its event (no
    /// [`Attempt::next`]) deletes the webhook's finished events older than its last
    /// [`DELIVERY_LOG`](usage_core::alerts::DELIVERY_LOG).
    async fn attempted(
        &self,
        team: &str,
        webhook_id: &str,
        event_id: &str,
        attempt: &Attempt,
        now: Timestamp,
    ) -> StoreResult<()>;
}

/// A subscription's events as stored: their names joined by `,`.
pub(crate) fn events_text(s: &Subscription) -> String {
    s.events
        .iter()
        .map(|e| e.name())
        .collect::<Vec<_>>()
        .join(",")
}

/// A subscription's thresholds as stored: joined by `,`.
pub(crate) fn thresholds_text(s: &Subscription) -> String {
    s.thresholds
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A subscription from its stored columns (the inverse of [`events_text`] and
/// [`thresholds_text`]; a name or number it cannot read is left out).
pub(crate) fn subscription_from(events: &str, thresholds: &str) -> Subscription {
    let events: Vec<EventType> = events.split(',').filter_map(EventType::from_name).collect();
    let thresholds: Vec<i64> = thresholds
        .split(',')
        .filter_map(|t| t.parse().ok())
        .collect();
    Subscription::new(&events, &thresholds)
}
