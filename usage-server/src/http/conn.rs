//! Connections: the accept loop, the timeouts of slow and idle clients (contract section
//! 11), graceful shutdown, and the guard that answers every request before warp's router
//! sees it.
//!
//! Each connection runs in its own task with a watchdog. The watchdog reads the
//! connection's [`Phase`]: *idle* from accept and after each answer has been sent,
//! *headers* from the first byte of a request, *request* while the handler runs,
//! *responding* while the answer's body is sent. A connection idle longer than
//! [`Timeouts::idle`], still reading headers [`Timeouts::headers`] after a request's first
//! byte, or sending an answer that made no progress in either direction for
//! [`Timeouts::idle`] (the client reads nothing and sends nothing), is closed: a reader
//! that keeps reading, however slowly, gets the whole answer. Progress of an answer is a
//! write the socket takes, a read, or (on Linux) the peer acknowledging queued bytes: the
//! kernel wakes a writer only once half its send buffer, which grows to megabytes, is
//! free, which a slow reader may take minutes to drain. Body progress is the
//! handler's concern (`read_body`), since only there can a request still get its 408.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tower_service::Service;
use warp::http::{Method, Request};
use warp::reply::Response;

use crate::error::{ApiError, Code};

/// The timeouts of section 11.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From a request's first byte to the end of its headers.
    pub headers: Duration,
    /// The longest wait for the next piece of a body.
    pub body_progress: Duration,
    /// From the end of the headers to the end of the body.
    pub body_total: Duration,
    /// How long a keep-alive connection may wait for its next request.
    pub idle: Duration,
}

/// The most bytes of a request's head read at once: hyper refuses a header section past
/// its buffer (about 408 KiB) only when a read leaves the head incomplete, so a head read
/// in smaller parts is refused (431) whatever the timing of its bytes.
const HEAD_CHUNK: usize = 16 * 1024;

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            headers: Duration::from_secs(10),
            body_progress: Duration::from_secs(10),
            body_total: Duration::from_secs(60),
            idle: Duration::from_secs(60),
        }
    }
}

/// Where a connection is between requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    /// Waiting for a request's first byte.
    Idle = 0,
    /// A request's first byte came; its headers have not all arrived.
    Headers = 1,
    /// A request is with the handler.
    Request = 2,
    /// The answer's body is being sent.
    Responding = 3,
}

/// A connection's phase and when it began, shared by its reader, its service and its
/// watchdog.
struct ConnState {
    born: Instant,
    phase: AtomicU8,
    /// When the phase began, in milliseconds since `born`.
    since_ms: AtomicU64,
    /// Requests with the handler (HTTP/1.1 pipelining may queue more than one).
    in_flight: AtomicU64,
}

impl ConnState {
    fn new() -> ConnState {
        ConnState {
            born: Instant::now(),
            phase: AtomicU8::new(Phase::Idle as u8),
            since_ms: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn set(&self, phase: Phase) {
        self.since_ms.store(self.now_ms(), Ordering::Release);
        self.phase.store(phase as u8, Ordering::Release);
    }

    fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Acquire) {
            0 => Phase::Idle,
            1 => Phase::Headers,
            2 => Phase::Request,
            _ => Phase::Responding,
        }
    }

    /// Bytes arrived: an idle connection starts a request; an answer being sent made
    /// progress.
    fn on_read(&self) {
        match self.phase() {
            Phase::Idle => self.set(Phase::Headers),
            Phase::Responding => self.progress(),
            Phase::Headers | Phase::Request => {}
        }
    }

    /// Bytes went out: an answer being sent made progress (also once its body is done:
    /// the connection may still be writing out what it buffered of it).
    fn on_write(&self) {
        if matches!(self.phase(), Phase::Responding | Phase::Idle) {
            self.progress();
        }
    }

    /// Restarts the clock of the current phase.
    fn progress(&self) {
        self.since_ms.store(self.now_ms(), Ordering::Release);
    }

    /// The handler answered; its body is being sent.
    fn responding(&self) {
        self.set(Phase::Responding);
    }

    fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.set(Phase::Request);
    }

    fn request_answered(&self) {
        if self.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.set(Phase::Idle);
        }
    }

    /// Why the connection must close now, if it must.
    fn expired(&self, t: &Timeouts) -> Option<&'static str> {
        let phase = self.phase();
        let waited = Duration::from_millis(
            self.now_ms() - self.since_ms.load(Ordering::Acquire).min(self.now_ms()),
        );
        match phase {
            Phase::Idle if waited >= t.idle => Some("idle keep-alive connection"),
            Phase::Headers if waited >= t.headers => Some("headers did not arrive in time"),
            Phase::Responding if waited >= t.idle => {
                Some("the answer made no progress: the client reads nothing")
            }
            _ => None,
        }
    }
}

/// The socket's descriptor, for [`unsent`] (Linux only).
#[cfg(target_os = "linux")]
fn raw_fd(stream: &TcpStream) -> Option<std::os::fd::RawFd> {
    use std::os::fd::AsRawFd;
    Some(stream.as_raw_fd())
}

#[cfg(not(target_os = "linux"))]
fn raw_fd(_: &TcpStream) -> Option<i32> {
    None
}

/// The bytes of a socket's send queue the peer has not acknowledged yet (`TIOCOUTQ`), or
/// `None` where that cannot be read: then only the writes the socket takes are progress.
#[cfg(target_os = "linux")]
fn unsent(fd: Option<std::os::fd::RawFd>) -> Option<i32> {
    let fd = fd?;
    let mut n: libc::c_int = 0;
    // SAFETY: `TIOCOUTQ` writes one `c_int` through the pointer, which is valid for the
    // call; `fd` is the socket of the connection whose task makes the call, open until
    // that task ends.
    let r = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut n) };
    (r == 0).then_some(n)
}

#[cfg(not(target_os = "linux"))]
fn unsent(_: Option<i32>) -> Option<i32> {
    None
}

/// Marks a connection's answer as sent when dropped (with the body that carries it).
struct Answered(Arc<ConnState>);

impl Drop for Answered {
    fn drop(&mut self) {
        self.0.request_answered();
    }
}

/// A socket that tells its connection's state when bytes arrive or leave, and that gives
/// the HTTP library's own error answers the contract's body.
struct TimedIo {
    inner: TcpStream,
    state: Arc<ConnState>,
    /// Our answer in place of the library's own, still to be written.
    own: Option<Vec<u8>>,
    /// The request being read is a `HEAD`.
    head: bool,
}

/// The contract's answer to a request the HTTP library refused before any handler saw it
/// (`400`, `414`, `431`: a request line or headers that do not parse or are too large),
/// in place of the library's own, which has no body and no `x-request-id` (contract
/// section 11); to a `HEAD`, the head alone. `None` for other statuses, left as the library
/// wrote them.
fn own_answer(status: u16, head: bool) -> Option<Vec<u8>> {
    let error = match status {
        400 => ApiError::invalid(
            &usage_core::Violation::new(
                usage_core::JsonPath::root(),
                usage_core::Rule::MalformedJson,
                "the request is not valid HTTP/1.1: its request line or headers do not parse",
            )
            .into(),
        ),
        414 => ApiError::new(
            Code::UriTooLong,
            "the request's target is longer than the server reads",
        ),
        431 => ApiError::new(
            Code::HeadersTooLarge,
            "the request's headers are larger than the server reads",
        ),
        _ => return None,
    };
    let rid = crate::auth::new_request_id();
    tracing::debug!(request_id = %rid, status, "a request the HTTP library refused");
    let body = serde_json::to_vec(&error.body(&rid)).ok()?;
    let code = error.code.status();
    let mut out = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\nx-request-id: {rid}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        code.as_u16(),
        code.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes();
    if !head {
        out.extend_from_slice(&body);
    }
    Some(out)
}

