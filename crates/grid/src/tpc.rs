//! The remote half of HTTP third-party copy (blocking; run on the copy's own threads, never on
//! a pool that serves requests). A pull first asks the source what it is (`probe`: its size,
//! validator and digests), so that everything its bytes will need (the quota, free space) is
//! admitted before any is staged; then `fetch_into` downloads it into a staging file under the
//! gateway's internal directory, in chunks over parallel streams (ranged GETs; a chunk whose
//! connection drops is fetched again, a finished one never), while the consumer stores the
//! bytes in order, verified against the digests the source sent (`Digest: adler32=...,
//! md5=...`, RFC 3230) before the object is visible. The staging file has no name: it goes
//! when the copy ends, however it ends (a gateway that dies leaves nothing either). A push
//! streams an object to the destination with a PUT, its MD5 sent as `Content-MD5` when known.
//! Every remote call waits at most the response timeout for an answer or a read, and ends by
//! the copy's deadline (`Budget`). Progress is counted in an atomic that the caller turns into
//! performance markers. Every connection goes through an `OutboundPolicy` agent: only to hosts
//! the operator allows.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use isthmus_store::StoreError;
use ureq::Timeout;

pub use crate::copy_limits::{Budget, StagingRefusal};
use crate::outbound::{CONNECT_TIMEOUT, OutboundPolicy};

/// The size of the chunks a pull fetches (each a ranged GET).
pub const CHUNK_SIZE: u64 = 8 << 20;
/// The most parallel streams a client may ask for.
pub const MAX_STREAMS: usize = 16;
/// How often a chunk is tried when its connection drops.
const CHUNK_ATTEMPTS: usize = 3;

/// Why a transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error("the remote side answered {status}: {message}")]
    Remote { status: u16, message: String },
    #[error("cannot reach the remote side: {0}")]
    Unreachable(String),
    #[error("checksum mismatch: the source says {algorithm} {expected}, the bytes received give {actual}")]
    ChecksumMismatch { algorithm: &'static str, expected: String, actual: String },
    #[error("the source sends no checksum (adler32 or md5) and RequireChecksumVerification is set")]
    NoChecksum,
    #[error("the source announces no size (no Content-Range, no Content-Length)")]
    NoSize,
    #[error("the source sent {got} bytes where {expected} were expected")]
    ShortRead { got: u64, expected: u64 },
    #[error("the remote side sent no response within {0:?} (tpc_response_timeout_seconds)")]
    NoResponse(Duration),
    #[error("the remote side sent or took nothing for {0:?} (tpc_response_timeout_seconds)")]
    Stalled(Duration),
    #[error("the copy did not end within its deadline of {0:?} (tpc_deadline_seconds)")]
    Deadline(Duration),
    #[error(transparent)]
    Staging(#[from] StagingRefusal),
    #[error("staging I/O: {0}")]
    Io(#[from] std::io::Error),
    /// Storing the bytes was refused (a quota, a permission, ...).
    #[error("{0}")]
    Store(StoreError),
}

impl TransferError {
    /// The S3 error code a client is told with the failure, where one says more than the text.
    pub fn s3_code(&self) -> Option<&'static str> {
        match self {
            Self::NoResponse(_) | Self::Stalled(_) | Self::Deadline(_) => Some("RequestTimeout"),
            Self::Staging(StagingRefusal::NoSpace { .. }) => Some("InsufficientStorage"),
            Self::NoSize => Some("InvalidRequest"),
            Self::Store(err) => Some(err.s3_code()),
            _ => None,
        }
    }
}

/// What the caller asks of a transfer.
#[derive(Debug, Clone)]
pub struct TransferOptions {
    /// Headers for the remote side (from the `TransferHeader*` headers).
    pub headers: Vec<(String, String)>,
    pub streams: usize,
    /// Refuse a source that sends no digest.
    pub require_checksum: bool,
}

/// The other side of a copy: its URL, what the caller asked for it, where the gateway may
/// connect, and the copy's time budget.
#[derive(Clone, Copy)]
pub struct Remote<'a> {
    pub url: &'a str,
    pub options: &'a TransferOptions,
    pub policy: &'a Arc<OutboundPolicy>,
    pub budget: &'a Budget,
}

