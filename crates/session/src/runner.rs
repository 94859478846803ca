//! Where engine calls run: the one place that places them. A short call on a local file
//! system runs inline on the async worker (with a context that may not block); a call that
//! answers `StoreError::WouldBlock` (it would have had to hash a file written outside the
//! gateway) runs again on the blocking pool; long calls, scans and streams always run there.
//! Every call runs as its request's Unix identity: inline, the worker rests in it between
//! calls (consecutive calls of one user switch once); on the pool, the thread is switched for
//! the call and back. Services (selections, third-party copies) run their blocking work here
//! too (`blocking`), so none spawns blocking work or switches identity itself.

use std::sync::Arc;

use isthmus_pools::{ErasurePools, PosixPools};
use isthmus_store::identity::{allow_resting, run_resting};
use isthmus_store::{RequestContext, Store, StoreError, StoreResult};

use crate::as_requester::run_as;

/// What kind of engine call this is, for placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// A short call that only reads (HEAD, small GET).
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

/// Which short calls run inline. Tokio's blocking pool costs two thread handoffs per call
/// (about a third of a small GET here); on a local file system the short calls are cheaper
/// inline on the async worker. On shared file systems (NFS, Lustre, GPFS...) a call can wait
/// on a server, so everything goes to the pool; so do writes that fsync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoPolicy {
    pub inline_reads: bool,
    pub inline_writes: bool,
}

impl IoPolicy {
    /// Everything on the blocking pool: safe anywhere.
    pub const POOL: Self = Self { inline_reads: false, inline_writes: false };

    /// The policy for data on a file system that is (`local`) or is not local to this node,
    /// with writes fsynced before they return (`fsync_writes`) or not.
    pub fn for_filesystem(local: bool, fsync_writes: bool) -> Self {
        Self { inline_reads: local, inline_writes: local && !fsync_writes }
    }

    /// The policy of a data root's pools, decided once here: short calls run inline only when
    /// every pool keeps its files on a local file system. An erasure-coded pool's calls wait on
    /// its drives' own threads (and a drive may stall), so a root with one never runs calls on
    /// an async worker.
    pub fn for_pools(posix: &PosixPools, erasure: &ErasurePools, fsync_writes: bool) -> Self {
        let local = erasure.is_empty() && posix.iter().all(|(_, pool)| pool.filesystem().is_local());
        Self::for_filesystem(local, fsync_writes)
    }

    fn inline(self, placement: Placement) -> bool {
        match placement {
            Placement::Read => self.inline_reads,
            Placement::Write => self.inline_writes,
            Placement::Long | Placement::Scan => false,
        }
    }
}

/// The engine behind a door, with the placement policy of its file systems.
#[derive(Clone)]
pub struct Runner {
    store: Arc<dyn Store>,
    io: IoPolicy,
}

/// A blocking task that panicked or was cancelled, as the engine error a door reports.
fn task_failed(err: tokio::task::JoinError) -> StoreError {
    tracing::error!(error = %err, "engine task failed");
    StoreError::Io(std::io::Error::other("an engine task failed"))
}

impl Runner {
    pub fn new(store: Arc<dyn Store>, io: IoPolicy) -> Self {
        Self { store, io }
    }

    /// The store stack itself, for services that call it from their own threads (array
    /// selections, third-party copies): its identity wrapper runs each call as the request.
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    pub fn io(&self) -> IoPolicy {
        self.io
    }

    /// Runs one engine call for the request `cx`, placed as `placement` says.
    pub async fn call<T, F>(&self, cx: &RequestContext, placement: Placement, f: F) -> StoreResult<T>
    where
        F: Fn(&dyn Store, &RequestContext) -> StoreResult<T> + Send + 'static,
        T: Send + 'static,
    {
        if self.io.inline(placement) {
            // The async workers touch files only in these inline calls: a worker keeps the
            // identity of its last call, so a user's consecutive requests switch once. Every
            // call states its identity (the gateway's own included), so none runs with a
            // stale one.
            let inline_cx = cx.with_may_block(false);
            let outcome = allow_resting(|| {
                run_resting(inline_cx.identity.as_ref(), || f(&*self.store, &inline_cx)).unwrap_or_else(|err| {
                    tracing::error!(error = %err, "cannot switch to a request's identity");
                    Err(StoreError::AccessDenied)
                })
            });
            match outcome {
                Err(StoreError::WouldBlock) => tracing::debug!("the call needs long work: moved to the blocking pool"),
                other => return other,
            }
        }
        let store = self.store.clone();
        self.blocking(cx, move |cx| f(&*store, cx)).await
    }

    /// Runs `work` on the blocking pool as the request `cx` (its file-system calls, and the
    /// store calls it makes, run with the request's identity), with a context that may block.
    pub async fn blocking<T, F>(&self, cx: &RequestContext, work: F) -> StoreResult<T>
    where
        F: FnOnce(&RequestContext) -> StoreResult<T> + Send + 'static,
        T: Send + 'static,
    {
        self.spawn(cx, work).await.map_err(task_failed)?
    }

    /// Starts a blocking task that streams a body into the engine chunk by chunk, as the
    /// request `cx`.
    pub fn stream<T, F>(&self, cx: &RequestContext, f: F) -> tokio::task::JoinHandle<StoreResult<T>>
    where
        F: FnOnce(&dyn Store, &RequestContext) -> StoreResult<T> + Send + 'static,
        T: Send + 'static,
    {
        let store = self.store.clone();
        self.spawn(cx, move |cx| f(&*store, cx))
    }

    /// Starts a blocking task that reads what an engine call already opened (a response
    /// body's descriptor, which the kernel checked for the request's identity when it was
    /// opened): no engine call and no identity in it, so it runs as the pool thread is.
    pub fn stream_out(&self, work: impl FnOnce() + Send + 'static) {
        drop(tokio::task::spawn_blocking(work));
    }

    fn spawn<T, F>(&self, cx: &RequestContext, work: F) -> tokio::task::JoinHandle<StoreResult<T>>
    where
        F: FnOnce(&RequestContext) -> StoreResult<T> + Send + 'static,
        T: Send + 'static,
    {
        let cx = cx.with_may_block(true);
        tokio::task::spawn_blocking(move || run_as(cx.identity.as_ref(), || work(&cx)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_run_inline_only_on_local_pools_and_never_with_an_erasure_pool() {
        let dir = tempfile::tempdir().unwrap();
        let options = isthmus_posix::StoreOptions::default();
        let stores = isthmus_pools::open_root_with_pools(dir.path(), options).unwrap();
        let local = stores.posix[0].1.filesystem().is_local();
        let relaxed = IoPolicy::for_pools(&stores.posix, &stores.erasure, false);
        assert_eq!(relaxed, IoPolicy { inline_reads: local, inline_writes: local });
        let strict = IoPolicy::for_pools(&stores.posix, &stores.erasure, true);
        assert_eq!(strict, IoPolicy { inline_reads: local, inline_writes: false });
        let drives: Vec<std::path::PathBuf> = (0..3).map(|i| dir.path().join(format!("d{i}"))).collect();
        let config = isthmus_erasure::ErasureConfig::new(drives, 2, 1);
        let erasure = isthmus_erasure::ErasureStore::open("ec", config, options).unwrap();
        let with_erasure = vec![("ec".to_string(), Arc::new(erasure))];
        assert_eq!(IoPolicy::for_pools(&stores.posix, &with_erasure, false), IoPolicy::POOL);
    }
}
