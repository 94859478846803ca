//! The write path of a `PosixStore`: staged writes committed by lock, check, metadata, fsync,
//! rename, fsync parent; conditional writes serialised per key; deletes that take empty parent
//! directories with them; server-side copies and tag updates.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use super::current::{current_etag, current_record, object_info, open_object};
use super::file_ops::{copy_file_contents, nearest_existing_dir};
use super::head_cache::{HeadCache, Stamp};
use super::locks::{lock_bucket_for_write, lock_key};
use super::staging::StagedFile;
use super::versions::{head_version, keep_current};
use super::{OpenBucket, PosixStore, TMP_DIR, is_file};
use crate::meta::{EMPTY_ETAG, FileIdentity, MetaRecord, MetaStore};
use crate::resolve::{create_dirs_beneath, open_dir_beneath};
use isthmus_store::conditions::ETagMatch;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::ObjectPath;
use isthmus_store::versioning::{NULL_VERSION, Versioning};
use isthmus_store::{CopyRequest, MetadataMode, ObjectInfo, ObjectWrite, PutRequest, RequestContext, Shown};

/// A PUT in progress: bytes go to a temporary file, MD5 is computed as they pass.
pub struct PosixWriter {
    root_fd: Arc<OwnedFd>,
    bucket: OpenBucket,
    pub(crate) staged: StagedFile,
    key: String,
    request: PutRequest,
    /// Set by copies and multipart completion, which know the ETag without hashing.
    pub(crate) known_etag: Option<String>,
    /// With `known_etag`: the checksum the object carries over (copies) or derives from its
    /// parts (multipart).
    pub(crate) known_checksum: Option<isthmus_store::Checksum>,
    /// Set by multipart completion: the part sizes, run-length encoded.
    pub(crate) known_parts: Vec<(u64, u32)>,
    strict: bool,
    etag_md5_limit: u64,
    /// Seals the object's ACL in its record (see `meta`).
    seal: Option<isthmus_store::seal_key::SealKey>,
    /// Where the new object's description is kept for HEAD and GET (`head_cache`).
    heads: Arc<HeadCache>,
}

