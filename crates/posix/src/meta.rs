//! Object metadata: the record kept with each object (ETag, HTTP headers, user metadata) and the
//! file identity (inode, size, mtime) it was computed for. It lives in one `user.` extended
//! attribute, or in a hashed sidecar file under `.isthmus/meta` where xattrs are unavailable; a
//! record too large for the file's attribute space goes to a side file (`overflow`).

use std::os::fd::BorrowedFd;

use md5::{Digest, Md5};
use rustix::fs::XattrFlags;
use rustix::io::Errno;

use crate::overflow::{self, Overflow};
use isthmus_store::MetadataMode;
use isthmus_store::error::StoreResult;
use isthmus_store::key::INTERNAL_DIR;
use isthmus_store::seal_key::SealKey;

/// The extended attribute holding an object's metadata record.
pub const XATTR_NAME: &str = "user.isthmus";

pub use crate::record::{EMPTY_ETAG, FileIdentity, MetaRecord};

/// Reads and writes metadata records for one bucket, for one request.
#[derive(Clone, Copy)]
pub struct MetaStore<'a> {
    pub mode: MetadataMode,
    /// The bucket directory (base of the sidecar directory).
    pub bucket: BorrowedFd<'a>,
    /// Files written outside the gateway up to this size get the MD5 of their content as
    /// ETag; larger ones an ETag derived from their identity (`identity_etag`).
    pub etag_md5_limit: u64,
    /// Whether this request may hash a file (see `RequestContext::may_block`).
    pub may_block: bool,
    /// Seals the object ACLs recorded here; `None`: this process cannot (and records none).
    pub seal: Option<&'a SealKey>,
    /// Whether the bucket has records too large for their attributes (`overflow`).
    pub(crate) overflow: &'a Overflow,
}

impl MetaStore<'_> {
    /// Loads the record of the object open as `file`, whose key is `key`: what of it can be
    /// believed (see `believed`).
    pub fn load(&self, file: BorrowedFd<'_>, key: &str) -> Option<MetaRecord> {
        let bytes = match self.mode {
            MetadataMode::Sidecar => self.read_sidecar(key)?,
            MetadataMode::Xattr => read_xattr(file)?,
            MetadataMode::Auto => read_xattr(file).or_else(|| self.read_sidecar(key))?,
        };
        let bytes = match overflow::pointer_nonce(&bytes) {
            Some(nonce) => overflow::load(self.bucket, file, nonce)?,
            None => bytes,
        };
        self.believed(file, crate::meta_codec::decode(&bytes)?)
    }

    /// What of a stored record is believed. Whoever can write an object's file can write its
    /// record too (a `user.` attribute), so the record is untrusted input: an ETag that is no
    /// ETag makes it no record (the ETag is recomputed, as for a file written outside the
    /// gateway); part sizes that do not add up to the file's size are dropped; headers that no
    /// HTTP response may carry are dropped; and an ACL counts only if the gateway sealed it for
    /// this very file (`acl_seal`): a user who writes `{"meta":{"acl":"public-read"}}` into
    /// the attribute of a file makes nothing public.
    fn believed(&self, file: BorrowedFd<'_>, mut record: MetaRecord) -> Option<MetaRecord> {
        if !plausible_etag(&record.etag) {
            return None;
        }
        if !parts_add_up(&record.parts, record.identity.size) {
            record.parts.clear();
        }
        drop_unsendable_headers(&mut record.meta);
        if has_acl(&record) {
            let sealed = match (self.seal, record.acl_seal.as_deref(), rustix::fs::fstat(file)) {
                (Some(key), Some(seal), Ok(stat)) => {
                    key.verify(ACL_SEAL, &acl_sealed_parts(&record, stat.st_ino), seal)
                }
                _ => false,
            };
            if !sealed {
                record.meta.acl = None;
                record.meta.grants.clear();
            }
        }
        record.acl_seal = None;
        Some(record)
    }

    /// Stores `record` for the object open as `file`. In auto mode a file system without
    /// xattr support falls back to the sidecar; a record larger than the file's attribute
    /// space goes to a side file (`overflow`). An ACL is stored sealed for this file; a process
    /// that cannot seal stores none.
    pub fn save(&self, file: BorrowedFd<'_>, key: &str, record: &MetaRecord) -> StoreResult<()> {
        let mut record = record.clone();
        record.acl_seal = None;
        if has_acl(&record) {
            match self.seal {
                Some(seal) => {
                    let ino = rustix::fs::fstat(file)?.st_ino;
                    record.acl_seal = Some(seal.seal(ACL_SEAL, &acl_sealed_parts(&record, ino)));
                }
                None => {
                    record.meta.acl = None;
                    record.meta.grants.clear();
                }
            }
        }
        let bytes = crate::meta_codec::encode(&record);
        if self.mode == MetadataMode::Sidecar {
            return self.write_sidecar(key, &bytes);
        }
        match rustix::fs::fsetxattr(file, XATTR_NAME, &bytes, XattrFlags::empty()) {
            Ok(()) => {
                overflow::forget_file(self.bucket, self.overflow, file);
                Ok(())
            }
            Err(err) if overflow::is_out_of_space(err) => {
                let pointer = overflow::save(self.bucket, self.overflow, file, &bytes)?;
                rustix::fs::fsetxattr(file, XATTR_NAME, &pointer.value, XattrFlags::empty())
                    .inspect_err(|_| overflow::forget_ino(self.bucket, pointer.ino))?;
                Ok(())
            }
            Err(Errno::NOTSUP | Errno::PERM) if self.mode == MetadataMode::Auto => self.write_sidecar(key, &bytes),
            Err(err) => Err(err.into()),
        }
    }

    /// Removes the sidecar of `key`, if there is one (xattrs go with their file).
    pub fn remove_sidecar(&self, key: &str) {
        if self.mode != MetadataMode::Xattr {
            isthmus_store::identity::as_gateway(|| {
                let _ = rustix::fs::unlinkat(self.bucket, sidecar_path(key), rustix::fs::AtFlags::empty());
            });
        }
    }

    // Sidecars live in the bucket's internal area, which is the gateway's: they are read and
    // written with its identity, always right after the request's own identity opened (read)
    // or wrote the object itself, so the kernel has judged the access already.
    fn read_sidecar(&self, key: &str) -> Option<Vec<u8>> {
        isthmus_store::identity::as_gateway(|| {
            crate::file_ops::read_internal_file(self.bucket, &sidecar_path(key), MAX_RECORD)
        })
    }

    fn write_sidecar(&self, key: &str, bytes: &[u8]) -> StoreResult<()> {
        isthmus_store::identity::as_gateway(|| {
            crate::file_ops::write_internal_file(self.bucket, &sidecar_path(key), bytes)
        })
    }
}

