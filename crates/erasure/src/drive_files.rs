//! Files of a drive beneath its `.isthmus/ec` directory as last verified: shard files, key
//! locks and multipart records are opened, made and removed through the descriptor its format
//! was read through, never through its path. A drive unmounted between two checks (its path now
//! an empty directory on the parent's disk) or swapped with another is never written as if it
//! were its slot's drive; and a name read from a drive (a manifest's data id) never leads out.

use std::fs::File;
use std::io::ErrorKind;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::drives::Drive;
use super::format::write_file_at;
use isthmus_posix::resolve::{create_dirs_beneath, open_beneath, open_dir_beneath};
use isthmus_store::error::{StoreError, StoreResult};

/// Striped key locks: a key's writers serialize on one of these files.
const LOCK_STRIPES: u64 = 1024;

/// Whether `name` is one plain path component (a bucket, an upload id, a data id from a drive).
fn component(name: &str) -> std::io::Result<&str> {
    let plain = !name.is_empty() && name.len() <= 255 && name != "." && name != ".." && !name.contains(['/', '\0']);
    if plain {
        Ok(name)
    } else {
        Err(std::io::Error::new(ErrorKind::InvalidInput, format!("{name:?} is no file name")))
    }
}

fn no_writes() -> std::io::Error {
    std::io::Error::new(ErrorKind::NotFound, "the drive takes no writes now")
}

fn not_ready() -> std::io::Error {
    std::io::Error::new(ErrorKind::NotFound, "the drive is not online")
}

/// A shard being rebuilt under a temporary name beside its place; removed unless installed.
pub(crate) struct StagedShard {
    dir: OwnedFd,
    staged: String,
    name: String,
    pub(crate) file: File,
    installed: bool,
}

impl StagedShard {
    /// Syncs the shard and renames it into place.
    pub(crate) fn install(mut self) -> std::io::Result<()> {
        self.file.sync_all()?;
        rustix::fs::renameat(&self.dir, self.staged.as_str(), &self.dir, self.name.as_str())?;
        self.installed = true;
        Ok(())
    }
}

impl Drop for StagedShard {
    fn drop(&mut self) {
        if !self.installed {
            let _ = rustix::fs::unlinkat(&self.dir, self.staged.as_str(), AtFlags::empty());
        }
    }
}

impl Drive {
    /// The drive's `.isthmus/ec` if it takes writes now.
    fn for_writes(&self) -> std::io::Result<Arc<OwnedFd>> {
        if self.writable().is_none() {
            return Err(no_writes());
        }
        self.anchor().ok_or_else(no_writes)
    }

