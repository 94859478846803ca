//! Temporary S3 credentials: made from a bearer token (STS `AssumeRoleWithWebIdentity`), for
//! SDKs that sign with SigV4 and cannot send a token, limited to the token's scopes; or from a
//! user's own keys (STS `GetSessionToken`), with all of that user's rights, so a client that
//! must not keep a long-lived secret (the web console) keeps these instead. They carry
//! everything in themselves: the secret is derived from the access key and the session token is
//! a signed record of the user, the scopes and the expiry, both under one key kept (mode 0600)
//! in the data root's internal directory. So every gateway serving that root accepts them and
//! none keeps a session table.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hmac::{KeyInit, Mac};
use isthmus_store::{Scope, ScopeAccess, Scopes};
use serde::{Deserialize, Serialize};

use crate::tokens::TokenGrant;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// Access keys of temporary credentials start with this (as AWS's start with `ASIA`).
pub const SESSION_KEY_PREFIX: &str = "ISTS";
/// The shortest and longest session STS grants (as AWS: 15 minutes to 12 hours), and the
/// default (one hour).
pub const MIN_DURATION_SECONDS: u64 = 900;
pub const MAX_DURATION_SECONDS: u64 = 43_200;
pub const DEFAULT_DURATION_SECONDS: u64 = 3_600;

/// Why temporary credentials are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("temporary credentials need their session token (x-amz-security-token)")]
    MissingToken,
    #[error("the session token is invalid or does not belong to this access key")]
    Invalid,
    #[error("the temporary credentials have expired")]
    Expired,
}

/// Temporary credentials as STS returns them.
#[derive(Debug, Clone)]
pub struct SessionCredentials {
    pub access_key: String,
    pub secret_key: String,
    pub session_token: String,
    /// Unix seconds.
    pub expires_at: u64,
}

/// What a session token records.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Session {
    /// The access key these credentials belong to.
    #[serde(rename = "k")]
    pub access_key: String,
    /// The user they act as.
    #[serde(rename = "u")]
    pub user: String,
    /// The scopes, as a claim relative to "/".
    #[serde(rename = "s")]
    pub scopes: String,
    #[serde(rename = "e")]
    pub expires_at: u64,
    #[serde(rename = "sub")]
    pub subject: String,
    /// Made from a user's own keys (`GetSessionToken`): the fingerprint of those keys
    /// (`SessionKeys::fingerprint`). Such credentials act with all of the user's rights, not a
    /// token's scopes, and only while the user's keys are still these (a removed user or a
    /// rotated secret ends them). Empty for a token's.
    #[serde(rename = "f", default, skip_serializing_if = "String::is_empty")]
    pub keys: String,
}

impl Session {
    /// Whether the credentials were made from a user's own keys.
    pub fn from_keys(&self) -> bool {
        !self.keys.is_empty()
    }

    /// The scopes the credentials are limited to; none for credentials made from keys.
    pub fn limits(&self) -> Option<Arc<Scopes>> {
        (!self.from_keys()).then(|| self.scopes())
    }

    pub fn scopes(&self) -> Arc<Scopes> {
        let granted = self
            .scopes
            .split_whitespace()
            .filter_map(|item| {
                let (name, path) = item.split_once(':')?;
                let access = match name {
                    "storage.read" => ScopeAccess::Read,
                    "storage.create" => ScopeAccess::Create,
                    "storage.modify" => ScopeAccess::Modify,
                    _ => return None,
                };
                Some(Scope { access, path: path.trim_end_matches('/').to_string() })
            })
            .collect();
        Arc::new(Scopes::from_granted(granted))
    }
}

