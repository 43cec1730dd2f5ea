//! The admin commands (section 10) against a SQLite store, alone and beside a server.

use std::io::Write;
use std::process::Stdio;

use serde_json::{Value, json};

use crate::process::{Server, admin, cmd, fixture, new_key, ok};

fn auto(i: usize, n: i64) -> String {
    json!({"api_key": "k1", "hour": format!("2025-05-01T{:02}:00:00Z", i % 24), "language": format!("L{}", i / 24),
           "ide": "vscode", "version": "1", "num_acceptances": n, "num_lines_accepted": 0, "num_bytes_accepted": 0})
    .to_string()
}

#[test]
fn admin_commands_print_one_json_object_or_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("a.db").display());
    assert_eq!(ok(&store, &["migrate"]), json!({"migrations_applied": 3}));
    assert_eq!(ok(&store, &["migrate"]), json!({"migrations_applied": 0}));
    // The store can come from USAGE_STORE too.
    let out = std::process::Command::new(crate::process::BIN)
        .env("USAGE_STORE", &store)
        .arg("migrate")
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        r#"{"migrations_applied":0}"#
    );
    let team = ok(
        &store,
        &["team", "create", "--name", "X", "--plan", "teams"],
    )["team_id"]
        .as_str()
        .unwrap()
        .to_string();
    let k = ok(
        &store,
        &[
            "key",
            "create",
            "--team",
            &team,
            "--permissions",
            "billing-read",
            "--name",
            "ci",
        ],
    );
    assert!(k["service_key"].as_str().unwrap().starts_with("usk_"));
    let key_id = k["key_id"].as_str().unwrap();
    assert_eq!(
        ok(&store, &["key", "revoke", "--key-id", key_id]),
        json!({"key_id": key_id, "revoked": true})
    );
    // Failures: exit 1, nothing on stdout, one line on stderr.
    for args in [
        vec!["key", "revoke", "--key-id", "key_nope"],
        vec![
            "key",
            "create",
            "--team",
            "team_nope",
            "--permissions",
            "billing-read",
        ],
        vec!["audit", "--team", "team_nope"],
        vec!["import", "--team", &team, "--kind", "nope", "-"],
    ] {
        let (code, out, err) = admin(&store, &args);
        assert_eq!((code, out.as_str()), (1, ""), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    let (code, out, _) = admin("postgres://localhost/x", &["migrate"]);
    assert_eq!((code, out.as_str()), (1, ""));
    // Bad flags: clap's usage, exit 2.
    for args in [
        vec!["team", "create"],
        vec!["team", "create", "--name", "x", "--plan", "gold"],
        vec![
            "key",
            "create",
            "--team",
            &team,
            "--permissions",
            "billing-read,admin",
        ],
        vec!["frobnicate"],
        vec!["serve", "--listen", "nope"],
    ] {
        let (code, out, err) = admin(&store, &args);
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}");
        assert!(err.starts_with("error:"), "{err}");
    }
}

