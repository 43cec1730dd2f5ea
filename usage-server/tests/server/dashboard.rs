//! The dashboard (`GET /dashboard`, docs/dashboard.md): its files and headers, and the page
//! itself in headless Chromium against the real binary's `serve --demo`, every figure it
//! shows compared with the API's own answers for the same period.
//!
//! The browser is driven by `usage-server/tests/browser/dashboard.mjs` (playwright-core,
//! installed by `npm ci` in that directory; Chromium from Debian at `/usr/bin/chromium`).
//! Where Chromium is absent and `CI` is not set, the browser test says so and passes; under
//! CI a missing Chromium, node or `node_modules` fails it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use usage_core::time::{Date, Timestamp};

use crate::common::{Env, TestStore};
use crate::process::{BIN, cmd};

const CHROMIUM: &str = "/usr/bin/chromium";

/// The days of the period the test shows: the demo's last 30 days.
const DAYS: i32 = 30;

fn browser_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

/// Where the screenshots go: `target/dashboard-test/`.
pub(crate) fn output_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("dashboard-test")
}

#[tokio::test]
async fn dashboard_files_are_served_with_strict_headers() {
    let env = Env::new(TestStore::Memory).await;
    for (path, ty, starts) in [
        ("/", "text/html; charset=utf-8", "<!doctype html>"),
        ("/dashboard", "text/html; charset=utf-8", "<!doctype html>"),
        (
            "/dashboard/app.js",
            "text/javascript; charset=utf-8",
            "// The usage dashboard",
        ),
        (
            "/dashboard/app.css",
            "text/css; charset=utf-8",
            "/* The usage dashboard",
        ),
        (
            "/dashboard/uPlot.iife.min.js",
            "text/javascript; charset=utf-8",
            "/*! https://github.com/leeoniya/uPlot (v1.6.32) */",
        ),
        (
            "/dashboard/uPlot.min.css",
            "text/css; charset=utf-8",
            ".uplot",
        ),
        (
            "/dashboard/uPlot.LICENSE.txt",
            "text/plain; charset=utf-8",
            "The MIT License (MIT)",
        ),
    ] {
        let res = env.client.get(env.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let h = res.headers().clone();
        assert_eq!(h["content-type"], ty, "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["cache-control"], "no-cache", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert_eq!(
            h["content-security-policy"],
            usage_server::http::dashboard::CSP,
            "{path}"
        );
        assert!(h.contains_key("x-request-id"), "{path}");
        let body = res.text().await.unwrap();
        assert!(body.starts_with(starts), "{path}: {}", &body[..80]);
        // HEAD: the same headers, no body.
        let head = env.client.head(env.url(path)).send().await.unwrap();
        assert_eq!(head.status(), 200, "{path}");
        assert_eq!(head.headers()["content-type"], ty, "{path}");
        assert_eq!(head.text().await.unwrap(), "", "{path}");
    }
    assert!(
        usage_server::http::dashboard::CSP.starts_with("default-src 'self'; script-src 'self';")
    );
    // The metrics count the files under one label: 7 GETs and 7 HEADs.
    let metrics = env
        .client
        .get(env.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l == "usage_http_requests_total{operation=\"dashboard\",status=\"200\"} 14"),
        "{metrics}"
    );
    // Other methods: 405 with the methods the path takes, in the contract's error body.
    for m in [
        reqwest::Method::POST,
        reqwest::Method::PUT,
        reqwest::Method::DELETE,
        reqwest::Method::PATCH,
        reqwest::Method::OPTIONS,
    ] {
        for path in ["/", "/dashboard", "/dashboard/app.js"] {
            let r = env.send(env.client.request(m.clone(), env.url(path))).await;
            r.error(405, "method_not_allowed");
            assert_eq!(r.headers["allow"], "GET, HEAD", "{m} {path}");
        }
    }
    // Methods the router does not route get the same Allow from the guard.
    let r = env
        .send(env.client.request(
            reqwest::Method::from_bytes(b"FROB").unwrap(),
            env.url("/dashboard"),
        ))
        .await;
    r.error(405, "method_not_allowed");
    assert_eq!(r.headers["allow"], "GET, HEAD");
    // Unknown files (and a trailing slash, and another case) are unknown paths: 404 first,
    // whatever the method.
    for path in [
        "/dashboard/",
        "/dashboard/nope.js",
        "/dashboard/app.js/",
        "/Dashboard",
        "/app.js",
    ] {
        for m in [reqwest::Method::GET, reqwest::Method::POST] {
            let r = env.send(env.client.request(m.clone(), env.url(path))).await;
            r.error(404, "not_found");
        }
    }
    let r = env
        .send(env.client.get(env.url("/dashboard/nope.js")))
        .await;
    assert_eq!(
        r.body["message"],
        "no dashboard file at `/dashboard/nope.js`; the dashboard is GET /dashboard"
    );
    // The API's answers are unchanged: an operation still wants POST.
    let r = env.send(env.client.get(env.url("/api/v1/Analytics"))).await;
    r.error(405, "method_not_allowed");
    assert_eq!(r.headers["allow"], "POST");
}

