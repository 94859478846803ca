//! The HTTP server: accepts connections on hyper, gives every request an id (returned as
//! `x-amz-request-id` and attached to its log lines), and shuts down gracefully.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::service::Service;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::service::S3Service;
use tokio::net::TcpListener;
use tracing::Instrument;

use crate::request_facts::{RequestFacts, RequestIds};

/// How the server listens.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// The longest a client may take to send request headers.
    pub header_timeout: Duration,
    /// How long in-flight requests get to finish on shutdown.
    pub shutdown_grace: Duration,
    /// A connection with nothing read or written for this long is closed.
    pub idle_timeout: Duration,
    /// Accept AWS Signature Version 2 (header and query), which old HPC clients such as libs3
    /// 2.0 use.
    pub accept_sigv2: bool,
    /// Bearer tokens accepted (verified here, before the protocol layer).
    pub grid: crate::bearer::GridAuth,
    /// One line per request, if set.
    pub access_log: Option<Arc<crate::access_log::AccessLog>>,
    /// What this listener does about the web console (`crate::console`): an S3 listener
    /// points to it, the console's own listener serves it.
    pub console: crate::console::Role,
    /// The users, to accept SigV2 bucket requests signed over `/bucket/` (botocore's form;
    /// `crate::sigv2_bucket_slash`); none: such requests are checked as sent.
    pub users: Option<isthmus_session::UserDirectory>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            accept_sigv2: true,
            grid: crate::bearer::GridAuth::default(),
            access_log: None,
            console: crate::console::Role::default(),
            users: None,
        }
    }
}

#[derive(Clone)]
struct LoggedService {
    inner: S3Service,
    ids: Arc<RequestIds>,
    peer: SocketAddr,
    accept_sigv2: bool,
    grid: crate::bearer::GridAuth,
    access_log: Option<Arc<crate::access_log::AccessLog>>,
    console: crate::console::Role,
    users: Option<isthmus_session::UserDirectory>,
    /// Anonymous reads answered without the protocol layer's dispatch (`crate::fast_read`).
    fast: Arc<crate::fast_read::FastRead>,
}

impl Service<hyper::Request<Incoming>> for LoggedService {
    type Response = s3s::HttpResponse;
    type Error = s3s::HttpError;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn call(&self, mut req: hyper::Request<Incoming>) -> Self::Future {
        let id = self.ids.next();
        let start = Instant::now();
        let early = self.early_answer(&mut req, id.as_str());
        let facts = RequestFacts::of(&req, id, self.peer, start, self.access_log.clone());
        if let Some(resp) = early {
            facts.finish(&resp);
            return Box::pin(futures::future::ready(Ok(resp)));
        }
        // At debug level only: a span per request costs ~10% of a small GET. The lines written
        // at info and above carry the same fields themselves (`crate::dispatch`).
        let span = tracing::debug_span!("request", id = %id.as_str(), method = %req.method(), path = %req.uri().path(), peer = %self.peer);
        let sandbox_all = matches!(self.console, crate::console::Role::Site(_));
        // CORS by the bucket's rules, on the S3 listener (the console's serves its own pages).
        let cors = if sandbox_all { None } else { crate::cors_http::CorsAsk::of(&self.fast, &req) };
        if cors.as_ref().is_some_and(crate::cors_http::CorsAsk::is_preflight) {
            let ask = cors.expect("checked just above");
            let fast = self.fast.clone();
            let preflight = async move {
                let mut resp = ask.preflight(&fast, id.as_str()).await;
                resp.headers_mut().insert("x-amz-request-id", id.header());
                facts.operation.set_static("PreflightRequest");
                facts.finish(&resp);
                Ok(resp)
            };
            return Box::pin(preflight.instrument(span));
        }
        let answer = crate::dispatch::Answer::new(self.inner.clone(), &req, id, self.peer, sandbox_all);
        // The console's own listener never takes the fast path (its answers are all sandboxed
        // and it serves pages of its own).
        let fast = if sandbox_all { None } else { self.fast.target(&req).map(|target| (self.fast.clone(), target)) };
        let fast_read = self.fast.clone();
        Box::pin(
            async move {
                let mut result = answer.serve(req, fast, &facts.operation, start).await;
                if let (Ok(resp), Some(ask)) = (&mut result, &cors) {
                    ask.decorate(&fast_read, resp).await;
                }
                if let Ok(resp) = &result {
                    facts.finish(resp);
                }
                result
            }
            .instrument(span),
        )
    }
}

