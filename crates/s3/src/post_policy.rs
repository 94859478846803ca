//! A browser upload's form (POST object), read ahead of the protocol layer (`post_form`), held
//! to the S3 API reference where the protocol layer is more lenient: a policy needs a
//! signature (400 InvalidArgument) and an ISO 8601 expiration (400 InvalidPolicyDocument);
//! `x-amz-checksum-*` fields need no policy condition and are checked against the file; the
//! `tagging` field (a Tagging document) tags the object; `${filename}` (`post_filename`); a
//! redirect's and a 201 answer's ETag are quoted. Fields the protocol layer does not pass on
//! reach `PutObject` as a request extension (`FormExtras`). A failed condition, the bucket's
//! included, answers 403 AccessDenied (`error_body`).

use std::ops::Range;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hyper::StatusCode;
use hyper::header::{CONTENT_LENGTH, HeaderValue, LOCATION};
use s3s::S3Request;
use s3s::dto::PutObjectInput;
use s3s::post_policy::{PostPolicy, PostPolicyCondition};

use crate::post_form::Form;

/// A form refused before the protocol layer reads it.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub status: StatusCode,
    pub code: &'static str,
    /// XML-safe.
    pub message: String,
}

impl Refusal {
    fn bad_request(code: &'static str, message: String) -> Self {
        Self { status: StatusCode::BAD_REQUEST, code, message }
    }

    /// The error answer, with the request's id.
    pub fn response(&self, request_id: &str) -> s3s::HttpResponse {
        let mut resp = crate::error_body::error_response(self.code, &self.message, "", request_id);
        *resp.status_mut() = self.status;
        resp
    }
}

/// Form fields the protocol layer does not pass on to `PutObject`, which S3 stores.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct FormExtras {
    /// The `tagging` field's tags, as an `x-amz-tagging` header says them.
    tagging: Option<String>,
    /// `x-amz-checksum-*` fields: (name, value).
    checksums: Vec<(String, String)>,
}

/// What the gateway does with a form it admits: edits of its head and the fields it carries
/// on beside the protocol layer.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub edits: Vec<(Range<usize>, Vec<u8>)>,
    pub extras: FormExtras,
}

const CHECKSUM_FIELDS: [&str; 5] = [
    "x-amz-checksum-crc32",
    "x-amz-checksum-crc32c",
    "x-amz-checksum-crc64nvme",
    "x-amz-checksum-sha1",
    "x-amz-checksum-sha256",
];

/// A request after its form was read: handed on (a form or not), or refused.
pub(crate) enum Prepared {
    /// Not a browser upload: untouched.
    Other(hyper::Request<s3s::Body>),
    /// A browser upload, its form checked and rewritten.
    Form(hyper::Request<s3s::Body>),
    Refused(Refusal),
}

/// Reads, checks and rewrites the form of a POST object request (`${filename}` too); any
/// other request passes unchanged, and so does a form whose fields cannot be read ahead.
pub(crate) async fn prepare(req: hyper::Request<s3s::Body>) -> Result<Prepared, s3s::StdError> {
    let read = match crate::post_form::read(req).await? {
        Ok(read) => read,
        Err(other) => return Ok(Prepared::Other(other)),
    };
    let Some(form) = read.form() else { return Ok(Prepared::Form(read.hand_on(None, FormExtras::default()))) };
    let mut plan = match check(&form) {
        Ok(plan) => plan,
        Err(refusal) => return Ok(Prepared::Refused(refusal)),
    };
    plan.edits.extend(crate::post_filename::substitute(&form));
    let head = (!plan.edits.is_empty()).then(|| form.edited(plan.edits));
    Ok(Prepared::Form(read.hand_on(head, plan.extras)))
}

/// Checks a form's fields; the plan for a form admitted.
pub(crate) fn check(form: &Form) -> Result<Plan, Refusal> {
    let policy = form.value("policy");
    if let Some(policy) = policy {
        if form.value("signature").is_none() && form.value("x-amz-signature").is_none() {
            // An unsigned policy would make the form anonymous: S3 refuses it as incomplete.
            let v4 = form.value("x-amz-credential").is_some() || form.value("x-amz-algorithm").is_some();
            let field = if v4 { "X-Amz-Signature" } else { "Signature" };
            return Err(Refusal::bad_request(
                "InvalidArgument",
                format!(
                    "Bucket POST must contain a field named '{field}'. If it is specified, please check the order of the fields."
                ),
            ));
        }
        check_expiration(policy)?;
    }
    let policy = policy.and_then(|p| PostPolicy::from_base64(p).ok());
    let mut plan = Plan::default();
    for field in &form.fields {
        if !CHECKSUM_FIELDS.contains(&field.name.as_str()) {
            continue;
        }
        let value = form.value_of(field).unwrap_or_default().to_string();
        plan.extras.checksums.push((field.name.clone(), value));
        // S3 asks no condition of a checksum field (it is checked against the file); the
        // protocol layer does: a field no condition names is renamed out of its sight.
        if policy.as_ref().is_some_and(|p| !names(p, &field.name)) {
            plan.edits.push((field.name_at.clone(), format!("x-ignore-{}", field.name).into_bytes()));
        }
    }
    if let Some(xml) = form.value("tagging") {
        plan.extras.tagging = Some(tagging_header(xml)?);
    }
    Ok(plan)
}

