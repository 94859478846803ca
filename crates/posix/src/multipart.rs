//! Multipart uploads on a POSIX store. Each upload is a directory
//! `BUCKET/.isthmus/uploads/<upload id>/` holding `upload.json` (key, metadata, start time) and
//! one file per part named `<part number>.<md5>` (then its checksum and algorithm, if it has
//! one). Completion claims the directory with an atomic rename (so a racing Complete and Abort
//! cannot both win), assembles the parts with copy_file_range into a staged file and installs
//! it like any PUT, with the S3 "-N" ETag; the completed upload is remembered a day for retried
//! Completes (`completed.rs`). What a Complete may list, and the object's ETag and checksum,
//! are `part_rules.rs`'s.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::completed;
use super::locks::FileLock;
use super::staging::StagedFile;
use super::{PosixStore, modified};
use crate::part_rules::{check_part_number, choose_parts, part_checksum_algorithm, run_lengths};
use crate::resolve::{create_dirs_beneath, open_dir_beneath};
use crate::writer_names::unique_suffix;
use isthmus_store::ObjectMeta;
use isthmus_store::checksum::{Checksum, ChecksumAlgorithm, ChecksumType};
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::ObjectPath;
use isthmus_store::multipart::{CompletedPart, PartInfo};
use isthmus_store::{ObjectInfo, ObjectWrite, PartRequest, PutRequest};

pub(super) const UPLOADS_DIR: &str = ".isthmus/uploads";
const UPLOAD_FILE: &str = "upload.json";
/// The lock that serialises installing parts of one upload (not a part name: no dot after
/// five digits).
const PART_LOCK_FILE: &str = "parts.lock";

/// What `upload.json` holds.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct UploadRecord {
    pub(super) key: String,
    pub(super) initiated_unix_ns: u128,
    meta: ObjectMeta,
    #[serde(default)]
    pub(super) checksum_algorithm: Option<ChecksumAlgorithm>,
    #[serde(default)]
    pub(super) checksum_type: ChecksumType,
    /// Who started the upload (`UploadInfo::initiator`).
    #[serde(default)]
    pub(super) initiator: Option<String>,
}

pub fn valid_upload_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

pub fn new_upload_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    hex::encode(bytes)
}

fn part_prefix(part_number: u32) -> String {
    format!("{part_number:05}.")
}

fn read_to_vec(fd: BorrowedFd<'_>) -> StoreResult<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::from(fd.try_clone_to_owned()?).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The parts present in an upload directory, newest file per part number. Part files are
/// named `<number>.<md5 hex>`, or `<number>.<md5 hex>.<checksum hex>.<algorithm>` (the
/// algorithm the part declared, which is the upload's when it has one; older parts leave it
/// out, and have the upload's).
pub(super) fn read_parts(
    dir: BorrowedFd<'_>,
    algorithm: Option<ChecksumAlgorithm>,
) -> StoreResult<BTreeMap<u32, (PartInfo, String)>> {
    let mut parts: BTreeMap<u32, (PartInfo, String)> = BTreeMap::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().to_str() else {
            continue;
        };
        let mut fields = name.split('.');
        let (Some(number), Some(etag), checksum_hex) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let algorithm = algorithm.or_else(|| fields.next().and_then(ChecksumAlgorithm::from_name));
        let (Ok(part_number), true) = (number.parse::<u32>(), etag.len() == 32 && number.len() == 5) else {
            continue;
        };
        let Ok(stat) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let checksum = match (algorithm, checksum_hex.and_then(|h| hex::decode(h).ok())) {
            (Some(algorithm), Some(raw)) => Some(Checksum::full_object(algorithm, BASE64.encode(raw))),
            _ => None,
        };
        let info = PartInfo {
            part_number,
            etag: etag.to_string(),
            size: stat.st_size as u64,
            last_modified: modified(&stat),
            checksum,
        };
        match parts.get(&part_number) {
            Some((existing, _)) if existing.last_modified > info.last_modified => {}
            _ => {
                parts.insert(part_number, (info, name.to_string()));
            }
        }
    }
    Ok(parts)
}

/// A part being uploaded: staged in the upload directory, renamed to `<n>.<md5>` on commit.
pub struct PosixPartWriter {
    upload_dir: OwnedFd,
    staged: StagedFile,
    part_number: u32,
    strict: bool,
}

impl ObjectWrite for PosixPartWriter {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()> {
        self.staged.write_all(bytes)
    }

