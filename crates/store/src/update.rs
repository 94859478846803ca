//! An object's plain file opened for writing in place (`ObjectFiles::object_file_for_update`): for
//! writers of formats whose layout is fixed when the object is made (an uncompressed Zarr shard,
//! whose inner chunks sit at known offsets), so a small region costs one `pwrite` into an open
//! file instead of a new object. Writes change bytes where they are, as a POSIX program's would:
//! not atomic for a concurrent reader, never past the size the file had when opened (no write
//! grows an object, so quotas and the layout hold), and synced when the store's durability asks.
//! Writers of one file serialize on its `flock` (held by the open file, so two opens in one
//! process exclude each other as two processes do; POSIX record locks would not).
//!
//! The file is open in this process (`UpdateFile::new`), or held by a gateway this process
//! reaches over its local socket (`UpdateFile::remote`): then each read and write is a request
//! the gateway judges and bounds again. No descriptor of a writable file is ever handed to
//! another process: a descriptor carries no bound, so whoever holds it could grow the object
//! past its size and its bucket's quota, and keep writing after its permission is gone.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, MutexGuard};

use crate::error::{StoreError, StoreResult};
use crate::facts::Durability;

/// An object's file open for in-place writes, with the size it may not pass.
#[derive(Debug)]
pub struct UpdateFile {
    backing: Backing,
    size: u64,
    durability: Durability,
    key: String,
    /// Threads sharing this handle exclude each other here: a `flock` taken twice through one
    /// open file is one lock.
    writers: Mutex<()>,
}

#[derive(Debug)]
enum Backing {
    File(File),
    Remote(Box<dyn RemoteUpdate>),
}

/// In-place reads and writes another process makes for this one: the local door's client,
/// whose gateway opens the object's file again for each request, judges it as the peer and
/// bounds it by the object's size. `UpdateFile` has checked that every range is inside the
/// object before a call reaches here.
pub trait RemoteUpdate: Send + Sync + std::fmt::Debug {
    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> StoreResult<()>;
    /// Writes each `(offset, bytes)` under the file's lock, taken for these writes alone, then
    /// makes them durable if the store is strictly durable. `PreconditionFailed` when the
    /// object no longer has the size this handle was opened with (it was replaced, truncated
    /// or deleted): nothing was written.
    fn write(&self, pieces: &[(u64, &[u8])]) -> StoreResult<()>;
    /// Takes the file's lock for the `*_locked` calls that follow, until `unlock`.
    fn lock(&self) -> StoreResult<()>;
    fn read_locked(&self, offset: u64, buf: &mut [u8]) -> StoreResult<()>;
    fn write_locked(&self, offset: u64, bytes: &[u8]) -> StoreResult<()>;
    fn unlock(&self);
    /// Makes the writes so far durable if the store is strictly durable.
    fn sync(&self) -> StoreResult<()>;
}

/// The file locked for one writer until dropped (`UpdateFile::lock`).
pub struct UpdateLock<'a> {
    update: &'a UpdateFile,
    _writer: MutexGuard<'a, ()>,
}

/// A file locked by its one holder, who keeps the lock across calls until this is dropped
/// (`UpdateFile::into_locked`): the local door's gateway, for a peer's read-merge-write that
/// spans several requests.
#[derive(Debug)]
pub struct LockedFile {
    update: UpdateFile,
}

impl UpdateFile {
    /// `file` (opened read-write as the request's identity) holding `key`, of `size` bytes.
    pub fn new(file: File, size: u64, durability: Durability, key: &str) -> Self {
        Self::with_backing(Backing::File(file), size, durability, key)
    }

    /// An object of `size` bytes whose file another process holds and writes on request.
    pub fn remote(requests: Box<dyn RemoteUpdate>, size: u64, durability: Durability, key: &str) -> Self {
        Self::with_backing(Backing::Remote(requests), size, durability, key)
    }

    fn with_backing(backing: Backing, size: u64, durability: Durability, key: &str) -> Self {
        Self { backing, size, durability, key: key.to_string(), writers: Mutex::new(()) }
    }

