//! The identity wrapper of the store stack: every call of the store it wraps, and every write,
//! commit and discard of the writers it returns, runs with the request's Unix identity (the
//! gateway's own for requests without one), whichever thread makes it: a door's runner, a
//! service's own thread pool (arrays), a local socket's connection thread. The switch itself
//! is `identity::run_call`: once per call on threads that switch back at once, once per change
//! of user on threads that rest in their last identity, and not at all on a thread the runner
//! already switched to this request's identity.

use std::collections::BTreeMap;
use std::sync::Arc;

use isthmus_store::identity::{UnixIdentity, run_call};
use isthmus_store::multipart::{CompletedPart, ListUploadsRequest, PartsPage, UploadsPage};
use isthmus_store::{
    Acl, BoxedWriter, BucketConfig, BucketFacts, BucketInfo, CopyRequest, CreateBucketRequest, DeleteOutcome,
    DeleteRequest, Digests, GetRequest, GetResponse, HeadRequest, ListPage, ListPartsRequest, ListRequest,
    ListVersionsRequest, ObjectInfo, ObjectWrite, PartRequest, PutRequest, RequestContext, Store, StoreError,
    StoreResult, VersionsPage,
};

/// `inner`, each call run as the request's Unix identity.
pub struct AsRequester<S: ?Sized>(pub Arc<S>);

/// Runs `f` as `identity`. A switch that fails (it was checked when the gateway started, so
/// this is a broken system, or a thread switched to another user) refuses the call rather
/// than doing its work as someone else.
pub fn run_as<T>(identity: Option<&Arc<UnixIdentity>>, f: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
    run_call(identity, f).unwrap_or_else(|err| {
        tracing::error!(error = %err, "cannot run a call as its request's identity");
        Err(StoreError::AccessDenied)
    })
}

fn run<T>(cx: &RequestContext, f: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
    run_as(cx.identity.as_ref(), f)
}

/// A writer whose writes, commit and discard (dropping it removes its staged file) run as the
/// request's identity.
struct RequesterWriter {
    inner: Option<BoxedWriter>,
    identity: Option<Arc<UnixIdentity>>,
}

impl RequesterWriter {
    fn inner(&mut self) -> &mut BoxedWriter {
        self.inner.as_mut().expect("present until committed or dropped")
    }
}

impl ObjectWrite for RequesterWriter {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()> {
        let identity = self.identity.clone();
        run_as(identity.as_ref(), || self.inner().write_all(bytes))
    }

    fn write_zeros(&mut self, len: u64) -> StoreResult<()> {
        let identity = self.identity.clone();
        run_as(identity.as_ref(), || self.inner().write_zeros(len))
    }

    fn digests(&self) -> Digests {
        self.inner.as_ref().expect("present until committed or dropped").digests()
    }

    fn commit(mut self: Box<Self>) -> StoreResult<ObjectInfo> {
        let inner = self.inner.take().expect("present until committed");
        run_as(self.identity.as_ref(), || inner.commit())
    }
}

impl Drop for RequesterWriter {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            let _ = run_as(self.identity.as_ref(), || {
                drop(inner);
                Ok(())
            });
        }
    }
}

fn writer(cx: &RequestContext, inner: BoxedWriter) -> BoxedWriter {
    Box::new(RequesterWriter { inner: Some(inner), identity: cx.identity.clone() })
}

impl<S: Store + ?Sized> Store for AsRequester<S> {
    fn list_buckets(&self, cx: &RequestContext) -> StoreResult<Vec<BucketInfo>> {
        run(cx, || self.0.list_buckets(cx))
    }

    fn create_bucket(&self, cx: &RequestContext, bucket: &str, request: &CreateBucketRequest) -> StoreResult<()> {
        run(cx, || self.0.create_bucket(cx, bucket, request))
    }

