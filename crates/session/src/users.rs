//! Users and their secrets: the root credentials kept (mode 0600) in the data root's hidden
//! directory, users from the configuration file and administration, and the secret a door
//! checks a signature with (`UserDirectory::secret_of`).

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::Refusal;

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
    pub identity: crate::identities::IdentitySpec,
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
            identity: crate::identities::IdentitySpec::default(),
        }
    }

    /// How the user is named in messages: its display name, else its access key.
    pub fn label(&self) -> String {
        if self.display_name.is_empty() { self.access_key.clone() } else { self.display_name.clone() }
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
            identity: crate::identities::IdentitySpec::default(),
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
    /// The gateway's state directory refused the file (owner, mode, link: see `state_dir`).
    #[error("{0}")]
    State(String),
}

/// Where the root credentials live beneath a data root's internal directory.
pub fn credentials_path(internal_dir: &Path) -> PathBuf {
    internal_dir.join(CREDENTIALS_FILE)
}

/// The root credentials file's name in the gateway's state directory.
pub const CREDENTIALS_FILE: &str = "credentials.toml";

/// Loads the root credentials from the gateway's state directory, creating them on first
/// start. Returns the user and whether it was created now (so the caller prints it once).
/// Read through the directory the gateway opened and checked: a credentials file others may
/// read, write or have planted is refused.
pub fn load_or_create_root(state: &isthmus_store::state_dir::StateDir) -> Result<(User, bool), CredentialsError> {
    let path = state.path().join(CREDENTIALS_FILE);
    let user = User::generate("root");
    let text = format!(
        "# Isthmus root credentials, created on first start. Keep this file private (mode 0600).\naccess_key = \"{}\"\nsecret_key = \"{}\"\ndisplay_name = \"root\"\n",
        user.access_key, user.secret_key
    );
    let (bytes, created) = state
        .load_or_create_secret(CREDENTIALS_FILE, || text.into_bytes())
        .map_err(|e| CredentialsError::State(e.to_string()))?;
    if created {
        return Ok((user, true));
    }
    parse_root(&path, &String::from_utf8_lossy(&bytes)).map(|user| (user, false))
}

fn parse_root(path: &Path, text: &str) -> Result<User, CredentialsError> {
    toml::from_str(text)
        .map_err(|e| CredentialsError::Parse { path: path.to_path_buf(), message: e.message().to_string() })
}

/// Loads the root credentials from `path` (kept private: a file others may read is refused).
pub fn load_root(path: &Path) -> Result<User, CredentialsError> {
    let io_err = |source| CredentialsError::Io { path: path.to_path_buf(), source };
    let mut file = std::fs::File::open(path).map_err(io_err)?;
    let mode = file.metadata().map_err(io_err)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(CredentialsError::InsecureMode { path: path.to_path_buf(), mode });
    }
    let mut text = String::new();
    file.read_to_string(&mut text).map_err(io_err)?;
    parse_root(path, &text)
}

/// Where a user comes from, which decides what administration may change about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum UserSource {
    /// The root user (credentials file or configuration).
    Root,
    /// A `[[users]]` entry of the configuration file: changed by editing that file.
    Config,
    /// Added with `isthmus admin users add`, kept in the data root (`.isthmus/users.toml`).
    Managed,
}

/// One user as the directory holds it.
#[derive(Debug, Clone)]
pub struct DirectoryEntry {
    pub user: User,
    pub source: UserSource,
    /// Disabled users are refused whatever credential they present.
    pub disabled: bool,
}

/// The users the gateway accepts, looked up by access key, and who may use which bucket:
/// the root user everything; any other user the buckets it created and those its `buckets`
/// patterns grant (checked by the engine's authorization layer, `isthmus_access::self`).
/// Clones share one directory: administration changes it while the gateway serves.
#[derive(Debug, Default, Clone)]
pub struct UserDirectory {
    entries: Arc<RwLock<HashMap<String, DirectoryEntry>>>,
    root: Arc<str>,
    grants: isthmus_access::BucketGrants,
    /// Counts the changes administration made (connections that keep a user, such as the
    /// local socket's, look again when it moves).
    generation: Arc<std::sync::atomic::AtomicU64>,
}

