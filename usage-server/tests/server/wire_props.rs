//! Arbitrary methods and request targets, header sets and chunked framings, sent over raw
//! TCP (contract sections 1, 2 and 11): never a 5xx, a hang or a panic. Every answer the
//! server shapes is a 2xx or the contract's JSON error, with `x-request-id`; the only bare
//! answers are those hyper gives itself to a request it cannot parse (a malformed request
//! line or header section, too many headers, a URI over its limit: docs/decisions.md,
//! "Connections"), and a broken body framing gets a 400 or a clean close.
//!
//! Where the framing is clean, the properties also predict the answer exactly: the status,
//! code and `Allow` of a method and target, and, for a header set or a chunked body, the
//! answer of the same body sent plainly.

use std::sync::OnceLock;
use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{Env, TestStore, valid_requests};

/// A guard against a hung server, not a speed limit: far above any answer's time.
const HANG: Duration = Duration::from_secs(20);

const OPS: [&str; 7] = [
    "Analytics",
    "UserPageAnalytics",
    "AgentAnalytics",
    "GetUsageConfig",
    "UsageConfig",
    "GetTeamCreditBalance",
    "Ingest",
];

/// The methods the server routes (any other gets 405 before routing).
const ROUTED: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];

/// hyper's header limit: one more is answered 431 by hyper itself.
const MAX_HEADERS: usize = 100;

struct Shared {
    /// Holds the server's runtime.
    _rt: tokio::runtime::Runtime,
    /// The raw client's: its timeout fires even when the server blocks every worker.
    client: tokio::runtime::Runtime,
    env: Env,
}

/// One server per store, shared by the cases of every property on that store. Every
/// valid request has been sent once, so that sending one again (`UsageConfig`, `Ingest`)
/// changes nothing and answers as before.
fn shared(kind: TestStore) -> &'static Shared {
    static SHARED: [OnceLock<Shared>; TestStore::EVERY.len()] =
        [const { OnceLock::new() }; TestStore::EVERY.len()];
    SHARED[kind as usize].get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let env = rt.block_on(async {
            let env = Env::new(kind).await;
            for (op, body) in valid_requests() {
                env.post(op, body).await.ok();
            }
            env
        });
        let client = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        Shared {
            _rt: rt,
            client,
            env,
        }
    })
}

impl Shared {
    /// The valid request of `op` (from [`valid_requests`]) with the key, as bytes.
    fn valid_body(&self, op: &str) -> Vec<u8> {
        let (_, mut body) = valid_requests()
            .into_iter()
            .find(|(o, _)| *o == op)
            .unwrap();
        body["service_key"] = Value::String(self.env.key.clone());
        serde_json::to_vec(&body).unwrap()
    }

    /// Sends `wire` on a fresh connection and reads one answer, or fails the case.
    fn exchange(&self, wire: &Wire) -> Result<Outcome, TestCaseError> {
        let addr = self.env.server.addr;
        self.client
            .block_on(async { tokio::time::timeout(HANG, exchange(addr, wire)).await })
            .map_err(|_| {
                TestCaseError::fail(format!(
                    "neither an answer nor a close within {HANG:?}; request: {:?}",
                    wire.text()
                ))
            })?
            .map_err(|e| TestCaseError::fail(format!("{e}; request: {:?}", wire.text())))
    }

    /// What `POST /api/v1/{op}` answers to `body` sent plainly (`Content-Length`,
    /// `application/json`) with the `Authorization` headers given.
    fn reference(
        &self,
        op: &str,
        body: &[u8],
        authorization: &[Vec<u8>],
    ) -> Result<Answer, TestCaseError> {
        let mut head = format!(
            "POST /api/v1/{op} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        )
        .into_bytes();
        for a in authorization {
            head.extend_from_slice(b"Authorization: ");
            head.extend_from_slice(a);
            head.extend_from_slice(b"\r\n");
        }
        head.extend_from_slice(b"\r\n");
        head.extend_from_slice(body);
        let wire = Wire::whole(head);
        match self.exchange(&wire)? {
            Outcome::Answer(a) => {
                shaped(&a, false)?;
                Ok(a)
            }
            Outcome::Closed => Err(TestCaseError::fail(format!(
                "a plain request was not answered: {:?}",
                wire.text()
            ))),
        }
    }
}

/// A request on the wire: its bytes, in the pieces they are written in.
#[derive(Debug, Clone)]
struct Wire {
    pieces: Vec<Vec<u8>>,
    /// The request is `HEAD`: its answer has no body.
    head: bool,
    /// Shut the write side down after the last piece (a client that gives up).
    close_after: bool,
}

impl Wire {
    fn whole(bytes: Vec<u8>) -> Wire {
        Wire {
            pieces: vec![bytes],
            head: false,
            close_after: false,
        }
    }

    /// `bytes` cut at the positions `cuts` picks.
    fn split(bytes: Vec<u8>, cuts: &[Index]) -> Wire {
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        at.sort_unstable();
        at.dedup();
        let mut pieces = Vec::new();
        let mut from = 0;
        for a in at {
            pieces.push(bytes[from..a].to_vec());
            from = a;
        }
        pieces.push(bytes[from..].to_vec());
        pieces.retain(|p| !p.is_empty());
        Wire {
            pieces,
            head: false,
            close_after: false,
        }
    }

