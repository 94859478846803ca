//! The engine as a run opens it in-process for arrays: a data root with its pools behind the
//! access checks, as the gateway assembles it, and the run's bucket made when missing.

use std::path::Path;
use std::sync::Arc;

use isthmus_posix::StoreOptions;
use isthmus_store::{RequestContext, Store};

/// The engine over the data root `root`, with its pools.
pub fn open_engine(root: &Path, options: StoreOptions) -> Result<Arc<dyn Store>, String> {
    isthmus_session::stack::open_root(root, options).map_err(|e| format!("cannot open {}: {e}", root.display()))
}

/// Creates `bucket` unless it exists.
pub fn create_bucket(store: &dyn Store, bucket: &str) -> Result<(), String> {
    match store.create_bucket(&RequestContext::process(), bucket, &Default::default()) {
        Ok(()) => Ok(()),
        Err(e) if e.s3_code().starts_with("BucketAlready") => Ok(()),
        Err(e) => Err(format!("cannot create bucket {bucket}: {e}")),
    }
}