    fn head_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        run(cx, || self.0.head_bucket(cx, bucket))
    }

    fn bucket_facts(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts> {
        run(cx, || self.0.bucket_facts(cx, bucket))
    }

    fn delete_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        run(cx, || self.0.delete_bucket(cx, bucket))
    }

    fn bucket_config(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketConfig> {
        run(cx, || self.0.bucket_config(cx, bucket))
    }

    fn set_bucket_config(&self, cx: &RequestContext, bucket: &str, config: &BucketConfig) -> StoreResult<()> {
        run(cx, || self.0.set_bucket_config(cx, bucket, config))
    }

    fn put_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<BoxedWriter> {
        run(cx, || self.0.put_object(cx, bucket, key, request)).map(|inner| writer(cx, inner))
    }

    fn get_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        // The body is read through the descriptor opened here, as the requester: reading
        // it needs no identity.
        run(cx, || self.0.get_object(cx, bucket, key, request))
    }

    fn head_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo> {
        run(cx, || self.0.head_object(cx, bucket, key, request))
    }

    fn delete_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &DeleteRequest,
    ) -> StoreResult<DeleteOutcome> {
        run(cx, || self.0.delete_object(cx, bucket, key, request))
    }

    fn copy_object(
        &self,
        cx: &RequestContext,
        source: (&str, &str),
        destination: (&str, &str),
        request: &CopyRequest,
    ) -> StoreResult<ObjectInfo> {
        run(cx, || self.0.copy_object(cx, source, destination, request))
    }

    fn list_objects(&self, cx: &RequestContext, bucket: &str, request: &ListRequest) -> StoreResult<ListPage> {
        run(cx, || self.0.list_objects(cx, bucket, request))
    }

    fn list_object_versions(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListVersionsRequest,
    ) -> StoreResult<VersionsPage> {
        run(cx, || self.0.list_object_versions(cx, bucket, request))
    }

    fn set_object_acl(&self, cx: &RequestContext, bucket: &str, key: &str, acl: Acl) -> StoreResult<()> {
        run(cx, || self.0.set_object_acl(cx, bucket, key, acl))
    }

    fn set_object_tags(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        tags: BTreeMap<String, String>,
    ) -> StoreResult<()> {
        run(cx, || self.0.set_object_tags(cx, bucket, key, tags))
    }

    fn create_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<String> {
        run(cx, || self.0.create_multipart_upload(cx, bucket, key, request))
    }

    fn upload_part(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
    ) -> StoreResult<BoxedWriter> {
        run(cx, || self.0.upload_part(cx, bucket, key, upload_id, request)).map(|inner| writer(cx, inner))
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
        run(cx, || self.0.complete_multipart_upload(cx, bucket, key, upload_id, parts, request))
    }

    fn abort_multipart_upload(&self, cx: &RequestContext, bucket: &str, key: &str, upload_id: &str) -> StoreResult<()> {
        run(cx, || self.0.abort_multipart_upload(cx, bucket, key, upload_id))
    }

    fn list_parts(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &ListPartsRequest,
    ) -> StoreResult<PartsPage> {
        run(cx, || self.0.list_parts(cx, bucket, key, upload_id, request))
    }

    fn list_multipart_uploads(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListUploadsRequest,
    ) -> StoreResult<UploadsPage> {
        run(cx, || self.0.list_multipart_uploads(cx, bucket, request))
    }

    // upload_part_copy and put_bytes keep the trait's defaults: they call the methods above,
    // so the source is read and the part written as the requester.

    fn bucket_location(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<String>> {
        run(cx, || self.0.bucket_location(cx, bucket))
    }

    fn object_file(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<std::fs::File>> {
        run(cx, || self.0.object_file(cx, bucket, key))
    }

    fn object_file_for_update(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
    ) -> StoreResult<Option<isthmus_store::update::UpdateFile>> {
        run(cx, || self.0.object_file_for_update(cx, bucket, key))
    }

    fn read_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        run(cx, || self.0.read_derived(cx, bucket, key, kind))
    }

    fn write_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str, bytes: &[u8]) -> StoreResult<()> {
        run(cx, || self.0.write_derived(cx, bucket, key, kind, bytes))
    }
}