    /// The store's durability, which `commit` keeps.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The object's size: no write reaches past it.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// `len` bytes at `offset`, refused unless they lie inside the object (checked arithmetic:
    /// offsets come from a layout anyone may have written, or from a peer).
    pub fn check_inside(&self, offset: u64, len: u64) -> StoreResult<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(StoreError::InvalidArgument(format!(
                "{}: {len} bytes at {offset} are outside the object's {} bytes",
                self.key, self.size
            ))),
        }
    }

    /// Reads exactly `buf.len()` bytes at `offset`.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> StoreResult<()> {
        self.check_inside(offset, buf.len() as u64)?;
        match &self.backing {
            Backing::File(file) => self.read_file(file, offset, buf),
            Backing::Remote(remote) => remote.read_at(offset, buf),
        }
    }

    /// Writes each `(offset, bytes)` (every one inside the object, or nothing is written) under
    /// the file's lock, taken for these writes, then makes them durable if the store is
    /// strictly durable. `PreconditionFailed` when the file is no longer the object's at its
    /// size (replaced, deleted or truncated since it was opened): nothing was written, and the
    /// caller opens the object again.
    pub fn write(&self, pieces: &[(u64, &[u8])]) -> StoreResult<()> {
        for (offset, bytes) in pieces {
            self.check_inside(*offset, bytes.len() as u64)?;
        }
        match &self.backing {
            Backing::File(_) => {
                let lock = self.lock()?;
                if !self.still_current() {
                    return Err(StoreError::PreconditionFailed);
                }
                for (offset, bytes) in pieces {
                    lock.write_at(*offset, bytes)?;
                }
                drop(lock);
                self.commit()
            }
            Backing::Remote(remote) => {
                let _writer = self.writer();
                remote.write(pieces)
            }
        }
    }

    fn writer(&self) -> MutexGuard<'_, ()> {
        self.writers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the file's exclusive lock (waiting for another writer's, in this process or
    /// another): a read-merge-write of part of the file holds it so no write lands between.
    pub fn lock(&self) -> StoreResult<UpdateLock<'_>> {
        let writer = self.writer();
        self.take_lock()?;
        Ok(UpdateLock { update: self, _writer: writer })
    }

    /// This handle, locked until the value returned is dropped: for a holder that keeps the
    /// lock across calls and shares the handle with no thread meanwhile (it owns it).
    pub fn into_locked(self) -> StoreResult<LockedFile> {
        self.take_lock()?;
        Ok(LockedFile { update: self })
    }

    fn take_lock(&self) -> StoreResult<()> {
        match &self.backing {
            Backing::File(file) => rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive)
                .map_err(|e| StoreError::io_at("lock for an in-place write", &self.key, e)),
            Backing::Remote(remote) => remote.lock(),
        }
    }

    fn release_lock(&self) {
        match &self.backing {
            // Closing the file would release it too; an unlock that fails leaves it to the close.
            Backing::File(file) => {
                let _ = rustix::fs::flock(file, rustix::fs::FlockOperation::Unlock);
            }
            Backing::Remote(remote) => remote.unlock(),
        }
    }

    /// A read while the lock is held.
    fn read_locked(&self, offset: u64, buf: &mut [u8]) -> StoreResult<()> {
        self.check_inside(offset, buf.len() as u64)?;
        match &self.backing {
            Backing::File(file) => self.read_file(file, offset, buf),
            Backing::Remote(remote) => remote.read_locked(offset, buf),
        }
    }

    /// A write while the lock is held.
    fn write_locked(&self, offset: u64, bytes: &[u8]) -> StoreResult<()> {
        self.check_inside(offset, bytes.len() as u64)?;
        match &self.backing {
            Backing::File(file) => {
                file.write_all_at(bytes, offset).map_err(|e| StoreError::io("write in place", self.key.as_ref(), e))
            }
            Backing::Remote(remote) => remote.write_locked(offset, bytes),
        }
    }

    fn read_file(&self, file: &File, offset: u64, buf: &mut [u8]) -> StoreResult<()> {
        file.read_exact_at(buf, offset).map_err(|e| StoreError::io("read in place", self.key.as_ref(), e))
    }

    /// Whether the file is still linked and of the size it had when opened: a handle kept for
    /// later writes is dropped once the object was replaced or deleted (its file then has no
    /// link left) or truncated. A remote handle answers true: its gateway checks at each write
    /// and answers `PreconditionFailed` then.
    pub fn still_current(&self) -> bool {
        match &self.backing {
            Backing::File(file) => {
                rustix::fs::fstat(file).is_ok_and(|stat| stat.st_nlink > 0 && stat.st_size as u64 == self.size)
            }
            Backing::Remote(_) => true,
        }
    }

    /// Makes the writes so far durable when the store promises strict durability (the data:
    /// the file's size and place never change).
    pub fn commit(&self) -> StoreResult<()> {
        if self.durability != Durability::Strict {
            return Ok(());
        }
        match &self.backing {
            Backing::File(file) => {
                file.sync_data().map_err(|e| StoreError::io("sync an in-place write", self.key.as_ref(), e))
            }
            Backing::Remote(remote) => remote.sync(),
        }
    }
}

