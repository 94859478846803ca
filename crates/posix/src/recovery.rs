//! Crash recovery: the cleaning a gateway does at start and every hour, of what dead writers
//! and interrupted bucket deletions left (which names are a dead writer's: `writer_names`).

use std::os::fd::AsFd;
use std::time::{Duration, SystemTime};

use rustix::fs::AtFlags;

use super::{PosixStore, TMP_DIR, TRASH_DIR, modified};
use crate::resolve::open_dir_beneath;
use crate::writer_names::left_by_dead_writer;
use isthmus_store::RequestContext;
use isthmus_store::Store;
use isthmus_store::error::StoreResult;

impl PosixStore {
    /// Removes temporary files older than `max_age` left in buckets by crashed writers, and
    /// what deleted buckets left in the root's trash. Returns how many were removed. Other
    /// gateways on the same file system may have writes in flight, so only files older than any
    /// upload could take are touched; leftovers of writers of this host and pid namespace that
    /// no longer run go at once, whatever their age.
    pub fn clean_stale_temporaries(&self, max_age: Duration) -> StoreResult<usize> {
        let mut removed = self.empty_trash();
        let now = SystemTime::now();
        for bucket in self.list_buckets(&RequestContext::process())? {
            let Ok(bucket_fd) = self.bucket_fd(&bucket.name) else {
                continue;
            };
            removed += self.clean_claimed_uploads(bucket_fd.fd.as_fd(), now - max_age);
            let Ok(tmp) = open_dir_beneath(bucket_fd.fd.as_fd(), TMP_DIR) else {
                continue;
            };
            let names: Vec<_> = rustix::fs::Dir::read_from(&tmp)?
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_owned())
                .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
                .collect();
            for name in names {
                let Ok(stat) = rustix::fs::statat(&tmp, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW) else {
                    continue;
                };
                let age = now.duration_since(modified(&stat)).unwrap_or_default();
                let dead = name.to_str().is_ok_and(left_by_dead_writer);
                if (dead || age >= max_age) && rustix::fs::unlinkat(&tmp, name.as_c_str(), AtFlags::empty()).is_ok() {
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    /// Removes what deleted buckets left in the root's trash (a delete interrupted by a crash).
    fn empty_trash(&self) -> usize {
        // Through the state directory's descriptor, never a path a user could have swapped.
        let Ok(trash) = open_dir_beneath(self.state.fd(), TRASH_DIR) else { return 0 };
        let trash = std::path::PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&trash)));
        let Ok(entries) = std::fs::read_dir(&trash) else { return 0 };
        let mut removed = 0;
        for entry in entries.flatten() {
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => removed += 1,
                Err(err) => tracing::warn!(path = %entry.path().display(), error = %err, "could not empty the trash"),
            }
        }
        removed
    }
}
