//! SigV2 header signatures of path-style bucket requests signed over `/bucket/`. botocore
//! (boto3 with `signature_version="s3"`, the aws CLI's SigV2 mode) sends `PUT /bucket` but
//! signs the resource `/bucket/`, as AWS's virtual-hosted examples read; s3s verifies the path
//! as sent, so such clients got SignatureDoesNotMatch on every bucket-level call. When the
//! signature verifies over `/bucket/`, the request is handed on as `/bucket/` (the same bucket
//! operation), so s3s's own check passes; a request signed over `/bucket` (libs3, s3cmd) is
//! left as it is, and nothing that does not verify with the user's secret is changed.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{KeyInit, Mac};

use isthmus_session::UserDirectory;

/// The query parameters a SigV2 resource includes (AWS's list, as s3s 0.14 uses it).
const SUBRESOURCES: &[&str] = &[
    "accelerate",
    "acl",
    "analytics",
    "cors",
    "defaultObjectAcl",
    "delete",
    "inventory",
    "lifecycle",
    "location",
    "logging",
    "metrics",
    "notification",
    "object-lock",
    "partNumber",
    "policy",
    "replication",
    "requestPayment",
    "response-cache-control",
    "response-content-disposition",
    "response-content-encoding",
    "response-content-language",
    "response-content-type",
    "response-expires",
    "restore",
    "select",
    "select-type",
    "storageClass",
    "tagging",
    "torrent",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
    "website",
];

/// Rewrites a path-style `/bucket` request to `/bucket/` when its SigV2 header signature is the
/// one of `/bucket/` for its user.
pub fn accept_bucket_slash<B>(req: &mut hyper::Request<B>, users: &UserDirectory) {
    let path = req.uri().path();
    let single_segment = path.len() > 1 && !path[1..].contains('/');
    if !single_segment {
        return;
    }
    let Some((access_key, signature)) = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("AWS "))
        .and_then(|v| v.split_once(':'))
    else {
        return;
    };
    let Some(user) = users.get(access_key.trim()) else { return };
    let with_slash = format!("{path}/");
    let to_sign = string_to_sign(req, &with_slash);
    if sign(&user.secret_key, &to_sign) != signature.trim() {
        return;
    }
    let rewritten = match req.uri().query() {
        Some(query) => format!("{with_slash}?{query}"),
        None => with_slash,
    };
    let mut parts = req.uri().clone().into_parts();
    let Ok(path_and_query) = rewritten.parse() else { return };
    parts.path_and_query = Some(path_and_query);
    if let Ok(uri) = hyper::Uri::from_parts(parts) {
        *req.uri_mut() = uri;
    }
}

fn sign(secret: &str, to_sign: &str) -> String {
    let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(to_sign.as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

/// The SigV2 string to sign of a header-signed request, with `resource_path` as its path.
fn string_to_sign<B>(req: &hyper::Request<B>, resource_path: &str) -> String {
    let headers = req.headers();
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
    let date = if headers.contains_key("x-amz-date") { "" } else { header("date") };
    let mut out = format!("{}\n{}\n{}\n{date}\n", req.method(), header("content-md5"), header("content-type"));
    let mut amz: Vec<&str> = headers.keys().map(|k| k.as_str()).filter(|k| k.starts_with("x-amz-")).collect();
    amz.sort_unstable();
    amz.dedup();
    for name in amz {
        let values: Vec<&str> = headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::trim).collect();
        out.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    out.push_str(resource_path);
    let pairs: Vec<(String, String)> =
        req.uri().query().map(|q| url::form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default();
    let mut first = true;
    for name in SUBRESOURCES {
        let mut matching = pairs.iter().filter(|(k, _)| k == name);
        let (Some((_, value)), None) = (matching.next(), matching.next()) else { continue };
        out.push(if first { '?' } else { '&' });
        first = false;
        out.push_str(name);
        if !value.is_empty() {
            out.push('=');
            out.push_str(value);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use isthmus_session::User;

    fn users() -> UserDirectory {
        UserDirectory::new("AKIDROOT", [User::new("AKIDROOT".into(), "secret-of-root".into())])
    }

    fn request(path: &str, signed_over: &str) -> hyper::Request<()> {
        let unsigned = hyper::Request::put(path)
            .header("date", "Wed, 25 Nov 2026 11:01:56 GMT")
            .header("x-amz-acl", "private")
            .body(())
            .unwrap();
        let signature = sign("secret-of-root", &string_to_sign(&unsigned, signed_over));
        let (mut parts, body) = unsigned.into_parts();
        parts.headers.insert("authorization", format!("AWS AKIDROOT:{signature}").parse().unwrap());
        hyper::Request::from_parts(parts, body)
    }

    #[test]
    fn a_bucket_request_signed_over_a_trailing_slash_is_handed_on_with_it() {
        let mut botocore = request("/bkt", "/bkt/");
        accept_bucket_slash(&mut botocore, &users());
        assert_eq!(botocore.uri().path(), "/bkt/");
        let mut subresource = request("/bkt?acl", "/bkt/");
        accept_bucket_slash(&mut subresource, &users());
        assert_eq!(subresource.uri().to_string(), "/bkt/?acl");
    }

    #[test]
    fn requests_signed_as_sent_or_not_by_the_user_are_left_alone() {
        for (path, signed_over) in [("/bkt", "/bkt"), ("/bkt/key", "/bkt/key/"), ("/", "//")] {
            let mut req = request(path, signed_over);
            accept_bucket_slash(&mut req, &users());
            assert_eq!(req.uri().path(), path);
        }
        let mut forged = request("/bkt", "/bkt/");
        forged.headers_mut().insert("authorization", "AWS AKIDROOT:bm90IGl0".parse().unwrap());
        accept_bucket_slash(&mut forged, &users());
        assert_eq!(forged.uri().path(), "/bkt");
    }
}
