//! The erasure pool's files are the gateway's own (shards and records): `ErasureStore` runs
//! every call of its crate-private `ErasureCalls`, and every read and write of the streams they
//! return, with the gateway's identity, whatever Unix identity the request's thread was
//! switched to. Its buckets say `AccessJudge::Gateway`, so the authorization layer judges them.

use std::io::Read;

use super::ErasureStore;
use isthmus_store::identity::as_gateway;
use isthmus_store::scoped::no_files;
use isthmus_store::{
    BoxedReader, BoxedWriter, Digests, GetResponse, ObjectInfo, ObjectRead, ObjectWrite, RequestContext, StoreResult,
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

/// Every call with the gateway's identity, whoever asks.
fn run<T>(_: &RequestContext, call: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
    as_gateway(call)
}

fn writer(_: &RequestContext, inner: BoxedWriter) -> BoxedWriter {
    Box::new(GatewayWriter(inner))
}

fn response(_: &RequestContext, response: GetResponse) -> GetResponse {
    GetResponse { body: Box::new(GatewayReader(response.body)), ..response }
}

// `files`: none (shards are no object's file); `upload_part_copy` keeps the trait's default: it
// calls the methods here, so the source is read and the part written with the gateway's
// identity.
isthmus_store::scoped_store! {
    impl[] for ErasureStore, inner: self.calls,
    run: run, writer: writer, response: response, files: no_files,
}
