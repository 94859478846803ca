//! Where the gateway's engine work runs: the one place that starts engine calls. It gives each
//! call its request context (who asks), decides its I/O placement (inline on the async worker
//! for short calls on local file systems, the blocking pool otherwise), moves to the pool a call
//! that would have had to do long work inline (`StoreError::WouldBlock`), and starts the
//! blocking tasks that stream large bodies. With `identity = "posix"` every call and stream
//! runs with the request's Unix identity, inline or on the pool: on the pool the thread's
//! file-system ids are switched around the call and put back after it (`run_as`); an async
//! worker keeps the identity of its last inline call until another is needed
//! (`run_as_resting`).

use std::sync::Arc;

use isthmus_store::{RequestContext, Store, StoreError, StoreResult};
use s3s::S3Result;

use crate::error::{IoPolicy, join_error, s3_error};

/// What kind of engine call this is, for placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A short call that only reads (HEAD, small GET, a listing page).
    Read,
    /// A short call that changes something (delete, tags, bucket changes).
    Write,
    /// A call that moves data or fsyncs a lot (copies, multipart completion): always the pool.
    Long,
    /// A call that walks many entries (a listing page: a directory read and a stat and metadata
    /// read per key, milliseconds for 1,000 keys): always the pool, so a large page never holds
    /// an async worker while small requests wait behind it.
    Scan,
}

/// The engine behind the gateway, with the placement policy of its file systems.
#[derive(Clone)]
pub struct Engine {
    store: Arc<dyn Store>,
    io: IoPolicy,
}

impl Engine {
    pub fn new(store: Arc<dyn Store>, io: IoPolicy) -> Self {
        Self { store, io }
    }

    /// The engine itself, for doors that call it from their own threads (array selections).
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    pub fn io(&self) -> IoPolicy {
        self.io
    }

    /// Runs one engine call for the request `cx`. Inline calls run with a context that may not
    /// block; one that answers `WouldBlock` runs again on the blocking pool, so no long work
    /// (hashing a file written outside the gateway) ever occupies an async worker.
    pub async fn call<T, F>(&self, cx: &RequestContext, placement: Placement, f: F) -> S3Result<T>
    where
        F: Fn(&dyn Store, &RequestContext) -> StoreResult<T> + Send + 'static,
        T: Send + 'static,
    {
        let inline = match placement {
            Placement::Read => self.io.inline_reads,
            Placement::Write => self.io.inline_writes,
            Placement::Long | Placement::Scan => false,
        };
        if inline {
            // The async workers touch files only in these inline calls: a worker keeps the
            // identity of its last call, so a user's consecutive requests switch once. Every
            // call states its identity (the gateway's own included), so none runs with a
            // stale one. The blocking pool also runs maintenance: there `run_as` restores at once.
            let inline_cx = cx.with_may_block(false);
            match inline_cx.run_as_resting(|| f(&*self.store, &inline_cx)) {
                Err(StoreError::WouldBlock) => tracing::debug!("the call needs long work: moved to the blocking pool"),
                other => return other.map_err(s3_error),
            }
        }
        let store = self.store.clone();
        let cx = cx.with_may_block(true);
        tokio::task::spawn_blocking(move || cx.run_as(|| f(&*store, &cx))).await.map_err(join_error)?.map_err(s3_error)
    }

    /// Starts a blocking task that streams a body into the engine chunk by chunk, with the
    /// identity of the request `cx`.
    pub fn stream<T, F>(&self, cx: &RequestContext, f: F) -> tokio::task::JoinHandle<StoreResult<T>>
    where
        F: FnOnce(&dyn Store, &RequestContext) -> StoreResult<T> + Send + 'static,
        T: Send + 'static,
    {
        let store = self.store.clone();
        let cx = cx.with_may_block(true);
        tokio::task::spawn_blocking(move || cx.run_as(|| f(&*store, &cx)))
    }
}
