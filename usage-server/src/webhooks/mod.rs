//! Delivering webhook events (contract section 12): a task that claims the events due in
//! the store's outbox, posts each, signed ([`sign`]), to its webhook's URL through a
//! client that follows no redirect, uses no proxy, reads no answer body, gives up after 10 s and resolves names
//! through [`address::Guarded`], and records the attempt: a 2xx is delivered; anything
//! else is tried again after an exponential backoff (5 s, 10 s, 20 s … at most an hour
//! apart) until 24 h after the event was made.
//!
//! An event is claimed for [`LEASE`] before its attempt, so that an instance killed in the
//! middle of one leaves it to be retried by the next claim after the lease: delivery is at
//! least once, and the `webhook-id` header, the same on every attempt, lets a receiver
//! drop a repeat. Each team's events go in a task of their own: a slow receiver holds up
//! its own team only.

pub mod address;
pub mod sign;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use usage_core::time::Timestamp;

use crate::store::Store;
use crate::store::webhooks::{Attempt, Outgoing};

/// How long a receiver has to answer.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// How long a claimed event is not claimed again: the timeout and a margin.
pub const LEASE: Duration = Duration::from_secs(15);

/// How long an event is retried after it was made.
pub const RETRY_FOR: Duration = Duration::from_secs(24 * 3600);

/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// A new webhook from a registration's fields (`POST /api/v2/webhooks`, `webhook add`):
/// its URL checked by [`address::check`], its subscription by
/// [`usage_core::alerts::subscription`], with a new id and secret. The error is the field
/// and the rule it breaks.
pub fn register(
    url: &str,
    events: Option<&[String]>,
    thresholds: Option<&[i64]>,
    allow_private: bool,
    now: Timestamp,
) -> Result<crate::store::webhooks::Webhook, (String, String)> {
    address::check(url, allow_private)
        .map_err(|rule| ("url".to_string(), format!("`url` {rule}")))?;
    let subscription = usage_core::alerts::subscription(events, thresholds)
        .map_err(|r| (r.field.clone(), format!("`{}` {}", r.field, r.rule)))?;
    Ok(crate::store::webhooks::Webhook {
        id: crate::auth::new_id("whk"),
        url: url.to_string(),
        subscription,
        secret: sign::new_secret(),
        created: now,
    })
}

/// Events claimed at once per team.
const BATCH: usize = 16;

/// How deliveries run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// `serve --webhook-allow-private`: `http` URLs and private addresses allowed.
    pub allow_private: bool,
    /// The wait before the first retry; each next one doubles it (5 s by default).
    pub first_retry: Duration,
    /// How often the outbox is checked for due events (1 s by default).
    pub poll: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            allow_private: false,
            first_retry: Duration::from_secs(5),
            poll: Duration::from_secs(1),
        }
    }
}

impl Settings {
    /// When to try again after `attempts` failed ones of an event made at `created`;
    /// `None` once 24 h have passed.
    pub fn next_attempt(
        &self,
        attempts: i64,
        created: Timestamp,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let doublings = u32::try_from(attempts.saturating_sub(1).clamp(0, 30)).unwrap_or(30);
        let wait = self
            .first_retry
            .saturating_mul(2u32.saturating_pow(doublings))
            .min(MAX_BACKOFF);
        let next = Timestamp(now.0.saturating_add(micros(wait)));
        (next.0 <= created.0.saturating_add(micros(RETRY_FOR))).then_some(next)
    }
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// The HTTP client of deliveries: names resolved through [`address::Guarded`] unless
/// `allow_private`.
///
/// # Panics
/// When the TLS backend cannot start (nothing can be delivered then).
pub fn client(allow_private: bool) -> reqwest::Client {
    let b = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(TIMEOUT)
        .connect_timeout(TIMEOUT)
        .user_agent(concat!(
            "usage-server/",
            env!("CARGO_PKG_VERSION"),
            " (webhooks)"
        ));
    let b = if allow_private {
        b
    } else {
        b.dns_resolver(Arc::new(address::Guarded))
    };
    b.build().expect("the webhook client builds")
}

/// What one attempt came to: the receiver's status, or why there was none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    /// The status the receiver answered.
    pub status: Option<u16>,
    /// Why the attempt failed (`None`: a 2xx).
    pub error: Option<String>,
}

/// Posts one event, signed, now.
pub async fn send(
    client: &reqwest::Client,
    settings: &Settings,
    url: &str,
    secret: &str,
    event_id: &str,
    body: &str,
) -> Sent {
    let failed = |error: String| Sent {
        status: None,
        error: Some(error),
    };
    let url = match reqwest::Url::parse(url) {
        Ok(u) => u,
        Err(e) => return failed(format!("the URL does not parse: {e}")),
    };
    if let Err(e) = address::check_before_sending(&url, settings.allow_private) {
        return failed(e);
    }
    let ts = Timestamp::now().0.div_euclid(1_000_000);
    let Some(sig) = sign::signature(secret, event_id, ts, body) else {
        return failed("the webhook's secret is not `whsec_` + base64".into());
    };
    let req = client
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", event_id)
        .header("webhook-timestamp", ts.to_string())
        .header("webhook-signature", sig)
        .body(body.to_string());
    match req.send().await {
        // The status is what counts: no byte of the answer's body is read (the
        // connection is dropped with it).
        Ok(res) => {
            let status = res.status();
            Sent {
                status: Some(status.as_u16()),
                error: (!status.is_success())
                    .then(|| format!("the receiver answered {}", status.as_u16())),
            }
        }
        Err(e) => failed(describe(&e)),
    }
}

