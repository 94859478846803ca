//! The Isthmus engine API: the `Store` interface with S3 semantics (buckets and their settings,
//! objects with metadata and versions, conditional and ranged reads, streaming atomic writes,
//! multipart uploads, ordered listing), the request context every call carries (who asks, as
//! which Unix identity, with which token scopes), the errors with their S3 codes, and the key
//! rules. What an embedder or a new backend reads first; backends (`isthmus-posix`,
//! `isthmus-erasure`), the pool router (`isthmus-pools`) and access control (`isthmus-access`)
//! are crates above it.
//!
//! The engine is synchronous and does plain syscalls; it has no HTTP types, so every door
//! (HTTP gateway, embedded library, benchmarks) calls the same code.

pub mod acl;
pub mod bucket_config;
pub mod byte_size;
pub mod checksum;
pub mod conditions;
pub mod context;
pub mod cors;
pub mod error;
pub mod facts;
pub mod file_stretch;
pub mod identity;
pub mod key;
pub mod multipart;
pub mod notification;
pub mod object_files;
pub mod object_meta;
pub mod scoped;
pub mod scopes;
pub mod seal_key;
pub mod state_dir;
pub mod update;
pub mod versioning;

use std::io::Read;
use std::time::SystemTime;

pub use acl::{Acl, CannedAcl, Grant, GrantPermission, PublicAccessBlock};
pub use bucket_config::{BucketConfig, BucketSettings};
pub use checksum::{Checksum, ChecksumAlgorithm, ChecksumType};
pub use conditions::{ByteRange, Conditions, ETagMatch};
pub use context::{Principal, RequestContext};
pub use cors::{CorsConfig, CorsRule};
pub use error::{StoreError, StoreResult};
pub use facts::{AccessJudge, BucketFacts, Durability, FileSystemKind, MetadataMode};
pub use multipart::{
    CompleteChecksum, CompletedPart, ListPartsRequest, ListUploadsRequest, MultipartStore, PartInfo, PartRequest,
    PartsPage, UploadInfo, UploadsPage,
};
pub use object_files::ObjectFiles;
pub use object_meta::{ObjectChange, ObjectMeta};
pub use scopes::{Scope, ScopeAccess, ScopeError, Scopes};
pub use update::{LockedFile, RemoteUpdate, UpdateFile, UpdateLock};
pub use versioning::{
    DeleteOutcome, ListVersionsRequest, NULL_VERSION, ObjectVersion, Versioning, VersionsPage, validate_version_id,
};

/// A bucket as listed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BucketInfo {
    pub name: String,
    pub created: SystemTime,
}

/// What HEAD returns about an object, and what a listing returns per key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
    pub last_modified: SystemTime,
    /// The MD5 of the content in hex, without quotes (`-N` suffixed for multipart uploads).
    pub etag: String,
    pub meta: ObjectMeta,
    /// The integrity checksum stored with the object, if the writer asked for one.
    pub checksum: Option<Checksum>,
    /// Part sizes of an object completed from a multipart upload, run-length encoded as
    /// (size, count); empty for objects written in one piece.
    pub parts: Vec<(u64, u32)>,
    /// The version id (`"null"` for the null version) in a bucket that has a versioning state;
    /// `None` in an unversioned bucket.
    pub version_id: Option<String>,
}

impl ObjectInfo {
    /// How many parts GET and HEAD with `partNumber` know of (1 for single-piece objects).
    /// Part sizes come from a stored record a user may have written: the sums saturate.
    pub fn part_count(&self) -> u32 {
        if self.parts.is_empty() { 1 } else { self.parts.iter().fold(0u32, |n, (_, count)| n.saturating_add(*count)) }
    }

