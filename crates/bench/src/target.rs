//! Targets: the systems a workload runs against. Each worker thread opens its own connection
//! (`Target::connect`) and calls plain blocking operations on it, so the same workload code
//! measures raw POSIX file operations, any S3 endpoint over HTTP, and the engine in-process.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use rustix::fs::{Mode, OFlags};

/// Why a benchmark operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("HTTP: {0}")]
    Http(String),
    #[error("engine: {0}")]
    Store(#[from] isthmus_store::StoreError),
    #[error("{0}")]
    Setup(String),
}

impl From<rustix::io::Errno> for BenchError {
    fn from(e: rustix::io::Errno) -> Self {
        Self::Io(e.into())
    }
}

pub type BenchResult<T> = Result<T, BenchError>;

/// One worker's handle on a system under test. Keys are relative (`w3/o17`).
pub trait Connection: Send {
    fn put(&mut self, key: &str, data: &[u8]) -> BenchResult<()>;
    /// Reads the whole object, returning its size.
    fn get(&mut self, key: &str) -> BenchResult<u64>;
    fn head(&mut self, key: &str) -> BenchResult<()>;
    fn delete(&mut self, key: &str) -> BenchResult<()>;
    /// Lists one page of up to `max` keys under `prefix` after `after`; returns the number of
    /// keys and the marker of the next page, if any.
    fn list_page(&mut self, prefix: &str, after: Option<&str>, max: usize) -> BenchResult<(usize, Option<String>)>;

    /// Writes `data` at `offset` of the file `key`, as IOR does. Object targets store one
    /// object per transfer, keyed by its offset, the way IOR's S3 backend maps a file.
    fn write_at(&mut self, key: &str, offset: u64, data: &[u8]) -> BenchResult<()> {
        self.put(&fragment_key(key, offset), data)
    }

    /// Reads `len` bytes at `offset` of the file `key`; returns the bytes read.
    fn read_at(&mut self, key: &str, offset: u64, _len: usize) -> BenchResult<u64> {
        self.get(&fragment_key(key, offset))
    }

    /// Makes a file written with `write_at` durable (IOR's fsync at close); objects already are.
    fn close_file(&mut self, _key: &str) -> BenchResult<()> {
        Ok(())
    }

    /// Removes a file written with `write_at` at these offsets.
    fn remove_file(&mut self, key: &str, offsets: &[u64]) -> BenchResult<()> {
        offsets.iter().try_for_each(|&offset| self.delete(&fragment_key(key, offset)))
    }

    /// Creates the directory `key` (mdtest's directory phases). Object targets store the empty
    /// directory object `key/`, which S3 consoles show as a folder and Isthmus maps to a real
    /// directory.
    fn mkdir(&mut self, key: &str) -> BenchResult<()> {
        self.put(&directory_key(key), &[])
    }

    fn stat_dir(&mut self, key: &str) -> BenchResult<()> {
        self.head(&directory_key(key))
    }

    /// Removes the empty directory `key`.
    fn rmdir(&mut self, key: &str) -> BenchResult<()> {
        self.delete(&directory_key(key))
    }

    /// Renames the directory `from` to `to`. S3 has no rename: object targets copy the
    /// directory object server-side (CopyObject) and delete the old one, two requests, which
    /// reports label "rename (copy+delete)".
    fn rename_dir(&mut self, from: &str, to: &str) -> BenchResult<()> {
        self.copy(&directory_key(from), &directory_key(to))?;
        self.delete(&directory_key(from))
    }

    /// Walks every file under the directory `prefix` (a key prefix on object targets, one LIST
    /// after another), giving `seen` each file's name (its last path component), size and
    /// modification time, as find does (IO500's find phase).
    fn walk(&mut self, prefix: &str, _seen: &mut dyn FnMut(&str, u64, SystemTime)) -> BenchResult<()> {
        Err(BenchError::Setup(format!("cannot walk {prefix}: this target cannot list")))
    }

