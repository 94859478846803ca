//! What the server keeps of each request for the metrics and the access log: its id (returned
//! as `x-amz-request-id`, built on the stack) and the facts gathered before it runs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

pub(crate) struct RequestIds {
    prefix: u32,
    counter: AtomicU64,
}

impl RequestIds {
    pub(crate) fn new() -> Self {
        let mut bytes = [0u8; 4];
        getrandom::fill(&mut bytes).expect("the OS random source works");
        Self { prefix: u32::from_le_bytes(bytes), counter: AtomicU64::new(0) }
    }

    pub(crate) fn next(&self) -> RequestId {
        RequestId::new(self.prefix, self.counter.fetch_add(1, Ordering::Relaxed))
    }
}

/// The address a request came from, for the engine calls' context (notification records name
/// it as `sourceIPAddress`).
#[derive(Clone, Copy)]
pub(crate) struct PeerAddress(pub(crate) SocketAddr);

/// A request's id: the process's random prefix and the request's number, in hex (at least 8
/// digits each), kept on the stack.
#[derive(Clone, Copy)]
pub(crate) struct RequestId {
    digits: [u8; 32],
    len: usize,
}

impl RequestId {
    fn new(prefix: u32, number: u64) -> Self {
        const HEX: &[u8; 16] = b"0123456789ABCDEF";
        let mut digits = [0u8; 32];
        let mut len = 0;
        for (value, width) in
            [(u64::from(prefix), 8), (number, 8usize.max((64 - number.leading_zeros() as usize).div_ceil(4)))]
        {
            for shift in (0..width).rev() {
                digits[len] = HEX[((value >> (shift * 4)) & 0xF) as usize];
                len += 1;
            }
        }
        Self { digits, len }
    }

    pub(crate) fn as_str(&self) -> &str {
        // Hex digits only: always UTF-8.
        std::str::from_utf8(&self.digits[..self.len]).unwrap_or_default()
    }

    /// The `x-amz-request-id` header's value.
    pub(crate) fn header(&self) -> hyper::header::HeaderValue {
        hyper::header::HeaderValue::from_bytes(&self.digits[..self.len]).expect("hex digits are a header value")
    }
}

/// What the metrics and the access log record of a request, gathered before it runs (the user
/// and the path only when there is an access log to write them to).
pub(crate) struct RequestFacts {
    user: String,
    method: hyper::Method,
    path: String,
    bytes_in: u64,
    id: RequestId,
    peer: SocketAddr,
    start: Instant,
    pub(crate) operation: crate::metrics::OperationSlot,
    access_log: Option<Arc<crate::access_log::AccessLog>>,
}

impl RequestFacts {
    pub(crate) fn of<B>(
        req: &hyper::Request<B>,
        id: RequestId,
        peer: SocketAddr,
        start: Instant,
        access_log: Option<Arc<crate::access_log::AccessLog>>,
    ) -> Self {
        let length = |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
        Self {
            user: if access_log.is_some() { crate::access_log::user_of(req) } else { String::new() },
            method: req.method().clone(),
            path: if access_log.is_some() { req.uri().path().to_string() } else { String::new() },
            bytes_in: length("x-amz-decoded-content-length").or_else(|| length("content-length")).unwrap_or(0),
            id,
            peer,
            start,
            operation: crate::metrics::OperationSlot::default(),
            access_log,
        }
    }

    /// Counts the answer (its headers are out; the body's length is its Content-Length).
    pub(crate) fn finish(&self, resp: &s3s::HttpResponse) {
        let elapsed = self.start.elapsed();
        let status = resp.status().as_u16();
        let bytes_out = resp
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let operation = self.operation.name();
        crate::metrics::METRICS.request(operation, status, elapsed, self.bytes_in, bytes_out);
        if let Some(log) = &self.access_log {
            log.write(&crate::access_log::AccessRecord {
                user: &self.user,
                operation,
                method: self.method.as_str(),
                path: &self.path,
                status,
                bytes_in: self.bytes_in,
                bytes_out,
                elapsed,
                request_id: self.id.as_str(),
                peer: self.peer,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_as_the_formatted_ones_did() {
        for (prefix, number) in [(0, 0), (0xDEAD_BEEF, 1), (7, 0xFFFF_FFFF), (1, 0x1_0000_0000), (u32::MAX, u64::MAX)] {
            let id = RequestId::new(prefix, number);
            assert_eq!(id.as_str(), format!("{prefix:08X}{number:08X}"));
            assert_eq!(id.header(), id.as_str());
        }
    }
}
