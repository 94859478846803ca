//! The web console and what each listener does about it. The console's files are built into
//! the binary (`crates/s3/console/`) and served on a listener of its own (`console_listen`), so
//! no object ever shares the console's origin (where its page keeps its session). There it
//! serves its files and `/config.json` (where the S3 API is, for the links it makes) to unsigned
//! reads, and passes to the S3 protocol layer only what its page sends: requests with an
//! `Authorization` header, and the unsigned STS form that exchanges a token for temporary
//! credentials; anything else is refused with a line naming the S3 address. A browser's
//! navigation carries no such header, so no object, public or presigned, is ever rendered
//! there. S3 listeners answer the old path `/console/` with where the console is now.

/// What a listener does about the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// An S3 listener of a gateway without a console (`console = false`): `/console/` is an S3
    /// path like any other.
    Absent,
    /// An S3 listener: unsigned reads of `/console` and `/console/` (where the console used to
    /// be) are told the console's port, or that it is off (none).
    Pointer(Option<u16>),
    /// The console's own listener.
    Site(Site),
}

impl Default for Role {
    fn default() -> Self {
        Self::Pointer(None)
    }
}

/// Where the console's page finds the S3 API for the links it makes (downloads, share links):
/// the host name the page was loaded from, with this scheme and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Site {
    pub s3_port: u16,
    pub s3_tls: bool,
}

struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const PAGE: &str = include_str!("../console/index.html");

const ASSETS: &[Asset] = &[
    Asset { path: "/", content_type: "text/html; charset=utf-8", body: PAGE },
    Asset { path: "/index.html", content_type: "text/html; charset=utf-8", body: PAGE },
    Asset {
        path: "/console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../console/console.js"),
    },
    Asset {
        path: "/sigv4.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../console/sigv4.js"),
    },
    Asset {
        path: "/cors.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../console/cors.js"),
    },
    Asset {
        path: "/console.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../console/console.css"),
    },
];

/// The page may load only its own files and talk only to its own origin; it is never framed;
/// links it opens (presigned URLs carry credentials in their query) send no referrer.
const SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Signed in its query (a presigned URL, SigV4 or SigV2).
fn is_query_signed<B>(req: &hyper::Request<B>) -> bool {
    req.uri().query().is_some_and(|q| {
        url::form_urlencoded::parse(q.as_bytes()).any(|(k, _)| k == "X-Amz-Signature" || k == "Signature")
    })
}

fn is_signed<B>(req: &hyper::Request<B>) -> bool {
    req.headers().contains_key(hyper::header::AUTHORIZATION) || is_query_signed(req)
}

fn response(status: hyper::StatusCode, content_type: &str, body: bytes::Bytes, head: bool) -> s3s::HttpResponse {
    let length = body.len();
    let mut resp = hyper::Response::new(s3s::Body::from(if head { bytes::Bytes::new() } else { body }));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    let set = |headers: &mut hyper::HeaderMap, name: &'static str, value: &str| {
        if let Ok(value) = hyper::header::HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    };
    set(headers, "content-type", content_type);
    set(headers, "content-length", &length.to_string());
    set(headers, "cache-control", "no-cache");
    set(headers, "content-security-policy", SECURITY_POLICY);
    set(headers, "x-content-type-options", "nosniff");
    set(headers, "x-frame-options", "DENY");
    set(headers, "referrer-policy", "no-referrer");
    resp
}

fn text(status: hyper::StatusCode, message: String, head: bool) -> s3s::HttpResponse {
    response(status, "text/plain; charset=utf-8", bytes::Bytes::from(message + "\n"), head)
}

/// The listener's own answer to `req`, if it has one: on an S3 listener, where the console
/// is (unsigned reads of its old path); on the console's listener, its files, its
/// configuration, or a refusal of anything its page does not send.
pub fn answer<B>(req: &hyper::Request<B>, role: Role) -> Option<s3s::HttpResponse> {
    let read = req.method() == hyper::Method::GET || req.method() == hyper::Method::HEAD;
    let head = req.method() == hyper::Method::HEAD;
    match role {
        Role::Absent => None,
        Role::Pointer(port) => {
            let old_path = matches!(req.uri().path(), "/console" | "/console/");
            (read && old_path && !is_signed(req)).then(|| pointer(port, head))
        }
        Role::Site(site) => site_answer(req, site, read, head),
    }
}

/// Where the console is, for someone who opened its old path on an S3 listener.
fn pointer(port: Option<u16>, head: bool) -> s3s::HttpResponse {
    let message = match port {
        Some(port) => format!(
            "The Isthmus web console is not served on this address. It has an address of its own: port {port} of \
             this host. (Objects and the console never share an origin, so no object can read the console's session.)"
        ),
        None => "The Isthmus web console is not served on this address, and this gateway serves it nowhere: its \
                 operator turns it on with console_listen (--console-listen), an address of its own."
            .to_string(),
    };
    text(hyper::StatusCode::NOT_FOUND, message, head)
}

