//! What is stored with an object besides its bytes (`ObjectMeta`: HTTP headers, user metadata,
//! tags, the object's ACL), the changes made to it in place (`ObjectChange`), and S3's limits
//! on it, checked by every backend before a write.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// HTTP headers and user metadata stored with an object, returned unchanged on GET and HEAD.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_encoding: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_disposition: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<String>,
    /// The `Expires` header as the client sent it (an HTTP date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// `x-amz-meta-*` pairs, names without the prefix, lower case.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub user: BTreeMap<String, String>,
    /// Object tags (set with x-amz-tagging or PutObjectTagging).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The object's canned ACL (x-amz-acl, PutObjectAcl); none is private.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acl: Option<crate::CannedAcl>,
    /// Grants of the object's ACL to users (PutObjectAcl).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<crate::acl::Grant>,
}

impl ObjectMeta {
    /// The object's ACL.
    pub fn object_acl(&self) -> crate::Acl {
        crate::Acl { canned: self.acl.unwrap_or_default(), grants: self.grants.clone() }
    }
}

/// A change of what is kept with an object besides its bytes, made in place
/// (`Store::update_object`): its bytes, ETag and Last-Modified stay. One variant per S3
/// subresource an object has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ObjectChange {
    /// Replaces the object's ACL (PutObjectAcl; private without grants removes it).
    Acl(crate::Acl),
    /// Replaces the object's tags (PutObjectTagging; an empty map, DeleteObjectTagging).
    Tags(BTreeMap<String, String>),
}

impl ObjectChange {
    /// Checks the change against S3's limits before a backend makes it.
    pub fn validate(&self) -> crate::StoreResult<()> {
        match self {
            Self::Acl(_) => Ok(()),
            Self::Tags(tags) => validate_tags(tags),
        }
    }

    /// Makes the change in an object's stored description.
    pub fn apply(self, meta: &mut ObjectMeta) {
        match self {
            Self::Acl(acl) => {
                meta.acl = Some(acl.canned).filter(|canned| *canned != crate::CannedAcl::Private);
                meta.grants = acl.grants;
            }
            Self::Tags(tags) => meta.tags = tags,
        }
    }
}

impl ObjectMeta {
    /// Checks what a write stores against S3's limits (tags, user metadata size).
    pub fn validate(&self) -> crate::StoreResult<()> {
        validate_tags(&self.tags)?;
        validate_user_metadata(&self.user)
    }
}

/// S3's limit on user metadata: the `x-amz-meta-*` names and values, in bytes.
pub const MAX_USER_METADATA: usize = 2048;

/// Checks the user metadata size against S3's limit.
pub fn validate_user_metadata(user: &BTreeMap<String, String>) -> crate::StoreResult<()> {
    let size: usize = user.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > MAX_USER_METADATA {
        return Err(crate::StoreError::MetadataTooLarge(size));
    }
    Ok(())
}

/// S3's limits on object tags.
pub const MAX_TAGS: usize = 10;

/// Checks tags against S3's limits: at most 10, keys up to 128 and values up to 256 characters.
pub fn validate_tags(tags: &BTreeMap<String, String>) -> crate::StoreResult<()> {
    validate_tag_set(tags, MAX_TAGS, "Object")
}

/// S3's limit on the tags of a bucket.
pub const MAX_BUCKET_TAGS: usize = 50;

/// Checks a bucket's tags: at most 50, keys and values as for objects.
pub fn validate_bucket_tags(tags: &BTreeMap<String, String>) -> crate::StoreResult<()> {
    validate_tag_set(tags, MAX_BUCKET_TAGS, "Bucket")
}

fn validate_tag_set(tags: &BTreeMap<String, String>, max: usize, what: &str) -> crate::StoreResult<()> {
    let invalid = |why: String| Err(crate::StoreError::InvalidTag(why));
    if tags.len() > max {
        return invalid(format!("{what} tags cannot be greater than {max}"));
    }
    for (k, v) in tags {
        if k.is_empty() || k.chars().count() > 128 {
            return invalid("The TagKey you have provided is invalid (1 to 128 characters)".into());
        }
        if v.chars().count() > 256 {
            return invalid("The TagValue you have provided is invalid (up to 256 characters)".into());
        }
    }
    Ok(())
}
