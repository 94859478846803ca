//! The engine calls as the authorization layer passes them (`Store`, `MultipartStore` and, where
//! the backend has them, `ObjectFiles`): each checks the caller's rights in the bucket (owner
//! rules, grants, ACLs, policy; the kernel with Unix identities) and the scopes of a bearer
//! token, if the request has one, before the backend sees it.

use super::{Access, Authorized, Read, is_superuser};
use crate::policy::BucketPolicy;
use isthmus_store::bucket_config::BucketSettings;
use isthmus_store::conditions::ETagMatch;
use isthmus_store::multipart::{CompletedPart, ListUploadsRequest, PartsPage, UploadsPage};
use isthmus_store::scopes::ScopeAccess;
use isthmus_store::{
    BoxedWriter, BucketConfig, BucketFacts, BucketInfo, CopyRequest, CreateBucketRequest, DeleteOutcome, DeleteRequest,
    GetRequest, GetResponse, HeadRequest, ListPage, ListPartsRequest, ListRequest, ListVersionsRequest, MultipartStore,
    ObjectChange, ObjectFiles, ObjectInfo, PartRequest, Principal, PutRequest, RequestContext, Store, StoreError,
    StoreResult, UpdateFile, VersionsPage,
};

/// AccessDenied unless the request's token, if any, reaches into `bucket` at all (enough to
/// learn that it exists and where it is).
fn require_touch(cx: &RequestContext, bucket: &str) -> StoreResult<()> {
    match &cx.scopes {
        Some(scopes) if !scopes.touches(bucket) => {
            Err(StoreError::OutOfScope(format!("any storage scope in /{bucket}")))
        }
        _ => Ok(()),
    }
}

/// AccessDenied unless the request's token, if any, may read everything a listing of `bucket`
/// under `prefix` could return.
fn require_listing(cx: &RequestContext, bucket: &str, prefix: &str) -> StoreResult<()> {
    match &cx.scopes {
        Some(scopes) if !scopes.allows_listing(bucket, prefix) => {
            Err(StoreError::OutOfScope(format!("storage.read:/{bucket}/{prefix} (list beneath a scope's path)")))
        }
        _ => Ok(()),
    }
}

impl<S: Store + ?Sized> Authorized<S> {
    /// Whether the request's token lets it only create `key` (storage.create without
    /// storage.modify): then an existing object is refused here, and the caller makes the
    /// write conditional on there still being none. AccessDenied if it may not even create.
    fn creating_only(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<bool> {
        let Some(scopes) = &cx.scopes else { return Ok(false) };
        if scopes.allows(ScopeAccess::Modify, bucket, key) {
            return Ok(false);
        }
        scopes.require(ScopeAccess::Create, bucket, key)?;
        match self.inner.head_object(cx, bucket, key, &HeadRequest::default()) {
            Ok(_) => Err(StoreError::OutOfScope(format!(
                "storage.modify:/{bucket}/{key} (the object exists; storage.create only adds new objects)"
            ))),
            Err(StoreError::NoSuchKey | StoreError::LatestIsDeleteMarker { .. } | StoreError::NoSuchBucket) => Ok(true),
            Err(err) => Err(err),
        }
    }
}

impl<S: Store + ?Sized> Store for Authorized<S> {
    /// Each principal sees the buckets it may use.
    fn list_buckets(&self, cx: &RequestContext) -> StoreResult<Vec<BucketInfo>> {
        if cx.principal == Principal::Anonymous {
            return Err(StoreError::denied("anonymous requests may not list buckets"));
        }
        let mut visible = Vec::new();
        for bucket in self.inner.list_buckets(cx)? {
            if self.kernel_decides(cx, &bucket.name) || self.may_use(cx, &bucket.name)? {
                visible.push(bucket);
            }
        }
        if let Some(scopes) = &cx.scopes {
            visible.retain(|bucket| scopes.touches(&bucket.name));
        }
        Ok(visible)
    }

