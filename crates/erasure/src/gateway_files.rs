//! A backend whose files are the gateway's own (an erasure-coded pool's shards and records):
//! `GatewayFiles` runs every call of it, and every read and write of the streams it returns,
//! with the gateway's identity, whatever Unix identity the request's thread was switched to.
//! Such a backend's buckets say `AccessJudge::Gateway`, so the authorization layer judges them.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

use isthmus_store::identity::as_gateway;
use isthmus_store::multipart::{CompletedPart, ListUploadsRequest, PartsPage, UploadsPage};
use isthmus_store::{
    Acl, BoxedReader, BoxedWriter, BucketConfig, BucketFacts, BucketInfo, CopyRequest, CreateBucketRequest,
    DeleteOutcome, DeleteRequest, Digests, GetRequest, GetResponse, HeadRequest, ListPage, ListPartsRequest,
    ListRequest, ListVersionsRequest, ObjectInfo, ObjectRead, ObjectWrite, PartRequest, PutRequest, RequestContext,
    Store, StoreResult, VersionsPage,
};

/// `inner`, called with the gateway's identity.
pub struct GatewayFiles<S: ?Sized>(pub Arc<S>);

/// A writer of such a backend: its writes and commit run with the gateway's identity.
struct GatewayWriter(BoxedWriter);

impl ObjectWrite for GatewayWriter {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()> {
        as_gateway(|| self.0.write_all(bytes))
    }

    fn digests(&self) -> Digests {
        self.0.digests()
    }

    fn commit(self: Box<Self>) -> StoreResult<ObjectInfo> {
        as_gateway(|| self.0.commit())
    }
}

/// A reader of such a backend: its reads run with the gateway's identity.
struct GatewayReader(BoxedReader);

impl Read for GatewayReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        as_gateway(|| self.0.read(buf))
    }
}

impl ObjectRead for GatewayReader {
    fn remaining(&self) -> u64 {
        self.0.remaining()
    }
}

fn writer(inner: BoxedWriter) -> BoxedWriter {
    Box::new(GatewayWriter(inner))
}

impl<S: Store + ?Sized> Store for GatewayFiles<S> {
    fn list_buckets(&self, cx: &RequestContext) -> StoreResult<Vec<BucketInfo>> {
        as_gateway(|| self.0.list_buckets(cx))
    }

    fn create_bucket(&self, cx: &RequestContext, bucket: &str, request: &CreateBucketRequest) -> StoreResult<()> {
        as_gateway(|| self.0.create_bucket(cx, bucket, request))
    }

    fn head_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        as_gateway(|| self.0.head_bucket(cx, bucket))
    }

    fn bucket_facts(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts> {
        as_gateway(|| self.0.bucket_facts(cx, bucket))
    }

    fn delete_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()> {
        as_gateway(|| self.0.delete_bucket(cx, bucket))
    }

    fn bucket_config(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketConfig> {
        as_gateway(|| self.0.bucket_config(cx, bucket))
    }

    fn set_bucket_config(&self, cx: &RequestContext, bucket: &str, config: &BucketConfig) -> StoreResult<()> {
        as_gateway(|| self.0.set_bucket_config(cx, bucket, config))
    }

    fn put_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<BoxedWriter> {
        as_gateway(|| self.0.put_object(cx, bucket, key, request)).map(writer)
    }

    fn get_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        let response = as_gateway(|| self.0.get_object(cx, bucket, key, request))?;
        Ok(GetResponse { body: Box::new(GatewayReader(response.body)), ..response })
    }

    fn head_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo> {
        as_gateway(|| self.0.head_object(cx, bucket, key, request))
    }

    fn delete_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &DeleteRequest,
    ) -> StoreResult<DeleteOutcome> {
        as_gateway(|| self.0.delete_object(cx, bucket, key, request))
    }

    fn copy_object(
        &self,
        cx: &RequestContext,
        source: (&str, &str),
        destination: (&str, &str),
        request: &CopyRequest,
    ) -> StoreResult<ObjectInfo> {
        as_gateway(|| self.0.copy_object(cx, source, destination, request))
    }

    fn list_objects(&self, cx: &RequestContext, bucket: &str, request: &ListRequest) -> StoreResult<ListPage> {
        as_gateway(|| self.0.list_objects(cx, bucket, request))
    }

    fn list_object_versions(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListVersionsRequest,
    ) -> StoreResult<VersionsPage> {
        as_gateway(|| self.0.list_object_versions(cx, bucket, request))
    }

    fn set_object_acl(&self, cx: &RequestContext, bucket: &str, key: &str, acl: Acl) -> StoreResult<()> {
        as_gateway(|| self.0.set_object_acl(cx, bucket, key, acl))
    }

    fn set_object_tags(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        tags: BTreeMap<String, String>,
    ) -> StoreResult<()> {
        as_gateway(|| self.0.set_object_tags(cx, bucket, key, tags))
    }

    fn create_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<String> {
        as_gateway(|| self.0.create_multipart_upload(cx, bucket, key, request))
    }

    fn upload_part(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
    ) -> StoreResult<BoxedWriter> {
        as_gateway(|| self.0.upload_part(cx, bucket, key, upload_id, request)).map(writer)
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
        as_gateway(|| self.0.complete_multipart_upload(cx, bucket, key, upload_id, parts, request))
    }

    fn abort_multipart_upload(&self, cx: &RequestContext, bucket: &str, key: &str, upload_id: &str) -> StoreResult<()> {
        as_gateway(|| self.0.abort_multipart_upload(cx, bucket, key, upload_id))
    }

    fn list_parts(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &ListPartsRequest,
    ) -> StoreResult<PartsPage> {
        as_gateway(|| self.0.list_parts(cx, bucket, key, upload_id, request))
    }

    fn list_multipart_uploads(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListUploadsRequest,
    ) -> StoreResult<UploadsPage> {
        as_gateway(|| self.0.list_multipart_uploads(cx, bucket, request))
    }

    // upload_part_copy and put_bytes keep the trait's defaults: they call the methods above,
    // so the source is read and the part written with the gateway's identity.

    fn bucket_location(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<String>> {
        as_gateway(|| self.0.bucket_location(cx, bucket))
    }

    fn object_file(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<std::fs::File>> {
        as_gateway(|| self.0.object_file(cx, bucket, key))
    }

    fn read_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        as_gateway(|| self.0.read_derived(cx, bucket, key, kind))
    }

    fn write_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str, bytes: &[u8]) -> StoreResult<()> {
        as_gateway(|| self.0.write_derived(cx, bucket, key, kind, bytes))
    }
}