fn read_xattr(file: BorrowedFd<'_>) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; 1024];
    loop {
        match rustix::fs::fgetxattr(file, XATTR_NAME, &mut buf) {
            Ok(n) => {
                buf.truncate(n);
                return Some(buf);
            }
            Err(Errno::RANGE) if buf.len() < MAX_RECORD => buf.resize(buf.len() * 4, 0),
            Err(_) => return None,
        }
    }
}

/// The largest record read (an xattr value is at most 64 KiB on Linux).
const MAX_RECORD: usize = 65536;

/// What an object ACL's seal is for (see `SealKey::seal`).
const ACL_SEAL: &str = "isthmus object ACL v1";

fn has_acl(record: &MetaRecord) -> bool {
    record.meta.acl.is_some() || !record.meta.grants.is_empty()
}

/// What an object ACL's seal covers: the file (its inode: a record copied to another file
/// does not carry its ACL along) and the ACL itself.
fn acl_sealed_parts(record: &MetaRecord, ino: u64) -> [Vec<u8>; 2] {
    let acl = serde_json::to_vec(&record.meta.object_acl()).expect("ACLs serialize");
    [ino.to_le_bytes().to_vec(), acl]
}

/// Whether `etag` has the form of an ETag the gateway writes (hex, maybe `-N`).
fn plausible_etag(etag: &str) -> bool {
    (1..=100).contains(&etag.len()) && etag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Whether run-length encoded part sizes add up to `size` (checked: a forged record may
/// claim anything).
pub(crate) fn parts_add_up(parts: &[(u64, u32)], size: u64) -> bool {
    if parts.is_empty() {
        return true;
    }
    let total = parts.iter().try_fold(0u64, |total, &(part, count)| {
        if count == 0 {
            return None;
        }
        part.checked_mul(u64::from(count)).and_then(|bytes| total.checked_add(bytes))
    });
    let count = parts.iter().try_fold(0u32, |n, &(_, count)| n.checked_add(count));
    total == Some(size) && count.is_some_and(|n| n <= 10_000)
}

/// Drops stored headers that no HTTP response may carry (control characters), which only a
/// hand-written record can hold: the doors check what clients send.
fn drop_unsendable_headers(meta: &mut isthmus_store::ObjectMeta) {
    let sendable = |value: &String| value.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f));
    for field in [
        &mut meta.content_type,
        &mut meta.content_encoding,
        &mut meta.content_disposition,
        &mut meta.content_language,
        &mut meta.cache_control,
        &mut meta.expires,
    ] {
        if field.as_ref().is_some_and(|v| !sendable(v)) {
            *field = None;
        }
    }
    let name_ok = |name: &String| {
        !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    meta.user.retain(|name, value| name_ok(name) && sendable(value));
}

/// A stable hex hash of a key, for names of per-key internal files.
pub(crate) fn key_hash(key: &str) -> String {
    hex::encode(Md5::digest(key.as_bytes()))
}

/// The sidecar location of `key`: hashed, so no key can collide with another or with a directory.
fn sidecar_path(key: &str) -> String {
    let digest = key_hash(key);
    format!("{INTERNAL_DIR}/meta/{}/{digest}", &digest[..2])
}

/// The ETag of a file written outside the gateway that is too large to hash on a request
/// path: derived from the file's identity (inode, size, mtime in nanoseconds), so it is
/// available at once, identical on every gateway that serves the same file system, stable
/// while the file is unchanged and different as soon as the file changes. The `-1` suffix is
/// the form of a multipart ETag, which clients (rclone, s3cmd, the aws CLI) already treat as
/// "not the MD5 of the content" and do not verify downloads against.
pub fn identity_etag(identity: &FileIdentity) -> String {
    let mut hasher = Md5::new();
    hasher.update(b"isthmus-file-identity\0");
    hasher.update(identity.ino.to_le_bytes());
    hasher.update(identity.size.to_le_bytes());
    hasher.update(identity.mtime_ns.to_le_bytes());
    format!("{}-1", hex::encode(hasher.finalize()))
}

/// Computes the MD5 ETag of a whole open file by reading it from the start.
pub fn compute_etag(file: BorrowedFd<'_>) -> StoreResult<String> {
    let mut hasher = Md5::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    loop {
        let n = match rustix::io::pread(file, &mut buf, offset) {
            Ok(0) => break,
            Ok(n) => n,
            Err(Errno::INTR) => continue,
            Err(err) => return Err(err.into()),
        };
        hasher.update(&buf[..n]);
        offset += n as u64;
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use isthmus_store::ObjectMeta;
    use std::os::fd::AsFd;

    #[test]
    fn record_round_trips_through_json() {
        let mut meta = ObjectMeta {
            content_type: Some("text/plain".into()),
            expires: Some("Thu, 01 Dec 1994 16:00:00 GMT".into()),
            ..ObjectMeta::default()
        };
        meta.user.insert("experiment".into(), "run-42 ü".into());
        let record = MetaRecord {
            etag: EMPTY_ETAG.into(),
            checksum: None,
            parts: vec![(5 << 20, 3), (17, 1)],
            identity: FileIdentity { ino: 7, size: 0, mtime_ns: 1_700_000_000_123_456_789 },
            meta,
            version_id: Some("00000000000000010000abcd".into()),
            acl_seal: None,
        };
        let bytes = serde_json::to_vec(&record).unwrap();
        let back: MetaRecord = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(back, record);
    }

    #[test]
    fn sidecar_paths_are_hashed_and_distinct() {
        let a = sidecar_path("a/b");
        let b = sidecar_path("a/b/");
        assert_ne!(a, b);
        assert!(a.starts_with(".isthmus/meta/"));
        assert!(!a.contains("a/b"));
    }

    #[test]
    fn identity_etags_are_stable_and_change_with_the_file() {
        let id = FileIdentity { ino: 12, size: 10 << 30, mtime_ns: 1_700_000_000_000_000_001 };
        let etag = identity_etag(&id);
        assert_eq!(etag, identity_etag(&id));
        assert!(etag.ends_with("-1") && etag.len() == 34, "{etag}");
        for other in [
            FileIdentity { ino: 13, ..id },
            FileIdentity { size: id.size + 1, ..id },
            FileIdentity { mtime_ns: id.mtime_ns + 1, ..id },
        ] {
            assert_ne!(identity_etag(&other), etag);
        }
    }

    #[test]
    fn compute_etag_is_md5_of_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello world").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        assert_eq!(compute_etag(file.as_fd()).unwrap(), "5eb63bbbe01eeed093cb22bb8f5acdc3");
        std::fs::write(&path, b"").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        assert_eq!(compute_etag(file.as_fd()).unwrap(), EMPTY_ETAG);
    }
}
