//! The erasure pool's calls (`ErasureCalls`, reached only through `ErasureStore`, which runs
//! each with the gateway's identity: `gateway_files`): buckets and their settings are kept on
//! every drive and decided by the drives together (`namespace`); objects are manifests plus
//! shards (`write`, `read`); uploads are `multipart`'s; keys ending in '/' (folder objects,
//! always empty) are kept as folders on every drive, as in a posix pool.
//! Versioning is not offered on erasure-coded pools (NotImplemented).

use std::sync::Arc;

use super::manifest::Stored;
use super::read::EcReader;
use super::write::EcWriter;
use super::{ErasureCalls, Inner};
use isthmus_posix::PosixStore;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::ObjectPath;
use isthmus_store::multipart::{CompletedPart, ListUploadsRequest, PartsPage, UploadsPage};
use isthmus_store::{
    BoxedWriter, BucketConfig, BucketFacts, BucketInfo, CopyRequest, CreateBucketRequest, DeleteOutcome, DeleteRequest,
    Digests, FileSystemKind, GetRequest, GetResponse, HeadRequest, ListPage, ListPartsRequest, ListRequest,
    ListVersionsRequest, MultipartStore, NULL_VERSION, ObjectChange, ObjectInfo, ObjectVersion, ObjectWrite,
    PartRequest, PutRequest, RequestContext, Store, StoreExt, VersionsPage,
};

/// Creates, deletes and settings changes of buckets in this process, one at a time.
static NAMESPACE_WRITES: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn gateway() -> RequestContext {
    RequestContext::process()
}

fn is_folder(key: &str) -> bool {
    key.ends_with('/')
}

impl Inner {
    /// Runs `op` on every drive's metadata namespace that takes writes; succeeds when
    /// `meta_write_quorum` of them did (or answered `tolerated`).
    fn on_every_drive<T>(
        &self,
        what: &str,
        op: impl Fn(&PosixStore) -> StoreResult<T>,
        tolerated: impl Fn(&StoreError) -> bool,
    ) -> StoreResult<()> {
        self.on_every_writable_drive(what, |_, store| op(store), tolerated, self.meta_write_quorum())
    }

    /// A folder object (key ending in '/'), as the first drive that serves reads and holds it
    /// answers `op` (a drive that lost it hides nothing).
    fn folder<T>(&self, bucket: &str, op: impl Fn(&PosixStore) -> StoreResult<T>) -> StoreResult<T> {
        self.existing_bucket(bucket)?;
        for drive in &self.drives {
            let Some(store) = drive.readable() else { continue };
            match op(&store) {
                Ok(found) => return Ok(found),
                Err(StoreError::NoSuchKey | StoreError::NoSuchBucket) => {}
                Err(err @ (StoreError::Io(_) | StoreError::IoAt { .. })) => drive.failed("read a folder object", &err),
                Err(err) => return Err(err),
            }
        }
        Err(StoreError::NoSuchKey)
    }

    /// The current object, or NoSuchKey.
    fn existing(&self, bucket: &str, key: &str) -> StoreResult<Stored> {
        self.current(bucket, key)?.ok_or(StoreError::NoSuchKey)
    }

    /// Rewrites the manifest of `bucket/key` with changed metadata (tags, ACL), under its lock.
    fn change_meta(
        &self,
        bucket: &str,
        key: &str,
        change: impl FnOnce(&mut isthmus_store::ObjectMeta),
    ) -> StoreResult<()> {
        let _lock = self.lock_key(bucket, key)?;
        let mut stored = self.existing(bucket, key)?;
        change(&mut stored.manifest.meta);
        // A nanosecond later: the new record wins over the old one on every drive, while the
        // object's Last-Modified (whole seconds) stays.
        stored.manifest.written_ns += 1;
        stored.manifest.write_id = super::manifest::random_id();
        self.write_manifests(bucket, key, &stored).map(|_| ())
    }
}

fn check_version(version_id: Option<&str>) -> StoreResult<()> {
    match version_id {
        None | Some(NULL_VERSION) => Ok(()),
        Some(other) => {
            isthmus_store::validate_version_id(other)?;
            Err(StoreError::NoSuchVersion)
        }
    }
}

/// A PUT of a folder object (key ending in '/'): no data, made on every drive.
struct FolderWriter {
    inner: Arc<Inner>,
    bucket: String,
    key: String,
    request: PutRequest,
    written: u64,
}

impl ObjectWrite for FolderWriter {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()> {
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn digests(&self) -> Digests {
        let mut hashes = super::write::StreamHashes::new(true, self.request.checksum_algorithm);
        hashes.update(&[]);
        hashes.digests()
    }

