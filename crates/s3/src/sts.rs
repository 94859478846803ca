//! STS on the gateway's own endpoint (as MinIO serves it): a POST (or GET) of `/` whose form
//! names the action. `AssumeRoleWithWebIdentity` is unsigned and carries a bearer token: the
//! answer is temporary S3 credentials limited to the token's scopes, acting as the token's
//! user. `GetSessionToken` is signed with a user's own keys: the answer is temporary
//! credentials of that user, with all of its rights. Both are valid for `DurationSeconds` (15
//! minutes to 12 hours, never past a token's expiry).

use http_body_util::BodyExt;
use isthmus_grid::sessions::{DEFAULT_DURATION_SECONDS, MAX_DURATION_SECONDS, MIN_DURATION_SECONDS};
use isthmus_grid::{SessionCredentials, SessionKeys, TokenVerifier};
use s3s::{Body, S3Request, S3Response, S3Result};

use crate::bearer::{BearerGrant, GridAuth};

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
pub async fn answer(req: S3Request<Body>, grid: &GridAuth) -> S3Result<S3Response<Body>> {
    let request_id = request_id();
    let signer = signer(&req, grid);
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
    let seconds = match field("DurationSeconds").map(str::parse::<u64>) {
        None => DEFAULT_DURATION_SECONDS,
        Some(Ok(s)) if (MIN_DURATION_SECONDS..=MAX_DURATION_SECONDS).contains(&s) => s,
        Some(_) => {
            let message = format!("DurationSeconds must be {MIN_DURATION_SECONDS} to {MAX_DURATION_SECONDS}");
            return Ok(error("ValidationError", &message, &request_id));
        }
    };
    match field("Action") {
        Some("AssumeRoleWithWebIdentity") => {
            let (Some(tokens), Some(sessions)) = (grid.tokens.as_deref(), grid.sessions.as_ref()) else {
                let message = "This gateway trusts no token issuers (token_issuers)";
                return Ok(error("InvalidIdentityToken", message, &request_id));
            };
            let Some(token) = field("WebIdentityToken") else {
                return Ok(error("MissingParameter", "WebIdentityToken is required", &request_id));
            };
            Ok(assume_role_with_web_identity(tokens, sessions, token, field("RoleSessionName"), seconds, &request_id))
        }
        Some("GetSessionToken") => {
            let Some(sessions) = grid.sessions.as_ref() else {
                let message = "This gateway issues no temporary credentials";
                return Ok(error("InvalidAction", message, &request_id));
            };
            Ok(match signer {
                Signer::User(access_key, secret_key) => {
                    get_session_token(sessions, &access_key, &secret_key, seconds, &request_id)
                }
                Signer::Temporary => {
                    let message = "GetSessionToken needs a user's own keys, not temporary credentials or a token";
                    error("AccessDenied", message, &request_id)
                }
                Signer::Nobody => {
                    let message = "GetSessionToken must be signed with a user's access key";
                    error("MissingAuthenticationToken", message, &request_id)
                }
            })
        }
        Some(other) => {
            let message = format!(
                "Action {other} is not supported; this gateway serves AssumeRoleWithWebIdentity and GetSessionToken"
            );
            Ok(error("InvalidAction", &message, &request_id))
        }
        None => Ok(error("MissingAction", "The request names no Action", &request_id)),
    }
}

/// Who signed an STS call.
enum Signer {
    /// A user, with its own keys (its access key and secret).
    User(String, String),
    /// Temporary credentials or a bearer token.
    Temporary,
    /// No one: the call is unsigned.
    Nobody,
}

fn signer(req: &S3Request<Body>, grid: &GridAuth) -> Signer {
    if req.extensions.get::<BearerGrant>().is_some() {
        return Signer::Temporary;
    }
    match &req.credentials {
        None => Signer::Nobody,
        Some(c) if grid.sessions.as_ref().is_some_and(|s| s.secret_for(&c.access_key).is_some()) => Signer::Temporary,
        Some(c) => Signer::User(c.access_key.clone(), c.secret_key.expose().to_string()),
    }
}

/// Temporary credentials for a bearer token: its user, limited to its scopes.
fn assume_role_with_web_identity(
    tokens: &TokenVerifier,
    sessions: &SessionKeys,
    token: &str,
    session_name: Option<&str>,
    seconds: u64,
    request_id: &str,
) -> S3Response<Body> {
    let grant = match tokens.verify(token) {
        Ok(grant) => grant,
        Err(err) if err.is_expiry() => return error("ExpiredTokenException", &err.to_string(), request_id),
        Err(err) => return error("InvalidIdentityToken", &err.to_string(), request_id),
    };
    let credentials = sessions.issue(&grant, seconds);
    let session_name = session_name.unwrap_or("isthmus");
    let expiration = rfc3339(credentials.expires_at);
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleWithWebIdentityResult><SubjectFromWebIdentityToken>{}</SubjectFromWebIdentityToken><Audience>{}</Audience><AssumedRoleUser><Arn>arn:aws:sts::isthmus:assumed-role/{}/{}</Arn><AssumedRoleId>{}:{}</AssumedRoleId></AssumedRoleUser>{}<Provider>{}</Provider></AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>",
        xml(&grant.subject),
        xml(&grant.audience),
        xml(&grant.user),
        xml(session_name),
        xml(&grant.user),
        xml(session_name),
        credentials_xml(&credentials),
        xml(&grant.issuer),
    );
    tracing::info!(user = %grant.user, subject = %grant.subject, expires = %expiration, "temporary credentials issued");
    xml_response(hyper::StatusCode::OK, body)
}

/// Temporary credentials of the user who signed the call, with all of its rights (AWS's
/// `GetSessionToken`): what the web console keeps instead of the user's secret.
fn get_session_token(
    sessions: &SessionKeys,
    access_key: &str,
    secret_key: &str,
    seconds: u64,
    request_id: &str,
) -> S3Response<Body> {
    let credentials = sessions.issue_for_user(access_key, secret_key, seconds);
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<GetSessionTokenResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><GetSessionTokenResult>{}</GetSessionTokenResult><ResponseMetadata><RequestId>{request_id}</RequestId></ResponseMetadata></GetSessionTokenResponse>",
        credentials_xml(&credentials),
    );
    tracing::info!(user = %access_key, expires = %rfc3339(credentials.expires_at), "temporary credentials issued from keys");
    xml_response(hyper::StatusCode::OK, body)
}

/// The `Credentials` element of an STS answer (keys and token are base32/base64url: no escaping).
fn credentials_xml(credentials: &SessionCredentials) -> String {
    format!(
        "<Credentials><AccessKeyId>{}</AccessKeyId><SecretAccessKey>{}</SecretAccessKey><SessionToken>{}</SessionToken><Expiration>{}</Expiration></Credentials>",
        credentials.access_key,
        credentials.secret_key,
        credentials.session_token,
        rfc3339(credentials.expires_at),
    )
}

fn rfc3339(unix_seconds: u64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix_seconds as i64)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
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
        "InvalidIdentityToken" | "ExpiredTokenException" | "AccessDenied" | "MissingAuthenticationToken" => {
            hyper::StatusCode::FORBIDDEN
        }
        _ => hyper::StatusCode::BAD_REQUEST,
    };
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type><Code>{code}</Code><Message>{}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>",
        xml(message)
    );
    xml_response(status, body)
}