/// The key temporary credentials are made and checked with.
#[derive(Clone)]
pub struct SessionKeys {
    key: [u8; 32],
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKeys(..)")
    }
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl SessionKeys {
    /// The key file's name in the gateway's state directory.
    pub const FILE: &'static str = "sts.key";

    /// Loads the key from the gateway's state directory, creating it (mode 0600) on first
    /// use; refuses a key file other users can read, write or have planted (`state_dir`).
    pub fn load_or_create(state: &isthmus_store::state_dir::StateDir) -> Result<Self, String> {
        let key = state.load_or_create_key(Self::FILE).map_err(|e| e.to_string())?;
        Ok(Self { key })
    }

    fn mac(&self, purpose: &[u8], data: &[u8]) -> Vec<u8> {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(purpose);
        mac.update(data);
        mac.finalize().into_bytes().to_vec()
    }

    /// The secret of the temporary access key `access_key`, if it is one.
    pub fn secret_for(&self, access_key: &str) -> Option<String> {
        if !access_key.starts_with(SESSION_KEY_PREFIX) {
            return None;
        }
        let mut secret = STANDARD.encode(self.mac(b"secret\0", access_key.as_bytes()));
        secret.truncate(40);
        Some(secret)
    }

    /// Temporary credentials for what `grant` allows, valid `seconds` (never past the
    /// token's own expiry).
    pub fn issue(&self, grant: &TokenGrant, seconds: u64) -> SessionCredentials {
        self.seal((now() + seconds).min(grant.expires_at), |access_key| Session {
            access_key,
            user: grant.user.clone(),
            scopes: grant.scopes.to_claim(),
            expires_at: 0,
            subject: grant.subject.clone(),
            keys: String::new(),
        })
    }

    /// Temporary credentials of the user whose keys signed the request (its access key is its
    /// name), with all of its rights, valid `seconds`.
    pub fn issue_for_user(&self, access_key: &str, secret_key: &str, seconds: u64) -> SessionCredentials {
        self.seal(now() + seconds, |temporary| Session {
            access_key: temporary,
            user: access_key.to_string(),
            scopes: String::new(),
            expires_at: 0,
            subject: access_key.to_string(),
            keys: self.fingerprint(access_key, secret_key),
        })
    }

    /// What credentials made from these keys record of them: a MAC under the session key, so
    /// it tells whether the keys changed and reveals nothing of the secret.
    pub fn fingerprint(&self, access_key: &str, secret_key: &str) -> String {
        let data = [access_key.as_bytes(), b"\0", secret_key.as_bytes()].concat();
        let mut fingerprint = URL_SAFE_NO_PAD.encode(self.mac(b"keys\0", &data));
        fingerprint.truncate(22);
        fingerprint
    }

    /// A new temporary access key, the session `make` records for it (expiring at
    /// `expires_at`), and its signed token.
    fn seal(&self, expires_at: u64, make: impl FnOnce(String) -> Session) -> SessionCredentials {
        const ALPHABET: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).expect("the OS random source works");
        let suffix: String = bytes.iter().map(|b| ALPHABET[usize::from(b & 31)] as char).collect();
        let access_key = format!("{SESSION_KEY_PREFIX}{suffix}");
        let session = Session { expires_at, ..make(access_key.clone()) };
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&session).expect("a session serializes"));
        let signature = URL_SAFE_NO_PAD.encode(self.mac(b"session\0", payload.as_bytes()));
        let secret_key = self.secret_for(&access_key).expect("the key has the session prefix");
        SessionCredentials { access_key, secret_key, session_token: format!("{payload}.{signature}"), expires_at }
    }

    /// The session `token` records, if it is genuine, belongs to `access_key` and has not
    /// expired.
    pub fn verify(&self, access_key: &str, token: Option<&str>) -> Result<Session, SessionError> {
        let token = token.ok_or(SessionError::MissingToken)?;
        let (payload, signature) = token.split_once('.').ok_or(SessionError::Invalid)?;
        let expected = self.mac(b"session\0", payload.as_bytes());
        let given = URL_SAFE_NO_PAD.decode(signature).map_err(|_| SessionError::Invalid)?;
        if !constant_time_eq(&expected, &given) {
            return Err(SessionError::Invalid);
        }
        let bytes = URL_SAFE_NO_PAD.decode(payload).map_err(|_| SessionError::Invalid)?;
        let session: Session = serde_json::from_slice(&bytes).map_err(|_| SessionError::Invalid)?;
        if session.access_key != access_key {
            return Err(SessionError::Invalid);
        }
        if session.expires_at <= now() {
            return Err(SessionError::Expired);
        }
        Ok(session)
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(expires_in: u64) -> TokenGrant {
        TokenGrant {
            issuer: "https://issuer".into(),
            subject: "alice-sub".into(),
            user: "alice".into(),
            scopes: Arc::new(Scopes::parse("storage.read:/data storage.create:/data/in", "/").unwrap()),
            expires_at: now() + expires_in,
            audience: "isthmus".into(),
        }
    }

    #[test]
    fn credentials_verify_only_with_their_own_token_until_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let state = isthmus_store::state_dir::StateDir::open_path(dir.path(), Default::default()).unwrap();
        let keys = SessionKeys::load_or_create(&state).unwrap();
        let again = SessionKeys::load_or_create(&state).unwrap();
        let creds = keys.issue(&grant(7200), 3600);
        assert!(creds.access_key.starts_with(SESSION_KEY_PREFIX));
        assert_eq!(again.secret_for(&creds.access_key).unwrap(), creds.secret_key, "another gateway derives it");
        let session = again.verify(&creds.access_key, Some(&creds.session_token)).unwrap();
        assert_eq!(session.user, "alice");
        assert!(session.scopes().allows(ScopeAccess::Create, "data", "in/x"));
        assert!(!session.scopes().allows(ScopeAccess::Create, "data", "x"));
        let other = keys.issue(&grant(7200), 3600);
        assert_eq!(keys.verify(&creds.access_key, Some(&other.session_token)), Err(SessionError::Invalid));
        assert_eq!(keys.verify(&creds.access_key, None), Err(SessionError::MissingToken));
        let mut forged = creds.session_token.clone();
        forged.replace_range(0..1, if forged.starts_with('e') { "f" } else { "e" });
        assert_eq!(keys.verify(&creds.access_key, Some(&forged)), Err(SessionError::Invalid));
        assert!(keys.issue(&grant(100), 3600).expires_at <= now() + 100, "never past the token");
        let expired = keys.issue(&grant(0), 3600);
        assert_eq!(keys.verify(&expired.access_key, Some(&expired.session_token)), Err(SessionError::Expired));
        assert_eq!(keys.secret_for("AKIAUSER"), None);
        assert!(session.limits().is_some(), "a token's credentials keep its scopes");
    }

    #[test]
    fn credentials_from_keys_act_as_the_user_unlimited_and_tokens_of_old_sessions_still_verify() {
        let dir = tempfile::tempdir().unwrap();
        let state = isthmus_store::state_dir::StateDir::open_path(dir.path(), Default::default()).unwrap();
        let keys = SessionKeys::load_or_create(&state).unwrap();
        let creds = keys.issue_for_user("AKIAALICE", "alice-secret", 900);
        let session = keys.verify(&creds.access_key, Some(&creds.session_token)).unwrap();
        assert_eq!(session.user, "AKIAALICE");
        assert!(session.from_keys() && session.limits().is_none());
        assert_eq!(session.keys, keys.fingerprint("AKIAALICE", "alice-secret"));
        assert_ne!(session.keys, keys.fingerprint("AKIAALICE", "rotated-secret"));
        assert!(!creds.session_token.contains("alice-secret") && creds.expires_at <= now() + 900);
        // A token made before `keys` existed has no "f": it is a token's, limited.
        let old = Session {
            access_key: "ISTSOLD".into(),
            user: "alice".into(),
            scopes: "storage.read:/data".into(),
            expires_at: now() + 60,
            subject: "s".into(),
            keys: String::new(),
        };
        let json = serde_json::to_string(&old).unwrap();
        assert!(!json.contains("\"f\""), "{json}");
        let back: Session = serde_json::from_str(&json).unwrap();
        assert!(!back.from_keys() && back.limits().is_some());
    }
}