    fn commit(self: Box<Self>) -> StoreResult<ObjectInfo> {
        if self.written > 0 {
            return Err(StoreError::InvalidKey(format!(
                "{:?}: a key ending in '/' is a directory and cannot hold data",
                self.key
            )));
        }
        let request = PutRequest { meta: self.request.meta.clone(), ..Default::default() };
        self.inner.on_every_drive(
            "write a folder object",
            |store| store.put_bytes(&gateway(), &self.bucket, &self.key, b"", request.clone()),
            |_| false,
        )?;
        self.inner.folder(&self.bucket, |store| {
            store.head_object(&gateway(), &self.bucket, &self.key, &HeadRequest::default())
        })
    }
}

impl Store for ErasureCalls {
    fn list_buckets(&self, _cx: &RequestContext) -> StoreResult<Vec<BucketInfo>> {
        self.inner.bucket_list()
    }

    fn create_bucket(&self, _cx: &RequestContext, bucket: &str, _request: &CreateBucketRequest) -> StoreResult<()> {
        isthmus_store::key::validate_bucket_name(bucket)?;
        // Serialised in the process, so two creates of one name do not both find it free.
        let _serial = NAMESPACE_WRITES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.inner.decisions.forget(bucket);
        if self.inner.bucket_state(bucket)?.is_some() {
            // Whether the requester owns it is for the authorization layer to say.
            return Err(StoreError::BucketAlreadyExists);
        }
        self.inner.make_bucket(bucket, &BucketConfig::default())
    }

    fn head_bucket(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        self.inner.existing_bucket(bucket).map(|_| ())
    }