    /// The directory of `bucket`'s shards, made if `create` (in the drive's existing data area:
    /// never the area itself).
    fn shard_dir(&self, ec: &OwnedFd, bucket: &str, create: bool) -> std::io::Result<OwnedFd> {
        let rel = format!("data/{}", component(bucket)?);
        if create {
            match rustix::fs::mkdirat(ec, rel.as_str(), Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(open_dir_beneath(ec.as_fd(), &rel)?)
    }

    /// Opens a shard file for reading (on a drive whose format was verified).
    pub(crate) fn open_shard(&self, bucket: &str, data_id: &str) -> std::io::Result<File> {
        let ec = self.anchor().ok_or_else(not_ready)?;
        let rel = format!("data/{}/{}", component(bucket)?, component(data_id)?);
        Ok(File::from(open_beneath(ec.as_fd(), &rel, OFlags::RDONLY, Mode::empty())?))
    }

    /// Creates a shard file for writing (its bucket's directory as needed).
    pub(crate) fn create_shard(&self, bucket: &str, data_id: &str) -> std::io::Result<File> {
        let ec = self.for_writes()?;
        let dir = self.shard_dir(&ec, bucket, true)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(File::from(rustix::fs::openat(&dir, component(data_id)?, flags, Mode::from_raw_mode(0o644))?))
    }

    /// Removes a replaced, deleted or failed shard file. Reads under way hold their shard
    /// files open and finish with the old bytes (see `read::EcReader`).
    pub(crate) fn discard_shard(&self, bucket: &str, data_id: &str) {
        let Some(ec) = self.anchor() else { return };
        let removed = self
            .shard_dir(&ec, bucket, false)
            .and_then(|dir| Ok(rustix::fs::unlinkat(&dir, component(data_id)?, AtFlags::empty())?));
        if let Err(err) = removed
            && err.kind() != ErrorKind::NotFound
        {
            tracing::debug!(drive = %self.path.display(), data_id, error = %err, "shard not removed");
        }
    }

    /// A new file for shard `data_id` of `bucket`, to be written and then installed in place.
    pub(crate) fn stage_shard(&self, bucket: &str, data_id: &str) -> std::io::Result<StagedShard> {
        let ec = self.for_writes()?;
        let dir = self.shard_dir(&ec, bucket, true)?;
        let name = component(data_id)?.to_string();
        let staged = format!("{name}.heal.{}", super::manifest::random_id());
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let file = File::from(rustix::fs::openat(&dir, staged.as_str(), flags, Mode::from_raw_mode(0o644))?);
        Ok(StagedShard { dir, staged, name, file, installed: false })
    }

    /// Takes the lock of `bucket/name` of `kind` (a stripe of `LOCK_STRIPES` files per kind on
    /// this drive): every gateway serving the pool serializes on it. Kinds keep locks taken
    /// one inside the other (an upload's, then its key's) on different files.
    pub(crate) fn lock(&self, kind: LockKind, bucket: &str, name: &str) -> StoreResult<KeyLock> {
        let stripe =
            crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, format!("{bucket}/{name}").as_bytes()) % LOCK_STRIPES;
        let prefix = match kind {
            LockKind::Key => "k",
            LockKind::Upload => "u",
        };
        let rel = format!("locks/{prefix}{stripe:04}");
        let path = self.path.join(super::format::EC_DIR).join(&rel);
        let ec = self.for_writes().map_err(|e| StoreError::io("open a key lock", &path, e))?;
        let flags = OFlags::RDWR | OFlags::CREATE;
        let file = File::from(
            open_beneath(ec.as_fd(), &rel, flags, Mode::from_raw_mode(0o644))
                .map_err(|e| StoreError::io("open a key lock", &path, e.into()))?,
        );
        rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| StoreError::io("take a key lock", &path, e.into()))?;
        Ok(KeyLock { _file: file })
    }

    /// Writes `bytes` as `name` in the directory of upload `upload_id` of `bucket` (made first
    /// if `create`; else `NotFound` when the drive does not have the upload).
    pub(crate) fn write_upload_file(
        &self,
        bucket: &str,
        upload_id: &str,
        name: &str,
        bytes: &[u8],
        create: bool,
        sync: bool,
    ) -> std::io::Result<()> {
        let ec = self.for_writes()?;
        let rel = format!("uploads/{}/{}", component(bucket)?, component(upload_id)?);
        let dir = if create {
            // The uploads area exists on every formatted drive: only what is below it is made.
            let uploads = open_dir_beneath(ec.as_fd(), "uploads")?;
            create_dirs_beneath(uploads.as_fd(), &rel["uploads/".len()..], sync)?
        } else {
            open_dir_beneath(ec.as_fd(), &rel)?
        };
        write_file_at(dir.as_fd(), component(name)?, bytes, sync)
    }

    /// Writes `bytes` as `name` in `bucket`'s uploads directory, if the drive has it.
    pub(crate) fn write_uploads_record(&self, bucket: &str, name: &str, bytes: &[u8]) -> std::io::Result<()> {
        let ec = self.for_writes()?;
        let dir = open_dir_beneath(ec.as_fd(), &format!("uploads/{}", component(bucket)?))?;
        write_file_at(dir.as_fd(), component(name)?, bytes, false)
    }
}

/// A bucket settings record larger than this is damaged (settings are a few KiB at most: a
/// policy is limited to 20 KiB, 50 tags of 384 bytes).
const BUCKET_RECORD_LIMIT: u64 = 256 << 10;

