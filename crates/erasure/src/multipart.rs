//! Multipart uploads on an erasure-coded pool. Each part is written as its own segment
//! (erasure-coded like any object) and recorded on every drive in
//! `uploads/<bucket>/<upload id>/part.NNNNN.json`; Complete makes the chosen parts' segments
//! the object's, with no byte copied, and commits the manifest like a PUT.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::drive_files::LockKind;
use super::drives::UPLOADS_DIR;
use super::manifest::{Manifest, Segment, Stored, now_ns, random_id};
use super::write::{SegmentWriter, StreamHashes};
use super::{Drive, Inner};
use isthmus_posix::multipart::{new_upload_id, valid_upload_id};
use isthmus_posix::part_rules::{check_part_number, choose_parts, part_checksum_algorithm, run_lengths};
use isthmus_posix::upload_list::{page_parts, page_uploads};
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::ObjectPath;
use isthmus_store::multipart::{CompletedPart, ListUploadsRequest, PartInfo, PartsPage, UploadInfo, UploadsPage};
use isthmus_store::{
    BoxedWriter, ChecksumAlgorithm, ChecksumType, Digests, ListPartsRequest, ObjectInfo, ObjectMeta, ObjectWrite,
    PartRequest, PutRequest,
};

const UPLOAD_FILE: &str = "upload.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
struct UploadRecord {
    key: String,
    initiated_ns: u64,
    meta: ObjectMeta,
    #[serde(default)]
    checksum_algorithm: Option<ChecksumAlgorithm>,
    #[serde(default)]
    checksum_type: ChecksumType,
    /// Who started the upload (`UploadInfo::initiator`).
    #[serde(default)]
    initiator: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PartRecord {
    info: PartInfo,
    segment: Segment,
}

/// A completed upload, remembered so a retried Complete answers the object.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct DoneRecord {
    key: String,
    etag: String,
}

fn uploads_of(drive: &Drive, bucket: &str) -> PathBuf {
    drive.path.join(UPLOADS_DIR).join(bucket)
}

fn part_file(number: u32) -> String {
    format!("part.{number:05}.json")
}

impl Inner {
    fn upload_dir(&self, drive: &Drive, bucket: &str, upload_id: &str) -> PathBuf {
        uploads_of(drive, bucket).join(upload_id)
    }

