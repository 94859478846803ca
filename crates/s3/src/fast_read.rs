//! The fast path of anonymous reads. An unsigned GET or HEAD of an object by path, with no
//! query and no header beyond the few that change nothing in an S3 answer (`PLAIN_HEADERS`),
//! skips the protocol layer's generic dispatch (routing, signature scaffolding, the input and
//! output structs of ~40 fields moved through its layers), which costs more CPU than the file
//! system calls of a small object. It is answered by the same code the protocol layer calls
//! for it: the same request context for the anonymous requester (`Gateway::context`), the same
//! engine call through the authorization layer (bucket ACL and policy, public access block,
//! object ACL, quotas: `object::plain_get`, `object::plain_head`) and the same output fields,
//! written here in the order and form the protocol layer writes them. Anything else, and every
//! engine error or refusal, goes down the normal path untouched (the engine call is simply made
//! again there), so errors are answered, counted and logged by the one code that always did.
//! The server finishes both paths' answers alike (`dispatch`).

use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use s3s::dto::{GetObjectOutput, HeadObjectOutput, Metadata, Timestamp, TimestampFormat};

use crate::Gateway;

/// Request headers that change nothing in the answer to a GET or HEAD: any other header (a
/// signature, `Range`, `If-*`, `x-amz-*`, SSE-C, `Origin`, `Expect`, a body's length...) sends
/// the request down the normal path.
static PLAIN_HEADERS: [HeaderName; 10] = [
    header::HOST,
    header::USER_AGENT,
    header::ACCEPT,
    header::ACCEPT_ENCODING,
    header::ACCEPT_LANGUAGE,
    header::CONNECTION,
    header::CACHE_CONTROL,
    header::PRAGMA,
    header::REFERER,
    HeaderName::from_static("keep-alive"),
];

static X_AMZ_MP_PARTS_COUNT: HeaderName = HeaderName::from_static("x-amz-mp-parts-count");
static X_AMZ_TAGGING_COUNT: HeaderName = HeaderName::from_static("x-amz-tagging-count");
static X_AMZ_VERSION_ID: HeaderName = HeaderName::from_static("x-amz-version-id");

/// The fast path, over the gateway the protocol layer also serves.
pub(crate) struct FastRead {
    gateway: Gateway,
    /// Virtual-hosted-style names are served (a domain is configured): then only requests to
    /// an IP address, which the protocol layer reads as path style, qualify.
    virtual_hosts: bool,
    /// The virtual-hosted domain's names (with the ports served on), as the protocol layer has
    /// them.
    domains: Vec<String>,
}

/// A request the fast path may answer: the object it names, and how.
pub(crate) struct Target {
    bucket: String,
    key: String,
    head: bool,
}

impl Target {
    /// The S3 operation, for the metrics and the access log.
    pub(crate) fn operation(&self) -> &'static str {
        if self.head { "HeadObject" } else { "GetObject" }
    }
}

impl FastRead {
    pub(crate) fn new(gateway: Gateway, domains: Vec<String>) -> Self {
        Self { gateway, virtual_hosts: !domains.is_empty(), domains }
    }

    /// The gateway these requests are answered over.
    pub(crate) fn gateway(&self) -> &Gateway {
        &self.gateway
    }

    /// The bucket a request addresses, read as the protocol layer reads it: the host's first
    /// label under a virtual-hosted domain, else the path's first segment.
    pub(crate) fn bucket_of<B>(&self, req: &hyper::Request<B>) -> Option<String> {
        let host = req.headers().get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if let Some(bucket) = self.domains.iter().find_map(|d| host.strip_suffix(d.as_str())?.strip_suffix('.')) {
            return Some(bucket.to_string());
        }
        let path = urlencoding::decode(req.uri().path()).ok()?;
        match s3s::path::parse_path_style(&path).ok()? {
            s3s::path::S3Path::Object { bucket, .. } | s3s::path::S3Path::Bucket { bucket } => Some(bucket.into()),
            s3s::path::S3Path::Root => None,
        }
    }

