//! One conformance suite for every store: each function takes a fresh, empty store and
//! panics on the first difference from the expected behaviour. The memory, SQLite
//! (`sqlite/tests.rs`) and PostgreSQL (`postgres/tests.rs`) stores run it in their tests;
//! a new store runs it too.

pub mod webhooks;

use serde_json::json;
use usage_core::JsonPath;
use usage_core::credits::Caps;
use usage_core::load::{Batch, Record, parse_record};
use usage_core::plan::{AnalyticsPlan, CapAction, CapScope, Limits};
use usage_core::schema::records::{self, RecordKind};
use usage_core::schema::{Permission, Plan};
use usage_core::time::Timestamp;
use usage_core::validate;
use usage_core::wire::AnalyticsRequest;
use usage_core::wire::decode::decode;

use super::{Billing, Change, KeyRecord, NewTeam, Store, StoreError, effective_cap};

fn now() -> Timestamp {
    Timestamp::parse_rfc3339("2025-05-20T10:00:00Z").expect("a time")
}

pub(crate) fn batch(kind: &'static RecordKind, values: Vec<serde_json::Value>) -> Batch {
    Batch {
        kind,
        records: values.iter().map(|v| record(kind, v)).collect(),
    }
}

fn record(kind: &'static RecordKind, v: &serde_json::Value) -> Record {
    parse_record(kind, v, &JsonPath::root()).expect("a valid record")
}

fn sum_plan(group: Option<&str>) -> AnalyticsPlan {
    let mut body = json!({"query_requests": [{
        "data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [
            {"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"},
            {"field": "distinct_users", "aggregation_function": "QUERY_AGGREGATION_COUNT"}
        ]
    }]});
    if let Some(g) = group {
        body["group_name"] = json!(g);
    }
    let d = decode::<AnalyticsRequest>(body.to_string().as_bytes()).expect("kinds");
    validate::with_decoded(&d, |r, _| validate::analytics(r, &Limits::default())).expect("valid")
}

pub(crate) async fn totals(
    s: &dyn Store,
    team: &str,
    group: Option<&str>,
) -> Result<(String, String), StoreError> {
    let r = s
        .analytics(team, &sum_plan(group), &Limits::default())
        .await?;
    let item = &r.query_results[0].response_items[0].item;
    Ok((
        item.get("sum_num_acceptances").unwrap_or("").to_string(),
        item.get("count_distinct_users").unwrap_or("").to_string(),
    ))
}

pub(crate) async fn team(s: &dyn Store, name: &str, plan: Plan) -> String {
    s.create_team(
        NewTeam {
            name: name.into(),
            plan,
            seats: 5,
            credits_per_seat: 100,
            unique_name: false,
        },
        "-",
        now(),
    )
    .await
    .expect("team created")
    .id
}

fn auto(key: &str, hour: &str, n: i64) -> serde_json::Value {
    json!({"api_key": key, "hour": hour, "language": "PYTHON", "ide": "vscode", "version": "1.0",
           "num_acceptances": n, "num_lines_accepted": 1, "num_bytes_accepted": 2})
}

async fn people(s: &dyn Store, team: &str) {
    s.ingest(
        team,
        batch(
            &records::GROUPS,
            vec![
                json!({"group_id": "g1", "group_name": "one"}),
                json!({"group_id": "g2", "group_name": "two"}),
            ],
        ),
        now(),
    )
    .await
    .expect("groups");
    s.ingest(
        team,
        batch(
            &records::USERS,
            vec![
                json!({"email": "a@x", "name": "A", "api_key": "ka", "groups": ["g1", "g2"]}),
                json!({"email": "b@x", "name": "B", "api_key": "kb", "groups": ["g2"]}),
            ],
        ),
        now(),
    )
    .await
    .expect("users");
}