    /// The inclusive byte range of part `number` (1-based), if it exists and lies within the
    /// object (checked arithmetic: the part sizes may come from a forged record).
    pub fn part_range(&self, number: u32) -> Option<(u64, u64)> {
        if number == 0 {
            return None;
        }
        if self.parts.is_empty() {
            return (number == 1 && self.size > 0).then(|| (0, self.size - 1));
        }
        let mut offset = 0u64;
        let mut first_number = 1u32;
        for &(size, count) in &self.parts {
            let next_number = first_number.checked_add(count)?;
            if number < next_number {
                let start = offset.checked_add(u64::from(number - first_number).checked_mul(size)?)?;
                let end = start.checked_add(size)?.checked_sub(1)?;
                return (size > 0 && end < self.size).then_some((start, end));
            }
            offset = offset.checked_add(size.checked_mul(u64::from(count))?)?;
            first_number = next_number;
        }
        None
    }
}

/// Digests of the bytes an `ObjectWrite` received so far, for verification before commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Digests {
    /// MD5 of the bytes (`None` when the writer did not hash, as in server-side copies).
    pub md5: Option<[u8; 16]>,
    pub checksum: Option<Checksum>,
}

/// A PUT: the metadata to store and the conditions the write depends on.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct PutRequest {
    pub meta: ObjectMeta,
    /// `If-Match`: replace only an existing object with one of these ETags.
    pub if_match: Option<ETagMatch>,
    /// `If-None-Match: *`: create only if no object exists under the key.
    pub if_none_match: Option<ETagMatch>,
    /// An integrity checksum to compute while writing and store with the object.
    pub checksum_algorithm: Option<ChecksumAlgorithm>,
    /// For multipart uploads: how the object's checksum derives from the parts'.
    pub checksum_type: ChecksumType,
    /// The writer needs no MD5 ETag (an array chunk, which only needs a tag that changes with
    /// every write for conditional writes): no MD5 is computed and the ETag is unique to this
    /// write, suffixed "-1" like a multipart ETag so clients do not take it for an MD5.
    #[serde(default)]
    pub etag_without_md5: bool,
    /// The door verifies the MD5 of the bytes (the client sent Content-MD5, or a third-party
    /// copy checks one): the writer computes it even where the pool's ETag policy would not.
    #[serde(default)]
    pub md5_required: bool,
    /// The object's size when the door knows it before the data (Content-Length): quotas
    /// refuse a write that cannot fit before any byte is written.
    pub size_hint: Option<u64>,
    /// CompleteMultipartUpload only: the checksum type and value the client declared.
    #[serde(default)]
    pub complete_checksum: CompleteChecksum,
    /// The write is a browser's form upload (S3's PostObject): announced as
    /// `ObjectCreated:Post`.
    #[serde(default)]
    pub browser_form: bool,
}

/// A GET: the byte range wanted and the conditions on the current object.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct GetRequest {
    /// A version other than the latest (`versionId`).
    pub version_id: Option<String>,
    pub range: Option<ByteRange>,
    /// `partNumber`: read one part of a multipart object (exclusive with `range`).
    pub part_number: Option<u32>,
    pub conditions: Conditions,
}

impl GetRequest {
    /// The inclusive byte range of `info`'s object this GET serves (`None`: all of it), from
    /// its Range or partNumber.
    pub fn served_range(&self, info: &ObjectInfo) -> StoreResult<Option<(u64, u64)>> {
        match (self.part_number, self.range) {
            (Some(_), Some(_)) => Err(StoreError::InvalidArgument(
                "Cannot specify both Range header and partNumber query parameter".into(),
            )),
            // Part 1 of an object written in one piece is the whole object.
            (Some(1), None) if info.parts.is_empty() => Ok(None),
            (Some(n), None) => Ok(Some(info.part_range(n).ok_or(StoreError::InvalidPartNumber)?)),
            (None, Some(r)) => Ok(Some(r.resolve(info.size)?)),
            (None, None) => Ok(None),
        }
    }
}