impl Remote<'_> {
    fn agent(&self) -> ureq::Agent {
        agent(self.policy, self.budget.response_timeout)
    }

    /// `request` with the headers the caller gave for the remote side.
    fn with_headers<B>(&self, mut request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        for (name, value) in &self.options.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        request
    }
}

/// Adler-32 (the checksum WLCG storage uses for transfers).
#[derive(Default)]
pub struct Adler32(adler2::Adler32);

impl Adler32 {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.write_slice(bytes);
    }

    pub fn hex(&self) -> String {
        format!("{:08x}", self.0.checksum())
    }
}

/// The digests a source announced (`Digest` header), lowercase algorithm names.
fn announced_digests(response: &ureq::http::Response<ureq::Body>) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for name in ["digest", "repr-digest"] {
        for value in response.headers().get_all(name) {
            let Ok(text) = value.to_str() else { continue };
            for item in text.split(',') {
                if let Some((algorithm, digest)) = item.trim().split_once('=') {
                    found.push((algorithm.trim().to_ascii_lowercase(), digest.trim().trim_matches(':').to_string()));
                }
            }
        }
    }
    found
}

/// The agent of a transfer: it connects only where `policy` allows (every redirect hop and
/// every DNS answer checked), and no wait on the remote side (connecting, its response, any
/// read or write) lasts longer than `response_timeout`.
fn agent(policy: &Arc<OutboundPolicy>, response_timeout: Duration) -> ureq::Agent {
    policy.agent(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT.min(response_timeout)))
            .timeout_recv_response(Some(response_timeout))
            .timeout_per_read(Some(response_timeout))
            .timeout_per_write(Some(response_timeout)),
    )
}

/// Sends `request` with what is left of the copy's deadline as its whole budget (its body's
/// reading included).
fn call<B>(
    request: ureq::RequestBuilder<B>,
    budget: &Budget,
    send: impl FnOnce(ureq::RequestBuilder<B>) -> Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<ureq::http::Response<ureq::Body>, TransferError> {
    let left = time_left(budget)?;
    send(request.config().timeout_global(Some(left)).build()).map_err(|err| call_failed(err, budget))
}

/// What is left of the copy's deadline; `Deadline` once it has passed.
fn time_left(budget: &Budget) -> Result<Duration, TransferError> {
    budget.remaining().ok_or(TransferError::Deadline(budget.allowed))
}

/// Why a request got no response: a timeout before the response is a remote side that does
/// not answer.
fn call_failed(err: ureq::Error, budget: &Budget) -> TransferError {
    match err {
        ureq::Error::Timeout(Timeout::Global) => TransferError::Deadline(budget.allowed),
        ureq::Error::Timeout(Timeout::Connect | Timeout::Resolve) => TransferError::Unreachable(err.to_string()),
        // A destination that stopped taking a push's body.
        ureq::Error::Timeout(Timeout::PerWrite | Timeout::SendBody | Timeout::SendRequest) => {
            TransferError::Stalled(budget.response_timeout)
        }
        ureq::Error::Timeout(_) => TransferError::NoResponse(budget.response_timeout),
        other => TransferError::Unreachable(other.to_string()),
    }
}

/// Why reading a response's body failed: a timeout there is a remote side that stopped.
fn read_failed(err: std::io::Error, budget: &Budget) -> TransferError {
    match ureq::Error::from(err) {
        ureq::Error::Timeout(Timeout::Global) => TransferError::Deadline(budget.allowed),
        ureq::Error::Timeout(_) => TransferError::Stalled(budget.response_timeout),
        ureq::Error::Io(err) if err.kind() == std::io::ErrorKind::TimedOut => {
            TransferError::Stalled(budget.response_timeout)
        }
        other => TransferError::Unreachable(other.to_string()),
    }
}

fn refused(mut response: ureq::http::Response<ureq::Body>) -> TransferError {
    let status = response.status().as_u16();
    let message = response.body_mut().with_config().limit(4096).read_to_string().unwrap_or_default();
    TransferError::Remote { status, message: message.chars().take(500).collect() }
}

/// A pull's staging file: unnamed (`O_TMPFILE`) in the staging directory, or, where the file
/// system has no unnamed files, removed by name as soon as it is made; either way its bytes go
/// when it is dropped, and no other pull (another user's included) ever meets it.
pub struct Staging {
    file: File,
}

impl Staging {
    pub fn create(dir: &Path) -> Result<Self, TransferError> {
        use rustix::fs::{Mode, OFlags};
        std::fs::create_dir_all(dir)?;
        let unnamed =
            rustix::fs::open(dir, OFlags::RDWR | OFlags::TMPFILE | OFlags::CLOEXEC, Mode::from_raw_mode(0o600));
        let file = match unnamed {
            Ok(fd) => File::from(fd),
            Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::ISDIR | rustix::io::Errno::INVAL) => {
                let mut random = [0u8; 12];
                getrandom::fill(&mut random).map_err(|e| std::io::Error::other(e.to_string()))?;
                let path = dir.join(format!("pull.{}", hex::encode(random)));
                let file = OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path)?;
                std::fs::remove_file(&path)?;
                file
            }
            Err(err) => return Err(std::io::Error::from(err).into()),
        };
        Ok(Self { file })
    }
}

