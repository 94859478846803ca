//! Object metadata: the record kept with each object (ETag, HTTP headers, user metadata) and the
//! file identity (inode, size, mtime) it was computed for. It lives in one `user.` extended
//! attribute, or in a hashed sidecar file under `.isthmus/meta` where xattrs are unavailable.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};

use md5::{Digest, Md5};
use rustix::fs::{Mode, OFlags, XattrFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use crate::error::StoreResult;
use crate::key::INTERNAL_DIR;

/// The extended attribute holding an object's metadata record.
pub const XATTR_NAME: &str = "user.isthmus";

/// The ETag of an empty object (MD5 of nothing).
pub const EMPTY_ETAG: &str = "d41d8cd98f00b204e9800998ecf8427e";

/// Where metadata records are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum MetadataMode {
    /// Extended attributes when the file system supports them, sidecar files otherwise.
    #[default]
    Auto,
    /// Always an extended attribute (`user.isthmus`) on the object's file.
    Xattr,
    /// Always a sidecar file under the bucket's `.isthmus/meta` directory.
    Sidecar,
}

/// HTTP headers and user metadata stored with an object, returned unchanged on GET and HEAD.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_disposition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<String>,
    /// The `Expires` header as the client sent it (an HTTP date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// `x-amz-meta-*` pairs, names without the prefix, lower case.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user: BTreeMap<String, String>,
    /// Object tags (set with x-amz-tagging or PutObjectTagging).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The object's canned ACL (x-amz-acl, PutObjectAcl); none is private.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<crate::CannedAcl>,
    /// Grants of the object's ACL to users (PutObjectAcl).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<crate::acl::Grant>,
}

impl ObjectMeta {
    /// The object's ACL.
    pub fn object_acl(&self) -> crate::Acl {
        crate::Acl { canned: self.acl.unwrap_or_default(), grants: self.grants.clone() }
    }
}

impl ObjectMeta {
    /// Checks what a write stores against S3's limits (tags, user metadata size).
    pub fn validate(&self) -> crate::StoreResult<()> {
        validate_tags(&self.tags)?;
        validate_user_metadata(&self.user)
    }
}

/// S3's limit on user metadata: the `x-amz-meta-*` names and values, in bytes.
pub const MAX_USER_METADATA: usize = 2048;

/// Checks the user metadata size against S3's limit.
pub fn validate_user_metadata(user: &BTreeMap<String, String>) -> crate::StoreResult<()> {
    let size: usize = user.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_USER_METADATA {
        return Err(crate::StoreError::MetadataTooLarge(size));
    }
    Ok(())
}

/// S3's limits on object tags.
pub const MAX_TAGS: usize = 10;

/// Checks tags against S3's limits: at most 10, keys up to 128 and values up to 256 characters.
pub fn validate_tags(tags: &BTreeMap<String, String>) -> crate::StoreResult<()> {
    validate_tag_set(tags, MAX_TAGS, "Object")
}

/// S3's limit on the tags of a bucket.
pub const MAX_BUCKET_TAGS: usize = 50;

/// Checks a bucket's tags: at most 50, keys and values as for objects.
pub fn validate_bucket_tags(tags: &BTreeMap<String, String>) -> crate::StoreResult<()> {
    validate_tag_set(tags, MAX_BUCKET_TAGS, "Bucket")
}

fn validate_tag_set(tags: &BTreeMap<String, String>, max: usize, what: &str) -> crate::StoreResult<()> {
    let invalid = |why: String| Err(crate::StoreError::InvalidTag(why));
    if tags.len() > max {
        return invalid(format!("{what} tags cannot be greater than {max}"));
    }
    for (k, v) in tags {
        if k.is_empty() || k.chars().count() > 128 {
            return invalid("The TagKey you have provided is invalid (1 to 128 characters)".into());
        }
        if v.chars().count() > 256 {
            return invalid("The TagValue you have provided is invalid (up to 256 characters)".into());
        }
    }
    Ok(())
}

/// What makes a stored ETag trustworthy: the file it was computed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileIdentity {
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
}

impl FileIdentity {
    pub fn of(stat: &rustix::fs::Stat) -> Self {
        Self {
            ino: stat.st_ino,
            size: stat.st_size as u64,
            mtime_ns: i128::from(stat.st_mtime) * 1_000_000_000 + i128::from(stat.st_mtime_nsec),
        }
    }
}