/// A server-side copy.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct CopyRequest {
    /// The source version (`versionId` of x-amz-copy-source); `None` is the latest.
    pub source_version_id: Option<String>,
    /// `None` keeps the source's metadata (directive COPY); `Some` replaces it (REPLACE).
    pub replace_meta: Option<ObjectMeta>,
    /// Conditions on the source object (`x-amz-copy-source-if-*`).
    pub source_conditions: Conditions,
    /// `None` keeps the source's tags (tagging directive COPY); `Some` replaces them.
    pub replace_tags: Option<std::collections::BTreeMap<String, String>>,
    /// The copy's canned ACL: never the source's, as in S3 (`None` is private).
    pub acl: Option<CannedAcl>,
}

/// One page of a listing request.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ListRequest {
    pub prefix: String,
    pub delimiter: Option<String>,
    /// Only keys (and common prefixes) strictly after this one are returned.
    pub start_after: Option<String>,
    pub max_keys: usize,
}

/// One page of a listing, in UTF-8 byte order of the keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListPage {
    pub objects: Vec<ObjectInfo>,
    pub common_prefixes: Vec<String>,
    pub is_truncated: bool,
    /// The last key or common prefix of this page: the marker for the next page.
    pub next_marker: Option<String>,
}

/// The bytes of an object being read: a reader positioned at the start of the range.
pub trait ObjectRead: Read + Send + Sync {
    /// Bytes left to read.
    fn remaining(&self) -> u64;

    /// The open file these bytes are read from, and the offset of the next one, when the object
    /// is exactly a stretch of one file (the local door passes such a descriptor to its peer,
    /// which then reads the file itself). `None` (the default) for anything else: a reader
    /// that assembles, decodes or transforms its bytes must not name a file.
    fn file(&self) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        None
    }
}

/// An object being written. Nothing is visible until `commit`; dropping it without commit
/// discards everything that was written.
pub trait ObjectWrite: Send {
    fn write_all(&mut self, bytes: &[u8]) -> StoreResult<()>;
    /// Writes `len` zero bytes. A backend that keeps objects as files may leave a hole (no
    /// block written) where nothing hashes the bytes: an uncompressed Zarr shard is created
    /// with its data a hole and only its index written.
    fn write_zeros(&mut self, len: u64) -> StoreResult<()> {
        zeros_in_pieces(len, |zeros| self.write_all(zeros))
    }
    /// MD5 and checksum of what was written so far: a door compares them with what the client
    /// declared (Content-MD5, x-amz-checksum-*) before it commits.
    fn digests(&self) -> Digests;
    /// Makes the object visible atomically and returns what HEAD would now report.
    fn commit(self: Box<Self>) -> StoreResult<ObjectInfo>;
    /// `commit`, calling `before_seen` before any step of it that a watcher of the data root
    /// could take for a change (a file renamed over another, a directory made, a file moved
    /// aside for versioning), saying which. A writer that can tell that its commit shows the
    /// watcher only a new name linked into a directory that existed before (a link, which the
    /// watcher takes for nobody's write) leaves it uncalled; the default calls it first, with
    /// `Shown::Directories`. The announcing layer marks the write as the gateway's own there,
    /// and marks nothing when it is not called.
    fn commit_seen(self: Box<Self>, before_seen: &mut dyn FnMut(Shown)) -> StoreResult<ObjectInfo> {
        before_seen(Shown::Directories);
        self.commit()
    }
}

/// What a commit is about to show a watcher of the data root (`ObjectWrite::commit_seen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// The key's file arrives by a rename (over the key, or a named staged file's): the
    /// watcher sees it arrive, never its name appear.
    Rename,
    /// Another change of the key's file: its current version moved aside.
    Change,
    /// Directories made for the key (a watcher lists a new directory, and finds what was
    /// linked into it meanwhile); perhaps a change of the key's file as well.
    Directories,
}