/// Removes files in `dir` untouched for `age` (named staging left by earlier versions, which
/// kept interrupted pulls to resume), returning how many went.
pub fn clean_stale(dir: &Path, age: Duration) -> std::io::Result<usize> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(err) => return Err(err),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        let stale = entry.metadata()?.modified()?.elapsed().is_ok_and(|elapsed| elapsed > age);
        if stale && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    Ok(removed)
}

/// What the source says it is, before any of its bytes are fetched.
#[derive(Debug, Clone)]
pub struct PullInfo {
    pub size: u64,
    pub digests: Vec<(String, String)>,
}

/// Asks the source what it is with a one-byte ranged GET (its size, its digests): the only
/// request a pull makes before its size is admitted. A source that announces no size is
/// refused, and so is one without digests when the caller requires them.
pub fn probe(remote: &Remote<'_>) -> Result<PullInfo, TransferError> {
    let request = remote.agent().get(remote.url).header("Want-Digest", "adler32, md5").header("Range", "bytes=0-0");
    let request = remote.with_headers(request);
    let response = call(request, remote.budget, |r| r.call())?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) && status != 416 {
        return Err(refused(response));
    }
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let size = match (status, header("content-range")) {
        (206 | 416, Some(range)) => range.rsplit('/').next().and_then(|s| s.trim().parse().ok()),
        _ => header("content-length").and_then(|s| s.trim().parse().ok()),
    };
    let size = size.ok_or(TransferError::NoSize)?;
    let digests = announced_digests(&response);
    drop(response);
    if digests.is_empty() && remote.options.require_checksum {
        return Err(TransferError::NoChecksum);
    }
    Ok(PullInfo { size, digests })
}

/// Which chunks are on disk, shared by the streams and the reader that follows them.
#[derive(Default)]
struct Arrivals {
    done: HashSet<u64>,
    failed: Option<String>,
    /// The consumer gave up: the streams stop after their current chunk.
    abort: bool,
}

/// The pulled bytes in order, as the streams land them in the staging file: a read waits for
/// its chunk (a failed stream fails it, and so does the copy's deadline).
struct InOrder<'a> {
    file: &'a File,
    size: u64,
    offset: u64,
    arrivals: &'a (Mutex<Arrivals>, Condvar),
    budget: &'a Budget,
}

impl Read for InOrder<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.offset >= self.size || buf.is_empty() {
            return Ok(0);
        }
        let chunk = self.offset / CHUNK_SIZE;
        let (lock, arrived) = self.arrivals;
        let mut arrivals = lock.lock().unwrap_or_else(|e| e.into_inner());
        while !arrivals.done.contains(&chunk) {
            if let Some(failed) = &arrivals.failed {
                return Err(std::io::Error::other(failed.clone()));
            }
            let left = time_left(self.budget).map_err(|err| std::io::Error::new(std::io::ErrorKind::TimedOut, err))?;
            arrivals = arrived.wait_timeout(arrivals, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        drop(arrivals);
        let end = ((chunk + 1) * CHUNK_SIZE).min(self.size);
        let want = buf.len().min((end - self.offset) as usize);
        let n = self.file.read_at(&mut buf[..want], self.offset)?;
        self.offset += n as u64;
        Ok(n)
    }
}