impl UserDirectory {
    /// `root` is the root user's access key; it must be among `users` (the others are the
    /// configuration file's).
    pub fn new(root: &str, users: impl IntoIterator<Item = User>) -> Self {
        let entries = users
            .into_iter()
            .map(|user| {
                let source = if user.access_key == root { UserSource::Root } else { UserSource::Config };
                (user.access_key.clone(), DirectoryEntry { user, source, disabled: false })
            })
            .collect();
        let directory = Self { entries: Arc::new(RwLock::new(entries)), root: root.into(), ..Self::default() };
        directory.refresh_grants();
        directory
    }

    /// The root user's access key (its canonical id in owner fields).
    pub fn root(&self) -> &str {
        &self.root
    }

    pub fn is_root(&self, access_key: &str) -> bool {
        access_key == &*self.root
    }

    /// What the users' `buckets` patterns grant, for the engine's authorization layer: the
    /// directory's own table, kept up to date as users change.
    pub fn grants(&self) -> isthmus_access::BucketGrants {
        self.grants.clone()
    }

    fn refresh_grants(&self) {
        let table = self.read().values().map(|e| (e.user.access_key.clone(), e.user.buckets.clone())).collect();
        self.grants.replace(table);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, DirectoryEntry>> {
        self.entries.read().expect("not poisoned")
    }

    pub fn get(&self, access_key: &str) -> Option<User> {
        self.read().get(access_key).map(|e| e.user.clone())
    }

    /// Whether `access_key` is a user that administration disabled.
    pub fn is_disabled(&self, access_key: &str) -> bool {
        self.read().get(access_key).is_some_and(|e| e.disabled)
    }

    /// Every user, by access key.
    pub fn entries(&self) -> Vec<DirectoryEntry> {
        let mut entries: Vec<DirectoryEntry> = self.read().values().cloned().collect();
        entries.sort_by(|a, b| a.user.access_key.cmp(&b.user.access_key));
        entries
    }

    /// The access key of the user `name` names: an access key, else a unique display name.
    pub fn find(&self, name: &str) -> Option<String> {
        let entries = self.read();
        if entries.contains_key(name) {
            return Some(name.to_string());
        }
        let mut named = entries.values().filter(|e| e.user.display_name == name);
        match (named.next(), named.next()) {
            (Some(entry), None) => Some(entry.user.access_key.clone()),
            _ => None,
        }
    }

    /// Makes `managed` the administration's users and `disabled` the disabled ones, replacing
    /// what administration set before; the root and configuration users stay (a managed user
    /// with one of their access keys is skipped and named in the result).
    pub fn apply_managed(&self, managed: &[User], disabled: &[String]) -> Vec<String> {
        let mut skipped = Vec::new();
        {
            let mut entries = self.entries.write().expect("not poisoned");
            entries.retain(|_, e| e.source != UserSource::Managed);
            for user in managed {
                if entries.contains_key(&user.access_key) {
                    skipped.push(user.access_key.clone());
                    continue;
                }
                let entry = DirectoryEntry { user: user.clone(), source: UserSource::Managed, disabled: false };
                entries.insert(user.access_key.clone(), entry);
            }
            for (key, entry) in entries.iter_mut() {
                entry.disabled = key.as_str() != &*self.root && disabled.contains(key);
            }
        }
        self.refresh_grants();
        self.generation.fetch_add(1, std::sync::atomic::Ordering::Release);
        skipped
    }

    /// Changes each time administration changes the users.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// The secret a signature by `access_key` is checked with; refused for a disabled or
    /// unknown key.
    pub fn secret_of(&self, access_key: &str) -> Result<String, Refusal> {
        match self.read().get(access_key) {
            Some(entry) if entry.disabled => Err(Refusal::KeyDisabled),
            Some(entry) => Ok(entry.user.secret_key.clone()),
            None => Err(Refusal::UnknownKey),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_credentials_are_created_once_private_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let state = isthmus_store::state_dir::StateDir::open_path(dir.path(), Default::default()).unwrap();
        let path = credentials_path(state.path());
        let (first, created) = load_or_create_root(&state).unwrap();
        assert!(created);
        assert_eq!(first.access_key.len(), 20);
        assert_eq!(first.secret_key.len(), 40);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let (again, created) = load_or_create_root(&state).unwrap();
        assert!(!created);
        assert_eq!(again, first);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(load_or_create_root(&state), Err(CredentialsError::State(why)) if why.contains("chmod 600")));
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