/// `len` zero bytes handed to `write` a buffer (of at most 1 MiB) at a time.
pub fn zeros_in_pieces(len: u64, mut write: impl FnMut(&[u8]) -> StoreResult<()>) -> StoreResult<()> {
    let zeros = vec![0u8; len.min(1 << 20) as usize];
    let mut left = len;
    while left > 0 {
        let now = left.min(zeros.len() as u64);
        write(&zeros[..now as usize])?;
        left -= now;
    }
    Ok(())
}

/// A reader of any backend.
pub type BoxedReader = Box<dyn ObjectRead>;
/// A writer (of an object or of a part) of any backend.
pub type BoxedWriter = Box<dyn ObjectWrite>;

/// What a GET returns: the object's description, the reader, and the byte range served
/// (`first..=last` of `size`) when a range was requested.
pub struct GetResponse {
    pub info: ObjectInfo,
    pub body: BoxedReader,
    pub range: Option<(u64, u64)>,
}

/// A CreateBucket.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct CreateBucketRequest {
    /// Where the bucket should live (S3's LocationConstraint); `None` is the default place.
    /// A backend that has one place accepts any name.
    pub location: Option<String>,
}

/// A HEAD of an object.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct HeadRequest {
    /// A version other than the latest (`versionId`).
    pub version_id: Option<String>,
    pub conditions: Conditions,
}

/// A DeleteObject.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct DeleteRequest {
    /// Removes this version for good; `None` deletes the key (a delete marker in a versioned
    /// bucket).
    pub version_id: Option<String>,
}

