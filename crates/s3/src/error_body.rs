//! Every error response carries its code, a message and the request id: the protocol layer
//! leaves `Message` out of some errors (SDKs then show "UnknownError" or "Unknown") and never
//! writes `RequestId` into the body. This completes the XML of any error body it answers,
//! with the same id as the `x-amz-request-id` header; and the errors the server answers
//! itself, before the protocol layer (`error_response`).

use hyper::header::{CONTENT_LENGTH, HeaderValue};

/// The message S3 gives for codes the protocol layer answers without one.
fn default_message(code: &str) -> String {
    let known = match code {
        "InvalidBucketName" => "The specified bucket is not valid.",
        "AccessDenied" => "Access Denied",
        "NotImplemented" => "A header you provided implies functionality that is not implemented.",
        "MethodNotAllowed" => "The specified method is not allowed against this resource.",
        "InvalidArgument" => "Invalid Argument",
        "InvalidRequest" => "Invalid Request",
        "MalformedXML" => "The XML you provided was not well-formed or did not validate against our published schema.",
        "SignatureDoesNotMatch" => {
            "The request signature we calculated does not match the signature you provided. Check your key and signing method."
        }
        "InvalidAccessKeyId" => "The AWS Access Key Id you provided does not exist in our records.",
        "MissingContentLength" => "You must provide the Content-Length HTTP header.",
        "InvalidDigest" => "The Content-MD5 you specified is not valid.",
        "BadDigest" => "The Content-MD5 you specified did not match what we received.",
        "EntityTooLarge" => "Your proposed upload exceeds the maximum allowed size.",
        "RequestTimeTooSkewed" => "The difference between the request time and the current time is too large.",
        "InvalidRange" => "The requested range is not satisfiable",
        "InvalidPartNumber" => "The requested partnumber is not satisfiable",
        "PreconditionFailed" => "At least one of the pre-conditions you specified did not hold",
        "InternalError" => "We encountered an internal error. Please try again.",
        _ => "",
    };
    if !known.is_empty() {
        return known.to_string();
    }
    // "SomeErrorCode" -> "Some error code": never an empty message.
    let mut words = String::new();
    for (i, c) in code.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            words.push(' ');
            words.push(c.to_ascii_lowercase());
        } else {
            words.push(c);
        }
    }
    words
}

/// The error XML with a `Message` and a `RequestId` added where missing; `None` when `body` is
/// not an S3 error document.
fn completed(body: &str, request_id: &str) -> Option<String> {
    let end = body.rfind("</Error>")?;
    body.find("<Error>")?;
    let mut out = body.to_string();
    let mut end = end;
    if !body.contains("<Message>") {
        let code_end = body.find("</Code>")? + "</Code>".len();
        let code = &body[body.find("<Code>")? + "<Code>".len()..code_end - "</Code>".len()];
        let message = format!("<Message>{}</Message>", default_message(code));
        out.insert_str(code_end, &message);
        end += message.len();
    }
    if !body.contains("<RequestId>") {
        out.insert_str(end, &format!("<RequestId>{request_id}</RequestId>"));
    }
    Some(out)
}

/// A browser upload whose form fails a condition of its policy (the bucket's too): it answers
/// 400 InvalidPolicyDocument, S3 403 AccessDenied "Invalid according to Policy" (a policy that
/// cannot be parsed stays 400 InvalidPolicyDocument).
const CONDITION_FAILURES: [&str; 5] = [
    "Policy condition",
    "Bucket in form field",
    "x-amz-date does not match policy",
    "x-amz-credential does not match policy",
    "x-amz-algorithm does not match policy",
];

/// An error body (and status) as S3 answers a failed policy condition.
fn as_s3_post_condition_failure(body: String, status: &mut hyper::StatusCode) -> String {
    if *status != hyper::StatusCode::BAD_REQUEST {
        return body;
    }
    for failure in CONDITION_FAILURES {
        let answered = format!("<Code>InvalidPolicyDocument</Code><Message>{failure}");
        if body.contains(&answered) {
            *status = hyper::StatusCode::FORBIDDEN;
            let s3 = format!("<Code>AccessDenied</Code><Message>Invalid according to Policy: {failure}");
            return body.replacen(&answered, &s3, 1);
        }
    }
    body
}

