//! Listing multipart uploads and their parts on a POSIX store, and repairing what a crash
//! left in the uploads area (see `multipart.rs` for the layout).

use std::os::fd::{AsFd, BorrowedFd};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::AtFlags;
use rustix::io::Errno;

use super::completed;
use super::multipart::{UPLOADS_DIR, load_record, read_parts, remove_tree, valid_upload_id};
use super::{PosixStore, modified};
use crate::resolve::open_dir_beneath;
use crate::writer_names::left_by_dead_writer;
use isthmus_store::error::StoreResult;
use isthmus_store::multipart::{ListUploadsRequest, PartInfo, PartsPage, UploadInfo, UploadsPage};

impl PosixStore {
    pub(crate) fn parts_of(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        after_part: u32,
        max_parts: usize,
    ) -> StoreResult<PartsPage> {
        let bucket_fd = self.bucket_fd(bucket)?.fd;
        let (dir, record) = self.open_upload(bucket_fd.as_fd(), key, upload_id)?;
        let parts = read_parts(dir.as_fd(), record.checksum_algorithm)?.into_values().map(|(info, _)| info);
        let page = page_parts(parts, after_part, max_parts, record.checksum_algorithm, record.checksum_type);
        Ok(PartsPage { initiator: record.initiator, ..page })
    }

    pub(crate) fn uploads_of(&self, bucket: &str, request: &ListUploadsRequest) -> StoreResult<UploadsPage> {
        let bucket_fd = self.bucket_fd(bucket)?.fd;
        let uploads_fd = match open_dir_beneath(bucket_fd.as_fd(), UPLOADS_DIR) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(UploadsPage::default()),
            Err(err) => return Err(err.into()),
        };
        let mut uploads = Vec::new();
        for entry in rustix::fs::Dir::read_from(&uploads_fd)? {
            let entry = entry?;
            let Ok(id) = entry.file_name().to_str() else {
                continue;
            };
            if !valid_upload_id(id) {
                continue;
            }
            let Ok(dir) = open_dir_beneath(uploads_fd.as_fd(), id) else {
                continue;
            };
            let Ok(record) = load_record(dir.as_fd()) else {
                continue;
            };
            if !record.key.starts_with(&request.prefix) {
                continue;
            }
            let initiated = UNIX_EPOCH + std::time::Duration::from_nanos(record.initiated_unix_ns as u64);
            uploads.push(UploadInfo {
                key: record.key,
                upload_id: id.to_string(),
                initiated,
                checksum_algorithm: record.checksum_algorithm,
                checksum_type: record.checksum_type,
                initiator: record.initiator,
            });
        }
        Ok(page_uploads(uploads, request))
    }

    /// Repairs what a crash during Create, Complete or Abort left: a half-made upload (`new.`)
    /// or an aborted one (`aborted.`) is removed; a claimed upload (`claimed.`) is given back
    /// under its id, so the client's retried Complete finds it (re-assembling is harmless if the
    /// object was already installed). Only leftovers of dead writers on this host or older than
    /// `older_than` are touched.
    pub(crate) fn clean_claimed_uploads(&self, bucket: BorrowedFd<'_>, older_than: SystemTime) -> usize {
        let Ok(uploads) = open_dir_beneath(bucket, UPLOADS_DIR) else {
            return 0;
        };
        let forgotten = completed::forget_expired(uploads.as_fd());
        let Ok(entries) = rustix::fs::Dir::read_from(&uploads) else {
            return forgotten;
        };
        let names: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().ok().map(str::to_string))
            .filter(|n| n.starts_with("claimed.") || n.starts_with("aborted.") || n.starts_with("new."))
            .collect();
        let mut repaired = 0;
        for name in names {
            let old = rustix::fs::statat(&uploads, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|s| modified(&s) < older_than);
            if !old && !left_by_dead_writer(&name) {
                continue;
            }
            // An upload recorded as completed is not given back: its object was installed and
            // its parts may be half removed (a retried Complete finds the record).
            let restored = name
                .strip_prefix("claimed.")
                .and_then(|rest| rest.split('.').next())
                .filter(|id| valid_upload_id(id) && !completed::was_completed(uploads.as_fd(), id))
                .is_some_and(|id| {
                    super::staging::rename_noreplace(uploads.as_fd(), name.as_str(), uploads.as_fd(), id).is_ok()
                });
            if restored || remove_tree(uploads.as_fd(), &name).is_ok() {
                repaired += 1;
            }
        }
        repaired + forgotten
    }
}

/// One ListMultipartUploads page of `uploads` (in any order): sorted by key, then initiation
/// time, after the request's markers. Shared by every backend.
pub fn page_uploads(mut uploads: Vec<UploadInfo>, request: &ListUploadsRequest) -> UploadsPage {
    uploads.sort_by(|a, b| {
        (a.key.as_bytes(), a.initiated, &a.upload_id).cmp(&(b.key.as_bytes(), b.initiated, &b.upload_id))
    });
    if let Some(marker) = &request.key_marker {
        // After the key marker; with an upload-id marker, after that upload of the key.
        let after_upload = request
            .upload_id_marker
            .as_deref()
            .and_then(|id| uploads.iter().position(|u| u.key == *marker && u.upload_id == id));
        let start = match after_upload {
            Some(i) => i + 1,
            None => uploads.partition_point(|u| u.key.as_bytes() <= marker.as_bytes()),
        };
        uploads.drain(..start);
    }
    let is_truncated = uploads.len() > request.max_uploads;
    uploads.truncate(request.max_uploads);
    let (next_key_marker, next_upload_id_marker) = match (is_truncated, uploads.last()) {
        (true, Some(last)) => (Some(last.key.clone()), Some(last.upload_id.clone())),
        _ => (None, None),
    };
    UploadsPage { uploads, is_truncated, next_key_marker, next_upload_id_marker }
}

/// One ListParts page of `parts` (in part-number order) after `after_part`.
pub fn page_parts(
    parts: impl Iterator<Item = PartInfo>,
    after_part: u32,
    max_parts: usize,
    checksum_algorithm: Option<isthmus_store::ChecksumAlgorithm>,
    checksum_type: isthmus_store::ChecksumType,
) -> PartsPage {
    let mut parts: Vec<PartInfo> = parts.filter(|p| p.part_number > after_part).collect();
    let is_truncated = parts.len() > max_parts;
    parts.truncate(max_parts);
    let next_part_number_marker = if is_truncated { parts.last().map(|p| p.part_number) } else { None };
    PartsPage { parts, is_truncated, next_part_number_marker, checksum_algorithm, checksum_type, initiator: None }
}