    fn text(&self) -> String {
        let all: Vec<u8> = self.pieces.concat();
        let mut s = String::from_utf8_lossy(&all).into_owned();
        if s.len() > 4000 {
            let mut cut = 4000;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s = format!("{}… ({} bytes)", &s[..cut], all.len());
        }
        s
    }
}

/// What came back on a connection.
#[derive(Debug)]
enum Outcome {
    /// An answer (after any `1xx`).
    Answer(Answer),
    /// The server closed the connection (or reset it) before a byte of an answer.
    Closed,
}

#[derive(Debug)]
struct Answer {
    status: u16,
    /// Names in lower case, in wire order.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// Status and body, the body's `requestId` left out: what two answers to the same
    /// request share.
    fn comparable(&self) -> (u16, Value) {
        let mut body = self.json();
        if let Value::Object(m) = &mut body {
            m.remove("requestId");
        }
        if body.is_null() {
            body = Value::String(String::from_utf8_lossy(&self.body).into_owned());
        }
        (self.status, body)
    }

    fn text(&self) -> String {
        format!(
            "{} {:?} {}",
            self.status,
            self.headers,
            String::from_utf8_lossy(&self.body)
        )
    }
}

async fn exchange(addr: std::net::SocketAddr, wire: &Wire) -> Result<Outcome, String> {
    let mut s = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| format!("nodelay: {e}"))?;
    for p in &wire.pieces {
        // The server may close early (after a protocol error); its answer is still read.
        if s.write_all(p).await.is_err() {
            break;
        }
        tokio::task::yield_now().await;
    }
    if wire.close_after {
        let _ = s.shutdown().await;
    }
    read_answer(&mut s, wire.head).await
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads more bytes into `buf`; `false` at the end of the stream.
async fn fill(s: &mut TcpStream, buf: &mut Vec<u8>) -> Result<bool, String> {
    let mut chunk = [0u8; 16 * 1024];
    match s.read(&mut chunk).await {
        Ok(0) => Ok(false),
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && buf.is_empty() => Ok(false),
        Err(e) => Err(format!(
            "reading the answer: {e} after {:?}",
            String::from_utf8_lossy(buf)
        )),
    }
}

/// Reads one answer (skipping `1xx`), framed by its own headers.
async fn read_answer(s: &mut TcpStream, head_request: bool) -> Result<Outcome, String> {
    let mut buf = Vec::new();
    loop {
        let Some(end) = find(&buf, b"\r\n\r\n") else {
            if fill(s, &mut buf).await? {
                continue;
            }
            if buf.is_empty() {
                return Ok(Outcome::Closed);
            }
            return Err(format!(
                "the connection closed inside an answer's head: {:?}",
                String::from_utf8_lossy(&buf)
            ));
        };
        let head = String::from_utf8(buf[..end].to_vec())
            .map_err(|_| format!("an answer head that is not UTF-8: {buf:?}"))?;
        buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let status: u16 = status_line
            .strip_prefix("HTTP/1.1 ")
            .and_then(|r| r.get(..3))
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("not an HTTP/1.1 status line: {status_line:?}"))?;
        let headers: Vec<(String, String)> = lines
            .map(|l| {
                let (n, v) = l.split_once(':').unwrap_or((l, ""));
                (n.trim().to_ascii_lowercase(), v.trim().to_string())
            })
            .collect();
        if (100..200).contains(&status) {
            continue;
        }
        let a = Answer {
            status,
            headers,
            body: Vec::new(),
        };
        let body = if head_request || status == 204 || status == 304 {
            Vec::new()
        } else if a
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
        {
            read_chunked(s, buf).await?
        } else if let Some(n) = a.header("content-length") {
            let n: usize = n
                .parse()
                .map_err(|_| format!("a bad Content-Length in an answer: {n:?}"))?;
            while buf.len() < n {
                if !fill(s, &mut buf).await? {
                    return Err(format!("the answer's body ended early: {}", a.text()));
                }
            }
            buf.truncate(n);
            buf
        } else {
            while fill(s, &mut buf).await? {}
            buf
        };
        return Ok(Outcome::Answer(Answer { body, ..a }));
    }
}

async fn read_chunked(s: &mut TcpStream, mut buf: Vec<u8>) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find(&buf, b"\r\n") {
                break i;
            }
            if !fill(s, &mut buf).await? {
                return Err("a chunked answer ended early".into());
            }
        };
        let line = String::from_utf8_lossy(&buf[..line_end]).into_owned();
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("a bad chunk size in an answer: {line:?}"))?;
        buf.drain(..line_end + 2);
        if size == 0 {
            return Ok(body);
        }
        while buf.len() < size + 2 {
            if !fill(s, &mut buf).await? {
                return Err("a chunked answer ended early".into());
            }
        }
        body.extend_from_slice(&buf[..size]);
        buf.drain(..size + 2);
    }
}

/// The contract's code of an error status (section 2, and 408 of section 11).
fn code_of(status: u16) -> Option<&'static str> {
    Some(match status {
        400 => "invalid_argument",
        401 => "unauthenticated",
        403 => "permission_denied",
        404 => "not_found",
        405 => "method_not_allowed",
        408 => "request_timeout",
        413 => "payload_too_large",
        414 => "uri_too_long",
        415 => "unsupported_media_type",
        429 => "resource_exhausted",
        431 => "headers_too_large",
        _ => return None,
    })
}

