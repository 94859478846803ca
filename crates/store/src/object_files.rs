//! What only a backend that keeps objects as plain files can do (`ObjectFiles`): hand out an
//! object's open file, for reading in place or writing a fixed layout in place, and keep records
//! derived from an object beside it. A store offers it through `Store::files()`; doors and
//! services that use it go without it (read or write the object whole) where it is `None`.

use crate::update::UpdateFile;
use crate::{RequestContext, StoreResult};

/// Calls on an object's plain file and on records derived from it. A wrapper that passes these
/// on (the authorization layer, the pool router) judges or routes each as it does the object
/// calls, and offers them only when its inner store does.
pub trait ObjectFiles: Send + Sync {
    /// The plain file that holds `key`'s bytes, opened for reading beneath the bucket (no link
    /// leads out of it) as the calling thread's identity, for readers that need a file (libhdf5
    /// indexing an HDF5 file in place, through `/proc/self/fd`), if `cx` may read the object;
    /// `None` where this bucket's objects are not plain files. An open file rather than a name:
    /// nothing can swap what it is between a check and its use.
    fn object_file(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<std::fs::File>>;

    /// The plain file that holds `key`'s bytes, opened for writing in place beneath the bucket
    /// as the calling thread's identity, if `cx` may overwrite the object: for writers of a
    /// layout fixed when the object was made (an uncompressed Zarr shard), whose small writes
    /// then cost a `pwrite` instead of a new object. Such writes are not atomic for a
    /// concurrent reader and never change the object's size (`UpdateFile`). `None` where it
    /// cannot be: objects not kept as plain files, a versioned bucket (a version never
    /// changes), a bucket moving between pools; NoSuchKey when there is no such object.
    fn object_file_for_update(&self, cx: &RequestContext, bucket: &str, key: &str) -> StoreResult<Option<UpdateFile>>;

    /// A record derived from `key`'s bytes (`kind` names what: an HDF5 chunk index) kept in the
    /// bucket's hidden area, if one was written; `cx` must be allowed to read the object. The
    /// caller checks the record still matches the object (it records the object's identity).
    fn read_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str) -> StoreResult<Option<Vec<u8>>>;

    /// Keeps a record derived from `key`'s bytes in the bucket's hidden area (replaced
    /// atomically). A cache: where there is no hidden area, nothing is kept.
    fn write_derived(&self, cx: &RequestContext, bucket: &str, key: &str, kind: &str, bytes: &[u8]) -> StoreResult<()>;
}
