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

on_every_store!(billing_by_ingest_needs_billing_write_and_is_audited);
/// Contract section 11 (v5): `Ingest` of `billing` records changes plan, seats and
/// credits, so it needs `billing-write` as well as `usage-write` (a `usage-write` key made
/// its team enterprise), and the change is in the audit log with the key and both
/// states.
async fn billing_by_ingest_needs_billing_write_and_is_audited(kind: TestStore) {
    use serde_json::json;
    let env = Env::new(kind).await;
    let body = json!({"kind": "billing", "records": [{"plan": "pro", "num_seats": 3}]});
    for (perms, missing) in [
        (&[Permission::UsageWrite][..], "`billing-write`"),
        (&[Permission::BillingWrite][..], "`usage-write`"),
        (
            &[Permission::UsageWrite, Permission::BillingRead][..],
            "`billing-write`",
        ),
    ] {
        let key = env.key_with(perms).await;
        let r = env.post_as(&key, "Ingest", body.clone()).await;
        let msg = r.error(403, "permission_denied")["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            msg.contains(&format!("lacks the permission {missing}")),
            "{perms:?}: {msg}"
        );
    }
    // Nothing changed, nothing audited.
    let balance = env.post("GetTeamCreditBalance", json!({})).await;
    assert_eq!(balance.ok()["numSeats"], 12);
    let billing_changes = |log: Vec<usage_server::store::AuditEntry>| {
        log.into_iter()
            .filter(|e| matches!(e.change, usage_server::store::Change::Billing { .. }))
            .count()
    };
    assert_eq!(
        billing_changes(env.store.audit(&env.team).await.unwrap()),
        0
    );
    // Other kinds still need usage-write only.
    let writer = env.key_with(&[Permission::UsageWrite]).await;
    let r = env
        .post_as(
            &writer,
            "Ingest",
            json!({"kind": "groups", "records": [{"group_id": "g-w", "group_name": "w"}]}),
        )
        .await;
    assert_eq!(r.ok()["accepted"], 1);
    let both = env
        .key_with(&[Permission::UsageWrite, Permission::BillingWrite])
        .await;
    let r = env.post_as(&both, "Ingest", body).await;
    assert_eq!(r.ok()["accepted"], 1);
    let log: Vec<_> = env
        .store
        .audit(&env.team)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.change, usage_server::store::Change::Billing { .. }))
        .collect();
    assert_eq!(log.len(), 1);
    let entry = log[0].to_json(None);
    assert_eq!(entry["scope"], "billing");
    assert_eq!(entry["old"]["plan"], "enterprise");
    assert_eq!(entry["old"]["num_seats"], 12);
    assert_eq!(entry["new"]["plan"], "pro");
    assert_eq!(entry["new"]["num_seats"], 3);
    let key_id = &log[0].key_id;
    assert!(key_id.starts_with("key_"), "{key_id}");
    // The audit endpoint shows it.
    let res = env
        .client
        .get(env.url("/api/v2/audit"))
        .header("authorization", format!("Bearer {}", env.key))
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = res.json().await.unwrap();
    let shown: Vec<&serde_json::Value> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "billing.change")
        .collect();
    assert_eq!(shown, vec![&entry], "{v}");
}
