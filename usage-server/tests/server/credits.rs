//! Credits against caps (contract section 12) over HTTP, against an oracle written apart
//! from the engine: random teams with caps at every scope (ties between groups, caps of
//! 0, memberships of groups that do not exist), a billing cycle around now and agent runs
//! on its edges and outside it; every user's credits, the list in pages, `min_percent`
//! and unknown e-mails, on every store, before and after a restart.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use usage_core::plan::{CapAction, CapScope};
use usage_core::rng::SplitMix64;
use usage_core::schema::Plan;
use usage_core::schema::records::{AGENT_RUNS, BILLING, GROUPS, USERS};
use usage_core::time::Timestamp;

use crate::common::{ALL, TestServer, TestStore, add_team, fast_config, load, make_key};

const DAY: i64 = 86_400_000_000;

/// A random team: what was written, as the oracle reads it.
struct Team {
    /// e-mail -> (api_key, group ids named by the user record).
    users: BTreeMap<String, (String, Vec<String>)>,
    /// Group ids that exist.
    groups: BTreeSet<String>,
    team_cap: Option<i64>,
    group_caps: BTreeMap<String, i64>,
    user_caps: BTreeMap<String, i64>,
    /// (api_key, timestamp, prompts_used, flex_credits_used).
    runs: Vec<(String, i64, i64, Option<i64>)>,
    start: i64,
    end: i64,
    per_seat: i64,
}

fn random_team(rng: &mut SplitMix64, now: i64) -> Team {
    let groups: BTreeSet<String> = ["g0", "g1", "g2"].map(String::from).into();
    let named = ["g0", "g1", "g2", "g-gone"];
    let mut users = BTreeMap::new();
    for i in 0..3 + rng.below(6) {
        let mine: Vec<String> = named
            .iter()
            .filter(|_| rng.chance(0.4))
            .map(|g| g.to_string())
            .collect();
        // E-mails whose bytewise order differs from their numbers' ("u10" < "u2").
        users.insert(
            format!("u{}@t.example", i * 7 % 11),
            (format!("key-{i}"), mine),
        );
    }
    let cap = |rng: &mut SplitMix64| *rng.pick(&[0, 3, 50, 100, 100, 200]);
    let team_cap = rng.chance(0.5).then(|| cap(rng));
    let mut group_caps = BTreeMap::new();
    for g in named {
        if rng.chance(0.5) {
            group_caps.insert(g.to_string(), cap(rng));
        }
    }
    let mut user_caps = BTreeMap::new();
    for e in users.keys() {
        if rng.chance(0.3) {
            user_caps.insert(e.clone(), cap(rng));
        }
    }
    user_caps.insert("nobody@t.example".into(), 1);
    // A cycle around now, in whole seconds.
    let start = (now - (1 + rng.below(20) as i64) * DAY) / 1_000_000 * 1_000_000;
    let end = (now + (1 + rng.below(20) as i64) * DAY) / 1_000_000 * 1_000_000;
    let keys: Vec<String> = users
        .values()
        .map(|(k, _)| k.clone())
        .chain(["key-stranger".to_string()])
        .collect();
    let runs = (0..rng.below(60))
        .map(|_| {
            let at = match rng.below(6) {
                0 => start - 1,
                1 => start,
                2 => end - 1,
                3 => end,
                _ => start - 5 * DAY + rng.below((end - start + 10 * DAY) as u64) as i64,
            };
            let flex = rng
                .chance(0.8)
                .then(|| *rng.pick(&[0, 1, 99, 150, 2_500, 9_999, 20_000]));
            (rng.pick(&keys).clone(), at, rng.below(5_000) as i64, flex)
        })
        .collect();
    Team {
        users,
        groups,
        team_cap,
        group_caps,
        user_caps,
        runs,
        start,
        end,
        per_seat: rng.below(1_000) as i64,
    }
}

/// Hundredths as a decimal with two places.
fn money(h: i128) -> String {
    let sign = if h < 0 { "-" } else { "" };
    format!("{sign}{}.{:02}", h.abs() / 100, h.abs() % 100)
}