    /// Copies the object `from` to `to` on the server (S3 CopyObject).
    fn copy(&mut self, from: &str, _to: &str) -> BenchResult<()> {
        Err(BenchError::Setup(format!("cannot copy {from}: this target has no server-side copy")))
    }
}

/// The object key of the directory `key`.
fn directory_key(key: &str) -> String {
    format!("{key}/")
}

/// The object key of the transfer at `offset` of the file `key`.
pub fn fragment_key(key: &str, offset: u64) -> String {
    format!("{key}/{offset:016}")
}

/// A system under test.
pub trait Target: Send + Sync {
    /// A short label for reports: `posix`, `s3`, `embedded`.
    fn kind(&self) -> &'static str;
    fn describe(&self) -> String;
    /// Creates the bucket or directory the run uses.
    fn prepare(&self) -> BenchResult<()>;
    fn connect(&self) -> BenchResult<Box<dyn Connection>>;
    /// Removes what the run created.
    fn cleanup(&self) -> BenchResult<()>;
}

const READ_BUF: usize = 1 << 20;

// ---------------------------------------------------------------------------------------------
// Raw POSIX

/// The baseline: the file operations an S3 request maps to, done directly.
/// put = create temp + write + rename (+ fsync of file and directory when `sync`), get = open +
/// read, head = stat, delete = unlink (+ fsync of the directory), list = readdir + stat.
pub struct PosixTarget {
    pub dir: PathBuf,
    pub sync: bool,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

struct PosixConnection {
    dir: PathBuf,
    sync: bool,
    buf: Vec<u8>,
    /// Files open for `write_at` and `read_at`.
    open_files: std::collections::HashMap<String, std::fs::File>,
}

impl PosixConnection {
    /// The open file `key` (created, with its directory, when writing).
    fn file(&mut self, key: &str, create: bool) -> BenchResult<&std::fs::File> {
        if !self.open_files.contains_key(key) {
            let path = self.dir.join(key);
            if create && let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let file =
                std::fs::OpenOptions::new().read(true).write(create).create(create).truncate(false).open(&path)?;
            self.open_files.insert(key.to_string(), file);
        }
        Ok(&self.open_files[key])
    }

    fn fsync_parent(&self, path: &Path) -> BenchResult<()> {
        if self.sync {
            let parent = path.parent().unwrap_or(&self.dir);
            let fd = rustix::fs::open(parent, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
            rustix::fs::fsync(&fd)?;
        }
        Ok(())
    }
}

impl Connection for PosixConnection {
    fn put(&mut self, key: &str, data: &[u8]) -> BenchResult<()> {
        let path = self.dir.join(key);
        let parent = path.parent().expect("keys have a parent");
        let tmp = parent.join(format!(".tmp.{}.{}", std::process::id(), TMP_COUNTER.fetch_add(1, Ordering::Relaxed)));
        let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(parent)?;
                std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?
            }
            Err(e) => return Err(e.into()),
        };
        file.write_all(data)?;
        if self.sync {
            file.sync_all()?;
        }
        drop(file);
        std::fs::rename(&tmp, &path)?;
        self.fsync_parent(&path)
    }

    fn get(&mut self, key: &str) -> BenchResult<u64> {
        let mut file = std::fs::File::open(self.dir.join(key))?;
        self.buf.resize(READ_BUF, 0);
        let mut total = 0u64;
        loop {
            let n = file.read(&mut self.buf)?;
            if n == 0 {
                return Ok(total);
            }
            total += n as u64;
        }
    }

    fn head(&mut self, key: &str) -> BenchResult<()> {
        rustix::fs::stat(self.dir.join(key))?;
        Ok(())
    }

    fn delete(&mut self, key: &str) -> BenchResult<()> {
        let path = self.dir.join(key);
        std::fs::remove_file(&path)?;
        self.fsync_parent(&path)
    }

