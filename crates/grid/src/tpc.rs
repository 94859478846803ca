//! The remote half of HTTP third-party copy (blocking; run on threads that may block). A pull
//! downloads the source into a staging file kept under the gateway's internal directory, in
//! chunks over parallel streams (ranged GETs), records each finished chunk so an interrupted
//! pull resumes where it stopped (if the source is unchanged: same ETag or Last-Modified), and
//! verifies the whole file against the digests the source sent (`Digest: adler32=..., md5=...`,
//! RFC 3230) before anything is stored. A push streams an object to the destination with a
//! PUT, its MD5 sent as `Content-MD5` when known so the destination refuses a corrupted body.
//! Progress is counted in an atomic that the caller turns into performance markers. Every
//! connection goes through an `OutboundPolicy` agent: only to hosts the operator allows.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::outbound::{CONNECT_TIMEOUT, OutboundPolicy};

/// The size of the chunks a pull fetches and records (each a ranged GET).
pub const CHUNK_SIZE: u64 = 8 << 20;
/// The most parallel streams a client may ask for.
pub const MAX_STREAMS: usize = 16;

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
    #[error("the source sent {got} bytes where {expected} were expected")]
    ShortRead { got: u64, expected: u64 },
    #[error("staging I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("a copy of this source to this object by the same user is already running")]
    Busy,
    /// The bytes arrived, and storing them was refused (a checksum mismatch, a quota, ...).
    #[error("{0}")]
    Refused(String),
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
/// every DNS answer checked).
fn agent(policy: &Arc<OutboundPolicy>) -> ureq::Agent {
    policy.agent(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(CONNECT_TIMEOUT))
            .timeout_recv_body(Some(Duration::from_secs(120))),
    )
}

fn unreachable(err: ureq::Error) -> TransferError {
    TransferError::Unreachable(err.to_string())
}

fn refused(mut response: ureq::http::Response<ureq::Body>) -> TransferError {
    let status = response.status().as_u16();
    let message = response.body_mut().with_config().limit(4096).read_to_string().unwrap_or_default();
    TransferError::Remote { status, message: message.chars().take(500).collect() }
}

/// What a pull records next to its staging file, to resume.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct PullState {
    source: String,
    /// The source's ETag or Last-Modified when the pull began.
    validator: String,
    size: u64,
    /// Finished chunks (indexes of CHUNK_SIZE pieces).
    done: Vec<u64>,
    digests: Vec<(String, String)>,
}

/// A pull's staging area: the file and its state, named after who pulls, the destination and
/// the source, and locked while a pull uses it (two pulls of the same name would write the same
/// file: the second is refused while the first runs; two users never share a name).
pub struct Staging {
    data: PathBuf,
    state: PathBuf,
    lock: PathBuf,
    _held: File,
}

impl Staging {
    pub fn new(dir: &Path, owner: &str, destination: &str, source: &str) -> Result<Self, TransferError> {
        std::fs::create_dir_all(dir)?;
        // The query of a presigned source changes on every retry: it is not part of the name.
        let stable_source = source.split('?').next().unwrap_or(source);
        let name = hex::encode(Sha256::digest(format!("{owner}\n{destination}\n{stable_source}").as_bytes()));
        let lock = dir.join(format!("{name}.lock"));
        let held = OpenOptions::new().write(true).create(true).truncate(false).mode(0o600).open(&lock)?;
        match held.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => return Err(TransferError::Busy),
            Err(std::fs::TryLockError::Error(err)) => return Err(err.into()),
        }
        Ok(Self { data: dir.join(format!("{name}.part")), state: dir.join(format!("{name}.json")), lock, _held: held })
    }

    fn load(&self) -> Option<PullState> {
        serde_json::from_slice(&std::fs::read(&self.state).ok()?).ok()
    }

    fn save(&self, state: &PullState) -> std::io::Result<()> {
        let tmp = self.state.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(state).map_err(std::io::Error::other)?)?;
        std::fs::rename(tmp, &self.state)
    }

    /// Drops what was staged (the source changed: the pull starts again).
    fn discard(&self) {
        let _ = std::fs::remove_file(&self.data);
        let _ = std::fs::remove_file(&self.state);
    }

    /// Removes the staging file, its state and its lock (after the object is stored, or when
    /// the bytes were refused).
    pub fn remove(&self) {
        self.discard();
        let _ = std::fs::remove_file(&self.lock);
    }
}