    /// The upload's record (from the first online drive that has it) and its parts.
    fn load_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> StoreResult<(UploadRecord, std::collections::BTreeMap<u32, PartRecord>)> {
        if !valid_upload_id(upload_id) {
            return Err(StoreError::NoSuchUpload);
        }
        self.existing_bucket(bucket)?;
        for drive in self.drives.iter().filter(|d| d.readable().is_some()) {
            let dir = self.upload_dir(drive, bucket, upload_id);
            let Ok(bytes) = drive.timed(|| std::fs::read(dir.join(UPLOAD_FILE))) else { continue };
            let Ok(record) = serde_json::from_slice::<UploadRecord>(&bytes) else { continue };
            if record.key != key {
                return Err(StoreError::NoSuchUpload);
            }
            let mut parts = std::collections::BTreeMap::new();
            for entry in std::fs::read_dir(&dir).map_err(|e| StoreError::io("list an upload", &dir, e))?.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str().filter(|n| n.starts_with("part.") && n.ends_with(".json")) else {
                    continue;
                };
                if let Some(part) =
                    std::fs::read(dir.join(name)).ok().and_then(|b| serde_json::from_slice::<PartRecord>(&b).ok())
                {
                    parts.insert(part.info.part_number, part);
                }
            }
            return Ok((record, parts));
        }
        Err(StoreError::NoSuchUpload)
    }

    /// Writes `bytes` as `name` in the upload's directory on every drive that has it
    /// (`create`: makes the directory first).
    fn record_in_upload(
        &self,
        bucket: &str,
        upload_id: &str,
        name: &str,
        bytes: &[u8],
        create: bool,
    ) -> StoreResult<()> {
        let mut written = 0;
        for drive in &self.drives {
            if drive.writable().is_none() {
                continue;
            }
            match drive.write_upload_file(bucket, upload_id, name, bytes, create, self.strict()) {
                Ok(()) => written += 1,
                // The drive does not have the upload (it was away when the upload began).
                Err(err) if err.kind() == std::io::ErrorKind::NotFound && !create => {}
                Err(err) => drive.failed("record an upload", &err),
            }
        }
        if written >= self.meta_write_quorum() {
            Ok(())
        } else if written == 0 && !create {
            Err(StoreError::NoSuchUpload)
        } else {
            Err(self.too_few(&written.to_string()))
        }
    }

    fn remove_upload(&self, bucket: &str, upload_id: &str) {
        for drive in &self.drives {
            let _ = std::fs::remove_dir_all(self.upload_dir(drive, bucket, upload_id));
        }
    }

    pub(crate) fn create_upload(
        &self,
        bucket: &str,
        key: &str,
        request: PutRequest,
        initiator: Option<String>,
    ) -> StoreResult<String> {
        ObjectPath::parse(key)?;
        request.meta.validate()?;
        self.existing_bucket(bucket)?;
        let upload_id = new_upload_id();
        let record = UploadRecord {
            key: key.to_string(),
            initiated_ns: now_ns(),
            meta: request.meta,
            checksum_algorithm: request.checksum_algorithm,
            checksum_type: request.checksum_type,
            initiator,
        };
        let bytes = serde_json::to_vec(&record).expect("an upload record serializes");
        if let Err(err) = self.record_in_upload(bucket, &upload_id, UPLOAD_FILE, &bytes, true) {
            self.remove_upload(bucket, &upload_id);
            return Err(err);
        }
        Ok(upload_id)
    }

    pub(crate) fn part_writer(
        self: &Arc<Self>,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
    ) -> StoreResult<BoxedWriter> {
        check_part_number(request.part_number)?;
        let (record, _) = self.load_upload(bucket, key, upload_id)?;
        let algorithm = part_checksum_algorithm(record.checksum_algorithm, request)?;
        // Parts of one upload start on different drives, so a large upload spreads its load.
        let drives = self.placement(bucket, key, u64::from(request.part_number));
        Ok(Box::new(PartWriter {
            inner: self.clone(),
            bucket: bucket.to_string(),
            key: key.to_string(),
            upload_id: upload_id.to_string(),
            part_number: request.part_number,
            segment: Some(SegmentWriter::create(self, bucket, drives)?),
            hashes: StreamHashes::new(
                StreamHashes::wants_md5(self.config.etag, request.md5_required, false),
                algorithm,
            ),
        }))
    }

    pub(crate) fn complete_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
        request: PutRequest,
    ) -> StoreResult<ObjectInfo> {
        // Of a Complete and an Abort (or two Completes) racing, one finds the upload gone.
        let _lock = self.lock(LockKind::Upload, bucket, upload_id)?;
        let (record, stored_parts) = match self.load_upload(bucket, key, upload_id) {
            Err(StoreError::NoSuchUpload) => return self.completed_before(bucket, key, upload_id),
            other => other?,
        };
        let choice = choose_parts(
            parts,
            |n| stored_parts.get(&n).map(|p| &p.info),
            (record.checksum_algorithm, record.checksum_type),
            &request.complete_checksum,
        )?;
        let segments: Vec<Segment> =
            choice.parts.iter().map(|info| stored_parts[&info.part_number].segment.clone()).collect();
        let stored = Stored {
            manifest: Manifest {
                written_ns: 0,
                write_id: random_id(),
                size: choice.parts.iter().map(|p| p.size).sum(),
                etag: choice.etag.clone(),
                meta: record.meta,
                checksum: choice.checksum,
                parts: run_lengths(choice.parts.iter().map(|p| p.size)),
                segments,
                inline: false,
                deleted: false,
            },
            inline: Vec::new(),
        };
        // The parts' shards stay if the commit fails: the client may retry the Complete.
        let info = self.commit(bucket, key, stored, &request, false)?;
        let done = serde_json::to_vec(&DoneRecord { key: key.to_string(), etag: info.etag.clone() })
            .expect("a done record serializes");
        for drive in self.drives.iter().filter(|d| d.writable().is_some()) {
            let _ = drive.write_uploads_record(bucket, &format!("{upload_id}.done"), &done);
        }
        let unused: Vec<Segment> = stored_parts
            .values()
            .filter(|p| !choice.parts.iter().any(|c| c.part_number == p.info.part_number))
            .map(|p| p.segment.clone())
            .collect();
        self.remove_upload(bucket, upload_id);
        self.discard_segments(bucket, &unused);
        Ok(info)
    }

    /// A Complete of an upload that is gone: the object it completed, while that is still the
    /// object under the key.
    fn completed_before(&self, bucket: &str, key: &str, upload_id: &str) -> StoreResult<ObjectInfo> {
        let done = self.drives.iter().filter(|d| d.readable().is_some()).find_map(|drive| {
            let bytes = std::fs::read(uploads_of(drive, bucket).join(format!("{upload_id}.done"))).ok()?;
            serde_json::from_slice::<DoneRecord>(&bytes).ok()
        });
        match (done, self.current(bucket, key)?) {
            (Some(done), Some(current)) if done.key == key && done.etag == current.manifest.etag => {
                Ok(current.info(key))
            }
            _ => Err(StoreError::NoSuchUpload),
        }
    }

    pub(crate) fn abort_upload(&self, bucket: &str, key: &str, upload_id: &str) -> StoreResult<()> {
        let _lock = self.lock(LockKind::Upload, bucket, upload_id)?;
        let (_, parts) = self.load_upload(bucket, key, upload_id)?;
        self.remove_upload(bucket, upload_id);
        let segments: Vec<Segment> = parts.into_values().map(|p| p.segment).collect();
        self.discard_segments(bucket, &segments);
        Ok(())
    }

    pub(crate) fn parts_page(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &ListPartsRequest,
    ) -> StoreResult<PartsPage> {
        let (record, parts) = self.load_upload(bucket, key, upload_id)?;
        let page = page_parts(
            parts.into_values().map(|p| p.info),
            request.after_part,
            request.max_parts,
            record.checksum_algorithm,
            record.checksum_type,
        );
        Ok(PartsPage { initiator: record.initiator, ..page })
    }

    pub(crate) fn uploads_page(&self, bucket: &str, request: &ListUploadsRequest) -> StoreResult<UploadsPage> {
        self.existing_bucket(bucket)?;
        let drive = self.drives.iter().find(|d| d.readable().is_some()).ok_or_else(|| self.too_few("none"))?;
        let dir = uploads_of(drive, bucket);
        let mut uploads = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(id) = name.to_str().filter(|n| valid_upload_id(n)) else { continue };
                let Some(record) = std::fs::read(dir.join(id).join(UPLOAD_FILE))
                    .ok()
                    .and_then(|b| serde_json::from_slice::<UploadRecord>(&b).ok())
                else {
                    continue;
                };
                if !record.key.starts_with(&request.prefix) {
                    continue;
                }
                uploads.push(UploadInfo {
                    key: record.key,
                    upload_id: id.to_string(),
                    initiated: std::time::UNIX_EPOCH + std::time::Duration::from_nanos(record.initiated_ns),
                    checksum_algorithm: record.checksum_algorithm,
                    checksum_type: record.checksum_type,
                    initiator: record.initiator,
                });
            }
        }
        Ok(page_uploads(uploads, request))
    }
}

