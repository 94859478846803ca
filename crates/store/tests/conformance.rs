//! Every backend runs the generic Store conformance checks (`isthmus_store::conformance`):
//! the posix store in both metadata modes, and behind the authorization layer as the doors use it.

use std::sync::Arc;

use isthmus_store::conformance::Fixture;
use isthmus_store::{Authorized, BucketGrants, MetadataMode, PosixStore, StoreOptions};

fn posix(metadata: MetadataMode) -> (tempfile::TempDir, PosixStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = PosixStore::open(dir.path(), StoreOptions { metadata, ..StoreOptions::default() }).unwrap();
    (dir, store)
}

mod posix_xattr {
    use super::*;
    isthmus_store::store_conformance_tests!(|| {
        let (dir, store) = posix(MetadataMode::Xattr);
        Fixture::new(Arc::new(store), dir)
    });
}

mod posix_sidecar {
    use super::*;
    isthmus_store::store_conformance_tests!(|| {
        let (dir, store) = posix(MetadataMode::Sidecar);
        Fixture::new(Arc::new(store), dir)
    });
}

mod authorized_posix {
    use super::*;
    isthmus_store::store_conformance_tests!(|| {
        let (dir, store) = posix(MetadataMode::Auto);
        Fixture::new(Arc::new(Authorized::new(Arc::new(store), BucketGrants::default())), dir)
    });
}
