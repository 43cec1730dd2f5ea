//! The feature pages of docs/ run as written: every `sh` block of each page, run by
//! `bash` with `curl`, against the real binary's `serve --demo`, with `BASE`, `KEY`,
//! `STORE` and `TEAM` set as the pages tell the reader to set them and `usage-server` on
//! the `PATH`, in a folder of its own. A block fails the test when it exits non-zero
//! (the pages' commands use `curl -f`) or prints nothing.

use std::process::Command;

use crate::process::Server;

/// The pages whose `sh` blocks are checked, and what each block's output must contain.
const PAGES: &[(&str, &[&str])] = &[
    (
        "admin.md",
        &[
            "no store at usgae.db (create it with usage-server migrate)",
            "\"plan\":\"enterprise\"",
            "\"permissions\":[\"analytics-read\"",
            "\"action\":\"team.create\"",
        ],
    ),
    (
        "export.md",
        &["acceptances,lines,day\r\n", "{\"acceptances\":\""],
    ),
    (
        "metrics.md",
        &[
            "usage_store_records{kind=\"autocomplete\"}",
            "# TYPE usage_http_requests counter\n",
        ],
    ),
    (
        "time-zones.md",
        &[
            "\"day\":\"",
            "\"chats\":\"",
            "\"date\":\"",
            "did you mean `date America/New_York`?",
        ],
    ),
    (
        "dashboard.md",
        &[
            "{\"acceptances\":\"",
            "\"activeDays\":",
            "\"numSeats\":240",
            "content-security-policy: default-src 'self'",
        ],
    ),
    (
        "api-v2.md",
        &[
            "\"next_cursor\":\"",
            "\"language\":\"",
            "304",
            "\"has_access\":",
            "\"before\":{",
            "\"entries\":[",
        ],
    ),
    (
        "credits.md",
        &[
            "\"cap_source\":\"user\"",
            "\"has_access\":false",
            "\"after\":{",
            "\"secret\":\"whsec_",
        ],
    ),
];

/// The `sh` blocks of a page, but those that only set `BASE` and `KEY` for the reader.
fn sh_blocks(page: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for line in page.lines() {
        match (&mut block, line.trim_end()) {
            (None, "```sh") => block = Some(String::new()),
            (Some(b), "```") => {
                if !b.trim_start().starts_with("BASE=") {
                    out.push(std::mem::take(b));
                }
                block = None;
            }
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    out
}

#[test]
fn feature_pages_run_against_the_demo() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("demo.db").display());
    let s = Server::start(&store, &["--demo"], &dir.path().join("log"));
    let key = s.line["service_key"].as_str().unwrap();
    let team = s.line["team_id"].as_str().unwrap();
    let bin = std::path::Path::new(crate::process::BIN).parent().unwrap();
    let search_path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (page, wants) in PAGES {
        let path = format!("{}/../docs/{page}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let blocks = sh_blocks(&text);
        assert_eq!(blocks.len(), wants.len(), "{page}: {blocks:?}");
        for (block, want) in blocks.iter().zip(wants.iter()) {
            let out = Command::new("bash")
                .args(["-euo", "pipefail", "-c", block])
                .env("BASE", &s.base)
                .env("KEY", key)
                .env("STORE", &store)
                .env("TEAM", team)
                .env("PATH", &search_path)
                .current_dir(dir.path())
                .output()
                .expect("bash runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{page}: {block}\nexit {:?}: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(stdout.contains(want), "{page}: {block}\n{stdout}");
        }
    }
}
