//! The rate limit shared by every instance on one database (contract section 9: one limit
//! per key however many instances serve it): a token bucket per key, a row of
//! `rate_buckets`, refilled on the database's clock.
//!
//! **Leases.** A statement per request would put a database write (on Citus, a routed one)
//! in front of every answer. So an instance takes tokens in leases: up to
//! [`lease_size`] at once (a tenth of the burst, at least 1), kept for [`LEASE_TTL`] and
//! handed out from memory. Every token granted is one taken from the shared bucket, so the
//! limit is never exceeded across instances. What a lease costs: tokens an instance holds
//! and does not use within the lease's life are dropped (not returned), so a key spread
//! over several instances may be refused up to that many tokens early; with a load
//! balancer's key affinity (docs/citus.md) a key's leases sit on one instance and none are
//! lost while it sends. With a burst below 20 a lease is one token: every request asks the
//! database, as without leases.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::GenericClient;

use super::pg_err;
use crate::auth::rate::RateConfig;
use crate::store::{StoreResult, Token};

/// How long an instance may hand out the tokens of a lease.
pub const LEASE_TTL: Duration = Duration::from_millis(250);

/// At most this many keys' leases are held; past it the expired ones are dropped.
const MAX_LEASES: usize = 4096;

/// Tokens an instance takes from a key's bucket at once: a tenth of the burst, at least 1.
pub fn lease_size(rate: RateConfig) -> u32 {
    (rate.burst / 10).max(1)
}

/// What an instance knows of one key's bucket.
#[derive(Default)]
struct Held {
    /// Tokens of the current lease not yet handed out.
    left: u32,
    /// When the lease ends (its tokens left are then dropped).
    until: Option<Instant>,
    /// The bucket was empty when last asked: no token is there before this instant (the
    /// bucket only refills), so a request until then is answered without the database.
    empty_until: Option<Instant>,
}

impl Held {
    /// One token of the lease, or the wait the bucket is known to need, as of `now`.
    fn answer(&mut self, now: Instant) -> Option<Token> {
        if self.left > 0 && self.until.is_some_and(|u| now < u) {
            self.left -= 1;
            return Some(Token::Granted);
        }
        match self.empty_until {
            Some(e) if now < e => Some(Token::Wait(e - now)),
            _ => None,
        }
    }

    /// Whether it still says anything at `now`.
    fn live(&self, now: Instant) -> bool {
        self.until.is_some_and(|u| now < u) || self.empty_until.is_some_and(|e| now < e)
    }
}

/// The leases an instance holds, by (team, key id). A key's requests on one instance ask
/// the database one at a time: the tokens of a lease go to the requests that waited for
/// it, so a burst of concurrent requests uses the tokens it took.
#[derive(Default)]
pub(super) struct Leases(Mutex<HashMap<(String, String), Entry>>);

/// A key's [`Held`], locked while one of its requests asks the database.
type Entry = Arc<tokio::sync::Mutex<Held>>;

impl Leases {
    /// The key's entry, made when missing; past [`MAX_LEASES`] keys, those no request
    /// uses and that say nothing any more are dropped first.
    fn entry(&self, team: &str, key_id: &str) -> Entry {
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= MAX_LEASES {
            let now = Instant::now();
            map.retain(|_, e| Arc::strong_count(e) > 1 || e.try_lock().is_ok_and(|h| h.live(now)));
        }
        map.entry((team.to_string(), key_id.to_string()))
            .or_default()
            .clone()
    }
}