impl Drive {
    /// The bytes of `bucket`'s settings record on this drive (`None`: it has none, is not
    /// ready, or holds one too large to be one).
    pub(crate) fn read_bucket_record(&self, bucket: &str) -> Option<Vec<u8>> {
        use std::io::Read;
        let ec = self.anchor()?;
        let rel = format!("buckets/{}.json", component(bucket).ok()?);
        let file = File::from(open_beneath(ec.as_fd(), &rel, OFlags::RDONLY, Mode::empty()).ok()?);
        let mut bytes = Vec::new();
        file.take(BUCKET_RECORD_LIMIT + 1).read_to_end(&mut bytes).ok()?;
        if bytes.len() as u64 > BUCKET_RECORD_LIMIT {
            tracing::warn!(drive = %self.path.display(), bucket, "bucket settings record too large: ignored");
            return None;
        }
        Some(bytes)
    }

    /// Writes `bucket`'s settings record (the records' directory made as needed).
    pub(crate) fn write_bucket_record(&self, bucket: &str, bytes: &[u8], sync: bool) -> std::io::Result<()> {
        let ec = self.for_writes()?;
        match rustix::fs::mkdirat(&*ec, "buckets", Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(err) => return Err(err.into()),
        }
        let dir = open_dir_beneath(ec.as_fd(), "buckets")?;
        write_file_at(dir.as_fd(), &format!("{}.json", component(bucket)?), bytes, sync)
    }

    /// Removes what the drive's `.isthmus/ec` keeps of `bucket`: its settings record, shards
    /// and uploads.
    pub(crate) fn remove_bucket_files(&self, bucket: &str) -> std::io::Result<()> {
        let ec = self.for_writes()?;
        let bucket = component(bucket)?;
        match rustix::fs::unlinkat(&*ec, format!("buckets/{bucket}.json").as_str(), AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(err) => return Err(err.into()),
        }
        for area in ["data", "uploads"] {
            // Through the verified directory's descriptor (`/proc/self/fd`), never the path.
            let tree = format!("/proc/self/fd/{}/{area}/{bucket}", std::os::fd::AsRawFd::as_raw_fd(&*ec));
            match std::fs::remove_dir_all(&tree) {
                Err(err) if err.kind() != ErrorKind::NotFound => return Err(err),
                _ => {}
            }
        }
        Ok(())
    }

    /// Removes the drive's directory of `bucket` (a leftover of a deleted bucket) and all it
    /// holds, through the verified directory's descriptor.
    pub(crate) fn remove_bucket_dir(&self, bucket: &str) -> std::io::Result<()> {
        let ec = self.for_writes()?;
        // `.isthmus/ec` is two levels below the drive's root.
        let dir = format!("/proc/self/fd/{}/../../{}", std::os::fd::AsRawFd::as_raw_fd(&*ec), component(bucket)?);
        match std::fs::remove_dir_all(&dir) {
            Err(err) if err.kind() != ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }
}

/// What a lock serializes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockKind {
    /// Commits of an object.
    Key,
    /// Parts, completion and abort of a multipart upload.
    Upload,
}

/// A held lock (released when dropped: the file is closed).
pub(crate) struct KeyLock {
    _file: File,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_from_a_drive_never_lead_out() {
        for bad in ["", ".", "..", "a/b", "../x", "a\0b"] {
            assert!(component(bad).is_err(), "{bad:?}");
        }
        assert_eq!(component("0123abcd").unwrap(), "0123abcd");
    }

    #[test]
    fn a_small_file_is_written_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let fd = rustix::fs::open(dir.path(), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        write_file_at(fd.as_fd(), "f", b"one", true).unwrap();
        write_file_at(fd.as_fd(), "f", b"two", false).unwrap();
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"two");
        assert!(write_file_at(fd.as_fd(), "missing/f", b"x", false).is_err());
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names, ["f"], "no temporary left");
    }
}