    /// Any principal may create a bucket; a user becomes its recorded owner. An existing bucket
    /// answers BucketAlreadyOwnedByYou to its owner and BucketAlreadyExists to everyone else.
    fn create_bucket(&self, cx: &RequestContext, bucket: &str, request: &CreateBucketRequest) -> StoreResult<()> {
        cx.require_scope(ScopeAccess::Create, bucket, "")?;
        if cx.principal == Principal::Anonymous {
            return Err(StoreError::denied("anonymous requests may not create buckets"));
        }
        match self.inner.create_bucket(cx, bucket, request) {
            Ok(()) => {
                if let Some(quotas) = &self.quotas {
                    quotas.bucket_created(bucket, cx.user_name());
                }
                match cx.user_name() {
                    Some(user) => self.inner.set_bucket_owner(cx, bucket, user),
                    None => Ok(()),
                }
            }
            Err(StoreError::BucketAlreadyExists) if self.owns(cx, bucket) => Err(StoreError::BucketAlreadyOwnedByYou),
            Err(err) => Err(err),
        }
    }

    fn head_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        require_touch(cx, bucket)?;
        self.require(cx, bucket, Access::Read)?;
        self.inner.head_bucket(cx, bucket)
    }

    /// A bucket's facts (its pool: GetBucketLocation) are told to whoever may HEAD it.
    fn bucket_facts(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts> {
        self.head_bucket(cx, bucket)?;
        self.inner.bucket_facts(cx, bucket)
    }

    fn delete_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        cx.require_scope(ScopeAccess::Modify, bucket, "")?;
        self.require(cx, bucket, Access::Owner)?;
        self.inner.delete_bucket(cx, bucket)?;
        if let Some(quotas) = &self.quotas {
            quotas.bucket_deleted(bucket);
        }
        Ok(())
    }

    /// Reading a bucket's settings is its owner's, with any scope in the bucket (a token that
    /// may change one setting reads them all to change it).
    fn bucket_config(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketConfig> {
        require_touch(cx, bucket)?;
        self.require(cx, bucket, Access::Owner)?;
        self.inner.bucket_config(cx, bucket)
    }

    /// Changing them is the owner's, and giving the bucket to someone only the process's and
    /// root's; a public ACL or policy must pass the public access block being written. The
    /// backend replaces only the very settings checked here (their version goes with the
    /// write): a write naming another version, or none, is checked against settings that may
    /// no longer be the bucket's (another gateway changed them), so it is answered
    /// ConfigConflict rather than passed on.
    fn set_bucket_config(&self, cx: &RequestContext, bucket: &str, config: &BucketConfig) -> StoreResult<()> {
        cx.require_scope(ScopeAccess::Modify, bucket, "")?;
        self.require(cx, bucket, Access::Owner)?;
        let current = self.inner.bucket_config(cx, bucket)?;
        if config.version.is_some() && config.version != current.version {
            return Err(StoreError::ConfigConflict);
        }
        let changed = current.changed(config);
        if changed.owner && !is_superuser(cx) {
            return Err(StoreError::denied("only root may give a bucket to another owner"));
        }
        let block = config.public_access_block.unwrap_or_default();
        if changed.acl && config.acl.canned.is_public() && block.block_public_acls {
            return Err(StoreError::denied("the bucket's public access block refuses public ACLs"));
        }
        if changed.policy
            && let Some(document) = &config.policy
            && BucketPolicy::parse(bucket, document)?.is_public()
            && block.block_public_policy
        {
            return Err(StoreError::denied("the bucket's public access block refuses public policies"));
        }
        let checked = BucketConfig { version: current.version, ..config.clone() };
        self.inner.set_bucket_config(cx, bucket, &checked)
    }

    fn put_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<BoxedWriter> {
        let mut request = request;
        if self.creating_only(cx, bucket, key)? {
            // Atomic as well as checked first: a concurrent writer cannot slip in between.
            request.if_none_match = Some(ETagMatch::Any);
        }
        self.require_write(cx, bucket, request.meta.acl)?;
        let admitted = match &self.quotas {
            Some(quotas) => quotas.admit_write(&*self.inner, cx, bucket, key, request.size_hint)?,
            None => None,
        };
        let writer = self.inner.put_object(cx, bucket, key, request)?;
        Ok(match admitted {
            Some(admitted) => admitted.writer(writer, true),
            None => writer,
        })
    }

    fn get_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        self.require_object_read(cx, bucket, key, request.version_id.as_deref(), cx.expected_bucket_owner.as_deref())?;
        self.inner.get_object(cx, bucket, key, request)
    }

    fn head_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo> {
        self.require_object_read(cx, bucket, key, request.version_id.as_deref(), cx.expected_bucket_owner.as_deref())?;
        self.inner.head_object(cx, bucket, key, request)
    }