impl LoggedService {
    /// The answer to a request refused before the protocol layer, if it is one (a bad bearer
    /// token, a malformed signing region, an oversized XML body, ...); a good bearer token is
    /// admitted on the way (`bearer::admit`).
    fn early_answer(&self, req: &mut hyper::Request<Incoming>, id: &str) -> Option<s3s::HttpResponse> {
        if header_section_size(req.headers()) > MAX_HEADER_SECTION {
            let message =
                format!("Your request header section exceeds the maximum allowed size ({MAX_HEADER_SECTION} bytes).");
            let extra = format!("<MaxSizeAllowed>{MAX_HEADER_SECTION}</MaxSizeAllowed>");
            let mut resp = crate::error_body::error_response("RequestHeaderSectionTooLarge", &message, &extra, id);
            *resp.status_mut() = hyper::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
            return Some(resp);
        }
        if let Some(resp) = crate::console::answer(req, self.console) {
            return Some(resp);
        }
        // An empty Authorization is no credential: the request is anonymous, and refused as such
        // (403) where anonymous requests are, not as a malformed header (400), as S3 does.
        if req.headers().get(hyper::header::AUTHORIZATION).is_some_and(|v| v.as_bytes().trim_ascii().is_empty()) {
            req.headers_mut().remove(hyper::header::AUTHORIZATION);
        }
        if let Err(refusal) = crate::bearer::admit(req, &self.grid) {
            let mut resp = crate::error_body::error_response(refusal.code, &xml_escape(&refusal.message), "", id);
            *resp.status_mut() = hyper::StatusCode::UNAUTHORIZED;
            let challenge = format!("Bearer error=\"invalid_token\", error_description=\"{}\"", refusal.code);
            if let Ok(value) = hyper::header::HeaderValue::from_str(&challenge) {
                resp.headers_mut().insert(hyper::header::WWW_AUTHENTICATE, value);
            }
            return Some(resp);
        }
        if let Some(region) = unusable_signing_region(req) {
            let message = format!(
                "The authorization header is malformed; the region '{}' is wrong; expecting '{DEFAULT_REGION}'",
                xml_escape(&region)
            );
            let extra = format!("<Region>{DEFAULT_REGION}</Region>");
            let resp = crate::error_body::error_response("AuthorizationHeaderMalformed", &message, &extra, id);
            return Some(resp);
        }
        if oversized_xml_body(req) {
            let resp =
                crate::error_body::error_response("MaxMessageLengthExceeded", "Your request was too big.", "", id);
            return Some(resp);
        }
        if !self.accept_sigv2 && is_sigv2(req) {
            let message =
                "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.";
            let resp = crate::error_body::error_response("InvalidRequest", message, "", id);
            return Some(resp);
        }
        // (Both need the clock, read only for requests that carry a query or a signature.)
        if let Some(message) =
            req.uri().query().and_then(|_| presigned_expiry_out_of_bounds(req, std::time::SystemTime::now()))
        {
            let mut resp = crate::error_body::error_response("AuthorizationQueryParametersError", message, "", id);
            *resp.status_mut() = hyper::StatusCode::FORBIDDEN;
            return Some(resp);
        }
        if let Some(refusal) = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|_| sigv2_header_time_refusal(req, std::time::SystemTime::now()))
        {
            return Some(refusal.response(id));
        }
        if let Some(users) = &self.users {
            crate::sigv2_bucket_slash::accept_bucket_slash(req, users);
        }
        None
    }
}

/// The region of a SigV4 credential scope (header or presigned query) when it is one the
/// protocol layer cannot take, such as the `US` that s3cmd's default configuration signs with.
fn unusable_signing_region<B>(req: &hyper::Request<B>) -> Option<String> {
    let from_header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.starts_with("AWS4-HMAC-SHA256"))
        .and_then(|v| v.split("Credential=").nth(1))
        .map(|c| c.split([',', ' ']).next().unwrap_or_default().to_string());
    let from_query = || {
        req.uri().query()?.split('&').find_map(|pair| {
            let value = pair.strip_prefix("X-Amz-Credential=")?;
            Some(value.replace("%2F", "/").replace("%2f", "/"))
        })
    };
    let credential = from_header.or_else(from_query)?;
    // access-key/date/region/service/aws4_request
    let region = credential.split('/').nth(2)?;
    let usable =
        !region.is_empty() && region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    (!usable).then(|| region.to_string())
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// The largest XML request body accepted (s3s's default limit, which it reports as an internal
/// error; refused here first with the S3 error for it).
pub const MAX_XML_BODY: u64 = 20 << 20;

