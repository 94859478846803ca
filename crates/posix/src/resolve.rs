//! Opening paths strictly beneath a directory. Uses openat2(RESOLVE_BENEATH), so a symlink that
//! a POSIX user planted is followed only while it stays inside the bucket; on kernels without
//! openat2 (before 5.6) it walks the path one component at a time and follows no symlink at all.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

static OPENAT2_MISSING: AtomicBool = AtomicBool::new(false);

/// Opens `rel` (a relative path without `.`/`..` segments) beneath `dir`.
pub fn open_beneath(dir: BorrowedFd<'_>, rel: &str, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
    let flags = flags | OFlags::CLOEXEC;
    if !OPENAT2_MISSING.load(Ordering::Relaxed) {
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(dir, rel, flags, mode, resolve) {
            Err(Errno::NOSYS) => OPENAT2_MISSING.store(true, Ordering::Relaxed),
            // openat2 can fail with EAGAIN under concurrent renames; walk instead of failing.
            Err(Errno::AGAIN) => {}
            other => return other,
        }
    }
    open_by_walking(dir, rel, flags, mode)
}

fn open_by_walking(dir: BorrowedFd<'_>, rel: &str, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
    let mut parts = rel.split('/').peekable();
    let mut current: Option<OwnedFd> = None;
    while let Some(part) = parts.next() {
        let base = current.as_ref().map_or(dir, |fd| fd.as_fd());
        if parts.peek().is_none() {
            return rustix::fs::openat(base, part, flags | OFlags::NOFOLLOW, mode);
        }
        let next = rustix::fs::openat(
            base,
            part,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        current = Some(next);
    }
    // An empty `rel` opens `dir` itself.
    rustix::fs::openat(dir, ".", flags, mode)
}

/// Opens a directory beneath `dir` for use as the base of further *at() calls.
pub fn open_dir_beneath(dir: BorrowedFd<'_>, rel: &str) -> Result<OwnedFd, Errno> {
    open_beneath(dir, rel, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
}

/// Opens the directory `rel` beneath `dir`, creating missing components (like `mkdir -p`).
/// With `sync`, every directory that had an entry added is fsynced.
pub fn create_dirs_beneath(dir: BorrowedFd<'_>, rel: &str, sync: bool) -> Result<OwnedFd, Errno> {
    match open_dir_beneath(dir, rel) {
        Err(Errno::NOENT) => {}
        other => return other,
    }
    let mut current =
        rustix::fs::openat(dir, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
    for part in rel.split('/') {
        match rustix::fs::mkdirat(&current, part, Mode::from_raw_mode(0o777)) {
            Ok(()) => {
                if sync {
                    rustix::fs::fsync(&current)?;
                }
            }
            Err(Errno::EXIST) => {}
            Err(err) => return Err(err),
        }
        current = open_dir_beneath(current.as_fd(), part)?;
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn open_root(path: &std::path::Path) -> OwnedFd {
        rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap()
    }

    #[test]
    fn symlinks_may_not_leave_the_directory() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"secret").unwrap();
        let bucket = tempfile::tempdir().unwrap();
        std::fs::create_dir(bucket.path().join("d")).unwrap();
        std::fs::write(bucket.path().join("d/inside"), b"ok").unwrap();
        symlink(outside.path().join("secret"), bucket.path().join("abs")).unwrap();
        symlink("../../../../../../../../etc/passwd", bucket.path().join("d/rel")).unwrap();
        symlink(outside.path(), bucket.path().join("dirlink")).unwrap();
        symlink("d/inside", bucket.path().join("good")).unwrap();
        let root = open_root(bucket.path());
        for escape in ["abs", "d/rel", "dirlink/secret"] {
            assert!(open_beneath(root.as_fd(), escape, OFlags::RDONLY, Mode::empty()).is_err(), "{escape} escaped");
            assert!(open_by_walking(root.as_fd(), escape, OFlags::RDONLY, Mode::empty()).is_err());
        }
        assert!(open_beneath(root.as_fd(), "good", OFlags::RDONLY, Mode::empty()).is_ok());
        assert!(open_beneath(root.as_fd(), "d/inside", OFlags::RDONLY, Mode::empty()).is_ok());
        assert!(open_by_walking(root.as_fd(), "d/inside", OFlags::RDONLY, Mode::empty()).is_ok());
    }

    #[test]
    fn create_dirs_refuses_symlinked_components() {
        let outside = tempfile::tempdir().unwrap();
        let bucket = tempfile::tempdir().unwrap();
        symlink(outside.path(), bucket.path().join("link")).unwrap();
        let root = open_root(bucket.path());
        assert!(create_dirs_beneath(root.as_fd(), "link/x/y", false).is_err());
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        create_dirs_beneath(root.as_fd(), "a/b/c", true).unwrap();
        assert!(bucket.path().join("a/b/c").is_dir());
    }
}
