//! Records derived from an object's bytes (an HDF5 file's chunk index), kept in the bucket's
//! hidden area as `.isthmus/derived/<kind>-<hash of the key>`, written by the gateway's own
//! identity and replaced atomically; and the plain file behind an object, opened beneath its
//! bucket, for readers that need a file (libhdf5) or writers in place (uncompressed Zarr shards). A record of a key since deleted stays until
//! the bucket goes: readers compare the identity the record carries with the object's before
//! using it.

use std::io::Read;
use std::os::fd::AsFd;

use rustix::fs::{Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use super::PosixStore;
use super::staging::StagedFile;
use crate::resolve::{create_dirs_beneath, open_beneath};
use isthmus_store::UpdateFile;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::{INTERNAL_DIR, ObjectPath};

/// The largest derived record read back (an index of millions of chunks fits).
const MAX_RECORD: u64 = 512 << 20;

fn record_dir() -> String {
    format!("{INTERNAL_DIR}/derived")
}

fn record_name(key: &str, kind: &str) -> StoreResult<String> {
    if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(StoreError::InvalidArgument(format!("{kind:?} is not a derived record kind")));
    }
    Ok(format!("{kind}-{}", crate::meta::key_hash(key)))
}

impl PosixStore {
    pub(super) fn file_of(&self, bucket: &str, key: &str) -> StoreResult<Option<std::fs::File>> {
        let path = ObjectPath::parse(key)?;
        if path.is_dir() {
            return Ok(None);
        }
        let open = self.bucket_fd(bucket)?;
        let (fd, _) = super::current::open_object(open.fd.as_fd(), &path)?;
        // Opened non-blocking (a FIFO planted in its place would otherwise hang the open); it
        // is a regular file, on which the flag means nothing, but readers get it cleared.
        rustix::fs::fcntl_setfl(&fd, OFlags::empty()).map_err(|e| StoreError::io_at("open the object", key, e))?;
        Ok(Some(std::fs::File::from(fd)))
    }

    /// The object's file opened read-write beneath its bucket as the calling thread's identity
    /// (the kernel judges the write permission), for in-place writes bounded by the size it has
    /// now (`UpdateFile`); `None` in a versioned bucket, where a version's bytes never change.
    /// The open file stays in this process: the local door opens it again for each of a peer's
    /// in-place requests rather than pass it (a descriptor could grow the object unbounded).
    pub(super) fn file_for_update(&self, bucket: &str, key: &str) -> StoreResult<Option<UpdateFile>> {
        let path = ObjectPath::parse(key)?;
        if path.is_dir() {
            return Err(StoreError::NoSuchKey);
        }
        let open = self.bucket_fd(bucket)?;
        if open.versioning.is_some() {
            return Ok(None);
        }
        // Non-blocking so a FIFO planted in its place cannot hang the open; NOFOLLOW and the
        // walk beneath the bucket keep it inside.
        let flags = OFlags::RDWR | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW;
        let fd = match open_beneath(open.fd.as_fd(), &path.relative(), flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::NOTDIR | Errno::XDEV | Errno::LOOP | Errno::NXIO | Errno::ISDIR) => {
                return Err(StoreError::NoSuchKey);
            }
            Err(err) => return Err(StoreError::io_at("open the object for an in-place write", key, err)),
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| StoreError::io_at("stat the object", key, e))?;
        if !rustix::fs::FileType::from_raw_mode(stat.st_mode).is_file() {
            return Err(StoreError::NoSuchKey);
        }
        rustix::fs::fcntl_setfl(&fd, OFlags::empty()).map_err(|e| StoreError::io_at("open the object", key, e))?;
        let durability = self.options().durability;
        Ok(Some(UpdateFile::new(std::fs::File::from(fd), stat.st_size as u64, durability, key)))
    }

    pub(super) fn derived_record(&self, bucket: &str, key: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        let name = format!("{}/{}", record_dir(), record_name(key, kind)?);
        let open = self.bucket_fd(bucket)?;
        isthmus_store::identity::as_gateway(|| {
            let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
            let fd = match rustix::fs::openat(open.fd.as_fd(), name.as_str(), flags, Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::NOENT) => return Ok(None),
                Err(err) => return Err(StoreError::io_at("open a derived record", &name, err)),
            };
            let mut bytes = Vec::new();
            std::fs::File::from(fd)
                .take(MAX_RECORD)
                .read_to_end(&mut bytes)
                .map_err(|e| StoreError::io("read a derived record", std::path::Path::new(&name), e))?;
            Ok(Some(bytes))
        })
    }

    pub(super) fn keep_derived_record(&self, bucket: &str, key: &str, kind: &str, bytes: &[u8]) -> StoreResult<()> {
        let name = record_name(key, kind)?;
        let open = self.bucket_fd(bucket)?;
        isthmus_store::identity::as_gateway(|| {
            let dir = create_dirs_beneath(open.fd.as_fd(), &record_dir(), false)
                .map_err(|e| StoreError::io_at("create", &record_dir(), e))?;
            let mut staged = StagedFile::create(dir.try_clone()?)?;
            staged.write_all(bytes)?;
            staged.rename_into(dir.as_fd(), &name, RenameFlags::empty())?;
            Ok(())
        })
    }
}