/// The engine interface, with S3 semantics: what every backend answers. Every door calls this
/// and nothing else. Every call carries the request context; every operation takes its request
/// struct, so what later requests need (versions, ACLs, identities) arrives as fields. It is
/// object safe: a router can hold several backends as `Arc<dyn Store>`.
///
/// Three more traits complete it. `MultipartStore`, a supertrait, is the multipart family every
/// backend answers too. `ObjectFiles` holds what only a backend of plain files can do (an
/// object's file, records derived from it), reached through `files()`, `None` by default.
/// `StoreExt` holds conveniences built on these calls, for any store. A wrapper forwards the
/// required calls of `Store` and `MultipartStore`, and nothing else.
pub trait Store: MultipartStore + Send + Sync + 'static {
    /// Required: which buckets exist is the backend's (directories, or the drives' namespace);
    /// the authorization layer filters the list per principal.
    fn list_buckets(&self, cx: &RequestContext) -> StoreResult<Vec<BucketInfo>>;
    /// Required: making a bucket's place (behind pools, in the pool it names).
    fn create_bucket(&self, cx: &RequestContext, bucket: &str, request: &CreateBucketRequest) -> StoreResult<()>;
    /// Required, not derived from `bucket_facts`: HeadBucket asks whether the caller may use
    /// the bucket (the posix backend asks the kernel whether the request's user may enter its
    /// directory; the authorization layer wants read access, facts are judged as a
    /// GetBucketLocation), and it is the cheap existence probe the pool router asks each pool,
    /// where an erasure pool's facts also read a drive. A default derived from the facts would
    /// be silently wrong in any wrapper that did not forward it.
    fn head_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()>;
    /// Required: what only the backend knows about where the bucket lives (file system kind,
    /// metadata mode, durability, who judges access; behind pools, the pool holding it).
    fn bucket_facts(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketFacts>;
    /// Required: removing a bucket (only an empty one, as in S3) is the backend's.
    fn delete_bucket(&self, cx: &RequestContext, bucket: &str) -> StoreResult<()>;
    /// Required: the bucket's settings, whole, with the version they were read at; NoSuchBucket
    /// if missing. One setting at a time: `BucketSettings`.
    fn bucket_config(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BucketConfig>;
    /// Required: replaces the bucket's settings whole (checked: MalformedPolicy, InvalidTag) if
    /// they are still the version `config.version` names (ConfigConflict if another change
    /// landed since; `None` replaces whatever is there).
    fn set_bucket_config(&self, cx: &RequestContext, bucket: &str, config: &BucketConfig) -> StoreResult<()>;

    /// Required: a streaming write, atomic at the writer's commit.
    fn put_object(&self, cx: &RequestContext, bucket: &str, key: &str, request: PutRequest)
    -> StoreResult<BoxedWriter>;
    /// Required: a conditional, ranged, streaming read.
    fn get_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &GetRequest,
    ) -> StoreResult<GetResponse>;
    /// Required, not derived from `get_object`: a HEAD opens no data (the posix backend answers
    /// it with one `statx` where it keeps the object's description).
    fn head_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &HeadRequest,
    ) -> StoreResult<ObjectInfo>;
    /// Required: deletes a key (a delete marker in a versioned bucket) or one version. Deleting
    /// a key that does not exist succeeds, as in S3.
    fn delete_object(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: &DeleteRequest,
    ) -> StoreResult<DeleteOutcome>;
    /// Required, not derived from a GET and a PUT: backends copy without moving the bytes
    /// through the caller (the posix backend reflinks or links; the pool router copies within
    /// a pool and streams only between pools, `copy_between`).
    fn copy_object(
        &self,
        cx: &RequestContext,
        source: (&str, &str),
        destination: (&str, &str),
        request: &CopyRequest,
    ) -> StoreResult<ObjectInfo>;
    /// Required: one ordered page of the current objects.
    fn list_objects(&self, cx: &RequestContext, bucket: &str, request: &ListRequest) -> StoreResult<ListPage>;
    /// Required, kept apart from `list_objects`: every version and delete marker (in an
    /// unversioned bucket: every object, as its null version), with markers and pages of its
    /// own; one call for both would take a request and return a page each of two kinds.
    fn list_object_versions(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListVersionsRequest,
    ) -> StoreResult<VersionsPage>;
    /// Required: changes what is kept with an object besides its bytes (`ObjectChange`: its
    /// ACL, its tags), where the backend keeps it, under its lock of the key.
    fn update_object(&self, cx: &RequestContext, bucket: &str, key: &str, change: ObjectChange) -> StoreResult<()>;

    /// What only a backend of plain files can do (`ObjectFiles`), if this store can; `None` by
    /// default. A wrapper that judges or routes these calls implements `ObjectFiles` itself and
    /// answers `Some` only when its inner store does; one that does not forward this merely
    /// goes without them, the safe default.
    fn files(&self) -> Option<&dyn ObjectFiles> {
        None
    }

    /// UploadPartCopy: a part made of (a range of) an existing object. The bytes pass through
    /// the writer so the part gets its MD5 and checksum like any uploaded part. Provided here,
    /// not in `MultipartStore`: it reads an object, and a default there cannot call
    /// `get_object` (a `where Self: Store` bound would make both traits unusable as `dyn`).
    #[allow(clippy::too_many_arguments, reason = "the upload's identity, the part and the source, as S3 names them")]
    fn upload_part_copy(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
        source: (&str, &str),
        source_request: &GetRequest,
    ) -> StoreResult<ObjectInfo> {
        let mut writer = self.upload_part(cx, bucket, key, upload_id, request)?;
        let mut body = match self.get_object(cx, source.0, source.1, source_request) {
            Ok(response) => response.body,
            // A copy source that "was not modified" fails the copy, as in S3.
            Err(StoreError::NotModified { .. }) => return Err(StoreError::PreconditionFailed),
            Err(err) => return Err(err),
        };
        copy_stream(&mut body, &mut *writer)?;
        writer.commit()
    }
}

/// Conveniences built on `Store`'s calls, for every store (`dyn Store` included): nothing to
/// implement, nothing for a wrapper to forward.
pub trait StoreExt: Store {
    /// A whole object from a buffer.
    fn put_bytes(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        bytes: &[u8],
        request: PutRequest,
    ) -> StoreResult<ObjectInfo> {
        let mut writer = self.put_object(cx, bucket, key, request)?;
        writer.write_all(bytes)?;
        writer.commit()
    }
}