/// Requests whose body is an XML document (every POST, and PUTs of a subresource such as
/// `?tagging`) declaring more than `MAX_XML_BODY` bytes. Object data (PUT of an object or a
/// part) has no such limit.
fn oversized_xml_body<B>(req: &hyper::Request<B>) -> bool {
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    if declared <= MAX_XML_BODY {
        return false;
    }
    // PUTs with one of these subresources carry an XML document; other PUTs carry data.
    const XML_SUBRESOURCES: [&str; 12] = [
        "tagging",
        "acl",
        "cors",
        "lifecycle",
        "policy",
        "versioning",
        "website",
        "replication",
        "notification",
        "encryption",
        "logging",
        "object-lock",
    ];
    let xml_query = |q: &str| q.split('&').any(|p| XML_SUBRESOURCES.contains(&p.split('=').next().unwrap_or_default()));
    match *req.method() {
        hyper::Method::POST => true,
        hyper::Method::PUT => req.uri().query().is_some_and(xml_query),
        _ => false,
    }
}

/// Requests signed with AWS Signature Version 2, in the header or the query.
fn is_sigv2<B>(req: &hyper::Request<B>) -> bool {
    let header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("AWS "));
    let query = req.uri().query().is_some_and(|q| q.split('&').any(|p| p.starts_with("AWSAccessKeyId=")));
    header || query
}

/// How far a SigV2 header-signed request's date may be from the gateway's clock, as in AWS.
const SIGV2_MAX_SKEW: Duration = Duration::from_secs(15 * 60);

/// Why a SigV2 header-signed request's time is refused.
#[derive(Debug, PartialEq, Eq)]
enum SigV2TimeRefusal {
    /// No `x-amz-date` or `Date` header, or one that is not an HTTP date.
    NoDate,
    /// Further than `SIGV2_MAX_SKEW` from now: the request time and the server time.
    Skewed(String, String),
}

impl SigV2TimeRefusal {
    fn response(&self, id: &str) -> s3s::HttpResponse {
        let mut resp = match self {
            Self::NoDate => crate::error_body::error_response(
                "AccessDenied",
                "AWS authentication requires a valid Date or x-amz-date header",
                "",
                id,
            ),
            Self::Skewed(request, server) => {
                let extra = format!(
                    "<RequestTime>{}</RequestTime><ServerTime>{}</ServerTime><MaxAllowedSkewMilliseconds>{}</MaxAllowedSkewMilliseconds>",
                    xml_escape(request),
                    xml_escape(server),
                    SIGV2_MAX_SKEW.as_millis()
                );
                let message = "The difference between the request time and the current time is too large.";
                crate::error_body::error_response("RequestTimeTooSkewed", message, &extra, id)
            }
        };
        *resp.status_mut() = hyper::StatusCode::FORBIDDEN;
        resp
    }
}

/// A SigV2 header signature covers the request's date but s3s 0.14 does not check it, so a
/// captured request could be replayed forever: the date (`x-amz-date` when present, as it then
/// replaces `Date` in the string to sign, else `Date`) must be within 15 minutes of now. SigV2
/// presigned URLs carry their own `Expires`, which s3s checks.
fn sigv2_header_time_refusal<B>(req: &hyper::Request<B>, now: std::time::SystemTime) -> Option<SigV2TimeRefusal> {
    let header = req.headers().get(hyper::header::AUTHORIZATION)?.to_str().ok()?;
    if !header.starts_with("AWS ") {
        return None;
    }
    let raw = req.headers().get("x-amz-date").or_else(|| req.headers().get(hyper::header::DATE));
    let Some(raw) = raw.and_then(|v| v.to_str().ok()) else {
        return Some(SigV2TimeRefusal::NoDate);
    };
    let Ok(date) = httpdate::parse_http_date(raw.trim()) else {
        return Some(SigV2TimeRefusal::NoDate);
    };
    let skew = date.duration_since(now).or_else(|_| now.duration_since(date)).unwrap_or_default();
    (skew > SIGV2_MAX_SKEW).then(|| SigV2TimeRefusal::Skewed(raw.to_string(), httpdate::fmt_http_date(now)))
}

/// The longest a presigned URL may be valid, in seconds: seven days, as in S3.
const MAX_PRESIGNED_EXPIRY: u64 = 7 * 24 * 3600;