impl Drop for Staging {
    /// A pull that staged nothing leaves nothing behind (its lock would be all there is).
    fn drop(&mut self) {
        if !self.data.exists() && !self.state.exists() {
            let _ = std::fs::remove_file(&self.lock);
        }
    }
}

/// Removes staged pulls in `dir` untouched for `age` (pulls nobody retried), returning how
/// many files went.
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

/// What a pull's consumer learns before the bytes: their size and the source's digests.
#[derive(Debug, Clone)]
pub struct PullInfo {
    pub size: u64,
    pub digests: Vec<(String, String)>,
    /// Bytes that came from an earlier, interrupted attempt.
    pub resumed_bytes: u64,
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
/// its chunk (a failed stream fails it).
struct InOrder<'a> {
    file: &'a File,
    size: u64,
    offset: u64,
    arrivals: &'a (Mutex<Arrivals>, Condvar),
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
            arrivals = arrived.wait(arrivals).unwrap_or_else(|e| e.into_inner());
        }
        drop(arrivals);
        let end = ((chunk + 1) * CHUNK_SIZE).min(self.size);
        let want = buf.len().min((end - self.offset) as usize);
        let n = self.file.read_at(&mut buf[..want], self.offset)?;
        self.offset += n as u64;
        Ok(n)
    }
}

