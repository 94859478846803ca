//! The erasure pool's files are the gateway's own (shards and records): `ErasureStore` runs
//! every call of its crate-private `ErasureCalls`, and every read and write of the streams they
//! return, with the gateway's identity, whatever Unix identity the request's thread was
//! switched to. Its buckets say `AccessJudge::Gateway`, so the authorization layer judges them.

use std::io::Read;

use super::ErasureStore;
use isthmus_store::identity::as_gateway;
use isthmus_store::multipart::{CompletedPart, ListUploadsRequest, PartsPage, UploadsPage};
use isthmus_store::{
    BoxedReader, BoxedWriter, BucketConfig, BucketFacts, BucketInfo, CopyRequest, CreateBucketRequest, DeleteOutcome,
    DeleteRequest, Digests, GetRequest, GetResponse, HeadRequest, ListPage, ListPartsRequest, ListRequest,
    ListVersionsRequest, MultipartStore, ObjectChange, ObjectInfo, ObjectRead, ObjectWrite, PartRequest, PutRequest,
    RequestContext, Store, StoreResult, VersionsPage,
};

/// A writer of the pool: its writes and commit run with the gateway's identity.
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

/// A reader of the pool: its reads run with the gateway's identity.
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

/// Methods that call the same method of `self.calls` with the same arguments, with the
/// gateway's identity, and return what it returns (calls that return no stream).
macro_rules! as_gateway {
    ($(fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty;)*) => {
        $(fn $name(&self $(, $arg: $ty)*) -> $ret {
            as_gateway(|| self.calls.$name($($arg),*))
        })*
    };
}

impl Store for ErasureStore {
    as_gateway! {
        fn list_buckets(&self, cx: &RequestContext) -> StoreResult<Vec<BucketInfo>>;
        fn create_bucket(&self, cx: &RequestContext, bucket: &str, request: &CreateBucketRequest) -> StoreResult<()>;
        fn head_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()>;
        fn bucket_facts(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts>;
        fn delete_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()>;
        fn bucket_config(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketConfig>;
        fn set_bucket_config(&self, cx: &RequestContext, bucket: &str, config: &BucketConfig) -> StoreResult<()>;
        fn head_object(&self, cx: &RequestContext, bucket: &str, key: &str, request: &HeadRequest)
            -> StoreResult<ObjectInfo>;
        fn delete_object(&self, cx: &RequestContext, bucket: &str, key: &str, request: &DeleteRequest)
            -> StoreResult<DeleteOutcome>;
        fn copy_object(&self, cx: &RequestContext, source: (&str, &str), destination: (&str, &str),
            request: &CopyRequest) -> StoreResult<ObjectInfo>;
        fn list_objects(&self, cx: &RequestContext, bucket: &str, request: &ListRequest) -> StoreResult<ListPage>;
        fn list_object_versions(&self, cx: &RequestContext, bucket: &str, request: &ListVersionsRequest)
            -> StoreResult<VersionsPage>;
        fn update_object(&self, cx: &RequestContext, bucket: &str, key: &str, change: ObjectChange)
            -> StoreResult<()>;
    }

    fn put_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<BoxedWriter> {
        as_gateway(|| self.calls.put_object(cx, bucket, key, request)).map(writer)
    }

    fn get_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse> {
        let response = as_gateway(|| self.calls.get_object(cx, bucket, key, request))?;
        Ok(GetResponse { body: Box::new(GatewayReader(response.body)), ..response })
    }

    // `files` keeps the default (none: shards are no object's file); `upload_part_copy` too: it
    // calls the methods here, so the source is read and the part written with the gateway's
    // identity.
}

impl MultipartStore for ErasureStore {
    as_gateway! {
        fn create_multipart_upload(&self, cx: &RequestContext, bucket: &str, key: &str, request: PutRequest)
            -> StoreResult<String>;
        fn complete_multipart_upload(&self, cx: &RequestContext, bucket: &str, key: &str, upload_id: &str,
            parts: &[CompletedPart], request: PutRequest) -> StoreResult<ObjectInfo>;
        fn abort_multipart_upload(&self, cx: &RequestContext, bucket: &str, key: &str, upload_id: &str)
            -> StoreResult<()>;
        fn list_parts(&self, cx: &RequestContext, bucket: &str, key: &str, upload_id: &str,
            request: &ListPartsRequest) -> StoreResult<PartsPage>;
        fn list_multipart_uploads(&self, cx: &RequestContext, bucket: &str, request: &ListUploadsRequest)
            -> StoreResult<UploadsPage>;
    }

    fn upload_part(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
    ) -> StoreResult<BoxedWriter> {
        as_gateway(|| self.calls.upload_part(cx, bucket, key, upload_id, request)).map(writer)
    }
}