/// Why a presigned URL's validity is refused, if it is: a SigV4 URL's `X-Amz-Expires` below
/// 1 s or over 7 days; a SigV2 URL whose `Expires` (a Unix time; s3s refuses it once past) lies
/// further ahead of `now` than 7 days and the clock skew SigV2 headers are allowed (the URL was
/// made on another clock). Without the SigV2 bound a URL signed for 30 years would be a
/// credential that never expires.
fn presigned_expiry_out_of_bounds<B>(req: &hyper::Request<B>, now: std::time::SystemTime) -> Option<&'static str> {
    let query = req.uri().query()?;
    if let Some(value) = query.split('&').find_map(|p| p.strip_prefix("X-Amz-Expires=")) {
        return match value.parse::<u64>() {
            Ok(seconds) if (1..=MAX_PRESIGNED_EXPIRY).contains(&seconds) => None,
            Ok(0) => Some("X-Amz-Expires must be at least 1 second"),
            Ok(_) => Some("X-Amz-Expires must be less than a week (in seconds) that is 604800"),
            Err(_) => Some("X-Amz-Expires should be a number between 1 and 604800"),
        };
    }
    if !query.split('&').any(|p| p.starts_with("AWSAccessKeyId=")) {
        return None;
    }
    // Not a number: s3s refuses the URL as malformed.
    let expires = query.split('&').find_map(|p| p.strip_prefix("Expires="))?.parse::<u64>().ok()?;
    let now = now.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let latest = now.saturating_add(MAX_PRESIGNED_EXPIRY).saturating_add(SIGV2_MAX_SKEW.as_secs());
    (expires > latest).then_some("Expires must be less than a week (604800 seconds) from now")
}

/// The largest request header section accepted, in bytes (each header's name and value with
/// its `: ` and line end): 400 KiB. hyper stops reading a request head at its read buffer's
/// size (`HEAD_READ_BUFFER`) and answers 431 itself, but it reads in growing steps, so a head
/// a little larger can arrive whole; this bound is the one enforced, exactly, with an error
/// that names it.
pub const MAX_HEADER_SECTION: usize = 400 << 10;

/// hyper's read buffer for a request head (its default, stated): a head that has not ended
/// within it is answered 431 without being read further, so a connection holds at most about
/// this much (and what the last read added) of an unfinished head.
const HEAD_READ_BUFFER: usize = 8192 + 4096 * 100;

// A head just past the bound is read whole, and refused by the gateway with its error.
const _: () = assert!(HEAD_READ_BUFFER > MAX_HEADER_SECTION);

/// The size of a request's header section as sent on the wire (HTTP/1.1): `name: value\r\n`
/// per header.
fn header_section_size(headers: &hyper::HeaderMap) -> usize {
    headers.iter().map(|(name, value)| name.as_str().len() + value.len() + 4).sum()
}

/// The region this gateway reports and expects signatures for when a client names an invalid one.
pub const DEFAULT_REGION: &str = "us-east-1";

