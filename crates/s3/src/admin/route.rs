//! The HTTP form of administration, on the S3 listener (TLS when the gateway has it), signed
//! with SigV4 by the root user: `GET|POST /?isthmus-admin=CALL[&user=NAME]`, JSON in and out.
//! The status page also answers the root user's temporary credentials (the web console's).
//! A query on the service root is used because no bucket or key can collide with it (a path
//! such as `/admin/...` would be a bucket named `admin`).
//!
//! Calls: `status`, `users`, `buckets[&usage=false]` (GET); `add-user` (JSON body: display_name,
//! access_key, buckets, unix_user | uid, gid, groups, umask), `disable-user`, `enable-user`,
//! `rotate-key`, `map-user` (JSON body: the Unix identity), `remove-user` (POST, `user=`).

use std::sync::Arc;

use http_body_util::BodyExt;
use isthmus_session::Principals;
use s3s::{Body, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use serde_json::Value;

use super::{AdminError, Administration};

/// The query parameter that marks an administration call.
pub const ADMIN_PARAMETER: &str = "isthmus-admin";

/// The largest JSON body an administration call takes.
const MAX_BODY: usize = 64 * 1024;

/// Whether a request is an administration call.
pub fn is_admin(uri: &hyper::Uri) -> bool {
    uri.path() == "/"
        && uri.query().is_some_and(|q| url::form_urlencoded::parse(q.as_bytes()).any(|(k, _)| k == ADMIN_PARAMETER))
}

/// Only the root user's signature opens administration (not a token, nor another user). The
/// status page (`GET status`, read-only) also opens to the root user's temporary credentials
/// made from its current keys (STS `GetSessionToken`: what the web console keeps), so the
/// console can show the pools; never to a token's.
pub fn check_root(req: &S3Request<Body>, admin: &Administration, principals: &Principals) -> S3Result<()> {
    match &req.credentials {
        Some(c)
            if admin.users().is_root(&c.access_key) && req.extensions.get::<crate::bearer::BearerGrant>().is_none() =>
        {
            Ok(())
        }
        Some(_) if is_status_read(req) && is_root_session(req, principals) => Ok(()),
        _ => Err(s3s::s3_error!(AccessDenied, "Administration needs a request signed with the root user's keys")),
    }
}

/// `GET /?isthmus-admin=status`.
fn is_status_read(req: &S3Request<Body>) -> bool {
    req.method == hyper::Method::GET
        && req.uri.query().is_some_and(|q| {
            url::form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == ADMIN_PARAMETER && v == "status")
        })
}

/// Temporary credentials of the root user made from its current keys (not a token's).
fn is_root_session(req: &S3Request<Body>, principals: &Principals) -> bool {
    if req.extensions.get::<crate::bearer::BearerGrant>().is_some() {
        return false;
    }
    let Some(credentials) = &req.credentials else { return false };
    principals.is_root_session(&credentials.access_key, crate::bearer::security_token(req).as_deref())
}

fn admin_error(err: AdminError) -> S3Error {
    let (code, status) = err.code_and_status();
    if let AdminError::Failed(message) = &err {
        tracing::error!(error = %message, "an administration call failed");
    }
    let code = S3ErrorCode::from_bytes(code.as_bytes()).unwrap_or_else(|| S3ErrorCode::Custom(code.into()));
    let mut s3 = S3Error::with_message(code, err.to_string());
    if let Ok(status) = hyper::StatusCode::from_u16(status) {
        s3.set_status_code(status);
    }
    s3
}

fn invalid(message: String) -> S3Error {
    admin_error(AdminError::Invalid(message))
}

/// Answers one administration call (already checked to come from root).
pub async fn answer(admin: Arc<Administration>, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
    let query: Vec<(String, String)> =
        req.uri.query().map(|q| url::form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default();
    let param = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let call = param(ADMIN_PARAMETER).unwrap_or_default();
    let user = param("user");
    let usage = param("usage").is_none_or(|v| v != "false");
    let is_get = req.method == hyper::Method::GET;
    let body = if req.method == hyper::Method::POST {
        let collected = http_body_util::Limited::new(req.input, MAX_BODY)
            .collect()
            .await
            .map_err(|_| invalid(format!("the request body is unreadable or larger than {MAX_BODY} bytes")))?;
        collected.to_bytes()
    } else {
        Default::default()
    };
    let json_body = |what: &str| -> S3Result<Value> {
        serde_json::from_slice(&body).map_err(|e| invalid(format!("{what}: the body must be a JSON object: {e}")))
    };
    let expected_get = matches!(call.as_str(), "status" | "users" | "buckets");
    if expected_get != is_get {
        let method = if expected_get { "GET" } else { "POST" };
        return Err(invalid(format!("{call} is called with {method}")));
    }
    let needs_user =
        || user.clone().ok_or_else(|| invalid(format!("{call} needs user=NAME (access key or display name)")));
    let new_user = if call == "add-user" { Some(json_body("add-user")?) } else { None };
    let identity = if call == "map-user" { Some(json_body("map-user")?) } else { None };
    let named = match call.as_str() {
        "disable-user" | "enable-user" | "rotate-key" | "map-user" | "remove-user" => Some(needs_user()?),
        "status" | "users" | "buckets" | "add-user" => None,
        other => {
            return Err(invalid(format!(
                "unknown administration call {other:?}; calls: status, users, buckets, add-user, disable-user, enable-user, rotate-key, map-user, remove-user"
            )));
        }
    };
    // Every call reads or writes files (the users file, listings): on the blocking pool.
    let result = tokio::task::spawn_blocking(move || -> Result<Value, AdminError> {
        let name = named.unwrap_or_default();
        // Answers reflect what another gateway on the root wrote a moment ago.
        admin.reload_if_changed().map_err(AdminError::Failed)?;
        match call.as_str() {
            "status" => admin.status(),
            "users" => Ok(admin.list_users()),
            "buckets" => admin.list_buckets(usage),
            "add-user" => {
                let new = serde_json::from_value(new_user.unwrap_or_default())
                    .map_err(|e| AdminError::Invalid(format!("add-user: {e}")))?;
                admin.add_user(new)
            }
            "disable-user" => admin.set_disabled(&name, true),
            "enable-user" => admin.set_disabled(&name, false),
            "rotate-key" => admin.rotate(&name),
            "map-user" => {
                let spec = serde_json::from_value(identity.unwrap_or_default())
                    .map_err(|e| AdminError::Invalid(format!("map-user: {e}")))?;
                admin.map(&name, spec)
            }
            _ => admin.remove(&name),
        }
    })
    .await
    .map_err(crate::error::join_error)?
    .map_err(admin_error)?;
    let mut resp = S3Response::with_status(Body::from(result.to_string()), hyper::StatusCode::OK);
    resp.headers.insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    resp.headers.insert(hyper::header::CACHE_CONTROL, hyper::header::HeaderValue::from_static("no-store"));
    Ok(resp)
}
