//! The admin listener (`admin_address`): Prometheus metrics at `/metrics`, liveness at
//! `/health/live` (the process answers) and readiness at `/health/ready` (the data root and
//! every pool answer a listing of their buckets within five seconds). Kept off the S3
//! listener so it can be bound to a private address and scraped without credentials.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use isthmus_store::{RequestContext, Store};
use tokio::net::TcpListener;

/// How long readiness waits for the storage to answer.
const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// Families other parts of the gateway add to `/metrics` (pools, drives).
pub type ExtraMetrics = Arc<dyn Fn() -> String + Send + Sync>;

/// A check of the storage beyond a listing (that every pool's path is still the directory
/// served: not unmounted, not moved away); run off the async workers.
pub type ReadyCheck = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

fn text(status: u16, content_type: &'static str, body: String) -> hyper::Response<Full<Bytes>> {
    let mut resp = hyper::Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(content_type));
    resp
}

async fn ready(store: Arc<dyn Store>, check: ReadyCheck) -> Result<(), String> {
    let check = tokio::task::spawn_blocking(move || {
        store
            .list_buckets(&RequestContext::process())
            .map_err(|e| format!("the storage answers with an error: {e}"))?;
        check()
    });
    match tokio::time::timeout(READY_TIMEOUT, check).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(err))) => Err(err),
        Ok(Err(err)) => Err(format!("the readiness check failed: {err}")),
        Err(_) => Err(format!("the storage did not answer within {}s", READY_TIMEOUT.as_secs())),
    }
}

async fn route(
    req: hyper::Request<Incoming>,
    store: Arc<dyn Store>,
    extra: ExtraMetrics,
    check: ReadyCheck,
) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
    const PLAIN: &str = "text/plain; charset=utf-8";
    if req.method() != hyper::Method::GET && req.method() != hyper::Method::HEAD {
        return Ok(text(405, PLAIN, "only GET\n".into()));
    }
    Ok(match req.uri().path() {
        "/metrics" => {
            let body = tokio::task::spawn_blocking(move || crate::metrics::METRICS.render(&extra()))
                .await
                .unwrap_or_else(|err| format!("# the metrics could not be gathered: {err}\n"));
            text(200, "text/plain; version=0.0.4; charset=utf-8", body)
        }
        "/health/live" => text(200, PLAIN, "live\n".into()),
        "/health/ready" => match ready(store, check).await {
            Ok(()) => text(200, PLAIN, "ready\n".into()),
            Err(reason) => text(503, PLAIN, format!("not ready: {reason}\n")),
        },
        _ => text(404, PLAIN, "not found: /metrics, /health/live, /health/ready\n".into()),
    })
}

/// Serves the admin endpoints on `listener` until `shutdown` resolves.
pub async fn serve_admin(
    listener: TcpListener,
    store: Arc<dyn Store>,
    extra: ExtraMetrics,
    check: ReadyCheck,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let builder = ConnBuilder::new(TokioExecutor::new());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let socket = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => socket,
                Err(err) => {
                    tracing::warn!(error = %err, "admin accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return,
        };
        let (store, extra, check, builder) = (store.clone(), extra.clone(), check.clone(), builder.clone());
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |req| route(req, store.clone(), extra.clone(), check.clone()));
            let socket = crate::idle::IdleTimeout::new(socket, Duration::from_secs(60));
            if let Err(err) = builder.serve_connection(TokioIo::new(socket), service).await {
                tracing::debug!(error = %err, "admin connection ended with an error");
            }
        });
    }
}
