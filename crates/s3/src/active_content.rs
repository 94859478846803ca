//! Headers that keep what the gateway serves from running as a page of its origin: an answer a
//! browser would render as active content (HTML, SVG, XML, anything not on the passive list
//! below) carries `Content-Security-Policy: sandbox` (no script, no form, an origin of its
//! own), and every answer `X-Content-Type-Options: nosniff` (no HTML guessed out of another
//! type). Headers only: the bytes, and S3 clients, are unaffected.

use hyper::HeaderMap;
use hyper::header::{CONTENT_TYPE, HeaderValue};

/// Types a browser shows without running anything of the object's in the gateway's origin.
const PASSIVE: &[&str] = &[
    "text/plain",
    "text/csv",
    "application/json",
    "application/octet-stream",
    "application/pdf",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "image/avif",
    "image/apng",
    "image/bmp",
    "image/tiff",
    "image/x-icon",
    "image/vnd.microsoft.icon",
];

/// Whether a `Content-Type` is one a browser renders passively: on the list, or audio and
/// video (played by the browser's player). No type at all is not.
pub fn is_passive(content_type: Option<&HeaderValue>) -> bool {
    // `to_str` admits visible ASCII only, so byte offsets below are character boundaries.
    let Some(value) = content_type.and_then(|v| v.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim();
    let media = |prefix: &str| {
        essence.len() > prefix.len()
            && essence[..prefix.len()].eq_ignore_ascii_case(prefix)
            && essence[prefix.len()..].bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
    };
    PASSIVE.iter().any(|passive| passive.eq_ignore_ascii_case(essence)) || media("audio/") || media("video/")
}

/// Adds the headers to an answer of the S3 API: the sandbox unless its type is passive, or
/// always (`sandbox_all`: the console's listener, whose own files never pass here).
pub fn confine(headers: &mut HeaderMap, sandbox_all: bool) {
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    if sandbox_all || !is_passive(headers.get(CONTENT_TYPE)) {
        headers.insert("content-security-policy", HeaderValue::from_static("sandbox"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confined(content_type: Option<&str>, sandbox_all: bool) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = content_type {
            headers.insert(CONTENT_TYPE, HeaderValue::from_str(value).unwrap());
        }
        confine(&mut headers, sandbox_all);
        assert_eq!(headers["x-content-type-options"], "nosniff");
        headers
    }

    #[test]
    fn active_types_and_unknown_ones_are_sandboxed_passive_ones_are_not() {
        for active in [
            Some("text/html"),
            Some("TEXT/HTML; charset=utf-8"),
            Some("image/svg+xml"),
            Some("application/xml"),
            Some("text/xml"),
            Some("application/xhtml+xml"),
            Some("text/javascript"),
            Some("application/x-unknown"),
            Some("video/../text/html"),
            Some("audio/"),
            Some(""),
            None,
        ] {
            assert_eq!(confined(active, false)["content-security-policy"], "sandbox", "{active:?}");
        }
        for passive in [
            "text/plain",
            "text/csv; charset=utf-8",
            "application/octet-stream",
            "image/png",
            "video/mp4",
            "audio/x-wav",
        ] {
            assert!(!confined(Some(passive), false).contains_key("content-security-policy"), "{passive}");
        }
        assert_eq!(confined(Some("image/png"), true)["content-security-policy"], "sandbox");
    }
}
