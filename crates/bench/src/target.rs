//! Targets: the systems a workload runs against. Each worker thread opens its own connection
//! (`Target::connect`) and calls plain blocking operations on it, so the same workload code
//! measures raw POSIX file operations, any S3 endpoint over HTTP, and the engine in-process.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

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

    /// Object targets: directs the operations that follow at bucket `name` (`None`: the run's
    /// own bucket), for the S3 mappings of `mapping`.
    fn use_bucket(&mut self, _name: Option<&str>) -> BenchResult<()> {
        Err(no_buckets())
    }

    /// Creates bucket `name`; one that exists already is fine.
    fn create_bucket(&mut self, _name: &str) -> BenchResult<()> {
        Err(no_buckets())
    }

    fn head_bucket(&mut self, _name: &str) -> BenchResult<()> {
        Err(no_buckets())
    }

    /// Deletes the empty bucket `name`.
    fn delete_bucket(&mut self, _name: &str) -> BenchResult<()> {
        Err(no_buckets())
    }

    /// Deletes every object of bucket `name`, then the bucket; a missing bucket is fine.
    fn remove_bucket(&mut self, _name: &str) -> BenchResult<()> {
        Err(no_buckets())
    }

    /// Copies the object `from` to `to` on the server (S3 CopyObject).
    fn copy(&mut self, from: &str, _to: &str) -> BenchResult<()> {
        Err(BenchError::Setup(format!("cannot copy {from}: this target has no server-side copy")))
    }
}

/// The key prefix of the directory `dir`: `dir/`, or everything for "".
pub(crate) fn directory_prefix(dir: &str) -> String {
    let dir = dir.trim_end_matches('/');
    if dir.is_empty() { String::new() } else { format!("{dir}/") }
}

fn no_buckets() -> BenchError {
    BenchError::Setup("this target is a directory of files: it has no buckets".into())
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
    /// Removes what this process alone made, for the processes that leave `cleanup` to
    /// another (the buckets its connections made under an S3 mapping); nothing by default.
    fn release(&self) -> BenchResult<()> {
        Ok(())
    }
}

pub(crate) const READ_BUF: usize = 1 << 20;

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
