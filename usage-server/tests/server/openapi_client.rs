//! A client generated from the OpenAPI document by a mainstream generator, run against the
//! real binary's `serve --demo` (issue 31): `usage-server/tests/openapi_client/run.py`
//! generates a Python package with openapi-python-client (pinned there), checks it has a
//! function for every operation and a model for every error body, and calls `Analytics`,
//! `AgentAnalytics`, `GetTeamCreditBalance` and `GET /api/v2/users/activity` through it,
//! then a 401, a 400 and a 404. This test checks what it read against the demo's data.
//!
//! It needs `python3` with `openapi-python-client==0.29.1` (`.ci/run` installs it); without
//! it the script fails naming the install command, and so does this test.

use std::process::Command;

use serde_json::Value;
use usage_server::demo::DEMO_USERS;
use usage_server::http::openapi;

use crate::dashboard::Demo;

#[test]
fn openapi_client_generated_in_python_reads_every_answer() {
    let dir = tempfile::tempdir().unwrap();
    let demo = Demo::start(dir.path());
    let key = demo.line["service_key"].as_str().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/openapi_client/run.py");
    let work = dir.path().join("client");
    let run = Command::new("python3")
        .arg(script)
        .args([&demo.base, key, &work.display().to_string()])
        .output()
        .unwrap_or_else(|e| {
            panic!("python3 is needed (apt-get install -y python3 python3-pip): {e}")
        });
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "the generated client's script failed: {}\n{stdout}\nserver: {}",
        String::from_utf8_lossy(&run.stderr),
        std::fs::read_to_string(&demo.stderr).unwrap_or_default()
    );
    let r: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));

    // A function for every operation of the document; a model for every error body.
    let doc = openapi::document();
    let operations: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|i| i.as_object().unwrap().len())
        .sum();
    assert_eq!(r["operations"], operations);
    assert_eq!(r["functions"], operations);
    let mut models: Vec<String> = usage_server::error::Code::ALL
        .iter()
        .map(|c| {
            let pascal: String = c
                .as_str()
                .split('_')
                .map(|w| w[..1].to_uppercase() + &w[1..])
                .collect();
            format!("Error{pascal}")
        })
        .collect();
    models.sort();
    assert_eq!(r["error_models"], serde_json::json!(models));

    // The typed answers: the demo's languages, its agent runs, its balance, its users.
    let langs = r["analytics"].as_object().unwrap();
    assert!(langs.len() >= 3, "{langs:?}");
    assert!(
        langs
            .values()
            .all(|v| v.as_str().unwrap().parse::<u64>().unwrap() > 0),
        "{langs:?}"
    );
    assert!(r["agent_runs"].as_u64().unwrap() > 0);
    assert!(!r["agent_modes"].as_array().unwrap().is_empty());
    assert_eq!(r["balance"]["num_seats"], DEMO_USERS);
    assert_eq!(r["balance"]["prompt_credits_per_seat"], 500);
    assert_eq!(r["users"], DEMO_USERS);
    let active = r["active_users"].as_u64().unwrap();
    assert!(active > 0 && active <= DEMO_USERS as u64, "{active}");

    // The failures, each in its own typed model with the documented code.
    assert_eq!(r["unauthenticated"]["code"], "unauthenticated");
    assert_eq!(r["invalid_argument"]["code"], "invalid_argument");
    assert_eq!(r["invalid_argument"]["path"], "start");
    assert_eq!(r["invalid_argument"]["rule"], "invalid_value");
    assert_eq!(r["not_found"]["code"], "not_found");
}
