//! Multipart uploads as the `Store` interface names them: S3's part limits, an upload in
//! progress, stored and completed parts, and the ListParts and ListMultipartUploads pages.
//! How uploads are kept is each backend's business.

use std::time::SystemTime;

use crate::checksum::{Checksum, ChecksumAlgorithm, ChecksumType};

/// Part numbers S3 accepts.
pub const MAX_PART_NUMBER: u32 = 10_000;
/// Every part but the last must be at least this large.
pub const MIN_PART_SIZE: u64 = 5 << 20;

/// An upload in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadInfo {
    pub key: String,
    pub upload_id: String,
    pub initiated: SystemTime,
    /// The checksum the upload was created with, and how the object's derives from the parts'.
    pub checksum_algorithm: Option<ChecksumAlgorithm>,
    pub checksum_type: ChecksumType,
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

/// A part named in CompleteMultipartUpload.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CompletedPart {
    pub part_number: u32,
    /// With or without quotes.
    pub etag: String,
    /// The part checksum the client recorded (base64), verified against the stored one.
    pub checksum: Option<String>,
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
}

/// A ListMultipartUploads request.
#[derive(Debug, Clone, Default)]
pub struct ListUploadsRequest {
    pub prefix: String,
    pub key_marker: Option<String>,
    pub upload_id_marker: Option<String>,
    pub max_uploads: usize,
}

/// A ListMultipartUploads page, ordered by key, then start time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UploadsPage {
    pub uploads: Vec<UploadInfo>,
    pub is_truncated: bool,
    pub next_key_marker: Option<String>,
    pub next_upload_id_marker: Option<String>,
}