impl PosixWriter {
    /// Commits run on a thread that may block (they fsync), so their metadata reads may hash.
    fn meta_store(&self) -> MetaStore<'_> {
        MetaStore {
            mode: self.bucket.metadata,
            bucket: self.bucket.fd.as_fd(),
            etag_md5_limit: self.etag_md5_limit,
            may_block: true,
            seal: self.seal.as_ref(),
            overflow: &self.bucket.overflow,
        }
    }

    /// Installs the temporary file as `path`, honouring the write conditions.
    fn install(&mut self, path: &ObjectPath<'_>, before_seen: &mut dyn FnMut(Shown)) -> StoreResult<()> {
        let parent = match path.parent() {
            None => rustix::fs::openat(
                &*self.bucket.fd,
                ".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| StoreError::io_at("open the bucket directory", &self.bucket.name, e))?,
            Some(parent) => match open_dir_beneath(self.bucket.fd.as_fd(), &parent).or_else(|err| match err {
                Errno::NOENT => {
                    before_seen(Shown::Directories);
                    create_dirs_beneath(self.bucket.fd.as_fd(), &parent, self.strict)
                }
                other => Err(other),
            }) {
                Ok(fd) => fd,
                Err(Errno::NOTDIR | Errno::EXIST) => {
                    return Err(StoreError::ParentIsObject(path.key().to_string()));
                }
                Err(Errno::XDEV | Errno::LOOP) => {
                    return Err(StoreError::InvalidKey(format!(
                        "{:?}: a parent is a symlink leading out of the bucket",
                        path.key()
                    )));
                }
                Err(err) => return Err(StoreError::io_at("create the object's directories", &parent, err)),
            },
        };
        let exclusive = matches!(self.request.if_none_match, Some(ETagMatch::Any));
        let flags = if exclusive { RenameFlags::NOREPLACE } else { RenameFlags::empty() };
        let replaced = crate::overflow::before_unlink(&self.bucket.overflow, parent.as_fd(), path.leaf());
        match self.staged.rename_into_seen(parent.as_fd(), path.leaf(), flags, before_seen) {
            Ok(()) => {
                if let Some(ino) = replaced {
                    crate::overflow::forget_ino(self.bucket.fd.as_fd(), ino);
                }
            }
            Err(Errno::EXIST) if exclusive => return Err(StoreError::PreconditionFailed),
            Err(Errno::ISDIR | Errno::NOTEMPTY | Errno::EXIST) => {
                return Err(StoreError::ObjectIsDirectory(path.key().to_string()));
            }
            Err(Errno::NOTDIR) => return Err(StoreError::ParentIsObject(path.key().to_string())),
            Err(err) => return Err(StoreError::io_at("rename the object into place", path.key(), err)),
        }
        if self.strict {
            rustix::fs::fsync(&parent).map_err(|e| StoreError::io_at("fsync the object's directory", path.key(), e))?;
        }
        Ok(())
    }

    fn commit_dir_object(mut self, path: &ObjectPath<'_>) -> StoreResult<ObjectInfo> {
        if self.staged.written > 0 {
            return Err(directory_with_data(path.key()));
        }
        let dir = match create_dirs_beneath(self.bucket.fd.as_fd(), &path.relative(), self.strict) {
            Ok(fd) => fd,
            Err(Errno::NOTDIR | Errno::EXIST) => {
                return Err(StoreError::ParentIsObject(path.key().to_string()));
            }
            Err(err) => return Err(StoreError::io_at("create the directory object", path.key(), err)),
        };
        let stat =
            rustix::fs::fstat(&dir).map_err(|e| StoreError::io_at("stat the directory object", path.key(), e))?;
        let record = MetaRecord {
            etag: EMPTY_ETAG.to_string(),
            identity: FileIdentity::of(&stat),
            checksum: self.staged.digests().checksum,
            parts: Vec::new(),
            meta: std::mem::take(&mut self.request.meta),
            version_id: None,
            acl_seal: None,
        };
        self.meta_store().save(dir.as_fd(), path.key(), &record)?;
        if self.strict {
            rustix::fs::fsync(&dir).map_err(|e| StoreError::io_at("fsync the directory object", path.key(), e))?;
        }
        Ok(object_info(path.key(), &stat, record))
    }

    /// Keeps the description of the object just installed for the HEADs and GETs that follow
    /// (in xattr mode). The rename moved the file's ctime, so the stamp is taken now, then the
    /// record is read back: kept only if it is still this write's, so a change by another
    /// process between the rename and the stamp is never hidden behind it.
    fn keep_description(&self, key: &str, info: &ObjectInfo) {
        if self.bucket.metadata != MetadataMode::Xattr {
            return;
        }
        let Ok(after) = rustix::fs::fstat(&self.staged.file) else { return };
        let still_ours = self.meta_store().load(self.staged.file.as_fd(), key).is_some_and(|record| {
            record.etag == info.etag && record.meta == info.meta && record.version_id == info.version_id
        });
        if still_ours && after.st_size as u64 == info.size {
            self.heads.remember(&self.bucket.name, key, Stamp::of(&after), info);
        }
    }

    fn check_if_match(&self, path: &ObjectPath<'_>) -> StoreResult<()> {
        let Some(condition) = &self.request.if_match else {
            return Ok(());
        };
        match current_etag(&self.meta_store(), path)? {
            Some(etag) if condition.matches(&etag) => Ok(()),
            Some(_) => Err(StoreError::PreconditionFailed),
            // If-Match on a missing object: 404 NoSuchKey, as S3 documents for PutObject and
            // CompleteMultipartUpload.
            None => Err(StoreError::NoSuchKey),
        }
    }
}

impl PosixWriter {
    /// Appends the first `len` bytes of `src` to the new object (a copy's source, a multipart
    /// upload's parts), without hashing them: the caller knows the ETag.
    pub(crate) fn append_copy(&mut self, src: BorrowedFd<'_>, len: u64) -> StoreResult<()> {
        if self.key.ends_with('/') && len > 0 {
            return Err(directory_with_data(&self.key));
        }
        copy_file_contents(src, self.staged.file.as_fd(), self.staged.written, len)?;
        self.staged.written += len;
        Ok(())
    }
}

impl ObjectWrite for PosixWriter {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()> {
        if self.key.ends_with('/') && !bytes.is_empty() {
            return Err(directory_with_data(&self.key));
        }
        self.staged.write_all(bytes)
    }

