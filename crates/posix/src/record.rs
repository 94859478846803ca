//! The metadata record kept with each object: its ETag, the file identity (inode, size,
//! mtime) the ETag was computed for, and its headers. How it is stored is `meta` (where) and
//! `meta_codec` (in which form).

use serde::{Deserialize, Serialize};

use isthmus_store::ObjectMeta;

/// The ETag of an empty object (MD5 of nothing).
pub const EMPTY_ETAG: &str = "d41d8cd98f00b204e9800998ecf8427e";

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
    pub checksum: Option<isthmus_store::checksum::Checksum>,
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
    /// The gateway's seal over the object's ACL and its file (`MetaStore::save`): an ACL
    /// without a valid one is not believed. Set by `save` alone; never set by a loaded record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl_seal: Option<String>,
}
