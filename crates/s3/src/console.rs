//! The web console's files, built into the binary (`crates/s3/console/`), served on the S3
//! listener under `/console/` to unsigned GET and HEAD requests. The console is a page of
//! JavaScript that talks S3 to this same origin, signed in the browser, so it needs nothing
//! else from the gateway. A signed request for `/console/...` is an S3 request for the bucket
//! `console` as usual; only unsigned (anonymous) reads of such a bucket are shadowed.

/// The path the console is served under.
pub const CONSOLE_PATH: &str = "/console/";

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: &[Asset] = &[
    Asset { name: "", content_type: "text/html; charset=utf-8", body: include_str!("../console/index.html") },
    Asset { name: "index.html", content_type: "text/html; charset=utf-8", body: include_str!("../console/index.html") },
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../console/console.js"),
    },
    Asset {
        name: "sigv4.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../console/sigv4.js"),
    },
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../console/console.css"),
    },
];

/// The page may load only its own files and talk only to its own origin; it is never framed;
/// links it opens (presigned URLs carry credentials in their query) send no referrer.
const SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

fn is_signed<B>(req: &hyper::Request<B>) -> bool {
    req.headers().contains_key(hyper::header::AUTHORIZATION)
        || req.uri().query().is_some_and(|q| {
            url::form_urlencoded::parse(q.as_bytes()).any(|(k, _)| k == "X-Amz-Signature" || k == "Signature")
        })
}

fn response(status: hyper::StatusCode, content_type: &str, body: &'static str, head: bool) -> s3s::HttpResponse {
    let bytes = if head { bytes::Bytes::new() } else { bytes::Bytes::from_static(body.as_bytes()) };
    let mut resp = hyper::Response::new(s3s::Body::from(bytes));
    *resp.status_mut() = status;
    let headers = resp.headers_mut();
    let set = |headers: &mut hyper::HeaderMap, name: &'static str, value: &str| {
        if let Ok(value) = hyper::header::HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    };
    set(headers, "content-type", content_type);
    set(headers, "content-length", &body.len().to_string());
    set(headers, "cache-control", "no-cache");
    set(headers, "content-security-policy", SECURITY_POLICY);
    set(headers, "x-content-type-options", "nosniff");
    set(headers, "x-frame-options", "DENY");
    set(headers, "referrer-policy", "no-referrer");
    resp
}

/// The console's answer to `req`, if it is an unsigned GET or HEAD of a console path.
pub fn answer<B>(req: &hyper::Request<B>) -> Option<s3s::HttpResponse> {
    let head = req.method() == hyper::Method::HEAD;
    if !(head || req.method() == hyper::Method::GET) || is_signed(req) {
        return None;
    }
    let path = req.uri().path();
    if path == CONSOLE_PATH.trim_end_matches('/') {
        let mut resp = response(hyper::StatusCode::FOUND, "text/plain; charset=utf-8", "", head);
        resp.headers_mut().insert(hyper::header::LOCATION, hyper::header::HeaderValue::from_static(CONSOLE_PATH));
        return Some(resp);
    }
    let name = path.strip_prefix(CONSOLE_PATH)?;
    let found = ASSETS.iter().find(|asset| asset.name == name);
    Some(match found {
        Some(asset) => response(hyper::StatusCode::OK, asset.content_type, asset.body, head),
        None => response(hyper::StatusCode::NOT_FOUND, "text/plain; charset=utf-8", "Not found\n", head),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(uri: &str, authorization: bool) -> hyper::Request<()> {
        let mut builder = hyper::Request::get(uri);
        if authorization {
            builder = builder.header("authorization", "AWS4-HMAC-SHA256 Credential=x");
        }
        builder.body(()).unwrap()
    }

    #[test]
    fn unsigned_reads_of_console_paths_get_the_files_and_everything_else_passes() {
        let page = answer(&get("/console/", false)).unwrap();
        assert_eq!(page.status(), 200);
        assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("frame-ancestors 'none'"));
        assert_eq!(answer(&get("/console", false)).unwrap().headers()["location"], "/console/");
        assert_eq!(answer(&get("/console/console.js", false)).unwrap().status(), 200);
        assert_eq!(answer(&get("/console/sigv4.js", false)).unwrap().status(), 200);
        assert_eq!(answer(&get("/console/other", false)).unwrap().status(), 404);
        assert!(answer(&get("/console/console.js", true)).is_none());
        assert!(answer(&get("/console/x?X-Amz-Signature=abc", false)).is_none());
        assert!(answer(&get("/consoles/", false)).is_none());
        assert!(answer(&get("/bucket/console/", false)).is_none());
        let put = hyper::Request::put("/console/").body(()).unwrap();
        assert!(answer(&put).is_none());
    }
}
