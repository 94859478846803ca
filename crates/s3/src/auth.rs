//! Users and their secrets: the root credentials kept (mode 0600) in the data root's hidden
//! directory, users from the configuration file, and the lookup s3s calls to verify signatures.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use s3s::auth::{S3Auth, SecretKey};
use s3s::{S3Result, s3_error};
use serde::{Deserialize, Serialize};

/// One set of credentials.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct User {
    pub access_key: String,
    pub secret_key: String,
    #[serde(default)]
    pub display_name: String,
    /// Buckets this user may use besides its own: names, or prefixes ending in `*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buckets: Vec<String>,
    /// The Unix identity the user's requests run as with `identity = "posix"`.
    #[serde(flatten)]
    pub identity: crate::IdentitySpec,
}

impl fmt::Debug for User {
    // Secrets never reach logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("User")
            .field("access_key", &self.access_key)
            .field("display_name", &self.display_name)
            .finish_non_exhaustive()
    }
}

impl User {
    /// A user with these credentials and nothing else set.
    pub fn new(access_key: String, secret_key: String) -> Self {
        Self {
            access_key,
            secret_key,
            display_name: String::new(),
            buckets: Vec::new(),
            identity: crate::IdentitySpec::default(),
        }
    }

    /// New random credentials: a 20-character access key and a 40-character secret.
    pub fn generate(display_name: &str) -> Self {
        const ACCESS: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        const SECRET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut bytes = [0u8; 60];
        getrandom::fill(&mut bytes).expect("the OS random source works");
        let access_key = bytes[..20].iter().map(|b| ACCESS[usize::from(b & 31)] as char).collect();
        let secret_key = bytes[20..].iter().map(|b| SECRET[usize::from(b & 63)] as char).collect();
        Self {
            access_key,
            secret_key,
            display_name: display_name.to_string(),
            buckets: Vec::new(),
            identity: crate::IdentitySpec::default(),
        }
    }
}

/// Why credentials could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: not a valid credentials file: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path} is readable by other users (mode {mode:o}); fix it with: chmod 600 {path}")]
    InsecureMode { path: PathBuf, mode: u32 },
}

/// Where the root credentials live beneath a data root's internal directory.
pub fn credentials_path(internal_dir: &Path) -> PathBuf {
    internal_dir.join("credentials.toml")
}

/// Loads the root credentials from `path`, creating them on first start. Returns the user and
/// whether it was created now (so the caller prints it once).
pub fn load_or_create_root(path: &Path) -> Result<(User, bool), CredentialsError> {
    let io_err = |source| CredentialsError::Io { path: path.to_path_buf(), source };
    let user = User::generate("root");
    let text = format!(
        "# Isthmus root credentials, created on first start. Keep this file private (mode 0600).\naccess_key = \"{}\"\nsecret_key = \"{}\"\ndisplay_name = \"root\"\n",
        user.access_key, user.secret_key
    );
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(mut file) => {
            file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(io_err)?;
            return Ok((user, true));
        }
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(io_err(err)),
    }
    let mut file = std::fs::File::open(path).map_err(io_err)?;
    let mode = file.metadata().map_err(io_err)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(CredentialsError::InsecureMode { path: path.to_path_buf(), mode });
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(io_err)?;
    let user: User = toml::from_str(&text)
        .map_err(|e| CredentialsError::Parse { path: path.to_path_buf(), message: e.message().to_string() })?;
    Ok((user, false))
}

/// The users the gateway accepts, looked up by access key, and who may use which bucket:
/// the root user everything; any other user the buckets it created and those its `buckets`
/// patterns grant (checked by the engine's authorization layer, `isthmus_store::authz`).
#[derive(Debug, Default, Clone)]
pub struct UserDirectory {
    users: HashMap<String, User>,
    root: String,
}

impl UserDirectory {
    /// `root` is the root user's access key; it must be among `users`.
    pub fn new(root: &str, users: impl IntoIterator<Item = User>) -> Self {
        Self { users: users.into_iter().map(|u| (u.access_key.clone(), u)).collect(), root: root.to_string() }
    }

    /// The root user's access key (its canonical id in owner fields).
    pub fn root(&self) -> &str {
        &self.root
    }

    pub fn is_root(&self, access_key: &str) -> bool {
        access_key == self.root
    }

    /// What the users' `buckets` patterns grant, for the engine's authorization layer.
    pub fn grants(&self) -> isthmus_store::BucketGrants {
        isthmus_store::BucketGrants::new(self.users.values().map(|u| (u.access_key.clone(), u.buckets.clone())))
    }

    pub fn get(&self, access_key: &str) -> Option<&User> {
        self.users.get(access_key)
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

#[async_trait::async_trait]
impl S3Auth for UserDirectory {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        match self.users.get(access_key) {
            Some(user) => Ok(SecretKey::from(user.secret_key.clone())),
            None => {
                Err(s3_error!(InvalidAccessKeyId, "The AWS access key ID you provided does not exist in our records."))
            }
        }
    }
}

/// The secrets s3s checks signatures with: the users' keys, and the keys of temporary
/// credentials (derived from the session key; their session token is checked afterwards, in
/// `bearer::token_principal`).
#[derive(Debug, Clone)]
pub struct GatewayKeys {
    pub users: UserDirectory,
    pub sessions: Option<isthmus_grid::SessionKeys>,
}

#[async_trait::async_trait]
impl S3Auth for GatewayKeys {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        if self.users.get(access_key).is_none()
            && let Some(secret) = self.sessions.as_ref().and_then(|s| s.secret_for(access_key))
        {
            return Ok(SecretKey::from(secret));
        }
        self.users.get_secret_key(access_key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_credentials_are_created_once_private_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = credentials_path(dir.path());
        let (first, created) = load_or_create_root(&path).unwrap();
        assert!(created);
        assert_eq!(first.access_key.len(), 20);
        assert_eq!(first.secret_key.len(), 40);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let (again, created) = load_or_create_root(&path).unwrap();
        assert!(!created);
        assert_eq!(again, first);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(load_or_create_root(&path), Err(CredentialsError::InsecureMode { .. })));
    }

    #[test]
    fn grants_come_from_the_bucket_patterns() {
        let mut alice = User::generate("alice");
        alice.access_key = "alice".into();
        alice.buckets = vec!["shared-*".into(), "exact".into()];
        let mut root = User::generate("root");
        root.access_key = "root".into();
        let grants = UserDirectory::new("root", [root, alice]).grants();
        assert!(grants.grants("alice", "shared-data"));
        assert!(grants.grants("alice", "exact"));
        assert!(!grants.grants("alice", "exactly"));
        assert!(!grants.grants("root", "anything"));
        assert!(!grants.grants("mallory", "shared-data"));
    }

    #[test]
    fn debug_output_hides_the_secret() {
        let user = User::generate("alice");
        assert!(!format!("{user:?}").contains(&user.secret_key));
    }
}
