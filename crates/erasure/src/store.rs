//! `ErasureStore` as a `Store`: buckets and their settings are kept on every drive (each
//! drive's metadata namespace is a `PosixStore`; settings are read from the first online drive,
//! written to all); objects are manifests plus shards (`write`, `read`); keys ending in '/'
//! (folder objects, always empty) are kept as folders on every drive, as in a posix pool.
//! Versioning is not offered on erasure-coded pools (NotImplemented).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::manifest::Stored;
use super::read::EcReader;
use super::write::EcWriter;
use super::{ErasureStore, Inner};
use isthmus_posix::PosixStore;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::ObjectPath;
use isthmus_store::multipart::{CompletedPart, ListUploadsRequest, PartsPage, UploadsPage};
use isthmus_store::{
    Acl, BoxedWriter, BucketConfig, BucketFacts, BucketInfo, CopyRequest, CreateBucketRequest, DeleteOutcome,
    DeleteRequest, Digests, FileSystemKind, GetRequest, GetResponse, HeadRequest, ListPage, ListPartsRequest,
    ListRequest, ListVersionsRequest, NULL_VERSION, ObjectInfo, ObjectVersion, ObjectWrite, PartRequest, PutRequest,
    RequestContext, Store, VersionsPage,
};

fn gateway() -> RequestContext {
    RequestContext::process()
}

fn is_folder(key: &str) -> bool {
    key.ends_with('/')
}

impl Inner {
    /// Runs `op` on every drive that takes writes; succeeds when `meta_write_quorum` of them
    /// did (or answered `tolerated`), else answers the first drive's error.
    fn on_every_drive<T>(
        &self,
        what: &str,
        op: impl Fn(&PosixStore) -> StoreResult<T>,
        tolerated: impl Fn(&StoreError) -> bool,
    ) -> StoreResult<()> {
        let mut done = 0;
        let mut first_error = None;
        for drive in &self.drives {
            let Some(store) = drive.writable() else { continue };
            match op(&store) {
                Ok(_) => done += 1,
                Err(err) if tolerated(&err) => done += 1,
                Err(err) => {
                    if matches!(err, StoreError::Io(_) | StoreError::IoAt { .. }) {
                        drive.failed(what, &err);
                    }
                    first_error.get_or_insert(err);
                }
            }
        }
        match first_error {
            Some(err) if done < self.meta_write_quorum() => Err(err),
            _ if done < self.meta_write_quorum() => Err(self.too_few(&done.to_string())),
            _ => Ok(()),
        }
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
        self.inner.namespace_drive()?.head_object(&gateway(), &self.bucket, &self.key, &HeadRequest::default())
    }
}

impl Store for ErasureStore {
    fn list_buckets(&self, _cx: &RequestContext) -> StoreResult<Vec<BucketInfo>> {
        self.inner.namespace_drive()?.list_buckets(&gateway())
    }

    fn create_bucket(&self, _cx: &RequestContext, bucket: &str, _request: &CreateBucketRequest) -> StoreResult<()> {
        isthmus_store::key::validate_bucket_name(bucket)?;
        if self.inner.namespace_drive()?.head_bucket(&gateway(), bucket).is_ok() {
            // Whether the requester owns it is for the authorization layer to say.
            return Err(StoreError::BucketAlreadyExists);
        }
        self.inner.on_every_drive(
            "create a bucket",
            |store| store.create_bucket(&gateway(), bucket, &CreateBucketRequest::default()),
            |e| matches!(e, StoreError::BucketAlreadyOwnedByYou | StoreError::BucketAlreadyExists),
        )
    }

    fn head_bucket(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        self.inner.namespace_drive()?.head_bucket(&gateway(), bucket)
    }

