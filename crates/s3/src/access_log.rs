//! The access log: one line per request (time, user, S3 operation, bucket, key, status, bytes
//! in and out, duration, request id, client address), as text or JSON, to standard output or
//! a file (opened for appending; reopened on SIGHUP, so logrotate can move it away).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// How lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessLogFormat {
    #[default]
    Text,
    Json,
}

/// Where lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogTarget {
    Stdout,
    File(PathBuf),
}

impl AccessLogTarget {
    /// `stdout` or a path.
    pub fn parse(text: &str) -> Self {
        if text == "stdout" || text == "-" { Self::Stdout } else { Self::File(PathBuf::from(text)) }
    }
}

/// One request, as logged.
pub struct AccessRecord<'a> {
    pub user: &'a str,
    pub operation: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub status: u16,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub elapsed: Duration,
    pub request_id: &'a str,
    pub peer: SocketAddr,
}

/// An open access log.
pub struct AccessLog {
    target: AccessLogTarget,
    format: AccessLogFormat,
    out: Mutex<Box<dyn Write + Send>>,
}

fn open(target: &AccessLogTarget) -> std::io::Result<Box<dyn Write + Send>> {
    Ok(match target {
        AccessLogTarget::Stdout => Box::new(std::io::stdout()),
        AccessLogTarget::File(path) => Box::new(std::fs::OpenOptions::new().create(true).append(true).open(path)?),
    })
}

impl std::fmt::Debug for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessLog").field("target", &self.target).field("format", &self.format).finish()
    }
}

impl AccessLog {
    pub fn open(target: AccessLogTarget, format: AccessLogFormat) -> Result<Self, String> {
        let out = open(&target).map_err(|e| format!("access log {target:?}: {e}"))?;
        Ok(Self { target, format, out: Mutex::new(out) })
    }

    /// Opens the file again (after logrotate moved it).
    pub fn reopen(&self) -> std::io::Result<()> {
        let out = open(&self.target)?;
        *self.out.lock().unwrap_or_else(|e| e.into_inner()) = out;
        Ok(())
    }

    /// Writes one record (a line of a few hundred bytes: one write call).
    pub fn write(&self, record: &AccessRecord<'_>) {
        let time =
            time::OffsetDateTime::now_utc().format(&time::format_description::well_known::Rfc3339).unwrap_or_default();
        let decoded = percent_encoding::percent_decode_str(record.path).decode_utf8_lossy();
        let (bucket, key) =
            decoded.trim_start_matches('/').split_once('/').unwrap_or((decoded.trim_start_matches('/'), ""));
        let micros = record.elapsed.as_micros() as u64;
        let mut line = match self.format {
            AccessLogFormat::Json => serde_json::json!({
                "time": time, "user": record.user, "operation": record.operation, "method": record.method,
                "bucket": bucket, "key": key, "status": record.status, "bytes_in": record.bytes_in,
                "bytes_out": record.bytes_out, "duration_us": micros, "request_id": record.request_id,
                "remote": record.peer.to_string(),
            })
            .to_string(),
            AccessLogFormat::Text => format!(
                "{time} {} {} {} {:?} {:?} {} {} {} {micros}us {} {}",
                record.peer,
                if record.user.is_empty() { "-" } else { record.user },
                record.operation,
                bucket,
                key,
                record.status,
                record.bytes_in,
                record.bytes_out,
                record.request_id,
                record.method,
            ),
        };
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(err) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
            tracing::warn!(error = %err, "cannot write the access log");
        }
    }
}

/// The user a request names: its access key (SigV4 or SigV2, header or query) or, for a
/// bearer token, `token:` and the user it maps to; "" for anonymous requests.
pub fn user_of<B>(req: &hyper::Request<B>) -> String {
    if let Some(crate::bearer::BearerGrant(grant)) = req.extensions().get::<crate::bearer::BearerGrant>() {
        return format!("token:{}", grant.user);
    }
    let header = req.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
    if let Some(credential) = header.split("Credential=").nth(1) {
        return credential.split('/').next().unwrap_or("").to_string();
    }
    if let Some(rest) = header.strip_prefix("AWS ") {
        return rest.split(':').next().unwrap_or("").to_string();
    }
    let query = req.uri().query().unwrap_or("");
    for pair in query.split('&') {
        if let Some(value) = pair.strip_prefix("X-Amz-Credential=") {
            let value = percent_encoding::percent_decode_str(value).decode_utf8_lossy();
            return value.split('/').next().unwrap_or("").to_string();
        }
        if let Some(value) = pair.strip_prefix("AWSAccessKeyId=") {
            return value.to_string();
        }
    }
    String::new()
}