    fn list_page(&mut self, prefix: &str, _after: Option<&str>, _max: usize) -> BenchResult<(usize, Option<String>)> {
        // The fastest POSIX listing there is: one readdir pass with a stat per entry (`ls -l`
        // without sorting), all in one "page". S3 listings are sorted and paged on top of this.
        let dir = self.dir.join(prefix.trim_end_matches('/'));
        let fd = rustix::fs::open(&dir, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
        let mut count = 0;
        for entry in rustix::fs::Dir::read_from(fd.as_fd())? {
            let entry = entry?;
            let name = entry.file_name();
            // Dot entries and another worker's temporary files are not objects.
            if name.to_bytes().starts_with(b".") {
                continue;
            }
            match rustix::fs::statat(&fd, name, rustix::fs::AtFlags::empty()) {
                Ok(_) => count += 1,
                // Renamed or removed by a concurrent writer since readdir saw it.
                Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok((count, None))
    }

    fn walk(&mut self, prefix: &str, seen: &mut dyn FnMut(&str, u64, SystemTime)) -> BenchResult<()> {
        // As pfind: readdir, then a stat of each entry (for its type, size and time).
        let mut pending = vec![self.dir.join(prefix.trim_end_matches('/'))];
        while let Some(dir) = pending.pop() {
            let entries = match std::fs::read_dir(&dir) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                other => other?,
            };
            for entry in entries {
                let entry = entry?;
                let name = entry.file_name();
                if name.as_encoded_bytes().starts_with(b".") {
                    continue;
                }
                let meta = match std::fs::symlink_metadata(entry.path()) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    other => other?,
                };
                if meta.is_dir() {
                    pending.push(entry.path());
                } else {
                    seen(&name.to_string_lossy(), meta.len(), meta.modified()?);
                }
            }
        }
        Ok(())
    }

    fn write_at(&mut self, key: &str, offset: u64, data: &[u8]) -> BenchResult<()> {
        use std::os::unix::fs::FileExt;
        let file = self.file(key, true)?;
        file.write_all_at(data, offset)?;
        Ok(())
    }

    fn read_at(&mut self, key: &str, offset: u64, len: usize) -> BenchResult<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(len, 0);
        let result = self.file(key, false).and_then(|f| Ok(f.read_exact_at(&mut buf, offset)?));
        self.buf = buf;
        result.map(|()| len as u64)
    }

    fn close_file(&mut self, key: &str) -> BenchResult<()> {
        if let Some(file) = self.open_files.remove(key)
            && self.sync
        {
            file.sync_all()?;
        }
        Ok(())
    }

