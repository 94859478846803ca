//! Every backend runs the generic Store conformance checks (the `isthmus-conformance` crate):
//! the posix store in both metadata modes, behind the authorization layer as the doors use it,
//! and erasure-coded pools (4+2 over six drives, and 2+1 over five with a tiny block size so
//! small test objects span many blocks and segments), which refuse versioning.

use std::sync::Arc;

use isthmus_access::{Authorized, BucketGrants};
use isthmus_conformance::Fixture;
use isthmus_erasure::{ErasureConfig, ErasureStore};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::MetadataMode;

fn posix(metadata: MetadataMode) -> (tempfile::TempDir, PosixStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = PosixStore::open(dir.path(), StoreOptions { metadata, ..StoreOptions::default() }).unwrap();
    (dir, store)
}

mod posix_xattr {
    use super::*;
    isthmus_conformance::store_conformance_tests!(|| {
        let (dir, store) = posix(MetadataMode::Xattr);
        Fixture::new(Arc::new(store), dir)
    });
}

mod posix_sidecar {
    use super::*;
    isthmus_conformance::store_conformance_tests!(|| {
        let (dir, store) = posix(MetadataMode::Sidecar);
        Fixture::new(Arc::new(store), dir)
    });
}

mod authorized_posix {
    use super::*;
    isthmus_conformance::store_conformance_tests!(|| {
        let (dir, store) = posix(MetadataMode::Auto);
        Fixture::new(Arc::new(Authorized::new(Arc::new(store), BucketGrants::default())), dir)
    });
}

fn erasure(drives: usize, data: usize, parity: usize, block_size: u64, inline_limit: u64) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let paths = (0..drives).map(|i| dir.path().join(format!("d{i}"))).collect();
    let config = ErasureConfig { block_size, inline_limit, ..ErasureConfig::new(paths, data, parity) };
    let store = ErasureStore::open("ec", config, StoreOptions::default()).unwrap();
    Fixture::new(Arc::new(store), dir)
}

mod erasure_4_2 {
    use super::*;
    isthmus_conformance::store_conformance_tests!(unversioned: || erasure(6, 4, 2, 1 << 20, 16 << 10));
}

mod erasure_2_1_small_blocks {
    use super::*;
    isthmus_conformance::store_conformance_tests!(unversioned: || erasure(5, 2, 1, 4096, 0));
}
