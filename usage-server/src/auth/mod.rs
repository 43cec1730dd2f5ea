//! Service keys (contract section 7): random, shown once, stored as SHA-256, compared in
//! constant time; and the per-key rate limiter (section 9).

pub mod rate;

use sha2::{Digest, Sha256};
use usage_core::schema::Permission;

/// The readable prefix of every service key.
pub const KEY_PREFIX: &str = "usk_";

/// Random bytes from the OS.
///
/// # Panics
/// When the OS has no randomness to give (nothing sensible can run then).
fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).expect("the OS random source is available");
    b
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A new service key (`usk_` + 192 random bits as hex) and its SHA-256.
pub fn new_key() -> (String, [u8; 32]) {
    let key = format!("{KEY_PREFIX}{}", hex(&random::<24>()));
    let h = hash_key(&key);
    (key, h)
}

/// A new random id with a readable prefix (`team_…`, `key_…`).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", hex(&random::<10>()))
}

/// A new request id: 24 hex digits, unique within the process (a counter through the
/// SplitMix64 finalizer, a bijection) and across processes (a random salt drawn once).
/// Ids are not secrets, so a request costs no call to the OS's random source.
pub fn new_request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SALT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let salt = *SALT.get_or_init(|| u64::from_le_bytes(random::<8>()));
    let x = usage_core::rng::mix(
        (salt ^ NEXT.fetch_add(1, Ordering::Relaxed)).wrapping_add(usage_core::rng::GAMMA),
    );
    format!("req_{:08x}{x:016x}", salt >> 32)
}

/// SHA-256 of a key.
pub fn hash_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Compares two hashes in constant time.
pub fn ct_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    std::hint::black_box(diff) == 0
}

/// The 403 message naming a missing permission, e.g. "`analytics-read` (Analytics Read)".
pub fn describe(p: Permission) -> String {
    format!("`{}` ({})", p.as_str(), p.title())
}

/// Parses a comma-separated permission list.
///
/// # Errors
/// An unknown or empty permission name.
pub fn parse_permissions(s: &str) -> Result<Vec<Permission>, String> {
    let mut out = Vec::new();
    for p in s.split(',').map(str::trim) {
        let perm: Permission = p.parse().map_err(|e| format!("{e}"))?;
        if !out.contains(&perm) {
            out.push(perm);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_distinct_and_shaped() {
        let ids: std::collections::HashSet<String> =
            (0..100_000).map(|_| new_request_id()).collect();
        assert_eq!(ids.len(), 100_000);
        for id in ids.iter().take(100) {
            assert_eq!(id.len(), 4 + 24, "{id}");
            assert!(id.starts_with("req_"), "{id}");
            assert!(
                id[4..]
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
                "{id}"
            );
        }
        let a = new_request_id();
        let b = new_request_id();
        assert_eq!(a[..12], b[..12], "one salt a process");
        assert_ne!(a[12..], b[12..]);
    }

    #[test]
    fn keys_are_random_prefixed_and_hashed() {
        let (a, ha) = new_key();
        let (b, hb) = new_key();
        assert!(a.starts_with("usk_") && a.len() == 4 + 48);
        assert_ne!(a, b);
        assert!(ct_eq(&ha, &hash_key(&a)));
        assert!(!ct_eq(&ha, &hb));
    }

    #[test]
    fn permissions_parse_and_describe() {
        assert_eq!(
            parse_permissions("analytics-read, billing-write").unwrap(),
            [Permission::AnalyticsRead, Permission::BillingWrite]
        );
        assert!(parse_permissions("analytics-read,admin").is_err());
        assert_eq!(
            describe(Permission::AnalyticsRead),
            "`analytics-read` (Analytics Read)"
        );
    }
}
