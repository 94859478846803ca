//! Multipart uploads: the `MultipartStore` calls every backend answers, S3's part limits, an
//! upload in progress, stored and completed parts, and the requests and pages of UploadPart,
//! ListParts and ListMultipartUploads. How uploads are kept is each backend's business.

use std::time::SystemTime;

use crate::checksum::{Checksum, ChecksumAlgorithm, ChecksumType};
use crate::{BoxedWriter, ObjectInfo, PutRequest, RequestContext, StoreResult};

/// The multipart half of the engine interface, a supertrait of `Store`: every backend answers
/// it, and a `dyn Store` calls it. A trait of its own because it is a family with state of its
/// own (an upload lives between calls, under an id, with its parts), which a reader of the
/// object calls never needs; all six calls are required, as each reads or changes that state.
/// UploadPartCopy, which also reads an object, is `Store::upload_part_copy`.
pub trait MultipartStore {
    /// Starts a multipart upload of `key`; returns the upload id. `request.meta` is stored
    /// with the upload and given to the object on completion.
    fn create_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        request: PutRequest,
    ) -> StoreResult<String>;
    /// A writer for one part; its `commit` returns the part's size and ETag.
    fn upload_part(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &PartRequest,
    ) -> StoreResult<BoxedWriter>;
    /// Assembles the listed parts into the object, atomically, with the S3 "-N" ETag.
    /// `request` carries the write conditions (its metadata is ignored).
    fn complete_multipart_upload(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        parts: &[CompletedPart],
        request: PutRequest,
    ) -> StoreResult<ObjectInfo>;
    /// Discards the upload and its parts.
    fn abort_multipart_upload(&self, cx: &RequestContext, bucket: &str, key: &str, upload_id: &str) -> StoreResult<()>;
    /// One page of the upload's stored parts.
    fn list_parts(
        &self,
        cx: &RequestContext,
        bucket: &str,
        key: &str,
        upload_id: &str,
        request: &ListPartsRequest,
    ) -> StoreResult<PartsPage>;
    /// One page of the bucket's uploads in progress.
    fn list_multipart_uploads(
        &self,
        cx: &RequestContext,
        bucket: &str,
        request: &ListUploadsRequest,
    ) -> StoreResult<UploadsPage>;
}

/// Part numbers S3 accepts.
pub const MAX_PART_NUMBER: u32 = 10_000;
/// Every part but the last must be at least this large.
pub const MIN_PART_SIZE: u64 = 5 << 20;

/// An upload in progress.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UploadInfo {
    pub key: String,
    pub upload_id: String,
    pub initiated: SystemTime,
    /// The checksum the upload was created with, and how the object's derives from the parts'.
    pub checksum_algorithm: Option<ChecksumAlgorithm>,
    pub checksum_type: ChecksumType,
    /// Who started the upload (the user's name; `None` for the process, and for uploads
    /// recorded before initiators were).
    #[serde(default)]
    pub initiator: Option<String>,
}

/// A stored part.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartInfo {
    pub part_number: u32,
    pub etag: String,
    pub size: u64,
    pub last_modified: SystemTime,
    /// The part's checksum, when the upload was created with a checksum algorithm.
    pub checksum: Option<Checksum>,
}

/// An UploadPart.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct PartRequest {
    pub part_number: u32,
    /// The checksum the client declared for this part, computed while writing so the door can
    /// verify it, whether or not the upload was created with a checksum algorithm. It must be
    /// the upload's algorithm when the upload has one.
    pub checksum_algorithm: Option<ChecksumAlgorithm>,
    /// The part's size when the door knows it before the data (see `PutRequest::size_hint`).
    pub size_hint: Option<u64>,
    /// The door verifies the part's MD5 (see `PutRequest::md5_required`).
    #[serde(default)]
    pub md5_required: bool,
    /// `checksum_algorithm` is all the client declared (S3's UploadPart): a part with no
    /// checksum in an upload created with an algorithm is refused, as in S3. Without it (a
    /// part copy, an in-process door) such a part is hashed with the upload's algorithm.
    #[serde(default)]
    pub checksum_declared: bool,
}

/// A ListParts page request.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct ListPartsRequest {
    /// Parts with numbers above this one.
    pub after_part: u32,
    pub max_parts: usize,
}

/// A part named in CompleteMultipartUpload.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CompletedPart {
    pub part_number: u32,
    /// With or without quotes.
    pub etag: String,
    /// The part checksum the client recorded (base64), verified against the stored one.
    pub checksum: Option<String>,
}

/// What a CompleteMultipartUpload says of the object's checksum (`PutRequest::complete_checksum`),
/// checked against the upload before the object is written.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CompleteChecksum {
    /// x-amz-checksum-type: must be the upload's.
    pub kind: Option<ChecksumType>,
    /// An x-amz-checksum-* header: the object's checksum as the client computed it (a
    /// composite one with or without its "-N"), which must be the one derived from the parts.
    pub value: Option<(ChecksumAlgorithm, String)>,
}

/// A ListParts page.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartsPage {
    pub parts: Vec<PartInfo>,
    pub is_truncated: bool,
    pub next_part_number_marker: Option<u32>,
    /// The checksum the upload was created with, and how the object's derives from the parts'.
    pub checksum_algorithm: Option<ChecksumAlgorithm>,
    pub checksum_type: ChecksumType,
    /// Who started the upload (`UploadInfo::initiator`).
    #[serde(default)]
    pub initiator: Option<String>,
}

/// A ListMultipartUploads request.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ListUploadsRequest {
    pub prefix: String,
    pub key_marker: Option<String>,
    pub upload_id_marker: Option<String>,
    pub max_uploads: usize,
}

/// A ListMultipartUploads page, ordered by key, then start time.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UploadsPage {
    pub uploads: Vec<UploadInfo>,
    pub is_truncated: bool,
    pub next_key_marker: Option<String>,
    pub next_upload_id_marker: Option<String>,
}
