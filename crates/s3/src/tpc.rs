//! HTTP third-party copy as WLCG storage speaks it: `COPY /bucket/key` with `Source: URL`
//! (pull: this gateway fetches the URL into the object) or `Destination: URL` (push: it sends
//! the object there). `TransferHeader<Name>: value` headers become `<Name>: value` on the
//! remote request (a bearer token or presigned URL for the other site); `X-Number-Of-Streams`
//! sets a pull's parallel streams; `RequireChecksumVerification: true` refuses a source that
//! sends no digest. The answer is 202 with a body streamed while the copy runs: a performance
//! marker every interval, then `success: Created` or `failure: <reason>`. The request is
//! authorized like the S3 call it amounts to (a PUT of the object for a pull, a GET for a
//! push), token scopes included; a pull is verified before the object is stored, and stored
//! atomically, so a failed pull never leaves a torn object (an interrupted one resumes). The
//! remote URL must lead where the operator's `OutboundPolicy` allows (not to loopback, private
//! or link-local hosts, nor to this gateway's own listeners, unless allowed): checked before
//! the answer, and again by the transfer's agent on every connection and redirect.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use isthmus_grid::OutboundPolicy;
use isthmus_grid::tpc::{self, Staging, TransferOptions};
use isthmus_store::{GetRequest, HeadRequest, PutRequest, RequestContext, ScopeAccess, Store, StoreError};
use s3s::{Body, S3Request, S3Response, S3Result, s3_error};