/// Fetches the `info.size` bytes of the source through `staging` and hands them in order to
/// `consume` as they arrive, so storing and verifying them runs alongside the download.
/// `consume` runs on the calling thread (with whatever identity that thread takes); the streams
/// run on threads of their own, started before it.
pub fn fetch_into<T>(
    remote: &Remote<'_>,
    info: &PullInfo,
    staging: &Staging,
    progress: &AtomicU64,
    consume: impl FnOnce(&mut dyn Read) -> Result<T, TransferError>,
) -> Result<T, TransferError> {
    let agent = remote.agent();
    let budget = remote.budget;
    let size = info.size;
    let file = &staging.file;
    progress.store(0, Ordering::Relaxed);
    let arrivals = (Mutex::new(Arrivals::default()), Condvar::new());
    let queue = Mutex::new(0..size.div_ceil(CHUNK_SIZE));
    let streams = remote.options.streams.clamp(1, MAX_STREAMS);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..streams)
            .map(|_| {
                let (queue, agent, arrivals) = (&queue, &agent, &arrivals);
                scope.spawn(move || -> Result<(), TransferError> {
                    let result: Result<(), TransferError> = (|| loop {
                        if arrivals.0.lock().unwrap_or_else(|e| e.into_inner()).abort {
                            return Ok(());
                        }
                        let Some(chunk) = queue.lock().unwrap_or_else(|e| e.into_inner()).next() else { return Ok(()) };
                        let fetch = Fetch { agent, remote, file, size, progress };
                        fetch.chunk_with_retries(chunk)?;
                        arrivals.0.lock().unwrap_or_else(|e| e.into_inner()).done.insert(chunk);
                        arrivals.1.notify_all();
                    })();
                    if let Err(err) = &result {
                        arrivals.0.lock().unwrap_or_else(|e| e.into_inner()).failed = Some(err.to_string());
                        arrivals.1.notify_all();
                    }
                    result
                })
            })
            .collect();
        let mut reader = InOrder { file, size, offset: 0, arrivals: &arrivals, budget };
        let consumed = consume(&mut reader);
        if consumed.is_err() {
            arrivals.0.lock().unwrap_or_else(|e| e.into_inner()).abort = true;
        }
        for worker in workers {
            // A failed stream (an interrupted download) is what the caller must hear of first.
            worker.join().unwrap_or_else(|_| Err(TransferError::Unreachable("a stream panicked".into())))?;
        }
        match consumed {
            Err(_) if budget.remaining().is_none() => Err(TransferError::Deadline(budget.allowed)),
            other => other,
        }
    })
}

fn chunk_len(chunk: u64, size: u64) -> u64 {
    (size - chunk * CHUNK_SIZE).min(CHUNK_SIZE)
}

/// What a stream needs to fetch chunks.
struct Fetch<'a> {
    agent: &'a ureq::Agent,
    remote: &'a Remote<'a>,
    file: &'a File,
    size: u64,
    progress: &'a AtomicU64,
}