/// The cap that applies and its source, by section 6's words.
fn applies(t: &Team, email: &str) -> Option<(i64, String)> {
    if let Some(c) = t.user_caps.get(email) {
        return Some((*c, "user".into()));
    }
    let (_, mine) = &t.users[email];
    let mut best: Option<(i64, &String)> = None;
    for g in mine.iter().filter(|g| t.groups.contains(*g)) {
        if let Some(&c) = t.group_caps.get(g) {
            let better = match best {
                None => true,
                Some((b, id)) => c < b || (c == b && g.as_bytes() < id.as_bytes()),
            };
            if better {
                best = Some((c, g));
            }
        }
    }
    if let Some((c, g)) = best {
        return Some((c, format!("group:{g}")));
    }
    t.team_cap.map(|c| (c, "team".into()))
}

/// Every user's credits object, in e-mail order, and whether each reaches `min_percent`.
fn oracle(t: &Team, min_percent: Option<i64>) -> Vec<Value> {
    let mut out = Vec::new();
    for (email, (key, _)) in &t.users {
        let mine = t
            .runs
            .iter()
            .filter(|(k, at, _, _)| k == key && t.start <= *at && *at < t.end);
        let (mut prompts, mut flex) = (0i128, 0i128);
        for (_, _, p, f) in mine {
            prompts += i128::from(*p);
            flex += i128::from(f.unwrap_or(0));
        }
        let mut v = json!({
            "email": email,
            "cycle_start": Timestamp(t.start).to_rfc3339(),
            "cycle_end": Timestamp(t.end).to_rfc3339(),
            "prompt_credits_per_seat": t.per_seat,
            "prompt_credits_used": money(prompts),
            "add_on_credits_used": money(flex),
            "has_access": true,
        });
        let cap = applies(t, email);
        if let Some((c, source)) = &cap {
            let cap = i128::from(*c) * 100;
            v["add_on_credit_cap"] = json!(c);
            v["cap_source"] = json!(source);
            v["remaining_add_on_credits"] = json!(money(cap - flex));
            if cap > 0 {
                // Used / cap × 100, one decimal, truncated.
                let tenths = flex * 1000 / cap;
                v["percent_of_cap"] = json!(format!("{}.{}", tenths / 10, tenths % 10));
            }
            v["has_access"] = json!(flex < cap);
        }
        let keep = match (min_percent, &cap) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(m), Some((0, _))) => flex > 0 || m == 0,
            (Some(m), Some((c, _))) => flex * 100 >= i128::from(m) * i128::from(*c) * 100,
        };
        if keep {
            out.push(v);
        }
    }
    out
}

/// Writes the team through the store: groups, users, billing, runs, caps.
async fn write(server: &TestServer, team: &str, t: &Team) {
    let s = server.store.as_ref();
    let groups: Vec<Value> = t
        .groups
        .iter()
        .map(|g| json!({"group_id": g, "group_name": format!("name {g}")}))
        .collect();
    if !groups.is_empty() {
        load(s, team, &GROUPS, Value::Array(groups)).await;
    }
    let users: Vec<Value> = t
        .users
        .iter()
        .map(|(e, (k, g))| json!({"email": e, "name": e, "api_key": k, "groups": g}))
        .collect();
    load(s, team, &USERS, Value::Array(users)).await;
    load(
        s,
        team,
        &BILLING,
        json!([{"prompt_credits_per_seat": t.per_seat,
                "billing_cycle_start": Timestamp(t.start).to_rfc3339(),
                "billing_cycle_end": Timestamp(t.end).to_rfc3339()}]),
    )
    .await;
    let runs: Vec<Value> = t
        .runs
        .iter()
        .enumerate()
        .map(|(i, (k, at, p, f))| {
            let mut r = json!({"id": format!("run-{i}"), "api_key": k,
                "timestamp": Timestamp(*at).to_rfc3339(), "ide_type": "editor",
                "model": "m", "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT", "messages_sent": 1,
                "agent_id": "a", "prompts_used": p});
            if let Some(f) = f {
                r["flex_credits_used"] = json!(f);
            }
            r
        })
        .collect();
    if !runs.is_empty() {
        load(s, team, &AGENT_RUNS, Value::Array(runs)).await;
    }
    let now = Timestamp::now();
    let mut caps: Vec<(CapScope, i64)> = t
        .group_caps
        .iter()
        .map(|(g, c)| (CapScope::Group(g.clone()), *c))
        .chain(
            t.user_caps
                .iter()
                .map(|(e, c)| (CapScope::User(e.clone()), *c)),
        )
        .collect();
    caps.extend(t.team_cap.map(|c| (CapScope::Team, c)));
    for (scope, cap) in caps {
        s.change_cap(team, &scope, CapAction::Set(cap), "test", now)
            .await
            .unwrap();
    }
}