    /// The object `req` reads, when it qualifies: GET or HEAD over HTTP/1, no query, only
    /// `PLAIN_HEADERS` (so no signature: anonymous), a path the protocol layer reads as
    /// `/bucket/key` with a valid bucket name.
    pub(crate) fn target<B>(&self, req: &hyper::Request<B>) -> Option<Target> {
        let head = match *req.method() {
            hyper::Method::GET => false,
            hyper::Method::HEAD => true,
            _ => return None,
        };
        let http1 = matches!(req.version(), hyper::Version::HTTP_11 | hyper::Version::HTTP_10);
        if !http1 || req.uri().query().is_some() {
            return None;
        }
        if !req.headers().keys().all(|name| PLAIN_HEADERS.contains(name)) {
            return None;
        }
        let host = match req.headers().get(header::HOST) {
            Some(value) => Some(value.to_str().ok()?),
            None => None,
        };
        if self.virtual_hosts && !host.is_some_and(is_ip_address) {
            return None;
        }
        // As the protocol layer decodes and parses a path-style request.
        let path = urlencoding::decode(req.uri().path()).ok()?;
        let target = match s3s::path::parse_path_style(&path).ok()? {
            s3s::path::S3Path::Object { bucket, key } => Target { bucket: bucket.into(), key: key.into(), head },
            _ => return None,
        };
        // The protocol layer's access hook lets unsigned requests ask for these (and no more).
        crate::access_hook::admits_anonymous(target.operation()).then_some(target)
    }

    /// The answer to `target`, or `None` for the normal path to answer (the engine refused or
    /// failed, or a header cannot be written as the protocol layer would write it).
    pub(crate) async fn answer(&self, target: Target) -> Option<s3s::HttpResponse> {
        let gw = &self.gateway;
        let anonymous = isthmus_session::Asking { access_key: None, bearer: None, security_token: None };
        let cx = gw.context(&anonymous, &HeaderMap::new()).ok()?;
        let Target { bucket, key, head } = target;
        if head {
            let (output, tag_count) = crate::object::plain_head(gw, &cx, bucket, key).await?;
            head_response(output, tag_count)
        } else {
            get_response(crate::object::plain_get(gw, &cx, bucket, key).await?)
        }
    }
}

/// As the protocol layer tells an IP address (path style) from a virtual host's name.
fn is_ip_address(host: &str) -> bool {
    host.parse::<std::net::SocketAddr>().is_ok() || host.parse::<std::net::IpAddr>().is_ok()
}

/// The description headers GET and HEAD share, in the protocol layer's order (that of its
/// `serialize_http`), up to `x-amz-mp-parts-count`. `None` when one cannot be written as it
/// writes it.
struct Description {
    accept_ranges: Option<String>,
    cache_control: Option<String>,
    content_disposition: Option<String>,
    content_encoding: Option<String>,
    content_language: Option<String>,
    content_length: Option<i64>,
    content_range: Option<String>,
    content_type: Option<String>,
    e_tag: Option<s3s::dto::ETag>,
    expires: Option<Timestamp>,
    last_modified: Option<Timestamp>,
    metadata: Option<Metadata>,
    parts_count: Option<i32>,
}

impl Description {
    fn write(self, headers: &mut HeaderMap) -> Option<()> {
        let text = |headers: &mut HeaderMap, name: HeaderName, value: Option<String>| -> Option<()> {
            if let Some(value) = value {
                headers.insert(name, HeaderValue::try_from(value).ok()?);
            }
            Some(())
        };
        text(headers, header::ACCEPT_RANGES, self.accept_ranges)?;
        text(headers, header::CACHE_CONTROL, self.cache_control)?;
        text(headers, header::CONTENT_DISPOSITION, self.content_disposition)?;
        text(headers, header::CONTENT_ENCODING, self.content_encoding)?;
        text(headers, header::CONTENT_LANGUAGE, self.content_language)?;
        if let Some(length) = self.content_length {
            headers.insert(header::CONTENT_LENGTH, number(length)?);
        }
        text(headers, header::CONTENT_RANGE, self.content_range)?;
        text(headers, header::CONTENT_TYPE, self.content_type)?;
        if let Some(etag) = self.e_tag {
            headers.insert(header::ETAG, etag.to_http_header().ok()?);
        }
        for (name, value) in [(header::EXPIRES, self.expires), (header::LAST_MODIFIED, self.last_modified)] {
            if let Some(value) = value {
                headers.insert(name, http_date(&value)?);
            }
        }
        for (key, value) in self.metadata.into_iter().flatten() {
            // Values the protocol layer would encode (RFC 2047) take the normal path.
            if !value.bytes().all(|b| b.is_ascii() && b >= 0x20 && b != 0x7f) {
                return None;
            }
            let name = HeaderName::from_bytes(format!("x-amz-meta-{key}").as_bytes()).ok()?;
            headers.insert(name, HeaderValue::try_from(value).ok()?);
        }
        if let Some(count) = self.parts_count {
            headers.insert(X_AMZ_MP_PARTS_COUNT.clone(), HeaderValue::from(count));
        }
        Some(())
    }
}

/// An empty answer with room for the headers it gets (so the map is not grown on the way).
fn response() -> s3s::HttpResponse {
    let mut resp = s3s::HttpResponse::default();
    *resp.headers_mut() = HeaderMap::with_capacity(16);
    resp
}