impl TimedIo {
    /// Whether `first`, the start of a write, is the library's own answer to a request it
    /// refused: a head without a body, written while no request is with the handler
    /// (its bytes may have come with an earlier request's). Then our answer takes its place, and every
    /// later write of the connection (the rest of the library's) is dropped; the library
    /// closes the connection after it.
    fn intercepts(&mut self, first: &[u8]) -> bool {
        if self.own.is_some() {
            return true;
        }
        let head_only = first.ends_with(b"\r\n\r\n")
            && first
                .windows(21)
                .any(|w| w.eq_ignore_ascii_case(b"\r\ncontent-length: 0\r\n"));
        if !head_only
            || !matches!(self.state.phase(), Phase::Idle | Phase::Headers)
            || self.state.in_flight.load(Ordering::Acquire) != 0
        {
            return false;
        }
        let status = first
            .strip_prefix(b"HTTP/1.1 ")
            .and_then(|rest| rest.get(..3))
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| d.parse::<u16>().ok());
        match status.and_then(|s| own_answer(s, self.head)) {
            Some(answer) => {
                self.own = Some(answer);
                true
            }
            None => false,
        }
    }

    /// Writes what is left of our answer; `Ready(Ok)` once it is all out.
    fn flush_own(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(left) = self.own.as_mut().filter(|o| !o.is_empty()) {
            match Pin::new(&mut self.inner).poll_write(cx, left) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    left.drain(..n);
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for TimedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = if matches!(self.state.phase(), Phase::Idle | Phase::Headers)
            && buf.remaining() > HEAD_CHUNK
        {
            // A request's head is read at most HEAD_CHUNK bytes at a time, so that hyper
            // checks its buffer limit between reads: read whole, a header section larger
            // than the limit that arrived before the first read parsed and was served
            // (431 or 200 by timing).
            let mut chunk = [0u8; HEAD_CHUNK];
            let mut part = ReadBuf::new(&mut chunk);
            let res = Pin::new(&mut self.inner).poll_read(cx, &mut part);
            buf.put_slice(part.filled());
            res
        } else {
            Pin::new(&mut self.inner).poll_read(cx, buf)
        };
        if matches!(res, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            if self.state.phase() == Phase::Idle {
                // A request starts: an answer the library refuses it with has no body if
                // it is a HEAD.
                self.head = buf.filled()[before..].starts_with(b"HEAD ");
            }
            self.state.on_read();
        }
        res
    }
}

impl AsyncWrite for TimedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.intercepts(buf) {
            return self.flush_own(cx).map_ok(|()| buf.len());
        }
        let res = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(res, Poll::Ready(Ok(n)) if n > 0) {
            self.state.on_write();
        }
        res
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.own.is_some() {
            std::task::ready!(self.flush_own(cx))?;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.own.is_some() {
            std::task::ready!(self.flush_own(cx))?;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &b[..]);
        if self.intercepts(first) {
            let total = bufs.iter().map(|b| b.len()).sum();
            return self.flush_own(cx).map_ok(|()| total);
        }
        let res = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(res, Poll::Ready(Ok(n)) if n > 0) {
            self.state.on_write();
        }
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The methods the router knows; any other gets 405 before it (section 11).
const ROUTED: [Method; 7] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::PATCH,
    Method::OPTIONS,
];

/// What the guard answers itself, before the router: a method the router does not route,
/// or a request target that is not a path (`CONNECT host:port`, `OPTIONS *`).
fn refused_before_routing(req: &Request<Incoming>) -> Option<ApiError> {
    let method = req.method();
    if !ROUTED.contains(method) || !req.uri().path().starts_with('/') {
        let path = req.uri().path();
        let allow = if matches!(path, "/healthz" | "/metrics" | super::openapi::PATH)
            || path.starts_with("/api/v2/")
            || super::dashboard::asset(path).is_some()
            || super::reference::asset(path).is_some()
        {
            "GET, HEAD"
        } else {
            "POST"
        };
        return Some(ApiError {
            allow: Some(allow),
            ..ApiError::new(
                Code::MethodNotAllowed,
                format!(
                    "method {} with target `{}` is not served; operations are POST /api/v1/{{operation}}",
                    usage_core::error::echo(method.as_str()),
                    usage_core::error::echo(&req.uri().to_string())
                ),
            )
        });
    }
    None
}

/// The answer of a request the guard refused or whose handling panicked.
fn guard_answer(e: &ApiError) -> Response {
    let rid = crate::auth::new_request_id();
    if e.code == Code::Internal {
        tracing::error!(request_id = %rid, error = %e.message, "internal error before the handler");
    }
    let mut res = e.clone().into_response(&rid);
    super::set_request_id(&mut res, &rid);
    res
}

