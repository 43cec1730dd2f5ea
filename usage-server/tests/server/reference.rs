//! The rendered API reference (`GET /docs`, docs/openapi.md): its files and headers, and
//! the page in headless Chromium against the real binary's `serve --demo`, every operation
//! of the document shown under the dashboard's CSP with no violation.
//!
//! The browser is driven by `usage-server/tests/browser/reference.mjs`, with the
//! dashboard's test's prerequisites (`crate::dashboard::browser_prerequisites`: Chromium,
//! node, `npm ci` in that directory; skipped only without Chromium outside CI).

use std::process::Command;

use serde_json::Value;
use usage_server::http::dashboard::CSP;
use usage_server::http::{openapi, reference};

use crate::common::{Env, TestStore};
use crate::dashboard::{Demo, browser_prerequisites, output_dir};

#[tokio::test]
async fn api_reference_files_are_served_with_strict_headers() {
    let env = Env::new(TestStore::Memory).await;
    for (path, ty, starts) in [
        ("/docs", "text/html; charset=utf-8", "<!doctype html>"),
        (
            "/docs/reference.js",
            "text/javascript; charset=utf-8",
            "// The API reference of GET /docs",
        ),
        (
            "/docs/swagger-ui-bundle.js",
            "text/javascript; charset=utf-8",
            "/*! For license information please see swagger-ui-bundle.js.LICENSE.txt */",
        ),
        (
            "/docs/swagger-ui.css",
            "text/css; charset=utf-8",
            ".swagger-ui",
        ),
        (
            "/docs/swagger-ui.LICENSE.txt",
            "text/plain; charset=utf-8",
            "\n                                 Apache License",
        ),
        (
            "/docs/swagger-ui.NOTICE.txt",
            "text/plain; charset=utf-8",
            "swagger-ui\n",
        ),
        (
            "/docs/swagger-ui-bundle.js.LICENSE.txt",
            "text/plain; charset=utf-8",
            "/*",
        ),
    ] {
        let res = env.client.get(env.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let h = res.headers().clone();
        assert_eq!(h["content-type"], ty, "{path}");
        assert_eq!(h["content-security-policy"], CSP, "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        let body = res.text().await.unwrap();
        assert!(
            body.starts_with(starts),
            "{path}: {:?}",
            &body[..80.min(body.len())]
        );
        let head = env.client.head(env.url(path)).send().await.unwrap();
        assert_eq!(head.status(), 200, "{path}");
        assert_eq!(head.text().await.unwrap(), "", "{path}");
    }
    assert_eq!(reference::ASSETS.len(), 7);
    // One fixed label in the metrics: 7 GETs and 7 HEADs.
    let metrics = env.client.get(env.url("/metrics")).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l == "usage_http_requests_total{operation=\"docs\",status=\"200\"} 14"),
        "{metrics}"
    );
    for m in [reqwest::Method::POST, reqwest::Method::DELETE] {
        let r = env
            .send(env.client.request(m.clone(), env.url("/docs")))
            .await;
        r.error(405, "method_not_allowed");
        assert_eq!(r.headers["allow"], "GET, HEAD", "{m}");
    }
    let r = env
        .send(env.client.request(
            reqwest::Method::from_bytes(b"FROB").unwrap(),
            env.url("/docs/reference.js"),
        ))
        .await;
    r.error(405, "method_not_allowed");
    assert_eq!(r.headers["allow"], "GET, HEAD");
    for path in [
        "/docs/",
        "/docs/nope.js",
        "/Docs",
        "/docs/swagger-ui.js.map",
    ] {
        let r = env.send(env.client.get(env.url(path))).await;
        r.error(404, "not_found");
    }
    let r = env.send(env.client.get(env.url("/docs/nope.js"))).await;
    assert_eq!(
        r.body["message"],
        "no API reference file at `/docs/nope.js`; the reference is GET /docs"
    );
    // Like the dashboard, a page and not part of the JSON API: not in the document.
    let doc = openapi::document();
    assert!(
        doc["paths"]
            .as_object()
            .unwrap()
            .keys()
            .all(|p| !p.starts_with("/docs") && !p.starts_with("/dashboard"))
    );
}

#[tokio::test]
async fn api_reference_in_a_browser_shows_every_operation() {
    let Some(browser) = browser_prerequisites() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let demo = Demo::start(dir.path());
    let out = output_dir().join("reference");
    let run = Command::new("node")
        .current_dir(&browser)
        .arg("reference.mjs")
        .args([&demo.base, &out.display().to_string()])
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
    assert_eq!(page["status"], 200);
    assert_eq!(page["headers"]["content-security-policy"], CSP);
    // Rendered within the CSP: no violation, no error, nothing requested off the server.
    assert_eq!(page["csp_violations"], serde_json::json!([]), "{page}");
    assert_eq!(page["console_errors"], serde_json::json!([]), "{page}");
    assert_eq!(page["page_errors"], serde_json::json!([]), "{page}");
    let requests: Vec<&str> = page["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    for r in &requests {
        assert!(r.starts_with(&format!("{}/", demo.base)), "{r}");
    }
    assert!(requests.contains(&format!("{}/openapi.json", demo.base).as_str()));
    // Every operation of the document, by id, method and path, and nothing else.
    let doc = openapi::document();
    assert_eq!(page["title"], doc["info"]["title"]);
    let mut want: Vec<(String, String, String)> = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let tag = op["tags"][0].as_str().unwrap();
            let id = op["operationId"].as_str().unwrap();
            want.push((
                format!("operations-{tag}-{id}"),
                method.to_uppercase(),
                path.clone(),
            ));
        }
    }
    let mut have: Vec<(String, String, String)> = page["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let s = |k: &str| o[k].as_str().unwrap().to_string();
            (s("id"), s("method"), s("path"))
        })
        .collect();
    want.sort();
    have.sort();
    assert_eq!(have, want);
    // The expanded operation lists every status of the document, and no "Try it out".
    let op = &doc["paths"]["/api/v1/GetTeamCreditBalance"]["post"]["responses"];
    let statuses: Vec<&str> = op.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(page["expanded_statuses"], serde_json::json!(statuses));
    assert_eq!(page["try_it_out"], 0);
    drop(demo);
    assert!(out.join("reference.png").exists());
}