    fn digests(&self) -> isthmus_store::Digests {
        self.staged.digests()
    }

    fn commit(mut self: Box<Self>) -> StoreResult<ObjectInfo> {
        let checksum = self.staged.digests().checksum;
        let etag = self.staged.md5_hex();
        if self.strict {
            rustix::fs::fsync(&self.staged.file)?;
        }
        let stat = rustix::fs::fstat(&self.staged.file)?;
        let prefix = part_prefix(self.part_number);
        let name = match checksum.as_ref().and_then(|c| Some((c.raw()?, c.algorithm))) {
            Some((raw, algorithm)) => {
                format!("{prefix}{etag}.{}.{}", hex::encode(raw), algorithm.name().to_ascii_lowercase())
            }
            None => format!("{prefix}{etag}"),
        };
        // Installing a part and removing the earlier uploads of its number is one step under
        // the upload's lock: of two racing uploads of one part number, the later one is the
        // part, whole, and neither removes the other's file after its own rename.
        let _lock = match FileLock::acquire(self.upload_dir.as_fd(), PART_LOCK_FILE, FlockOperation::LockExclusive) {
            Ok(lock) => lock,
            Err(Errno::NOENT) => return Err(StoreError::NoSuchUpload),
            Err(err) => return Err(StoreError::io_at("lock the upload", PART_LOCK_FILE, err)),
        };
        match self.staged.rename_into(self.upload_dir.as_fd(), &name, RenameFlags::empty()) {
            Ok(()) => {}
            // The upload was completed or aborted meanwhile.
            Err(Errno::NOENT) => return Err(StoreError::NoSuchUpload),
            Err(err) => return Err(StoreError::io_at("rename the part into place", &name, err)),
        }
        // An earlier upload of the same part number is replaced.
        for entry in rustix::fs::Dir::read_from(&self.upload_dir)?.flatten() {
            let Ok(other) = entry.file_name().to_str() else {
                continue;
            };
            if other.starts_with(&prefix)
                && other != name
                && let Err(err) = rustix::fs::unlinkat(&self.upload_dir, other, AtFlags::empty())
                && err != Errno::NOENT
            {
                tracing::warn!(part = other, error = %err, "could not remove a replaced part");
            }
        }
        if self.strict {
            rustix::fs::fsync(&self.upload_dir)?;
        }
        Ok(ObjectInfo {
            key: String::new(),
            size: stat.st_size as u64,
            last_modified: modified(&stat),
            etag,
            meta: ObjectMeta::default(),
            checksum,
            parts: Vec::new(),
            version_id: None,
        })
    }
}

impl PosixStore {
    fn uploads_dir(&self, bucket: BorrowedFd<'_>) -> StoreResult<OwnedFd> {
        Ok(create_dirs_beneath(bucket, UPLOADS_DIR, false)?)
    }

