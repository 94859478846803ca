//! The identity wrapper of the store stack: every call of the store it wraps, and every write,
//! commit and discard of the writers it returns, runs with the request's Unix identity (the
//! gateway's own for requests without one), whichever thread makes it: a door's runner, a
//! service's own thread pool (arrays), a local socket's connection thread. The switch itself
//! is `identity::run_call`: once per call on threads that switch back at once, once per change
//! of user on threads that rest in their last identity, and not at all on a thread the runner
//! already switched to this request's identity.

use std::sync::Arc;

use isthmus_store::identity::{UnixIdentity, run_call};
use isthmus_store::{
    BoxedWriter, Digests, GetResponse, ObjectFiles, ObjectInfo, ObjectWrite, RequestContext, Shown, Store, StoreError,
    StoreResult, UpdateFile,
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
    /// Runs `f` on the inner writer as the request's identity.
    fn as_requester<T>(&mut self, f: impl FnOnce(&mut BoxedWriter) -> StoreResult<T>) -> StoreResult<T> {
        let Self { inner, identity } = self;
        run_as(identity.as_ref(), || f(inner.as_mut().expect("present until committed or dropped")))
    }
}

impl ObjectWrite for RequesterWriter {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()> {
        self.as_requester(|inner| inner.write_all(bytes))
    }

    fn write_zeros(&mut self, len: u64) -> StoreResult<()> {
        self.as_requester(|inner| inner.write_zeros(len))
    }

    fn digests(&self) -> Digests {
        self.inner.as_ref().expect("present until committed or dropped").digests()
    }

    fn commit(self: Box<Self>) -> StoreResult<ObjectInfo> {
        self.commit_seen(&mut |_| {})
    }

    fn commit_seen(mut self: Box<Self>, before_seen: &mut dyn FnMut(Shown)) -> StoreResult<ObjectInfo> {
        let inner = self.inner.take().expect("present until committed");
        run_as(self.identity.as_ref(), || inner.commit_seen(before_seen))
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

/// A body is read through the descriptor the call opened as the requester: reading it needs no
/// identity.
fn response(_: &RequestContext, response: GetResponse) -> GetResponse {
    response
}

/// The capabilities of the inner store, if it has them, each call run as the requester.
fn files_of<S: Store + ?Sized>(wrapper: &AsRequester<S>) -> Option<&dyn ObjectFiles> {
    wrapper.0.files().map(|_| wrapper as &dyn ObjectFiles)
}

isthmus_store::scoped_store! {
    impl[S: Store + ?Sized] for AsRequester<S>, inner: self.0,
    run: run, writer: writer, response: response, files: files_of,
}

impl<S: Store + ?Sized> ObjectFiles for AsRequester<S> {
    fn object_file(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<std::fs::File>> {
        run(cx, || self.0.files().map_or(Ok(None), |files| files.object_file(cx, bucket, key)))
    }

    fn object_file_for_update(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<UpdateFile>> {
        run(cx, || self.0.files().map_or(Ok(None), |files| files.object_file_for_update(cx, bucket, key)))
    }

    fn read_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str) -> StoreResult<Option<Vec<u8>>> {
        run(cx, || self.0.files().map_or(Ok(None), |files| files.read_derived(cx, bucket, key, kind)))
    }

    fn write_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str, bytes: &[u8]) -> StoreResult<()> {
        run(cx, || self.0.files().map_or(Ok(()), |files| files.write_derived(cx, bucket, key, kind, bytes)))
    }
}
