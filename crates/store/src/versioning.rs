//! Object versioning as the `Store` interface names it: a bucket's versioning state, version
//! ids, what a versioned delete did, and the ListObjectVersions request and page. How versions
//! are kept is each backend's business (the posix one: `posix/versions.rs`).

use serde::{Deserialize, Serialize};

use crate::ObjectInfo;
use crate::error::{StoreError, StoreResult};

/// The version id of objects written while versioning was off or suspended, as S3 names it.
pub const NULL_VERSION: &str = "null";

/// A bucket's versioning state. A bucket that never had one is unversioned (`None` where a
/// state is optional); once enabled, versioning can only be suspended, as in S3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Versioning {
    /// Every write makes a new version; overwritten and deleted objects are kept.
    Enabled,
    /// Writes make the "null" version (replacing an earlier null version); versions already
    /// kept stay.
    Suspended,
}

impl Versioning {
    /// The name S3 uses in the VersioningConfiguration document.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Enabled => "Enabled",
            Self::Suspended => "Suspended",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "Enabled" => Some(Self::Enabled),
            "Suspended" => Some(Self::Suspended),
            _ => None,
        }
    }

    /// The version id a write made now gets in a bucket in this state.
    pub fn next_version_id(self) -> String {
        match self {
            Self::Enabled => new_version_id(),
            Self::Suspended => NULL_VERSION.to_string(),
        }
    }
}

/// A fresh version id: 16 hex digits of nanoseconds since the epoch, then 8 random hex digits,
/// so ids of one key sort by age, are unique across gateways sharing a file system, and are
/// safe as file names.
pub fn new_version_id() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    let mut random = [0u8; 4];
    getrandom::fill(&mut random).expect("the OS random source works");
    format!("{:016x}{}", nanos as u64, hex::encode(random))
}

/// Checks a version id a client sent: "null" or one this engine made. Anything else is the
/// InvalidArgument S3 answers for a malformed id (it is also never used as a file name).
pub fn validate_version_id(id: &str) -> StoreResult<()> {
    let ours = id.len() == 24 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if id == NULL_VERSION || ours {
        Ok(())
    } else {
        Err(StoreError::InvalidArgument("Invalid version id specified".into()))
    }
}

/// What a DeleteObject did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeleteOutcome {
    /// The version id of the delete marker made, or of the version removed; `None` in an
    /// unversioned bucket.
    pub version_id: Option<String>,
    /// True when the delete made a delete marker, or removed one by its version id.
    pub delete_marker: bool,
}

/// One page request of ListObjectVersions.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ListVersionsRequest {
    pub prefix: String,
    pub delimiter: Option<String>,
    /// Keys after this one (or, with `version_id_marker`, versions of this key after that one).
    pub key_marker: Option<String>,
    pub version_id_marker: Option<String>,
    /// Versions, delete markers and common prefixes, together.
    pub max_keys: usize,
}

/// One version or delete marker of a key.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ObjectVersion {
    /// The version's description; `version_id` is always set. A delete marker has size 0 and
    /// an empty ETag.
    pub info: ObjectInfo,
    pub is_latest: bool,
    pub delete_marker: bool,
}

/// One page of ListObjectVersions: keys in UTF-8 byte order, each key's versions newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VersionsPage {
    pub versions: Vec<ObjectVersion>,
    pub common_prefixes: Vec<String>,
    pub is_truncated: bool,
    pub next_key_marker: Option<String>,
    pub next_version_id_marker: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ids_are_valid_distinct_and_ordered_by_age() {
        let first = new_version_id();
        let second = new_version_id();
        assert_ne!(first, second);
        validate_version_id(&first).unwrap();
        assert!(first[..16] <= second[..16]);
        validate_version_id("null").unwrap();
        for bad in ["", "NULL", "../x", "0123456789abcdef0123456g", "0123456789abcdef012345678"] {
            assert!(matches!(validate_version_id(bad), Err(StoreError::InvalidArgument(_))), "{bad}");
        }
    }
}
