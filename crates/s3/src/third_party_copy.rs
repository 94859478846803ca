//! HTTP third-party copy as WLCG storage speaks it: `COPY /bucket/key` with `Source: URL`
//! (pull: this gateway fetches the URL into the object) or `Destination: URL` (push: it sends
//! the object there). `TransferHeader<Name>: value` headers become `<Name>: value` on the
//! remote request (a bearer token or presigned URL for the other site); `X-Number-Of-Streams`
//! sets a pull's parallel streams; `RequireChecksumVerification: true` refuses a source that
//! sends no digest. The answer is 202 with a body streamed while the copy runs: a performance
//! marker every interval, then `success: Created` or `failure: [Code: ]<reason>`. The request is
//! authorized like the S3 call it amounts to (a PUT of the object for a pull, a GET for a
//! push), token scopes included; a pull is verified before the object is stored, and stored
//! atomically, so a failed pull never leaves a torn object. The remote URL must lead where the
//! operator's `OutboundPolicy` allows (not to loopback, private or link-local hosts, nor to this
//! gateway's own listeners, unless allowed): checked before the answer, and again by the
//! transfer's agent on every connection and redirect.
//!
//! Copies are bounded work: each holds a `CopySlot` (a gateway-wide and a per-user cap; over
//! either, `503 SlowDown` before anything reaches out), runs on a thread of its own (never on
//! the blocking pool that serves PUT and GET), waits at most the response timeout for a remote
//! answer and ends by its deadline (`RequestTimeout`). A pull's size is admitted before any
//! byte is staged: the object's quota, its staged copy's share of the quota (held while it
//! runs), and free space; its staging has no name and goes with the copy, however it ends.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use isthmus_access::quota::Quotas;
use isthmus_grid::tpc::{self, Remote, Staging, TransferError, TransferOptions};
use isthmus_grid::{CopySlot, CopySlots, OutboundPolicy};
use isthmus_store::{BoxedWriter, GetRequest, HeadRequest, PutRequest, RequestContext, ScopeAccess, StoreError};
use s3s::{Body, S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;
use crate::error::s3_error;

/// Time between performance markers (FTS shows them as progress; it gives up on a transfer
/// that sends none for minutes).
pub const MARKER_INTERVAL: Duration = Duration::from_secs(1);

/// Third-party copy for a gateway.
#[derive(Clone)]
pub struct ThirdPartyCopy {
    pub gateway: Gateway,
    /// Where pulls stage their data (the gateway's internal directory).
    pub staging: PathBuf,
    /// Time between performance markers.
    pub marker_interval: Duration,
    /// Where the gateway may connect for a user.
    pub outbound: Arc<OutboundPolicy>,
    /// The copies running, against the operator's caps and timeouts.
    pub slots: Arc<CopySlots>,
    /// The quotas a pull's staged copy counts against while it runs.
    pub quotas: Option<Arc<Quotas>>,
}

enum Direction {
    Pull(String),
    Push(String),
}

fn header(req: &S3Request<Body>, name: &str) -> Option<String> {
    req.headers.get(name).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_string())
}

/// The bucket and key of a path-style `/bucket/key`.
fn object_of(req: &S3Request<Body>) -> S3Result<(String, String)> {
    let path = percent_encoding::percent_decode_str(req.uri.path()).decode_utf8_lossy().into_owned();
    let (bucket, key) = path.trim_start_matches('/').split_once('/').unwrap_or_default();
    if bucket.is_empty() || key.is_empty() {
        return Err(s3_error!(InvalidRequest, "COPY needs a path-style /bucket/key"));
    }
    Ok((bucket.to_string(), key.to_string()))
}

fn options_of(req: &S3Request<Body>) -> S3Result<TransferOptions> {
    let headers = req
        .headers
        .iter()
        .filter_map(|(name, value)| {
            let name = name.as_str();
            let rest = name.strip_prefix("transferheader")?;
            Some((rest.to_string(), value.to_str().ok()?.to_string()))
        })
        .filter(|(name, _)| !name.is_empty())
        .collect();
    let streams = match header(req, "x-number-of-streams") {
        Some(n) => {
            n.parse::<usize>().map_err(|_| s3_error!(InvalidArgument, "X-Number-Of-Streams must be a number"))?
        }
        None => 1,
    };
    let require_checksum = header(req, "requirechecksumverification").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    Ok(TransferOptions { headers, streams, require_checksum })
}

fn is_remote_url(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

/// A performance marker (the format dCache and XRootD send, which FTS reads).
fn marker(bytes: u64) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format!(
        "Perf Marker\n\tTimestamp: {now}\n\tStripe Index: 0\n\tStripe Bytes Transferred: {bytes}\n\tTotal Stripe Count: 1\nEnd\n"
    )
}

impl Direction {
    fn url(&self) -> &str {
        match self {
            Direction::Pull(url) | Direction::Push(url) => url,
        }
    }
}