/// The record stored per object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetaRecord {
    pub etag: String,
    pub identity: FileIdentity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<crate::checksum::Checksum>,
    /// For objects assembled from a multipart upload: part sizes, run-length encoded as
    /// (size, count), so GET and HEAD can serve `partNumber`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<(u64, u32)>,
    #[serde(default)]
    pub meta: ObjectMeta,
    /// The version id given when the object was written in a versioning-enabled bucket; none
    /// is the null version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_id: Option<String>,
}

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
}

impl MetaStore<'_> {
    /// Loads the record of the object open as `file`, whose key is `key`.
    pub fn load(&self, file: BorrowedFd<'_>, key: &str) -> Option<MetaRecord> {
        let bytes = match self.mode {
            MetadataMode::Sidecar => self.read_sidecar(key)?,
            MetadataMode::Xattr => read_xattr(file)?,
            MetadataMode::Auto => read_xattr(file).or_else(|| self.read_sidecar(key))?,
        };
        serde_json::from_slice(&bytes).ok()
    }

    /// Stores `record` for the object open as `file`. In auto mode a file system without
    /// xattr support falls back to the sidecar.
    pub fn save(&self, file: BorrowedFd<'_>, key: &str, record: &MetaRecord) -> StoreResult<()> {
        let bytes = serde_json::to_vec(record).expect("metadata serializes");
        match self.mode {
            MetadataMode::Sidecar => self.write_sidecar(key, &bytes),
            MetadataMode::Xattr => Ok(rustix::fs::fsetxattr(file, XATTR_NAME, &bytes, XattrFlags::empty())?),
            MetadataMode::Auto => match rustix::fs::fsetxattr(file, XATTR_NAME, &bytes, XattrFlags::empty()) {
                Ok(()) => Ok(()),
                Err(Errno::NOTSUP | Errno::PERM | Errno::NOSPC | Errno::TOOBIG) => self.write_sidecar(key, &bytes),
                Err(err) => Err(err.into()),
            },
        }
    }

    /// Removes the sidecar of `key`, if there is one (xattrs go with their file).
    pub fn remove_sidecar(&self, key: &str) {
        if self.mode != MetadataMode::Xattr {
            crate::identity::as_gateway(|| {
                let _ = rustix::fs::unlinkat(self.bucket, sidecar_path(key), rustix::fs::AtFlags::empty());
            });
        }
    }

    // Sidecars live in the bucket's internal area, which is the gateway's: they are read and
    // written with its identity, always right after the request's own identity opened (read)
    // or wrote the object itself, so the kernel has judged the access already.
    fn read_sidecar(&self, key: &str) -> Option<Vec<u8>> {
        crate::identity::as_gateway(|| self.read_sidecar_now(key))
    }

    fn read_sidecar_now(&self, key: &str) -> Option<Vec<u8>> {
        let fd = rustix::fs::openat(
            self.bucket,
            sidecar_path(key),
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::empty(),
        )
        .ok()?;
        let mut bytes = Vec::with_capacity(512);
        std::fs::File::from(fd).read_to_end(&mut bytes).ok()?;
        Some(bytes)
    }

    fn write_sidecar(&self, key: &str, bytes: &[u8]) -> StoreResult<()> {
        crate::identity::as_gateway(|| self.write_sidecar_now(key, bytes))
    }

    fn write_sidecar_now(&self, key: &str, bytes: &[u8]) -> StoreResult<()> {
        let path = sidecar_path(key);
        let (dir, name) = path.rsplit_once('/').expect("sidecar path has directories");
        let dir_fd = crate::resolve::create_dirs_beneath(self.bucket, dir, false)?;
        let tmp = format!("{name}.{}", crate::writer_names::unique_suffix());
        let fd = rustix::fs::openat(
            &dir_fd,
            &tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        let result =
            write_all(fd.as_fd(), bytes).and_then(|()| Ok(rustix::fs::renameat(&dir_fd, &tmp, &dir_fd, name)?));
        if result.is_err() {
            let _ = rustix::fs::unlinkat(&dir_fd, &tmp, rustix::fs::AtFlags::empty());
        }
        result
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
            Err(Errno::RANGE) if buf.len() < 65536 => buf.resize(buf.len() * 4, 0),
            Err(_) => return None,
        }
    }
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
