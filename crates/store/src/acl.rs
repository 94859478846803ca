//! ACLs of buckets and objects (canned ACLs and grants to users): who besides the owner (and
//! those the configuration grants) may read or write a bucket's objects, or read one object. Kept by the backend beside
//! the data (posix: the bucket's record in `ROOT/.isthmus/buckets`, and sealed in the object's metadata record), enforced by the
//! authorization layer (`authz`).

use std::fmt;
use std::str::FromStr;

/// S3's canned ACLs that share a bucket or an object with everyone or every signed user.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CannedAcl {
    /// Only the owner (and configured grants).
    #[default]
    Private,
    /// Everyone, signed or not, may list and read objects.
    PublicRead,
    /// Everyone may list, read, write and delete objects.
    PublicReadWrite,
    /// Every signed user of this gateway may list and read objects.
    AuthenticatedRead,
}

impl CannedAcl {
    /// Whether it shares with everyone or every signed user (what PublicAccessBlock blocks).
    pub fn is_public(self) -> bool {
        self != Self::Private
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Private => "private",
            Self::PublicRead => "public-read",
            Self::PublicReadWrite => "public-read-write",
            Self::AuthenticatedRead => "authenticated-read",
        }
    }
}

impl fmt::Display for CannedAcl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CannedAcl {
    type Err = crate::StoreError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "private" => Ok(Self::Private),
            "public-read" => Ok(Self::PublicRead),
            "public-read-write" => Ok(Self::PublicReadWrite),
            "authenticated-read" => Ok(Self::AuthenticatedRead),
            other => Err(crate::StoreError::InvalidArgument(format!(
                "unsupported canned ACL {other:?}: use private, public-read, public-read-write or authenticated-read"
            ))),
        }
    }
}

/// What an explicit grant gives one user of the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum GrantPermission {
    /// On a bucket: list it and read its objects; on an object: read it.
    Read,
    /// On a bucket: write and delete its objects (not meaningful on an object).
    Write,
}

/// An explicit grant to a user of the gateway, named by canonical id (its access key).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Grant {
    pub grantee: String,
    pub permission: GrantPermission,
}

/// A bucket's or an object's ACL: a canned ACL (the groups it shares with) and grants to users.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Acl {
    pub canned: CannedAcl,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<Grant>,
}

impl Acl {
    pub fn canned(canned: CannedAcl) -> Self {
        Self { canned, grants: Vec::new() }
    }

    /// Whether an explicit grant gives `user` the permission.
    pub fn grants(&self, user: &str, permission: GrantPermission) -> bool {
        self.grants.iter().any(|g| g.grantee == user && g.permission == permission)
    }
}

/// A bucket's PublicAccessBlock: what it refuses or ignores of public ACLs and policies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct PublicAccessBlock {
    /// Refuse putting a public ACL (bucket or object, on PUT, copy, upload or PutAcl).
    pub block_public_acls: bool,
    /// Treat public ACLs as private when authorizing.
    pub ignore_public_acls: bool,
    /// Refuse putting a policy that allows everyone.
    pub block_public_policy: bool,
    /// Ignore the statements of a policy that allow everyone.
    pub restrict_public_buckets: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for acl in [CannedAcl::Private, CannedAcl::PublicRead, CannedAcl::PublicReadWrite, CannedAcl::AuthenticatedRead]
        {
            assert_eq!(acl.name().parse::<CannedAcl>().unwrap(), acl);
        }
        assert!("bucket-owner-full-control-ish".parse::<CannedAcl>().is_err());
    }
}