impl UpdateLock<'_> {
    /// Reads exactly `buf.len()` bytes at `offset`, inside the object.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> StoreResult<()> {
        self.update.read_locked(offset, buf)
    }

    /// Writes `bytes` at `offset`, inside the object.
    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> StoreResult<()> {
        self.update.write_locked(offset, bytes)
    }
}

impl Drop for UpdateLock<'_> {
    fn drop(&mut self) {
        self.update.release_lock();
    }
}

impl LockedFile {
    /// The file's handle (its size, durability, whether it is still current).
    pub fn file(&self) -> &UpdateFile {
        &self.update
    }

    /// Reads exactly `buf.len()` bytes at `offset`, inside the object.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> StoreResult<()> {
        self.update.read_locked(offset, buf)
    }

    /// Writes `bytes` at `offset`, inside the object.
    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> StoreResult<()> {
        self.update.write_locked(offset, bytes)
    }
}

impl Drop for LockedFile {
    fn drop(&mut self) {
        self.update.release_lock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn update_of(bytes: &[u8]) -> (tempfile::TempDir, UpdateFile) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("object");
        std::fs::write(&path, bytes).unwrap();
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        (dir, UpdateFile::new(file, bytes.len() as u64, Durability::Relaxed, "object"))
    }

    #[test]
    fn writes_land_in_place_and_never_past_the_size() {
        let (dir, update) = update_of(&[0u8; 16]);
        update.write(&[(4, b"abcd"), (12, b"wxyz")]).unwrap();
        let mut back = [0u8; 4];
        update.read_at(4, &mut back).unwrap();
        assert_eq!(&back, b"abcd");
        assert!(matches!(update.write(&[(0, b"ok"), (13, b"abcd")]), Err(StoreError::InvalidArgument(_))));
        update.read_at(0, &mut back).unwrap();
        assert_eq!(&back, &[0, 0, 0, 0], "a write with one piece outside writes none");
        assert!(matches!(update.write(&[(u64::MAX - 1, b"abcd")]), Err(StoreError::InvalidArgument(_))));
        let lock = update.lock().unwrap();
        assert!(matches!(lock.write_at(15, b"ab"), Err(StoreError::InvalidArgument(_))));
        lock.write_at(14, b"ab").unwrap();
        drop(lock);
        assert!(update.read_at(16, &mut back).is_err());
        assert_eq!(std::fs::metadata(dir.path().join("object")).unwrap().len(), 16, "the object never grows");
        update.commit().unwrap();
    }

    #[test]
    fn a_handle_knows_when_its_file_is_gone() {
        let (dir, update) = update_of(&[0u8; 8]);
        assert!(update.still_current());
        std::fs::write(dir.path().join("new"), [0u8; 8]).unwrap();
        std::fs::rename(dir.path().join("new"), dir.path().join("object")).unwrap();
        assert!(!update.still_current(), "replaced by a rename");
        assert!(matches!(update.write(&[(0, b"lost")]), Err(StoreError::PreconditionFailed)));
        let (dir, update) = update_of(&[0u8; 8]);
        std::fs::OpenOptions::new().write(true).open(dir.path().join("object")).unwrap().set_len(4).unwrap();
        assert!(!update.still_current(), "truncated");
        assert!(matches!(update.write(&[(0, b"grow")]), Err(StoreError::PreconditionFailed)));
        assert_eq!(std::fs::metadata(dir.path().join("object")).unwrap().len(), 4, "a truncated file is not regrown");
    }

    #[test]
    fn a_second_open_file_waits_for_the_lock() {
        let (dir, update) = update_of(&[0u8; 8]);
        let other = std::fs::OpenOptions::new().read(true).write(true).open(dir.path().join("object")).unwrap();
        let guard = update.lock().unwrap();
        let busy = rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockExclusive);
        assert!(busy.is_err(), "another open file description takes the lock while it is held");
        drop(guard);
        rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
        rustix::fs::flock(&other, rustix::fs::FlockOperation::Unlock).unwrap();
        let locked = update.into_locked().unwrap();
        assert!(rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_err());
        locked.write_at(0, b"held").unwrap();
        drop(locked);
        rustix::fs::flock(&other, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    }
}