/// Serves one connection until it closes, times out, or a graceful shutdown ends it.
async fn serve_connection<S>(
    stream: TcpStream,
    service: S,
    timeouts: Timeouts,
    watcher: hyper_util::server::graceful::Watcher,
) where
    S: Service<Request<Incoming>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let state = Arc::new(ConnState::new());
    let fd = raw_fd(&stream);
    let io = TokioIo::new(TimedIo {
        inner: stream,
        state: state.clone(),
        own: None,
        head: false,
    });
    let svc_state = state.clone();
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let mut service = service.clone();
        let state = svc_state.clone();
        state.request_started();
        async move {
            let res = match refused_before_routing(&req) {
                Some(e) => guard_answer(&e),
                None => std::panic::AssertUnwindSafe(async { service.call(req).await })
                    .catch_unwind()
                    .await
                    .map_or_else(
                        |_| {
                            guard_answer(&ApiError::new(
                                Code::Internal,
                                "internal error: the router panicked",
                            ))
                        },
                        |r| match r {
                            Ok(res) => res,
                            Err(never) => match never {},
                        },
                    ),
            };
            state.responding();
            // The answer is done when its body has been sent (or dropped).
            let done = Answered(state);
            Ok::<_, Infallible>(super::streamed::into_wire(res, Box::new(done)))
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, svc);
    let conn = watcher.watch(conn);
    let watchdog = async {
        let tick = (timeouts.headers.min(timeouts.idle) / 10).max(Duration::from_millis(20));
        let mut queued = None;
        loop {
            tokio::time::sleep(tick).await;
            // The reader drained some of what the kernel queued: progress, though the
            // socket may not take more bytes yet (it wakes the writer only once half its
            // buffer, which grows to megabytes, is free).
            if matches!(state.phase(), Phase::Responding | Phase::Idle) {
                let now = unsent(fd);
                if now.is_some_and(|n| n > 0) && now != queued {
                    state.progress();
                }
                queued = now;
            }
            if let Some(why) = state.expired(&timeouts) {
                return why;
            }
        }
    };
    tokio::select! {
        r = conn => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        }
        why = watchdog => tracing::debug!(reason = why, "connection closed"),
    }
}

