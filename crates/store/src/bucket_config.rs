//! A bucket's settings as one value (`BucketConfig`: owner, ACL, policy, public access block,
//! tags, versioning, CORS, notification rules), read and written whole through two `Store` methods, with the version it
//! was read at so that two administrators changing one bucket at once do not lose each other's
//! change; and `BucketSettings`, the one-setting reads and read-modify-write changes every
//! door uses on top of them, for any store.
//!
//! Two things a bucket has are not in it, on purpose: its location (where it lives is decided
//! when it is created and changed only by migrating it, so it is never written as a setting;
//! GetBucketLocation stays readable to whoever may read the bucket) and quotas (the operator's,
//! from the configuration file, not the bucket owner's).

use std::collections::BTreeMap;

use sha2::Digest;

use crate::acl::{Acl, PublicAccessBlock};
use crate::cors::CorsConfig;
use crate::error::{StoreError, StoreResult};
use crate::notification::NotificationConfig;
use crate::versioning::Versioning;
use crate::{RequestContext, Store};

/// Every setting of one bucket. A backend keeps it as it likes (the posix backend: one small
/// file per setting in the bucket's internal area, as before this value existed).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BucketConfig {
    /// Who created the bucket (a door's user name); `None`: made with mkdir, root's.
    pub owner: Option<String>,
    /// Private when none was set.
    pub acl: Acl,
    /// The policy document as put.
    pub policy: Option<String>,
    pub public_access_block: Option<PublicAccessBlock>,
    /// At most 50; empty when it has none.
    pub tags: BTreeMap<String, String>,
    /// `None`: never versioned. Once enabled it can only be suspended.
    pub versioning: Option<Versioning>,
    /// Which web origins may use the bucket from a browser (`None`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<CorsConfig>,
    /// Which events go to which destination (`None`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification: Option<NotificationConfig>,
    /// The version these settings were read at (`bucket_config`), which a write names to say
    /// which settings it replaces; `None` in a write replaces whatever is there (a copy of a
    /// bucket's settings to another pool or drive).
    #[serde(skip)]
    pub version: Option<String>,
}

impl BucketConfig {
    /// The version of these settings: a digest of every setting, so equal settings have equal
    /// versions wherever they are kept, and any change gives a new one.
    pub fn digest(&self) -> String {
        let text = serde_json::to_vec(self).expect("settings serialize");
        hex::encode(&sha2::Sha256::digest(&text)[..12])
    }

    /// These settings with their version filled in, as `bucket_config` returns them.
    pub fn versioned(mut self) -> Self {
        self.version = Some(self.digest());
        self
    }

    /// Whether these settings may replace `current`: ConfigConflict unless `current` is the
    /// version `self` was read at (or `self` names none); InvalidArgument for a versioning
    /// state taken away (once versioned, a bucket can only be suspended, as in S3).
    pub fn check_replaces(&self, current: &BucketConfig) -> StoreResult<()> {
        if current.versioning.is_some() && self.versioning.is_none() {
            return Err(StoreError::InvalidArgument("A bucket's versioning can be suspended, never removed".into()));
        }
        match &self.version {
            Some(version) if *version != current.digest() => Err(StoreError::ConfigConflict),
            _ => Ok(()),
        }
    }

    /// Which settings differ between `self` (the current settings) and `new`.
    pub fn changed(&self, new: &BucketConfig) -> Changed {
        Changed {
            owner: self.owner != new.owner,
            acl: self.acl != new.acl,
            policy: self.policy != new.policy,
            public_access_block: self.public_access_block != new.public_access_block,
            tags: self.tags != new.tags,
            versioning: self.versioning != new.versioning,
        }
    }
}

/// Which settings a write changes (what authorization checks, and what a backend rewrites).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Changed {
    pub owner: bool,
    pub acl: bool,
    pub policy: bool,
    pub public_access_block: bool,
    pub tags: bool,
    pub versioning: bool,
}

impl Changed {
    pub fn any(self) -> bool {
        self.owner || self.acl || self.policy || self.public_access_block || self.tags || self.versioning
    }
}

/// How many times a one-setting change reads and writes again when another change landed
/// between its read and its write.
const UPDATE_ATTEMPTS: usize = 16;

/// One setting at a time, on any store: reads take it from `bucket_config`; changes read the
/// settings, change one, and write them back naming the version read, again if another change
/// landed in between, so concurrent changes of different settings both land.
pub trait BucketSettings: Store {
    /// Reads the settings, applies `change`, writes them back; again (up to 16 times) when
    /// another change landed in between (ConfigConflict after that).
    fn update_bucket_config(
        &self,
        cx: &RequestContext,
        bucket: &str,
        change: &mut dyn FnMut(&mut BucketConfig) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let mut last = StoreError::ConfigConflict;
        for _ in 0..UPDATE_ATTEMPTS {
            let mut config = self.bucket_config(cx, bucket)?;
            change(&mut config)?;
            match self.set_bucket_config(cx, bucket, &config) {
                Err(StoreError::ConfigConflict) => last = StoreError::ConfigConflict,
                other => return other,
            }
        }
        Err(last)
    }

