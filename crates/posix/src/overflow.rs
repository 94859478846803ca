//! Records too large for their file's extended attributes. ext4 keeps a file's attributes in
//! its inode and one block, so ten tags of S3's largest size, or user metadata near S3's 2 KB
//! limit, do not fit there (XFS and tmpfs hold more, but a record is never refused for it).
//! Such a record goes to a side file in the bucket's internal area, named by the file's inode
//! (so a rename or a version move outside or inside the gateway keeps it: the inode is the
//! same), and the attribute holds a small pointer with a random nonce that the side file
//! repeats.
//!
//! The pointer is in a `user.` attribute, which whoever writes the file can write: it is
//! untrusted. A pointer only ever leads to the side file of the inode it is set on, only when
//! the nonce matches, and the record found there is then believed no more than one read from
//! the attribute itself (the caller checks its file identity, ETag form and ACL seal). So a
//! user who copies a pointer to a file of their own finds no record (their inode has none),
//! and a stale side file of a reused inode counts only with its own nonce and the exact inode,
//! size and modification time of the file it was written for.
//!
//! Side files of replaced and deleted objects are removed by the gateway's own writes and
//! deletes while the bucket has any (`Overflow::seen`); a file removed outside the gateway
//! leaves its side file until its inode is reused by another overflowing record.

use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::AtFlags;
use rustix::io::Errno;

use isthmus_store::error::StoreResult;
use isthmus_store::key::INTERNAL_DIR;

/// Where side files live, beneath the bucket directory.
const DIR: &str = "meta-overflow";
/// What a pointer begins with; the nonce (hex) follows.
const MARK: &[u8] = b"isthmus-overflow-v1:";
const NONCE_BYTES: usize = 16;
/// The largest side file read: a nonce, a newline and a record as large as an attribute can be
/// (64 KiB on Linux), which a record never outgrows (S3 bounds metadata and tags).
const MAX_SIDE_FILE: usize = NONCE_BYTES * 2 + 1 + 65536;

/// Whether a bucket has side files, known from its directory when the bucket was opened and set
/// when this process writes one; while false, deletes and rewrites skip the cleanup.
#[derive(Debug, Default)]
pub(crate) struct Overflow(AtomicBool);

impl Overflow {
    /// The state of the bucket open as `bucket`.
    pub(crate) fn of(bucket: BorrowedFd<'_>) -> Self {
        let path = format!("{INTERNAL_DIR}/{DIR}");
        Self(AtomicBool::new(rustix::fs::statat(bucket, path.as_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok()))
    }

    pub(crate) fn seen(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Whether an attribute write failed for lack of attribute space (not for lack of support).
pub(crate) fn is_out_of_space(err: Errno) -> bool {
    matches!(err, Errno::NOSPC | Errno::TOOBIG | Errno::RANGE)
}

/// The nonce of a pointer, if `value` is one.
pub(crate) fn pointer_nonce(value: &[u8]) -> Option<&[u8]> {
    let nonce = value.strip_prefix(MARK)?;
    (nonce.len() == NONCE_BYTES * 2 && nonce.iter().all(|b| b.is_ascii_hexdigit())).then_some(nonce)
}

fn side_path(ino: u64) -> String {
    format!("{INTERNAL_DIR}/{DIR}/{:02x}/{ino}", ino & 0xff)
}

/// A pointer to a side file: the attribute value to set on the file of inode `ino`.
pub(crate) struct Pointer {
    pub(crate) ino: u64,
    pub(crate) value: Vec<u8>,
}

/// Stores `record` for the file open as `file` in a side file; the caller sets the file's
/// attribute to the pointer (and forgets the side file if it cannot).
pub(crate) fn save(
    bucket: BorrowedFd<'_>,
    state: &Overflow,
    file: BorrowedFd<'_>,
    record: &[u8],
) -> StoreResult<Pointer> {
    let ino = rustix::fs::fstat(file)?.st_ino;
    let mut nonce = [0u8; NONCE_BYTES];
    getrandom::fill(&mut nonce).map_err(|e| std::io::Error::other(e.to_string()))?;
    let nonce = hex::encode(nonce);
    let mut content = Vec::with_capacity(nonce.len() + 1 + record.len());
    content.extend_from_slice(nonce.as_bytes());
    content.push(b'\n');
    content.extend_from_slice(record);
    let path = side_path(ino);
    state.mark();
    isthmus_store::identity::as_gateway(|| crate::file_ops::write_internal_file(bucket, &path, &content))?;
    Ok(Pointer { ino, value: [MARK, nonce.as_bytes()].concat() })
}

/// The record the pointer with `nonce` on the file open as `file` leads to.
pub(crate) fn load(bucket: BorrowedFd<'_>, file: BorrowedFd<'_>, nonce: &[u8]) -> Option<Vec<u8>> {
    let ino = rustix::fs::fstat(file).ok()?.st_ino;
    let content = isthmus_store::identity::as_gateway(|| {
        crate::file_ops::read_internal_file(bucket, &side_path(ino), MAX_SIDE_FILE)
    })?;
    let (stored, record) = content.split_at_checked(nonce.len())?;
    let record = record.strip_prefix(b"\n")?;
    (stored == nonce).then(|| record.to_vec())
}

/// Removes the side file of the file open as `file` (its record now fits its attribute).
pub(crate) fn forget_file(bucket: BorrowedFd<'_>, state: &Overflow, file: BorrowedFd<'_>) {
    if state.seen()
        && let Ok(stat) = rustix::fs::fstat(file)
    {
        forget_ino(bucket, stat.st_ino);
    }
}

/// Called before the name `leaf` in `dir` is removed or replaced: the side file to remove once it
/// is (`None` unless the bucket has side files and this name is the file's last link).
pub(crate) fn before_unlink(state: &Overflow, dir: BorrowedFd<'_>, leaf: &str) -> Option<u64> {
    if !state.seen() {
        return None;
    }
    let stat = rustix::fs::statat(dir, leaf, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    (crate::is_file(&stat) && stat.st_nlink == 1).then_some(stat.st_ino)
}

/// Removes the side file of inode `ino`, if any.
pub(crate) fn forget_ino(bucket: BorrowedFd<'_>, ino: u64) {
    isthmus_store::identity::as_gateway(|| {
        let _ = rustix::fs::unlinkat(bucket, side_path(ino), AtFlags::empty());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_pointers_have_a_nonce() {
        let nonce = "0123456789abcdef0123456789ABCDEF";
        let pointer = [MARK, nonce.as_bytes()].concat();
        assert_eq!(pointer_nonce(&pointer), Some(nonce.as_bytes()));
        for forged in [
            &pointer[..pointer.len() - 1],
            &[pointer.as_slice(), b"0"].concat()[..],
            &[MARK, b"../../../../etc/passwd000000000000".as_slice()].concat()[..],
            b"{\"etag\":\"x\"}",
            b"",
        ] {
            assert_eq!(pointer_nonce(forged), None, "{:?}", String::from_utf8_lossy(forged));
        }
    }

    #[test]
    fn side_files_are_named_by_inode_alone() {
        assert_eq!(side_path(0x1234), ".isthmus/meta-overflow/34/4660");
        assert_ne!(side_path(1), side_path(257));
    }
}