impl<S: Store + ?Sized> StoreExt for S {}

/// A copy from one store to another (two pools, or a backend without a copy of its own): the
/// bytes stream through, the source's metadata and tags are kept unless replaced, and the ACL
/// is never copied, as in a copy within one store.
pub fn copy_between(
    from: &dyn Store,
    to: &dyn Store,
    cx: &RequestContext,
    source: (&str, &str),
    destination: (&str, &str),
    request: &CopyRequest,
) -> StoreResult<ObjectInfo> {
    let get = GetRequest {
        version_id: request.source_version_id.clone(),
        conditions: request.source_conditions.clone(),
        ..GetRequest::default()
    };
    let mut response = match from.get_object(cx, source.0, source.1, &get) {
        Ok(response) => response,
        Err(StoreError::NotModified { .. }) => return Err(StoreError::PreconditionFailed),
        Err(err) => return Err(err),
    };
    // As a copy within a pool: metadata and tags kept unless replaced, the ACL never copied.
    let mut meta = request.replace_meta.clone().unwrap_or_else(|| response.info.meta.clone());
    meta.tags = request.replace_tags.clone().unwrap_or_else(|| response.info.meta.tags.clone());
    meta.acl = request.acl.filter(|a| *a != crate::CannedAcl::Private);
    meta.grants = Vec::new();
    let put = PutRequest { meta, ..PutRequest::default() };
    let mut writer = to.put_object(cx, destination.0, destination.1, put)?;
    copy_stream(&mut response.body, &mut *writer)?;
    writer.commit()
}

/// Streams everything `reader` yields to `sink` in chunks of up to 1 MiB. `sink` returns
/// false to stop early (the caller's callback asked to); the result says whether all was sent.
pub fn stream_out(reader: &mut dyn Read, mut sink: impl FnMut(&[u8]) -> bool) -> StoreResult<bool> {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(true),
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err.into()),
        };
        if !sink(&buf[..n]) {
            return Ok(false);
        }
    }
}

/// Copies everything a reader yields into a writer, 1 MiB at a time.
pub fn copy_stream(reader: &mut dyn Read, writer: &mut dyn ObjectWrite) -> StoreResult<()> {
    let mut failed = None;
    stream_out(reader, |chunk| match writer.write_all(chunk) {
        Ok(()) => true,
        Err(err) => {
            failed = Some(err);
            false
        }
    })?;
    failed.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(size: u64, parts: Vec<(u64, u32)>) -> ObjectInfo {
        ObjectInfo {
            key: "k".into(),
            size,
            last_modified: SystemTime::UNIX_EPOCH,
            etag: String::new(),
            meta: ObjectMeta::default(),
            checksum: None,
            parts,
            version_id: None,
        }
    }

    #[test]
    fn forged_part_sizes_give_no_range_and_no_overflow() {
        let huge = info(10, vec![(u64::MAX, u32::MAX), (7, 3)]);
        assert_eq!(huge.part_range(1), None);
        assert_eq!(huge.part_range(u32::MAX), None);
        assert_eq!(huge.part_count(), u32::MAX);
        assert_eq!(info(10, vec![(100, 2)]).part_range(1), None, "a part beyond the object's size");
    }

    #[test]
    fn part_ranges_follow_the_run_lengths() {
        let mp = info(3 * 100 + 7, vec![(100, 3), (7, 1)]);
        assert_eq!(mp.part_count(), 4);
        assert_eq!(mp.part_range(1), Some((0, 99)));
        assert_eq!(mp.part_range(3), Some((200, 299)));
        assert_eq!(mp.part_range(4), Some((300, 306)));
        assert_eq!(mp.part_range(5), None);
        assert_eq!(mp.part_range(0), None);
        let single = info(10, vec![]);
        assert_eq!(single.part_count(), 1);
        assert_eq!(single.part_range(1), Some((0, 9)));
        assert_eq!(single.part_range(2), None);
    }
}
