//! The form of a browser upload (POST object), read ahead of the protocol layer: the fields
//! before the file part (S3 requires the file to be the last field; the fields are small) are
//! read and parsed, the gateway checks and rewrites them (`post_filename`, `post_policy`), and
//! the body handed on is that head followed by the rest of the body, untouched and streamed.
//! A form whose head exceeds `MAX_FORM_HEAD`, or that has no file part, passes unchanged (the
//! protocol layer answers it).

use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};

/// The most form-field bytes read ahead of the file part.
const MAX_FORM_HEAD: usize = 1 << 20;

/// The multipart boundary of a POST object request, if this is one.
fn boundary<B>(req: &hyper::Request<B>) -> Option<String> {
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

pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One field of the form: its name (lower case, as the protocol layer matches names), where
/// the name stands in the part's headers and where its value stands.
pub(crate) struct Field {
    pub name: String,
    pub name_at: Range<usize>,
    pub value_at: Range<usize>,
}

/// The head of a form: the bytes up to the file part's content, its fields and the name of
/// the uploaded file.
pub(crate) struct Form {
    head: Vec<u8>,
    pub fields: Vec<Field>,
    pub file_name: String,
}

/// The value of a `name="..."` parameter in a part's headers (not `filename=`), and where it
/// stands.
fn disposition_name(headers: &str, offset: usize) -> Option<(String, Range<usize>)> {
    let lower = headers.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find("name=\"") {
        let at = from + found;
        from = at + 6;
        if at > 0 && matches!(lower.as_bytes()[at - 1], b' ' | b';') {
            let end = from + lower[from..].find('"')?;
            return Some((lower[from..end].to_string(), offset + from..offset + end));
        }
    }
    None
}

impl Form {
    /// Parses the head of a form delimited by `boundary`; `None` when the head does not reach
    /// the file part.
    pub fn parse(head: Vec<u8>, boundary: &str) -> Option<Form> {
        let delimiter = format!("--{boundary}");
        let mut starts = Vec::new();
        let mut at = 0;
        while let Some(found) = find(&head[at..], delimiter.as_bytes()) {
            starts.push(at + found);
            at += found + delimiter.len();
        }
        let mut fields = Vec::new();
        for (i, &start) in starts.iter().enumerate() {
            let headers_end = start + find(&head[start..], b"\r\n\r\n")? + 4;
            let headers = std::str::from_utf8(&head[start..headers_end]).ok()?;
            let (name, name_at) = disposition_name(headers, start)?;
            if name == "file" {
                let lower = headers.to_ascii_lowercase();
                let file_name = match lower.find("filename=\"") {
                    Some(at) => {
                        let from = at + "filename=\"".len();
                        headers[from..from + headers[from..].find('"')?].to_string()
                    }
                    None => String::new(),
                };
                return Some(Form { head, fields, file_name });
            }
            // The value ends with the CRLF before the next delimiter.
            let value_end = starts.get(i + 1)?.checked_sub(2)?;
            fields.push(Field { name, name_at, value_at: headers_end..value_end.max(headers_end) });
        }
        None
    }

    /// The value of the field `name` (lower case); the last one when it is repeated, as the
    /// protocol layer reads it.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.value_of(self.fields.iter().rev().find(|f| f.name == name)?)
    }

    /// The value of one of the form's fields, if it is text.
    pub fn value_of(&self, field: &Field) -> Option<&str> {
        std::str::from_utf8(&self.head[field.value_at.clone()]).ok()
    }

    /// The head with each range of `edits` replaced by its bytes (ranges do not overlap).
    pub fn edited(&self, mut edits: Vec<(Range<usize>, Vec<u8>)>) -> Vec<u8> {
        edits.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
        let mut out = self.head.clone();
        for (range, bytes) in edits {
            out.splice(range, bytes);
        }
        out
    }
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

/// Reads the head of the form: up to the file part's content, at most about `MAX_FORM_HEAD`.
async fn read_head(body: &mut s3s::Body) -> Result<BytesMut, s3s::StdError> {
    let file_marker = b"name=\"file\"";
    let mut head = BytesMut::new();
    loop {
        let complete = find(&head, file_marker).is_some_and(|at| find(&head[at..], b"\r\n\r\n").is_some());
        if complete || head.len() > MAX_FORM_HEAD {
            return Ok(head);
        }
        match body.frame().await {
            Some(frame) => {
                if let Ok(data) = frame?.into_data() {
                    head.extend_from_slice(&data);
                }
            }
            None => return Ok(head),
        }
    }
}

/// A POST object request whose form head was read.
pub(crate) struct ReadForm {
    parts: hyper::http::request::Parts,
    head: BytesMut,
    rest: s3s::Body,
    boundary: String,
}

/// Reads the head of a POST object request's form; any other request is given back.
pub(crate) async fn read(
    req: hyper::Request<s3s::Body>,
) -> Result<Result<ReadForm, hyper::Request<s3s::Body>>, s3s::StdError> {
    let Some(boundary) = boundary(&req) else { return Ok(Err(req)) };
    let (parts, mut rest) = req.into_parts();
    let head = read_head(&mut rest).await?;
    Ok(Ok(ReadForm { parts, head, rest, boundary }))
}

impl ReadForm {
    /// The form's fields, when the head reaches the file part.
    pub fn form(&self) -> Option<Form> {
        Form::parse(self.head.to_vec(), &self.boundary)
    }

    /// The request to hand on: `head` (or the head as read) followed by the rest of the
    /// body, with `extension` (and its length adjusted to a rewritten head).
    pub fn hand_on<T>(self, head: Option<Vec<u8>>, extension: T) -> hyper::Request<s3s::Body>
    where
        T: Clone + Send + Sync + 'static,
    {
        let Self { mut parts, head: read, rest, .. } = self;
        let head = match head {
            Some(rewritten) => {
                let delta = rewritten.len() as i64 - read.len() as i64;
                let length = parts.headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<i64>().ok());
                if delta != 0
                    && let Some(length) = length
                    && let Ok(value) = HeaderValue::from_str(&(length + delta).to_string())
                {
                    parts.headers.insert(CONTENT_LENGTH, value);
                }
                Bytes::from(rewritten)
            }
            None => read.freeze(),
        };
        parts.extensions.insert(extension);
        let body = s3s::Body::http_body_unsync(Prefixed { head: Some(head), rest });
        hyper::Request::from_parts(parts, body)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A form with `fields` (in order) and a file part named `filename`, up to its content.
    pub(crate) fn form_head(fields: &[(&str, &str)], filename: &str) -> Vec<u8> {
        let mut out = String::new();
        for (name, value) in fields {
            out.push_str(&format!("--B\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"));
        }
        out.push_str(&format!(
            "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\nContent-Type: text/plain\r\n\r\n"
        ));
        out.into_bytes()
    }

    pub(crate) fn parsed(fields: &[(&str, &str)], filename: &str) -> Form {
        Form::parse(form_head(fields, filename), "B").unwrap()
    }

    #[test]
    fn fields_are_read_up_to_the_file_part() {
        let form = parsed(&[("Key", "a/b"), ("policy", "xyz"), ("key", "c")], "f.txt");
        assert_eq!(form.fields.len(), 3);
        assert_eq!(form.value("key"), Some("c"));
        assert_eq!(form.value("policy"), Some("xyz"));
        assert_eq!(form.value("signature"), None);
        assert_eq!(form.file_name, "f.txt");
        let renamed = form.edited(vec![(form.fields[1].name_at.clone(), b"x-ignore-policy".to_vec())]);
        assert_eq!(Form::parse(renamed, "B").unwrap().value("x-ignore-policy"), Some("xyz"));
    }

    #[test]
    fn a_head_without_a_file_part_is_no_form() {
        let mut head = form_head(&[("key", "k")], "f");
        head.truncate(head.len() - 60);
        assert!(Form::parse(head, "B").is_none());
        assert!(Form::parse(b"--B\r\nnot a form".to_vec(), "B").is_none());
    }
}
