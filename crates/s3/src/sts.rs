//! STS `AssumeRoleWithWebIdentity` on the gateway's own endpoint (as MinIO serves it): an
//! unsigned POST (or GET) of `/` whose form names the action and carries a bearer token; the
//! answer is temporary S3 credentials limited to the token's scopes, acting as the token's
//! user, valid for `DurationSeconds` (15 minutes to 12 hours, never past the token's expiry).

use http_body_util::BodyExt;
use isthmus_grid::sessions::{DEFAULT_DURATION_SECONDS, MAX_DURATION_SECONDS, MIN_DURATION_SECONDS};
use isthmus_grid::{SessionKeys, TokenVerifier};
use s3s::{Body, S3Request, S3Response, S3Result};

/// The largest STS form read (a token is a few KiB).
const MAX_FORM_BYTES: usize = 64 << 10;

/// Whether a request is an STS call: `/` with an `Action` in its query, or a form POST.
pub fn is_sts(method: &hyper::Method, uri: &hyper::Uri, headers: &hyper::HeaderMap) -> bool {
    if uri.path() != "/" {
        return false;
    }
    let in_query = uri.query().is_some_and(|q| q.split('&').any(|p| p.starts_with("Action=")));
    let form = headers
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    (*method == hyper::Method::POST && form) || (*method == hyper::Method::GET && in_query)
}

/// Answers an STS call.
pub async fn answer(
    req: S3Request<Body>,
    tokens: Option<&TokenVerifier>,
    sessions: Option<&SessionKeys>,
) -> S3Result<S3Response<Body>> {
    let request_id = request_id();
    let mut form: Vec<(String, String)> =
        req.uri.query().map(|q| url::form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default();
    if req.method == hyper::Method::POST {
        let limited = http_body_util::Limited::new(req.input, MAX_FORM_BYTES);
        let Ok(collected) = limited.collect().await else {
            return Ok(error("InvalidParameterValue", "The request form is too large or unreadable", &request_id));
        };
        form.extend(url::form_urlencoded::parse(&collected.to_bytes()).into_owned());
    }
    let field = |name: &str| form.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    match field("Action") {
        Some("AssumeRoleWithWebIdentity") => {}
        Some(other) => {
            let message = format!("Action {other} is not supported; this gateway serves AssumeRoleWithWebIdentity");
            return Ok(error("InvalidAction", &message, &request_id));
        }
        None => return Ok(error("MissingAction", "The request names no Action", &request_id)),
    }
    let (Some(tokens), Some(sessions)) = (tokens, sessions) else {
        return Ok(error("InvalidIdentityToken", "This gateway trusts no token issuers (token_issuers)", &request_id));
    };
    let Some(token) = field("WebIdentityToken") else {
        return Ok(error("MissingParameter", "WebIdentityToken is required", &request_id));
    };
    let seconds = match field("DurationSeconds").map(str::parse::<u64>) {
        None => DEFAULT_DURATION_SECONDS,
        Some(Ok(s)) if (MIN_DURATION_SECONDS..=MAX_DURATION_SECONDS).contains(&s) => s,
        Some(_) => {
            let message = format!("DurationSeconds must be {MIN_DURATION_SECONDS} to {MAX_DURATION_SECONDS}");
            return Ok(error("ValidationError", &message, &request_id));
        }
    };
    let grant = match tokens.verify(token) {
        Ok(grant) => grant,
        Err(err) if err.is_expiry() => return Ok(error("ExpiredTokenException", &err.to_string(), &request_id)),
        Err(err) => return Ok(error("InvalidIdentityToken", &err.to_string(), &request_id)),
    };
    let credentials = sessions.issue(&grant, seconds);
    let session_name = field("RoleSessionName").unwrap_or("isthmus");
    let expiration = time::OffsetDateTime::from_unix_timestamp(credentials.expires_at as i64)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default();
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleWithWebIdentityResult><SubjectFromWebIdentityToken>{}</SubjectFromWebIdentityToken><Audience>{}</Audience><AssumedRoleUser><Arn>arn:aws:sts::isthmus:assumed-role/{}/{}</Arn><AssumedRoleId>{}:{}</AssumedRoleId></AssumedRoleUser><Credentials><AccessKeyId>{}</AccessKeyId><SecretAccessKey>{}</SecretAccessKey><SessionToken>{}</SessionToken><Expiration>{}</Expiration></Credentials><Provider>{}</Provider></AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>",
        xml(&grant.subject),
        xml(&grant.audience),
        xml(&grant.user),
        xml(session_name),
        xml(&grant.user),
        xml(session_name),
        credentials.access_key,
        credentials.secret_key,
        credentials.session_token,
        expiration,
        xml(&grant.issuer),
    );
    tracing::info!(user = %grant.user, subject = %grant.subject, expires = %expiration, "temporary credentials issued");
    Ok(xml_response(hyper::StatusCode::OK, body))
}

fn request_id() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn xml_response(status: hyper::StatusCode, body: String) -> S3Response<Body> {
    let mut resp = S3Response::with_status(Body::from(body), status);
    resp.headers.insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("text/xml"));
    resp
}

/// An STS error as the query protocol reports it (botocore reads `Error/Code`).
fn error(code: &str, message: &str, request_id: &str) -> S3Response<Body> {
    let status = match code {
        "InvalidIdentityToken" | "ExpiredTokenException" => hyper::StatusCode::FORBIDDEN,
        _ => hyper::StatusCode::BAD_REQUEST,
    };
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type><Code>{code}</Code><Message>{}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>",
        xml(message)
    );
    xml_response(status, body)
}