/// The rule of `x-request-id` (contract section 1).
fn valid_request_id(s: &[u8]) -> bool {
    (1..=128).contains(&s.len())
        && s.iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Checks an answer the server shaped: status below 500, a valid `x-request-id`,
/// `application/json`, and on an error the contract's body (no body to `HEAD`) and, on a
/// 405, `Allow`.
fn shaped(a: &Answer, head: bool) -> Result<(), TestCaseError> {
    prop_assert!(a.status < 500, "a 5xx: {}", a.text());
    let rid = a.header("x-request-id");
    prop_assert!(
        rid.is_some_and(|r| valid_request_id(r.as_bytes())),
        "no valid x-request-id: {}",
        a.text()
    );
    prop_assert_eq!(
        a.header("content-type"),
        Some("application/json"),
        "{}",
        a.text()
    );
    if a.status == 405 {
        prop_assert!(
            a.header("allow").is_some(),
            "a 405 without Allow: {}",
            a.text()
        );
    }
    if head {
        prop_assert!(a.body.is_empty(), "a body to HEAD: {}", a.text());
        return Ok(());
    }
    let b = a.json();
    if (200..300).contains(&a.status) {
        prop_assert!(
            b.is_object(),
            "a 2xx that is not a JSON object: {}",
            a.text()
        );
        return Ok(());
    }
    prop_assert_eq!(
        b["code"].as_str(),
        code_of(a.status),
        "not the contract's error: {}",
        a.text()
    );
    prop_assert!(
        b["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{}",
        a.text()
    );
    prop_assert_eq!(&b["error"], &b["message"]);
    prop_assert_eq!(b["requestId"].as_str(), rid, "{}", a.text());
    prop_assert_eq!(b.get("details").is_some(), a.status == 400, "{}", a.text());
    Ok(())
}

/// Checks the answer to a request the HTTP library refused itself (it could not parse
/// it): the status, given the contract's body and an `x-request-id` by the server
/// (contract section 11).
fn bare(a: &Answer, status: u16) -> Result<(), TestCaseError> {
    prop_assert_eq!(a.status, status, "{}", a.text());
    let rid = a.header("x-request-id");
    prop_assert!(rid.is_some(), "{}", a.text());
    prop_assert_eq!(a.header("content-type"), Some("application/json"));
    if a.body.is_empty() {
        // To a HEAD: the head alone.
        prop_assert!(a.header("content-length").is_some_and(|n| n != "0"));
        return Ok(());
    }
    let b = a.json();
    prop_assert_eq!(b["code"].as_str(), code_of(status), "{}", a.text());
    prop_assert_eq!(&b["error"], &b["message"]);
    prop_assert_eq!(b["requestId"].as_str(), rid, "{}", a.text());
    prop_assert_eq!(b.get("details").is_some(), status == 400, "{}", a.text());
    Ok(())
}

fn answer(o: Outcome, wire: &Wire) -> Result<Answer, TestCaseError> {
    match o {
        Outcome::Answer(a) => Ok(a),
        Outcome::Closed => Err(TestCaseError::fail(format!(
            "closed without an answer: {:?}",
            wire.text()
        ))),
    }
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        // Bounds the shrinking of a hang (each step waits `HANG`); no case is timed.
        max_shrink_time: 120_000,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------
// 1. Methods and request targets.

/// A request target (RFC 7230 section 5.3).
#[derive(Debug, Clone)]
enum Target {
    /// origin-form: a path and a query (with its `?`, or empty).
    Origin(String, String),
    /// absolute-form: scheme and authority, path, query.
    Absolute(&'static str, String, String),
    /// asterisk-form.
    Asterisk,
    /// authority-form.
    Authority(&'static str),
    /// An origin-form path of this many bytes, over hyper's URI limit.
    TooLong(usize),
    /// Arbitrary bytes the request-line parser lets through; the URI parser may refuse.
    Odd(String),
}

impl Target {
    fn text(&self) -> String {
        match self {
            Target::Origin(p, q) => format!("{p}{q}"),
            Target::Absolute(a, p, q) => format!("{a}{p}{q}"),
            Target::Asterisk => "*".into(),
            Target::Authority(a) => (*a).into(),
            Target::TooLong(n) => format!("/{}", "a".repeat(n - 1)),
            Target::Odd(s) => s.clone(),
        }
    }

    /// The path the server routes on, or the status hyper refuses the target with itself.
    fn path(&self) -> Result<String, u16> {
        match self {
            Target::Origin(p, _) | Target::Absolute(_, p, _) => Ok(p.clone()),
            Target::Asterisk => Ok("*".into()),
            Target::Authority(_) => Ok(String::new()),
            Target::TooLong(_) => Err(414),
            Target::Odd(s) => warp::http::Uri::try_from(s.as_str())
                .map(|u| u.path().to_string())
                .map_err(|_| 400),
        }
    }
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => Just("POST".to_string()),
        4 => prop::sample::select(&ROUTED[..]).prop_map(str::to_string),
        1 => prop::sample::select(&["TRACE", "CONNECT"][..]).prop_map(str::to_string),
        1 => prop::sample::select(
            &["get", "head", "post", "Post", "pOST", "options", "connect", "trace"][..]
        )
        .prop_map(str::to_string),
        2 => "[!#$%&'*+.^_`|~0-9A-Za-z-]{1,24}",
    ]
}

fn path() -> impl Strategy<Value = String> {
    let op = || prop::sample::select(&OPS[..]);
    prop_oneof![
        4 => op().prop_map(|op| format!("/api/v1/{op}")),
        1 => Just("/healthz".to_string()),
        1 => prop::sample::select(
            &["/api/v1/Nope", "/healthz", "/", "/dashboard", "/dashboard/app.js", "/dashboard/", "/dashboard/nope.js", "/healthz/", "/api/v1", "/api/v1/", "//api/v1/Analytics", "/api/v1//Analytics", "/openapi.json", "/openapi.json/", "/OpenApi.json"][..]
        )
        .prop_map(str::to_string),
        1 => op().prop_map(|op| format!("/api/v1/{op}/")),
        1 => op().prop_map(|op| format!("/api/v1/{}", op.to_lowercase())),
        1 => op().prop_map(|op| format!("/api/v1/%{:02X}{}", op.as_bytes()[0], &op[1..])),
        2 => prop::collection::vec("[A-Za-z0-9._~!$&'()*+,;=:@-]{0,12}|%[0-9A-Fa-f]{2}", 1..5)
            .prop_map(|segs| format!("/{}", segs.join("/"))),
        1 => (1000usize..8000).prop_map(|n| format!("/{}", "a".repeat(n))),
    ]
}

fn query() -> impl Strategy<Value = String> {
    prop::option::weighted(0.25, "[A-Za-z0-9=&%._-]{0,16}")
        .prop_map(|q| q.map_or_else(String::new, |q| format!("?{q}")))
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        6 => (path(), query()).prop_map(|(p, q)| Target::Origin(p, q)),
        2 => (
            prop::sample::select(&["http://x", "http://127.0.0.1:8080", "https://example.com", "HTTP://X"][..]),
            path(),
            query()
        )
            .prop_map(|(a, p, q)| Target::Absolute(a, p, q)),
        1 => Just(Target::Asterisk),
        1 => prop::sample::select(&["127.0.0.1:22", "example.com:443", "x:1", "[::1]:80"][..])
            .prop_map(Target::Authority),
        1 => (65_535usize..65_600).prop_map(Target::TooLong),
        2 => "/[!-~]{0,24}".prop_map(Target::Odd),
    ]
}

/// What a method and a routed path get (the guard, then section 2's order).
#[derive(Debug, PartialEq)]
enum Expect {
    /// `POST` to an operation: the operation's own answer.
    Op(&'static str),
    /// `GET`/`HEAD /healthz`.
    Healthy,
    /// `GET`/`HEAD /openapi.json`.
    Document,
    /// `GET`/`HEAD` of a dashboard file (`/`, `/dashboard`, `/dashboard/app.js`, ...): its
    /// `Content-Type`.
    Page(&'static str),
    /// A contract error: status, code, and the `Allow` of a 405.
    Error(u16, &'static str, Option<&'static str>),
}

fn expect(method: &str, path: &str) -> Expect {
    let page = usage_server::http::dashboard::asset(path);
    let allow = if path == "/healthz" || path == "/openapi.json" || page.is_some() {
        "GET, HEAD"
    } else {
        "POST"
    };
    if !ROUTED.contains(&method) || !path.starts_with('/') {
        return Expect::Error(405, "method_not_allowed", Some(allow));
    }
    if path == "/openapi.json" {
        return if matches!(method, "GET" | "HEAD") {
            Expect::Document
        } else {
            Expect::Error(405, "method_not_allowed", Some(allow))
        };
    }
    if let Some(page) = page {
        return if matches!(method, "GET" | "HEAD") {
            Expect::Page(page.content_type)
        } else {
            Expect::Error(405, "method_not_allowed", Some(allow))
        };
    }
    if path == "/healthz" {
        return if matches!(method, "GET" | "HEAD") {
            Expect::Healthy
        } else {
            Expect::Error(405, "method_not_allowed", Some(allow))
        };
    }
    match path
        .strip_prefix("/api/v1/")
        .and_then(|op| OPS.iter().find(|o| **o == op))
    {
        Some(op) if method == "POST" => Expect::Op(op),
        Some(_) => Expect::Error(405, "method_not_allowed", Some("POST")),
        None => Expect::Error(404, "not_found", None),
    }
}

on_every_store!(sync methods_and_targets_never_fail_the_server);
fn methods_and_targets_never_fail_the_server(kind: TestStore) {
    let s = shared(kind);
    let tally = Tally::default();
    proptest!(config(256), |(method in method(), target in target(), with_body in any::<bool>())| {
        let target_text = target.text();
        let routed = target.path();
        let op = routed
            .as_deref()
            .ok()
            .and_then(|p| p.strip_prefix("/api/v1/"))
            .and_then(|p| OPS.iter().find(|o| **o == p))
            .copied()
            .unwrap_or("Analytics");
        let mut bytes = format!("{method} {target_text} HTTP/1.1\r\nHost: x\r\n").into_bytes();
        if with_body {
            let body = s.valid_body(op);
            bytes.extend_from_slice(
                format!("Content-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len())
                    .as_bytes(),
            );
            bytes.extend_from_slice(&body);
        } else {
            bytes.extend_from_slice(b"\r\n");
        }
        let wire = Wire { head: method == "HEAD", ..Wire::whole(bytes) };
        let a = answer(s.exchange(&wire)?, &wire)?;
        let path = match routed {
            Ok(p) => p,
            Err(status) => {
                tally.add(format!("bare {status}"));
                return bare(&a, status);
            }
        };
        let expected = expect(&method, &path);
        if let Expect::Page(content_type) = expected {
            // An HTML, script or style file, not JSON.
            tally.add(format!("page {}{}", a.status, if wire.head { " to HEAD" } else { "" }));
            prop_assert_eq!(a.status, 200, "{} {}: {}", method, target_text, a.text());
            prop_assert_eq!(a.header("content-type"), Some(content_type));
            prop_assert_eq!(a.header("x-content-type-options"), Some("nosniff"));
            prop_assert!(a.header("x-request-id").is_some_and(|r| valid_request_id(r.as_bytes())));
            prop_assert_eq!(a.body.is_empty(), wire.head);
            return Ok(());
        }
        shaped(&a, wire.head)?;
        tally.add(format!("{}{}", a.status, if wire.head { " to HEAD" } else { "" }));
        let body = a.json();
        match expected {
            Expect::Op(op) if with_body => {
                let reference = s.reference(op, &s.valid_body(op), &[])?;
                prop_assert_eq!(reference.status, 200, "{}", reference.text());
                prop_assert_eq!(a.comparable(), reference.comparable());
            }
            Expect::Op(_) => {
                prop_assert_eq!(a.status, 415, "{}", a.text());
                prop_assert_eq!(&body["code"], "unsupported_media_type");
            }
            Expect::Healthy => {
                prop_assert_eq!(a.status, 200, "{}", a.text());
                if !wire.head {
                    prop_assert_eq!(body, serde_json::json!({"status": "ok", "unreadable_records": 0}));
                }
            }
            Expect::Page(_) => unreachable!("answered above"),
            Expect::Document => {
                prop_assert_eq!(a.status, 200, "{}", a.text());
                if !wire.head {
                    prop_assert_eq!(&body["openapi"], "3.1.0");
                }
            }
            Expect::Error(status, code, allow) => {
                prop_assert_eq!(a.status, status, "{} {}: {}", method, target_text, a.text());
                if !wire.head {
                    prop_assert_eq!(&body["code"], code);
                }
                prop_assert_eq!(a.header("allow"), allow, "{}", a.text());
            }
        }
    });
    tally.print("methods and targets", kind);
}

// ---------------------------------------------------------------------------------------
// 2. Header sets.

/// Stands for the team's key in generated header values.
const KEY: &str = "{key}";

/// How a case frames its body, before the headers are shuffled.
#[derive(Debug, Clone)]
enum Length {
    /// `Content-Length` of the body.
    Exact,
    /// No framing header: the body is sent all the same (and read as the next request).
    Missing,
    /// `Content-Length` this many bytes short of the body (at most its length).
    Smaller(Index),
    /// `Content-Length` this many bytes over the body; the client then gives up.
    Larger(u64),
    /// Two equal `Content-Length`s.
    Twice,
    /// Two different `Content-Length`s.
    Differing,
    /// A `Content-Length` that is not a number.
    Garbage(&'static str),
    /// `Transfer-Encoding` with this value, and maybe a `Content-Length` too.
    Te(&'static str, Option<&'static str>),
}

/// A request body.
#[derive(Debug, Clone)]
enum Body {
    /// The operation's valid request, with the key.
    Valid,
    /// The operation's valid request without a key (an `Authorization` may give it).
    NoKey,
    /// Arbitrary bytes.
    Bytes(Vec<u8>),
}

impl Shared {
    fn body(&self, op: &str, body: &Body) -> Vec<u8> {
        match body {
            Body::Valid => self.valid_body(op),
            Body::NoKey => {
                let (_, v) = valid_requests()
                    .into_iter()
                    .find(|(o, _)| *o == op)
                    .unwrap();
                serde_json::to_vec(&v).unwrap()
            }
            Body::Bytes(b) => b.clone(),
        }
    }
}

#[derive(Debug, Clone)]
struct HeaderCase {
    op: &'static str,
    body: Body,
    length: Length,
    /// Every other header; shuffled with the framing headers.
    headers: Vec<(String, Vec<u8>)>,
    /// Where the framing headers go among the others.
    order: Vec<Index>,
}

fn content_type() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::sample::select(
            &[
                "application/json",
                "Application/JSON; charset=utf-8",
                "application/json;foo=bar",
                " application/json ",
                "text/plain",
                "application/jsonx",
                "text/json",
                "",
                "application/json; x=\u{e9}",
                "multipart/form-data; boundary=x",
            ][..]
        )
        .prop_map(|s| s.as_bytes().to_vec()),
        1 => "[ -~]{0,24}".prop_map(String::into_bytes),
    ]
}

/// `Content-Type` headers: mostly led by a JSON one, so that the other headers matter.
fn content_types() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let json = prop::sample::select(
        &[
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/json;foo=bar",
            "APPLICATION/JSON ;",
            "application/json; x=\u{e9}",
        ][..],
    )
    .prop_map(|s| s.as_bytes().to_vec());
    prop_oneof![
        3 => (json, prop::collection::vec(content_type(), 0..=1)).prop_map(|(first, rest)| {
            let mut all = vec![first];
            all.extend(rest);
            all
        }),
        1 => prop::collection::vec(content_type(), 0..=2),
    ]
}

fn authorization() -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(
        &[
            "Bearer {key}",
            "bearer {key}",
            "BEARER   {key}  ",
            "Bearer nope",
            "Bearer",
            "Bearer ",
            "Basic dXNlcjpwYXNz",
            "",
            "Bearer \u{43a}\u{43b}\u{44e}\u{447}",
            "{key}",
        ][..],
    )
    .prop_map(|s| s.as_bytes().to_vec())
}

fn request_id() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => "[A-Za-z0-9._:-]{1,128}",
        1 => "[A-Za-z0-9._:-]{129,160}",
        2 => "[A-Za-z0-9 /+=,!#]{1,24}",
        1 => prop::sample::select(&["", "r\u{e9}q-1", "\u{6f22}\u{5b57}", "a b", "req id"][..])
            .prop_map(str::to_string),
    ]
    .prop_map(String::into_bytes)
}

fn other_header() -> impl Strategy<Value = (String, Vec<u8>)> {
    let name = prop_oneof![
        3 => "x-[a-z0-9-]{1,16}",
        1 => "[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}",
        2 => prop::sample::select(
            &[
                "Accept",
                "Accept-Encoding",
                "User-Agent",
                "Cookie",
                "Expect",
                "Connection",
                "Upgrade",
                "Cache-Control",
                "X-Forwarded-For",
                "Host",
                "Content-Encoding",
                "Trailer",
                "TE",
            ][..]
        )
        .prop_map(str::to_string),
    ]
    .prop_filter("a header the case sets itself", |n| {
        ![
            "content-length",
            "transfer-encoding",
            "content-type",
            "authorization",
            "x-request-id",
        ]
        .contains(&n.to_ascii_lowercase().as_str())
    });
    let value = prop_oneof![
        2 => "[!-~]([ -~]{0,30}[!-~])?".prop_map(String::into_bytes),
        2 => prop::sample::select(
            &[
                "100-continue",
                "close",
                "keep-alive",
                "Upgrade",
                "websocket",
                "gzip, br",
                "application/json",
                "text/html;q=0.9, */*;q=0.1",
                "trailers",
                "",
                "\u{e9} \u{fc} \u{6f22}\u{5b57}",
            ][..]
        )
        .prop_map(|s| s.as_bytes().to_vec()),
        1 => prop::collection::vec(0x80u8..=0xff, 1..12),
    ];
    (name, value)
}

fn length() -> impl Strategy<Value = Length> {
    prop_oneof![
        4 => Just(Length::Exact),
        1 => Just(Length::Missing),
        1 => any::<Index>().prop_map(Length::Smaller),
        1 => (1u64..64).prop_map(Length::Larger),
        1 => Just(Length::Twice),
        1 => Just(Length::Differing),
        1 => prop::sample::select(&["abc", "-1", "+5", "1e3", "0x10", "5,5", "", "\u{661}"][..])
            .prop_map(Length::Garbage),
        3 => (
            prop::sample::select(
                &["chunked", "Chunked", "gzip, chunked", "chunked, gzip", "gzip", "identity"][..]
            ),
            prop::option::of(prop::sample::select(&["0", "5", "99999", "abc"][..]))
        )
            .prop_map(|(te, cl)| Length::Te(te, cl)),
    ]
}

fn header_case() -> impl Strategy<Value = HeaderCase> {
    let body = prop_oneof![
        3 => Just(Body::Valid),
        2 => Just(Body::NoKey),
        2 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Body::Bytes),
    ];
    (
        prop::sample::select(&OPS[..]),
        body,
        length(),
        content_types(),
        prop::collection::vec(authorization(), 0..=2),
        prop::collection::vec(request_id(), 0..=2),
        prop_oneof![
            6 => prop::collection::vec(other_header(), 0..8),
            1 => prop::collection::vec(other_header(), 92..104),
        ],
        0usize..=2,
        prop::collection::vec(any::<Index>(), 4),
    )
        .prop_flat_map(
            |(op, body, length, cts, auths, rids, others, hosts, order)| {
                let mut headers: Vec<(String, Vec<u8>)> = Vec::new();
                headers.extend((0..hosts).map(|_| ("Host".to_string(), b"x".to_vec())));
                headers.extend(cts.into_iter().map(|v| ("Content-Type".to_string(), v)));
                headers.extend(auths.into_iter().map(|v| ("Authorization".to_string(), v)));
                headers.extend(rids.into_iter().map(|v| ("X-Request-Id".to_string(), v)));
                headers.extend(others);
                // Shuffled, then the framing headers are put among them at `order`.
                (
                    Just(headers).prop_shuffle(),
                    Just((op, body, length, order)),
                )
            },
        )
        .prop_map(|(headers, (op, body, length, order))| HeaderCase {
            op,
            body,
            length,
            headers,
            order,
        })
}