/// A number as `HeaderValue::from(i64)` writes it, in one allocation instead of two.
fn number(value: i64) -> Option<HeaderValue> {
    use std::io::Write as _;
    let mut buf = [0u8; 24];
    let mut out = &mut buf[..];
    write!(out, "{value}").ok()?;
    let len = 24 - out.len();
    HeaderValue::from_bytes(&buf[..len]).ok()
}

/// A timestamp as the protocol layer writes it in a header.
fn http_date(value: &Timestamp) -> Option<HeaderValue> {
    let mut buf = [0u8; 32];
    let mut out = &mut buf[..];
    value.format(TimestampFormat::HttpDate, &mut out).ok()?;
    let len = 32 - out.len();
    HeaderValue::from_bytes(&buf[..len]).ok()
}

/// Splits a GET or HEAD output into its `Description`, the fields named in `{ ... }` after it,
/// and nothing else: `None` (from the enclosing function) when any other field is set. The
/// pattern names every field of the output, so a field s3s adds fails to compile here instead of
/// going missing.
macro_rules! described {
    ($output:expr, $ty:ident { $($extra:ident),* } unset { $($unset:ident),* }) => {{
        let $ty {
            accept_ranges,
            cache_control,
            content_disposition,
            content_encoding,
            content_language,
            content_length,
            content_range,
            content_type,
            e_tag,
            expires,
            last_modified,
            metadata,
            parts_count,
            $($extra,)*
            bucket_key_enabled: None,
            checksum_crc32: None,
            checksum_crc32c: None,
            checksum_crc64nvme: None,
            checksum_sha1: None,
            checksum_sha256: None,
            checksum_type: None,
            delete_marker: None,
            expiration: None,
            missing_meta: None,
            object_lock_legal_hold_status: None,
            object_lock_mode: None,
            object_lock_retain_until_date: None,
            replication_status: None,
            request_charged: None,
            restore: None,
            sse_customer_algorithm: None,
            sse_customer_key_md5: None,
            ssekms_key_id: None,
            server_side_encryption: None,
            storage_class: None,
            website_redirect_location: None,
            $($unset: None,)*
        } = $output
        else {
            return None;
        };
        let description = Description {
            accept_ranges,
            cache_control,
            content_disposition,
            content_encoding,
            content_language,
            content_length,
            content_range,
            content_type,
            e_tag,
            expires,
            last_modified,
            metadata,
            parts_count,
        };
        (description, $($extra),*)
    }};
}

/// The answer to a GET as the protocol layer writes `output`; `None` when it holds a field
/// this path does not write.
fn get_response(output: GetObjectOutput) -> Option<s3s::HttpResponse> {
    let (description, body, tag_count, version_id) =
        described!(output, GetObjectOutput { body, tag_count, version_id } unset {});
    let mut resp = response();
    if description.content_range.is_some() {
        *resp.status_mut() = hyper::StatusCode::PARTIAL_CONTENT;
    }
    if let Some(body) = body {
        *resp.body_mut() = s3s::Body::from(body);
    }
    description.write(resp.headers_mut())?;
    if let Some(count) = tag_count {
        resp.headers_mut().insert(X_AMZ_TAGGING_COUNT.clone(), HeaderValue::from(count));
    }
    if let Some(version_id) = version_id {
        resp.headers_mut().insert(X_AMZ_VERSION_ID.clone(), HeaderValue::try_from(version_id).ok()?);
    }
    Some(resp)
}

/// The answer to a HEAD as the protocol layer writes `output` and the tag count header
/// `object::head_object` adds after it; `None` as for `get_response`.
fn head_response(output: HeadObjectOutput, tag_count: usize) -> Option<s3s::HttpResponse> {
    let (description, version_id) = described!(output, HeadObjectOutput { version_id } unset { archive_status });
    let mut resp = response();
    description.write(resp.headers_mut())?;
    if let Some(version_id) = version_id {
        resp.headers_mut().insert(X_AMZ_VERSION_ID.clone(), HeaderValue::try_from(version_id).ok()?);
    }
    if tag_count > 0 {
        resp.headers_mut().insert(X_AMZ_TAGGING_COUNT.clone(), HeaderValue::from(tag_count));
    }
    Some(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_http_writes_them() {
        for value in [0, 7, 4096, -1, i64::MAX, i64::MIN] {
            assert_eq!(number(value).unwrap(), HeaderValue::from(value));
        }
    }

    #[test]
    fn dates_are_written_as_http_dates() {
        let ts = crate::convert::parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        assert_eq!(http_date(&ts).unwrap(), "Wed, 21 Oct 2015 07:28:00 GMT");
    }
}