/// The code and message of an error response's body.
pub fn code_and_message(resp: &s3s::HttpResponse) -> Option<(String, String)> {
    let bytes = resp.body().bytes()?;
    let body = std::str::from_utf8(&bytes).ok()?;
    let element = |name: &str| {
        let start = body.find(&format!("<{name}>"))? + name.len() + 2;
        let end = start + body[start..].find(&format!("</{name}>"))?;
        Some(body[start..end].to_string())
    };
    Some((element("Code")?, element("Message").unwrap_or_default()))
}

/// Completes the body of an error response in place.
pub fn complete(resp: &mut s3s::HttpResponse, request_id: &str) {
    if resp.status() == hyper::StatusCode::NOT_MODIFIED {
        // A 304 has no body (RFC 9110 15.4.5): its headers are the object's validators.
        resp.headers_mut().remove(CONTENT_LENGTH);
        resp.headers_mut().remove(hyper::header::CONTENT_TYPE);
        *resp.body_mut() = s3s::Body::empty();
        return;
    }
    if resp.status().as_u16() < 300 {
        return;
    }
    let Some(bytes) = resp.body().bytes() else { return };
    let Some(body) = std::str::from_utf8(&bytes).ok().and_then(|b| completed(b, request_id)) else { return };
    let body = as_s3_post_condition_failure(body, resp.status_mut());
    if let Ok(length) = HeaderValue::from_str(&body.len().to_string()) {
        resp.headers_mut().insert(CONTENT_LENGTH, length);
    }
    *resp.body_mut() = s3s::Body::from(body);
}

/// An S3 error answered by the server itself, before the protocol layer. `message` is XML-safe;
/// `extra` is added XML (AWS adds `Region` to AuthorizationHeaderMalformed, which clients such
/// as s3cmd read to sign again for that region).
pub(crate) fn error_response(code: &str, message: &str, extra: &str, request_id: &str) -> s3s::HttpResponse {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message>{extra}<RequestId>{request_id}</RequestId></Error>"
    );
    let mut resp = hyper::Response::new(s3s::Body::from(body));
    *resp.status_mut() = hyper::StatusCode::BAD_REQUEST;
    resp.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/xml"));
    if let Ok(value) = hyper::header::HeaderValue::from_str(request_id) {
        resp.headers_mut().insert("x-amz-request-id", value);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_what_is_missing_and_keeps_what_is_there() {
        let bare = "<?xml version=\"1.0\"?><Error><Code>InvalidBucketName</Code></Error>";
        assert_eq!(
            completed(bare, "ID1").unwrap(),
            "<?xml version=\"1.0\"?><Error><Code>InvalidBucketName</Code><Message>The specified bucket is not valid.</Message><RequestId>ID1</RequestId></Error>"
        );
        let full = "<Error><Code>NoSuchKey</Code><Message>m</Message><RequestId>X</RequestId></Error>";
        assert_eq!(completed(full, "ID2").unwrap(), full);
        assert_eq!(completed("<ListBucketResult/>", "ID3"), None);
        assert_eq!(default_message("SomeNewCode"), "Some new code");
    }

    #[test]
    fn condition_failures_answer_403_and_other_policy_errors_stay() {
        let mut status = hyper::StatusCode::BAD_REQUEST;
        let body = "<Error><Code>InvalidPolicyDocument</Code><Message>Bucket in form field 'a' does not match bucket in URL 'b'</Message></Error>";
        let out = as_s3_post_condition_failure(body.into(), &mut status);
        assert_eq!(status, hyper::StatusCode::FORBIDDEN);
        assert!(out.contains("<Code>AccessDenied</Code><Message>Invalid according to Policy: Bucket in form field"));
        let mut status = hyper::StatusCode::BAD_REQUEST;
        let unparsed =
            "<Error><Code>InvalidPolicyDocument</Code><Message>failed to parse POST policy</Message></Error>";
        assert_eq!(as_s3_post_condition_failure(unparsed.into(), &mut status), unparsed);
        assert_eq!(status, hyper::StatusCode::BAD_REQUEST);
    }
}
