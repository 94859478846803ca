//! CORS at the HTTP edge, by the bucket's rules (`crate::cors`, `isthmus_store::cors`): a
//! preflight (`OPTIONS`) is answered here, before the protocol layer (which knows no OPTIONS),
//! with the matching rule's `Access-Control-*` headers or a 403; an actual request carrying an
//! `Origin` gets those headers on its answer when a rule allows its origin and method. Only
//! requests that carry an `Origin` (or are preflights) read the bucket's rules; the browser
//! enforces what the answer says.

use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use isthmus_store::{BucketSettings, CorsRule, RequestContext};

use crate::fast_read::FastRead;

static ACCESS_CONTROL_REQUEST_METHOD: HeaderName = header::ACCESS_CONTROL_REQUEST_METHOD;
static ACCESS_CONTROL_REQUEST_HEADERS: HeaderName = header::ACCESS_CONTROL_REQUEST_HEADERS;
/// The most request headers a preflight may name (a browser names the few a script set).
const MAX_ASKED_HEADERS: usize = 64;

/// What a request asks of a bucket's CORS rules.
pub(crate) struct CorsAsk {
    bucket: Option<String>,
    origin: Option<String>,
    /// A preflight: the method and the headers the actual request will use.
    preflight: Option<(String, Vec<String>)>,
    /// An actual request's method.
    method: String,
}

impl CorsAsk {
    /// What `req` asks: a preflight (any OPTIONS), or an actual request with an `Origin`;
    /// `None` for everything else (no CORS work at all).
    pub(crate) fn of<B>(fast: &FastRead, req: &hyper::Request<B>) -> Option<Self> {
        let headers = req.headers();
        let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()).map(str::to_string);
        let is_preflight = req.method() == hyper::Method::OPTIONS;
        if origin.is_none() && !is_preflight {
            return None;
        }
        let preflight = is_preflight.then(|| {
            let method = text(headers, &ACCESS_CONTROL_REQUEST_METHOD).unwrap_or_default().to_string();
            let asked = text(headers, &ACCESS_CONTROL_REQUEST_HEADERS).unwrap_or_default();
            let asked = asked.split(',').map(|h| h.trim().to_ascii_lowercase()).filter(|h| !h.is_empty());
            (method, asked.take(MAX_ASKED_HEADERS + 1).collect())
        });
        Some(Self { bucket: fast.bucket_of(req), origin, preflight, method: req.method().as_str().to_string() })
    }

    pub(crate) fn is_preflight(&self) -> bool {
        self.preflight.is_some()
    }

    /// The bucket's rule for this request (`Err` with S3's reason when there is none).
    async fn rule(&self, fast: &FastRead) -> Result<CorsRule, &'static str> {
        let Some(bucket) = self.bucket.clone() else { return Err(NOT_ALLOWED) };
        let (origin, method, asked) = match (&self.origin, &self.preflight) {
            (Some(origin), Some((method, asked))) if !method.is_empty() => (origin, method.as_str(), asked.as_slice()),
            (Some(origin), None) => (origin, self.method.as_str(), &[][..]),
            _ => return Err(INSUFFICIENT),
        };
        if asked.len() > MAX_ASKED_HEADERS {
            return Err(NOT_ALLOWED);
        }
        // The rules are the bucket's settings, read as the gateway itself: a preflight carries
        // no credentials, and its answer says only what the owner chose to publish.
        let gateway_cx = RequestContext::process();
        let rules = fast.gateway().read(&gateway_cx, move |store, cx| store.bucket_cors(cx, &bucket)).await;
        let config = match rules {
            Ok(Some(config)) => config,
            Ok(None) => return Err(NOT_ENABLED),
            Err(_) => return Err(NOT_ALLOWED),
        };
        let asked: Vec<&str> = asked.iter().map(String::as_str).collect();
        config.matching(origin, method, &asked).cloned().ok_or(NOT_ALLOWED)
    }

    /// The answer to a preflight.
    pub(crate) async fn preflight(&self, fast: &FastRead, request_id: &str) -> s3s::HttpResponse {
        match self.rule(fast).await {
            Ok(rule) => {
                let mut resp = hyper::Response::new(s3s::Body::empty());
                self.allow(&rule, resp.headers_mut());
                if let Some((_, asked)) = &self.preflight
                    && !asked.is_empty()
                    && let Ok(value) = HeaderValue::from_str(&asked.join(", "))
                {
                    resp.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_HEADERS, value);
                }
                if let Some(age) = rule.max_age_seconds {
                    resp.headers_mut().insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(age));
                }
                resp
            }
            Err(message) => {
                let (code, status) = if message == INSUFFICIENT {
                    ("BadRequest", hyper::StatusCode::BAD_REQUEST)
                } else {
                    ("AccessForbidden", hyper::StatusCode::FORBIDDEN)
                };
                let mut resp = crate::error_body::error_response(code, message, "", request_id);
                *resp.status_mut() = status;
                resp
            }
        }
    }

    /// Adds the rule's headers to an actual request's answer, when a rule allows it.
    pub(crate) async fn decorate(&self, fast: &FastRead, resp: &mut s3s::HttpResponse) {
        if let Ok(rule) = self.rule(fast).await {
            self.allow(&rule, resp.headers_mut());
        }
    }

    /// The headers every allowed CORS answer carries.
    fn allow(&self, rule: &CorsRule, headers: &mut HeaderMap) {
        let any_origin = rule.allowed_origins.iter().any(|o| o == "*");
        let origin = if any_origin { "*" } else { self.origin.as_deref().unwrap_or("*") };
        if let Ok(value) = HeaderValue::from_str(origin) {
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        }
        if !any_origin {
            headers.insert(header::ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
        }
        if let Ok(value) = HeaderValue::from_str(&rule.allowed_methods.join(", ")) {
            headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, value);
        }
        if !rule.expose_headers.is_empty()
            && let Ok(value) = HeaderValue::from_str(&rule.expose_headers.join(", "))
        {
            headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, value);
        }
        headers.append(
            header::VARY,
            HeaderValue::from_static("Origin, Access-Control-Request-Headers, Access-Control-Request-Method"),
        );
    }
}

fn text<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// S3's messages for a refused preflight.
const INSUFFICIENT: &str = "Insufficient information. Origin request header needed.";
const NOT_ENABLED: &str = "CORSResponse: CORS is not enabled for this bucket.";
const NOT_ALLOWED: &str = "CORSResponse: This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.";