/// Accepts connections on `listener` and serves each with `service` until `shutdown`
/// resolves; then stops accepting and waits for open connections to finish their
/// requests (the caller bounds the wait).
pub(crate) async fn serve<S>(
    listener: tokio::net::TcpListener,
    service: S,
    timeouts: Timeouts,
    shutdown: impl Future<Output = ()>,
) where
    S: Service<Request<Incoming>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(serve_connection(stream, service.clone(), timeouts, graceful.watcher()));
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    tracing::error!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{Config, spawn};
    use crate::store::memory::MemoryStore;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A guard against a hung test, not a speed limit: far above every timeout used here.
    const HANG: Duration = Duration::from_secs(60);

    fn short() -> Timeouts {
        Timeouts {
            headers: Duration::from_millis(300),
            body_progress: Duration::from_millis(300),
            body_total: Duration::from_secs(2),
            idle: Duration::from_millis(600),
        }
    }

    async fn server(timeouts: Timeouts) -> crate::http::Handle {
        let config = Config {
            timeouts,
            ..Config::default()
        };
        spawn(
            Arc::new(MemoryStore::new()),
            config,
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap()
    }

    /// Sends raw bytes and reads until the server closes the connection.
    async fn exchange(addr: std::net::SocketAddr, raw: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(raw).await.unwrap();
        let mut out = Vec::new();
        tokio::time::timeout(HANG, s.read_to_end(&mut out))
            .await
            .expect("the server closes the connection")
            .unwrap();
        String::from_utf8_lossy(&out).into_owned()
    }

    fn status_line(answer: &str) -> &str {
        answer.lines().next().unwrap_or_default()
    }

    fn json_body(answer: &str) -> serde_json::Value {
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"))
    }

    #[tokio::test]
    async fn unrouted_methods_and_targets_get_405_json() {
        let h = server(Timeouts::default()).await;
        for raw in [
            "CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\nConnection: close\r\n\r\n",
            "TRACE /api/v1/Analytics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "FROB /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "GET /api/v1/Analytics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ] {
            let answer = exchange(h.addr, raw.as_bytes()).await;
            assert!(
                status_line(&answer).starts_with("HTTP/1.1 405"),
                "{raw}: {answer}"
            );
            let lower = answer.to_ascii_lowercase();
            assert!(lower.contains("\r\nx-request-id: "), "{answer}");
            assert!(lower.contains("\r\nallow: "), "{answer}");
            let body = json_body(&answer);
            assert_eq!(body["code"], "method_not_allowed", "{answer}");
            assert_eq!(body["error"], body["message"]);
        }
        let frob = exchange(
            h.addr,
            b"FROB /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(
            frob.to_ascii_lowercase()
                .contains("\r\nallow: get, head\r\n"),
            "{frob}"
        );
        h.shutdown().await;
    }

    /// Contract section 11: what the HTTP library refuses itself (headers too large, a
    /// target too long, a request that does not parse) gets the contract's JSON body and
    /// an `x-request-id` equal to its `requestId`; a good request on a keep-alive
    /// connection is not touched.
    #[tokio::test]
    async fn the_librarys_own_refusals_carry_the_contract_body() {
        let h = server(Timeouts::default()).await;
        let big = "a".repeat(500_000);
        let long = "b".repeat(100_000);
        for (raw, status, code) in [
            (
                format!("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n"),
                "431",
                "headers_too_large",
            ),
            (
                format!("GET /{long} HTTP/1.1\r\nHost: x\r\n\r\n"),
                "414",
                "uri_too_long",
            ),
            ("GARBAGE\r\n\r\n".to_string(), "400", "invalid_argument"),
            (
                "GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n".to_string(),
                "400",
                "invalid_argument",
            ),
            (
                "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n".to_string(),
                "400",
                "invalid_argument",
            ),
        ] {
            let answer = exchange(h.addr, raw.as_bytes()).await;
            assert!(
                status_line(&answer).starts_with(&format!("HTTP/1.1 {status}")),
                "{answer}"
            );
            let body = json_body(&answer);
            assert_eq!(body["code"], code, "{answer}");
            assert_eq!(body["error"], body["message"]);
            assert_eq!(body.get("details").is_some(), status == "400", "{answer}");
            let rid = answer
                .lines()
                .find_map(|l| l.strip_prefix("x-request-id: "))
                .unwrap_or_else(|| panic!("no x-request-id: {answer}"));
            assert_eq!(body["requestId"], rid);
            assert!(
                answer
                    .to_ascii_lowercase()
                    .contains("content-type: application/json")
            );
        }
        // Two good requests on one connection, then a bad one: the good ones untouched.
        let two = exchange(
            h.addr,
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGARBAGE\r\n\r\n",
        )
        .await;
        assert_eq!(two.matches("HTTP/1.1 200").count(), 2, "{two}");
        assert_eq!(two.matches("HTTP/1.1 400").count(), 1, "{two}");
        assert!(two.ends_with("}"), "{two}");
        h.shutdown().await;
    }

    #[tokio::test]
    async fn head_healthz_is_200_without_a_body() {
        let h = server(Timeouts::default()).await;
        let head = exchange(
            h.addr,
            b"HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(status_line(&head).starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            head.ends_with("\r\n\r\n"),
            "a body follows the headers: {head:?}"
        );
        let get = exchange(
            h.addr,
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert_eq!(json_body(&get)["status"], "ok");
        h.shutdown().await;
    }

    #[tokio::test]
    async fn half_sent_headers_are_cut_off_and_do_not_delay_others() {
        let h = server(short()).await;
        let mut slow = TcpStream::connect(h.addr).await.unwrap();
        slow.write_all(b"POST /api/v1/Analytics HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        // Another client is answered while the slow one dribbles.
        let other = exchange(
            h.addr,
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(status_line(&other).starts_with("HTTP/1.1 200"), "{other}");
        let mut out = Vec::new();
        let n = tokio::time::timeout(HANG, slow.read_to_end(&mut out))
            .await
            .expect("the slow connection is closed")
            .unwrap_or(0);
        assert_eq!(
            n,
            0,
            "no answer to half a request: {:?}",
            String::from_utf8_lossy(&out)
        );
        h.shutdown().await;
    }

    #[tokio::test]
    async fn a_body_short_of_its_length_gets_408() {
        let h = server(short()).await;
        let answer = exchange(
            h.addr,
            b"POST /api/v1/Analytics HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"service_key\"",
        )
        .await;
        assert!(status_line(&answer).starts_with("HTTP/1.1 408"), "{answer}");
        let body = json_body(&answer);
        assert_eq!(body["code"], "request_timeout");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .contains("did not arrive in time")
        );
        assert!(body.get("details").is_none());
        h.shutdown().await;
    }

    #[tokio::test]
    async fn idle_connections_close_and_busy_ones_stay() {
        let h = server(short()).await;
        // Never a byte: closed after the idle timeout.
        let mut idle = TcpStream::connect(h.addr).await.unwrap();
        let mut out = Vec::new();
        let n = tokio::time::timeout(HANG, idle.read_to_end(&mut out))
            .await
            .expect("closed")
            .unwrap();
        assert_eq!(n, 0);
        // A keep-alive connection serves several requests, then closes when left idle.
        let mut ka = TcpStream::connect(h.addr).await.unwrap();
        for _ in 0..3 {
            ka.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut buf = [0u8; 1024];
            let n = tokio::time::timeout(HANG, ka.read(&mut buf))
                .await
                .unwrap()
                .unwrap();
            let text = String::from_utf8_lossy(&buf[..n]);
            assert!(text.starts_with("HTTP/1.1 200"), "{text}");
            assert!(
                text.ends_with("{\"status\":\"ok\",\"unreadable_records\":0}"),
                "{text}"
            );
        }
        let mut rest = Vec::new();
        let n = tokio::time::timeout(HANG, ka.read_to_end(&mut rest))
            .await
            .expect("closed")
            .unwrap();
        assert_eq!(n, 0);
        h.shutdown().await;
    }

    #[test]
    fn phases_and_expiry() {
        let t = Timeouts {
            headers: Duration::from_millis(0),
            idle: Duration::from_secs(3600),
            ..Timeouts::default()
        };
        let s = ConnState::new();
        assert_eq!(s.phase(), Phase::Idle);
        assert_eq!(s.expired(&t), None);
        s.on_read();
        assert_eq!(s.phase(), Phase::Headers);
        assert_eq!(s.expired(&t), Some("headers did not arrive in time"));
        s.request_started();
        s.request_started();
        assert_eq!(s.expired(&t), None);
        s.on_read();
        assert_eq!(s.phase(), Phase::Request);
        s.request_answered();
        assert_eq!(s.phase(), Phase::Request);
        s.request_answered();
        assert_eq!(s.phase(), Phase::Idle);
        let idle = Timeouts {
            idle: Duration::from_millis(0),
            ..t
        };
        assert_eq!(s.expired(&idle), Some("idle keep-alive connection"));
        // An answer being sent: progress either way restarts its clock; none closes it.
        let s = ConnState {
            born: Instant::now() - Duration::from_secs(100),
            ..ConnState::new()
        };
        let minute = Timeouts {
            idle: Duration::from_secs(60),
            ..t
        };
        s.request_started();
        s.responding();
        assert_eq!(s.phase(), Phase::Responding);
        assert_eq!(s.expired(&minute), None);
        s.since_ms.store(0, Ordering::Release);
        assert_eq!(
            s.expired(&minute),
            Some("the answer made no progress: the client reads nothing")
        );
        s.on_write();
        assert_eq!(s.expired(&minute), None, "a write is progress");
        s.since_ms.store(0, Ordering::Release);
        s.on_read();
        assert_eq!(
            s.phase(),
            Phase::Responding,
            "a read does not start a request"
        );
        assert_eq!(s.expired(&minute), None, "a read is progress");
        // The body is out of the handler's hands, maybe not yet out of the connection's
        // buffer: a write is still progress.
        s.request_answered();
        assert_eq!(s.phase(), Phase::Idle);
        s.since_ms.store(0, Ordering::Release);
        assert_eq!(s.expired(&minute), Some("idle keep-alive connection"));
        s.on_write();
        assert_eq!(
            s.expired(&minute),
            None,
            "a write after the body is progress"
        );
    }
}