    fn write_zeros(&mut self, len: u64) -> StoreResult<()> {
        if self.key.ends_with('/') && len > 0 {
            return Err(directory_with_data(&self.key));
        }
        self.staged.write_zeros(len)
    }

    fn digests(&self) -> isthmus_store::Digests {
        if self.known_etag.is_some() {
            return isthmus_store::Digests { md5: None, checksum: self.known_checksum.clone() };
        }
        self.staged.digests()
    }

    fn commit(self: Box<Self>) -> StoreResult<ObjectInfo> {
        self.commit_seen(&mut |_| {})
    }

    /// Only a new key linked from an unnamed file into a directory that exists shows a watcher
    /// nothing but the new name: anything else calls `before_seen` before its first step a
    /// watcher could take for a change (the rename of a named staged file, a directory made, a
    /// key's file replaced, the current version moved aside).
    fn commit_seen(mut self: Box<Self>, before_seen: &mut dyn FnMut(Shown)) -> StoreResult<ObjectInfo> {
        let key = std::mem::take(&mut self.key);
        let path = ObjectPath::parse(&key)?;
        // The bucket cannot be deleted between here and the rename (see `BucketLock`).
        let _bucket_lock = lock_bucket_for_write(self.root_fd.as_fd(), &self.bucket)?;
        // Versioning keeps the current object before replacing it (directory objects are not
        // versioned). That, and If-Match (check-then-replace), hold the key's lock from the
        // check to the rename, so of two racing writers each sees the other's result.
        let versioning = self.bucket.versioning.filter(|_| !path.is_dir());
        let _key_lock = match (&self.request.if_match, versioning) {
            (None, None) => None,
            _ => Some(lock_key(self.bucket.fd.as_fd(), &key)?),
        };
        self.check_if_match(&path)?;
        if path.is_dir() {
            before_seen(Shown::Directories);
            return self.commit_dir_object(&path);
        }
        if versioning.is_some() {
            before_seen(Shown::Change);
        }
        let stat =
            rustix::fs::fstat(&self.staged.file).map_err(|e| StoreError::io_at("stat the staged file", &key, e))?;
        let (etag, checksum) = match self.known_etag.take() {
            Some(etag) => (etag, self.known_checksum.take()),
            None if !self.staged.hashes_md5() => (unique_etag(), self.staged.digests().checksum),
            None => {
                let checksum = self.staged.digests().checksum;
                (self.staged.md5_hex(), checksum)
            }
        };
        let record = MetaRecord {
            etag,
            identity: FileIdentity::of(&stat),
            checksum,
            parts: std::mem::take(&mut self.known_parts),
            meta: std::mem::take(&mut self.request.meta),
            version_id: versioning.map(Versioning::next_version_id).filter(|id| id != NULL_VERSION),
            acl_seal: None,
        };
        // Before the new record is saved: in sidecar mode it replaces the current one's.
        if let Some(state) = versioning {
            keep_current(&self.meta_store(), &path, state, self.strict)?;
        }
        self.meta_store().save(self.staged.file.as_fd(), &key, &record)?;
        if self.strict {
            rustix::fs::fsync(&self.staged.file).map_err(|e| StoreError::io_at("fsync the staged file", &key, e))?;
        }
        self.install(&path, before_seen)?;
        let mut info = object_info(&key, &stat, record);
        if versioning.is_some() {
            info.version_id.get_or_insert_with(|| NULL_VERSION.to_string());
        } else {
            self.keep_description(&key, &info);
        }
        Ok(info)
    }
}

fn directory_with_data(key: &str) -> StoreError {
    StoreError::InvalidKey(format!("{key:?}: a key ending in '/' is a directory and cannot hold data"))
}

/// An ETag for a write that wants no MD5: unique per write (a process-random value and a
/// counter, hashed), so a conditional write never mistakes a later object for an earlier one
/// (an ETag from the file's inode and mtime could repeat: inodes are reused and mtimes are
/// coarse). Suffixed like a multipart ETag, so clients do not take it for an MD5.
fn unique_etag() -> String {
    use md5::{Digest, Md5};
    format!("{}-1", hex::encode(Md5::digest(crate::writer_names::unique_suffix().as_bytes())))
}