/// Pulls `source` through `staging` (where finished chunks are recorded, for a resume) and
/// hands the bytes in order to `consume` as they arrive, so storing and verifying them runs
/// alongside the download. `consume` runs on the calling thread (with whatever identity that
/// thread takes); the streams run on threads of their own, started before it.
pub fn pull_into<T>(
    source: &str,
    staging: &Staging,
    options: &TransferOptions,
    policy: &Arc<OutboundPolicy>,
    progress: &AtomicU64,
    consume: impl FnOnce(&PullInfo, &mut dyn Read) -> Result<T, String>,
) -> Result<T, TransferError> {
    let agent = agent(policy);
    // The first request says what the source is (size, validator, digests).
    let mut request = agent.get(source).header("Want-Digest", "adler32, md5").header("Range", "bytes=0-0");
    for (name, value) in &options.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request.call().map_err(unreachable)?;
    let status = response.status().as_u16();
    if !(200..300).contains(&status) && status != 416 {
        return Err(refused(response));
    }
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let size = match (status, header("content-range")) {
        (206 | 416, Some(range)) => range.rsplit('/').next().and_then(|s| s.parse().ok()).unwrap_or(0),
        _ => header("content-length").and_then(|s| s.parse().ok()).unwrap_or(0),
    };
    let validator = header("etag").or_else(|| header("last-modified")).unwrap_or_default();
    let digests = announced_digests(&response);
    drop(response);
    if digests.is_empty() && options.require_checksum {
        return Err(TransferError::NoChecksum);
    }

    let stable_source = source.split('?').next().unwrap_or(source).to_string();
    let state = match staging.load() {
        Some(old) if old.source == stable_source && old.validator == validator && old.size == size => old,
        _ => {
            staging.discard();
            PullState { source: stable_source, validator, size, done: Vec::new(), digests: Vec::new() }
        }
    };
    // Nothing will check bytes without a digest: what is recorded as fetched must then be on
    // disk before it is recorded (a resume after a crash trusts the record).
    let sync_chunks = digests.is_empty();
    let file =
        OpenOptions::new().read(true).write(true).create(true).mode(0o600).truncate(false).open(&staging.data)?;
    file.set_len(size)?;
    let chunks = size.div_ceil(CHUNK_SIZE);
    let resumed_bytes: u64 = state.done.iter().map(|&c| chunk_len(c, size)).sum();
    progress.store(resumed_bytes, Ordering::Relaxed);
    staging.save(&state)?;
    let info = PullInfo { size, digests, resumed_bytes };
    let todo: Vec<u64> = (0..chunks).filter(|c| !state.done.contains(c)).collect();
    let arrivals =
        (Mutex::new(Arrivals { done: state.done.iter().copied().collect(), ..Arrivals::default() }), Condvar::new());
    let queue = Mutex::new(todo.into_iter());
    let state = Mutex::new(state);
    let streams = options.streams.clamp(1, MAX_STREAMS);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..streams)
            .map(|_| {
                let (queue, state, file, agent, arrivals) = (&queue, &state, &file, &agent, &arrivals);
                scope.spawn(move || -> Result<(), TransferError> {
                    let result: Result<(), TransferError> = (|| loop {
                        if arrivals.0.lock().unwrap_or_else(|e| e.into_inner()).abort {
                            return Ok(());
                        }
                        let Some(chunk) = queue.lock().unwrap_or_else(|e| e.into_inner()).next() else { return Ok(()) };
                        fetch_chunk(agent, source, options, file, chunk, size, progress)?;
                        if sync_chunks {
                            file.sync_data()?;
                        }
                        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
                        state.done.push(chunk);
                        staging.save(&state)?;
                        drop(state);
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
        let mut reader = InOrder { file: &file, size, offset: 0, arrivals: &arrivals };
        let consumed = consume(&info, &mut reader);
        if consumed.is_err() {
            arrivals.0.lock().unwrap_or_else(|e| e.into_inner()).abort = true;
        }
        for worker in workers {
            // A failed stream (an interrupted download) is what the caller must hear of first.
            worker.join().unwrap_or_else(|_| Err(TransferError::Unreachable("a stream panicked".into())))?;
        }
        consumed.map_err(TransferError::Refused)
    })
}

fn chunk_len(chunk: u64, size: u64) -> u64 {
    (size - chunk * CHUNK_SIZE).min(CHUNK_SIZE)
}

/// Fetches one chunk with a ranged GET and writes it at its offset.
fn fetch_chunk(
    agent: &ureq::Agent,
    source: &str,
    options: &TransferOptions,
    file: &File,
    chunk: u64,
    size: u64,
    progress: &AtomicU64,
) -> Result<(), TransferError> {
    let start = chunk * CHUNK_SIZE;
    let len = chunk_len(chunk, size);
    let mut request = agent.get(source).header("Range", format!("bytes={start}-{}", start + len - 1));
    for (name, value) in &options.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request.call().map_err(unreachable)?;
    let status = response.status().as_u16();
    if status != 206 && !(status == 200 && start == 0 && len == size) {
        return Err(refused(response));
    }
    let mut reader = response.into_body().into_reader();
    let mut buf = vec![0u8; 256 << 10];
    let mut offset = start;
    while offset < start + len {
        let n = reader.read(&mut buf).map_err(|e| TransferError::Unreachable(e.to_string()))?;
        if n == 0 {
            return Err(TransferError::ShortRead { got: offset - start, expected: len });
        }
        let n = n.min((start + len - offset) as usize);
        file.write_all_at(&buf[..n], offset)?;
        offset += n as u64;
        progress.fetch_add(n as u64, Ordering::Relaxed);
    }
    Ok(())
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

/// Pushes `size` bytes from `body` to `destination` with a PUT; `md5` (if the object's MD5 is
/// known) goes as Content-MD5 so the destination checks what it received.
pub fn push(
    destination: &str,
    body: &mut dyn Read,
    size: u64,
    md5: Option<[u8; 16]>,
    options: &TransferOptions,
    policy: &Arc<OutboundPolicy>,
    progress: &AtomicU64,
) -> Result<(), TransferError> {
    let mut request = agent(policy).put(destination).header("Content-Length", size.to_string());
    if let Some(md5) = md5 {
        request = request.header("Content-MD5", STANDARD.encode(md5));
    }
    for (name, value) in &options.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let mut counted = Counted { inner: body, progress };
    let response = request.send(ureq::SendBody::from_reader(&mut counted)).map_err(unreachable)?;
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
    fn staging_is_per_user_and_one_pull_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let source = "http://example.org/file?X-Amz-Signature=1";
        let alice = Staging::new(dir.path(), "alice", "data/k", source).unwrap();
        // Another user's pull of the same source to the same object has staging of its own.
        let bob = Staging::new(dir.path(), "bob", "data/k", source).unwrap();
        assert_ne!(alice.data, bob.data);
        // The same user's second pull while the first runs is refused, not interleaved;
        // a retry (a new signature) after it ended resumes the same staging.
        assert!(matches!(Staging::new(dir.path(), "alice", "data/k", source), Err(TransferError::Busy)));
        let data = alice.data.clone();
        drop(alice);
        let again = Staging::new(dir.path(), "alice", "data/k", "http://example.org/file?X-Amz-Signature=2").unwrap();
        assert_eq!(again.data, data);
        again.remove();
        bob.remove();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing left after remove");
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