/// A failed request told in one line, with its cause (a refused address, a timeout).
fn describe(e: &reqwest::Error) -> String {
    let mut out = if e.is_timeout() {
        format!("no answer within {} s", TIMEOUT.as_secs())
    } else if e.is_connect() {
        "could not connect".to_string()
    } else {
        "the request failed".to_string()
    };
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// Delivers every due event of `team` it can claim; returns how many it attempted.
async fn deliver_team(
    store: &dyn Store,
    client: &reqwest::Client,
    settings: &Settings,
    team: &str,
) -> crate::store::StoreResult<usize> {
    let mut done = 0;
    loop {
        let now = Timestamp::now();
        let lease = Timestamp(now.0 + micros(LEASE));
        let due = store.claim(team, now, lease, BATCH).await?;
        if due.is_empty() {
            return Ok(done);
        }
        // One webhook's events one after another, in the order made; webhooks at once.
        let mut by_hook: Vec<Vec<&Outgoing>> = Vec::new();
        for o in &due {
            match by_hook.iter_mut().find(|g| g[0].webhook_id == o.webhook_id) {
                Some(g) => g.push(o),
                None => by_hook.push(vec![o]),
            }
        }
        // Each attempt is recorded as soon as it ends (its successor's lease runs on).
        let sends = by_hook.into_iter().map(|group| async move {
            let mut done = 0;
            for o in group {
                let sent = send(client, settings, &o.url, &o.secret, &o.event_id, &o.body).await;
                record(store, settings, team, o, sent).await?;
                done += 1;
            }
            Ok::<_, crate::store::StoreError>(done)
        });
        for n in futures_util::future::join_all(sends).await {
            done += n?;
        }
    }
}

/// Records one attempt of a claimed event: delivered, due again after the backoff, or
/// given up 24 h after the event.
async fn record(
    store: &dyn Store,
    settings: &Settings,
    team: &str,
    o: &Outgoing,
    sent: Sent,
) -> crate::store::StoreResult<()> {
    let now = Timestamp::now();
    let next = match &sent.error {
        None => None,
        Some(_) => settings.next_attempt(o.attempts + 1, o.created, now),
    };
    let error = match (&sent.error, next) {
        (Some(e), None) => Some(format!("{e}; given up 24 h after the event")),
        (e, _) => e.clone(),
    };
    if let Some(e) = &error {
        tracing::warn!(team = %team, webhook = %o.webhook_id, event = %o.event_id, error = %e, "webhook delivery failed");
    }
    let attempt = Attempt {
        claimed: o.lease,
        status: sent.status.map(i64::from),
        error,
        next,
    };
    store
        .attempted(team, &o.webhook_id, &o.event_id, &attempt, now)
        .await
}

/// Runs deliveries until dropped (aborted): every `settings.poll`, each team with due
/// events that has no delivery running gets a task.
pub async fn run(store: Arc<dyn Store>, settings: Settings) {
    let client = client(settings.allow_private);
    let running: Arc<Mutex<HashSet<String>>> = Arc::default();
    // The first round one `poll` after the start, then every `poll`.
    let mut tick =
        tokio::time::interval_at(tokio::time::Instant::now() + settings.poll, settings.poll);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let teams = match store.alerting_teams().await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "reading the webhook outbox failed");
                continue;
            }
        };
        for team in teams {
            if !running
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(team.clone())
            {
                continue;
            }
            let (store, client, running) = (store.clone(), client.clone(), running.clone());
            tokio::spawn(async move {
                if let Err(e) = deliver_team(store.as_ref(), &client, &settings, &team).await {
                    tracing::warn!(team = %team, error = %e, "webhook deliveries stopped for now");
                }
                running
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remove(&team);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_for_24_hours() {
        let s = Settings::default();
        let created = Timestamp(0);
        let sec = 1_000_000;
        assert_eq!(
            s.next_attempt(1, created, created),
            Some(Timestamp(5 * sec))
        );
        assert_eq!(
            s.next_attempt(2, created, created),
            Some(Timestamp(10 * sec))
        );
        assert_eq!(
            s.next_attempt(4, created, created),
            Some(Timestamp(40 * sec))
        );
        assert_eq!(
            s.next_attempt(30, created, created),
            Some(Timestamp(3600 * sec))
        );
        let late = Timestamp(24 * 3600 * sec - 3600 * sec);
        assert_eq!(
            s.next_attempt(30, created, late),
            Some(Timestamp(24 * 3600 * sec))
        );
        assert_eq!(s.next_attempt(30, created, Timestamp(late.0 + 1)), None);
    }
}
