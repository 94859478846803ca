//! What the writers of a posix pool (objects, parts, kept versions) share: copying a file's
//! bytes (reflinks or server-side copies where the file system offers them), checking that
//! the caller may change the entries of the directory an object goes into, writing whole
//! buffers, and reading and atomically replacing the gateway's own small files (sidecar and
//! side records) beneath a bucket.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::IO_CHUNK;
use crate::resolve::open_dir_beneath;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::ObjectPath;

/// AccessDenied unless the calling thread's identity may add and remove entries in the
/// directory of `path` (its nearest existing one), as writing or removing its file needs. Only
/// a thread switched to a user's identity is checked; the gateway itself may.
pub(crate) fn check_may_change_entries(bucket: BorrowedFd<'_>, path: &ObjectPath<'_>) -> StoreResult<()> {
    if !isthmus_store::identity::is_switched() {
        return Ok(());
    }
    let dir = nearest_existing_dir(bucket, path)?;
    let access = rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK;
    rustix::fs::accessat(&dir, ".", access, AtFlags::EACCESS).map_err(|_| StoreError::AccessDenied)
}

/// The directory that will hold the object at `path`, or its nearest ancestor that exists
/// (the missing ones are created when the object is installed).
pub(crate) fn nearest_existing_dir(bucket: BorrowedFd<'_>, path: &ObjectPath<'_>) -> StoreResult<OwnedFd> {
    let segments = path.segments();
    let parents = if path.is_dir() { segments.len() } else { segments.len() - 1 };
    for depth in (1..=parents).rev() {
        match open_dir_beneath(bucket, &segments[..depth].join("/")) {
            Ok(dir) => return Ok(dir),
            Err(Errno::NOENT | Errno::NOTDIR) => {}
            Err(err) => return Err(StoreError::io_at("open the object's directory", path.key(), err)),
        }
    }
    open_dir_beneath(bucket, ".").map_err(|e| StoreError::io_at("open the bucket directory", path.key(), e))
}

/// Copies the first `len` bytes of `src` to `dst` at `dst_start` with copy_file_range
/// (reflinks or server-side copies where the file system offers them), falling back to
/// pread/pwrite. A source shorter than `len` is reported as changed.
pub(crate) fn copy_file_contents(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    dst_start: u64,
    len: u64,
) -> StoreResult<()> {
    let mut src_off = 0u64;
    let mut dst_off = dst_start;
    let mut kernel_copy = true;
    let mut buf = Vec::new();
    while src_off < len {
        let chunk = usize::try_from(len - src_off).unwrap_or(usize::MAX).min(1 << 30);
        if kernel_copy {
            match rustix::fs::copy_file_range(src, Some(&mut src_off), dst, Some(&mut dst_off), chunk) {
                Ok(0) => return Err(StoreError::SourceChanged),
                Ok(_) | Err(Errno::INTR) => {}
                Err(Errno::XDEV | Errno::NOSYS | Errno::OPNOTSUPP | Errno::INVAL) => kernel_copy = false,
                Err(err) => return Err(err.into()),
            }
            continue;
        }
        buf.resize(IO_CHUNK, 0);
        let want = chunk.min(IO_CHUNK);
        let n = rustix::io::pread(src, &mut buf[..want], src_off)?;
        if n == 0 {
            return Err(StoreError::SourceChanged);
        }
        let mut done = 0;
        while done < n {
            done += rustix::io::pwrite(dst, &buf[done..n], dst_off + done as u64)?;
        }
        src_off += n as u64;
        dst_off += n as u64;
    }
    Ok(())
}

pub(crate) fn write_all(fd: BorrowedFd<'_>, mut bytes: &[u8]) -> StoreResult<()> {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// Reads a gateway-owned file beneath `bucket` (at most `limit` bytes of it).
pub(crate) fn read_internal_file(bucket: BorrowedFd<'_>, path: &str, limit: usize) -> Option<Vec<u8>> {
    let fd =
        rustix::fs::openat(bucket, path, OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW, Mode::empty()).ok()?;
    let mut bytes = Vec::with_capacity(512);
    std::fs::File::from(fd).take(limit as u64).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Replaces a gateway-owned file beneath `bucket` (its directories made as needed) with
/// `bytes`, atomically: written under a unique name, then renamed.
pub(crate) fn write_internal_file(bucket: BorrowedFd<'_>, path: &str, bytes: &[u8]) -> StoreResult<()> {
    let (dir, name) = path.rsplit_once('/').expect("internal paths have directories");
    let dir_fd = crate::resolve::create_dirs_beneath(bucket, dir, false)?;
    let tmp = format!("{name}.{}", crate::writer_names::unique_suffix());
    let fd = rustix::fs::openat(
        &dir_fd,
        &tmp,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let result = write_all(fd.as_fd(), bytes).and_then(|()| Ok(rustix::fs::renameat(&dir_fd, &tmp, &dir_fd, name)?));
    if result.is_err() {
        let _ = rustix::fs::unlinkat(&dir_fd, &tmp, rustix::fs::AtFlags::empty());
    }
    result
}
