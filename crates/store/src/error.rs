//! Errors of the storage engine. Each variant knows the S3 error code and HTTP status it becomes
//! at the edge, so doors map them without guessing.

use std::io;

/// Everything an engine call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("The specified bucket does not exist")]
    NoSuchBucket,
    #[error("The specified key does not exist")]
    NoSuchKey,
    /// The key's latest version is a delete marker (GET and HEAD without a version id).
    #[error("The specified key does not exist")]
    LatestIsDeleteMarker { version_id: String },
    #[error("The specified version does not exist")]
    NoSuchVersion,
    /// GET or HEAD of a delete marker by its version id.
    #[error("The specified method is not allowed against this resource (the version is a delete marker)")]
    VersionIsDeleteMarker { version_id: String },
    #[error("Your previous request to create the named bucket succeeded and you already own it")]
    BucketAlreadyOwnedByYou,
    #[error(
        "The requested bucket name is not available. The bucket namespace is shared by all users of this gateway. Please select a different name and try again."
    )]
    BucketAlreadyExists,
    #[error("The bucket you tried to delete is not empty")]
    BucketNotEmpty,
    #[error("Invalid bucket name: {0}")]
    InvalidBucketName(String),
    #[error("Your key is too long: {0}")]
    KeyTooLong(String),
    #[error("Invalid object key: {0}")]
    InvalidKey(String),
    #[error("Object key {0:?} needs a directory where a file (object) of that name exists")]
    ParentIsObject(String),
    #[error("Object key {0:?} names a directory that holds other objects")]
    ObjectIsDirectory(String),
    #[error("At least one of the pre-conditions you specified did not hold")]
    PreconditionFailed,
    /// A GET or HEAD whose If-None-Match or If-Modified-Since held: the object's validators,
    /// which a 304 carries (RFC 9110 15.4.5).
    #[error("Not modified")]
    NotModified { etag: String, last_modified: std::time::SystemTime },
    #[error("The requested range is not satisfiable (object size {size})")]
    InvalidRange { size: u64 },
    #[error("The source object changed while it was being copied")]
    SourceChanged,
    #[error("There is not enough space left on the file system")]
    InsufficientStorage,
    /// The file system refused the request's identity (Unix permissions), or a door refused
    /// without naming a rule. (The S3 door answers S3's plain "Access Denied"; in-process
    /// callers read why.)
    #[error("Access Denied: not permitted by the file system's permissions")]
    AccessDenied,
    /// An authorization rule refused the request: why, in words, for the gateway's log (the S3
    /// door answers S3's plain "Access Denied").
    #[error("Access Denied: {0}")]
    Denied(String),
    /// A bearer token (or the temporary credentials made from one) does not grant this request:
    /// an AccessDenied that says which scope it needed.
    #[error("Access denied: the token's scopes do not grant {0}")]
    OutOfScope(String),
    /// A bucket or user quota (or the file system's own quota) would be exceeded.
    #[error("{0}")]
    QuotaExceeded(String),
    #[error(
        "The specified multipart upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."
    )]
    NoSuchUpload,
    #[error("One or more of the specified parts could not be found or its ETag did not match (part {0})")]
    InvalidPart(u32),
    #[error("The list of parts was not in ascending order. Parts must be ordered by part number.")]
    InvalidPartOrder,
    #[error("Your proposed upload is smaller than the minimum allowed object size (5 MiB for every part but the last)")]
    EntityTooSmall,
    #[error("{0}")]
    InvalidArgument(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    MalformedXml(String),
    #[error("{0}")]
    BadDigest(String),
    #[error("{0}")]
    InvalidTag(String),
    /// Too few shards of an erasure-coded block could be read to rebuild it.
    #[error("The object cannot be read now: {0}")]
    InsufficientShards(String),
    /// CreateBucket named a pool that is not configured.
    #[error("{0}")]
    InvalidLocationConstraint(String),
    /// What a backend does not do (versioning on an erasure-coded pool).
    #[error("{0}")]
    NotImplemented(String),
    #[error("Policies must be valid JSON and use only supported elements: {0}")]
    MalformedPolicy(String),
    /// A bucket's settings were changed by another request between this one's read and its
    /// write (`BucketConfig::version`): read them again.
    #[error("A conflicting conditional operation is currently in progress against this resource. Please try again.")]
    ConfigConflict,
    /// A GET or HEAD `partNumber` past the object's last part. Reported as S3 does (400
    /// `InvalidPart`, as the S3 conformance suite checks against AWS), not as the 416
    /// `InvalidPartNumber` of S3's error table, which no client sees from AWS.
    #[error("The requested part number is past the object's last part")]
    InvalidPartNumber,
    #[error("Your metadata headers exceed the maximum allowed metadata size ({0} bytes, the limit is 2048)")]
    MetadataTooLarge(usize),
    /// The gateway cannot take the write now (its notification queue is full): S3's 503
    /// SlowDown, which clients retry with backoff.
    #[error("Please reduce your request rate: {0}")]
    SlowDown(String),
    /// The call would have to do long work (hash a file written outside the gateway) and its
    /// context says the caller may not block: the caller retries where blocking is allowed.
    #[error("This call must run where it may block")]
    WouldBlock,
    #[error("Internal I/O error: {0}")]
    Io(io::Error),
    /// An I/O error with what the engine was doing and on which path (relative to the data
    /// root or the bucket), for the logs.
    #[error("Internal I/O error: cannot {operation} {path:?}: {source}")]
    IoAt { operation: &'static str, path: String, source: io::Error },
    /// An error an engine in another process reported (through the local door), with its S3
    /// code and status kept.
    #[error("{message}")]
    Remote { code: &'static str, status: u16, message: String },
}

/// Every code `s3_code` reports, so a remote error's code maps back to one of them.
const S3_CODES: &[&str] = &[
    "NoSuchBucket",
    "NoSuchKey",
    "NoSuchVersion",
    "MethodNotAllowed",
    "BucketAlreadyOwnedByYou",
    "BucketAlreadyExists",
    "BucketNotEmpty",
    "InvalidBucketName",
    "KeyTooLongError",
    "InvalidArgument",
    "ParentIsObject",
    "ObjectIsDirectory",
    "PreconditionFailed",
    "NotModified",
    "InvalidRange",
    "InsufficientStorage",
    "AccessDenied",
    "QuotaExceeded",
    "NoSuchUpload",
    "InvalidPart",
    "InvalidPartOrder",
    "EntityTooSmall",
    "InvalidRequest",
    "MalformedXML",
    "BadDigest",
    "InvalidTag",
    "InvalidLocationConstraint",
    "ServiceUnavailable",
    "SlowDown",
    "MalformedPolicy",
    "NotImplemented",
    "InvalidPartNumber",
    "MetadataTooLarge",
    "OperationAborted",
    "InternalError",
];

impl StoreError {
    /// The S3 error code this error is reported as.
    pub fn s3_code(&self) -> &'static str {
        match self {
            Self::NoSuchBucket => "NoSuchBucket",
            Self::NoSuchKey | Self::LatestIsDeleteMarker { .. } => "NoSuchKey",
            Self::NoSuchVersion => "NoSuchVersion",
            Self::VersionIsDeleteMarker { .. } => "MethodNotAllowed",
            Self::BucketAlreadyOwnedByYou => "BucketAlreadyOwnedByYou",
            Self::BucketAlreadyExists => "BucketAlreadyExists",
            Self::BucketNotEmpty => "BucketNotEmpty",
            Self::InvalidBucketName(_) => "InvalidBucketName",
            Self::KeyTooLong(_) => "KeyTooLongError",
            Self::InvalidKey(_) => "InvalidArgument",
            // S3 has no file/directory duality; these two codes follow the naming of S3 codes
            // and are documented in docs/user/objects-and-files.md.
            Self::ParentIsObject(_) => "ParentIsObject",
            Self::ObjectIsDirectory(_) => "ObjectIsDirectory",
            Self::PreconditionFailed => "PreconditionFailed",
            Self::NotModified { .. } => "NotModified",
            Self::InvalidRange { .. } => "InvalidRange",
            Self::SourceChanged => "PreconditionFailed",
            Self::InsufficientStorage => "InsufficientStorage",
            Self::AccessDenied | Self::Denied(_) | Self::OutOfScope(_) => "AccessDenied",
            // The code Ceph RGW answers for a quota, which S3 itself does not have.
            Self::QuotaExceeded(_) => "QuotaExceeded",
            Self::NoSuchUpload => "NoSuchUpload",
            Self::InvalidPart(_) => "InvalidPart",
            Self::InvalidPartOrder => "InvalidPartOrder",
            Self::EntityTooSmall => "EntityTooSmall",
            Self::InvalidArgument(_) => "InvalidArgument",
            Self::InvalidRequest(_) => "InvalidRequest",
            Self::MalformedXml(_) => "MalformedXML",
            Self::BadDigest(_) => "BadDigest",
            Self::InvalidTag(_) => "InvalidTag",
            Self::InvalidLocationConstraint(_) => "InvalidLocationConstraint",
            Self::InsufficientShards(_) => "ServiceUnavailable",
            Self::SlowDown(_) => "SlowDown",
            Self::MalformedPolicy(_) => "MalformedPolicy",
            Self::NotImplemented(_) => "NotImplemented",
            Self::InvalidPartNumber => "InvalidPart",
            Self::ConfigConflict => "OperationAborted",
            Self::MetadataTooLarge(_) => "MetadataTooLarge",
            Self::WouldBlock | Self::Io(_) | Self::IoAt { .. } => "InternalError",
            Self::Remote { code, .. } => code,
        }
    }

    /// The error a remote engine reported as `code`, `status` and `message`: the same variant
    /// where one carries no data and says the same (so callers that match on it work alike),
    /// else `Remote`, which keeps the message.
    pub fn from_remote(code: &str, status: u16, message: String) -> Self {
        let unit = [
            Self::NoSuchBucket,
            Self::NoSuchKey,
            Self::NoSuchVersion,
            Self::BucketAlreadyOwnedByYou,
            Self::BucketAlreadyExists,
            Self::BucketNotEmpty,
            Self::PreconditionFailed,
            Self::InsufficientStorage,
            Self::AccessDenied,
            Self::NoSuchUpload,
            Self::InvalidPartOrder,
            Self::EntityTooSmall,
            Self::InvalidPartNumber,
            Self::ConfigConflict,
        ];
        let same = |e: &Self| e.s3_code() == code && e.http_status() == status && e.to_string() == message;
        if let Some(known) = unit.into_iter().find(same) {
            return known;
        }
        let code = S3_CODES.iter().copied().find(|c| *c == code).unwrap_or("InternalError");
        Self::Remote { code, status, message }
    }

    /// The HTTP status code S3 uses for this error.
    pub fn http_status(&self) -> u16 {
        match self {
            Self::NoSuchBucket
            | Self::NoSuchKey
            | Self::LatestIsDeleteMarker { .. }
            | Self::NoSuchVersion
            | Self::NoSuchUpload => 404,
            Self::VersionIsDeleteMarker { .. } => 405,
            Self::InvalidPart(_)
            | Self::InvalidPartOrder
            | Self::EntityTooSmall
            | Self::InvalidArgument(_)
            | Self::InvalidRequest(_)
            | Self::MalformedXml(_)
            | Self::BadDigest(_)
            | Self::InvalidTag(_)
            | Self::InvalidLocationConstraint(_)
            | Self::MalformedPolicy(_)
            | Self::InvalidPartNumber
            | Self::MetadataTooLarge(_) => 400,
            Self::BucketAlreadyOwnedByYou
            | Self::BucketAlreadyExists
            | Self::BucketNotEmpty
            | Self::ConfigConflict
            | Self::ObjectIsDirectory(_) => 409,
            Self::InvalidBucketName(_) | Self::KeyTooLong(_) | Self::InvalidKey(_) | Self::ParentIsObject(_) => 400,
            Self::PreconditionFailed | Self::SourceChanged => 412,
            Self::NotModified { .. } => 304,
            Self::InvalidRange { .. } => 416,
            Self::InsufficientStorage => 507,
            Self::InsufficientShards(_) | Self::SlowDown(_) => 503,
            Self::NotImplemented(_) => 501,
            Self::AccessDenied | Self::Denied(_) | Self::OutOfScope(_) | Self::QuotaExceeded(_) => 403,
            Self::WouldBlock | Self::Io(_) | Self::IoAt { .. } => 500,
            Self::Remote { status, .. } => *status,
        }
    }
}

impl StoreError {
    /// A refusal by an authorization rule, saying which (see `Denied`).
    pub fn denied(why: impl Into<String>) -> Self {
        Self::Denied(why.into())
    }

    /// Why the request was refused, for the log, if this is a refusal.
    pub fn refusal_reason(&self) -> Option<String> {
        match self {
            Self::AccessDenied => Some("not permitted by the file system's permissions".into()),
            Self::Denied(why) => Some(why.clone()),
            Self::OutOfScope(scope) => Some(format!("the token's scopes do not grant {scope}")),
            _ => None,
        }
    }

    /// An I/O error of `operation` on `path`. Errors that have an S3 meaning (no space, no
    /// permission) become that error; the others keep the operation and path for the logs.
    pub fn io(operation: &'static str, path: &std::path::Path, err: io::Error) -> Self {
        let errno = err.raw_os_error();
        match Self::from(err) {
            Self::Io(source) => Self::IoAt { operation, path: path.display().to_string(), source },
            Self::AccessDenied => {
                // The answer says only AccessDenied; the log says which call the kernel refused.
                tracing::debug!(operation, path = %path.display(), errno, "the file system refused access");
                Self::AccessDenied
            }
            other => other,
        }
    }

    /// `io` for a system call's error on a path given as text (a key, a bucket, an internal name).
    pub fn io_at(operation: &'static str, path: &str, err: rustix::io::Errno) -> Self {
        Self::io(operation, std::path::Path::new(path), err.into())
    }

    /// Adds the operation and path to a plain I/O error; other errors pass unchanged.
    pub fn context(self, operation: &'static str, path: &str) -> Self {
        match self {
            Self::Io(source) => Self::IoAt { operation, path: path.to_string(), source },
            other => other,
        }
    }
}

impl From<io::Error> for StoreError {
    fn from(err: io::Error) -> Self {
        match err.raw_os_error() {
            Some(code) if code == rustix::io::Errno::NOSPC.raw_os_error() => Self::InsufficientStorage,
            Some(code) if code == rustix::io::Errno::DQUOT.raw_os_error() => {
                Self::QuotaExceeded("The file system's quota for this directory or user is exhausted".into())
            }
            Some(code) if code == rustix::io::Errno::ACCESS.raw_os_error() => Self::AccessDenied,
            Some(code) if code == rustix::io::Errno::PERM.raw_os_error() => Self::AccessDenied,
            _ => Self::Io(err),
        }
    }
}

impl From<rustix::io::Errno> for StoreError {
    fn from(err: rustix::io::Errno) -> Self {
        io::Error::from(err).into()
    }
}

pub type StoreResult<T> = Result<T, StoreError>;
