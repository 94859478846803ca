//! Conditional requests (If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since) and
//! byte ranges, evaluated the way S3 does.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{StoreError, StoreResult};

/// An ETag condition: `*` or a list of ETags (without quotes).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ETagMatch {
    Any,
    Tags(Vec<String>),
}

impl ETagMatch {
    pub fn matches(&self, etag: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Tags(tags) => tags.iter().any(|t| t.trim_matches('"') == etag),
        }
    }
}

/// The read conditions of GET, HEAD and the copy source.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Conditions {
    pub if_match: Option<ETagMatch>,
    pub if_none_match: Option<ETagMatch>,
    pub if_modified_since: Option<SystemTime>,
    pub if_unmodified_since: Option<SystemTime>,
}

fn whole_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Conditions {
    /// S3 rules: If-Match wins over If-Unmodified-Since (412 on failure); If-None-Match wins
    /// over If-Modified-Since (304 on failure). HTTP dates have whole-second precision.
    pub fn check(&self, etag: &str, last_modified: SystemTime) -> StoreResult<()> {
        let modified = whole_seconds(last_modified);
        if let Some(m) = &self.if_match {
            if !m.matches(etag) {
                return Err(StoreError::PreconditionFailed);
            }
        } else if let Some(t) = self.if_unmodified_since
            && modified > whole_seconds(t)
        {
            return Err(StoreError::PreconditionFailed);
        }
        if let Some(m) = &self.if_none_match {
            if m.matches(etag) {
                return Err(StoreError::NotModified { etag: etag.to_string(), last_modified });
            }
        } else if let Some(t) = self.if_modified_since
            && modified <= whole_seconds(t)
        {
            return Err(StoreError::NotModified { etag: etag.to_string(), last_modified });
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// An HTTP byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ByteRange {
    /// `bytes=first-last` or `bytes=first-`.
    FromTo { first: u64, last: Option<u64> },
    /// `bytes=-n`: the last n bytes.
    Suffix(u64),
}

impl ByteRange {
    /// The inclusive range `(first, last)` within an object of `size` bytes.
    pub fn resolve(self, size: u64) -> StoreResult<(u64, u64)> {
        match self {
            Self::FromTo { first, last } => {
                if first >= size || last.is_some_and(|l| l < first) {
                    return Err(StoreError::InvalidRange { size });
                }
                Ok((first, last.map_or(size - 1, |l| l.min(size - 1))))
            }
            Self::Suffix(n) => {
                if n == 0 || size == 0 {
                    return Err(StoreError::InvalidRange { size });
                }
                Ok((size.saturating_sub(n), size - 1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn ranges_resolve_like_s3() {
        let r = |first, last| ByteRange::FromTo { first, last };
        assert_eq!(r(0, Some(9)).resolve(100).unwrap(), (0, 9));
        assert_eq!(r(90, None).resolve(100).unwrap(), (90, 99));
        assert_eq!(r(90, Some(500)).resolve(100).unwrap(), (90, 99));
        assert_eq!(ByteRange::Suffix(10).resolve(100).unwrap(), (90, 99));
        assert_eq!(ByteRange::Suffix(500).resolve(100).unwrap(), (0, 99));
        assert!(r(100, None).resolve(100).is_err());
        assert!(r(5, Some(4)).resolve(100).is_err());
        assert!(ByteRange::Suffix(0).resolve(100).is_err());
        assert!(r(0, None).resolve(0).is_err());
    }

    #[test]
    fn conditions_follow_s3_precedence() {
        let etag = "abc";
        let modified = at(1_000_000) + Duration::from_millis(500);
        let ok = |c: Conditions| c.check(etag, modified);
        assert!(ok(Conditions::default()).is_ok());
        let tags = |t: &[&str]| Some(ETagMatch::Tags(t.iter().map(|s| s.to_string()).collect()));

        assert!(ok(Conditions { if_match: tags(&["\"abc\""]), ..Default::default() }).is_ok());
        assert!(matches!(
            ok(Conditions { if_match: tags(&["x"]), ..Default::default() }),
            Err(StoreError::PreconditionFailed)
        ));
        // If-Match true + If-Unmodified-Since false => 200.
        assert!(
            ok(Conditions { if_match: tags(&["abc"]), if_unmodified_since: Some(at(10)), ..Default::default() })
                .is_ok()
        );
        assert!(matches!(
            ok(Conditions { if_unmodified_since: Some(at(10)), ..Default::default() }),
            Err(StoreError::PreconditionFailed)
        ));
        // Same second counts as not modified since.
        assert!(ok(Conditions { if_unmodified_since: Some(at(1_000_000)), ..Default::default() }).is_ok());

        assert!(matches!(
            ok(Conditions { if_none_match: tags(&["abc"]), ..Default::default() }),
            Err(StoreError::NotModified { .. })
        ));
        assert!(matches!(
            ok(Conditions { if_none_match: Some(ETagMatch::Any), ..Default::default() }),
            Err(StoreError::NotModified { .. })
        ));
        // If-None-Match false + If-Modified-Since false => 304 only from If-None-Match, so 200.
        assert!(
            ok(Conditions {
                if_none_match: tags(&["zzz"]),
                if_modified_since: Some(at(2_000_000)),
                ..Default::default()
            })
            .is_ok()
        );
        assert!(matches!(
            ok(Conditions { if_modified_since: Some(at(1_000_000)), ..Default::default() }),
            Err(StoreError::NotModified { .. })
        ));
        assert!(ok(Conditions { if_modified_since: Some(at(999_999)), ..Default::default() }).is_ok());
    }
}