    /// Opens the directory of an upload of `key`; NoSuchUpload unless it exists for that key.
    pub(super) fn open_upload(
        &self,
        bucket: BorrowedFd<'_>,
        key: &str,
        upload_id: &str,
    ) -> StoreResult<(OwnedFd, UploadRecord)> {
        if !valid_upload_id(upload_id) {
            return Err(StoreError::NoSuchUpload);
        }
        let dir = match open_dir_beneath(bucket, &format!("{UPLOADS_DIR}/{upload_id}")) {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::NOTDIR) => return Err(StoreError::NoSuchUpload),
            Err(err) => return Err(err.into()),
        };
        let record = load_record(dir.as_fd())?;
        if record.key != key {
            return Err(StoreError::NoSuchUpload);
        }
        Ok((dir, record))
    }

    /// With a user's identity, the upload's directory is made by the gateway (the uploads
    /// area is its own) and handed to the user, mode 0700: the user's parts are written into
    /// it with the user's identity, and no one else's request can open it.
    pub(crate) fn create_upload(
        &self,
        bucket: &str,
        key: &str,
        request: PutRequest,
        initiator: Option<String>,
    ) -> StoreResult<String> {
        let bucket_fd = self.bucket_fd(bucket)?.fd;
        let path = ObjectPath::parse(key)?;
        request.meta.validate()?;
        // Refused at once, not at completion, where the user may not create the object.
        super::file_ops::check_may_change_entries(bucket_fd.as_fd(), &path)?;
        let owner = isthmus_store::identity::switched_owner();
        isthmus_store::identity::as_gateway(|| {
            self.create_upload_now(bucket_fd.as_fd(), key, request, (owner, initiator))
        })
    }

    fn create_upload_now(
        &self,
        bucket_fd: BorrowedFd<'_>,
        key: &str,
        request: PutRequest,
        (owner, initiator): (Option<(u32, u32)>, Option<String>),
    ) -> StoreResult<String> {
        let uploads = self.uploads_dir(bucket_fd)?;
        let upload_id = new_upload_id();
        // Written under a temporary name and renamed, so an upload is never seen half-made.
        let staging_name = format!("new.{}", unique_suffix());
        rustix::fs::mkdirat(&uploads, &staging_name, Mode::from_raw_mode(0o700))?;
        let result = (|| -> StoreResult<()> {
            let dir = open_dir_beneath(uploads.as_fd(), &staging_name)?;
            let initiated_unix_ns = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            let record = UploadRecord {
                key: key.to_string(),
                initiated_unix_ns,
                meta: request.meta,
                checksum_algorithm: request.checksum_algorithm,
                checksum_type: request.checksum_type,
                initiator,
            };
            let mut staged = StagedFile::create(dir.try_clone()?)?;
            staged.write_all(&serde_json::to_vec(&record).expect("record serializes"))?;
            if self.strict() {
                rustix::fs::fsync(&staged.file)?;
            }
            staged.rename_into(dir.as_fd(), UPLOAD_FILE, RenameFlags::empty())?;
            if let Some((uid, gid)) = owner {
                let (uid, gid) = (rustix::process::Uid::from_raw(uid), rustix::process::Gid::from_raw(gid));
                rustix::fs::fchown(&dir, Some(uid), Some(gid))?;
            }
            rustix::fs::renameat(&uploads, &staging_name, &uploads, &upload_id)?;
            if self.strict() {
                rustix::fs::fsync(&uploads)?;
            }
            Ok(())
        })();
        if result.is_err() {
            let _ = remove_tree(uploads.as_fd(), &staging_name);
        }
        result.map(|()| upload_id)
    }

    pub(crate) fn part_writer(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
    ) -> StoreResult<PosixPartWriter> {
        check_part_number(request.part_number)?;
        let open = self.bucket_fd(bucket)?;
        let (upload_dir, record) = self.open_upload(open.fd.as_fd(), key, upload_id)?;
        let algorithm = part_checksum_algorithm(record.checksum_algorithm, request)?;
        let staged = StagedFile::create(upload_dir.try_clone()?)?.with_checksum(algorithm);
        Ok(PosixPartWriter { upload_dir, staged, part_number: request.part_number, strict: self.strict() })
    }

    pub(crate) fn complete_upload(
        &self,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
        request: PutRequest,
    ) -> StoreResult<ObjectInfo> {
        let bucket_fd = self.bucket_fd(bucket)?.fd;
        match self.open_upload(bucket_fd.as_fd(), key, upload_id) {
            Err(StoreError::NoSuchUpload) => return self.completed_before(bucket, bucket_fd.as_fd(), key, upload_id),
            other => other?,
        };
        // The uploads area is the gateway's: claiming, recording and removing an upload are
        // done with its identity; the upload's own directory was opened (and the object is
        // written) with the request's.
        let uploads = isthmus_store::identity::as_gateway(|| self.uploads_dir(bucket_fd.as_fd()))?;
        // Claim the upload: of a racing Complete and Abort exactly one rename succeeds.
        let claimed = format!("claimed.{upload_id}.{}", unique_suffix());
        match isthmus_store::identity::as_gateway(|| rustix::fs::renameat(&uploads, upload_id, &uploads, &claimed)) {
            Ok(()) => {}
            Err(Errno::NOENT) => return self.completed_before(bucket, bucket_fd.as_fd(), key, upload_id),
            Err(err) => return Err(err.into()),
        }
        let result = match self.assemble(bucket, key, uploads.as_fd(), &claimed, parts, request) {
            // Parts gone from an upload already completed (a crash while its parts were being
            // removed, the upload given back by recovery): the completed object is the answer.
            Err(StoreError::InvalidPart(n)) => {
                self.completed_before(bucket, bucket_fd.as_fd(), key, upload_id).map_err(|_| StoreError::InvalidPart(n))
            }
            other => other,
        };
        isthmus_store::identity::as_gateway(|| match &result {
            Ok(info) => {
                completed::remember(uploads.as_fd(), upload_id, key, &info.etag);
                let _ = remove_tree(uploads.as_fd(), &claimed);
            }
            // The object was not written: give the upload back so the client can retry.
            Err(_) => {
                let _ = rustix::fs::renameat(&uploads, &claimed, &uploads, upload_id);
            }
        });
        result
    }

    /// A Complete of an upload that is gone: the object it completed, while that is still the
    /// current object under the key and the completion is less than a day old; else
    /// NoSuchUpload.
    fn completed_before(
        &self,
        bucket: &str,
        bucket_fd: BorrowedFd<'_>,
        key: &str,
        upload_id: &str,
    ) -> StoreResult<ObjectInfo> {
        let uploads = open_dir_beneath(bucket_fd, UPLOADS_DIR).map_err(|_| StoreError::NoSuchUpload)?;
        let etag = completed::recall(uploads.as_fd(), upload_id, key).ok_or(StoreError::NoSuchUpload)?;
        let current = self.describe_object(&isthmus_store::RequestContext::process(), bucket, key, &Default::default());
        match current {
            Ok(info) if info.etag == etag => Ok(info),
            _ => Err(StoreError::NoSuchUpload),
        }
    }

    fn assemble(
        &self,
        bucket: &str,
        key: &str,
        uploads: BorrowedFd<'_>,
        claimed: &str,
        parts: &[CompletedPart],
        mut request: PutRequest,
    ) -> StoreResult<ObjectInfo> {
        let dir = open_dir_beneath(uploads, claimed)?;
        let record = load_record(dir.as_fd())?;
        let stored = read_parts(dir.as_fd(), record.checksum_algorithm)?;
        let choice = choose_parts(
            parts,
            |n| stored.get(&n).map(|(info, _)| info),
            (record.checksum_algorithm, record.checksum_type),
            &request.complete_checksum,
        )?;
        let chosen: Vec<(PartInfo, String)> =
            choice.parts.iter().map(|info| stored[&info.part_number].clone()).collect();
        let (etag, checksum) = (choice.etag, choice.checksum);
        request.meta = record.meta;
        request.checksum_algorithm = None;
        let mut writer = self.new_writer(bucket, key, request)?;
        for (info, name) in &chosen {
            let part = rustix::fs::openat(
                &dir,
                name.as_str(),
                OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
                Mode::empty(),
            )?;
            writer.append_copy(part.as_fd(), info.size)?;
        }
        writer.known_etag = Some(etag);
        writer.known_checksum = checksum;
        writer.known_parts = run_lengths(chosen.iter().map(|(info, _)| info.size));
        Box::new(writer).commit()
    }

    pub(crate) fn abort_upload(&self, bucket: &str, key: &str, upload_id: &str) -> StoreResult<()> {
        let bucket_fd = self.bucket_fd(bucket)?.fd;
        // Opened with the request's identity (the kernel decides whether it may); removed by
        // the gateway, whose uploads area it is in.
        self.open_upload(bucket_fd.as_fd(), key, upload_id)?;
        isthmus_store::identity::as_gateway(|| {
            let uploads = self.uploads_dir(bucket_fd.as_fd())?;
            let claimed = format!("aborted.{upload_id}.{}", unique_suffix());
            match rustix::fs::renameat(&uploads, upload_id, &uploads, &claimed) {
                Ok(()) => {}
                Err(Errno::NOENT) => return Err(StoreError::NoSuchUpload),
                Err(err) => return Err(err.into()),
            }
            remove_tree(uploads.as_fd(), &claimed)
        })
    }
}

pub(super) fn load_record(dir: BorrowedFd<'_>) -> StoreResult<UploadRecord> {
    let fd = match rustix::fs::openat(
        dir,
        UPLOAD_FILE,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Err(StoreError::NoSuchUpload),
        Err(err) => return Err(err.into()),
    };
    serde_json::from_slice(&read_to_vec(fd.as_fd())?).map_err(|_| StoreError::NoSuchUpload)
}

/// Removes a directory of plain files (an upload) beneath `parent`.
pub(super) fn remove_tree(parent: BorrowedFd<'_>, name: &str) -> StoreResult<()> {
    let dir = open_dir_beneath(parent, name)?;
    let names: Vec<String> = rustix::fs::Dir::read_from(&dir)?
        .flatten()
        .filter_map(|e| e.file_name().to_str().ok().map(str::to_string))
        .filter(|n| n != "." && n != "..")
        .collect();
    for n in names {
        let _ = rustix::fs::unlinkat(&dir, n.as_str(), AtFlags::empty());
    }
    rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR)?;
    Ok(())
}
