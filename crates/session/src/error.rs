//! Why the session refused to say who is asking: each refusal carries the S3 code a door
//! answers with and the message the client reads.

/// A request the session will not give a context to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("The AWS access key ID you provided does not exist in our records.")]
    UnknownKey,
    #[error("The access key ID you provided is disabled on this gateway; ask its administrator.")]
    KeyDisabled,
    #[error("The keys these temporary credentials were made from are no longer valid (user removed or secret changed)")]
    StaleKeys,
    #[error("Access Denied: your user is disabled on this gateway")]
    UserDisabled,
    #[error("Access Denied: your user has no Unix identity on this gateway")]
    NoUnixIdentity,
    #[error("The provided token has expired (temporary credentials)")]
    ExpiredToken,
    #[error("{0}")]
    InvalidToken(String),
}

impl Refusal {
    /// The S3 error code a door answers with.
    pub fn s3_code(&self) -> &'static str {
        match self {
            Self::UnknownKey | Self::KeyDisabled | Self::StaleKeys => "InvalidAccessKeyId",
            Self::UserDisabled | Self::NoUnixIdentity => "AccessDenied",
            Self::ExpiredToken => "ExpiredToken",
            Self::InvalidToken(_) => "InvalidToken",
        }
    }
}