    fn delete_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &DeleteRequest,
    ) -> StoreResult<DeleteOutcome> {
        cx.require_scope(ScopeAccess::Modify, bucket, key)?;
        self.require(cx, bucket, Access::Write)?;
        let size = match &self.quotas {
            Some(quotas) if request.version_id.is_none() && quotas.may_apply(&*self.inner, bucket)? => {
                crate::quota::current_size(&*self.inner, cx, bucket, key)?
            }
            _ => None,
        };
        let outcome = self.inner.delete_object(cx, bucket, key, request)?;
        if let (Some(quotas), Some(size)) = (&self.quotas, size) {
            quotas.deleted(bucket, size);
        }
        Ok(outcome)
    }

    /// The source is judged exactly as a GET of it (`require_object_read`): a copy reads
    /// nothing a GET would not.
    fn copy_object(
        &self,
        cx: &RequestContext,
        source: (&str, &str),
        destination: (&str, &str),
        request: &CopyRequest,
    ) -> StoreResult<ObjectInfo> {
        let (version, expected) = (request.source_version_id.as_deref(), cx.expected_source_owner.as_deref());
        self.require_object_read(cx, source.0, source.1, version, expected)?;
        self.creating_only(cx, destination.0, destination.1)?;
        self.require_write(cx, destination.0, request.acl)?;
        let admitted = match &self.quotas {
            Some(quotas) => {
                let head = HeadRequest { version_id: request.source_version_id.clone(), ..HeadRequest::default() };
                let size = self.inner.head_object(cx, source.0, source.1, &head)?.size;
                quotas.admit_write(&*self.inner, cx, destination.0, destination.1, Some(size))?
            }
            None => None,
        };
        let info = self.inner.copy_object(cx, source, destination, request)?;
        if let Some(admitted) = admitted {
            admitted.settle(&info);
        }
        Ok(info)
    }

    fn list_objects(&self, cx: &RequestContext, bucket: &str, request: &ListRequest) -> StoreResult<ListPage> {
        require_listing(cx, bucket, &request.prefix)?;
        let read = Read::Listing { prefix: &request.prefix };
        self.require_read(cx, bucket, read, cx.expected_bucket_owner.as_deref())?;
        self.inner.list_objects(cx, bucket, request)
    }

    /// Bucket policies allow `s3:ListBucket`, not `s3:ListBucketVersions`: listing versions
    /// takes read access by owner, grant or bucket ACL, and a policy's Deny of listing the
    /// prefix still refuses it.
    fn list_object_versions(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListVersionsRequest,
    ) -> StoreResult<VersionsPage> {
        require_listing(cx, bucket, &request.prefix)?;
        let read = Read::Versions { prefix: &request.prefix };
        self.require_read(cx, bucket, read, cx.expected_bucket_owner.as_deref())?;
        self.inner.list_object_versions(cx, bucket, request)
    }

    /// Changing an object's ACL or tags is the bucket owner's; a public ACL must pass the
    /// bucket's public access block.
    fn update_object(&self, cx: &RequestContext, bucket: &str, key: &str, change: ObjectChange) -> StoreResult<()> {
        cx.require_scope(ScopeAccess::Modify, bucket, key)?;
        self.require(cx, bucket, Access::Owner)?;
        if let ObjectChange::Acl(acl) = &change {
            self.check_acl_allowed(cx, bucket, Some(acl.canned))?;
        }
        self.inner.update_object(cx, bucket, key, change)
    }

    /// The judged calls of `ObjectFiles`, where the backend has them.
    fn files(&self) -> Option<&dyn ObjectFiles> {
        self.inner.files().map(|_| self as &dyn ObjectFiles)
    }

    /// The source is judged exactly as a GET of it (`require_object_read`).
    #[allow(clippy::too_many_arguments, reason = "the Store trait's signature")]
    fn upload_part_copy(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
        source: (&str, &str),
        source_request: &GetRequest,
    ) -> StoreResult<ObjectInfo> {
        let (version, expected) = (source_request.version_id.as_deref(), cx.expected_source_owner.as_deref());
        self.require_object_read(cx, source.0, source.1, version, expected)?;
        cx.require_scope(ScopeAccess::Create, bucket, key)?;
        self.require(cx, bucket, Access::Write)?;
        // Held while the part is written: a part is not usage, but it may not be written past
        // a quota the whole object could never fit in.
        let _admitted = match &self.quotas {
            Some(quotas) => {
                let head = HeadRequest { version_id: source_request.version_id.clone(), ..HeadRequest::default() };
                let size = self.inner.head_object(cx, source.0, source.1, &head)?.size;
                quotas.admit_part(&*self.inner, cx, bucket, Some(size))?
            }
            None => None,
        };
        self.inner.upload_part_copy(cx, bucket, key, upload_id, request, source, source_request)
    }
}

