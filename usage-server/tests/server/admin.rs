//! The admin commands that list and tell (issue 31): a store is opened, never made by
//! accident; `team list|show`, `key list`; one team per name unless asked; the audit log
//! of every administrative change, from the CLI and over HTTP; the unknown groups of a
//! users import.

use serde_json::{Value, json};

use crate::cli::json_lines;
use crate::process::{Server, admin, ok};

/// Every command but `serve`, `migrate` and `team create` refuses a SQLite path with no
/// store behind it, names the path, and leaves no file.
#[test]
fn a_missing_store_is_named_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("usgae.db");
    let store = format!("sqlite:{}", path.display());
    let backup = dir.path().join("b.db");
    let expected = format!(
        "usage-server: no store at {} (create it with usage-server migrate)\n",
        path.display()
    );
    for args in [
        vec!["check"],
        vec!["backup", "--to", backup.to_str().unwrap()],
        vec!["team", "list"],
        vec!["team", "show", "team_x"],
        vec!["key", "list", "--team", "team_x"],
        vec!["key", "revoke", "--key-id", "key_x"],
        vec!["audit", "--team", "team_x"],
        vec!["import", "--team", "team_x", "--kind", "users", "-"],
        vec!["credits", "--team", "team_x"],
        vec!["webhook", "list", "--team", "team_x"],
    ] {
        let (code, out, err) = admin(&store, &args);
        assert_eq!(
            (code, out.as_str(), err.as_str()),
            (1, "", expected.as_str()),
            "{args:?}"
        );
        assert!(!path.exists(), "{args:?} made {}", path.display());
        assert!(!backup.exists(), "{args:?} wrote a backup");
    }
    // `team create` makes the store, as `migrate` and `serve` do.
    let made = ok(&store, &["team", "create", "--name", "first"]);
    assert!(made["team_id"].as_str().unwrap().starts_with("team_"));
    assert!(path.exists());
    assert_eq!(json_lines(&store, &["team", "list"]).len(), 1);
}