impl PosixStore {
    pub(crate) fn new_writer(&self, bucket: &str, key: &str, request: PutRequest) -> StoreResult<PosixWriter> {
        let open = self.bucket_fd(bucket)?;
        let path = ObjectPath::parse(key)?;
        request.meta.validate()?;
        let staged = if path.is_dir() {
            StagedFile::for_directory(open.fd.as_fd())?
        } else if isthmus_store::identity::is_switched() {
            // A user's write: staged where the kernel checks that user's right to create it.
            let dir = nearest_existing_dir(open.fd.as_fd(), &path)?;
            StagedFile::create_in_target(dir).inspect_err(|err| {
                tracing::debug!(key, error = %err, "could not create the object's file in its directory");
            })?
        } else {
            match StagedFile::create_unnamed(nearest_existing_dir(open.fd.as_fd(), &path)?)? {
                Ok(staged) => staged,
                Err(_no_unnamed_files) => {
                    let tmp = create_dirs_beneath(open.fd.as_fd(), TMP_DIR, false).map_err(|e| match e {
                        Errno::NOENT => StoreError::NoSuchBucket,
                        other => StoreError::io_at("create the staging directory", TMP_DIR, other),
                    })?;
                    StagedFile::create(tmp)?
                }
            }
        };
        let staged = staged
            .with_checksum(request.checksum_algorithm)
            .with_early_writeback(self.strict())
            .without_md5(request.etag_without_md5 && !request.md5_required);
        Ok(PosixWriter {
            root_fd: self.root_fd.clone(),
            bucket: open,
            staged,
            key: key.to_string(),
            request,
            known_etag: None,
            known_checksum: None,
            known_parts: Vec::new(),
            strict: self.strict(),
            etag_md5_limit: self.options.etag_md5_limit,
            seal: self.seal.clone(),
            heads: self.heads.clone(),
        })
    }

    pub(super) fn remove_object(&self, cx: &RequestContext, open: &OpenBucket, key: &str) -> StoreResult<()> {
        let bucket_fd = open.fd.as_fd();
        let path = ObjectPath::parse(key)?;
        // A key at the top of the bucket is removed through the bucket's own handle.
        let parent_dir = match path.parent().map(|parent| open_dir_beneath(bucket_fd, &parent)).transpose() {
            Ok(fd) => fd,
            Err(Errno::NOENT | Errno::NOTDIR | Errno::XDEV | Errno::LOOP) => return Ok(()),
            Err(err) => return Err(StoreError::io_at("open the object's directory", key, err)),
        };
        let parent = parent_dir.as_ref().map_or(bucket_fd, |fd| fd.as_fd());
        let meta = self.meta_store(open, cx);
        if path.is_dir() {
            match rustix::fs::unlinkat(parent, path.leaf(), AtFlags::REMOVEDIR) {
                Ok(()) => {}
                Err(Errno::NOTEMPTY | Errno::EXIST) => {
                    // Still holds objects: it stops being a directory object, its children stay.
                    if let Ok(dir) = open_dir_beneath(bucket_fd, &path.relative())
                        && let Err(err) = rustix::fs::fremovexattr(&dir, crate::meta::XATTR_NAME)
                        && err != Errno::NODATA
                    {
                        tracing::warn!(key, error = %err, "could not remove a directory object's metadata");
                    }
                }
                Err(Errno::NOENT | Errno::NOTDIR) => return Ok(()),
                Err(err) => return Err(StoreError::io_at("remove the directory object", key, err)),
            }
        } else {
            let removed = crate::overflow::before_unlink(&open.overflow, parent, path.leaf());
            match rustix::fs::unlinkat(parent, path.leaf(), AtFlags::empty()) {
                Ok(()) => {
                    if let Some(ino) = removed {
                        crate::overflow::forget_ino(bucket_fd, ino);
                    }
                }
                // A directory is not the object `key` (that would be `key/`): nothing to delete.
                Err(Errno::NOENT | Errno::ISDIR | Errno::PERM) if !matches!(rustix::fs::statat(parent, path.leaf(), AtFlags::SYMLINK_NOFOLLOW), Ok(ref s) if is_file(s)) =>
                {
                    return Ok(());
                }
                Err(err) => return Err(StoreError::io_at("remove the object", key, err)),
            }
        }
        meta.remove_sidecar(key);
        if self.strict() {
            rustix::fs::fsync(parent).map_err(|e| StoreError::io_at("fsync the object's directory", key, e))?;
        }
        if let Some(dir) = parent_dir {
            prune_empty_parents(&meta, &path, dir);
        }
        Ok(())
    }