/// The line that ends a copy's answer.
fn outcome_line(outcome: Result<String, TransferError>) -> String {
    match outcome {
        Ok(summary) => {
            tracing::info!(%summary, "third-party copy done");
            "success: Created\n".to_string()
        }
        Err(err) => {
            tracing::warn!(error = %err, "third-party copy failed");
            match err.s3_code() {
                Some(code) => format!("failure: {code}: {err}\n"),
                None => format!("failure: {err}\n"),
            }
        }
    }
}

impl ThirdPartyCopy {
    pub async fn handle(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        let cx = self.gateway.cx(&req)?;
        let (bucket, key) = object_of(&req)?;
        let direction = match (header(&req, "source"), header(&req, "destination")) {
            (Some(source), None) if is_remote_url(&source) => Direction::Pull(source),
            (None, Some(destination)) if is_remote_url(&destination) => Direction::Push(destination),
            _ => {
                return Err(s3_error!(
                    InvalidRequest,
                    "COPY needs exactly one of Source: (pull) or Destination: (push), an http(s) URL"
                ));
            }
        };
        let options = options_of(&req)?;
        // Refused now rather than after the data moved: what the copy will need of the caller.
        match &direction {
            Direction::Pull(_) => {
                cx.require_scope(ScopeAccess::Create, &bucket, &key).map_err(s3_error)?;
                let b = bucket.clone();
                self.gateway.read(&cx, move |store, cx| store.head_bucket(cx, &b)).await?;
            }
            Direction::Push(_) => {
                let (b, k) = (bucket.clone(), key.clone());
                self.gateway.read(&cx, move |store, cx| store.head_object(cx, &b, &k, &HeadRequest::default())).await?;
            }
        }
        // A slot before anything reaches out (the name's resolution included), so copies from
        // a source that never answers cannot pile up.
        let user = cx.user_name().unwrap_or("(anonymous)").to_string();
        let slot = self.slots.try_take(&user).map_err(|refusal| {
            tracing::warn!(%user, %refusal, "third-party copy refused");
            s3_error!(SlowDown, "third-party copy: {refusal}")
        })?;
        let (checked_tx, checked_rx) = tokio::sync::oneshot::channel();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let progress = Arc::new(AtomicU64::new(0));
        let (copy, counted) = (self.clone(), progress.clone());
        // The copy's own thread, with the gateway's identity (the staging is the gateway's; the
        // object is read or stored with the request's): never one of the blocking pool's.
        isthmus_store::identity::spawn_gateway_thread("isthmus-tpc", move || {
            // The remote host, as resolved now (the transfer's agent checks each connection again).
            let checked = copy.outbound.check_url(direction.url());
            let allowed = checked.is_ok();
            // No one waits for the answer any more (the client left): nothing is copied.
            if checked_tx.send(checked).is_ok() && allowed {
                let budget = slot.budget();
                let remote =
                    Remote { url: direction.url(), options: &options, policy: &copy.outbound, budget: &budget };
                let cx = cx.with_may_block(true);
                let outcome = match &direction {
                    Direction::Pull(_) => copy.pull(slot, &cx, &bucket, &key, &remote, &counted),
                    Direction::Push(_) => copy.push(&cx, &bucket, &key, &remote, &counted),
                };
                let _ = done_tx.send(outcome);
            }
        })
        .map_err(|err| {
            tracing::error!(error = %err, "cannot start a third-party copy's thread");
            s3_error!(SlowDown, "third-party copy: the gateway cannot start another copy now; retry later")
        })?;
        match checked_rx.await {
            Ok(Ok(())) => {}
            Ok(Err(refusal)) => {
                tracing::warn!(%refusal, "third-party copy refused");
                return Err(s3_error!(AccessDenied, "third-party copy: {refusal}"));
            }
            Err(_) => return Err(s3_error!(InternalError, "third-party copy: the copy's thread ended")),
        }
        let (lines, rx) = tokio::sync::mpsc::channel::<String>(16);
        let interval = self.marker_interval;
        tokio::spawn(async move {
            let _ = lines.send(marker(0)).await;
            let mut done = done;
            let mut client_here = true;
            let outcome = loop {
                tokio::select! {
                    outcome = &mut done => break outcome,
                    () = tokio::time::sleep(interval) => {
                        if client_here && lines.send(marker(progress.load(Ordering::Relaxed))).await.is_err() {
                            tracing::info!("the client left during a third-party copy; the copy goes on until its deadline");
                            client_here = false;
                        }
                    }
                }
            };
            if matches!(outcome, Ok(Ok(_))) {
                let _ = lines.send(marker(progress.load(Ordering::Relaxed))).await;
            }
            let last = match outcome {
                Ok(outcome) => outcome_line(outcome),
                Err(_) => "failure: internal error: the copy's thread ended without an outcome\n".to_string(),
            };
            let _ = lines.send(last).await;
        });
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            let line = rx.recv().await?;
            Some((Ok::<_, std::io::Error>(http_body::Frame::data(Bytes::from(line))), rx))
        });
        let mut resp = S3Response::with_status(
            Body::http_body(http_body_util::StreamBody::new(stream)),
            hyper::StatusCode::ACCEPTED,
        );
        resp.headers.insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("text/plain"));
        Ok(resp)
    }

    /// A push of the object, read as the request's user; its result is a summary.
    fn push(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        remote: &Remote<'_>,
        progress: &AtomicU64,
    ) -> Result<String, TransferError> {
        let store = self.gateway.runner.store();
        let mut got = store.get_object(cx, bucket, key, &GetRequest::default()).map_err(TransferError::Store)?;
        let md5 = md5_of_etag(&got.info.etag);
        let size = got.info.size;
        tpc::push(remote, &mut got.body, size, md5, progress).map(|()| format!("pushed {size} bytes"))
    }

    /// A pull: what the source is, then everything its bytes will need (the object's write and
    /// its quota, as the request's user; the staged copy's share of the quota; free space),
    /// admitted before any byte is staged; then the download, stored as it arrives. `slot` is
    /// held until it ends; its result is a summary.
    fn pull(
        &self,
        mut slot: CopySlot,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        remote: &Remote<'_>,
        progress: &AtomicU64,
    ) -> Result<String, TransferError> {
        let started = std::time::Instant::now();
        let store = self.gateway.runner.store();
        let pulled = (|| {
            let info = tpc::probe(remote)?;
            let request = PutRequest { size_hint: Some(info.size), md5_required: true, ..PutRequest::default() };
            // The store stack's writer writes, commits and (when dropped) discards as the
            // request's user: what it staged sits where the user writes.
            let writer = store.put_object(cx, bucket, key, request).map_err(TransferError::Store)?;
            let _staged_share = match &self.quotas {
                Some(quotas) => quotas.reserve_staging(&*store, cx, bucket, info.size).map_err(staging_quota)?,
                None => None,
            };
            slot.hold_staging(info.size, &self.staging)?;
            let staging = Staging::create(&self.staging)?;
            let verified =
                tpc::fetch_into(remote, &info, &staging, progress, |bytes| store_pulled(writer, &info, bytes))?;
            let verified = if verified { "checksum verified" } else { "source sent no checksum" };
            Ok(format!("pulled {} bytes, {verified}", info.size))
        })();
        tracing::info!(ms = started.elapsed().as_millis() as u64, ok = pulled.is_ok(), "pull ended");
        pulled
    }
}

