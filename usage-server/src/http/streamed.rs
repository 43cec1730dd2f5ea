//! Answers sent as they are encoded: an export (`Accept: text/csv` or
//! `application/x-ndjson`) is written a chunk of lines at a time while the client reads,
//! with `Transfer-Encoding: chunked`, instead of encoded whole first.
//!
//! The router answers with warp's `Response`, whose body cannot be made from a stream
//! outside warp; so a handler leaves the body empty and puts the chunks' source in the
//! response's extensions ([`stream_body`]), and the connection layer ([`into_wire`]) turns
//! it into the body it sends.
//!
//! A response may also hold things until its body has been sent or dropped ([`hold`]): a
//! team's place for an answer (`gate`), which so bounds the answers a team has in flight,
//! and the connection's own marker that its answer is done (`conn`).

use std::any::Any;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody, combinators::BoxBody};
use hyper::body::{Body, Frame, SizeHint};
use warp::reply::Response;

/// Lines are gathered into chunks of about this many bytes.
pub(crate) const CHUNK_BYTES: usize = 16 << 10;

/// The source of a streamed body, kept in a response's extensions until it is sent.
type Chunks = Box<dyn Iterator<Item = Bytes> + Send + Sync>;

#[derive(Clone)]
struct Streamed(Arc<Mutex<Option<Chunks>>>);

/// What the connection sends: warp's body, or a stream of chunks.
pub(crate) type WireBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// Something kept alive until a body has been sent or dropped.
pub(crate) type Held = Box<dyn Any + Send + Sync>;

/// What a response holds until its body is sent, kept in its extensions until then.
#[derive(Clone, Default)]
struct Holds(Arc<Mutex<Vec<Held>>>);

/// Makes `res` keep `what` until its body has been sent whole or dropped (the client went
/// away).
pub(crate) fn hold(res: &mut Response, what: impl Any + Send + Sync) {
    let holds = res
        .extensions_mut()
        .get_or_insert_default::<Holds>()
        .clone();
    holds
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(Box::new(what));
}

/// A body that drops what it holds once its last frame is out (or when it is dropped).
struct Holding {
    inner: WireBody,
    held: Vec<Held>,
}

impl Body for Holding {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.held.clear();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Makes `res` send `chunks` as its body, each as it is produced.
pub(crate) fn stream_body(
    res: &mut Response,
    chunks: impl Iterator<Item = Bytes> + Send + Sync + 'static,
) {
    res.extensions_mut()
        .insert(Streamed(Arc::new(Mutex::new(Some(Box::new(chunks))))));
}

/// The response as the connection sends it; its body keeps `done`, and what the handler
/// [`hold`]s, until it has been sent.
pub(crate) fn into_wire(res: Response, done: Held) -> hyper::Response<WireBody> {
    let mut held: Vec<Held> = res.extensions().get::<Holds>().map_or_else(Vec::new, |h| {
        std::mem::take(
            &mut *h
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    });
    held.push(done);
    let res = wire(res);
    let (parts, inner) = res.into_parts();
    hyper::Response::from_parts(parts, Holding { inner, held }.boxed())
}

fn wire(res: Response) -> hyper::Response<WireBody> {
    let streamed = res
        .extensions()
        .get::<Streamed>()
        .and_then(|s| s.0.lock().ok().and_then(|mut g| g.take()));
    match streamed {
        Some(chunks) => {
            let (parts, _) = res.into_parts();
            let frames =
                futures_util::stream::iter(chunks.map(|b| Ok::<_, Infallible>(Frame::data(b))));
            let body = StreamBody::new(frames)
                .map_err(|never| match never {})
                .boxed();
            hyper::Response::from_parts(parts, body)
        }
        None => res.map(|b| b.map_err(|e| Box::new(e) as _).boxed()),
    }
}

/// Gathers `lines` (each a whole line) into chunks of about [`CHUNK_BYTES`].
pub(crate) fn chunked(mut lines: impl Iterator<Item = String>) -> impl Iterator<Item = Bytes> {
    std::iter::from_fn(move || {
        let mut chunk = String::new();
        for line in lines.by_ref() {
            chunk.push_str(&line);
            if chunk.len() >= CHUNK_BYTES {
                break;
            }
        }
        (!chunk.is_empty()).then(|| Bytes::from(chunk))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_gather_into_chunks_and_keep_every_byte() {
        let lines: Vec<String> = (0..5_000).map(|i| format!("{i},x\r\n")).collect();
        let whole: String = lines.concat();
        let chunks: Vec<Bytes> = chunked(lines.into_iter()).collect();
        assert!(chunks.len() > 1, "{}", chunks.len());
        assert!(chunks.iter().all(|c| c.len() <= CHUNK_BYTES + 16));
        let joined: Vec<u8> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        assert_eq!(joined, whole.as_bytes());
        assert_eq!(chunked(std::iter::empty()).count(), 0);
    }
}