/// Keys: stored by hash, found while active, refused once revoked; unknown ids and teams
/// are errors.
pub async fn keys(s: &dyn Store) {
    let t = team(s, "t", Plan::Enterprise).await;
    let hash = crate::auth::hash_key("usk_conformance");
    s.insert_key(
        KeyRecord {
            key_id: "key_1".into(),
            team_id: t.clone(),
            name: Some("n".into()),
            hash,
            permissions: vec![Permission::AnalyticsRead, Permission::BillingWrite],
            created: now(),
        },
        "-",
    )
    .await
    .expect("key stored");
    let k = s.key_by_hash(&hash).await.expect("lookup").expect("found");
    assert_eq!(
        (k.key_id.as_str(), k.team_id.as_str()),
        ("key_1", t.as_str())
    );
    assert_eq!(
        k.permissions,
        [Permission::AnalyticsRead, Permission::BillingWrite]
    );
    assert_eq!(
        s.key_by_hash(&crate::auth::hash_key("usk_other"))
            .await
            .expect("lookup"),
        None
    );
    s.revoke_key("key_1", "-").await.expect("revoked");
    assert_eq!(s.key_by_hash(&hash).await.expect("lookup"), None);
    assert_eq!(
        s.revoke_key("key_nope", "-").await,
        Err(StoreError::UnknownKey("key_nope".into()))
    );
    let err = s
        .insert_key(
            KeyRecord {
                key_id: "key_2".into(),
                team_id: "team_nope".into(),
                name: None,
                hash: crate::auth::hash_key("usk_2"),
                permissions: vec![Permission::TeamsRead],
                created: now(),
            },
            "-",
        )
        .await;
    assert_eq!(err, Err(StoreError::UnknownTeam("team_nope".into())));
    let teams = s.teams().await.expect("teams");
    assert_eq!(teams.len(), 1);
    assert_eq!(teams[0].name, "t");

    // The listing: never the hash; the revocation's time. A second revocation changes
    // nothing, in the listing or in the log.
    let listed = s.keys(&t).await.expect("keys");
    assert_eq!(listed.len(), 1);
    let revoked = listed[0].revoked.expect("revoked");
    assert_eq!(
        (&listed[0].key_id, &listed[0].name, listed[0].created),
        (&"key_1".to_string(), &Some("n".to_string()), now())
    );
    assert_eq!(
        listed[0].permissions,
        [Permission::AnalyticsRead, Permission::BillingWrite]
    );
    s.revoke_key("key_1", "k9").await.expect("revoked again");
    assert_eq!(s.keys(&t).await.expect("keys")[0].revoked, Some(revoked));
    assert_eq!(s.keys("team_nope").await.expect("keys"), Vec::new());
    let log = s.audit(&t).await.expect("log");
    let got: Vec<(&str, serde_json::Value)> = log
        .iter()
        .map(|e| {
            let v = e.to_json(None);
            (
                e.key_id.as_str(),
                serde_json::json!([v["action"], v["scope"], v["new"]]),
            )
        })
        .collect();
    let mut state = serde_json::json!({"name": "t"});
    if let (serde_json::Value::Object(out), serde_json::Value::Object(b)) = (
        &mut state,
        crate::store::Billing::new(Plan::Enterprise, 5, 100, now()).to_json(),
    ) {
        out.extend(b);
    }
    assert_eq!(
        got,
        [
            (
                "-",
                serde_json::json!(["team.create", format!("team:{t}"), state])
            ),
            (
                "-",
                serde_json::json!(["key.create", "key:key_1",
                    {"name": "n", "permissions": ["analytics-read", "billing-write"]}])
            ),
            ("-", serde_json::json!(["key.revoke", "key:key_1", null])),
        ]
    );
    assert_eq!(
        log[2].to_json(None)["old"],
        serde_json::json!({"name": "n", "permissions": ["analytics-read", "billing-write"]})
    );
}

