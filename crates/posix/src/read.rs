//! The read path of a `PosixStore`: HEAD and GET with conditions, ranges, part numbers and
//! versions; an object's bytes are a stretch of its file (`FileStretch`).

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{AtFlags, FileType, StatxFlags};

use super::current::{current_record, object_info, open_object};
use super::head_cache::Stamp;
use super::versions::head_version;
use super::{OpenBucket, PosixStore};
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::ObjectPath;
use isthmus_store::{GetRequest, GetResponse, HeadRequest, MetadataMode, ObjectInfo, RequestContext};

impl PosixStore {
    pub(super) fn read_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        let open = self.bucket_fd(bucket)?;
        let path = ObjectPath::parse(key).map_err(|_| StoreError::NoSuchKey)?;
        let (fd, info) = if keeps_descriptions(&open, &path, request.version_id.as_deref()) {
            self.open_described(cx, &open, &path)?
        } else {
            head_version(&self.meta_store(&open, cx), open.versioning, &path, request.version_id.as_deref())?
        };
        request.conditions.check(&info.etag, info.last_modified)?;
        let range = request.served_range(&info)?;
        let (offset, remaining) = match range {
            None => (0, info.size),
            Some((first, last)) => (first, last - first + 1),
        };
        let file = File::from(fd);
        Ok(GetResponse { info, body: Box::new(PosixReader::new(file, offset, remaining)), range })
    }

    pub(super) fn describe_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo> {
        if let Ok(path) = ObjectPath::parse(key)
            && let Some(open) = self.recent_bucket(bucket)
            && keeps_descriptions(&open, &path, request.version_id.as_deref())
            && let Some(info) = self.kept_description(&open, &path)
        {
            request.conditions.check(&info.etag, info.last_modified)?;
            return Ok(info);
        }
        let open = self.bucket_fd(bucket)?;
        let path = ObjectPath::parse(key).map_err(|_| StoreError::NoSuchKey)?;
        let info = if keeps_descriptions(&open, &path, request.version_id.as_deref()) {
            self.open_described(cx, &open, &path)?.1
        } else {
            head_version(&self.meta_store(&open, cx), open.versioning, &path, request.version_id.as_deref())?.1
        };
        request.conditions.check(&info.etag, info.last_modified)?;
        Ok(info)
    }

    /// The description kept for an object whose file a `statx` shows unchanged: HEAD in one
    /// system call. Only with the gateway's identity: a user's HEAD opens the file, so the
    /// kernel judges whether the user may read it. `statx` follows links in the key's parent
    /// directories, but a description is used only for the very file (device and inode) that
    /// an open beneath the bucket found under this key, unchanged since.
    fn kept_description(&self, open: &OpenBucket, path: &ObjectPath<'_>) -> Option<ObjectInfo> {
        if isthmus_store::identity::is_switched() {
            return None;
        }
        let stat =
            rustix::fs::statx(&*open.fd, path.relative(), AtFlags::SYMLINK_NOFOLLOW, StatxFlags::BASIC_STATS).ok()?;
        if FileType::from_raw_mode(u32::from(stat.stx_mode)) != FileType::RegularFile {
            return None;
        }
        self.heads.get(&open.name, path.key(), Stamp::of_statx(&stat))
    }

    /// Opens an object and describes it, from the kept description if the open file has its
    /// stamp, else from its metadata record (then kept, with the stamp taken before the record
    /// was read: a change meanwhile moved the file's ctime past it).
    fn open_described(
        &self,
        cx: &RequestContext,
        open: &OpenBucket,
        path: &ObjectPath<'_>,
    ) -> StoreResult<(OwnedFd, ObjectInfo)> {
        let (fd, stat) = open_object(open.fd.as_fd(), path)?;
        let stamp = Stamp::of(&stat);
        if let Some(info) = self.heads.get(&open.name, path.key(), stamp) {
            return Ok((fd, info));
        }
        let record = current_record(&self.meta_store(open, cx), fd.as_fd(), path.key(), &stat)?;
        let info = object_info(path.key(), &stat, record);
        self.heads.remember(&open.name, path.key(), stamp, &info);
        Ok((fd, info))
    }
}

/// Whether reads of `path` may use kept descriptions: the current object of an unversioned
/// bucket whose records are extended attributes (a sidecar record changes without touching
/// the object's file, so its stamp would not show it).
fn keeps_descriptions(open: &OpenBucket, path: &ObjectPath<'_>, version_id: Option<&str>) -> bool {
    open.metadata == MetadataMode::Xattr && open.versioning.is_none() && version_id.is_none() && !path.is_dir()
}

/// Reads an object's bytes from an offset, up to a limit: a stretch of its file.
pub type PosixReader = isthmus_store::file_stretch::FileStretch;