impl Fetch<'_> {
    /// Fetches a chunk, again when its connection dropped (a few times, within the deadline).
    fn chunk_with_retries(&self, chunk: u64) -> Result<(), TransferError> {
        let mut attempt = 1;
        loop {
            let counted = AtomicU64::new(0);
            match self.chunk(chunk, &counted) {
                Ok(()) => return Ok(()),
                Err(err @ (TransferError::Unreachable(_) | TransferError::ShortRead { .. }))
                    if attempt < CHUNK_ATTEMPTS =>
                {
                    tracing::info!(chunk, attempt, error = %err, "a pull's chunk is fetched again");
                    self.progress.fetch_sub(counted.load(Ordering::Relaxed), Ordering::Relaxed);
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Fetches one chunk with a ranged GET and writes it at its offset (never past it).
    fn chunk(&self, chunk: u64, counted: &AtomicU64) -> Result<(), TransferError> {
        let start = chunk * CHUNK_SIZE;
        let len = chunk_len(chunk, self.size);
        let request = self.agent.get(self.remote.url).header("Range", format!("bytes={start}-{}", start + len - 1));
        let response = call(self.remote.with_headers(request), self.remote.budget, |r| r.call())?;
        let status = response.status().as_u16();
        if status != 206 && !(status == 200 && start == 0 && len == self.size) {
            return Err(refused(response));
        }
        let mut reader = response.into_body().into_reader();
        let mut buf = vec![0u8; 256 << 10];
        let mut offset = start;
        while offset < start + len {
            let n = reader.read(&mut buf).map_err(|e| read_failed(e, self.remote.budget))?;
            if n == 0 {
                return Err(TransferError::ShortRead { got: offset - start, expected: len });
            }
            let n = n.min((start + len - offset) as usize);
            self.file.write_all_at(&buf[..n], offset)?;
            offset += n as u64;
            self.progress.fetch_add(n as u64, Ordering::Relaxed);
            counted.fetch_add(n as u64, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Checks bytes against the digests a source announced, as they pass (once, while they are
/// stored): Adler-32 here, MD5 from the store's writer, which computes it anyway.
pub struct Verifier {
    adler: Option<Adler32>,
    digests: Vec<(String, String)>,
}

impl Verifier {
    pub fn new(digests: &[(String, String)]) -> Self {
        let adler = digests.iter().any(|(a, _)| a == "adler32").then(Adler32::default);
        Self { adler, digests: digests.to_vec() }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        if let Some(adler) = &mut self.adler {
            adler.update(bytes);
        }
    }

    /// Whether every announced digest this gateway knows matches; `md5` is the MD5 of all the
    /// bytes. Ok(false): nothing could be checked.
    pub fn finish(self, md5: Option<[u8; 16]>) -> Result<bool, TransferError> {
        let mut verified = false;
        for (algorithm, expected) in &self.digests {
            let (name, actual, matches) = match (algorithm.as_str(), &self.adler, md5) {
                ("adler32", Some(adler), _) => ("adler32", adler.hex(), expected.eq_ignore_ascii_case(&adler.hex())),
                ("md5", _, Some(md5)) => {
                    let actual = STANDARD.encode(md5);
                    let matches = expected == &actual || expected.eq_ignore_ascii_case(&hex::encode(md5));
                    ("md5", actual, matches)
                }
                _ => continue,
            };
            if !matches {
                return Err(TransferError::ChecksumMismatch { algorithm: name, expected: expected.clone(), actual });
            }
            verified = true;
        }
        Ok(verified)
    }
}

/// Pushes `size` bytes from `body` to the destination with a PUT; `md5` (if the object's MD5
/// is known) goes as Content-MD5 so the destination checks what it received.
pub fn push(
    remote: &Remote<'_>,
    body: &mut dyn Read,
    size: u64,
    md5: Option<[u8; 16]>,
    progress: &AtomicU64,
) -> Result<(), TransferError> {
    let mut request = remote.agent().put(remote.url).header("Content-Length", size.to_string());
    if let Some(md5) = md5 {
        request = request.header("Content-MD5", STANDARD.encode(md5));
    }
    let mut counted = Counted { inner: body, progress };
    let response =
        call(remote.with_headers(request), remote.budget, |r| r.send(ureq::SendBody::from_reader(&mut counted)))?;
    if !response.status().is_success() {
        return Err(refused(response));
    }
    Ok(())
}

struct Counted<'a> {
    inner: &'a mut dyn Read,
    progress: &'a AtomicU64,
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_staging_untouched_for_the_age_is_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old.part");
        let fresh = dir.path().join("fresh.part");
        std::fs::write(&old, b"x").unwrap();
        std::fs::write(&fresh, b"y").unwrap();
        let day_ago = std::time::SystemTime::now() - Duration::from_secs(2 * 24 * 3600);
        File::options().write(true).open(&old).unwrap().set_modified(day_ago).unwrap();
        assert_eq!(clean_stale(dir.path(), Duration::from_secs(24 * 3600)).unwrap(), 1);
        assert!(!old.exists() && fresh.exists());
        assert_eq!(clean_stale(&dir.path().join("missing"), Duration::ZERO).unwrap(), 0);
    }

    #[test]
    fn staging_has_no_name_and_its_bytes_go_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = Staging::create(&dir.path().join("tpc")).unwrap();
        let second = Staging::create(&dir.path().join("tpc")).unwrap();
        first.file.write_all_at(b"first", 0).unwrap();
        second.file.write_all_at(b"second", 0).unwrap();
        let mut back = [0u8; 5];
        first.file.read_exact_at(&mut back, 0).unwrap();
        assert_eq!(&back, b"first", "each pull has a file of its own");
        assert_eq!(std::fs::read_dir(dir.path().join("tpc")).unwrap().count(), 0, "nothing named in the directory");
    }

    /// A source on loopback that runs `answer` on each connection (with the request's head).
    fn source(answer: fn(&str, &mut std::net::TcpStream)) -> (String, Arc<OutboundPolicy>) {
        use std::io::{BufRead, BufReader};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                std::thread::spawn(move || {
                    loop {
                        let mut head = String::new();
                        let mut reader = BufReader::new(stream.try_clone().unwrap());
                        while reader.read_line(&mut head).is_ok_and(|n| n > 2) {}
                        if head.is_empty() {
                            return;
                        }
                        answer(&head, &mut stream);
                    }
                });
            }
        });
        let allow = vec!["127.0.0.1".parse().unwrap()];
        (format!("http://{address}/file"), Arc::new(OutboundPolicy::new(allow, Vec::new())))
    }

    fn options() -> TransferOptions {
        TransferOptions { headers: Vec::new(), streams: 2, require_checksum: false }
    }

    #[test]
    fn a_source_that_accepts_and_never_answers_is_left_after_the_response_timeout() {
        let (url, policy) = source(|_, _| std::thread::sleep(Duration::from_secs(3600)));
        let budget = Budget::new(Duration::from_millis(300), Duration::from_secs(60));
        let started = std::time::Instant::now();
        let err = probe(&Remote { url: &url, options: &options(), policy: &policy, budget: &budget }).unwrap_err();
        assert!(matches!(err, TransferError::NoResponse(_)), "{err}");
        assert_eq!(err.s3_code(), Some("RequestTimeout"));
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    }

    #[test]
    fn a_source_that_trickles_is_stopped_by_the_deadline_and_one_without_a_size_is_refused() {
        use std::io::Write;
        // Announces 1 MiB, then sends a byte every 50 ms: never silent, never done.
        let (url, policy) = source(|head, stream| {
            if head.contains("bytes=0-0") {
                let _ = stream.write_all(
                    b"HTTP/1.1 206 Partial\r\nContent-Range: bytes 0-0/1048576\r\nContent-Length: 1\r\n\r\nx",
                );
                return;
            }
            let _ = stream.write_all(
                b"HTTP/1.1 206 Partial\r\nContent-Range: bytes 0-1048575/1048576\r\nContent-Length: 1048576\r\n\r\n",
            );
            while stream.write_all(b"x").is_ok() {
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        let budget = Budget::new(Duration::from_secs(5), Duration::from_millis(800));
        let options = options();
        let remote = Remote { url: &url, options: &options, policy: &policy, budget: &budget };
        let info = probe(&remote).unwrap();
        assert_eq!(info.size, 1 << 20);
        let dir = tempfile::tempdir().unwrap();
        let staging = Staging::create(dir.path()).unwrap();
        let progress = AtomicU64::new(0);
        let started = std::time::Instant::now();
        let err = fetch_into(&remote, &info, &staging, &progress, |bytes| {
            std::io::copy(bytes, &mut std::io::sink()).map_err(TransferError::from)
        })
        .unwrap_err();
        assert!(matches!(err, TransferError::Deadline(_)), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());

        let (url, policy) = source(|_, stream| {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n");
        });
        let budget = Budget::new(Duration::from_secs(5), Duration::from_secs(5));
        let err = probe(&Remote { url: &url, options: &options, policy: &policy, budget: &budget }).unwrap_err();
        assert!(matches!(err, TransferError::NoSize), "{err}");
    }

    #[test]
    fn adler32_matches_the_reference_values() {
        let mut a = Adler32::default();
        a.update(b"Wikipedia");
        assert_eq!(a.hex(), "11e60398");
        let mut big = Adler32::default();
        let data = vec![0xffu8; 100_000];
        data.chunks(777).for_each(|c| big.update(c));
        let mut once = Adler32::default();
        once.update(&data);
        assert_eq!(big.hex(), once.hex());
    }
}