    fn bucket_facts(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts> {
        let facts = self.inner.folder(bucket, |store| store.bucket_facts(&gateway(), bucket))?;
        // Never "local": every call does I/O on several drives, so it runs on the blocking pool.
        // Its files are the gateway's: the kernel cannot judge a user's access (issue 28, 3).
        Ok(BucketFacts {
            filesystem: FileSystemKind::Shared("erasure"),
            access: isthmus_store::AccessJudge::Gateway,
            pool: None,
            ..facts
        })
    }

    fn delete_bucket(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        let _serial = NAMESPACE_WRITES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // A page may hold no object yet be truncated: the tombstones of deleted objects take
        // their places in the drives' listings. Empty means no object on any page.
        let mut request = ListRequest { max_keys: 1000, ..Default::default() };
        loop {
            let page = self.inner.list_page(bucket, &request)?;
            if !page.objects.is_empty() || !page.common_prefixes.is_empty() {
                return Err(StoreError::BucketNotEmpty);
            }
            match page.next_marker {
                Some(marker) if page.is_truncated => request.start_after = Some(marker),
                _ => break,
            }
        }
        self.inner.remove_bucket(bucket)
    }

    fn bucket_config(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<BucketConfig> {
        Ok(self.inner.existing_bucket(bucket)?.settings.clone().versioned())
    }

    /// The drives' decision says whether the write replaces the version it read; the settings
    /// then go to every drive. Writes of this process's namespace are serialised, so two
    /// writers never both replace the same version here; another gateway's write at the same
    /// moment is ordered by its time (the latest record wins).
    fn set_bucket_config(&self, _cx: &RequestContext, bucket: &str, config: &BucketConfig) -> StoreResult<()> {
        let _serial = NAMESPACE_WRITES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.inner.decisions.forget(bucket);
        let current = self.inner.existing_bucket(bucket)?.settings.clone();
        if config.versioning.is_some() && current.versioning.is_none() {
            return Err(StoreError::NotImplemented(format!(
                "Versioning is not supported on erasure-coded pools (bucket {bucket:?} is in pool {:?}): \
                 place versioned buckets in a posix pool",
                self.inner.name
            )));
        }
        isthmus_store::object_meta::validate_bucket_tags(&config.tags)?;
        config.check_replaces(&current)?;
        self.inner.record_settings(bucket, config)
    }

    fn put_object(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<BoxedWriter> {
        ObjectPath::parse(key)?;
        request.meta.validate()?;
        self.inner.existing_bucket(bucket)?;
        if is_folder(key) {
            let (bucket, key) = (bucket.to_string(), key.to_string());
            return Ok(Box::new(FolderWriter { inner: self.inner.clone(), bucket, key, request, written: 0 }));
        }
        Ok(Box::new(EcWriter::new(&self.inner, bucket, key, request)))
    }

    fn get_object(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        check_version(request.version_id.as_deref())?;
        if is_folder(key) {
            return self.inner.folder(bucket, |store| store.get_object(&gateway(), bucket, key, request));
        }
        ObjectPath::parse(key).map_err(|_| StoreError::NoSuchKey)?;
        let stored = self.inner.existing(bucket, key)?;
        let info = stored.info(key);
        request.conditions.check(&info.etag, info.last_modified)?;
        let range = request.served_range(&info)?;
        let body = EcReader::open(self.inner.clone(), bucket, key, stored, range)?;
        Ok(GetResponse { info, body: Box::new(body), range })
    }

    fn head_object(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo> {
        check_version(request.version_id.as_deref())?;
        if is_folder(key) {
            return self.inner.folder(bucket, |store| store.head_object(&gateway(), bucket, key, request));
        }
        ObjectPath::parse(key).map_err(|_| StoreError::NoSuchKey)?;
        let info = self.inner.existing(bucket, key)?.info(key);
        request.conditions.check(&info.etag, info.last_modified)?;
        Ok(info)
    }

    fn delete_object(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &DeleteRequest,
    ) -> StoreResult<DeleteOutcome> {
        check_version(request.version_id.as_deref())?;
        ObjectPath::parse(key)?;
        if is_folder(key) {
            self.inner.on_every_drive(
                "delete a folder object",
                |s| s.delete_object(&gateway(), bucket, key, &DeleteRequest::default()),
                |e| matches!(e, StoreError::NoSuchKey),
            )?;
            return Ok(DeleteOutcome::default());
        }
        let _lock = self.inner.lock_key(bucket, key)?;
        if let Some(current) = self.inner.current(bucket, key)? {
            // A tombstone, not a removal: a drive away now still holds the object.
            self.inner.write_manifests(bucket, key, &super::manifest::Stored::tombstone())?;
            self.inner.discard_segments(bucket, &current.manifest.segments);
        }
        Ok(DeleteOutcome::default())
    }

    fn copy_object(
        &self,
        cx: &RequestContext,
        source: (&str, &str),
        destination: (&str, &str),
        request: &CopyRequest,
    ) -> StoreResult<ObjectInfo> {
        isthmus_store::copy_between(self, self, cx, source, destination, request)
    }

    fn list_objects(&self, _cx: &RequestContext, bucket: &str, request: &ListRequest) -> StoreResult<ListPage> {
        self.inner.list_page(bucket, request)
    }

    /// Every object as its null version (versioning is never on here).
    fn list_object_versions(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListVersionsRequest,
    ) -> StoreResult<VersionsPage> {
        let list = ListRequest {
            prefix: request.prefix.clone(),
            delimiter: request.delimiter.clone(),
            start_after: request.key_marker.clone(),
            max_keys: request.max_keys,
        };
        let page = self.list_objects(cx, bucket, &list)?;
        let versions = page
            .objects
            .into_iter()
            .map(|mut info| {
                info.version_id = Some(NULL_VERSION.to_string());
                ObjectVersion { info, is_latest: true, delete_marker: false }
            })
            .collect();
        let next_version_id_marker = page.is_truncated.then(|| NULL_VERSION.to_string());
        Ok(VersionsPage {
            versions,
            common_prefixes: page.common_prefixes,
            is_truncated: page.is_truncated,
            next_key_marker: if page.is_truncated { page.next_marker } else { None },
            next_version_id_marker,
        })
    }

    fn update_object(&self, _cx: &RequestContext, bucket: &str, key: &str, change: ObjectChange) -> StoreResult<()> {
        change.validate()?;
        if is_folder(key) {
            return self.inner.on_every_drive(
                "change a folder object",
                |s| s.update_object(&gateway(), bucket, key, change.clone()),
                |_| false,
            );
        }
        self.inner.change_meta(bucket, key, |meta| change.apply(meta))
    }
}

impl MultipartStore for ErasureCalls {
    fn create_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<String> {
        self.inner.create_upload(bucket, key, request, cx.user_name().map(str::to_string))
    }

    fn upload_part(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
    ) -> StoreResult<BoxedWriter> {
        self.inner.part_writer(bucket, key, upload_id, request)
    }

    fn complete_multipart_upload(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
        request: PutRequest,
    ) -> StoreResult<ObjectInfo> {
        self.inner.complete_upload(bucket, key, upload_id, parts, request)
    }

    fn abort_multipart_upload(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
    ) -> StoreResult<()> {
        self.inner.abort_upload(bucket, key, upload_id)
    }

    fn list_parts(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &ListPartsRequest,
    ) -> StoreResult<PartsPage> {
        self.inner.parts_page(bucket, key, upload_id, request)
    }

    fn list_multipart_uploads(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        request: &ListUploadsRequest,
    ) -> StoreResult<UploadsPage> {
        self.inner.uploads_page(bucket, request)
    }
}