/// How hyper delimits a request body given its headers in wire order (RFC 7230 section
/// 3.3.3 as hyper applies it): `Err` when the framing is refused (hyper answers 400).
#[derive(Debug, PartialEq)]
enum Framing {
    Chunked,
    Length(usize),
    Empty,
}

fn framing(headers: &[(String, Vec<u8>)]) -> Result<Framing, ()> {
    let (mut te, mut te_chunked, mut cl) = (false, false, None::<usize>);
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("transfer-encoding") {
            te = true;
            cl = None;
            te_chunked = std::str::from_utf8(value).is_ok_and(|v| {
                v.rsplit(',')
                    .next()
                    .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"))
            });
        } else if name.eq_ignore_ascii_case("content-length") && !te {
            let n = std::str::from_utf8(value)
                .ok()
                .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|v| v.parse::<usize>().ok())
                .ok_or(())?;
            if cl.is_some_and(|prev| prev != n) {
                return Err(());
            }
            cl = Some(n);
        }
    }
    match (te, te_chunked, cl) {
        (true, false, _) => Err(()),
        (true, true, _) => Ok(Framing::Chunked),
        (false, _, Some(n)) => Ok(Framing::Length(n)),
        (false, _, None) => Ok(Framing::Empty),
    }
}

/// `body` as chunks of up to 7 bytes and the last chunk.
fn chunked(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in body.chunks(7) {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// `bytes` with every [`KEY`] replaced by `key`.
fn with_key(bytes: &[u8], key: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    while let Some(i) = find(rest, KEY.as_bytes()) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(key.as_bytes());
        rest = &rest[i + KEY.len()..];
    }
    out.extend_from_slice(rest);
    out
}

impl HeaderCase {
    /// The framing headers of `length` for a body of `n` bytes, and whether the client
    /// gives up after sending.
    fn framing_headers(&self, n: usize) -> (Vec<(String, Vec<u8>)>, bool) {
        let cl = |v: String| ("Content-Length".to_string(), v.into_bytes());
        match &self.length {
            Length::Exact => (vec![cl(n.to_string())], false),
            Length::Missing => (vec![], false),
            Length::Smaller(i) => (vec![cl(i.index(n + 1).to_string())], false),
            Length::Larger(k) => (vec![cl((n as u64 + k).to_string())], true),
            Length::Twice => (vec![cl(n.to_string()), cl(n.to_string())], false),
            Length::Differing => (vec![cl(n.to_string()), cl((n + 1).to_string())], false),
            Length::Garbage(g) => (vec![cl((*g).to_string())], false),
            Length::Te(te, len) => {
                let mut h = vec![("Transfer-Encoding".to_string(), te.as_bytes().to_vec())];
                h.extend(len.map(|l| cl(l.to_string())));
                (h, false)
            }
        }
    }
}

/// The media type of the first `Content-Type` is `application/json` (contract section 1).
fn json_content_type(headers: &[(String, Vec<u8>)]) -> bool {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
        .is_some_and(|(_, v)| {
            String::from_utf8_lossy(v)
                .split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        })
}

on_every_store!(sync header_sets_never_fail_the_server);
fn header_sets_never_fail_the_server(kind: TestStore) {
    let s = shared(kind);
    let tally = Tally::default();
    proptest!(config(256), |(case in header_case())| {
        let body = s.body(case.op, &case.body);
        let (framing_headers, close_after) = case.framing_headers(body.len());
        let mut headers: Vec<(String, Vec<u8>)> = case
            .headers
            .iter()
            .map(|(n, v)| (n.clone(), with_key(v, &s.env.key)))
            .collect();
        for (h, at) in framing_headers.into_iter().zip(&case.order) {
            let i = at.index(headers.len() + 1);
            headers.insert(i, h);
        }
        let framing = framing(&headers);
        let mut bytes = format!("POST /api/v1/{} HTTP/1.1\r\n", case.op).into_bytes();
        for (n, v) in &headers {
            bytes.extend_from_slice(n.as_bytes());
            bytes.extend_from_slice(b": ");
            bytes.extend_from_slice(v);
            bytes.extend_from_slice(b"\r\n");
        }
        bytes.extend_from_slice(b"\r\n");
        if framing == Ok(Framing::Chunked) {
            bytes.extend_from_slice(&chunked(&body));
        } else {
            bytes.extend_from_slice(&body);
        }
        let wire = Wire { close_after, ..Wire::whole(bytes) };
        let outcome = s.exchange(&wire)?;
        if headers.len() > MAX_HEADERS {
            tally.add("too many headers: bare 431");
            return bare(&answer(outcome, &wire)?, 431);
        }
        let received = match framing {
            Err(()) => {
                tally.add("refused framing: bare 400");
                return bare(&answer(outcome, &wire)?, 400);
            }
            Ok(Framing::Length(n)) if n > body.len() => {
                // The body never comes whole: a 400 (it could not be read) or a close.
                prop_assert!(close_after);
                if let Outcome::Answer(a) = outcome {
                    shaped(&a, false)?;
                    prop_assert_eq!(a.status, 400, "{}", a.text());
                    tally.add("short body: 400");
                } else {
                    tally.add("short body: closed");
                }
                return Ok(());
            }
            Ok(Framing::Length(n)) => body[..n].to_vec(),
            Ok(Framing::Chunked) => body,
            Ok(Framing::Empty) => Vec::new(),
        };
        let a = answer(outcome, &wire)?;
        shaped(&a, false)?;
        let sent_rid = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("x-request-id"))
            .map(|(_, v)| v.as_slice());
        let rid = a.header("x-request-id").unwrap_or_default().as_bytes();
        match sent_rid {
            Some(r) if valid_request_id(r) => prop_assert_eq!(rid, r, "not echoed: {}", a.text()),
            Some(r) => prop_assert_ne!(rid, r, "an invalid id echoed: {}", a.text()),
            None => {}
        }
        if !json_content_type(&headers) {
            prop_assert_eq!(a.status, 415, "{}", a.text());
            prop_assert_eq!(&a.json()["code"], "unsupported_media_type");
            tally.add("415");
            return Ok(());
        }
        let authorization: Vec<Vec<u8>> = headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| v.clone())
            .collect();
        let reference = s.reference(case.op, &received, &authorization)?;
        prop_assert_eq!(a.comparable(), reference.comparable(), "request: {:?}", wire.text());
        tally.add(format!("as plainly sent: {}", a.status));
    });
    tally.print("header sets", kind);
}