/// Records: upserts by identity, queries scoped to the team, group restriction, the
/// `api_key` uniqueness rule, and importing the same batch twice changes nothing.
pub async fn records_per_team(s: &dyn Store) {
    let a = team(s, "a", Plan::Enterprise).await;
    let b = team(s, "b", Plan::Enterprise).await;
    people(s, &a).await;
    let rows = vec![
        auto("ka", "2025-05-01T10:00:00Z", 3),
        auto("kb", "2025-05-01T11:00:00Z", 4),
        auto("kz", "2025-05-01T12:00:00Z", 5),
    ];
    for _ in 0..2 {
        let n = s
            .ingest(&a, batch(&records::AUTOCOMPLETE, rows.clone()), now())
            .await
            .expect("ingest");
        assert_eq!(n, 3);
    }
    assert_eq!(
        totals(s, &a, None).await.expect("q"),
        ("12".into(), "3".into())
    );
    assert_eq!(
        totals(s, &a, Some("one")).await.expect("q"),
        ("3".into(), "1".into())
    );
    assert_eq!(
        totals(s, &a, Some("two")).await.expect("q"),
        ("7".into(), "2".into())
    );
    assert!(matches!(
        totals(s, &a, Some("three")).await,
        Err(StoreError::Eval(
            usage_core::eval::EvalError::GroupNotFound(_)
        ))
    ));
    // Team b sees none of a's data.
    assert_eq!(
        totals(s, &b, None).await.expect("q"),
        ("0".into(), "0".into())
    );
    assert!(totals(s, &b, Some("one")).await.is_err());
    assert!(s.has_group_id(&a, "g1").await.expect("q"));
    assert!(!s.has_group_id(&b, "g1").await.expect("q"));
    assert!(s.has_user(&a, "a@x").await.expect("q"));
    assert!(!s.has_user(&b, "a@x").await.expect("q"));
    assert_eq!(s.groups_of(&a, "a@x").await.expect("q"), ["g1", "g2"]);
    assert!(s.groups_of(&b, "a@x").await.expect("q").is_empty());
    // A replaced record counts once.
    s.ingest(
        &a,
        batch(
            &records::AUTOCOMPLETE,
            vec![auto("ka", "2025-05-01T10:00:00Z", 10)],
        ),
        now(),
    )
    .await
    .expect("ingest");
    assert_eq!(totals(s, &a, None).await.expect("q").0, "19");
    // Another user may not take an api_key.
    let err = s
        .ingest(
            &a,
            batch(
                &records::USERS,
                vec![json!({"email": "c@x", "name": "C", "api_key": "ka"})],
            ),
            now(),
        )
        .await;
    match err {
        Err(StoreError::Invalid(v)) => {
            assert_eq!(v[0].path(), "records[0].api_key");
            assert_eq!(v[0].rule().as_str(), "invalid_value");
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    assert!(!s.has_user(&a, "c@x").await.expect("q"));
    // The same api_key in another team is fine.
    people(s, &b).await;
    assert!(s.has_user(&b, "a@x").await.expect("q"));
    let up = s
        .user_page(
            &b,
            &validate::user_page(&Default::default()).expect("an empty request is valid"),
        )
        .await
        .expect("q");
    assert_eq!(up.user_table_stats.len(), 2);
    assert_eq!(up.user_table_stats[0].active_days, 0);
}

/// Import: all or nothing; a bad record in the stream writes nothing.
pub async fn import_all_or_nothing(s: &dyn Store) {
    let a = team(s, "a", Plan::Enterprise).await;
    let good: Vec<Result<Record, ()>> = (0..5)
        .map(|h| {
            Ok(record(
                &records::AUTOCOMPLETE,
                &auto("k", &format!("2025-05-01T0{h}:00:00Z"), 1),
            ))
        })
        .collect();
    let mut bad = good.clone();
    bad.insert(2, Err(()));
    let r = s
        .import(&a, &records::AUTOCOMPLETE, Box::new(bad.into_iter()), now())
        .await
        .expect("import");
    assert_eq!(r, None);
    assert_eq!(totals(s, &a, None).await.expect("q").0, "0");
    let r = s
        .import(
            &a,
            &records::AUTOCOMPLETE,
            Box::new(good.into_iter()),
            now(),
        )
        .await
        .expect("import");
    assert_eq!(r, Some(5));
    assert_eq!(totals(s, &a, None).await.expect("q").0, "5");
    let r = s
        .import(
            "team_nope",
            &records::AUTOCOMPLETE,
            Box::new(std::iter::empty()),
            now(),
        )
        .await;
    assert_eq!(r, Err(StoreError::UnknownTeam("team_nope".into())));
}

/// Caps: exact-scope reads, 0 is a cap, clearing an unset cap succeeds, every change is
/// audited, and the effective cap follows user > min(groups) > team.
pub async fn caps(s: &dyn Store) {
    let a = team(s, "a", Plan::Enterprise).await;
    let b = team(s, "b", Plan::Enterprise).await;
    people(s, &a).await;
    let user = CapScope::User("a@x".into());
    assert_eq!(s.cap(&a, &CapScope::Team).await.expect("q"), None);
    assert_eq!(effective_cap(s, &a, "a@x").await.expect("q"), None);
    s.change_cap(&a, &CapScope::Team, CapAction::Set(50), "k1", now())
        .await
        .expect("set");
    assert_eq!(
        effective_cap(s, &a, "a@x").await.expect("q"),
        Some((50, "team".into()))
    );
    assert_eq!(
        effective_cap(s, &a, "nobody@x").await.expect("q"),
        Some((50, "team".into()))
    );
    s.change_cap(
        &a,
        &CapScope::Group("g2".into()),
        CapAction::Set(30),
        "k1",
        now(),
    )
    .await
    .expect("set");
    s.change_cap(
        &a,
        &CapScope::Group("g1".into()),
        CapAction::Set(30),
        "k1",
        now(),
    )
    .await
    .expect("set");
    assert_eq!(
        effective_cap(s, &a, "a@x").await.expect("q"),
        Some((30, "group:g1".into()))
    );
    assert_eq!(
        effective_cap(s, &a, "b@x").await.expect("q"),
        Some((30, "group:g2".into()))
    );
    s.change_cap(&a, &user, CapAction::Set(0), "k2", now())
        .await
        .expect("set");
    assert_eq!(s.cap(&a, &user).await.expect("q"), Some(0));
    assert_eq!(
        effective_cap(s, &a, "a@x").await.expect("q"),
        Some((0, "user".into()))
    );
    // Every cap of the team at once; none of another team's.
    let mut all = Caps::default();
    all.set(&CapScope::Team, Some(50));
    all.set(&CapScope::Group("g1".into()), Some(30));
    all.set(&CapScope::Group("g2".into()), Some(30));
    all.set(&user, Some(0));
    assert_eq!(s.caps(&a).await.expect("q"), all);
    assert_eq!(s.caps(&b).await.expect("q"), Caps::default());
    s.change_cap(&a, &user, CapAction::Clear, "k2", now())
        .await
        .expect("clear");
    s.change_cap(&a, &user, CapAction::Clear, "k2", now())
        .await
        .expect("clear unset");
    assert_eq!(s.cap(&a, &user).await.expect("q"), None);
    // Team b has no caps.
    assert_eq!(s.cap(&b, &CapScope::Team).await.expect("q"), None);
    let created = |log: &[super::AuditEntry]| {
        matches!(
            log.first().map(|e| &e.change),
            Some(Change::Admin {
                action: super::AdminAction::TeamCreate,
                ..
            })
        )
    };
    let log_b = s.audit(&b).await.expect("q");
    assert!(log_b.len() == 1 && created(&log_b), "{log_b:?}");
    let log = s.audit(&a).await.expect("q");
    assert!(created(&log), "{log:?}");
    let got: Vec<_> = log[1..]
        .iter()
        .map(|e| match &e.change {
            Change::Cap { scope, old, new } => (e.key_id.as_str(), scope.label(), *old, *new),
            other => panic!("not a cap change: {other:?}"),
        })
        .collect();
    assert_eq!(
        got,
        [
            ("k1", "team".to_string(), None, Some(50)),
            ("k1", "group:g2".to_string(), None, Some(30)),
            ("k1", "group:g1".to_string(), None, Some(30)),
            ("k2", "user:a@x".to_string(), None, Some(0)),
            ("k2", "user:a@x".to_string(), Some(0), None),
            ("k2", "user:a@x".to_string(), None, None),
        ]
    );
    assert_eq!(log[0].time, now());
}

/// Billing: `team create` sets plan, seats, credits and a first cycle; `billing`
/// records change only the fields they have, and each change is in the audit log with
/// the key that made it (`import`: the import's actor) and both states; a write that
/// changes nothing is not.
pub async fn billing(s: &dyn Store) {
    let a = team(s, "a", Plan::Teams).await;
    let b0 = s.billing(&a).await.expect("q");
    assert_eq!(
        (b0.plan, b0.num_seats, b0.prompt_credits_per_seat),
        (Plan::Teams, 5, 100)
    );
    assert_eq!(b0.cycle_start.to_rfc3339(), "2025-05-20T00:00:00Z");
    assert_eq!(b0.cycle_end.to_rfc3339(), "2025-06-20T00:00:00Z");
    s.ingest(
        &a,
        batch(
            &records::BILLING,
            vec![json!({"plan": "enterprise", "add_on_credits_available": 70})],
        ),
        now(),
    )
    .await
    .expect("billing");
    let b1 = s.billing(&a).await.expect("q");
    assert_eq!(
        (b1.plan, b1.num_seats, b1.add_on_credits_available),
        (Plan::Enterprise, 5, 70)
    );
    assert_eq!(b1.cycle_start, b0.cycle_start);
    assert_eq!(
        s.billing("team_nope").await,
        Err(StoreError::UnknownTeam("team_nope".into()))
    );
    let seats = |n: i64| batch(&records::BILLING, vec![json!({"num_seats": n})]);
    s.ingest_by(&a, seats(9), "key_b", now())
        .await
        .expect("billing");
    s.ingest_by(&a, seats(9), "key_c", now())
        .await
        .expect("the same again");
    let stream: super::RecordStream = Box::new(seats(12).records.into_iter().map(Ok));
    s.import(&a, &records::BILLING, stream, now())
        .await
        .expect("import");
    let b3 = s.billing(&a).await.expect("q");
    let log = s.audit(&a).await.expect("q");
    let log = &log[1..];
    let want = [
        ("-", b0, b1),
        ("key_b", b1, Billing { num_seats: 9, ..b1 }),
        (super::IMPORT_ACTOR, Billing { num_seats: 9, ..b1 }, b3),
    ];
    let got: Vec<(&str, Billing, Billing)> = log
        .iter()
        .map(|e| match &e.change {
            Change::Billing { old, new } => (e.key_id.as_str(), *old, *new),
            other => panic!("not a billing change: {other:?}"),
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(b3.num_seats, 12);
    assert_eq!(log[1].time, now());
    let entry = log[1].to_json(None);
    assert_eq!(entry["action"], "billing.change");
    assert_eq!(entry["scope"], "billing");
    assert_eq!(entry["old"]["num_seats"], 5);
    assert_eq!(entry["new"]["num_seats"], 9);
}

/// Identities at the longest the validator accepts (every text field of an identity at
/// 1,024 bytes, in 1- to 4-byte characters) are stored, told apart by their last byte, and
/// replaced by a later record with the same identity (contract section 11: what a store
/// accepted, it keeps and indexes).
pub async fn long_identities(s: &dyn Store) {
    use usage_core::load::MAX_TEXT_BYTES;
    let t = team(s, "long", Plan::Teams).await;
    // 1,024 bytes each, of 4-, 3-, 2- and 1-byte characters, varied so that PostgreSQL
    // cannot compress them under its index row limit (about 2.7 KB).
    let text = |width: usize, base: u32, span: u32, seed: u32| -> String {
        let mut x = seed;
        let mut s: String = (0..MAX_TEXT_BYTES / width)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                char::from_u32(base + (x >> 16) % span).expect("a scalar value")
            })
            .collect();
        s.push_str(&"a".repeat(MAX_TEXT_BYTES - s.len()));
        s
    };
    let key = text(4, 0x1F300, 0x200, 1);
    let language = text(3, 0x4E00, 0x5000, 2);
    let ide = text(2, 0x0400, 0x100, 3);
    let version = |last: char| format!("{}{last}", &text(1, 0x21, 0x5E, 4)[1..]);
    for v in [&key, &language, &ide, &version('0')] {
        assert_eq!(v.len(), MAX_TEXT_BYTES);
    }
    let rec = |version: String, n: i64| {
        json!({"api_key": key, "hour": "2025-05-01T10:00:00Z", "language": language, "ide": ide,
               "version": version, "num_acceptances": n, "num_lines_accepted": 1,
               "num_bytes_accepted": 2})
    };
    let first = batch(
        &records::AUTOCOMPLETE,
        vec![rec(version('0'), 1), rec(version('1'), 10)],
    );
    assert_eq!(s.ingest(&t, first, now()).await.expect("stored"), 2);
    assert_eq!(
        totals(s, &t, None).await.expect("read"),
        ("11".into(), "1".into())
    );
    // The same identity again replaces the record; the other one stays.
    let again = batch(&records::AUTOCOMPLETE, vec![rec(version('0'), 100)]);
    assert_eq!(s.ingest(&t, again, now()).await.expect("stored"), 1);
    assert_eq!(
        totals(s, &t, None).await.expect("read"),
        ("110".into(), "1".into())
    );
    let tool = |n: i64| {
        json!({"api_key": key, "day": "2025-05-01", "ide_type": "editor",
               "tool": language, "count": n})
    };
    let b = batch(&records::AGENT_TOOL_USAGE, vec![tool(3)]);
    assert_eq!(s.ingest(&t, b, now()).await.expect("stored"), 1);
    let b = batch(&records::AGENT_TOOL_USAGE, vec![tool(4)]);
    assert_eq!(s.ingest(&t, b, now()).await.expect("stored"), 1);
}

/// A creation with `unique_name` is refused when a team of the name exists (naming the
/// oldest); without it the name may repeat; eight at once with it make one team.
pub async fn team_names(s: &dyn Store) {
    let new = |name: &str, unique_name| NewTeam {
        name: name.into(),
        plan: Plan::Enterprise,
        seats: 1,
        credits_per_seat: 1,
        unique_name,
    };
    let a = s
        .create_team(new("acme", true), "-", now())
        .await
        .expect("created");
    match s.create_team(new("acme", true), "-", now()).await {
        Err(StoreError::NameTaken { name, id }) => {
            assert_eq!((name, id), ("acme".into(), a.id.clone()))
        }
        other => panic!("{other:?}"),
    }
    let b = s
        .create_team(new("acme", false), "-", now())
        .await
        .expect("a second acme");
    assert_ne!(a.id, b.id);
    let at_once = futures_util::future::join_all(
        (0..8).map(|_| s.create_team(new("zeta", true), "-", now())),
    )
    .await;
    assert_eq!(at_once.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(
        at_once
            .iter()
            .all(|r| matches!(r, Ok(_) | Err(StoreError::NameTaken { .. })))
    );
    let mut names: Vec<String> = s
        .teams()
        .await
        .expect("teams")
        .into_iter()
        .map(|t| t.name)
        .collect();
    names.sort();
    assert_eq!(names, ["acme", "acme", "zeta"]);
}

/// A closed store answers `Unavailable`.
pub async fn close(s: &dyn Store) {
    s.health().await.expect("healthy");
    s.close().await.expect("closed");
    assert!(matches!(s.health().await, Err(StoreError::Unavailable(_))));
    assert!(matches!(s.teams().await, Err(StoreError::Unavailable(_))));
}

/// Runs every check, each on a fresh store from `fresh`.
pub async fn run_all<F, Fut>(fresh: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = std::sync::Arc<dyn Store>>,
{
    keys(fresh().await.as_ref()).await;
    records_per_team(fresh().await.as_ref()).await;
    import_all_or_nothing(fresh().await.as_ref()).await;
    caps(fresh().await.as_ref()).await;
    billing(fresh().await.as_ref()).await;
    long_identities(fresh().await.as_ref()).await;
    team_names(fresh().await.as_ref()).await;
    close(fresh().await.as_ref()).await;
}