impl<S: Store + ?Sized> MultipartStore for Authorized<S> {
    fn create_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<String> {
        self.creating_only(cx, bucket, key)?;
        self.require_write(cx, bucket, request.meta.acl)?;
        self.inner.create_multipart_upload(cx, bucket, key, request)
    }

    fn upload_part(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
    ) -> StoreResult<BoxedWriter> {
        cx.require_scope(ScopeAccess::Create, bucket, key)?;
        self.require(cx, bucket, Access::Write)?;
        let admitted = match &self.quotas {
            Some(quotas) => quotas.admit_part(&*self.inner, cx, bucket, request.size_hint)?,
            None => None,
        };
        let writer = self.inner.upload_part(cx, bucket, key, upload_id, request)?;
        Ok(match admitted {
            Some(admitted) => admitted.writer(writer, false),
            None => writer,
        })
    }

    fn complete_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
        request: PutRequest,
    ) -> StoreResult<ObjectInfo> {
        let mut request = request;
        if self.creating_only(cx, bucket, key)? {
            request.if_none_match = Some(ETagMatch::Any);
        }
        self.require(cx, bucket, Access::Write)?;
        let admitted = match &self.quotas {
            Some(quotas) => {
                let size = crate::quota::Quotas::completed_size(&*self.inner, cx, bucket, key, upload_id, parts)?;
                quotas.admit_write(&*self.inner, cx, bucket, key, Some(size))?
            }
            None => None,
        };
        let info = self.inner.complete_multipart_upload(cx, bucket, key, upload_id, parts, request)?;
        if let Some(admitted) = admitted {
            admitted.settle(&info);
        }
        Ok(info)
    }

    fn abort_multipart_upload(&self, cx: &RequestContext, bucket: &str, key: &str, upload_id: &str) -> StoreResult<()> {
        cx.require_scope(ScopeAccess::Create, bucket, key)?;
        self.require(cx, bucket, Access::Write)?;
        self.inner.abort_multipart_upload(cx, bucket, key, upload_id)
    }

    fn list_parts(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &ListPartsRequest,
    ) -> StoreResult<PartsPage> {
        cx.require_scope(ScopeAccess::Create, bucket, key)?;
        self.require(cx, bucket, Access::Read)?;
        self.inner.list_parts(cx, bucket, key, upload_id, request)
    }

    fn list_multipart_uploads(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListUploadsRequest,
    ) -> StoreResult<UploadsPage> {
        cx.require_scope(ScopeAccess::Create, bucket, &request.prefix)?;
        self.require(cx, bucket, Access::Read)?;
        self.inner.list_multipart_uploads(cx, bucket, request)
    }
}

/// An object's file and the records derived from it are judged as the object is: reading as a
/// GET, an overwrite in place as a PUT.
impl<S: Store + ?Sized> ObjectFiles for Authorized<S> {
    fn object_file(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<std::fs::File>> {
        self.require_object_read(cx, bucket, key, None, cx.expected_bucket_owner.as_deref())?;
        self.inner.files().map_or(Ok(None), |files| files.object_file(cx, bucket, key))
    }

    /// An overwrite in place: the bucket's write permission, and a token's storage.modify (one
    /// that may only create new objects updates none).
    fn object_file_for_update(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<UpdateFile>> {
        if self.creating_only(cx, bucket, key)? {
            return Err(StoreError::NoSuchKey);
        }
        self.require_write(cx, bucket, None)?;
        self.inner.files().map_or(Ok(None), |files| files.object_file_for_update(cx, bucket, key))
    }

    fn read_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        self.require_object_read(cx, bucket, key, None, cx.expected_bucket_owner.as_deref())?;
        self.inner.files().map_or(Ok(None), |files| files.read_derived(cx, bucket, key, kind))
    }

    /// Whoever may read an object may keep what is derived from it: it is a cache of reads.
    fn write_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str, bytes: &[u8]) -> StoreResult<()> {
        self.require_object_read(cx, bucket, key, None, cx.expected_bucket_owner.as_deref())?;
        self.inner.files().map_or(Ok(()), |files| files.write_derived(cx, bucket, key, kind, bytes))
    }
}