    fn remove_file(&mut self, key: &str, _offsets: &[u64]) -> BenchResult<()> {
        self.open_files.remove(key);
        match std::fs::remove_file(self.dir.join(key)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    fn mkdir(&mut self, key: &str) -> BenchResult<()> {
        let path = self.dir.join(key);
        match std::fs::create_dir(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(path.parent().expect("keys have a parent"))?;
                std::fs::create_dir(&path)?;
            }
            result => result?,
        }
        self.fsync_parent(&path)
    }

    fn stat_dir(&mut self, key: &str) -> BenchResult<()> {
        self.head(key)
    }

    fn rmdir(&mut self, key: &str) -> BenchResult<()> {
        let path = self.dir.join(key);
        std::fs::remove_dir(&path)?;
        self.fsync_parent(&path)
    }

    fn rename_dir(&mut self, from: &str, to: &str) -> BenchResult<()> {
        let to = self.dir.join(to);
        std::fs::rename(self.dir.join(from), &to)?;
        self.fsync_parent(&to)
    }
}

impl Target for PosixTarget {
    fn kind(&self) -> &'static str {
        "posix"
    }
    fn describe(&self) -> String {
        format!("posix://{} ({})", self.dir.display(), if self.sync { "fsync" } else { "no fsync" })
    }
    fn prepare(&self) -> BenchResult<()> {
        std::fs::create_dir_all(&self.dir)?;
        Ok(())
    }
    fn connect(&self) -> BenchResult<Box<dyn Connection>> {
        Ok(Box::new(PosixConnection {
            dir: self.dir.clone(),
            sync: self.sync,
            buf: Vec::new(),
            open_files: std::collections::HashMap::new(),
        }))
    }
    fn cleanup(&self) -> BenchResult<()> {
        match std::fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// S3 over HTTP

/// Any S3 endpoint, with SigV4 (presigned URLs) and one keep-alive connection per worker.
pub struct S3Target {
    bucket: rusty_s3::Bucket,
    credentials: rusty_s3::Credentials,
    endpoint: String,
}

const SIGN_FOR: Duration = Duration::from_secs(3600);

impl S3Target {
    /// A path-style target in us-east-1, the form every S3 server accepts (the gateway too).
    pub fn new(endpoint: &str, bucket: &str, access_key: &str, secret_key: &str) -> BenchResult<Self> {
        Self::addressed(endpoint, bucket, access_key, secret_key, false, "us-east-1")
    }

    /// A target addressed as the endpoint wants: `virtual_host` puts the bucket in the host name
    /// (bucket.host:port, as AWS prefers), and `region` is the one requests are signed for.
    pub fn addressed(
        endpoint: &str,
        bucket: &str,
        access_key: &str,
        secret_key: &str,
        virtual_host: bool,
        region: &str,
    ) -> BenchResult<Self> {
        let url: url::Url =
            endpoint.parse().map_err(|e| BenchError::Setup(format!("invalid endpoint {endpoint:?}: {e}")))?;
        let style = if virtual_host { rusty_s3::UrlStyle::VirtualHost } else { rusty_s3::UrlStyle::Path };
        let bucket = rusty_s3::Bucket::new(url, style, bucket.to_string(), region.to_string())
            .map_err(|e| BenchError::Setup(format!("invalid endpoint or bucket: {e}")))?;
        Ok(Self {
            bucket,
            credentials: rusty_s3::Credentials::new(access_key, secret_key),
            endpoint: endpoint.to_string(),
        })
    }

    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder().http_status_as_error(false).max_idle_connections_per_host(4).build().into()
    }
}

struct S3Connection {
    bucket: rusty_s3::Bucket,
    credentials: rusty_s3::Credentials,
    agent: ureq::Agent,
    buf: Vec<u8>,
}

fn http_err(e: ureq::Error) -> BenchError {
    BenchError::Http(e.to_string())
}

fn check(mut resp: ureq::http::Response<ureq::Body>, what: &str) -> BenchResult<ureq::http::Response<ureq::Body>> {
    let status = resp.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(resp);
    }
    let body = resp.body_mut().read_to_string().unwrap_or_default();
    Err(BenchError::Http(format!("{what}: HTTP {status}: {}", body.chars().take(300).collect::<String>())))
}

impl S3Connection {
    fn drain(&mut self, resp: ureq::http::Response<ureq::Body>) -> BenchResult<u64> {
        let mut reader = resp.into_body().into_with_config().limit(u64::MAX).reader();
        self.buf.resize(READ_BUF, 0);
        let mut total = 0u64;
        loop {
            let n = reader.read(&mut self.buf)?;
            if n == 0 {
                return Ok(total);
            }
            total += n as u64;
        }
    }
}

impl Connection for S3Connection {
    fn put(&mut self, key: &str, data: &[u8]) -> BenchResult<()> {
        use rusty_s3::S3Action;
        let url = self.bucket.put_object(Some(&self.credentials), key).sign(SIGN_FOR);
        let resp = self.agent.put(url.as_str()).send(data).map_err(http_err)?;
        let resp = check(resp, "PUT")?;
        self.drain(resp).map(drop)
    }

    fn get(&mut self, key: &str) -> BenchResult<u64> {
        use rusty_s3::S3Action;
        let url = self.bucket.get_object(Some(&self.credentials), key).sign(SIGN_FOR);
        let resp = self.agent.get(url.as_str()).call().map_err(http_err)?;
        let resp = check(resp, "GET")?;
        self.drain(resp)
    }

    fn head(&mut self, key: &str) -> BenchResult<()> {
        use rusty_s3::S3Action;
        let url = self.bucket.head_object(Some(&self.credentials), key).sign(SIGN_FOR);
        let resp = self.agent.head(url.as_str()).call().map_err(http_err)?;
        check(resp, "HEAD").map(drop)
    }