// ---------------------------------------------------------------------------------------
// 3. Chunked bodies.

/// How a chunked body's framing is broken, if it is.
#[derive(Debug, Clone)]
enum Break {
    None,
    /// The size line of one chunk is this instead.
    Size(Index, &'static str),
    /// The CRLF after one chunk's data is this instead.
    Crlf(Index, &'static str),
    /// One chunk declares this many bytes more than it has; the client then gives up.
    Overlong(Index, u64),
    /// No last chunk; the client gives up.
    NoEnd,
}

#[derive(Debug, Clone)]
struct ChunkCase {
    op: &'static str,
    body: Body,
    /// Chunk sizes, cycled through.
    sizes: Vec<usize>,
    /// Chunk extensions, cycled through.
    extensions: Vec<Option<&'static str>>,
    /// Sizes in lower case hex, upper case, or zero-padded.
    hex: u8,
    trailers: Vec<(String, String)>,
    /// Where the request is cut into separate writes.
    cuts: Vec<Index>,
    brk: Break,
}

fn chunk_case() -> impl Strategy<Value = ChunkCase> {
    (
        prop::sample::select(&OPS[..]),
        prop_oneof![
            2 => Just(Body::Valid),
            1 => prop::collection::vec(any::<u8>(), 0..200).prop_map(Body::Bytes),
        ],
        prop_oneof![
            1 => Just(vec![1usize]),
            3 => prop::collection::vec(1usize..=40, 1..6),
        ],
        prop::collection::vec(
            prop::option::weighted(
                0.3,
                prop::sample::select(
                    &[
                        ";a=b",
                        ";name=\"quoted; value\"",
                        ";x",
                        " ;y=1",
                        "\t;z",
                        ";\u{e9}=1",
                    ][..],
                ),
            ),
            1..4,
        ),
        0u8..3,
        prop::collection::vec(("x-trailer-[a-z]{1,8}", "[!-~]{0,20}"), 0..3),
        prop::collection::vec(any::<Index>(), 0..6),
        prop_oneof![
            4 => Just(Break::None),
            1 => (
                any::<Index>(),
                prop::sample::select(
                    &["zz", "0x5", "-1", "g", "1 2", "ffffffffffffffffffff", "", " 5"][..]
                )
            )
                .prop_map(|(i, g)| Break::Size(i, g)),
            1 => (any::<Index>(), prop::sample::select(&["", "XX", "\n", "\r", "\r\r\n"][..]))
                .prop_map(|(i, r)| Break::Crlf(i, r)),
            1 => (any::<Index>(), 1u64..100).prop_map(|(i, k)| Break::Overlong(i, k)),
            1 => Just(Break::NoEnd),
        ],
    )
        .prop_map(
            |(op, body, sizes, extensions, hex, trailers, cuts, brk)| ChunkCase {
                op,
                body,
                sizes,
                extensions,
                hex,
                trailers,
                cuts,
                brk,
            },
        )
}

impl ChunkCase {
    /// The chunked framing of `body`; whether the framing is broken, and whether the
    /// client gives up after sending it.
    fn encode(&self, body: &[u8]) -> (Vec<u8>, bool, bool) {
        let mut chunks = Vec::new();
        let mut rest = body;
        for size in self.sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (c, r) = rest.split_at((*size).min(rest.len()));
            chunks.push(c);
            rest = r;
        }
        let at = match &self.brk {
            Break::Size(i, _) | Break::Crlf(i, _) | Break::Overlong(i, _) if !chunks.is_empty() => {
                Some(i.index(chunks.len()))
            }
            _ => None,
        };
        let hex = |n: u64| match self.hex {
            0 => format!("{n:x}"),
            1 => format!("{n:X}"),
            _ => format!("{n:06x}"),
        };
        let mut out = Vec::new();
        for (k, c) in chunks.iter().enumerate() {
            let here = at == Some(k);
            let size = match &self.brk {
                Break::Size(_, g) if here => (*g).to_string(),
                Break::Overlong(_, extra) if here => hex(c.len() as u64 + extra),
                _ => hex(c.len() as u64),
            };
            out.extend_from_slice(size.as_bytes());
            let ext = self.extensions[k % self.extensions.len()].unwrap_or("");
            out.extend_from_slice(ext.as_bytes());
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(c);
            match &self.brk {
                Break::Overlong(..) if here => return (out, true, true),
                Break::Crlf(_, r) if here => out.extend_from_slice(r.as_bytes()),
                _ => out.extend_from_slice(b"\r\n"),
            }
        }
        if matches!(self.brk, Break::NoEnd) {
            return (out, true, true);
        }
        out.extend_from_slice(b"0");
        out.extend_from_slice(self.extensions[0].unwrap_or("").as_bytes());
        out.extend_from_slice(b"\r\n");
        for (n, v) in &self.trailers {
            out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        (out, at.is_some(), false)
    }
}

on_every_store!(sync chunked_bodies_never_fail_the_server);
fn chunked_bodies_never_fail_the_server(kind: TestStore) {
    let s = shared(kind);
    let tally = Tally::default();
    proptest!(config(256), |(case in chunk_case())| {
        let body = s.body(case.op, &case.body);
        let (framed, broken, close_after) = case.encode(&body);
        let mut bytes = format!(
            "POST /api/v1/{} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
            case.op
        )
        .into_bytes();
        bytes.extend_from_slice(&framed);
        let wire = Wire { close_after, ..Wire::split(bytes, &case.cuts) };
        let outcome = s.exchange(&wire)?;
        if broken {
            // A body that never arrives whole: a 400 (it could not be read) or a close.
            match outcome {
                Outcome::Answer(a) => {
                    shaped(&a, false)?;
                    prop_assert_eq!(a.status, 400, "request: {:?}: {}", wire.text(), a.text());
                    tally.add("broken: 400");
                }
                Outcome::Closed => tally.add("broken: closed"),
            }
            return Ok(());
        }
        let a = answer(outcome, &wire)?;
        shaped(&a, false)?;
        let reference = s.reference(case.op, &body, &[])?;
        prop_assert_eq!(a.comparable(), reference.comparable(), "request: {:?}", wire.text());
        tally.add(format!("whole: {}", a.status));
    });
    tally.print("chunked bodies", kind);
}

/// How many cases fell in each class: printed (`--nocapture`) to show what a run covered.
#[derive(Default)]
struct Tally(std::sync::Mutex<std::collections::BTreeMap<String, usize>>);

impl Tally {
    fn add(&self, class: impl Into<String>) {
        *self.0.lock().unwrap().entry(class.into()).or_default() += 1;
    }

    fn print(&self, property: &str, kind: TestStore) {
        eprintln!("{property} on {kind:?}: {:?}", self.0.lock().unwrap());
    }
}
