//! A token bucket per key: `burst` tokens, refilled at `per_minute / 60` per second.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Rate limits of `serve` (section 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateConfig {
    /// Sustained requests per minute per key.
    pub per_minute: u32,
    /// Requests a key may send at once.
    pub burst: u32,
}

impl Default for RateConfig {
    fn default() -> Self {
        RateConfig {
            per_minute: 600,
            burst: 60,
        }
    }
}

/// Per-key token buckets.
#[derive(Debug)]
pub struct RateLimiter {
    config: RateConfig,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl RateLimiter {
    /// A limiter with these limits.
    pub fn new(config: RateConfig) -> RateLimiter {
        RateLimiter {
            config,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one token for `key` at `now`; `Err(wait)` when none is left, with the
    /// time until one is.
    pub fn check_at(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let burst = f64::from(self.config.burst.max(1));
        let per_sec = f64::from(self.config.per_minute) / 60.0;
        let mut b = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if b.len() > 100_000 {
            // Forget full buckets so the map stays bounded.
            b.retain(|_, (tokens, at)| {
                *tokens + now.saturating_duration_since(*at).as_secs_f64() * per_sec < burst
            });
        }
        let (tokens, at) = b.entry(key.to_string()).or_insert((burst, now));
        let refill = now.saturating_duration_since(*at).as_secs_f64() * per_sec;
        *tokens = (*tokens + refill).min(burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else if per_sec <= 0.0 {
            Err(Duration::from_secs(60))
        } else {
            Err(Duration::from_secs_f64((1.0 - *tokens) / per_sec))
        }
    }

    /// [`RateLimiter::check_at`] now.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        self.check_at(key, Instant::now())
    }
}

/// `Retry-After` for a wait: whole seconds, rounded up, at least 1.
pub fn retry_after_secs(wait: Duration) -> u64 {
    (wait.as_secs_f64().ceil() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refill() {
        let l = RateLimiter::new(RateConfig {
            per_minute: 60,
            burst: 3,
        });
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(l.check_at("k", t0).is_ok());
        }
        let wait = l.check_at("k", t0).unwrap_err();
        assert_eq!(retry_after_secs(wait), 1);
        // Another key has its own bucket.
        assert!(l.check_at("other", t0).is_ok());
        // One second later one token is back.
        let t1 = t0 + Duration::from_secs(1);
        assert!(l.check_at("k", t1).is_ok());
        assert!(l.check_at("k", t1).is_err());
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1500)), 2);
    }
}