    fn delete(&mut self, key: &str) -> BenchResult<()> {
        use rusty_s3::S3Action;
        let url = self.bucket.delete_object(Some(&self.credentials), key).sign(SIGN_FOR);
        let resp = self.agent.delete(url.as_str()).call().map_err(http_err)?;
        let resp = check(resp, "DELETE")?;
        self.drain(resp).map(drop)
    }

    fn copy(&mut self, from: &str, to: &str) -> BenchResult<()> {
        use rusty_s3::S3Action;
        // CopyObject is a PUT naming its source in x-amz-copy-source, which is signed too.
        let source = format!("/{}/{}", self.bucket.name(), encode_key(from));
        let mut action = self.bucket.put_object(Some(&self.credentials), to);
        action.headers_mut().insert("x-amz-copy-source", source.clone());
        let url = action.sign(SIGN_FOR);
        let resp = self.agent.put(url.as_str()).header("x-amz-copy-source", &source).send_empty().map_err(http_err)?;
        let resp = check(resp, "COPY")?;
        self.drain(resp).map(drop)
    }

    fn list_page(&mut self, prefix: &str, after: Option<&str>, max: usize) -> BenchResult<(usize, Option<String>)> {
        let page = self.list_v2(prefix, after, max)?.ok_or_else(|| BenchError::Http("LIST: no such bucket".into()))?;
        Ok((page.contents.len(), page.next_continuation_token))
    }

    fn walk(&mut self, prefix: &str, seen: &mut dyn FnMut(&str, u64, SystemTime)) -> BenchResult<()> {
        let prefix = format!("{}/", prefix.trim_end_matches('/'));
        let mut token: Option<String> = None;
        loop {
            let page = self
                .list_v2(&prefix, token.as_deref(), 1000)?
                .ok_or_else(|| BenchError::Http("LIST: no such bucket".into()))?;
            for object in &page.contents {
                let modified = object
                    .last_modified
                    .as_deref()
                    .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                // A folder object (`name/`) is a directory, not a file.
                if let Some(name) = object.key.rsplit('/').next().filter(|n| !n.is_empty()) {
                    seen(name, object.size.unwrap_or(0), modified);
                }
            }
            match page.next_continuation_token {
                Some(next) => token = Some(next),
                None => return Ok(()),
            }
        }
    }
}

/// `key` percent-encoded for x-amz-copy-source, slashes kept.
fn encode_key(key: &str) -> String {
    key.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl S3Connection {
    /// One ListObjectsV2 page; `None` when the bucket does not exist.
    fn list_v2(
        &mut self,
        prefix: &str,
        token: Option<&str>,
        max: usize,
    ) -> BenchResult<Option<rusty_s3::actions::ListObjectsV2Response>> {
        use rusty_s3::S3Action;
        let mut action = self.bucket.list_objects_v2(Some(&self.credentials));
        action.with_prefix(prefix);
        action.with_max_keys(max);
        if let Some(token) = token {
            action.with_continuation_token(token);
        }
        let url = action.sign(SIGN_FOR);
        let resp = self.agent.get(url.as_str()).call().map_err(http_err)?;
        if resp.status().as_u16() == 404 {
            return Ok(None);
        }
        let mut resp = check(resp, "LIST")?;
        let text = resp.body_mut().with_config().limit(64 << 20).read_to_string().map_err(http_err)?;
        rusty_s3::actions::ListObjectsV2::parse_response(&text)
            .map(Some)
            .map_err(|e| BenchError::Http(format!("LIST response: {e}")))
    }
}

impl Target for S3Target {
    fn kind(&self) -> &'static str {
        "s3"
    }
    fn describe(&self) -> String {
        format!("{} bucket {}", self.endpoint, self.bucket.name())
    }
    fn prepare(&self) -> BenchResult<()> {
        use rusty_s3::S3Action;
        let url = self.bucket.create_bucket(&self.credentials).sign(SIGN_FOR);
        let resp = Self::agent().put(url.as_str()).send_empty().map_err(http_err)?;
        // An existing bucket of ours is fine.
        if resp.status().as_u16() == 409 {
            return Ok(());
        }
        check(resp, "CreateBucket").map(drop)
    }
    fn connect(&self) -> BenchResult<Box<dyn Connection>> {
        Ok(Box::new(S3Connection {
            bucket: self.bucket.clone(),
            credentials: self.credentials.clone(),
            agent: Self::agent(),
            buf: Vec::new(),
        }))
    }
    fn cleanup(&self) -> BenchResult<()> {
        let mut conn = S3Connection {
            bucket: self.bucket.clone(),
            credentials: self.credentials.clone(),
            agent: Self::agent(),
            buf: Vec::new(),
        };
        while let Some(page) = conn.list_v2("", None, 1000)? {
            if page.contents.is_empty() {
                break;
            }
            for object in page.contents {
                conn.delete(&object.key)?;
            }
        }
        use rusty_s3::S3Action;
        let url = self.bucket.delete_bucket(&self.credentials).sign(SIGN_FOR);
        let resp = conn.agent.delete(url.as_str()).call().map_err(http_err)?;
        if resp.status().as_u16() == 404 {
            return Ok(());
        }
        check(resp, "DeleteBucket").map(drop)
    }
}