fn site_answer<B>(req: &hyper::Request<B>, site: Site, read: bool, head: bool) -> Option<s3s::HttpResponse> {
    if is_query_signed(req) {
        return Some(refusal(site, head));
    }
    if req.headers().contains_key(hyper::header::AUTHORIZATION) {
        return None; // the page's S3 calls, signed in a header (or a bearer token)
    }
    if req.method() == hyper::Method::POST && crate::sts::is_sts(req.method(), req.uri(), req.headers()) {
        return None; // a token exchanged for temporary credentials (the form is the credential)
    }
    if !read {
        return Some(refusal(site, head));
    }
    let path = req.uri().path();
    if path == "/config.json" {
        let scheme = if site.s3_tls { "https" } else { "http" };
        let config = format!("{{\"s3\":{{\"scheme\":\"{scheme}\",\"port\":{}}}}}", site.s3_port);
        return Some(response(hyper::StatusCode::OK, "application/json", bytes::Bytes::from(config), head));
    }
    Some(match ASSETS.iter().find(|asset| asset.path == path) {
        Some(asset) => {
            response(hyper::StatusCode::OK, asset.content_type, bytes::Bytes::from_static(asset.body.as_bytes()), head)
        }
        None => refusal(site, head),
    })
}

/// What the console's listener says to anything but its page's own calls.
fn refusal(site: Site, head: bool) -> s3s::HttpResponse {
    let message = format!(
        "This address serves the Isthmus web console only. S3 clients, presigned URLs, share links and public \
         objects use the S3 address: port {} of this host.",
        site.s3_port
    );
    text(hyper::StatusCode::FORBIDDEN, message, head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, uri: &str, headers: &[(&str, &str)]) -> hyper::Request<()> {
        let mut builder = hyper::Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap()
    }

    fn get(uri: &str) -> hyper::Request<()> {
        request("GET", uri, &[])
    }

    const SIGNED: (&str, &str) = ("authorization", "AWS4-HMAC-SHA256 Credential=x");
    const SITE: Role = Role::Site(Site { s3_port: 9000, s3_tls: false });

    #[test]
    fn the_console_listener_serves_its_files_and_passes_only_its_pages_calls() {
        let page = answer(&get("/"), SITE).unwrap();
        assert_eq!(page.status(), 200);
        assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("frame-ancestors 'none'"));
        for path in ["/index.html", "/console.js", "/sigv4.js", "/cors.js", "/console.css", "/config.json"] {
            assert_eq!(answer(&get(path), SITE).unwrap().status(), 200, "{path}");
        }
        assert_eq!(answer(&get("/other"), SITE).unwrap().status(), 403);
        // An object, public or presigned, is never served here: a navigation has no header.
        assert_eq!(answer(&get("/public/evil.html"), SITE).unwrap().status(), 403);
        assert_eq!(answer(&get("/b/evil.html?X-Amz-Signature=abc"), SITE).unwrap().status(), 403);
        assert_eq!(answer(&get("/b/evil.html?Signature=abc&AWSAccessKeyId=k"), SITE).unwrap().status(), 403);
        let presigned_with_header = request("GET", "/b/k?X-Amz-Signature=abc", &[SIGNED]);
        assert_eq!(answer(&presigned_with_header, SITE).unwrap().status(), 403);
        assert_eq!(answer(&request("PUT", "/b/k", &[]), SITE).unwrap().status(), 403);
        let upload_form = request("POST", "/b", &[("content-type", "multipart/form-data; boundary=x")]);
        assert_eq!(answer(&upload_form, SITE).unwrap().status(), 403);
        // The page's calls: signed in a header, a bearer token, the STS form.
        assert!(answer(&request("GET", "/b/evil.html", &[SIGNED]), SITE).is_none());
        assert!(answer(&request("GET", "/", &[SIGNED]), SITE).is_none());
        assert!(answer(&request("PUT", "/b/k", &[("authorization", "Bearer t")]), SITE).is_none());
        let sts = request("POST", "/", &[("content-type", "application/x-www-form-urlencoded")]);
        assert!(answer(&sts, SITE).is_none());
    }

    #[test]
    fn s3_listeners_answer_the_old_path_with_a_pointer_and_nothing_else() {
        let moved = answer(&get("/console/"), Role::Pointer(Some(9001))).unwrap();
        assert_eq!(moved.status(), 404);
        assert_eq!(answer(&get("/console"), Role::Pointer(None)).unwrap().status(), 404);
        for uri in ["/console/console.js", "/", "/consoles/", "/bucket/console/"] {
            assert!(answer(&get(uri), Role::Pointer(Some(9001))).is_none(), "{uri}");
        }
        assert!(answer(&request("GET", "/console/", &[SIGNED]), Role::Pointer(Some(9001))).is_none());
        assert!(answer(&get("/console/"), Role::Absent).is_none());
    }
}