/// One token for the key: from what this instance holds ([`Held`]), else from the shared
/// bucket in one statement, which refills the bucket by the time since its last use, then
/// takes up to a lease of whole tokens if at least one is there. Concurrent requests of
/// any instance serialize on the bucket's row. The clock is read once, in the inserted
/// row, and the update reads it from there (`EXCLUDED.at`): Citus evaluates a function of
/// the inserted values on the coordinator, and refuses any in the update. `client` is
/// called only when the database is asked.
pub(super) async fn take<C, F>(
    leases: &Leases,
    team: &str,
    key_id: &str,
    rate: RateConfig,
    client: impl FnOnce() -> F,
) -> StoreResult<Token>
where
    C: GenericClient,
    F: Future<Output = StoreResult<C>>,
{
    let entry = leases.entry(team, key_id);
    let mut held = entry.lock().await;
    if let Some(t) = held.answer(Instant::now()) {
        return Ok(t);
    }
    let c = client().await?;
    const NOW: &str = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint";
    let burst = f64::from(rate.burst.max(1));
    let per_micro = f64::from(rate.per_minute) / 60e6;
    let size = f64::from(lease_size(rate));
    let avail = "LEAST($3::float8, b.tokens + GREATEST(EXCLUDED.at - b.at, 0) * $4::float8)";
    let take = format!("CASE WHEN {avail} >= 1 THEN LEAST(floor({avail}), $5::float8) ELSE 0 END");
    let first = "LEAST($5::float8, floor($3::float8))";
    let statement = format!(
        "INSERT INTO rate_buckets AS b (team_id, key_id, tokens, at, granted, taken) \
         VALUES ($1, $2, $3::float8 - {first}, {NOW}, TRUE, {first}) \
         ON CONFLICT (team_id, key_id) DO UPDATE SET \
         taken = {take}, \
         granted = {avail} >= 1, \
         tokens = {avail} - {take}, \
         at = GREATEST(b.at, EXCLUDED.at) \
         RETURNING taken, tokens"
    );
    let row = c
        .query_one(
            statement.as_str(),
            &[&team, &key_id, &burst, &per_micro, &size],
        )
        .await
        .map_err(pg_err)?;
    let (taken, tokens): (f64, f64) = (row.get(0), row.get(1));
    let now = Instant::now();
    if taken >= 1.0 {
        // One token for this request; the rest of the lease for the next ones.
        *held = Held {
            left: (taken as u32).saturating_sub(1),
            until: Some(now + LEASE_TTL),
            empty_until: None,
        };
        return Ok(Token::Granted);
    }
    let wait = if per_micro <= 0.0 {
        Duration::from_secs(60)
    } else {
        Duration::from_secs_f64(((1.0 - tokens) / per_micro / 1e6).max(0.0))
    };
    held.empty_until = Some(now + wait);
    Ok(Token::Wait(wait))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_a_tenth_of_the_burst_and_at_least_one_token() {
        let size = |burst| {
            lease_size(RateConfig {
                per_minute: 600,
                burst,
            })
        };
        assert_eq!(
            [
                size(0),
                size(1),
                size(19),
                size(20),
                size(60),
                size(100_000)
            ],
            [1, 1, 1, 2, 6, 10_000]
        );
    }

    #[test]
    fn a_lease_hands_out_its_tokens_until_it_ends_and_an_empty_bucket_its_wait() {
        let t0 = Instant::now();
        let mut h = Held::default();
        assert_eq!(h.answer(t0), None, "nothing known: ask the database");
        h = Held {
            left: 2,
            until: Some(t0 + LEASE_TTL),
            empty_until: None,
        };
        assert_eq!(h.answer(t0), Some(Token::Granted));
        assert_eq!(h.answer(t0 + LEASE_TTL / 2), Some(Token::Granted));
        assert_eq!(h.answer(t0), None, "two tokens, two grants");
        h.left = 3;
        assert_eq!(
            h.answer(t0 + LEASE_TTL),
            None,
            "tokens left at the end are dropped"
        );
        assert!(!h.live(t0 + LEASE_TTL));
        let second = Duration::from_secs(1);
        h.left = 0;
        h.empty_until = Some(t0 + second);
        assert_eq!(h.answer(t0), Some(Token::Wait(second)));
        assert_eq!(h.answer(t0 + second), None);
    }

    #[test]
    fn leases_are_kept_per_team_and_key() {
        let leases = Leases::default();
        let a = leases.entry("t", "k");
        assert!(Arc::ptr_eq(&a, &leases.entry("t", "k")));
        assert!(!Arc::ptr_eq(&a, &leases.entry("t", "k2")));
        assert!(!Arc::ptr_eq(&a, &leases.entry("t2", "k")));
    }
}
