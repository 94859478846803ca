//! Descriptions of unchanged objects kept in memory: what HEAD and GET answer about an object
//! this store wrote or described, reused while the file is provably the same one in the same
//! state, so a HEAD costs one `statx` and a GET skips reading and parsing the metadata record.
//!
//! "The same" is the file's stamp: device, inode, size, mtime and ctime. A rename over the key
//! (every PUT, copy and completed upload) makes another inode; a POSIX program writing the file
//! moves size or mtime; a metadata change (tags, ACL: the record's extended attribute) moves
//! ctime. Linux 6.13 and later give a fine-grained ctime to a change that follows a stat of the
//! file, so no change after a stamp was taken can leave it equal; on older kernels and network
//! file systems a change within one timestamp tick can, exactly as for the record's own
//! validation (`FileIdentity`). Only the xattr metadata mode uses it: a sidecar record changes
//! without touching the object's file.

use std::sync::Arc;

use isthmus_store::ObjectInfo;

/// What identifies a file's content and metadata at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    dev: u64,
    ino: u64,
    size: i64,
    mtime: (i64, u64),
    ctime: (i64, u64),
}

impl Stamp {
    pub(crate) fn of(stat: &rustix::fs::Stat) -> Self {
        Self {
            dev: stat.st_dev,
            ino: stat.st_ino,
            size: stat.st_size,
            mtime: (stat.st_mtime, stat.st_mtime_nsec),
            ctime: (stat.st_ctime, stat.st_ctime_nsec),
        }
    }

    pub(crate) fn of_statx(stat: &rustix::fs::Statx) -> Self {
        Self {
            dev: rustix::fs::makedev(stat.stx_dev_major, stat.stx_dev_minor),
            ino: stat.stx_ino,
            size: stat.stx_size as i64,
            mtime: (stat.stx_mtime.tv_sec, u64::from(stat.stx_mtime.tv_nsec)),
            ctime: (stat.stx_ctime.tv_sec, u64::from(stat.stx_ctime.tv_nsec)),
        }
    }
}

#[derive(Clone)]
struct Kept {
    stamp: Stamp,
    info: Arc<ObjectInfo>,
}

/// A kept description's bucket and key.
#[derive(Hash, PartialEq, Eq)]
struct KeptKey {
    bucket: Arc<str>,
    key: Box<str>,
}

/// A lookup's bucket and key, borrowed: a HEAD allocates nothing to find its description.
/// Hashes as `KeptKey` does (each field as its `str`).
#[derive(Hash)]
struct KeyRef<'a> {
    bucket: &'a str,
    key: &'a str,
}

impl quick_cache::Equivalent<KeptKey> for KeyRef<'_> {
    fn equivalent(&self, kept: &KeptKey) -> bool {
        *kept.bucket == *self.bucket && *kept.key == *self.key
    }
}

/// Object descriptions by bucket and key, each with the stamp it holds for; bounded.
pub(crate) struct HeadCache {
    kept: quick_cache::sync::Cache<KeptKey, Kept>,
}

impl HeadCache {
    pub(crate) fn new(entries: u64) -> Self {
        Self { kept: quick_cache::sync::Cache::new(entries.max(1) as usize) }
    }

    /// The description kept for `key` of `bucket` if the file still has `stamp`.
    pub(crate) fn get(&self, bucket: &Arc<str>, key: &str, stamp: Stamp) -> Option<ObjectInfo> {
        let kept = self.kept.get(&KeyRef { bucket, key })?;
        (kept.stamp == stamp).then(|| (*kept.info).clone())
    }

    /// Keeps `info` as the description of the file that had `stamp` before `info` was read.
    pub(crate) fn remember(&self, bucket: &Arc<str>, key: &str, stamp: Stamp, info: &ObjectInfo) {
        let kept_key = KeptKey { bucket: bucket.clone(), key: key.into() };
        self.kept.insert(kept_key, Kept { stamp, info: Arc::new(info.clone()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_lookup_finds_what_was_kept_and_only_with_its_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"x").unwrap();
        let stat = rustix::fs::stat(&path).unwrap();
        let cache = HeadCache::new(10);
        let bucket: Arc<str> = "bkt".into();
        let info = ObjectInfo {
            key: "k".into(),
            size: 1,
            last_modified: std::time::SystemTime::UNIX_EPOCH,
            etag: "e".into(),
            meta: Default::default(),
            checksum: None,
            parts: Vec::new(),
            version_id: None,
        };
        cache.remember(&bucket, "k", Stamp::of(&stat), &info);
        assert_eq!(cache.get(&bucket, "k", Stamp::of(&stat)), Some(info));
        assert_eq!(cache.get(&bucket, "other", Stamp::of(&stat)), None);
        let moved = Stamp { size: 2, ..Stamp::of(&stat) };
        assert_eq!(cache.get(&bucket, "k", moved), None);
    }
}
