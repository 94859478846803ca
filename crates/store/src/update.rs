//! An object's plain file opened for writing in place (`Store::object_file_for_update`): for
//! writers of formats whose layout is fixed when the object is made (an uncompressed Zarr shard,
//! whose inner chunks sit at known offsets), so a small region costs one `pwrite` into an open
//! file instead of a new object. Writes change bytes where they are, as a POSIX program's would:
//! not atomic for a concurrent reader, never past the size the file had when opened (no write
//! grows an object, so quotas and the layout hold), and synced when the store's durability asks.
//! Writers of one file serialize on its `flock` (held by the open file, so two opens in one
//! process exclude each other as two processes do; POSIX record locks would not).

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::error::{StoreError, StoreResult};
use crate::facts::Durability;

/// An object's file open for in-place writes, with the size it may not pass.
#[derive(Debug)]
pub struct UpdateFile {
    file: File,
    size: u64,
    durability: Durability,
    key: String,
    /// Threads sharing this handle exclude each other here: a `flock` taken twice through one
    /// open file is one lock.
    writers: std::sync::Mutex<()>,
}

/// The file locked for one writer until dropped.
pub struct UpdateLock<'a> {
    update: &'a UpdateFile,
    _writer: std::sync::MutexGuard<'a, ()>,
}

impl UpdateFile {
    /// `file` (opened read-write as the request's identity) holding `key`, of `size` bytes.
    pub fn new(file: File, size: u64, durability: Durability, key: &str) -> Self {
        Self { file, size, durability, key: key.to_string(), writers: std::sync::Mutex::new(()) }
    }

    /// The store's durability, which `commit` keeps.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The open file (a local door passes it to its peer).
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.file)
    }

    /// The object's size: no write reaches past it.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// `len` bytes at `offset`, refused unless they lie inside the object (checked arithmetic:
    /// offsets come from a layout anyone may have written).
    fn inside(&self, offset: u64, len: usize) -> StoreResult<()> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(StoreError::InvalidArgument(format!(
                "{}: {len} bytes at {offset} are outside the object's {} bytes",
                self.key, self.size
            ))),
        }
    }

    /// Reads exactly `buf.len()` bytes at `offset`.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> StoreResult<()> {
        self.inside(offset, buf.len())?;
        self.file.read_exact_at(buf, offset).map_err(|e| StoreError::io("read in place", self.key.as_ref(), e))
    }

    /// Writes `bytes` at `offset`, inside the object.
    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> StoreResult<()> {
        self.inside(offset, bytes.len())?;
        self.file.write_all_at(bytes, offset).map_err(|e| StoreError::io("write in place", self.key.as_ref(), e))
    }

    /// Takes the file's exclusive lock (waiting for another writer's, in this process or
    /// another): a read-merge-write of part of the file holds it so no write lands between.
    pub fn lock(&self) -> StoreResult<UpdateLock<'_>> {
        let writer = self.writers.lock().unwrap_or_else(|e| e.into_inner());
        rustix::fs::flock(&self.file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| StoreError::io_at("lock for an in-place write", &self.key, e))?;
        Ok(UpdateLock { update: self, _writer: writer })
    }

    /// Whether the file is still linked and of the size it had when opened: a handle kept for
    /// later writes is dropped once the object was replaced or deleted (its file then has no
    /// link left) or truncated.
    pub fn still_current(&self) -> bool {
        rustix::fs::fstat(&self.file).is_ok_and(|stat| stat.st_nlink > 0 && stat.st_size as u64 == self.size)
    }

    /// Makes the writes so far durable when the store promises strict durability (the data:
    /// the file's size and place never change).
    pub fn commit(&self) -> StoreResult<()> {
        if self.durability == Durability::Strict {
            self.file.sync_data().map_err(|e| StoreError::io("sync an in-place write", self.key.as_ref(), e))?;
        }
        Ok(())
    }
}

impl Drop for UpdateLock<'_> {
    fn drop(&mut self) {
        // Closing the file would release it too; an unlock that fails leaves it to the close.
        let _ = rustix::fs::flock(&self.update.file, rustix::fs::FlockOperation::Unlock);
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
        update.write_at(4, b"abcd").unwrap();
        let mut back = [0u8; 4];
        update.read_at(4, &mut back).unwrap();
        assert_eq!(&back, b"abcd");
        assert!(matches!(update.write_at(13, b"abcd"), Err(StoreError::InvalidArgument(_))));
        assert!(matches!(update.write_at(u64::MAX - 1, b"abcd"), Err(StoreError::InvalidArgument(_))));
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
        let (dir, update) = update_of(&[0u8; 8]);
        std::fs::OpenOptions::new().write(true).open(dir.path().join("object")).unwrap().set_len(4).unwrap();
        assert!(!update.still_current(), "truncated");
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
    }
}