    fn bucket_facts(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts> {
        let facts = self.inner.namespace_drive()?.bucket_facts(&gateway(), bucket)?;
        // Never "local": every call does I/O on several drives, so it runs on the blocking pool.
        // Its files are the gateway's: the kernel cannot judge a user's access (issue 28, 3).
        Ok(BucketFacts {
            filesystem: FileSystemKind::Shared("erasure"),
            access: isthmus_store::AccessJudge::Gateway,
            ..facts
        })
    }

    fn delete_bucket(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        let ns = self.inner.namespace_drive()?;
        let one = ListRequest { max_keys: 1, ..Default::default() };
        if !ns.list_objects(&gateway(), bucket, &one)?.objects.is_empty() {
            return Err(StoreError::BucketNotEmpty);
        }
        self.inner.on_every_drive(
            "delete a bucket",
            |store| store.delete_bucket(&gateway(), bucket),
            |e| matches!(e, StoreError::NoSuchBucket),
        )?;
        for drive in &self.inner.drives {
            for area in [super::drives::DATA_DIR, super::drives::UPLOADS_DIR] {
                let _ = std::fs::remove_dir_all(drive.path.join(area).join(bucket));
            }
        }
        Ok(())
    }

    fn bucket_config(&self, _cx: &RequestContext, bucket: &str) -> StoreResult<BucketConfig> {
        self.inner.namespace_drive()?.bucket_config(&gateway(), bucket)
    }

    /// The namespace drive decides whether the write replaces the version it read (under that
    /// drive's settings lock); the settings then go to every drive as they are. Writes of this
    /// pool's settings are serialised in the process, so drives end with the same settings.
    fn set_bucket_config(&self, _cx: &RequestContext, bucket: &str, config: &BucketConfig) -> StoreResult<()> {
        static WRITES: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _serial = WRITES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let namespace = self.inner.namespace_drive()?;
        if config.versioning.is_some() && namespace.bucket_config(&gateway(), bucket)?.versioning.is_none() {
            return Err(StoreError::NotImplemented(format!(
                "Versioning is not supported on erasure-coded pools (bucket {bucket:?} is in pool {:?}): \
                 place versioned buckets in a posix pool",
                self.inner.name
            )));
        }
        namespace.set_bucket_config(&gateway(), bucket, config)?;
        let everywhere = BucketConfig { version: None, ..config.clone() };
        self.inner.on_every_drive(
            "record the settings",
            |s| s.set_bucket_config(&gateway(), bucket, &everywhere),
            |_| false,
        )
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
        self.inner.namespace_drive()?.head_bucket(&gateway(), bucket)?;
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
            return self.inner.namespace_drive()?.get_object(&gateway(), bucket, key, request);
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
            return self.inner.namespace_drive()?.head_object(&gateway(), bucket, key, request);
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
            self.inner.remove_manifests(bucket, key)?;
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
        let ns = self.inner.namespace_drive()?;
        let mut page = ns.list_objects(&gateway(), bucket, request)?;
        let mut objects = Vec::with_capacity(page.objects.len());
        for listed in page.objects {
            if is_folder(&listed.key) {
                objects.push(listed);
                continue;
            }
            // This drive's manifest, else the quorum's (a drive may hold a damaged copy).
            let stored = match super::read_manifest(&ns, &gateway(), bucket, &listed.key) {
                Ok(Some(stored)) => Some(stored),
                _ => self.inner.current(bucket, &listed.key)?,
            };
            if let Some(stored) = stored {
                objects.push(stored.info(&listed.key));
            }
        }
        page.objects = objects;
        Ok(page)
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

    fn set_object_acl(&self, _cx: &RequestContext, bucket: &str, key: &str, acl: Acl) -> StoreResult<()> {
        if is_folder(key) {
            return self.inner.on_every_drive(
                "record an object ACL",
                |s| s.set_object_acl(&gateway(), bucket, key, acl.clone()),
                |_| false,
            );
        }
        self.inner.change_meta(bucket, key, |meta| {
            meta.acl = Some(acl.canned).filter(|c| *c != isthmus_store::CannedAcl::Private);
            meta.grants = acl.grants;
        })
    }

    fn set_object_tags(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        tags: BTreeMap<String, String>,
    ) -> StoreResult<()> {
        isthmus_store::object_meta::validate_tags(&tags)?;
        if is_folder(key) {
            return self.inner.on_every_drive(
                "record object tags",
                |s| s.set_object_tags(&gateway(), bucket, key, tags.clone()),
                |_| false,
            );
        }
        self.inner.change_meta(bucket, key, |meta| meta.tags = tags)
    }

    fn create_multipart_upload(
        &self,
        _cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<String> {
        self.inner.create_upload(bucket, key, request)
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
