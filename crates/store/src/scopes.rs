//! Capability scopes of bearer tokens (the WLCG Common JWT Profile's `storage.read:/path`,
//! `storage.create:/path`, `storage.modify:/path`, and SciTokens' `read:/path`, `write:/path`)
//! as paths of the S3 namespace (`/bucket/key`), and what each request needs of them. A request
//! that carries scopes is limited to them on top of its user's own rights: scopes narrow, never
//! widen.

use std::fmt;

/// What a scope lets its bearer do beneath its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ScopeAccess {
    /// Read objects, list keys.
    Read,
    /// Upload new objects (never replace or delete one), create buckets.
    Create,
    /// Create, replace and delete objects, change tags and ACLs; implies Create (WLCG).
    Modify,
}

impl ScopeAccess {
    fn name(self) -> &'static str {
        match self {
            Self::Read => "storage.read",
            Self::Create => "storage.create",
            Self::Modify => "storage.modify",
        }
    }
}

/// Why a token's scope claim is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScopeError {
    #[error("scope {0:?}: the path must be absolute and normalized (no '.', '..' or empty segments)")]
    BadPath(String),
    #[error("the token grants no storage access this gateway supports (scopes: {0:?})")]
    NothingSupported(String),
}

/// One granted scope: an access on a normalized absolute path ("" is the root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub access: ScopeAccess,
    /// `/bucket/key/prefix` without a trailing slash; "" for the whole namespace.
    pub path: String,
}

impl Scope {
    /// Whether the scope's path holds `target` (a path of the same form) or is it.
    fn holds(&self, target: &str) -> bool {
        self.path.is_empty()
            || target == self.path
            || (target.starts_with(&self.path) && target.as_bytes().get(self.path.len()) == Some(&b'/'))
    }

    /// Whether the scope grants `access`: modify implies create.
    fn grants(&self, access: ScopeAccess) -> bool {
        self.access == access || (self.access == ScopeAccess::Modify && access == ScopeAccess::Create)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() { "/" } else { &self.path };
        write!(f, "{}:{path}", self.access.name())
    }
}

/// The scopes one request carries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scopes {
    granted: Vec<Scope>,
    /// Scopes the token carried that this gateway does not grant anything for
    /// (`storage.stage`, unknown names), for messages.
    pub ignored: Vec<String>,
}

/// `path` normalized ("" for "/"), or None when it is relative or has '.', '..' or empty
/// segments: a scope for `/a/../b` is refused rather than read as `/b`.
fn normalize(path: &str) -> Option<String> {
    let rest = path.strip_prefix('/')?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Some(String::new());
    }
    if rest.split('/').any(|segment| segment.is_empty() || segment == "." || segment == "..") {
        return None;
    }
    Some(format!("/{rest}"))
}

impl Scopes {
    /// The scopes of a token's `scope` claim (space-separated), each path taken relative to
    /// the issuer's `base_path` (itself a path of the S3 namespace, "/" for all buckets).
    pub fn parse(claim: &str, base_path: &str) -> Result<Self, ScopeError> {
        let base = normalize(base_path).ok_or_else(|| ScopeError::BadPath(base_path.to_string()))?;
        let mut scopes = Self::default();
        for item in claim.split_whitespace() {
            // A scope without a path grants nothing (fail closed): `storage.read` alone is not
            // read as `storage.read:/`, the whole namespace.
            let Some((name, path)) = item.split_once(':') else {
                scopes.ignored.push(item.to_string());
                continue;
            };
            let access = match name {
                "storage.read" | "read" => vec![ScopeAccess::Read],
                "storage.create" => vec![ScopeAccess::Create],
                "storage.modify" => vec![ScopeAccess::Modify],
                // SciTokens: write is create and modify.
                "write" => vec![ScopeAccess::Modify],
                // storage.stage (tape recall) and anything else: not supported here.
                _ => {
                    scopes.ignored.push(item.to_string());
                    continue;
                }
            };
            let relative = normalize(path).ok_or_else(|| ScopeError::BadPath(item.to_string()))?;
            for access in access {
                scopes.granted.push(Scope { access, path: format!("{base}{relative}") });
            }
        }
        if scopes.granted.is_empty() {
            return Err(ScopeError::NothingSupported(claim.to_string()));
        }
        Ok(scopes)
    }

    /// Scopes granted as given (for temporary credentials made from a token).
    pub fn from_granted(granted: Vec<Scope>) -> Self {
        Self { granted, ignored: Vec::new() }
    }

    pub fn granted(&self) -> &[Scope] {
        &self.granted
    }

    /// The scopes as a claim (`storage.read:/a storage.modify:/b`), relative to "/".
    pub fn to_claim(&self) -> String {
        self.granted.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")
    }

    fn object_path(bucket: &str, key: &str) -> String {
        if key.is_empty() { format!("/{bucket}") } else { format!("/{bucket}/{}", key.trim_end_matches('/')) }
    }

    /// Whether `access` is granted on the object `key` of `bucket` ("" for the bucket itself).
    pub fn allows(&self, access: ScopeAccess, bucket: &str, key: &str) -> bool {
        // A key that climbs (`run1/../secret`) is never inside a scope, whatever the backend
        // would make of it.
        if key.split('/').any(|segment| segment == ".." || segment == ".") {
            return false;
        }
        let target = Self::object_path(bucket, key);
        self.granted.iter().any(|s| s.grants(access) && s.holds(&target))
    }

