//! Grid storage features of Isthmus: bearer tokens (JWT, WLCG / SciTokens scopes) and the
//! temporary S3 credentials STS makes from them, and HTTP third-party copy (pull and push,
//! with performance markers, checksum-verified, bounded in time, number and space); the TLS of
//! the clients Isthmus ships when given a CA bundle.

pub mod copy_limits;
pub mod outbound;
pub mod sessions;
pub mod sigv4;
pub mod tls_bundle;
pub mod tokens;
pub mod tpc;

pub use copy_limits::{CopyLimits, CopySlot, CopySlots, SlotRefusal};
pub use outbound::{AllowEntry, OutboundPolicy, OutboundRefusal};
pub use sessions::{SessionCredentials, SessionError, SessionKeys};
pub use tokens::{IssuerConfig, TokenError, TokenGrant, TokenVerifier};