use crate::Gateway;
use crate::engine::Placement;
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
        let engine = self.gateway.engine.clone();
        match &direction {
            Direction::Pull(_) => {
                cx.require_scope(ScopeAccess::Create, &bucket, &key).map_err(s3_error)?;
                let b = bucket.clone();
                engine.call(&cx, Placement::Read, move |store, cx| store.head_bucket(cx, &b)).await?;
            }
            Direction::Push(_) => {
                let (b, k) = (bucket.clone(), key.clone());
                engine
                    .call(&cx, Placement::Read, move |store, cx| store.head_object(cx, &b, &k, &HeadRequest::default()))
                    .await?;
            }
        }
        let (policy, url) = (
            self.outbound.clone(),
            match &direction {
                Direction::Pull(url) | Direction::Push(url) => url.clone(),
            },
        );
        // The remote host, as resolved now (the transfer's agent checks each connection again).
        tokio::task::spawn_blocking(move || policy.check_url(&url))
            .await
            .map_err(|e| s3_error!(InternalError, "checking the remote URL: {e}"))?
            .map_err(|refusal| {
                tracing::warn!(%refusal, "third-party copy refused");
                s3_error!(AccessDenied, "third-party copy: {refusal}")
            })?;
        let (lines, rx) = tokio::sync::mpsc::channel::<String>(16);
        let progress = Arc::new(AtomicU64::new(0));
        let task = self.spawn(cx, bucket, key, direction, options, progress.clone());
        let interval = self.marker_interval;
        tokio::spawn(async move {
            let _ = lines.send(marker(0)).await;
            let mut task = task;
            let mut client_here = true;
            let outcome = loop {
                tokio::select! {
                    result = &mut task => break result,
                    () = tokio::time::sleep(interval) => {
                        if client_here && lines.send(marker(progress.load(Ordering::Relaxed))).await.is_err() {
                            tracing::info!("the client left during a third-party copy; the copy goes on");
                            client_here = false;
                        }
                    }
                }
            };
            let last = match outcome {
                Ok(Ok(summary)) => {
                    let _ = lines.send(marker(progress.load(Ordering::Relaxed))).await;
                    tracing::info!(%summary, "third-party copy done");
                    "success: Created\n".to_string()
                }
                Ok(Err(message)) => {
                    tracing::warn!(%message, "third-party copy failed");
                    format!("failure: {message}\n")
                }
                Err(err) => format!("failure: internal error: {err}\n"),
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

    /// Starts the copy on the blocking pool; its result is a summary or why it failed.
    fn spawn(
        &self,
        cx: RequestContext,
        bucket: String,
        key: String,
        direction: Direction,
        options: TransferOptions,
        progress: Arc<AtomicU64>,
    ) -> tokio::task::JoinHandle<Result<String, String>> {
        let engine = self.gateway.engine.clone();
        let staging_dir = self.staging.clone();
        let policy = self.outbound.clone();
        match direction {
            Direction::Pull(source) => {
                let destination = format!("{bucket}/{key}");
                // The download streams run as the gateway (the staging area is the gateway's);
                // the object is stored, as the bytes arrive, as the request's user.
                tokio::task::spawn_blocking(move || {
                    // Staging is named per user: one user's pull never meets another's.
                    let owner = format!("{:?}", cx.principal);
                    let staging =
                        Staging::new(&staging_dir, &owner, &destination, &source).map_err(|e| e.to_string())?;
                    let started = std::time::Instant::now();
                    let store = engine.store();
                    let pulled = tpc::pull_into(&source, &staging, &options, &policy, &progress, |info, bytes| {
                        store_pulled(&store, &cx, &bucket, &key, info, bytes)
                    });
                    tracing::info!(ms = started.elapsed().as_millis() as u64, ok = pulled.is_ok(), "pull ended");
                    match pulled {
                        Ok(verified) => {
                            staging.remove();
                            let size = progress.load(Ordering::Relaxed);
                            let verified = if verified { "checksum verified" } else { "source sent no checksum" };
                            Ok(format!("pulled {size} bytes, {verified}"))
                        }
                        // An interrupted download keeps what it fetched, to resume; bytes that
                        // were refused (a checksum mismatch, a quota) are not worth keeping.
                        Err(err @ (tpc::TransferError::Refused(_) | tpc::TransferError::NoChecksum)) => {
                            staging.remove();
                            Err(err.to_string())
                        }
                        Err(err) => Err(err.to_string()),
                    }
                })
            }
            Direction::Push(destination) => {
                let store = engine.store();
                tokio::task::spawn_blocking(move || {
                    cx.run_as(|| {
                        let mut got = store.get_object(&cx, &bucket, &key, &GetRequest::default())?;
                        let md5 = md5_of_etag(&got.info.etag);
                        let size = got.info.size;
                        tpc::push(&destination, &mut got.body, size, md5, &options, &policy, &progress)
                            .map_err(|e| StoreError::InvalidRequest(e.to_string()))?;
                        Ok(format!("pushed {size} bytes"))
                    })
                    .map_err(|e| e.to_string())
                })
            }
        }
    }
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

/// Stores a pull as `bucket/key`, as the request's user, atomically, checking the bytes
/// against the source's digests on the way (one pass: the store's writer computes the MD5):
/// a mismatch drops the write before it is visible. Says whether a digest was checked.
fn store_pulled(
    store: &Arc<dyn Store>,
    cx: &RequestContext,
    bucket: &str,
    key: &str,
    info: &tpc::PullInfo,
    bytes: &mut dyn std::io::Read,
) -> Result<bool, String> {
    cx.run_as(|| {
        let request = PutRequest { size_hint: Some(info.size), md5_required: true, ..PutRequest::default() };
        let mut writer = store.put_object(cx, bucket, key, request)?;
        let mut verifier = tpc::Verifier::new(&info.digests);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = bytes.read(&mut buf).map_err(StoreError::Io)?;
            if n == 0 {
                break;
            }
            verifier.update(&buf[..n]);
            writer.write_all(&buf[..n])?;
        }
        let verified = verifier.finish(writer.digests().md5).map_err(|e| StoreError::BadDigest(e.to_string()))?;
        writer.commit()?;
        Ok(verified)
    })
    .map_err(|e| match e {
        // The transfer's own words ("checksum mismatch: ..."), not the S3 error's.
        StoreError::BadDigest(message) => message,
        other => other.to_string(),
    })
}
