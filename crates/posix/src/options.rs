//! How a `PosixStore` behaves: durability, metadata placement, ETag policy, caches.

use isthmus_store::{Durability, MetadataMode};
use serde::{Deserialize, Serialize};

/// Files written outside the gateway up to this size get the MD5 of their content as ETag
/// (about 2 ms of hashing at most); larger ones an ETag derived from their identity.
pub const DEFAULT_ETAG_MD5_LIMIT: u64 = 1 << 20;

/// How a `PosixStore` behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreOptions {
    pub durability: Durability,
    pub metadata: MetadataMode,
    /// Upper bound on the directory entries kept in the sorted-listing cache.
    pub list_cache_entries: u64,
    /// Files written outside the gateway up to this many bytes get the MD5 of their content as
    /// ETag; larger ones get `meta::identity_etag` (see docs/user/objects-and-files.md on foreign files).
    pub etag_md5_limit: u64,
    /// How many object descriptions HEAD and GET keep while their files are unchanged
    /// (`head_cache`; about 300 bytes each).
    #[serde(default = "default_head_cache_entries")]
    pub head_cache_entries: u64,
    /// Whose files the state directory believes (`state_dir`): `Gateway` for a server that
    /// serves other users, `Process` (the default) for an in-process door.
    #[serde(skip)]
    pub state_trust: isthmus_store::state_dir::StateTrust,
}

/// The default of `StoreOptions::head_cache_entries`: 100,000 objects, about 30 MB.
pub const DEFAULT_HEAD_CACHE_ENTRIES: u64 = 100_000;

fn default_head_cache_entries() -> u64 {
    DEFAULT_HEAD_CACHE_ENTRIES
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Strict,
            metadata: MetadataMode::Auto,
            list_cache_entries: 2_000_000,
            etag_md5_limit: DEFAULT_ETAG_MD5_LIMIT,
            head_cache_entries: DEFAULT_HEAD_CACHE_ENTRIES,
            state_trust: Default::default(),
        }
    }
}