/// The quota's refusal of a pull's staged copy, saying so.
fn staging_quota(err: StoreError) -> TransferError {
    TransferError::Store(match err {
        StoreError::QuotaExceeded(why) => StoreError::QuotaExceeded(format!(
            "{why} (a third-party pull holds its size once more for its staged copy while it runs)"
        )),
        other => other,
    })
}

/// Whether a GET asks for the object's MD5 (`Want-Digest: md5`, RFC 3230).
pub fn wants_md5_digest(headers: &hyper::HeaderMap) -> bool {
    headers.get("want-digest").and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(',').any(|item| item.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("md5"))
    })
}

/// `Digest: md5=<base64>` for an object whose ETag is its MD5.
pub fn md5_digest_header(etag: &str) -> Option<hyper::header::HeaderValue> {
    use base64::Engine as _;
    let md5 = md5_of_etag(etag)?;
    hyper::header::HeaderValue::from_str(&format!("md5={}", base64::engine::general_purpose::STANDARD.encode(md5))).ok()
}

/// The MD5 an ETag is, for objects written in one piece (multipart ETags are not MD5s).
fn md5_of_etag(etag: &str) -> Option<[u8; 16]> {
    let bytes = hex::decode(etag.trim_matches('"')).ok()?;
    bytes.try_into().ok()
}

/// Stores a pull through its open writer, as the request's user, atomically, checking the
/// bytes against the source's digests on the way (one pass: the store's writer computes the
/// MD5): a mismatch drops the write before it is visible. Says whether a digest was checked.
fn store_pulled(
    mut writer: BoxedWriter,
    info: &tpc::PullInfo,
    bytes: &mut dyn std::io::Read,
) -> Result<bool, TransferError> {
    let mut verifier = tpc::Verifier::new(&info.digests);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = bytes.read(&mut buf).map_err(|err| TransferError::Store(StoreError::Io(err)))?;
        if n == 0 {
            break;
        }
        verifier.update(&buf[..n]);
        writer.write_all(&buf[..n]).map_err(TransferError::Store)?;
    }
    let verified = verifier.finish(writer.digests().md5)?;
    writer.commit().map_err(TransferError::Store)?;
    Ok(verified)
}
