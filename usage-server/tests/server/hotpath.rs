//! The per-request metadata cache of a running server (issue 15, point 3): a key revoked
//! and a cap set by the CLI, another process, reach the server within a second.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::process::{Server, fixture, new_key, ok};

/// Polls `op` with `body` until `done` holds; the time it took. Gives up after 5 s, the
/// contract's bound (the design's is 1 s: a 250 ms poll and answers at most 1 s old).
pub async fn until(
    s: &Server,
    op: &str,
    body: serde_json::Value,
    done: impl Fn(u16, &serde_json::Value) -> bool,
) -> Duration {
    let from = Instant::now();
    loop {
        let (st, v) = s.post(op, body.clone()).await;
        if done(st, &v) {
            return from.elapsed();
        }
        assert!(
            from.elapsed() < Duration::from_secs(5),
            "{op}: still {st} {v} after 5 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn cli_revocation_and_cap_reach_a_running_server_within_a_second() {
    let f = fixture();
    let s = Server::start(&f.store, &[], &f.log);
    let k = new_key(&f.store, &f.team, "billing-read");
    let key = k["service_key"].as_str().unwrap();
    let read_cap = json!({"service_key": key, "team_level": true});
    // Used, so the server caches it; and the cap, unset.
    for _ in 0..3 {
        assert_eq!(s.post("GetUsageConfig", read_cap.clone()).await.0, 200);
    }
    // A cap set by another process: a second server (no CLI command sets caps).
    let other = Server::start(&f.store, &[], &f.log);
    let (st, _) = other
        .post(
            "UsageConfig",
            json!({"service_key": f.key, "team_level": true, "set_add_on_credit_cap": 55}),
        )
        .await;
    assert_eq!(st, 200);
    let cap_seen = until(&s, "GetUsageConfig", read_cap.clone(), |st, v| {
        st == 200 && v["addOnCreditCap"] == 55
    })
    .await;
    ok(
        &f.store,
        &["key", "revoke", "--key-id", k["key_id"].as_str().unwrap()],
    );
    let refused = until(&s, "GetUsageConfig", read_cap, |st, v| {
        st == 401 && v["code"] == "unauthenticated"
    })
    .await;
    // Not asserted against 1 s: the machine may be busy. The mechanism (a cached answer
    // is never older than 1 s) is unit-tested in store/cached.rs.
    eprintln!("cap seen after {cap_seen:?}, revocation after {refused:?}");
    other.kill9();
    s.kill9();
}