    /// Whether a listing of `bucket` under `prefix` stays within a read scope: the prefix must
    /// lie beneath a scope's directory (`data/` for `/bucket/data`, not `dat`, which would also
    /// list `database`).
    pub fn allows_listing(&self, bucket: &str, prefix: &str) -> bool {
        if prefix.split('/').any(|segment| segment == "..") {
            return false;
        }
        let listed = format!("/{bucket}/{prefix}");
        self.granted
            .iter()
            .any(|s| s.grants(ScopeAccess::Read) && (s.path.is_empty() || listed.starts_with(&format!("{}/", s.path))))
    }

    /// Whether any scope reaches into `bucket` (or covers it): enough to see that it exists.
    pub fn touches(&self, bucket: &str) -> bool {
        let path = format!("/{bucket}");
        self.granted.iter().any(|s| s.holds(&path) || s.path.starts_with(&format!("{path}/")))
    }

    /// `allows` as an error naming the scope that was needed.
    pub fn require(&self, access: ScopeAccess, bucket: &str, key: &str) -> Result<(), crate::StoreError> {
        if self.allows(access, bucket, key) {
            return Ok(());
        }
        let needed = Scope { access, path: Self::object_path(bucket, key) };
        Err(crate::StoreError::OutOfScope(needed.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wlcg_and_scitokens_scopes_map_onto_buckets_and_prefixes() {
        let s =
            Scopes::parse("storage.read:/data/run1 storage.create:/data/incoming openid offline_access", "/").unwrap();
        assert!(s.allows(ScopeAccess::Read, "data", "run1/a.h5"));
        assert!(s.allows(ScopeAccess::Read, "data", "run1"));
        assert!(!s.allows(ScopeAccess::Read, "data", "run10/a.h5"), "a sibling with a common prefix");
        assert!(!s.allows(ScopeAccess::Read, "data", "run1/../secret/x"), "a key that climbs out");
        assert!(!s.allows(ScopeAccess::Read, "data", "incoming/x"), "create does not read");
        assert!(s.allows(ScopeAccess::Create, "data", "incoming/x"));
        assert!(!s.allows(ScopeAccess::Modify, "data", "incoming/x"), "create does not replace or delete");
        assert_eq!(s.ignored, ["openid", "offline_access"]);
        let m = Scopes::parse("storage.modify:/b", "/").unwrap();
        assert!(m.allows(ScopeAccess::Create, "b", "k"), "modify implies create");
        let sci = Scopes::parse("read:/ write:/out", "/").unwrap();
        assert!(sci.allows(ScopeAccess::Read, "anything", "k"));
        assert!(sci.allows(ScopeAccess::Modify, "out", "k"));
    }

    #[test]
    fn base_paths_prefix_the_scope_paths() {
        let s = Scopes::parse("storage.read:/run1", "/atlas").unwrap();
        assert!(s.allows(ScopeAccess::Read, "atlas", "run1/f"));
        assert!(!s.allows(ScopeAccess::Read, "run1", "f"));
        assert_eq!(s.to_claim(), "storage.read:/atlas/run1");
    }

    #[test]
    fn traversal_and_unsupported_scopes_are_refused() {
        assert!(matches!(Scopes::parse("storage.read:/a/../b", "/"), Err(ScopeError::BadPath(_))));
        assert!(matches!(Scopes::parse("storage.read:a", "/"), Err(ScopeError::BadPath(_))));
        assert!(matches!(Scopes::parse("storage.read://b", "/"), Err(ScopeError::BadPath(_))));
        assert!(matches!(Scopes::parse("storage.stage:/tape", "/"), Err(ScopeError::NothingSupported(_))));
    }

    #[test]
    fn a_scope_without_a_path_grants_nothing() {
        // Issue 28, finding 9: `storage.read` alone used to grant the whole namespace.
        for claim in ["storage.read", "read", "storage.modify", "write"] {
            assert!(matches!(Scopes::parse(claim, "/"), Err(ScopeError::NothingSupported(_))), "{claim}");
        }
        let s = Scopes::parse("storage.read storage.create:/b/in", "/").unwrap();
        assert!(!s.allows(ScopeAccess::Read, "b", "in/x"));
        assert!(!s.allows(ScopeAccess::Read, "other", "x"));
        assert!(s.allows(ScopeAccess::Create, "b", "in/x"));
        assert_eq!(s.ignored, ["storage.read"]);
    }

    #[test]
    fn listings_stay_beneath_a_read_scope() {
        let s = Scopes::parse("storage.read:/b/data", "/").unwrap();
        assert!(s.allows_listing("b", "data/"));
        assert!(s.allows_listing("b", "data/sub/x"));
        assert!(!s.allows_listing("b", "dat"));
        assert!(!s.allows_listing("b", ""));
        assert!(s.touches("b"));
        assert!(!s.touches("c"));
        assert!(Scopes::parse("storage.read:/", "/").unwrap().allows_listing("c", ""));
    }
}