    pub(super) fn copy(
        &self,
        cx: &RequestContext,
        (src_bucket, src_key): (&str, &str),
        (dst_bucket, dst_key): (&str, &str),
        request: &CopyRequest,
    ) -> StoreResult<ObjectInfo> {
        let src_open = self.bucket_fd(src_bucket)?;
        let src_path = ObjectPath::parse(src_key).map_err(|_| StoreError::NoSuchKey)?;
        let src_meta = self.meta_store(&src_open, cx);
        let (src_fd, src_info) =
            head_version(&src_meta, src_open.versioning, &src_path, request.source_version_id.as_deref())?;
        let src_stat = rustix::fs::fstat(&src_fd).map_err(|e| StoreError::io_at("stat the copy source", src_key, e))?;
        request.source_conditions.check(&src_info.etag, src_info.last_modified).map_err(|e| match e {
            StoreError::NotModified { .. } => StoreError::PreconditionFailed,
            other => other,
        })?;
        let mut meta = request.replace_meta.clone().unwrap_or_else(|| src_info.meta.clone());
        meta.tags = request.replace_tags.clone().unwrap_or_else(|| src_info.meta.tags.clone());
        meta.acl = request.acl.filter(|a| *a != isthmus_store::CannedAcl::Private);
        meta.grants = Vec::new();
        let mut writer = self.new_writer(dst_bucket, dst_key, PutRequest { meta, ..PutRequest::default() })?;
        if !src_path.is_dir() {
            writer.append_copy(src_fd.as_fd(), src_info.size)?;
            let after =
                rustix::fs::fstat(&src_fd).map_err(|e| StoreError::io_at("stat the copy source", src_key, e))?;
            if FileIdentity::of(&after) != FileIdentity::of(&src_stat) {
                return Err(StoreError::SourceChanged);
            }
        }
        writer.known_etag = Some(src_info.etag);
        writer.known_checksum = src_info.checksum;
        Box::new(writer).commit()
    }

    /// `Store::update_object`: an ACL or tags replaced in the object's record.
    pub(super) fn change_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        change: isthmus_store::ObjectChange,
    ) -> StoreResult<()> {
        change.validate()?;
        self.update_meta(cx, bucket, key, |meta| change.apply(meta))
    }

    /// Changes an object's stored metadata in place (its bytes and ETag stay).
    fn update_meta(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        change: impl FnOnce(&mut isthmus_store::ObjectMeta),
    ) -> StoreResult<()> {
        let open = self.bucket_fd(bucket)?;
        let path = ObjectPath::parse(key).map_err(|_| StoreError::NoSuchKey)?;
        let meta = self.meta_store(&open, cx);
        let (fd, stat) = open_object(open.fd.as_fd(), &path)?;
        let mut record = current_record(&meta, fd.as_fd(), key, &stat)?;
        change(&mut record.meta);
        meta.save(fd.as_fd(), key, &record)?;
        if self.strict() {
            rustix::fs::fsync(&fd).map_err(|e| StoreError::io_at("fsync the object", key, e))?;
        }
        Ok(())
    }
}

/// Removes empty parent directories of a deleted key, up to the bucket, except directory
/// objects, so that a prefix disappears with its last object as it does in S3. `dir` is the
/// key's directory, already open: each level is checked through the handle the level below
/// opened, so a delete opens one directory per level it removes, not three.
fn prune_empty_parents(meta: &MetaStore<'_>, path: &ObjectPath<'_>, mut dir: OwnedFd) {
    let bucket = meta.bucket;
    let segments = path.segments();
    for depth in (1..segments.len()).rev() {
        if meta.load(dir.as_fd(), &format!("{}/", segments[..depth].join("/"))).is_some() {
            return;
        }
        let name = segments[depth - 1];
        if depth == 1 {
            // Not empty (another object arrived) or gone already: both are fine.
            let _ = rustix::fs::unlinkat(bucket, name, AtFlags::REMOVEDIR);
            return;
        }
        let Ok(parent) = open_dir_beneath(bucket, &segments[..depth - 1].join("/")) else { return };
        if rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR).is_err() {
            return;
        }
        dir = parent;
    }
}