/// Whether a condition of `policy` names the field `name`.
fn names(policy: &PostPolicy, name: &str) -> bool {
    policy.conditions.iter().any(|c| match c {
        PostPolicyCondition::Eq { field, .. } | PostPolicyCondition::StartsWith { field, .. } => field == name,
        PostPolicyCondition::ContentLengthRange { .. } => false,
    })
}

/// A policy's expiration must be an ISO 8601 date and time (`2026-12-01T12:00:00.000Z`); the
/// protocol layer also takes a space for the `T`. A policy that is not base64 JSON, or has no
/// expiration, the protocol layer refuses itself.
fn check_expiration(policy: &str) -> Result<(), Refusal> {
    let Ok(json) = BASE64.decode(policy.trim()) else { return Ok(()) };
    let Ok(document) = serde_json::from_slice::<serde_json::Value>(&json) else { return Ok(()) };
    let Some(expiration) = document.get("expiration").and_then(|e| e.as_str()) else { return Ok(()) };
    let rfc3339 = time::OffsetDateTime::parse(expiration, &time::format_description::well_known::Rfc3339);
    if expiration.as_bytes().get(10) == Some(&b'T') && rfc3339.is_ok() {
        return Ok(());
    }
    Err(Refusal::bad_request(
        "InvalidPolicyDocument",
        "Invalid Policy: Invalid 'expiration' value: an ISO 8601 date and time is expected, such as 2026-12-01T12:00:00.000Z"
            .into(),
    ))
}

/// The tags of a `tagging` field (a Tagging XML document) as an `x-amz-tagging` header.
fn tagging_header(xml: &str) -> Result<String, Refusal> {
    let malformed = || {
        Refusal::bad_request(
            "MalformedXML",
            "The XML you provided was not well-formed or did not validate against our published schema".into(),
        )
    };
    let mut de = s3s::xml::Deserializer::new(xml.trim().as_bytes());
    let tagging: s3s::dto::Tagging = s3s::xml::Deserialize::deserialize(&mut de).map_err(|_| malformed())?;
    de.expect_eof().map_err(|_| malformed())?;
    let mut header = url::form_urlencoded::Serializer::new(String::new());
    for tag in tagging.tag_set {
        let (Some(key), Some(value)) = (tag.key, tag.value) else { return Err(malformed()) };
        header.append_pair(&key, &value);
    }
    Ok(header.finish())
}

/// `PutObject`'s request with the fields a form carried beside the protocol layer (none for a
/// PUT), and whether it is a form upload: a field the protocol layer passed on itself wins.
pub(crate) fn with_form_extras(mut req: S3Request<PutObjectInput>) -> (S3Request<PutObjectInput>, bool) {
    let Some(extras) = req.extensions.remove::<FormExtras>() else { return (req, false) };
    let input = &mut req.input;
    if input.tagging.is_none() {
        input.tagging = extras.tagging;
    }
    for (name, value) in extras.checksums {
        let slot = match name.as_str() {
            "x-amz-checksum-crc32" => &mut input.checksum_crc32,
            "x-amz-checksum-crc32c" => &mut input.checksum_crc32c,
            "x-amz-checksum-crc64nvme" => &mut input.checksum_crc64nvme,
            "x-amz-checksum-sha1" => &mut input.checksum_sha1,
            "x-amz-checksum-sha256" => &mut input.checksum_sha256,
            _ => continue,
        };
        slot.get_or_insert(value);
    }
    (req, true)
}

/// A successful upload's answer as S3 gives it: the ETag in a redirect's `etag` parameter and
/// in a 201 document is quoted (the protocol layer leaves the quotes out).
pub(crate) fn finish_answer(resp: &mut s3s::HttpResponse) {
    match resp.status() {
        StatusCode::SEE_OTHER => {
            let location = resp.headers().get(LOCATION).and_then(|l| l.to_str().ok());
            if let Some(quoted) = location.and_then(quote_redirect_etag)
                && let Ok(value) = HeaderValue::from_str(&quoted)
            {
                resp.headers_mut().insert(LOCATION, value);
            }
        }
        StatusCode::CREATED => {
            let Some(bytes) = resp.body().bytes() else { return };
            let Some(body) = std::str::from_utf8(&bytes).ok().and_then(quote_document_etag) else { return };
            if let Ok(length) = HeaderValue::from_str(&body.len().to_string()) {
                resp.headers_mut().insert(CONTENT_LENGTH, length);
            }
            *resp.body_mut() = s3s::Body::from(body);
        }
        _ => {}
    }
}