    /// The owner recorded for a bucket (a door's user name), if any; NoSuchBucket if missing.
    fn bucket_owner(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<String>> {
        Ok(self.bucket_config(cx, bucket)?.owner)
    }

    fn set_bucket_owner(&self, cx: &RequestContext, bucket: &str, owner: &str) -> StoreResult<()> {
        self.update_bucket_config(cx, bucket, &mut |c| {
            c.owner = Some(owner.to_string());
            Ok(())
        })
    }

    /// The bucket's ACL (private when none was set); NoSuchBucket if missing.
    fn bucket_acl(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Acl> {
        Ok(self.bucket_config(cx, bucket)?.acl)
    }

    fn set_bucket_acl(&self, cx: &RequestContext, bucket: &str, acl: Acl) -> StoreResult<()> {
        self.update_bucket_config(cx, bucket, &mut |c| {
            c.acl = acl.clone();
            Ok(())
        })
    }

    /// The bucket's policy document, if it has one; NoSuchBucket if missing.
    fn bucket_policy(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<String>> {
        Ok(self.bucket_config(cx, bucket)?.policy)
    }

    /// Replaces (`Some`, checked: MalformedPolicy) or removes (`None`) the bucket's policy.
    fn set_bucket_policy(&self, cx: &RequestContext, bucket: &str, policy: Option<String>) -> StoreResult<()> {
        self.update_bucket_config(cx, bucket, &mut |c| {
            c.policy = policy.clone();
            Ok(())
        })
    }

    /// The bucket's PublicAccessBlock, if it has one; NoSuchBucket if missing.
    fn public_access_block(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<PublicAccessBlock>> {
        Ok(self.bucket_config(cx, bucket)?.public_access_block)
    }

    fn set_public_access_block(
        &self,
        cx: &RequestContext,
        bucket: &str,
        block: Option<PublicAccessBlock>,
    ) -> StoreResult<()> {
        self.update_bucket_config(cx, bucket, &mut |c| {
            c.public_access_block = block;
            Ok(())
        })
    }

    /// The bucket's tags (empty when it has none); NoSuchBucket if missing.
    fn bucket_tags(&self, cx: &RequestContext, bucket: &str) -> StoreResult<BTreeMap<String, String>> {
        Ok(self.bucket_config(cx, bucket)?.tags)
    }

    /// Replaces the bucket's tags (at most 50; an empty map removes them).
    fn set_bucket_tags(&self, cx: &RequestContext, bucket: &str, tags: BTreeMap<String, String>) -> StoreResult<()> {
        self.update_bucket_config(cx, bucket, &mut |c| {
            c.tags = tags.clone();
            Ok(())
        })
    }

    /// The bucket's CORS rules (`None`: none); NoSuchBucket if missing.
    fn bucket_cors(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<CorsConfig>> {
        Ok(self.bucket_config(cx, bucket)?.cors)
    }

    /// Replaces (or with `None` removes) the bucket's CORS rules, checked first.
    fn set_bucket_cors(&self, cx: &RequestContext, bucket: &str, cors: Option<CorsConfig>) -> StoreResult<()> {
        if let Some(config) = &cors {
            config.validate()?;
        }
        self.update_bucket_config(cx, bucket, &mut |c| {
            c.cors = cors.clone();
            Ok(())
        })
    }

    /// The bucket's notification rules (`None`: none); NoSuchBucket if missing.
    fn bucket_notification(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<NotificationConfig>> {
        Ok(self.bucket_config(cx, bucket)?.notification)
    }

    /// Replaces (or with `None` removes) the bucket's notification rules, checked first.
    fn set_bucket_notification(
        &self,
        cx: &RequestContext,
        bucket: &str,
        rules: Option<NotificationConfig>,
    ) -> StoreResult<()> {
        if let Some(config) = &rules {
            config.validate()?;
        }
        self.update_bucket_config(cx, bucket, &mut |c| {
            c.notification = rules.clone();
            Ok(())
        })
    }

    /// The bucket's versioning state (`None`: never versioned); NoSuchBucket if missing.
    fn bucket_versioning(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Option<Versioning>> {
        Ok(self.bucket_config(cx, bucket)?.versioning)
    }

    /// Enables or suspends versioning.
    fn set_bucket_versioning(&self, cx: &RequestContext, bucket: &str, state: Versioning) -> StoreResult<()> {
        self.update_bucket_config(cx, bucket, &mut |c| {
            c.versioning = Some(state);
            Ok(())
        })
    }
}

impl<S: Store + ?Sized> BucketSettings for S {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_follow_every_setting_and_only_settings() {
        let base = BucketConfig::default();
        let mut tagged = base.clone();
        tagged.tags.insert("k".into(), "v".into());
        let mut owned = base.clone();
        owned.owner = Some("alice".into());
        assert_ne!(base.digest(), tagged.digest());
        assert_ne!(base.digest(), owned.digest());
        assert_ne!(tagged.digest(), owned.digest());
        // The version field itself is not a setting.
        assert_eq!(base.clone().versioned().digest(), base.digest());
    }

    #[test]
    fn a_write_replaces_only_the_version_it_read() {
        let current = BucketConfig::default();
        let read = current.clone().versioned();
        assert!(read.check_replaces(&current).is_ok());
        let mut moved_on = current.clone();
        moved_on.acl = Acl::canned(crate::CannedAcl::PublicRead);
        assert!(matches!(read.check_replaces(&moved_on), Err(StoreError::ConfigConflict)));
        let unconditional = BucketConfig { version: None, ..read };
        assert!(unconditional.check_replaces(&moved_on).is_ok());
    }
}
