//! Completed multipart uploads are remembered for a day (`COMPLETED_UPLOAD_RETENTION`), as
//! `BUCKET/.isthmus/uploads/done.<upload id>` holding the key and ETag: a Complete retried after
//! its response was lost then gets the completed object, as S3 answers, not NoSuchUpload.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use serde::{Deserialize, Serialize};

use super::modified;
use super::staging::StagedFile;

/// How long a completed upload's id still answers a retried Complete.
pub const COMPLETED_UPLOAD_RETENTION: Duration = Duration::from_secs(24 * 3600);

const PREFIX: &str = "done.";

#[derive(Serialize, Deserialize)]
struct CompletedRecord {
    key: String,
    etag: String,
}

/// Records that `upload_id` completed `key` with `etag`. Best effort: without it a retry gets
/// NoSuchUpload, as before.
pub(super) fn remember(uploads: BorrowedFd<'_>, upload_id: &str, key: &str, etag: &str) {
    let record = serde_json::to_vec(&CompletedRecord { key: key.to_string(), etag: etag.to_string() })
        .expect("record serializes");
    let written = (|| -> isthmus_store::StoreResult<()> {
        let mut staged = StagedFile::create(rustix::io::fcntl_dupfd_cloexec(uploads, 0)?)?;
        staged.write_all(&record)?;
        staged.rename_into(uploads, &format!("{PREFIX}{upload_id}"), RenameFlags::empty())?;
        Ok(())
    })();
    if let Err(err) = written {
        tracing::warn!(upload_id, error = %err, "could not remember a completed upload for retries");
    }
}

/// The ETag `upload_id` completed `key` with, if it did so less than a day ago.
pub(super) fn recall(uploads: BorrowedFd<'_>, upload_id: &str, key: &str) -> Option<String> {
    let fd = rustix::fs::openat(
        uploads,
        format!("{PREFIX}{upload_id}").as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )
    .ok()?;
    let stat = rustix::fs::fstat(&fd).ok()?;
    if SystemTime::now().duration_since(modified(&stat)).unwrap_or_default() > COMPLETED_UPLOAD_RETENTION {
        return None;
    }
    let mut text = Vec::new();
    std::fs::File::from(fd).take(64 << 10).read_to_end(&mut text).ok()?;
    let record: CompletedRecord = serde_json::from_slice(&text).ok()?;
    (record.key == key).then_some(record.etag)
}

/// Whether `upload_id` has a completion record (of any age).
pub(super) fn was_completed(uploads: BorrowedFd<'_>, upload_id: &str) -> bool {
    rustix::fs::statat(uploads, format!("{PREFIX}{upload_id}").as_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok()
}

/// Removes the records of uploads completed more than a day ago; returns how many.
pub(super) fn forget_expired(uploads: BorrowedFd<'_>) -> usize {
    let Ok(entries) = rustix::fs::Dir::read_from(uploads.as_fd()) else { return 0 };
    let now = SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().to_str() else { continue };
        if !name.starts_with(PREFIX) {
            continue;
        }
        let expired = rustix::fs::statat(uploads, name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|s| now.duration_since(modified(&s)).unwrap_or_default() > COMPLETED_UPLOAD_RETENTION);
        if expired && rustix::fs::unlinkat(uploads, name, AtFlags::empty()).is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_are_recalled_for_their_key_for_a_day_then_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let uploads = rustix::fs::open(dir.path(), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        remember(uploads.as_fd(), "abc", "k", "etag-2");
        assert_eq!(recall(uploads.as_fd(), "abc", "k").as_deref(), Some("etag-2"));
        assert_eq!(recall(uploads.as_fd(), "abc", "other-key"), None);
        assert_eq!(recall(uploads.as_fd(), "zzz", "k"), None);
        assert_eq!(forget_expired(uploads.as_fd()), 0);
        let two_days_ago = SystemTime::now() - 2 * COMPLETED_UPLOAD_RETENTION;
        std::fs::File::open(dir.path().join("done.abc")).unwrap().set_modified(two_days_ago).unwrap();
        assert_eq!(recall(uploads.as_fd(), "abc", "k"), None);
        assert_eq!(forget_expired(uploads.as_fd()), 1);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
