//! The access log: one line per request (time, user, S3 operation, bucket, key, status, bytes
//! in and out, duration, request id, client address), as text or JSON, to standard output or
//! a file (opened for appending; reopened on SIGHUP, so logrotate can move it away). Lines are
//! handed to a writer thread of their own, so a slow disk or a stalled stdout reader never
//! holds an async worker; if that thread falls `QUEUE` lines behind, lines are dropped and
//! counted, never waited for. The writer thread also opens the file (again, on SIGHUP), with
//! the gateway's own identity: never an async worker, which may rest in a user's.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::time::Duration;

/// Lines the writer thread may be behind before new ones are dropped.
const QUEUE: usize = 16 * 1024;
/// Lines written together in one write call at most (about this many bytes).
const BATCH_BYTES: usize = 64 * 1024;

enum Message {
    Line(String),
    /// Answered once every line sent before it is written.
    Flush(SyncSender<()>),
    /// Open the file again (logrotate moved it); answered with the outcome.
    Reopen(SyncSender<std::io::Result<()>>),
}

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
    queue: SyncSender<Message>,
    dropped: AtomicU64,
}

/// The writer thread: writes lines in batches as they come, answers flushes.
fn write_lines(queue: Receiver<Message>, target: &AccessLogTarget, mut out: Box<dyn Write + Send>) {
    let mut batch = String::new();
    let mut flushes = Vec::new();
    while let Ok(first) = queue.recv() {
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Line(line) => batch.push_str(&line),
                Message::Flush(ack) => flushes.push(ack),
                Message::Reopen(ack) => {
                    write_batch(&mut out, &mut batch);
                    let reopened = open(target).map(|file| out = file);
                    if let Err(err) = &reopened {
                        tracing::warn!(error = %err, "cannot reopen the access log; writing on to the old file");
                    }
                    let _ = ack.try_send(reopened);
                }
            }
            if batch.len() < BATCH_BYTES {
                next = queue.try_recv().ok();
            }
        }
        write_batch(&mut out, &mut batch);
        for ack in flushes.drain(..) {
            let _ = ack.send(());
        }
    }
}

fn write_batch(out: &mut Box<dyn Write + Send>, batch: &mut String) {
    if batch.is_empty() {
        return;
    }
    if let Err(err) = out.write_all(batch.as_bytes()).and_then(|()| out.flush()) {
        tracing::warn!(error = %err, "cannot write the access log");
    }
    batch.clear();
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
        let (queue, lines) = std::sync::mpsc::sync_channel(QUEUE);
        let (opened_tx, opened) = std::sync::mpsc::sync_channel(1);
        let writer_target = target.clone();
        isthmus_store::identity::spawn_gateway_thread("access-log", move || match open(&writer_target) {
            Ok(out) => {
                let _ = opened_tx.send(Ok(()));
                write_lines(lines, &writer_target, out);
            }
            Err(err) => {
                let _ = opened_tx.send(Err(err));
            }
        })
        .map_err(|e| format!("cannot start the access log writer: {e}"))?;
        match opened.recv() {
            Ok(Ok(())) => Ok(Self { target, format, queue, dropped: AtomicU64::new(0) }),
            Ok(Err(err)) => Err(format!("access log {target:?}: {err}")),
            Err(_) => Err(format!("access log {target:?}: the writer thread could not take the gateway's identity")),
        }
    }

    /// Waits (up to `timeout`) until every line logged so far is written: at shutdown.
    pub fn flush(&self, timeout: Duration) {
        let (ack, done) = std::sync::mpsc::sync_channel(1);
        if self.queue.send(Message::Flush(ack)).is_ok() {
            let _ = done.recv_timeout(timeout);
        }
    }

    /// Has the writer thread open the file again (after logrotate moved it), with the
    /// gateway's identity; does not wait for it (the caller may be an async worker): a
    /// failure is logged by the writer, which writes on to the old file.
    pub fn reopen(&self) -> std::io::Result<()> {
        self.request_reopen().map(drop)
    }

    /// Asks for a reopen; the receiver gets its outcome.
    fn request_reopen(&self) -> std::io::Result<std::sync::mpsc::Receiver<std::io::Result<()>>> {
        let (ack, outcome) = std::sync::mpsc::sync_channel(1);
        self.queue.try_send(Message::Reopen(ack)).map_err(|err| match err {
            TrySendError::Full(_) => std::io::Error::other("the access log writer is behind; send SIGHUP again"),
            TrySendError::Disconnected(_) => std::io::Error::other("the access log writer has stopped"),
        })?;
        Ok(outcome)
    }

    /// Logs one record (a line of a few hundred bytes), written by the writer thread.
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
        if let Err(TrySendError::Full(_)) = self.queue.try_send(Message::Line(line)) {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                tracing::warn!(dropped, "the access log cannot keep up: lines dropped");
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_reach_the_file_through_the_writer_and_a_reopen_starts_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let log = AccessLog::open(AccessLogTarget::File(path.clone()), AccessLogFormat::Json).unwrap();
        let record = |status| AccessRecord {
            user: "AK",
            operation: "GetObject",
            method: "GET",
            path: "/b/a%20key",
            status,
            bytes_in: 0,
            bytes_out: 5,
            elapsed: Duration::from_micros(42),
            request_id: "id-1",
            peer: "127.0.0.1:1".parse().unwrap(),
        };
        for status in [200, 404] {
            log.write(&record(status));
        }
        log.flush(Duration::from_secs(5));
        let lines: Vec<serde_json::Value> =
            std::fs::read_to_string(&path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0]["key"].as_str(), lines[1]["status"].as_u64()), (Some("a key"), Some(404)));
        std::fs::rename(&path, dir.path().join("access.log.1")).unwrap();
        log.request_reopen().unwrap().recv().unwrap().unwrap();
        log.write(&record(201));
        log.flush(Duration::from_secs(5));
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 1);
    }
}
