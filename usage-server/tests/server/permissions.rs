//! The permission matrix: 6 operations × 5 permissions (+ Ingest), 200 or 403 exactly.

use usage_core::schema::Permission;

use crate::common::{ALL, Env, TestStore, valid_requests};

fn allowed(op: &str) -> Permission {
    match op {
        "Analytics" => Permission::AnalyticsRead,
        "UserPageAnalytics" | "AgentAnalytics" => Permission::TeamsRead,
        "GetUsageConfig" | "GetTeamCreditBalance" => Permission::BillingRead,
        "UsageConfig" => Permission::BillingWrite,
        "Ingest" => Permission::UsageWrite,
        other => panic!("{other}"),
    }
}

on_every_store!(each_operation_needs_exactly_its_permission);
async fn each_operation_needs_exactly_its_permission(kind: TestStore) {
    let env = Env::new(kind).await;
    let mut seen = 0;
    for perm in ALL {
        let key = env.key_with(&[perm]).await;
        for (op, body) in valid_requests() {
            let r = env.post_as(&key, op, body).await;
            if allowed(op) == perm {
                assert_eq!(r.status, 200, "{op} with {perm}: {}", r.text);
            } else {
                let msg = r.error(403, "permission_denied")["message"]
                    .as_str()
                    .unwrap()
                    .to_string();
                let need = allowed(op);
                assert!(
                    msg.contains(&format!("`{}` ({})", need.as_str(), need.title())),
                    "{msg}"
                );
            }
            seen += 1;
        }
    }
    assert_eq!(seen, 35);
    // A key with several permissions has each of them, and no other.
    let key = env
        .key_with(&[Permission::BillingRead, Permission::AnalyticsRead])
        .await;
    for (op, body) in valid_requests() {
        let r = env.post_as(&key, op, body).await;
        let ok = matches!(
            allowed(op),
            Permission::BillingRead | Permission::AnalyticsRead
        );
        assert_eq!(r.status, if ok { 200 } else { 403 }, "{op}");
    }
}