/// `serve --demo` with stdout and stderr in files of `dir`; the first stdout line as JSON.
pub(crate) struct Demo {
    child: Child,
    pub(crate) line: Value,
    pub(crate) base: String,
    stdout: PathBuf,
    pub(crate) stderr: PathBuf,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Demo {
    pub(crate) fn start(dir: &Path) -> Demo {
        let store = format!("sqlite:{}", dir.join("demo.db").display());
        let stdout = dir.join("stdout");
        let stderr = dir.join("stderr");
        let child = cmd(&store)
            .args(["serve", "--listen", "127.0.0.1:0", "--demo"])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("{BIN}: {e}"));
        let started = Instant::now();
        let line = loop {
            let f = std::fs::File::open(&stdout).unwrap();
            let mut first = String::new();
            BufReader::new(f).read_line(&mut first).unwrap();
            if first.ends_with('\n') {
                break serde_json::from_str::<Value>(&first).unwrap();
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the demo did not start: {}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let base = format!("http://{}", line["listen"].as_str().unwrap());
        Demo {
            child,
            line,
            base,
            stdout,
            stderr,
        }
    }
}

/// Whether the browser test runs with Chromium present or not and the `CI` variable:
/// `false` (skip) only without Chromium outside CI; without it under CI, a failure.
fn may_run(chromium: bool, ci: Option<&str>) -> bool {
    let ci = ci.is_some_and(|v| !v.is_empty() && v != "0" && v != "false");
    assert!(
        chromium || !ci,
        "{CHROMIUM} is missing under CI: .ci/run installs Debian's chromium before the tests"
    );
    chromium
}

#[test]
fn the_browser_test_skips_only_without_chromium_outside_ci() {
    assert!(may_run(true, None));
    assert!(may_run(true, Some("true")));
    assert!(!may_run(false, None));
    assert!(!may_run(false, Some("")));
    assert!(!may_run(false, Some("false")));
    for ci in ["true", "1"] {
        let failed = std::panic::catch_unwind(|| may_run(false, Some(ci)));
        assert!(failed.is_err(), "CI={ci}");
    }
}

/// Whether the browser test can run; `None` (skip) only without Chromium outside CI.
pub(crate) fn browser_prerequisites() -> Option<PathBuf> {
    if !may_run(
        Path::new(CHROMIUM).exists(),
        std::env::var("CI").ok().as_deref(),
    ) {
        eprintln!(
            "SKIPPED a browser test (the dashboard or the API reference): {CHROMIUM} is not installed (apt-get install -y chromium); \
             under CI=true this fails"
        );
        return None;
    }
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.as_ref().is_ok_and(|o| o.status.success()),
        "node is needed to drive Chromium (playwright-core): {node:?}"
    );
    let dir = browser_dir();
    assert!(
        dir.join("node_modules/playwright-core/package.json")
            .exists(),
        "playwright-core is not installed: run `npm ci --prefix {}` (.ci/run does)",
        dir.display()
    );
    Some(dir)
}

/// POST `/api/v1/{op}` with the key in the body, as a script would.
async fn api(base: &str, key: &str, op: &str, mut body: Value) -> Value {
    body["service_key"] = json!(key);
    let res = reqwest::Client::new()
        .post(format!("{base}/api/v1/{op}"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = res.status();
    let v: Value = res.json().await.unwrap();
    assert_eq!(status, 200, "{op}: {v}");
    v
}

/// One query's items.
fn items(answer: &Value, i: usize) -> Vec<Value> {
    answer["queryResults"][i]["responseItems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["item"].clone())
        .collect()
}

fn int(v: &Value) -> i64 {
    v.as_str()
        .map_or_else(|| v.as_i64(), |s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// Hundredths of a credit as the page writes them: `1234.05`.
fn credits(hundredths: i64) -> String {
    format!("{}.{:02}", hundredths / 100, hundredths % 100)
}

/// The figure `name` of the page: its exact value and its text without separators.
fn figure(page: &Value, name: &str) -> (String, String) {
    let f = &page["figures"][name];
    (
        f["value"].as_str().unwrap_or_default().to_string(),
        f["text"].as_str().unwrap_or_default().replace(',', ""),
    )
}

fn strings(v: &Value) -> Vec<Vec<String>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn dashboard_in_a_browser_shows_the_apis_figures() {
    let Some(browser) = browser_prerequisites() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let demo = Demo::start(dir.path());
    let key = demo.line["service_key"].as_str().unwrap().to_string();
    let base = demo.base.clone();
    assert_eq!(demo.line["dashboard"], format!("{base}/dashboard"));
    assert!(demo.line["curl"].as_str().unwrap().contains(&key));
    // A team cap, so the page has one to show.
    api(
        &base,
        &key,
        "UsageConfig",
        json!({"team_level": true, "set_add_on_credit_cap": 750}),
    )
    .await;

    let today = Timestamp::now().date();
    let start = Date(today.0 - DAYS + 1).to_iso();
    let end = today.to_iso();
    let days: Vec<String> = (0..DAYS)
        .map(|i| Date(today.0 - DAYS + 1 + i).to_iso())
        .collect();

    let out = output_dir();
    let _ = std::fs::remove_dir_all(&out);
    let run = Command::new("node")
        .current_dir(&browser)
        .arg("dashboard.mjs")
        .args([&base, &key, &out.display().to_string(), &start, &end])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "the browser script failed: {}\n{stdout}",
        String::from_utf8_lossy(&run.stderr)
    );
    let page: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));

    // The page loaded everything, without errors, within its CSP.
    assert_eq!(page["status"], 200);
    assert_eq!(page["state_before"], "locked");
    assert_eq!(page["state"], "ready", "{}", page["status_text"]);
    assert_eq!(
        page["status_text"],
        format!("Showing {start} to {end} for the whole team.")
    );
    assert_eq!((&page["start"], &page["end"]), (&json!(start), &json!(end)));
    assert_eq!(page["page_errors"], json!([]));
    // The only console errors are the browser's notes of the wrong key's six 401s.
    let refused =
        "Failed to load resource: the server responded with a status of 401 (Unauthorized)";
    assert_eq!(page["console_errors"], json!(vec![refused; 6]));
    assert_eq!(page["csp_violations"], json!([]));
    assert_eq!(
        page["charts"],
        json!([
            {"id": "chart-autocomplete", "canvases": 1},
            {"id": "chart-activity", "canvases": 1},
            {"id": "chart-agent", "canvases": 1},
        ])
    );

    // The key: only in the Authorization header of the API calls, in sessionStorage, and
    // nowhere else.
    let requests = page["requests"].as_array().unwrap();
    let api_calls: Vec<&Value> = requests
        .iter()
        .filter(|r| r["url"].as_str().unwrap().contains("/api/"))
        .collect();
    assert_eq!(
        api_calls
            .iter()
            .map(|r| {
                let url = r["url"].as_str().unwrap();
                let path = url.strip_prefix(&base).unwrap();
                format!(
                    "{} {}",
                    r["method"].as_str().unwrap(),
                    path.split('?').next().unwrap()
                )
            })
            .collect::<Vec<_>>(),
        // Four loads of six calls: the period, the group, the whole team again, then
        // the wrong key.
        [
            "POST /api/v1/Analytics",
            "GET /api/v2/users/activity",
            "GET /api/v2/credits/users",
            "GET /api/v2/credits/users",
            "POST /api/v1/GetUsageConfig",
            "POST /api/v1/GetTeamCreditBalance",
        ]
        .repeat(4)
    );
    // The key goes as `Authorization: Bearer <key>` in each call but the wrong key's.
    assert_eq!(
        api_calls
            .iter()
            .map(|r| r["bearer"].as_bool().unwrap())
            .collect::<Vec<_>>(),
        [[true; 18].as_slice(), &[false; 6]].concat()
    );
    assert_eq!(
        api_calls[3]["url"],
        format!("{base}/api/v2/credits/users?min_percent=80&limit=1000")
    );
    assert_eq!(
        api_calls[7]["url"],
        format!(
            "{base}/api/v2/users/activity?start={start}&end={end}&group=engineering&limit=1000"
        )
    );
    for r in requests {
        assert!(
            !r["url"].as_str().unwrap().contains(&key),
            "the key is in a URL: {r}"
        );
    }
    assert_eq!(page["local_storage"], json!({}));
    assert_eq!(page["session_has_key"], true);
    assert_eq!(page["key_in_dom"], false);
    assert!(!page["page_url"].as_str().unwrap().contains(&key));

    // The totals against the API's own totals (no grouping: the server sums, not the page).
    let date_range = json!([
        {"name": "date", "filter": "QUERY_FILTER_GE", "value": start},
        {"name": "date", "filter": "QUERY_FILTER_LE", "value": end},
    ]);
    let sum = |field: &str, name: &str| json!({"field": field, "aggregation_function": "QUERY_AGGREGATION_SUM", "name": name});
    let count = |field: &str, name: &str| json!({"field": field, "aggregation_function": "QUERY_AGGREGATION_COUNT", "name": name});
    let q = |source: &str, selections: Value, aggregations: Value| {
        json!({"data_source": source, "selections": selections, "filters": date_range,
               "aggregations": aggregations})
    };
    let totals = api(
        &base,
        &key,
        "Analytics",
        json!({"query_requests": [
            q("QUERY_DATA_SOURCE_USER_DATA", json!([sum("num_acceptances", "a"), sum("num_lines_accepted", "l")]), json!([])),
            q("QUERY_DATA_SOURCE_CHAT_DATA", json!([sum("num_chats_received", "c")]), json!([])),
            q("QUERY_DATA_SOURCE_COMMAND_DATA", json!([count("accepted", "n"), sum("accepted", "y")]), json!([])),
            q("QUERY_DATA_SOURCE_AGENT_DATA", json!([count("agent_id", "r"), sum("prompts_used", "p")]), json!([])),
            q("QUERY_DATA_SOURCE_USER_DATA", json!([sum("num_acceptances", "a"), sum("num_lines_accepted", "l")]), json!([{"field": "date", "name": "day"}])),
            q("QUERY_DATA_SOURCE_USER_DATA", json!([sum("num_acceptances", "a")]), json!([{"field": "language", "name": "k"}])),
            q("QUERY_DATA_SOURCE_USER_DATA", json!([sum("num_acceptances", "a")]), json!([{"field": "ide", "name": "k"}])),
        ]}),
    )
    .await;
    let t = |i: usize, alias: &str| int(&items(&totals, i)[0][alias]);
    let expected = [
        ("acceptances", t(0, "a")),
        ("lines", t(0, "l")),
        ("chats", t(1, "c")),
        ("commands", t(2, "n")),
        ("accepted-commands", t(2, "y")),
        ("runs", t(3, "r")),
    ];
    for (name, want) in expected {
        assert!(want > 0, "the demo has no {name} in the period");
        assert_eq!(
            figure(&page, name),
            (want.to_string(), want.to_string()),
            "{name}"
        );
    }
    let prompts = t(3, "p");
    assert_eq!(
        figure(&page, "credits"),
        (credits(prompts), credits(prompts))
    );

    // The autocomplete table: one row per day of the period, zero where the API has none.
    let per_day: std::collections::HashMap<String, (i64, i64)> = items(&totals, 4)
        .iter()
        .map(|it| {
            (
                it["day"].as_str().unwrap().to_string(),
                (int(&it["a"]), int(&it["l"])),
            )
        })
        .collect();
    let want_days: Vec<Vec<String>> = days
        .iter()
        .map(|d| {
            let (a, l) = per_day.get(d).copied().unwrap_or((0, 0));
            vec![d.clone(), a.to_string(), l.to_string()]
        })
        .collect();
    assert_eq!(strings(&page["autocomplete"]), want_days);
    assert_eq!(strings(&page["activity"]).len(), DAYS as usize);
    assert_eq!(strings(&page["agent"]).len(), DAYS as usize);

    // Top languages and IDEs: most acceptances first, as the API counts them.
    for (i, table) in [(5, "languages"), (6, "ides")] {
        let mut want: Vec<(String, i64)> = items(&totals, i)
            .iter()
            .map(|it| (it["k"].as_str().unwrap().to_string(), int(&it["a"])))
            .collect();
        want.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let shown: Vec<(String, i64)> = strings(&page[table])
            .into_iter()
            .map(|r| (r[0].clone(), r[1].parse().unwrap()))
            .collect();
        assert_eq!(shown, want, "{table}");
    }
    assert_eq!(strings(&page["languages"]).len(), 8);
    assert_eq!(strings(&page["ides"]).len(), 4);

    // Users: the page reads GET /api/v2/users/activity; UserPageAnalytics over the same
    // days (its end is exclusive) must agree on every user's active days.
    let next_day = Date(today.0 + 1).to_iso();
    let upa = api(
        &base,
        &key,
        "UserPageAnalytics",
        json!({"start_timestamp": format!("{start}T00:00:00Z"),
               "end_timestamp": format!("{next_day}T00:00:00Z")}),
    )
    .await;
    let stats = upa["userTableStats"].as_array().unwrap();
    assert_eq!(stats.len(), usage_server::demo::DEMO_USERS);
    let mut want_users: Vec<(String, i64)> = stats
        .iter()
        .map(|u| {
            (
                u["email"].as_str().unwrap().to_string(),
                u["activeDays"].as_i64().unwrap(),
            )
        })
        .collect();
    // The page's first order: most active days first, then e-mail.
    want_users.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let shown_users: Vec<(String, i64)> = strings(&page["users"])
        .into_iter()
        .map(|r| (r[1].clone(), r[2].parse().unwrap()))
        .collect();
    assert_eq!(shown_users, want_users);
    let active = want_users.iter().filter(|u| u.1 > 0).count();
    assert_eq!(
        figure(&page, "active-users"),
        (
            active.to_string(),
            format!("{active} of {}", usage_server::demo::DEMO_USERS)
        )
    );
    assert_eq!(
        page["users_sort"],
        json!([
            "none",
            "none",
            "descending",
            "none",
            "none",
            "none",
            "none",
            "none"
        ])
    );
    // Each user's add-on credits in the cycle, what remains and the cap's source, as
    // GET /api/v2/credits/users answers them.
    let list = |query: &str| {
        let (base, key) = (base.clone(), key.clone());
        let query = query.to_string();
        async move {
            reqwest::Client::new()
                .get(format!("{base}/api/v2/credits/users?limit=1000{query}"))
                .header("authorization", format!("Bearer {key}"))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()["data"]
                .as_array()
                .unwrap()
                .clone()
        }
    };
    let all_credits = list("").await;
    assert_eq!(all_credits.len(), usage_server::demo::DEMO_USERS);
    let by_email: std::collections::HashMap<&str, &Value> = all_credits
        .iter()
        .map(|c| (c["email"].as_str().unwrap(), c))
        .collect();
    for row in strings(&page["users"]) {
        let c = by_email[row[1].as_str()];
        let want = vec![
            c["add_on_credits_used"].as_str().unwrap().to_string(),
            c["remaining_add_on_credits"]
                .as_str()
                .unwrap_or("none")
                .to_string(),
            c["cap_source"].as_str().unwrap_or("none").to_string(),
        ];
        assert_eq!(row[5..].to_vec(), want, "{}", row[1]);
    }
    // The demo's caps make some users near or over theirs: the page lists exactly those
    // min_percent=80 answers, in its order.
    let near = list("&min_percent=80").await;
    assert!(near.len() >= 2, "{near:?}");
    let want_near: Vec<Vec<String>> = near
        .iter()
        .map(|c| {
            vec![
                c["email"].as_str().unwrap().to_string(),
                c["add_on_credits_used"].as_str().unwrap().to_string(),
                c["add_on_credit_cap"].to_string(),
                c["percent_of_cap"].as_str().unwrap_or("over").to_string(),
                c["cap_source"].as_str().unwrap().to_string(),
                c["has_access"].to_string(),
            ]
        })
        .collect();
    assert_eq!(strings(&page["near"]), want_near);
    // Sorted with the keyboard by e-mail: ascending, then descending.
    let mut emails: Vec<String> = want_users.iter().map(|u| u.0.clone()).collect();
    emails.sort();
    assert_eq!(page["users_sort_email"], "ascending");
    assert_eq!(page["users_by_email"], json!(emails));
    emails.reverse();
    assert_eq!(page["users_sort_email_again"], "descending");
    assert_eq!(page["users_by_email_desc"], json!(emails));

    // One group: the page's totals are the group's.
    let group = api(
        &base,
        &key,
        "Analytics",
        json!({"group_name": "engineering", "query_requests": [
            q("QUERY_DATA_SOURCE_USER_DATA", json!([sum("num_acceptances", "a")]), json!([])),
            q("QUERY_DATA_SOURCE_AGENT_DATA", json!([count("agent_id", "r")]), json!([])),
        ]}),
    )
    .await;
    let g = &page["group"];
    assert_eq!(g["state"], "ready", "{}", g["status_text"]);
    assert_eq!(
        g["status_text"],
        format!("Showing {start} to {end} for group engineering.")
    );
    let group_acceptances = int(&items(&group, 0)[0]["a"]);
    assert!(0 < group_acceptances && group_acceptances < t(0, "a"));
    assert_eq!(
        g["figures"]["acceptances"]["value"],
        group_acceptances.to_string()
    );
    assert_eq!(
        g["figures"]["runs"]["value"],
        int(&items(&group, 1)[0]["r"]).to_string()
    );
    let members = api(
        &base,
        &key,
        "UserPageAnalytics",
        json!({"group_name": "engineering"}),
    )
    .await["userTableStats"]
        .as_array()
        .unwrap()
        .len();
    assert!(members > 0 && members < usage_server::demo::DEMO_USERS);
    assert_eq!(g["users"], members);

    // A wrong key is refused, forgotten, and the focus goes back to the key field.
    assert_eq!(
        page["after_forget"],
        json!({"state": "locked", "session": 0})
    );
    assert_eq!(
        page["wrong_key"],
        json!({
            "status_text": "The service key was refused (unauthenticated); enter a valid key.",
            "session": 0,
            "focused": "key",
        })
    );

    // The cap and the balance.
    assert_eq!(
        figure(&page, "team-cap"),
        ("750".to_string(), "750 credits".to_string())
    );
    let balance = api(&base, &key, "GetTeamCreditBalance", json!({})).await;
    for k in [
        "promptCreditsPerSeat",
        "numSeats",
        "addOnCreditsAvailable",
        "addOnCreditsUsed",
    ] {
        let want = balance[k].as_i64().unwrap().to_string();
        assert_eq!(figure(&page, k), (want.clone(), want), "{k}");
    }
    let (available, used) = (
        balance["addOnCreditsAvailable"].as_i64().unwrap(),
        balance["addOnCreditsUsed"].as_i64().unwrap(),
    );
    assert_eq!(
        figure(&page, "addOnCreditsRemaining").0,
        (available - used).to_string()
    );
    let tenths = used * 1000 / available;
    assert_eq!(
        figure(&page, "addOnCreditsPercent"),
        (
            format!("{}.{}", tenths / 10, tenths % 10),
            format!("{}.{} %", tenths / 10, tenths % 10)
        )
    );
    assert_eq!(
        figure(&page, "billingCycle").0,
        format!(
            "{}/{}",
            &balance["billingCycleStart"].as_str().unwrap()[..10],
            &balance["billingCycleEnd"].as_str().unwrap()[..10]
        )
    );

    // A phone's width: no sideways scrolling, every figure still there.
    assert_eq!(page["phone"]["client_width"], 390);
    assert_eq!(page["phone"]["scroll_width"], 390);
    assert_eq!(page["phone"]["cards"], 16);

    // The screenshots.
    for name in ["dashboard.png", "dashboard-full.png", "dashboard-phone.png"] {
        let png = std::fs::read(out.join(name)).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{name}");
        assert!(png.len() > 20_000, "{name}: {} bytes", png.len());
    }

    // The server logged every request but never the key; stdout has only the startup line
    // (which prints it, as the demo must).
    let log = std::fs::read_to_string(&demo.stderr).unwrap();
    assert!(log.contains("request"), "{log}");
    assert!(!log.contains(&key), "the key is in the log");
    let printed = std::fs::read_to_string(&demo.stdout).unwrap();
    let mut lines = printed.lines();
    assert!(lines.next().unwrap().contains(&key));
    assert_eq!(lines.collect::<Vec<_>>(), Vec::<&str>::new());
}
