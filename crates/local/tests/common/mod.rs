//! What the local door's tests share: a gateway-side socket over a real `PosixStore` behind
//! the authorization layer, in a temporary directory, and the context of this process.

use std::sync::Arc;

use isthmus_access::Authorized;
use isthmus_local::LocalSocket;
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{RequestContext, Store};

pub fn cx() -> RequestContext {
    RequestContext::process()
}

/// A gateway-side socket in `dir` that serves every peer whose uid is `allowed` as `user`.
pub fn serve(dir: &std::path::Path, allowed: u32) -> (std::path::PathBuf, Arc<dyn Store>) {
    serve_passing(dir, allowed, true)
}

/// `serve`, passing descriptors for large GETs or not.
pub fn serve_passing(dir: &std::path::Path, allowed: u32, pass: bool) -> (std::path::PathBuf, Arc<dyn Store>) {
    let store: Arc<dyn Store> =
        Arc::new(Authorized::without_grants(PosixStore::open(dir.join("data"), StoreOptions::default()).unwrap()));
    let path = dir.join("isthmus.sock");
    let socket = LocalSocket::bind(&path).unwrap().passing_descriptors(pass);
    let resolve = move |uid: u32| (uid == allowed).then(|| RequestContext::user("local-user", true));
    socket.serve(store.clone(), Arc::new(resolve), 8).unwrap();
    (path, store)
}

pub fn me() -> u32 {
    rustix::process::getuid().as_raw()
}
