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

/// Object descriptions by bucket and key, each with the stamp it holds for; bounded.
pub(crate) struct HeadCache {
    kept: quick_cache::sync::Cache<(Arc<str>, String), Kept>,
}

impl HeadCache {
    pub(crate) fn new(entries: u64) -> Self {
        Self { kept: quick_cache::sync::Cache::new(entries.max(1) as usize) }
    }

    /// The description kept for `key` of `bucket` if the file still has `stamp`.
    pub(crate) fn get(&self, bucket: &Arc<str>, key: &str, stamp: Stamp) -> Option<ObjectInfo> {
        let kept = self.kept.get(&(bucket.clone(), key.to_string()))?;
        (kept.stamp == stamp).then(|| (*kept.info).clone())
    }

    /// Keeps `info` as the description of the file that had `stamp` before `info` was read.
    pub(crate) fn remember(&self, bucket: &Arc<str>, key: &str, stamp: Stamp, info: &ObjectInfo) {
        self.kept.insert((bucket.clone(), key.to_string()), Kept { stamp, info: Arc::new(info.clone()) });
    }
}