fn quote_redirect_etag(location: &str) -> Option<String> {
    // The protocol layer appends `etag` last to the redirect's query: quote it in place.
    let query = location.find('?')?;
    let param = query + location[query..].rfind("etag=")?;
    if !matches!(location.as_bytes()[param - 1], b'?' | b'&') {
        return None;
    }
    let at = param + "etag=".len();
    let end = location[at..].find(['&', '#']).map_or(location.len(), |e| at + e);
    if location[at..end].starts_with("%22") {
        return None;
    }
    Some(format!("{}%22{}%22{}", &location[..at], &location[at..end], &location[end..]))
}

fn quote_document_etag(body: &str) -> Option<String> {
    let start = body.find("<ETag>")? + "<ETag>".len();
    let end = start + body[start..].find("</ETag>")?;
    if body[start..end].starts_with('"') || body[start..end].starts_with("&quot;") {
        return None;
    }
    Some(format!("{}\"{}\"{}", &body[..start], &body[start..end], &body[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::post_form::tests::parsed;

    fn policy(json: &str) -> String {
        BASE64.encode(json)
    }

    #[test]
    fn a_policy_needs_a_signature_and_an_iso_8601_expiration() {
        let good = policy(r#"{"expiration": "2099-01-01T00:00:00.000Z", "conditions": []}"#);
        let unsigned = check(&parsed(&[("key", "k"), ("policy", &good)], "f")).unwrap_err();
        assert_eq!((unsigned.status, unsigned.code), (StatusCode::BAD_REQUEST, "InvalidArgument"));
        assert!(check(&parsed(&[("key", "k"), ("policy", &good), ("signature", "s")], "f")).is_ok());
        let spaced = policy(r#"{"expiration": "2099-01-01 00:00:00+00:00", "conditions": []}"#);
        let refused = check(&parsed(&[("policy", &spaced), ("x-amz-signature", "s")], "f")).unwrap_err();
        assert_eq!(refused.code, "InvalidPolicyDocument");
        // Anonymous forms carry no policy and need no signature.
        assert!(check(&parsed(&[("key", "k")], "f")).is_ok());
    }

    #[test]
    fn checksum_fields_no_condition_names_are_hidden_from_the_protocol_layer() {
        let p = policy(
            r#"{"expiration": "2099-01-01T00:00:00Z", "conditions": [["eq", "$x-amz-checksum-crc32", "AAAAAA=="]]}"#,
        );
        let form = parsed(
            &[
                ("policy", &p),
                ("signature", "s"),
                ("x-amz-checksum-sha256", "abc="),
                ("x-amz-checksum-crc32", "AAAAAA=="),
            ],
            "f",
        );
        let plan = check(&form).unwrap();
        assert_eq!(plan.edits, vec![(form.fields[2].name_at.clone(), b"x-ignore-x-amz-checksum-sha256".to_vec())]);
        assert_eq!(plan.extras.checksums.len(), 2);
    }

    #[test]
    fn the_tagging_document_becomes_a_tagging_header() {
        let xml = "<Tagging><TagSet><Tag><Key>a b</Key><Value>1&amp;2</Value></Tag><Tag><Key>c</Key><Value></Value></Tag></TagSet></Tagging>";
        let plan = check(&parsed(&[("tagging", xml)], "f")).unwrap();
        assert_eq!(plan.extras.tagging.as_deref(), Some("a+b=1%262&c="));
        let refused = check(&parsed(&[("tagging", "<Tagging><TagSet>")], "f")).unwrap_err();
        assert_eq!(refused.code, "MalformedXML");
    }

    #[test]
    fn etags_in_answers_are_quoted() {
        let quoted = quote_redirect_etag("http://example.org/done?x=%20&bucket=b&key=a+b&etag=abc#top").unwrap();
        assert_eq!(quoted, "http://example.org/done?x=%20&bucket=b&key=a+b&etag=%22abc%22#top");
        assert_eq!(quote_redirect_etag(&quoted), None);
        let doc = "<PostResponse><Key>k</Key><ETag>abc</ETag></PostResponse>";
        assert_eq!(quote_document_etag(doc).unwrap(), "<PostResponse><Key>k</Key><ETag>\"abc\"</ETag></PostResponse>");
    }
}
