//! Files written outside the gateway: the changes a user made with plain POSIX calls in a
//! bucket directory, seen by a kernel watcher (inotify, local file systems), by an incremental
//! scan (shared file systems whose other nodes' writes the kernel does not see) or by a file
//! system's change log, and handed to a sink as `Change`s for the gateway to announce.
//!
//! What is a key here is what the posix backend serves: a regular file beneath a bucket
//! directory (a top-level directory of the data root with a valid bucket name), named by its
//! `/`-separated UTF-8 path relative to the bucket, with no internal segment (`.isthmus`,
//! `.isthmus.*`). Symlinks, other non-regular files, names that are not UTF-8 and keys longer
//! than `MAX_KEY_LEN` are never announced; nothing deeper than `MAX_DEPTH` directories is
//! watched or scanned.

pub mod changelog;
mod index;
mod kernel;
mod scan;
mod tree;

use std::ffi::OsStr;
use std::sync::Arc;

use isthmus_store::key::{MAX_KEY_LEN, is_internal_name, validate_bucket_name};

pub use kernel::{Created, Known, WatchOptions, WatchStats, Watcher};
pub use scan::{ScanError, ScanLoop, ScanStats, Scanner};

/// What happened to a key, for the gateway to announce (after it has looked at the object).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Change {
    /// A file was closed after a write, renamed into place or appeared with a new directory.
    Written { bucket: String, key: String },
    /// A file was unlinked or renamed away.
    Removed { bucket: String, key: String },
}

impl Change {
    pub fn bucket(&self) -> &str {
        match self {
            Change::Written { bucket, .. } | Change::Removed { bucket, .. } => bucket,
        }
    }

    pub fn key(&self) -> &str {
        match self {
            Change::Written { key, .. } | Change::Removed { key, .. } => key,
        }
    }
}

/// Where changes go; called on the watcher's or scanner's own thread, so it must not block
/// for long (the gateway's sink enqueues).
pub type Sink = Arc<dyn Fn(Change) + Send + Sync>;

/// Which buckets have notification rules (asked again whenever a bucket directory appears).
pub type BucketFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// The deepest directory (counted from the bucket directory, which is depth 0) that is
/// watched or scanned; deeper trees are skipped with a debug log.
pub const MAX_DEPTH: usize = 256;

/// A directory entry's name as a key segment: `None` for internal names, `.`/`..` and names
/// that are not UTF-8 (keys are UTF-8; such files are skipped with a debug log).
pub(crate) fn segment(name: &OsStr) -> Option<&str> {
    let Some(text) = name.to_str() else {
        tracing::debug!(name = ?name, "skipping a file whose name is not UTF-8 (keys are UTF-8)");
        return None;
    };
    (!text.is_empty() && text != "." && text != ".." && !is_internal_name(text)).then_some(text)
}

/// The key of `name` in the directory `dir` (relative to the bucket, `""` at its top), if it
/// is not longer than S3 allows.
pub(crate) fn child_key(dir: &str, name: &str) -> Option<String> {
    let key = if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") };
    if key.len() > MAX_KEY_LEN {
        tracing::debug!(key = %&key[..key.floor_char_boundary(64)], "skipping a key longer than S3 allows");
        return None;
    }
    Some(key)
}

/// Whether a top-level directory name of the data root can be a bucket.
pub(crate) fn is_bucket_name(name: &str) -> bool {
    !is_internal_name(name) && validate_bucket_name(name).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn names_that_are_not_keys_are_refused() {
        assert_eq!(segment(OsStr::new("a\nb")), Some("a\nb"));
        for bad in [".isthmus", ".isthmus.tmp.x", ".", ".."] {
            assert_eq!(segment(OsStr::new(bad)), None, "{bad}");
        }
        assert_eq!(segment(OsStr::from_bytes(b"\xff\xfe")), None);
        assert_eq!(child_key("", "f").as_deref(), Some("f"));
        assert_eq!(child_key("a/b", "f").as_deref(), Some("a/b/f"));
        assert_eq!(child_key(&"d".repeat(1020), "long"), None);
        assert!(is_bucket_name("data") && !is_bucket_name(".isthmus") && !is_bucket_name("Data"));
    }
}
