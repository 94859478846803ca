//! Requests sent with `Expect: 100-continue` that the gateway answers without an interim
//! `100 Continue`: an empty body (hyper sends no 100 for it) or a body never read (an early
//! error). botocore before 1.43.77 (the aws CLI v1 on PyPI) then keeps the final response's
//! status line for the next response on that connection, misreads it, and waits for the
//! connection to close: 30 s per empty file in `aws s3 sync`. A client that got no 100 may also
//! not have sent the body the connection still owes. So the gateway closes such connections
//! after the answer; a request whose body was read to its end keeps its connection.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::header::{CONNECTION, CONTENT_LENGTH, EXPECT, HeaderValue};

/// A request body that records whether it was read to its end.
pub struct TrackedBody {
    inner: Incoming,
    finished: Arc<AtomicBool>,
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            this.finished.store(true, Ordering::Relaxed);
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

/// The body for s3s, and for `Expect: 100-continue` requests a flag set once it was read whole.
/// An empty body is never read (hyper sends no 100 for it): such a request's flag stays unset.
pub fn track(req: hyper::Request<Incoming>) -> (hyper::Request<s3s::Body>, Option<Arc<AtomicBool>>) {
    if !expects_continue(req.headers()) {
        return (req.map(s3s::Body::from), None);
    }
    let finished = Arc::new(AtomicBool::new(false));
    let empty = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).is_some_and(|v| v.trim() == "0");
    if empty {
        return (req.map(s3s::Body::from), Some(finished));
    }
    let flag = finished.clone();
    (req.map(|inner| s3s::Body::http_body_unsync(TrackedBody { inner, finished })), Some(flag))
}

/// Whether the client waits for `100 Continue` before sending its body.
pub fn expects_continue(headers: &hyper::HeaderMap) -> bool {
    headers.get(EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}

/// Asks hyper to close the connection after `resp` when the request's body was not read whole.
pub fn close_if_unread(resp: &mut s3s::HttpResponse, finished: Option<&AtomicBool>) {
    if finished.is_some_and(|f| !f.load(Ordering::Relaxed)) {
        resp.headers_mut().insert(CONNECTION, HeaderValue::from_static("close"));
    }
}