/// Serves `service` on `listener` (over TLS with `tls`) until `shutdown` resolves, then lets
/// in-flight requests finish for the configured grace period.
pub async fn serve(
    listener: TcpListener,
    service: crate::GatewayService,
    config: GatewayConfig,
    tls: Option<Arc<crate::tls::TlsFiles>>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut builder = ConnBuilder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout)
        .max_buf_size(HEAD_READ_BUFFER)
        .keep_alive(true);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let ids = Arc::new(RequestIds::new());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (socket, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed");
                    // Out of file descriptors or similar: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = socket.set_nodelay(true);
        let svc = LoggedService {
            inner: service.s3.clone(),
            ids: ids.clone(),
            peer,
            accept_sigv2: config.accept_sigv2,
            grid: config.grid.clone(),
            access_log: config.access_log.clone(),
            console: config.console,
            users: config.users.clone(),
            fast: service.fast.clone(),
        };
        let socket = crate::idle::IdleTimeout::new(socket, config.idle_timeout);
        let (builder, watcher) = (builder.clone(), graceful.watcher());
        let tls = tls.as_ref().map(|files| tokio_rustls::TlsAcceptor::from(files.current()));
        let handshake_timeout = config.header_timeout;
        tokio::spawn(async move {
            let _open = crate::metrics::ConnectionGuard::open();
            let result = match tls {
                None => watcher.watch(builder.serve_connection(TokioIo::new(socket), svc).into_owned()).await,
                Some(acceptor) => match tokio::time::timeout(handshake_timeout, acceptor.accept(socket)).await {
                    Ok(Ok(stream)) => {
                        watcher.watch(builder.serve_connection(TokioIo::new(stream), svc).into_owned()).await
                    }
                    Ok(Err(err)) => {
                        tracing::debug!(%peer, error = %err, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                },
            };
            if let Err(err) = result {
                tracing::debug!(error = %err, "connection ended with an error");
            }
        });
    }
    tracing::info!("shutting down");
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(config.shutdown_grace) => tracing::warn!("in-flight requests did not finish in time"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn sigv2(date_header: Option<(&str, &str)>) -> hyper::Request<()> {
        let mut builder = hyper::Request::get("/b/k").header("authorization", "AWS KEY:c2lnbmF0dXJl");
        if let Some((name, value)) = date_header {
            builder = builder.header(name, value);
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn sigv2_header_requests_outside_fifteen_minutes_are_refused() {
        // Issue 28, finding 7: a captured SigV2 request used to be accepted forever.
        let now = SystemTime::now();
        let at = |offset: i64| {
            let when = if offset >= 0 {
                now + Duration::from_secs(offset as u64)
            } else {
                now - Duration::from_secs((-offset) as u64)
            };
            httpdate::fmt_http_date(when)
        };
        assert_eq!(sigv2_header_time_refusal(&sigv2(Some(("date", &at(0)))), now), None);
        assert_eq!(sigv2_header_time_refusal(&sigv2(Some(("date", &at(-14 * 60)))), now), None);
        assert_eq!(sigv2_header_time_refusal(&sigv2(Some(("x-amz-date", &at(14 * 60)))), now), None);
        for offset in [-16 * 60, 16 * 60, -30 * 24 * 3600] {
            let refused = sigv2_header_time_refusal(&sigv2(Some(("date", &at(offset)))), now);
            assert!(matches!(refused, Some(SigV2TimeRefusal::Skewed(..))), "{offset}");
        }
        // x-amz-date replaces Date in the string to sign: it is the one checked.
        let mut both = sigv2(Some(("date", &at(0))));
        both.headers_mut().insert("x-amz-date", at(-3600).parse().unwrap());
        assert!(matches!(sigv2_header_time_refusal(&both, now), Some(SigV2TimeRefusal::Skewed(..))));
        assert_eq!(sigv2_header_time_refusal(&sigv2(None), now), Some(SigV2TimeRefusal::NoDate));
        assert_eq!(sigv2_header_time_refusal(&sigv2(Some(("date", "yesterday"))), now), Some(SigV2TimeRefusal::NoDate));
        let v4 = hyper::Request::get("/").header("authorization", "AWS4-HMAC-SHA256 Credential=x").body(()).unwrap();
        assert_eq!(sigv2_header_time_refusal(&v4, now), None, "SigV4 is checked by s3s");
        let refusal = SigV2TimeRefusal::Skewed(at(-3600), at(0)).response("id");
        assert_eq!(refusal.status(), hyper::StatusCode::FORBIDDEN);
    }

    #[test]
    fn sigv2_presigned_urls_live_at_most_a_week() {
        // Issue 42, finding 8: `Expires` 10^9 s ahead was accepted.
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let url = |query: &str| hyper::Request::get(format!("/b/k?{query}")).body(()).unwrap();
        let v2 = |expires: u64| url(&format!("AWSAccessKeyId=KEY&Expires={expires}&Signature=c2ln"));
        let week = MAX_PRESIGNED_EXPIRY;
        for ok in [1_800_000_060, 1_800_000_000 + week, 1_800_000_000 + week + 15 * 60, 1] {
            assert_eq!(presigned_expiry_out_of_bounds(&v2(ok), now), None, "{ok}");
        }
        for far in [1_800_000_000 + week + 15 * 60 + 1, 2_800_000_000, u64::MAX] {
            assert!(presigned_expiry_out_of_bounds(&v2(far), now).is_some(), "{far}");
        }
        // `response-expires` is not the URL's expiry; a header-signed request has none.
        assert_eq!(presigned_expiry_out_of_bounds(&url("response-expires=9999999999&x=1"), now), None);
        assert_eq!(presigned_expiry_out_of_bounds(&url("Expires=9999999999"), now), None);
        // SigV4 keeps its bounds on X-Amz-Expires.
        assert!(presigned_expiry_out_of_bounds(&url("X-Amz-Expires=604801"), now).is_some());
        assert_eq!(presigned_expiry_out_of_bounds(&url("X-Amz-Expires=604800"), now), None);
    }

    #[test]
    fn the_header_section_is_measured_as_sent() {
        let mut headers = hyper::HeaderMap::new();
        headers.insert("x-padding", "a".repeat(100).parse().unwrap());
        headers.append("x-padding", "b".parse().unwrap());
        assert_eq!(header_section_size(&headers), (9 + 100 + 4) + (9 + 1 + 4));
    }
}
