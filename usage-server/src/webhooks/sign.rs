//! Standard Webhooks signatures (contract section 12): a secret is `whsec_` and the
//! base64 of 32 random bytes; a delivery's `webhook-signature` is `v1,` and the base64
//! HMAC-SHA256 of `id.timestamp.body`, keyed by the secret's bytes.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix of every secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// A new secret: `whsec_` + base64 of 32 random bytes.
pub fn new_secret() -> String {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).expect("the OS random source is available");
    format!("{SECRET_PREFIX}{}", STANDARD.encode(b))
}

/// The `webhook-signature` header of a delivery: `v1,` + base64 HMAC-SHA256 of
/// `id.timestamp.body` keyed by the secret's decoded bytes. `None` for a secret this
/// server did not make (not `whsec_` + base64).
pub fn signature(secret: &str, id: &str, timestamp: i64, body: &str) -> Option<String> {
    let key = STANDARD.decode(secret.strip_prefix(SECRET_PREFIX)?).ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    Some(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification's reference libraries (their
    /// test suite's `msg_p5jXN8AQM9LWM0D4loKWxJek`, timestamp 1614265330).
    #[test]
    fn the_specifications_example_signs_the_same() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let sig = signature(
            secret,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(
            sig.as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
    }

    #[test]
    fn a_new_secret_is_32_bytes_in_base64() {
        let s = new_secret();
        let bytes = STANDARD.decode(s.strip_prefix("whsec_").unwrap()).unwrap();
        assert_eq!(bytes.len(), 32);
        assert_ne!(s, new_secret());
        assert_eq!(signature("not a secret", "m", 0, ""), None);
    }
}
