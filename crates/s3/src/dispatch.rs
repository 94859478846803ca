//! Where an admitted request is answered: by the fast path of anonymous reads
//! (`crate::fast_read`) when it qualifies and succeeds, else by the protocol layer (s3s); and
//! how every answer is finished the same way (the headers that keep active content from
//! running in this origin, `crate::active_content`; complete error bodies; the request id) and
//! logged (refusals at info, server errors at warn, each line with the request's id, method,
//! path and peer).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::header::HeaderName;
use s3s::service::S3Service;

use crate::fast_read::{FastRead, Target};
use crate::metrics::OperationSlot;
use crate::post_policy::Prepared;
use crate::request_facts::RequestId;

static X_AMZ_REQUEST_ID: HeaderName = HeaderName::from_static("x-amz-request-id");

/// One request's answer in the making.
pub(crate) struct Answer {
    inner: S3Service,
    id: RequestId,
    method: hyper::Method,
    uri: hyper::Uri,
    peer: SocketAddr,
    /// Every answer sandboxed (the console's listener).
    sandbox_all: bool,
}

impl Answer {
    pub(crate) fn new<B>(
        inner: S3Service,
        req: &hyper::Request<B>,
        id: RequestId,
        peer: SocketAddr,
        sandbox_all: bool,
    ) -> Self {
        Self { inner, id, method: req.method().clone(), uri: req.uri().clone(), peer, sandbox_all }
    }

    /// Answers `req`: by the fast path when `fast` holds its target and it answers, else by the
    /// protocol layer, untouched. `operation` is named either way, for the metrics and the log;
    /// `start` is when the request came.
    pub(crate) async fn serve(
        self,
        req: hyper::Request<Incoming>,
        fast: Option<(Arc<FastRead>, Target)>,
        operation: &OperationSlot,
        start: Instant,
    ) -> Result<s3s::HttpResponse, s3s::HttpError> {
        if let Some((fast, target)) = fast {
            let name = target.operation();
            if let Some(resp) = fast.answer(target).await {
                operation.set_static(name);
                return Ok(self.finish(resp, None, false, "", start));
            }
        }
        // Boxed: the protocol layer's future is many times the fast path's, and every request's
        // future is moved whole (into its box, through hyper) before it runs.
        Box::pin(self.protocol_layer(req, operation, start)).await
    }

    /// The protocol layer's answer.
    async fn protocol_layer(
        self,
        mut req: hyper::Request<Incoming>,
        operation: &OperationSlot,
        start: Instant,
    ) -> Result<s3s::HttpResponse, s3s::HttpError> {
        req.extensions_mut().insert(operation.clone());
        req.extensions_mut().insert(crate::request_facts::PeerAddress(self.peer));
        let requester = crate::access_log::user_of(&req);
        let (req, body_finished) = crate::expect::track(req);
        let asks_attributes = crate::attributes::is_attributes_request(&req);
        let (req, form) = match crate::post_policy::prepare(req).await.map_err(s3s::HttpError::new)? {
            Prepared::Other(req) => (req, false),
            Prepared::Form(req) => (req, true),
            Prepared::Refused(refusal) => {
                operation.set_static("PostObject");
                let resp = refusal.response(self.id.as_str());
                return Ok(self.finish(resp, body_finished.as_deref(), false, &requester, start));
            }
        };
        match self.inner.call(req).await {
            Ok(mut resp) => {
                if form {
                    crate::post_policy::finish_answer(&mut resp);
                }
                Ok(self.finish(resp, body_finished.as_deref(), asks_attributes, &requester, start))
            }
            Err(err) => {
                let elapsed_us = start.elapsed().as_micros() as u64;
                let (id, method, path, peer) = (self.id.as_str(), self.method.as_str(), self.uri.path(), self.peer);
                tracing::warn!(%id, %method, %path, %peer, elapsed_us, error = ?err, "failed");
                Err(err)
            }
        }
    }

    /// Finishes an answer (whichever path made it) and logs it.
    fn finish(
        &self,
        mut resp: s3s::HttpResponse,
        body_finished: Option<&AtomicBool>,
        asks_attributes: bool,
        requester: &str,
        start: Instant,
    ) -> s3s::HttpResponse {
        let elapsed_us = start.elapsed().as_micros() as u64;
        crate::expect::close_if_unread(&mut resp, body_finished);
        crate::active_content::confine(resp.headers_mut(), self.sandbox_all);
        crate::error_body::complete(&mut resp, self.id.as_str());
        if asks_attributes {
            crate::attributes::unquote_etag(&mut resp);
        }
        resp.headers_mut().insert(X_AMZ_REQUEST_ID.clone(), self.id.header());
        let status = resp.status().as_u16();
        let why = crate::error::take_refusal(&mut resp);
        let (id, method, path, peer) = (self.id.as_str(), self.method.as_str(), self.uri.path(), self.peer);
        if status >= 500 {
            tracing::warn!(%id, %method, %path, %peer, status, elapsed_us, "done");
        } else if status == 401 || status == 403 {
            // One line per refused request: who, and which rule refused (or the error the
            // client got, when no rule said more).
            let (code, message) = crate::error_body::code_and_message(&resp).unwrap_or_default();
            let who = if requester.is_empty() { "anonymous" } else { requester };
            let why = why.unwrap_or(message);
            tracing::info!(%id, %method, %path, %peer, status, who, code, why, "refused");
        } else {
            tracing::debug!(status, elapsed_us, "done");
        }
        resp
    }
}
