//! Cross-tenant requests: another team's names are 404 exactly like missing ones, and no
//! answer holds another team's data.

use serde_json::json;
use usage_core::schema::Plan;

use crate::common::{ALL, Env, TestStore, add_team, make_key};

const A_STRINGS: [&str; 7] = ["ana@a", "bob@a", "cy@a", "k-ana", "k-bob", "eng", "g-eng"];

fn no_data_of_a(text: &str) {
    for s in A_STRINGS {
        assert!(!text.contains(&format!("\"{s}\"")), "{s} leaked: {text}");
    }
}

on_every_store!(team_b_cannot_see_or_touch_team_a);
async fn team_b_cannot_see_or_touch_team_a(kind: TestStore) {
    let env = Env::new(kind).await;
    let b = add_team(env.store.as_ref(), "B", Plan::Enterprise).await;
    let kb = make_key(env.store.as_ref(), &b, &ALL).await;
    let cases = [
        (
            "Analytics",
            json!({"group_name": "eng", "query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
            "selections": [{"field": "api_key"}]}]}),
        ),
        ("UserPageAnalytics", json!({"group_name": "eng"})),
        (
            "AgentAnalytics",
            json!({"group_name": "ops", "query_requests": [{"agent_runs": {}}]}),
        ),
        ("GetUsageConfig", json!({"group_id": "g-eng"})),
        ("GetUsageConfig", json!({"user_email": "ana@a"})),
        (
            "UsageConfig",
            json!({"group_id": "g-eng", "set_add_on_credit_cap": 5}),
        ),
        (
            "UsageConfig",
            json!({"user_email": "bob@a", "clear_add_on_credit_cap": true}),
        ),
    ];
    for (op, body) in cases {
        let theirs = env.post_as(&kb, op, body.clone()).await;
        theirs.error(404, "not_found");
        // Exactly like a name that exists nowhere.
        let mut missing = body.clone();
        let mut name = String::new();
        for f in ["group_name", "group_id", "user_email"] {
            if let Some(v) = missing.get(f) {
                name = v.as_str().unwrap().to_string();
                missing[f] = json!("zz-missing");
            }
        }
        let none = env.post_as(&kb, op, missing).await;
        none.error(404, "not_found");
        assert_eq!(
            theirs.body["message"]
                .as_str()
                .unwrap()
                .replace(&name, "NAME"),
            none.body["message"]
                .as_str()
                .unwrap()
                .replace("zz-missing", "NAME"),
            "{op}"
        );
        // And team A's own key gets an answer.
        assert_eq!(env.post(op, body).await.status, 200, "{op}");
    }
    // Unrestricted queries of team B hold nothing of A.
    for (op, body) in [
        (
            "Analytics",
            json!({"query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA", "selections": [{"field": "api_key"}]}]}),
        ),
        ("UserPageAnalytics", json!({})),
        (
            "AgentAnalytics",
            json!({"emails": ["ana@a", "bob@a"], "query_requests": [{"agent_runs": {}}, {"agent_lines": {}}, {"agent_tool_usage": {}}]}),
        ),
        (
            "AgentAnalytics",
            json!({"query_requests": [{"agent_runs": {}}]}),
        ),
        ("GetUsageConfig", json!({"team_level": true})),
    ] {
        let r = env.post_as(&kb, op, body).await;
        no_data_of_a(&r.ok().to_string());
    }
    let r = env
        .post_as(
            &kb,
            "AgentAnalytics",
            json!({"emails": ["ana@a"], "query_requests": [{"agent_runs": {}}]}),
        )
        .await;
    assert_eq!(
        r.ok(),
        &json!({"queryResults": [{"agentRuns": {"agentRuns": []}}]})
    );
    let r = env.post_as(&kb, "UserPageAnalytics", json!({})).await;
    assert_eq!(r.ok(), &json!({"userTableStats": []}));
    // A's cap set by A is invisible to B; B's team cap does not change A's.
    env.post(
        "UsageConfig",
        json!({"team_level": true, "set_add_on_credit_cap": 11}),
    )
    .await
    .ok();
    assert_eq!(
        env.post_as(&kb, "GetUsageConfig", json!({"team_level": true}))
            .await
            .ok(),
        &json!({})
    );
    env.post_as(
        &kb,
        "UsageConfig",
        json!({"team_level": true, "set_add_on_credit_cap": 22}),
    )
    .await
    .ok();
    assert_eq!(
        env.post("GetUsageConfig", json!({"team_level": true}))
            .await
            .ok(),
        &json!({"addOnCreditCap": 11})
    );
    // The same names in team B are B's own.
    env.post_as(
        &kb,
        "Ingest",
        json!({"kind": "groups", "records": [{"group_id": "g-eng", "group_name": "eng"}]}),
    )
    .await
    .ok();
    let r = env
        .post_as(&kb, "UserPageAnalytics", json!({"group_name": "eng"}))
        .await;
    assert_eq!(r.ok(), &json!({"userTableStats": []}));
}