#[test]
fn import_is_all_or_nothing_and_reports_lines() {
    let f = fixture();
    let file = f._dir.path().join("bad.jsonl");
    let mut lines: Vec<String> = (0..30).map(|i| auto(i, 1)).collect();
    lines[1] = r#"{"api_key": "k1"}"#.to_string();
    lines[4] = "not json".to_string();
    lines.insert(2, String::new());
    std::fs::write(&file, lines.join("\n")).unwrap();
    let (code, out, err) = admin(
        &f.store,
        &[
            "import",
            "--team",
            &f.team,
            "--kind",
            "autocomplete",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!((code, out.as_str()), (1, ""));
    let err: Vec<&str> = err.lines().collect();
    assert!(err[0].contains("2 bad autocomplete record(s)"), "{err:?}");
    assert!(
        err[1].starts_with("line 2: hour: missing_field: "),
        "{err:?}"
    );
    assert!(
        err.iter()
            .any(|l| l.starts_with("line 6: (record): malformed_json: ")),
        "{err:?}"
    );
    // At most 20 lines follow the summary, however many violations there are.
    let many = f._dir.path().join("many.jsonl");
    std::fs::write(&many, "{\"api_key\": 5, \"bogus\": 1}\n".repeat(30)).unwrap();
    let (code, out, err) = admin(
        &f.store,
        &[
            "import",
            "--team",
            &f.team,
            "--kind",
            "autocomplete",
            many.to_str().unwrap(),
        ],
    );
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(
        err.lines()
            .next()
            .unwrap()
            .contains("30 bad autocomplete record(s)"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 21, "{err}");
    assert!(
        err.lines().skip(1).all(|l| l.starts_with("line 1:")
            || l.starts_with("line 2:")
            || l.starts_with("line 3:")),
        "{err}"
    );
    // Nothing was written: a good import of 24 lines counts them all afresh.
    let good = f._dir.path().join("good.jsonl");
    std::fs::write(
        &good,
        (0..24).map(|i| auto(i, 2)).collect::<Vec<_>>().join("\n") + "\n",
    )
    .unwrap();
    assert_eq!(
        ok(
            &f.store,
            &[
                "import",
                "--team",
                &f.team,
                "--kind",
                "autocomplete",
                good.to_str().unwrap()
            ]
        ),
        json!({"kind": "autocomplete", "records": 24})
    );
    // From stdin.
    let mut child = cmd(&f.store)
        .args(["import", "--team", &f.team, "--kind", "groups", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"group_id\":\"g1\",\"group_name\":\"one\"}\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(),
        json!({"kind": "groups", "records": 1})
    );
}

#[tokio::test]
async fn admin_changes_reach_a_running_server() {
    let f = fixture();
    let s = Server::start(&f.store, &[], &f.log);
    let total = || {
        json!({"service_key": f.key, "query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}]}]})
    };
    let (st, v) = s.post("Analytics", total()).await;
    assert_eq!(
        (
            st,
            &v["queryResults"][0]["responseItems"][0]["item"]["sum_num_acceptances"]
        ),
        (200, &json!("0"))
    );
    let file = f._dir.path().join("a.jsonl");
    std::fs::write(
        &file,
        (0..48).map(|i| auto(i, 3)).collect::<Vec<_>>().join("\n"),
    )
    .unwrap();
    ok(
        &f.store,
        &[
            "import",
            "--team",
            &f.team,
            "--kind",
            "autocomplete",
            file.to_str().unwrap(),
        ],
    );
    // Seen within 5 s (the server polls every 250 ms); poll a bounded number of times.
    let mut seen = false;
    for _ in 0..100 {
        let (_, v) = s.post("Analytics", total()).await;
        if v["queryResults"][0]["responseItems"][0]["item"]["sum_num_acceptances"] == "144" {
            seen = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(seen, "the import never reached the server");
    // A key made by the CLI works at once; revoked, it is refused.
    let k = new_key(&f.store, &f.team, "billing-read");
    let key = k["service_key"].as_str().unwrap();
    let (st, _) = s
        .post(
            "GetUsageConfig",
            json!({"service_key": key, "team_level": true}),
        )
        .await;
    assert_eq!(st, 200);
    ok(
        &f.store,
        &["key", "revoke", "--key-id", k["key_id"].as_str().unwrap()],
    );
    // The server caches keys and checks the store's change counter every 250 ms
    // (docs/decisions.md); bounded retries, the latency is measured in hotpath.rs.
    let mut refused = (0, None);
    for _ in 0..100 {
        let (st, v) = s
            .post(
                "GetUsageConfig",
                json!({"service_key": key, "team_level": true}),
            )
            .await;
        refused = (st, v["code"].as_str().map(str::to_string));
        if st == 401 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(refused, (401, Some("unauthenticated".to_string())));
    // Caps set over HTTP show in the audit log and the effective cap.
    ok(
        &f.store,
        &["import", "--team", &f.team, "--kind", "users", "-"],
    );
    let (st, _) = s
        .post(
            "UsageConfig",
            json!({"service_key": f.key, "team_level": true, "set_add_on_credit_cap": 40}),
        )
        .await;
    assert_eq!(st, 200);
    // The cap change is the log's last entry, after the team's creation and its key.
    let log = json_lines(&f.store, &["audit", "--team", &f.team]);
    let line = log.last().unwrap();
    assert_eq!(line["action"], "cap.change");
    assert_eq!(
        (
            line["scope"].as_str(),
            line["old"].clone(),
            line["new"].clone()
        ),
        (Some("team"), json!(null), json!(40))
    );
    assert!(line["key_id"].as_str().unwrap().starts_with("key_"));
    assert!(line["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        ok(
            &f.store,
            &["effective-cap", "--team", &f.team, "--email", "who@x"]
        ),
        json!({"addOnCreditCap": 40, "source": "team"})
    );
    s.kill9();
}

/// An import of many chunks (the parsers work on 4,096 lines at a time, several at once)
/// reports its bad lines in file order and counts every record.
#[test]
fn a_large_import_reports_bad_lines_in_file_order() {
    let f = fixture();
    let file = f._dir.path().join("large.jsonl");
    let mut lines: Vec<String> = (0..13_000).map(|i| auto(i, 1)).collect();
    for at in [12_000, 4_096, 4_097, 9_001] {
        lines[at] = format!("{{\"bad\": {at}}}");
    }
    std::fs::write(&file, lines.join("\n")).unwrap();
    let path = file.to_str().unwrap();
    let (code, _, err) = admin(
        &f.store,
        &["import", "--team", &f.team, "--kind", "autocomplete", path],
    );
    assert_eq!(code, 1, "{err}");
    let bad_lines: Vec<&str> = err
        .lines()
        .skip(1)
        .map(|l| l.split(':').next().unwrap())
        .collect();
    let mut want: Vec<String> = Vec::new();
    for line in [4_097, 4_098, 9_002, 12_001] {
        // Each bad record has an unknown field and misses every required one.
        want.extend(std::iter::repeat_n(format!("line {line}"), 9));
    }
    want.truncate(20);
    assert_eq!(bad_lines, want, "{err}");
    assert!(
        err.lines()
            .next()
            .unwrap()
            .contains("4 bad autocomplete record(s)"),
        "{err}"
    );
    std::fs::write(
        &file,
        (0..13_000)
            .map(|i| auto(i, 1))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    assert_eq!(
        ok(
            &f.store,
            &["import", "--team", &f.team, "--kind", "autocomplete", path]
        ),
        json!({"kind": "autocomplete", "records": 13_000})
    );
}

/// `backup` copies a store beside its running server; the copy is private, serves the
/// same answers, and is never written over.
#[tokio::test]
async fn backup_copies_a_serving_store() {
    use std::os::unix::fs::PermissionsExt;
    let f = fixture();
    let file = f._dir.path().join("some.jsonl");
    std::fs::write(
        &file,
        (0..50).map(|i| auto(i, 3)).collect::<Vec<_>>().join("\n"),
    )
    .unwrap();
    let path = file.to_str().unwrap();
    ok(
        &f.store,
        &["import", "--team", &f.team, "--kind", "autocomplete", path],
    );
    let s = Server::start(&f.store, &[], &f.log);
    let copy = f._dir.path().join("copy.db");
    let out = ok(&f.store, &["backup", "--to", copy.to_str().unwrap()]);
    assert_eq!(out["backup"], copy.to_str().unwrap());
    assert!(out["bytes"].as_u64().unwrap() > 0, "{out}");
    let mode = std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let (code, _, err) = admin(&f.store, &["backup", "--to", copy.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("exists"), "{err}");
    let (code, _, err) = admin("memory:", &["backup", "--to", "x.db"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("`backup` copies an embedded (sqlite:) store"),
        "{err}"
    );
    drop(s);
    let from_copy = Server::start(&format!("sqlite:{}", copy.display()), &[], &f.log);
    let sum = json!({"service_key": f.key, "query_requests": [{"data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM"}]}]});
    let (st, v) = from_copy.post("Analytics", sum).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        v["queryResults"][0]["responseItems"][0]["item"]["sum_num_acceptances"],
        "150"
    );
}

/// `export` prints what `POST /api/v1/Analytics` answers with `Accept: text/csv` (or
/// NDJSON) on the same store, byte for byte; a request of two queries fails naming the
/// field.
#[tokio::test]
async fn export_prints_the_servers_csv_and_ndjson() {
    let f = fixture();
    let file = f._dir.path().join("rows.jsonl");
    let lines: Vec<String> = (0..40).map(|i| auto(i, 1 + i as i64 % 7)).collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let imported = ok(
        &f.store,
        &[
            "import",
            "--team",
            &f.team,
            "--kind",
            "autocomplete",
            file.to_str().unwrap(),
        ],
    );
    assert_eq!(imported["records"], 40, "{imported}");
    let query = serde_json::json!({"query_requests": [{
        "data_source": "QUERY_DATA_SOURCE_USER_DATA",
        "selections": [{"field": "num_acceptances", "aggregation_function": "QUERY_AGGREGATION_SUM", "name": "accepted"}],
        "aggregations": [{"field": "api_key", "name": "key"}]}]});
    let qfile = f._dir.path().join("q.json");
    std::fs::write(&qfile, query.to_string()).unwrap();
    let s = Server::start(&f.store, &[], &f.log);
    for (format, accept) in [("csv", "text/csv"), ("ndjson", "application/x-ndjson")] {
        let (code, out, err) = admin(
            &f.store,
            &[
                "export",
                "--team",
                &f.team,
                "--query",
                qfile.to_str().unwrap(),
                "--format",
                format,
            ],
        );
        assert_eq!(code, 0, "{err}");
        let mut body = query.clone();
        body["service_key"] = serde_json::json!(f.key);
        let served = reqwest::Client::new()
            .post(format!("{}/api/v1/Analytics", s.base))
            .header("content-type", "application/json")
            .header("accept", accept)
            .body(body.to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(out, served, "{format}");
        // 40 records of one developer, counts 1..=7 in turn.
        assert!(out.contains("155") && out.contains("k1"), "{out}");
    }
    let two = serde_json::json!({"query_requests": [query["query_requests"][0], query["query_requests"][0]]});
    std::fs::write(&qfile, two.to_string()).unwrap();
    let (code, out, err) = admin(
        &f.store,
        &[
            "export",
            "--team",
            &f.team,
            "--query",
            qfile.to_str().unwrap(),
        ],
    );
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("query_requests: too_many"), "{err}");
}

/// `cap set|get|clear` and `credits`: a change is checked as `UsageConfig` checks it,
/// audited as `cli`, and read by a running server; bad flags are usage errors.
#[tokio::test]
async fn caps_and_credits_from_the_command_line() {
    let f = fixture();
    let s = Server::start(&f.store, &[], &f.log);
    let now = usage_core::time::Timestamp::now();
    let at = |days: i64| usage_core::time::Timestamp(now.0 + days * 86_400_000_000).to_rfc3339();
    let lines = [
        (
            "groups",
            json!({"group_id": "g1", "group_name": "One"}).to_string(),
        ),
        (
            "users",
            json!({"email": "a@x", "name": "A", "api_key": "ka", "groups": ["g1"]}).to_string(),
        ),
        (
            "billing",
            json!({"billing_cycle_start": at(-3), "billing_cycle_end": at(3)}).to_string(),
        ),
        (
            "agent_runs",
            json!({"id": "r1", "api_key": "ka", "timestamp": at(-1), "ide_type": "editor",
                   "model": "m", "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT",
                   "messages_sent": 1, "agent_id": "a", "prompts_used": 250,
                   "flex_credits_used": 4000})
            .to_string(),
        ),
    ];
    for (kind, line) in lines {
        let file = f._dir.path().join(format!("{kind}.jsonl"));
        std::fs::write(&file, line).unwrap();
        ok(
            &f.store,
            &[
                "import",
                "--team",
                &f.team,
                "--kind",
                kind,
                file.to_str().unwrap(),
            ],
        );
    }
    let t = f.team.as_str();
    assert_eq!(
        ok(
            &f.store,
            &[
                "cap",
                "set",
                "--team",
                t,
                "--group",
                "g1",
                "--credits",
                "50"
            ]
        ),
        json!({"scope": "group:g1", "old": null, "new": 50})
    );
    assert_eq!(
        ok(&f.store, &["cap", "get", "--team", t, "--group", "g1"]),
        json!({"addOnCreditCap": 50})
    );
    assert_eq!(
        ok(&f.store, &["cap", "get", "--team", t, "--team-level"]),
        json!({})
    );
    let c = ok(&f.store, &["credits", "--team", t, "--email", "a@x"]);
    assert_eq!(
        (
            &c["prompt_credits_used"],
            &c["add_on_credits_used"],
            &c["add_on_credit_cap"],
            &c["cap_source"],
            &c["remaining_add_on_credits"],
            &c["percent_of_cap"],
            &c["has_access"]
        ),
        (
            &json!("2.50"),
            &json!("40.00"),
            &json!(50),
            &json!("group:g1"),
            &json!("10.00"),
            &json!("80.0"),
            &json!(true)
        ),
        "{c}"
    );
    assert_eq!(
        admin(&f.store, &["credits", "--team", t, "--min-percent", "81"]),
        (0, String::new(), String::new())
    );
    // The running server reads the CLI's cap (it checks the store every 250 ms).
    let client = reqwest::Client::new();
    let mut seen = Value::Null;
    for _ in 0..100 {
        seen = client
            .get(format!("{}/api/v2/credits/users/a%40x", s.base))
            .header("authorization", format!("Bearer {}", f.key))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if seen == c {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(seen, c);
    assert_eq!(
        ok(&f.store, &["cap", "clear", "--team", t, "--group", "g1"]),
        json!({"scope": "group:g1", "old": 50, "new": null})
    );
    let keys: Vec<String> = json_lines(&f.store, &["audit", "--team", t])
        .iter()
        .filter(|e| matches!(e["action"].as_str(), Some("cap.change" | "billing.change")))
        .map(|e| e["key_id"].as_str().unwrap().to_string())
        .collect();
    // The billing import, then the two cap changes.
    assert_eq!(keys, ["cli:import", "cli", "cli"]);
    // A group or user the team lacks, an unknown team or user: exit 1, one line.
    for args in [
        vec![
            "cap",
            "set",
            "--team",
            t,
            "--user",
            "nobody@x",
            "--credits",
            "1",
        ],
        vec!["cap", "get", "--team", t, "--group", "g-none"],
        vec!["cap", "clear", "--team", "team_nope", "--team-level"],
        vec!["credits", "--team", t, "--email", "nobody@x"],
        vec!["credits", "--team", "team_nope"],
    ] {
        let (code, out, err) = admin(&f.store, &args);
        assert_eq!((code, out.as_str()), (1, ""), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    // No scope, two scopes, a cap out of range: usage errors.
    for args in [
        vec!["cap", "set", "--team", t, "--credits", "5"],
        vec![
            "cap",
            "set",
            "--team",
            t,
            "--team-level",
            "--group",
            "g1",
            "--credits",
            "5",
        ],
        vec!["cap", "set", "--team", t, "--team-level", "--credits", "-1"],
        vec![
            "cap",
            "set",
            "--team",
            t,
            "--team-level",
            "--credits",
            "1000000001",
        ],
        vec!["credits", "--team", t, "--min-percent", "100001"],
    ] {
        let (code, out, err) = admin(&f.store, &args);
        assert_eq!((code, out.as_str()), (2, ""), "{args:?}");
        assert!(err.starts_with("error:"), "{args:?}: {err}");
    }
    s.kill9();
}

/// The lines of an admin command that must succeed, each as JSON.
pub(crate) fn json_lines(store: &str, args: &[&str]) -> Vec<Value> {
    let (code, out, err) = admin(store, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: {e}: {l}")))
        .collect()
}

/// `cap preview` prints what a change would change and changes nothing; `webhook
/// add|list|remove` follow the rules of `POST /api/v2/webhooks`.
#[test]
fn cap_preview_and_webhooks_from_the_command_line() {
    let f = fixture();
    let t = f.team.as_str();
    let now = usage_core::time::Timestamp::now().to_rfc3339();
    for (kind, line) in [
        (
            "users",
            json!({"email": "a@x", "name": "A", "api_key": "ka"}),
        ),
        (
            "users",
            json!({"email": "b@x", "name": "B", "api_key": "kb"}),
        ),
        (
            "agent_runs",
            json!({"id": "r1", "api_key": "ka", "timestamp": now, "ide_type": "editor",
                   "model": "m", "mode": "CONVERSATIONAL_PLANNER_MODE_DEFAULT",
                   "messages_sent": 1, "agent_id": "a", "prompts_used": 1,
                   "flex_credits_used": 4000}),
        ),
    ] {
        let file = f._dir.path().join(format!("{kind}.jsonl"));
        let mut text = std::fs::read_to_string(&file).unwrap_or_default();
        text.push_str(&format!("{line}\n"));
        std::fs::write(&file, text).unwrap();
    }
    for kind in ["users", "agent_runs"] {
        let file = f._dir.path().join(format!("{kind}.jsonl"));
        ok(
            &f.store,
            &[
                "import",
                "--team",
                t,
                "--kind",
                kind,
                file.to_str().unwrap(),
            ],
        );
    }
    ok(
        &f.store,
        &["cap", "set", "--team", t, "--team-level", "--credits", "50"],
    );
    // Lowering the team cap to 30 takes a@x (40 used) over it and changes b@x's cap.
    let rows = json_lines(
        &f.store,
        &[
            "cap",
            "preview",
            "--team",
            t,
            "--team-level",
            "--credits",
            "30",
        ],
    );
    let seen: Vec<(&Value, &Value, &Value, &Value)> = rows
        .iter()
        .map(|r| {
            (
                &r["email"],
                &r["before"]["has_access"],
                &r["after"]["has_access"],
                &r["after"]["add_on_credit_cap"],
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (&json!("a@x"), &json!(true), &json!(false), &json!(30)),
            (&json!("b@x"), &json!(true), &json!(true), &json!(30)),
        ]
    );
    assert_eq!(rows[0]["after"]["remaining_add_on_credits"], "-10.00");
    let cleared = json_lines(
        &f.store,
        &["cap", "preview", "--team", t, "--team-level", "--clear"],
    );
    assert_eq!(cleared.len(), 2);
    assert!(
        cleared
            .iter()
            .all(|r| r["after"].get("add_on_credit_cap").is_none())
    );
    assert_eq!(
        json_lines(
            &f.store,
            &[
                "cap",
                "preview",
                "--team",
                t,
                "--team-level",
                "--credits",
                "50"
            ]
        ),
        Vec::<Value>::new()
    );
    // Nothing changed.
    assert_eq!(
        ok(&f.store, &["cap", "get", "--team", t, "--team-level"]),
        json!({"addOnCreditCap": 50})
    );
    let (code, _, _) = admin(&f.store, &["cap", "preview", "--team", t, "--team-level"]);
    assert_eq!(code, 2, "a preview names its change");
    let (code, out, err) = admin(
        &f.store,
        &[
            "cap",
            "preview",
            "--team",
            t,
            "--group",
            "g-none",
            "--credits",
            "1",
        ],
    );
    assert_eq!((code, out.as_str()), (1, ""), "{err}");

    let added = ok(
        &f.store,
        &[
            "webhook",
            "add",
            "--team",
            t,
            "--url",
            "https://hooks.example.com/in",
            "--thresholds",
            "90,10",
        ],
    );
    assert_eq!(added["thresholds"], json!([10, 90]));
    assert_eq!(
        added["events"],
        json!([
            "credits.threshold",
            "credits.access_changed",
            "caps.changed"
        ])
    );
    assert!(
        added["secret"].as_str().unwrap().starts_with("whsec_"),
        "{added}"
    );
    let second = ok(
        &f.store,
        &[
            "webhook",
            "add",
            "--team",
            t,
            "--url",
            "http://127.0.0.1:9/x",
            "--events",
            "caps.changed",
            "--allow-private",
        ],
    );
    assert_eq!(second["events"], json!(["caps.changed"]));
    for (args, says) in [
        (
            vec!["--url", "http://hooks.example.com/x"],
            "must be an `https` URL",
        ),
        (vec!["--url", "https://127.0.0.1/x"], "a loopback address"),
        (
            vec!["--url", "https://h.example/x", "--events", "nope"],
            "`events[0]` must be one of",
        ),
        (
            vec!["--url", "https://h.example/x", "--thresholds", "0"],
            "`thresholds[0]` must be an integer from 1 to 1000",
        ),
    ] {
        let mut all = vec!["webhook", "add", "--team", t];
        all.extend(args.iter().copied());
        let (code, out, err) = admin(&f.store, &all);
        assert_eq!((code, out.as_str()), (1, ""), "{all:?}");
        assert!(
            err.contains(says) && err.lines().count() == 1,
            "{all:?}: {err}"
        );
    }
    let listed = json_lines(&f.store, &["webhook", "list", "--team", t]);
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["id"], added["id"]);
    assert!(listed.iter().all(|h| h.get("secret").is_none()));
    let id = added["id"].as_str().unwrap();
    assert_eq!(
        ok(&f.store, &["webhook", "remove", "--team", t, "--id", id]),
        json!({"removed": id})
    );
    let (code, out, _) = admin(&f.store, &["webhook", "remove", "--team", t, "--id", id]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        json_lines(&f.store, &["webhook", "list", "--team", t]).len(),
        1
    );
    let (code, _, _) = admin(&f.store, &["webhook", "list", "--team", "team_nope"]);
    assert_eq!(code, 1);
}