/// One part being uploaded.
struct PartWriter {
    inner: Arc<Inner>,
    bucket: String,
    key: String,
    upload_id: String,
    part_number: u32,
    segment: Option<SegmentWriter>,
    hashes: StreamHashes,
}

impl ObjectWrite for PartWriter {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()> {
        let segment = self.segment.as_mut().expect("a part writer has its segment until commit");
        self.hashes.update_while(bytes, || segment.write(bytes))
    }

    fn digests(&self) -> Digests {
        self.hashes.digests()
    }

    fn commit(mut self: Box<Self>) -> StoreResult<ObjectInfo> {
        // Shards left out of a part (a drive fell behind) are found by reads and by `isthmus
        // heal`: the part has no key of its own to heal yet.
        let (segment, _left_behind) =
            self.segment.take().expect("a part writer has its segment until commit").finish()?;
        let digests = self.hashes.digests();
        let info = PartInfo {
            part_number: self.part_number,
            etag: self.hashes.part_etag(),
            size: segment.size,
            last_modified: std::time::SystemTime::now(),
            checksum: digests.checksum.clone(),
        };
        let record = PartRecord { info: info.clone(), segment: segment.clone() };
        let bytes = serde_json::to_vec(&record).expect("a part record serializes");
        // Installing a part and retiring the earlier upload of its number is one step under
        // the part's lock, so of two racing uploads of a number the later is the part, whole.
        let result = (|| {
            let _lock = self.inner.lock(LockKind::Upload, &self.bucket, &self.upload_id)?;
            let (_, parts) = self.inner.load_upload(&self.bucket, &self.key, &self.upload_id)?;
            self.inner.record_in_upload(&self.bucket, &self.upload_id, &part_file(self.part_number), &bytes, false)?;
            if let Some(earlier) = parts.get(&self.part_number) {
                self.inner.discard_segments(&self.bucket, std::slice::from_ref(&earlier.segment));
            }
            Ok(())
        })();
        if let Err(err) = result {
            self.inner.discard_segments(&self.bucket, std::slice::from_ref(&segment));
            return Err(err);
        }
        Ok(ObjectInfo {
            key: String::new(),
            size: info.size,
            last_modified: info.last_modified,
            etag: info.etag,
            meta: ObjectMeta::default(),
            checksum: digests.checksum,
            parts: Vec::new(),
            version_id: None,
        })
    }
}