/// A GET with the bearer key: (status, body).
async fn get(client: &reqwest::Client, url: &str, key: &str) -> (u16, Value) {
    let res = client
        .get(url)
        .header("authorization", format!("Bearer {key}"))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// Every read of the credits against the oracle.
async fn check(server: &TestServer, key: &str, t: &Team, rng: &mut SplitMix64, when: &str) {
    let client = reqwest::Client::new();
    let base = server.server.url();
    for min in [None, Some(0), Some(50), Some(80), Some(100), Some(150)] {
        let limit = 1 + rng.below(4);
        let mut got = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!("{base}/api/v2/credits/users?limit={limit}");
            if let Some(m) = min {
                url.push_str(&format!("&min_percent={m}"));
            }
            if let Some(c) = &cursor {
                url.push_str(&format!("&cursor={c}"));
            }
            let (status, body) = get(&client, &url, key).await;
            assert_eq!(status, 200, "{when}: {url}: {body}");
            got.extend(body["data"].as_array().unwrap().iter().cloned());
            match body["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        assert_eq!(got, oracle(t, min), "{when}: min_percent {min:?}");
    }
    for want in oracle(t, None) {
        let email = want["email"].as_str().unwrap();
        // The e-mail percent-encoded, as a client library sends it.
        let path = email.replace('@', "%40");
        let (status, body) =
            get(&client, &format!("{base}/api/v2/credits/users/{path}"), key).await;
        assert_eq!((status, &body), (200, &want), "{when}: {email}");
    }
    let (status, body) = get(
        &client,
        &format!("{base}/api/v2/credits/users/nobody@t.example"),
        key,
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("not_found")),
        "{when}: {body}"
    );
}

async fn credits_equal_the_oracle(store: TestStore) {
    let seed = std::env::var("CREDITS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| Timestamp::now().0 as u64);
    let mut rng = SplitMix64::new(seed);
    for case in 0..3 {
        let t = random_team(&mut rng, Timestamp::now().0);
        let mut server = TestServer::start(store, fast_config(), async |s| {
            add_team(s, "credits", Plan::Enterprise).await
        })
        .await;
        let team = server.team.clone();
        write(&server, &team, &t).await;
        // A key of billing-read only: enough for every read.
        let key = make_key(
            server.store.as_ref(),
            &team,
            &[usage_core::schema::Permission::BillingRead],
        )
        .await;
        let when = format!("seed {seed}, case {case}, {}", store.name());
        check(
            &server,
            &key,
            &t,
            &mut rng,
            &format!("{when}, before a restart"),
        )
        .await;
        if store.durable() {
            server = server.reopen(fast_config()).await;
            check(
                &server,
                &key,
                &t,
                &mut rng,
                &format!("{when}, after a restart"),
            )
            .await;
        }
        // Another team's key reads its own (empty) team: no user of this one is found.
        let other = add_team(server.store.as_ref(), "other", Plan::Enterprise).await;
        let other_key = make_key(server.store.as_ref(), &other, &ALL).await;
        let (status, body) = get(
            &reqwest::Client::new(),
            &format!("{}/api/v2/credits/users", server.server.url()),
            &other_key,
        )
        .await;
        assert_eq!((status, &body["data"]), (200, &json!([])), "{when}");
    }
}

on_every_store!(credits_equal_the_oracle);

/// Pages through a POST of the preview; (status, rows or the error body).
async fn preview(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    body: &Value,
    limit: u64,
) -> (u16, Value) {
    let mut rows = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{base}/api/v2/caps/preview?limit={limit}");
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let res = client
            .post(&url)
            .header("authorization", format!("Bearer {key}"))
            .json(body)
            .send()
            .await
            .unwrap();
        let status = res.status().as_u16();
        let v: Value = res.json().await.unwrap_or(Value::Null);
        if status != 200 {
            return (status, v);
        }
        rows.extend(v["data"].as_array().unwrap().iter().cloned());
        match v["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return (200, Value::Array(rows)),
        }
    }
}

/// Every user's credits, all pages.
async fn all_credits(client: &reqwest::Client, base: &str, key: &str) -> Vec<Value> {
    let (status, body) = get(
        client,
        &format!("{base}/api/v2/credits/users?limit=1000"),
        key,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body["data"].as_array().unwrap().clone()
}

/// The preview of random cap changes equals what reading the credits before and after
/// applying each change shows: the users whose cap, its source or access changed.
async fn preview_equals_the_change_applied(store: TestStore) {
    let seed = std::env::var("CREDITS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| Timestamp::now().0 as u64);
    let mut rng = SplitMix64::new(seed);
    let t = random_team(&mut rng, Timestamp::now().0);
    let server = TestServer::start(store, fast_config(), async |s| {
        add_team(s, "preview", Plan::Enterprise).await
    })
    .await;
    write(&server, &server.team, &t).await;
    let base = server.server.url();
    let client = reqwest::Client::new();
    let read = make_key(
        server.store.as_ref(),
        &server.team,
        &[usage_core::schema::Permission::BillingRead],
    )
    .await;
    let emails: Vec<&String> = t.users.keys().collect();
    let mut shown = 0;
    for step in 0..12 {
        let mut body = match rng.below(3) {
            0 => json!({"team_level": true}),
            1 => json!({"group_id": *rng.pick(&["g0", "g1", "g2"])}),
            _ => json!({"user_email": rng.pick(&emails)}),
        };
        if rng.chance(0.25) {
            body["clear_add_on_credit_cap"] = json!(true);
        } else {
            body["set_add_on_credit_cap"] = json!(*rng.pick(&[0, 1, 3, 20, 50, 100, 500]));
        }
        let when = format!("seed {seed}, {}, step {step}: {body}", store.name());
        let before = all_credits(&client, &base, &read).await;
        let (status, rows) = preview(&client, &base, &read, &body, 1 + rng.below(3)).await;
        assert_eq!(status, 200, "{when}: {rows}");
        // Nothing changed by the preview.
        assert_eq!(all_credits(&client, &base, &read).await, before, "{when}");
        let mut set = body.clone();
        set["service_key"] = json!(server.key);
        let r = client
            .post(format!("{base}/api/v1/UsageConfig"))
            .json(&set)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{when}");
        let after = all_credits(&client, &base, &read).await;
        let differs = |b: &Value, a: &Value| {
            ["add_on_credit_cap", "cap_source", "has_access"]
                .iter()
                .any(|k| b.get(k) != a.get(k))
        };
        let want: Vec<Value> = before
            .iter()
            .zip(&after)
            .filter(|(b, a)| differs(b, a))
            .map(|(b, a)| json!({"email": b["email"], "before": b, "after": a}))
            .collect();
        shown += want.len();
        assert_eq!(rows, Value::Array(want), "{when}");
    }
    assert!(shown > 0, "seed {seed}: no step changed anyone");
    // Errors: a group the team lacks, a bad body, no key, a GET.
    let (status, v) = preview(
        &client,
        &base,
        &read,
        &json!({"group_id": "g-none", "set_add_on_credit_cap": 1}),
        10,
    )
    .await;
    assert_eq!(
        (status, v["code"].as_str()),
        (404, Some("not_found")),
        "{v}"
    );
    let (status, v) = preview(&client, &base, &read, &json!({"team_level": true}), 10).await;
    assert_eq!(
        (status, v["details"][0]["rule"].as_str()),
        (400, Some("action")),
        "{v}"
    );
    let res = client
        .post(format!("{base}/api/v2/caps/preview"))
        .json(&json!({"team_level": true, "set_add_on_credit_cap": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 401);
    let res = client
        .get(format!("{base}/api/v2/caps/preview"))
        .header("authorization", format!("Bearer {read}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (
            res.status().as_u16(),
            res.headers()["allow"].to_str().unwrap()
        ),
        (405, "POST")
    );
}

on_every_store!(preview_equals_the_change_applied);

/// A write is in the credits of the instance that acknowledged it at once, and in those
/// of another instance on the same store in every read that starts a second after the
/// acknowledgement (contract section 12): runs by `Ingest`, a cap by `UsageConfig`, the
/// prompt credits per seat by a `billing` record.
async fn writes_show_in_the_next_check(store: TestStore) {
    let server = TestServer::start(store, fast_config(), async |s| {
        add_team(s, "fresh", Plan::Enterprise).await
    })
    .await;
    let now = Timestamp::now().0;
    let t = Team {
        users: [("a@t.example".to_string(), ("key-a".to_string(), vec![]))].into(),
        groups: BTreeSet::new(),
        team_cap: None,
        group_caps: BTreeMap::new(),
        user_caps: BTreeMap::new(),
        runs: vec![],
        start: (now - DAY) / 1_000_000 * 1_000_000,
        end: (now + DAY) / 1_000_000 * 1_000_000,
        per_seat: 5,
    };
    write(&server, &server.team, &t).await;
    // Another instance, where the store has one (the memory store is one process's).
    let other = if store.durable() {
        let s = usage_server::store::open_with(
            &server.spec,
            usage_server::store::CacheConfig {
                bytes: 1 << 30,
                wait_for_load: false,
            },
        )
        .await
        .unwrap();
        let h = usage_server::http::spawn(s, fast_config(), "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        Some(h)
    } else {
        None
    };
    let client = reqwest::Client::new();
    let key = server.key.clone();
    let check = |base: String| {
        let (client, key) = (client.clone(), key.clone());
        async move {
            get(
                &client,
                &format!("{base}/api/v2/credits/users/a@t.example"),
                &key,
            )
            .await
            .1
        }
    };
    let post = |op: &str, mut body: Value| {
        let (client, key, base) = (client.clone(), key.clone(), server.server.url());
        let op = op.to_string();
        async move {
            body["service_key"] = json!(key);
            let r = client
                .post(format!("{base}/api/v1/{op}"))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 200, "{op} {body}");
        }
    };
    let run = |i: usize, flex: i64| {
        json!({"kind": "agent_runs", "records": [{"id": format!("f{i}"), "api_key": "key-a",
            "timestamp": Timestamp(now - 1_000_000).to_rfc3339(), "ide_type": "editor",
            "model": "m", "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT", "messages_sent": 1,
            "agent_id": "a", "prompts_used": 1, "flex_credits_used": flex}]})
    };
    let writes: Vec<(Value, &str, &str, Value)> = vec![
        (run(1, 150), "Ingest", "add_on_credits_used", json!("1.50")),
        (
            json!({"user_email": "a@t.example", "set_add_on_credit_cap": 2}),
            "UsageConfig",
            "remaining_add_on_credits",
            json!("0.50"),
        ),
        (run(2, 100), "Ingest", "has_access", json!(false)),
        (
            json!({"kind": "billing", "records": [{"prompt_credits_per_seat": 9}]}),
            "Ingest",
            "prompt_credits_per_seat",
            json!(9),
        ),
        (
            json!({"user_email": "a@t.example", "clear_add_on_credit_cap": true}),
            "UsageConfig",
            "has_access",
            json!(true),
        ),
    ];
    for (body, op, field, want) in writes {
        post(op, body.clone()).await;
        let acked = std::time::Instant::now();
        let got = check(server.server.url()).await;
        assert_eq!(
            got[field],
            want,
            "{}: {op} {body}: this instance: {got}",
            store.name()
        );
        if let Some(h) = &other {
            loop {
                let started = acked.elapsed();
                let got = check(h.url()).await;
                if got[field] == want {
                    break;
                }
                assert!(
                    started < std::time::Duration::from_secs(1),
                    "{}: {op} {body}: another instance answered {got} in a read that started {started:?} after the acknowledgement",
                    store.name()
                );
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
    if let Some(h) = other {
        h.shutdown().await;
    }
}

on_every_store!(writes_show_in_the_next_check);
