//! `${filename}` in the `key` field of a browser upload (POST object): S3 replaces it with the
//! name of the uploaded file. The protocol layer does not pass that name on, so the gateway
//! replaces it in the form itself before the protocol layer reads it: it reads the fields that
//! come before the file part (S3 requires the file to be the last field; the fields are small),
//! rewrites the key field and hands on that head followed by the rest of the body, untouched
//! and streamed. A form whose head exceeds `MAX_FORM_HEAD` passes unchanged.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};

/// The most form-field bytes read ahead of the file part.
const MAX_FORM_HEAD: usize = 1 << 20;

const PLACEHOLDER: &[u8] = b"${filename}";

/// The multipart boundary of a POST object request, if this is one.
fn boundary(req: &hyper::Request<s3s::Body>) -> Option<String> {
    if req.method() != hyper::Method::POST || req.uri().query().is_some() {
        return None;
    }
    let content_type = req.headers().get(CONTENT_TYPE)?.to_str().ok()?;
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (name, value) = p.split_once('=')?;
        name.trim().eq_ignore_ascii_case("boundary").then(|| value.trim().trim_matches('"').to_string())
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The form head (everything before the file part's content) with `${filename}` in the key
/// field replaced, or `None` when there is nothing to replace.
fn rewrite(head: &[u8], boundary: &str) -> Option<Vec<u8>> {
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    let mut at = 0;
    while let Some(found) = find(&head[at..], delimiter.as_bytes()) {
        parts.push(at + found);
        at += found + delimiter.len();
    }
    let part_at = |start: usize| {
        let headers_end = start + find(&head[start..], b"\r\n\r\n")? + 4;
        let headers = std::str::from_utf8(&head[start..headers_end]).ok()?.to_ascii_lowercase();
        Some((headers, headers_end))
    };
    // The head may hold the whole body: the file part is the one named "file", not the last.
    let file_start = *parts.iter().find(|&&start| part_at(start).is_some_and(|(h, _)| h.contains("name=\"file\"")))?;
    let (file_headers, file_headers_end) = part_at(file_start)?;
    let original = std::str::from_utf8(&head[file_start..file_headers_end]).ok()?;
    let name_at = file_headers.find("filename=\"")? + "filename=\"".len();
    let name_end = name_at + original[name_at..].find('"')?;
    // Browsers send the base name; some old ones sent a full Windows path.
    let filename = original[name_at..name_end].rsplit(['/', '\\']).next()?.to_string();
    for window in parts.windows(2) {
        let (headers, value_start) = part_at(window[0])?;
        if !headers.contains("name=\"key\"") || window[0] > file_start {
            continue;
        }
        let value_end = window[1].checked_sub(2)?; // the CRLF before the next delimiter
        let value = &head[value_start..value_end];
        let placeholder = find(value, PLACEHOLDER)?;
        let mut out = Vec::with_capacity(head.len() + filename.len());
        out.extend_from_slice(&head[..value_start + placeholder]);
        out.extend_from_slice(filename.as_bytes());
        out.extend_from_slice(&head[value_start + placeholder + PLACEHOLDER.len()..]);
        return Some(out);
    }
    None
}

/// A body that yields `head` and then the rest of the original body.
struct Prefixed {
    head: Option<Bytes>,
    rest: s3s::Body,
}

impl Body for Prefixed {
    type Data = Bytes;
    type Error = s3s::StdError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Some(head) = this.head.take() {
            return Poll::Ready(Some(Ok(Frame::data(head))));
        }
        Pin::new(&mut this.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.head.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let head = self.head.as_ref().map_or(0, |h| h.len() as u64);
        let rest = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + head);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + head);
        }
        hint
    }
}

/// Replaces `${filename}` in the key field of a POST object form; any other request passes
/// unchanged.
pub async fn substitute(req: hyper::Request<s3s::Body>) -> Result<hyper::Request<s3s::Body>, s3s::StdError> {
    let Some(boundary) = boundary(&req) else { return Ok(req) };
    let (mut parts, mut body) = req.into_parts();
    let file_marker = b"name=\"file\"";
    let mut head = BytesMut::new();
    loop {
        let complete = find(&head, file_marker).is_some_and(|at| find(&head[at..], b"\r\n\r\n").is_some());
        if complete || head.len() > MAX_FORM_HEAD {
            break;
        }
        match body.frame().await {
            Some(frame) => {
                if let Ok(data) = frame?.into_data() {
                    head.extend_from_slice(&data);
                }
            }
            None => break,
        }
    }
    let head = match rewrite(&head, &boundary) {
        Some(rewritten) => {
            let delta = rewritten.len() as i64 - head.len() as i64;
            let length = parts.headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<i64>().ok());
            if let Some(length) = length
                && let Ok(value) = HeaderValue::from_str(&(length + delta).to_string())
            {
                parts.headers.insert(CONTENT_LENGTH, value);
            }
            Bytes::from(rewritten)
        }
        None => head.freeze(),
    };
    let body = s3s::Body::http_body_unsync(Prefixed { head: Some(head), rest: body });
    Ok(hyper::Request::from_parts(parts, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(key: &str, filename: &str) -> Vec<u8> {
        format!(
            "--B\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n{key}\r\n--B\r\nContent-Disposition: form-data; name=\"policy\"\r\n\r\nxyz\r\n--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\nContent-Type: text/plain\r\n\r\n"
        )
        .into_bytes()
    }

    #[test]
    fn the_placeholder_becomes_the_file_name() {
        let out = rewrite(&form("uploads/${filename}", "report 1.csv"), "B").unwrap();
        assert_eq!(out, form("uploads/report 1.csv", "report 1.csv"));
        let windows = rewrite(&form("u/${filename}", "C:\\Users\\me\\data.h5"), "B").unwrap();
        assert_eq!(windows, form("u/data.h5", "C:\\Users\\me\\data.h5"));
    }

    #[test]
    fn a_head_holding_the_whole_body_is_rewritten_too() {
        let mut whole = form("u/${filename}", "a.txt");
        whole.extend_from_slice(b"file bytes\r\n--B--\r\n");
        let mut expected = form("u/a.txt", "a.txt");
        expected.extend_from_slice(b"file bytes\r\n--B--\r\n");
        assert_eq!(rewrite(&whole, "B").unwrap(), expected);
    }

    #[test]
    fn forms_without_the_placeholder_are_left_alone() {
        assert_eq!(rewrite(&form("uploads/fixed", "a.txt"), "B"), None);
        assert_eq!(rewrite(b"--B\r\nnot a form", "B"), None);
    }
}
