//! Maps engine errors to S3 errors (code, message, HTTP status) at the edge.

use isthmus_store::StoreError;
use s3s::{S3Error, S3ErrorCode};

/// Turns an engine error into the S3 error the client sees. Internal I/O details are logged,
/// not sent.
pub fn s3_error(err: StoreError) -> S3Error {
    s3_error_of(&err)
}

/// `s3_error` of an engine error held elsewhere (inside an array's error).
pub fn s3_error_of(err: &StoreError) -> S3Error {
    crate::metrics::METRICS.engine_error(err.s3_code());
    // Codes S3 itself lacks (QuotaExceeded, as Ceph RGW answers) go out as they are.
    let code = S3ErrorCode::from_bytes(err.s3_code().as_bytes())
        .unwrap_or_else(|| S3ErrorCode::Custom(bytestring::ByteString::from_static(err.s3_code())));
    let message = match err {
        StoreError::Io(_) | StoreError::IoAt { .. } | StoreError::WouldBlock => {
            tracing::error!(error = %err, "internal error");
            "We encountered an internal error. Please try again.".to_string()
        }
        // S3's words; which rule refused goes to the log (see `REFUSED_HEADER`).
        StoreError::AccessDenied | StoreError::Denied(_) => "Access Denied".to_string(),
        other => other.to_string(),
    };
    let mut s3 = S3Error::with_message(code, message);
    if let Ok(status) = hyper::StatusCode::from_u16(err.http_status()) {
        s3.set_status_code(status);
    }
    let mut headers = hyper::HeaderMap::new();
    if let Some(why) = err.refusal_reason()
        && let Ok(value) = hyper::header::HeaderValue::from_str(&why)
    {
        headers.insert(REFUSED_HEADER, value);
    }
    // S3 says which delete marker answered, so clients can tell "deleted" from "never was".
    if let StoreError::LatestIsDeleteMarker { version_id } | StoreError::VersionIsDeleteMarker { version_id } = err {
        headers.insert("x-amz-delete-marker", hyper::header::HeaderValue::from_static("true"));
        if let Ok(value) = hyper::header::HeaderValue::from_str(version_id) {
            headers.insert("x-amz-version-id", value);
        }
    }
    // A 304 carries the validators a cache revalidates with (the body goes at the edge).
    if let StoreError::NotModified { etag, last_modified } = err {
        if let Ok(value) = hyper::header::HeaderValue::from_str(&format!("\"{etag}\"")) {
            headers.insert(hyper::header::ETAG, value);
        }
        if let Ok(value) = hyper::header::HeaderValue::from_str(&httpdate::fmt_http_date(*last_modified)) {
            headers.insert(hyper::header::LAST_MODIFIED, value);
        }
    }
    if !headers.is_empty() {
        s3.set_headers(headers);
    }
    s3
}

/// Carries why a request was refused from where it was refused to the log line the server
/// writes for it; taken out of the response before it is sent (`take_refusal`).
pub const REFUSED_HEADER: &str = "x-isthmus-refused";

/// Why the response's request was refused, if a rule said so; removed from the response.
pub fn take_refusal(resp: &mut s3s::HttpResponse) -> Option<String> {
    let why = resp.headers_mut().remove(REFUSED_HEADER)?;
    Some(why.to_str().unwrap_or("(not text)").to_string())
}

/// A blocking-pool task that panicked or was cancelled.
pub fn join_error(err: tokio::task::JoinError) -> S3Error {
    tracing::error!(error = %err, "engine task failed");
    S3Error::with_message(S3ErrorCode::InternalError, "We encountered an internal error. Please try again.")
}