/// `team create` refuses a name in use unless asked; `team list` and `team show` tell
/// what each team is; `key list` shows each key but never its secret.
#[test]
fn teams_and_keys_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("a.db").display());
    let acme = ok(
        &store,
        &[
            "team",
            "create",
            "--name",
            "acme",
            "--plan",
            "teams",
            "--seats",
            "4",
            "--credits-per-seat",
            "500",
        ],
    )["team_id"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, out, err) = admin(&store, &["team", "create", "--name", "acme"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        format!(
            "usage-server: a team named `acme` exists already ({acme}); pass --allow-duplicate-name to create another\n"
        )
    );
    let twin = ok(
        &store,
        &["team", "create", "--name", "acme", "--allow-duplicate-name"],
    )["team_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(twin, acme);
    let teams = json_lines(&store, &["team", "list"]);
    let listed: Vec<(&str, &str)> = teams
        .iter()
        .map(|t| (t["team_id"].as_str().unwrap(), t["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        listed,
        vec![(acme.as_str(), "acme"), (twin.as_str(), "acme")]
    );
    assert!(
        usage_core::time::Timestamp::parse_rfc3339(teams[0]["created"].as_str().unwrap()).is_some()
    );

    let ci = ok(
        &store,
        &[
            "key",
            "create",
            "--team",
            &acme,
            "--permissions",
            "analytics-read,billing-read",
            "--name",
            "ci",
        ],
    );
    let ops = ok(
        &store,
        &[
            "key",
            "create",
            "--team",
            &acme,
            "--permissions",
            "billing-write",
        ],
    );
    let ci_id = ci["key_id"].as_str().unwrap();
    ok(&store, &["key", "revoke", "--key-id", ci_id]);
    let keys = json_lines(&store, &["key", "list", "--team", &acme]);
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0]["key_id"], ci["key_id"]);
    assert_eq!(keys[0]["name"], "ci");
    assert_eq!(
        keys[0]["permissions"],
        json!(["analytics-read", "billing-read"])
    );
    assert!(keys[0]["revoked"].is_string(), "{}", keys[0]);
    assert_eq!(keys[1]["key_id"], ops["key_id"]);
    assert_eq!(keys[1]["name"], Value::Null);
    assert_eq!(keys[1]["permissions"], json!(["billing-write"]));
    assert_eq!(keys[1]["revoked"], Value::Null);
    for k in &keys {
        let fields: Vec<&String> = k.as_object().unwrap().keys().collect();
        assert_eq!(
            fields,
            vec!["key_id", "name", "permissions", "created", "revoked"],
            "never the secret: {k}"
        );
    }
    let text = admin(&store, &["key", "list", "--team", &acme]).1;
    for secret in [&ci["service_key"], &ops["service_key"]] {
        assert!(!text.contains(secret.as_str().unwrap()));
    }
    assert_eq!(
        json_lines(&store, &["key", "list", "--team", &twin]),
        Vec::<Value>::new()
    );

    let shown = ok(&store, &["team", "show", &acme]);
    assert_eq!(shown["team_id"], json!(acme));
    assert_eq!(shown["name"], "acme");
    assert_eq!(shown["plan"], "teams");
    assert_eq!(shown["num_seats"], 4);
    assert_eq!(shown["prompt_credits_per_seat"], 500);
    assert!(shown["billing_cycle_start"].is_string(), "{shown}");
    assert!(shown["billing_cycle_end"].is_string(), "{shown}");
    assert_eq!(
        (&shown["keys"], &shown["keys_revoked"]),
        (&json!(1), &json!(1))
    );
    let (code, out, err) = admin(&store, &["team", "show", "team_nope"]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("team_nope"), "{err}");
    let (code, _, _) = admin(&store, &["key", "list", "--team", "team_nope"]);
    assert_eq!(code, 1);
}

/// The audit log records the team's creation, keys made and revoked, caps, billing and
/// webhooks, each with the key id and name (`cli` for the commands); HTTP answers the
/// same entries.
#[tokio::test(flavor = "multi_thread")]
async fn the_audit_log_records_every_administrative_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("a.db").display());
    let team = ok(&store, &["team", "create", "--name", "audited"])["team_id"]
        .as_str()
        .unwrap()
        .to_string();
    let t = team.as_str();
    let admin_key = ok(
        &store,
        &[
            "key",
            "create",
            "--team",
            t,
            "--permissions",
            "billing-read,billing-write",
            "--name",
            "billing-admin",
        ],
    );
    let temp = ok(
        &store,
        &[
            "key",
            "create",
            "--team",
            t,
            "--permissions",
            "analytics-read",
        ],
    );
    ok(
        &store,
        &[
            "key",
            "revoke",
            "--key-id",
            temp["key_id"].as_str().unwrap(),
        ],
    );
    // A second revocation changes nothing and records nothing.
    ok(
        &store,
        &[
            "key",
            "revoke",
            "--key-id",
            temp["key_id"].as_str().unwrap(),
        ],
    );
    ok(
        &store,
        &["cap", "set", "--team", t, "--team-level", "--credits", "70"],
    );
    let billing = dir.path().join("billing.jsonl");
    std::fs::write(&billing, "{\"num_seats\": 9}\n").unwrap();
    ok(
        &store,
        &[
            "import",
            "--team",
            t,
            "--kind",
            "billing",
            billing.to_str().unwrap(),
        ],
    );
    let hook = ok(
        &store,
        &[
            "webhook",
            "add",
            "--team",
            t,
            "--url",
            "https://hooks.example.com/a",
        ],
    );
    ok(
        &store,
        &[
            "webhook",
            "remove",
            "--team",
            t,
            "--id",
            hook["id"].as_str().unwrap(),
        ],
    );

    // Over HTTP, with the named key: a webhook registered and a cap set.
    let log = dir.path().join("server.log");
    let server = Server::start(&store, &[], &log);
    let http = reqwest::Client::new();
    let key = admin_key["service_key"].as_str().unwrap();
    let res = http
        .post(format!("{}/api/v2/webhooks", server.base))
        .bearer_auth(key)
        .json(&json!({"url": "https://hooks.example.com/b", "events": ["caps.changed"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);
    let http_hook: Value = res.json().await.unwrap();
    let (status, _) = server
        .post(
            "UsageConfig",
            json!({"service_key": key, "team_level": true, "set_add_on_credit_cap": 80}),
        )
        .await;
    assert_eq!(status, 200);

    let entries = json_lines(&store, &["audit", "--team", t]);
    let seen: Vec<(&str, &str, Value, String)> = entries
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["key_id"].as_str().unwrap(),
                e["key_name"].clone(),
                e["scope"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let admin_id = admin_key["key_id"].as_str().unwrap();
    let temp_id = temp["key_id"].as_str().unwrap();
    let cli = json!("cli");
    assert_eq!(
        seen,
        vec![
            ("team.create", "cli", cli.clone(), format!("team:{t}")),
            ("key.create", "cli", cli.clone(), format!("key:{admin_id}")),
            ("key.create", "cli", cli.clone(), format!("key:{temp_id}")),
            ("key.revoke", "cli", cli.clone(), format!("key:{temp_id}")),
            ("cap.change", "cli", cli.clone(), "team".to_string()),
            (
                "billing.change",
                "cli:import",
                cli.clone(),
                "billing".to_string()
            ),
            (
                "webhook.add",
                "cli",
                cli.clone(),
                format!("webhook:{}", hook["id"].as_str().unwrap())
            ),
            (
                "webhook.remove",
                "cli",
                cli.clone(),
                format!("webhook:{}", hook["id"].as_str().unwrap())
            ),
            (
                "webhook.add",
                admin_id,
                json!("billing-admin"),
                format!("webhook:{}", http_hook["id"].as_str().unwrap())
            ),
            (
                "cap.change",
                admin_id,
                json!("billing-admin"),
                "team".to_string()
            ),
        ]
    );
    // What each entry says of its subject: never a secret.
    assert_eq!(entries[0]["old"], Value::Null);
    assert_eq!(entries[0]["new"]["name"], "audited");
    assert_eq!(entries[0]["new"]["plan"], "enterprise");
    assert_eq!(
        entries[1]["new"],
        json!({"name": "billing-admin", "permissions": ["billing-read", "billing-write"]})
    );
    assert_eq!(
        (&entries[3]["old"], &entries[3]["new"]),
        (
            &json!({"name": null, "permissions": ["analytics-read"]}),
            &Value::Null
        )
    );
    assert_eq!(
        (&entries[4]["old"], &entries[4]["new"]),
        (&Value::Null, &json!(70))
    );
    assert_eq!(entries[5]["new"]["num_seats"], 9);
    assert_eq!(entries[6]["new"]["url"], "https://hooks.example.com/a");
    assert_eq!(entries[7]["old"]["url"], "https://hooks.example.com/a");
    assert_eq!(entries[7]["new"], Value::Null);
    assert_eq!(
        (&entries[9]["old"], &entries[9]["new"]),
        (&json!(70), &json!(80))
    );
    let text = admin(&store, &["audit", "--team", t]).1;
    for secret in [
        &admin_key["service_key"],
        &temp["service_key"],
        &hook["secret"],
        &http_hook["secret"],
    ] {
        assert!(
            !text.contains(secret.as_str().unwrap()),
            "a secret in the log"
        );
    }

    // GET /api/v2/audit answers the same entries, in the same order.
    let res = http
        .get(format!("{}/api/v2/audit?limit=100", server.base))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let page: Value = res.json().await.unwrap();
    assert_eq!(page["entries"], json!(entries));
    assert_eq!(page["next_cursor"], Value::Null);
}

/// A users import that names groups the team lacks says so: how many memberships, how
/// many groups, the first of them in file order.
#[test]
fn a_users_import_reports_unknown_groups() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("a.db").display());
    let team = ok(&store, &["team", "create", "--name", "g"])["team_id"]
        .as_str()
        .unwrap()
        .to_string();
    let groups = dir.path().join("groups.jsonl");
    std::fs::write(
        &groups,
        "{\"group_id\": \"grp-a\", \"group_name\": \"A\"}\n",
    )
    .unwrap();
    ok(
        &store,
        &[
            "import",
            "--team",
            &team,
            "--kind",
            "groups",
            groups.to_str().unwrap(),
        ],
    );
    let users = dir.path().join("users.jsonl");
    let mut text = String::new();
    for (i, gs) in [
        vec!["grp-a"],
        vec!["grp-x", "grp-a"],
        vec!["grp-y"],
        vec!["grp-x"],
        vec![],
    ]
    .iter()
    .enumerate()
    {
        text.push_str(
            &json!({"email": format!("u{i}@x"), "name": "U", "api_key": format!("k{i}"), "groups": gs})
                .to_string(),
        );
        text.push('\n');
    }
    std::fs::write(&users, text).unwrap();
    let (code, out, err) = admin(
        &store,
        &[
            "import",
            "--team",
            &team,
            "--kind",
            "users",
            users.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let summary: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        summary,
        json!({"kind": "users", "records": 5,
               "unknown_groups": {"memberships": 3, "groups": 2, "examples": ["grp-x", "grp-y"]}})
    );
    assert!(
        err.contains(&format!(
            "3 memberships name groups team {team} does not have (e.g. [\"grp-x\",\"grp-y\"])"
        )),
        "{err}"
    );
    // Every group known: the contract's summary exactly, and no warning.
    std::fs::write(
        &users,
        json!({"email": "v@x", "name": "V", "api_key": "kv", "groups": ["grp-a"]}).to_string()
            + "\n",
    )
    .unwrap();
    let (code, out, err) = admin(
        &store,
        &[
            "import",
            "--team",
            &team,
            "--kind",
            "users",
            users.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let summary: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(summary, json!({"kind": "users", "records": 1}));
    assert!(!err.contains("memberships"), "{err}");
}

/// Reads a terminal capture until `until` shows up (or the child ends); the text so far.
fn read_until(out: &mut impl std::io::Read, until: &str) -> String {
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&text).contains(until) {
        match out.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// On a terminal (`script` gives the server a pseudo-terminal, as a person's shell would),
/// `serve --demo` prints the dashboard, the team id and the key one a line, and a curl that
/// answers when pasted as shown. A second start revokes the first start's key.
#[test]
fn the_demo_prints_a_curl_that_pastes_from_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("demo.db").display());
    let command = format!(
        "{} --store {store} serve --demo --listen 127.0.0.1:0",
        crate::process::BIN
    );
    let mut term = std::process::Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .env_remove("USAGE_STORE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("script (util-linux) runs");
    let capture = read_until(term.stdout.as_mut().unwrap(), "Stop it with Ctrl-C.");
    let lines: Vec<&str> = capture.lines().map(|l| l.trim_end_matches('\r')).collect();
    let after = |label: &str| {
        lines
            .iter()
            .find_map(|l| l.trim_start().strip_prefix(label))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no `{label}` line in {capture:?}"))
            .to_string()
    };
    let key = after("service key:");
    let team = after("team id:");
    assert!(key.starts_with("usk_"), "{capture:?}");
    assert!(after("dashboard:").ends_with("/dashboard"), "{capture:?}");
    let teams = json_lines(&store, &["team", "list"]);
    assert_eq!(teams[0]["team_id"], json!(team));
    assert!(
        !capture.contains("\"listen\""),
        "not the JSON line: {capture:?}"
    );
    // The curl, pasted as shown, into a shell.
    let curl = lines
        .iter()
        .map(|l| l.trim())
        .find(|l| l.starts_with("curl "))
        .unwrap_or_else(|| panic!("no curl in {capture:?}"));
    let out = std::process::Command::new("bash")
        .args(["-c", &format!("{curl} -o /dev/stderr -w '%{{http_code}}'")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200", "{curl}");
    let body: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert!(
        body["queryResults"][0]["responseItems"]
            .as_array()
            .is_some_and(|items| !items.is_empty()),
        "{body}"
    );
    let _ = term.kill();
    let _ = term.wait();

    // A restart with --demo (piped: the JSON line) revokes the first key.
    let log = dir.path().join("log");
    let server = Server::start(&store, &["--demo"], &log);
    assert_eq!(server.line["team_id"], json!(team));
    assert_ne!(server.line["service_key"], json!(key));
    let keys = json_lines(&store, &["key", "list", "--team", &team]);
    let demo: Vec<(&Value, bool)> = keys
        .iter()
        .map(|k| (&k["name"], k["revoked"].is_string()))
        .collect();
    assert_eq!(demo, vec![(&json!("demo"), true), (&json!("demo"), false)]);
}
