//! What a backend tells its doors about a bucket (`BucketFacts`): when a write counts as done
//! (`Durability`), where object metadata is kept (`MetadataMode`), which kind of file system
//! holds the data (`FileSystemKind`), who judges access (`AccessJudge`) and, behind pools, the
//! pool holding it.

use serde::{Deserialize, Serialize};

/// What a backend says about one of its buckets: facts doors use to decide how to call it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketFacts {
    /// The file system the bucket's data lives on (decides inline calls or the blocking pool).
    pub filesystem: FileSystemKind,
    /// Where object metadata is kept in this bucket.
    pub metadata: MetadataMode,
    pub durability: Durability,
    /// Who can judge object access when requests run with their users' Unix identities
    /// (`identity = "posix"`).
    pub access: AccessJudge,
    /// The pool holding the bucket (GetBucketLocation's LocationConstraint), filled by the pool
    /// router; `None` from a backend on its own.
    pub pool: Option<String>,
}

/// Who can judge a bucket's object access when requests run with Unix identities: the backend
/// says, per bucket, since a router holds buckets of several backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AccessJudge {
    /// The bucket's objects are files the request's own calls open as its user: the kernel's
    /// permission checks (modes, groups, ACLs) decide, as for the user's shell.
    Kernel,
    /// The backend's files are the gateway's own (erasure-coded shards and records): the
    /// kernel never refuses anyone, so the authorization layer applies the S3 rules (owner,
    /// grants, ACLs, policies) as it does without Unix identities.
    Gateway,
}

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

/// When a write counts as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Data, metadata and the directory entry are fsynced before a write is acknowledged.
    #[default]
    Strict,
    /// Acknowledged once the file system has the data in its cache; the file system decides
    /// when it reaches stable storage. Atomicity (old or new object, never torn) still holds.
    Relaxed,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "strict" => Ok(Self::Strict),
            "relaxed" => Ok(Self::Relaxed),
            other => Err(format!("unknown durability {other:?}: use strict or relaxed")),
        }
    }
}

impl std::str::FromStr for MetadataMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "xattr" => Ok(Self::Xattr),
            "sidecar" => Ok(Self::Sidecar),
            other => Err(format!("unknown metadata mode {other:?}: use auto, xattr or sidecar")),
        }
    }
}

/// Where a bucket lives: on a local file system, whose metadata calls answer in microseconds
/// from the page cache, or on a shared (network or parallel) one, where a call can wait on a
/// server. Doors use it to decide whether to run short calls inline. On the wire (the local
/// door) it is its name, `local:` or `shared:` first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileSystemKind {
    Local(&'static str),
    Shared(&'static str),
}

/// The file systems known by their magic number (`statfs`'s `f_type`).
const KNOWN: [(&[u64], FileSystemKind); 15] = [
    (&[0xEF53], FileSystemKind::Local("ext4")),
    (&[0x5846_5342], FileSystemKind::Local("xfs")),
    (&[0x9123_683E], FileSystemKind::Local("btrfs")),
    (&[0x0102_1994], FileSystemKind::Local("tmpfs")),
    (&[0x2FC1_2FC1], FileSystemKind::Local("zfs")),
    (&[0x794C_7630], FileSystemKind::Local("overlayfs")),
    (&[0xF2F5_2010], FileSystemKind::Local("f2fs")),
    (&[0x0BD0_0BD0], FileSystemKind::Shared("lustre")),
    (&[0x4750_4653], FileSystemKind::Shared("gpfs")),
    (&[0x00C3_6400], FileSystemKind::Shared("cephfs")),
    (&[0x6969], FileSystemKind::Shared("nfs")),
    (&[0xFE53_4D42, 0xFF53_4D42, 0x517B], FileSystemKind::Shared("smb")),
    (&[0x1983_0326], FileSystemKind::Shared("beegfs")),
    (&[0x2003_0528], FileSystemKind::Shared("orangefs")),
    (&[0x6573_5546], FileSystemKind::Shared("fuse")),
];

/// Kinds named by backends rather than by a magic number.
const NAMED: [FileSystemKind; 2] = [FileSystemKind::Shared("erasure"), FileSystemKind::Shared("unknown")];

impl FileSystemKind {
    pub fn from_magic(magic: u64) -> Self {
        KNOWN.iter().find(|(magics, _)| magics.contains(&magic)).map_or(Self::Shared("unknown"), |(_, kind)| *kind)
    }

    /// The kind of file system an open file or directory is on.
    pub fn of(fd: std::os::fd::BorrowedFd<'_>) -> Self {
        match rustix::fs::fstatfs(fd) {
            Ok(stat) => Self::from_magic(stat.f_type as u64),
            Err(_) => Self::Shared("unknown"),
        }
    }

    pub fn is_local(self) -> bool {
        matches!(self, Self::Local(_))
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Local(name) | Self::Shared(name) => name,
        }
    }

    /// `local:NAME` or `shared:NAME`, as it crosses the wire.
    fn wire_name(self) -> String {
        format!("{}:{}", if self.is_local() { "local" } else { "shared" }, self.name())
    }
}

impl Serialize for FileSystemKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.wire_name())
    }
}

/// A kind this build does not know (a newer gateway's) reads as a shared file system of
/// unknown kind, the careful assumption.
impl<'de> Deserialize<'de> for FileSystemKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        let kinds = KNOWN.iter().map(|(_, kind)| *kind).chain(NAMED);
        Ok(kinds.into_iter().find(|kind| kind.wire_name() == name).unwrap_or(Self::Shared("unknown")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_system_kinds_cross_the_wire_by_name() {
        for kind in KNOWN.iter().map(|(_, kind)| *kind).chain(NAMED) {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(serde_json::from_str::<FileSystemKind>(&json).unwrap(), kind, "{json}");
        }
        assert_eq!(FileSystemKind::from_magic(0x517B), FileSystemKind::Shared("smb"));
        assert_eq!(FileSystemKind::from_magic(1), FileSystemKind::Shared("unknown"));
        let newer: FileSystemKind = serde_json::from_str("\"local:bcachefs\"").unwrap();
        assert_eq!(newer, FileSystemKind::Shared("unknown"));
    }
}