// ---------------------------------------------------------------------------------------------
// The engine in-process

/// The Isthmus engine called directly, without HTTP: what the embedded door costs.
pub struct EmbeddedTarget {
    pub store: std::sync::Arc<dyn isthmus_store::Store>,
    /// The data root (the run's bucket is made in its default pool and removed from there).
    pub root: std::path::PathBuf,
    pub bucket: String,
}

/// A connection to an engine called through the `Store` interface: in-process, or through a
/// gateway's local socket.
struct EngineConnection {
    store: std::sync::Arc<dyn isthmus_store::Store>,
    /// The benchmark acts as the process itself, as an embedding program does.
    cx: isthmus_store::RequestContext,
    bucket: String,
    buf: Vec<u8>,
}

impl EngineConnection {
    /// A connection of the process itself to `store`, on `bucket`.
    fn new(store: std::sync::Arc<dyn isthmus_store::Store>, bucket: &str) -> Self {
        Self { store, cx: isthmus_store::RequestContext::process(), bucket: bucket.to_string(), buf: Vec::new() }
    }

    /// Creates the run's bucket unless it exists.
    fn create_bucket(store: &dyn isthmus_store::Store, bucket: &str) -> BenchResult<()> {
        use isthmus_store::StoreError;
        match store.create_bucket(&isthmus_store::RequestContext::process(), bucket, &Default::default()) {
            Ok(()) | Err(StoreError::BucketAlreadyExists | StoreError::BucketAlreadyOwnedByYou) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl Connection for EngineConnection {
    fn put(&mut self, key: &str, data: &[u8]) -> BenchResult<()> {
        self.store.put_bytes(&self.cx, &self.bucket, key, data, isthmus_store::PutRequest::default())?;
        Ok(())
    }

    fn get(&mut self, key: &str) -> BenchResult<u64> {
        let mut body = self.store.get_object(&self.cx, &self.bucket, key, &isthmus_store::GetRequest::default())?.body;
        self.buf.resize(READ_BUF, 0);
        let mut total = 0u64;
        loop {
            let n = body.read(&mut self.buf)?;
            if n == 0 {
                return Ok(total);
            }
            total += n as u64;
        }
    }

    fn head(&mut self, key: &str) -> BenchResult<()> {
        self.store.head_object(&self.cx, &self.bucket, key, &Default::default())?;
        Ok(())
    }

    fn delete(&mut self, key: &str) -> BenchResult<()> {
        self.store.delete_object(&self.cx, &self.bucket, key, &Default::default())?;
        Ok(())
    }

    fn copy(&mut self, from: &str, to: &str) -> BenchResult<()> {
        let request = isthmus_store::CopyRequest::default();
        self.store.copy_object(&self.cx, (&self.bucket, from), (&self.bucket, to), &request)?;
        Ok(())
    }

    fn list_page(&mut self, prefix: &str, after: Option<&str>, max: usize) -> BenchResult<(usize, Option<String>)> {
        let request = isthmus_store::ListRequest {
            prefix: prefix.to_string(),
            delimiter: None,
            start_after: after.map(str::to_string),
            max_keys: max,
        };
        let page = self.store.list_objects(&self.cx, &self.bucket, &request)?;
        Ok((page.objects.len() + page.common_prefixes.len(), page.next_marker))
    }

    fn walk(&mut self, prefix: &str, seen: &mut dyn FnMut(&str, u64, SystemTime)) -> BenchResult<()> {
        let mut request = isthmus_store::ListRequest {
            prefix: format!("{}/", prefix.trim_end_matches('/')),
            delimiter: None,
            start_after: None,
            max_keys: 1000,
        };
        loop {
            let page = self.store.list_objects(&self.cx, &self.bucket, &request)?;
            for object in &page.objects {
                if let Some(name) = object.key.rsplit('/').next().filter(|n| !n.is_empty()) {
                    seen(name, object.size, object.last_modified);
                }
            }
            match page.next_marker.filter(|_| page.is_truncated) {
                Some(next) => request.start_after = Some(next),
                None => return Ok(()),
            }
        }
    }
}

impl Target for EmbeddedTarget {
    fn kind(&self) -> &'static str {
        "embedded"
    }
    fn describe(&self) -> String {
        format!("embedded://{} bucket {}", self.root.display(), self.bucket)
    }
    fn prepare(&self) -> BenchResult<()> {
        EngineConnection::create_bucket(&*self.store, &self.bucket)
    }
    fn connect(&self) -> BenchResult<Box<dyn Connection>> {
        Ok(Box::new(EngineConnection::new(self.store.clone(), &self.bucket)))
    }
    fn cleanup(&self) -> BenchResult<()> {
        match std::fs::remove_dir_all(self.root.join(&self.bucket)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }
}

/// An engine reached through a gateway's local socket (`unix:///path`): the local door's cost.
pub struct LocalSocketTarget {
    pub store: std::sync::Arc<dyn isthmus_store::Store>,
    pub address: String,
    pub bucket: String,
}

impl Target for LocalSocketTarget {
    fn kind(&self) -> &'static str {
        "local"
    }
    fn describe(&self) -> String {
        format!("{} bucket {}", self.address, self.bucket)
    }
    fn prepare(&self) -> BenchResult<()> {
        EngineConnection::create_bucket(&*self.store, &self.bucket)
    }
    fn connect(&self) -> BenchResult<Box<dyn Connection>> {
        Ok(Box::new(EngineConnection::new(self.store.clone(), &self.bucket)))
    }
    /// Deletes every object through the socket, then the bucket.
    fn cleanup(&self) -> BenchResult<()> {
        let cx = isthmus_store::RequestContext::process();
        loop {
            let request = isthmus_store::ListRequest { max_keys: 1000, ..Default::default() };
            let page = match self.store.list_objects(&cx, &self.bucket, &request) {
                Err(isthmus_store::StoreError::NoSuchBucket) => return Ok(()),
                other => other?,
            };
            for object in &page.objects {
                self.store.delete_object(&cx, &self.bucket, &object.key, &Default::default())?;
            }
            if !page.is_truncated {
                break;
            }
        }
        self.store.delete_bucket(&cx, &self.bucket)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_targets_address_buckets_by_path_or_host() {
        let path = S3Target::new("http://127.0.0.1:9000", "b", "k", "s").unwrap();
        assert_eq!(path.bucket.object_url("x/y").as_str(), "http://127.0.0.1:9000/b/x/y");
        let host = S3Target::addressed("https://s3.example.org", "b", "k", "s", true, "eu-west-1").unwrap();
        assert_eq!(host.bucket.object_url("x/y").as_str(), "https://b.s3.example.org/x/y");
        assert_eq!(host.bucket.region(), "eu-west-1");
    }
}
