//! The users administration manages, kept in the gateway's state directory
//! (`ROOT/.isthmus/users.toml`, mode 0600): users added by `isthmus admin users add` with their
//! keys, bucket grants and Unix identity, and the access keys of disabled users (any user but
//! root). Written whole to a temporary file and renamed over the old one, under an advisory
//! lock, so gateways sharing the root never see half a file nor lose each other's changes; each
//! gateway reloads it when it changes. Read and written only through the state directory the
//! gateway opened and checked at start (`isthmus_store::state_dir`): a file planted by a user,
//! or a directory renamed into its place, is never believed.

use serde::{Deserialize, Serialize};

use isthmus_store::state_dir::{STATE_FILE_LIMIT, StateDir, StateLock};

use isthmus_session::User;

/// What the file holds.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct UsersFile {
    /// Access keys of disabled users (configuration users included).
    #[serde(default)]
    pub disabled: Vec<String>,
    #[serde(default)]
    pub users: Vec<User>,
}

/// The file's name in the state directory.
pub const USERS_FILE: &str = "users.toml";
const LOCK_FILE: &str = "users.lock";

/// Which version of the file is on disk (inode, size, change time): a cheap way to notice
/// that another gateway (or an editor) changed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileVersion(Option<(u64, u64, i64, i64)>);

pub fn version_of(state: &StateDir) -> FileVersion {
    FileVersion(state.version_of(USERS_FILE))
}

/// Reads the file; a missing file is an empty one. It holds secrets: one others may read,
/// write or replace is refused.
pub fn load(state: &StateDir) -> Result<UsersFile, String> {
    let path = state.path().join(USERS_FILE);
    match state.read_private(USERS_FILE, STATE_FILE_LIMIT).map_err(|e| e.to_string())? {
        Some(bytes) => {
            let text = String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8", path.display()))?;
            toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message()))
        }
        None => Ok(UsersFile::default()),
    }
}

/// Holds the file's advisory lock while alive.
pub type FileLock = StateLock;

pub fn lock(state: &StateDir) -> Result<FileLock, String> {
    state.lock(LOCK_FILE).map_err(|e| e.to_string())
}

/// Replaces the file with `content` (mode 0600, durable before the rename).
pub fn save(state: &StateDir, content: &UsersFile, _lock: &FileLock) -> Result<(), String> {
    let text = format!(
        "# Users managed by `isthmus admin` (keys are secrets: keep this file mode 0600).\n# Changes are picked up by running gateways within seconds.\n{}",
        toml::to_string(content).map_err(|e| e.to_string())?
    );
    state.replace(USERS_FILE, text.as_bytes(), 0o600).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use isthmus_store::state_dir::StateTrust;

    #[test]
    fn a_saved_file_loads_back_private_and_a_missing_one_is_empty() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let state = StateDir::open_path(dir.path(), StateTrust::Gateway).unwrap();
        let path = dir.path().join(".isthmus").join(USERS_FILE);
        assert_eq!(load(&state).unwrap(), UsersFile::default());
        let before = version_of(&state);
        let mut alice = User::generate("alice");
        alice.buckets = vec!["shared-*".into()];
        alice.identity.unix_user = Some("alice".into());
        let content = UsersFile { disabled: vec!["AKBOB".into()], users: vec![alice] };
        let guard = lock(&state).unwrap();
        save(&state, &content, &guard).unwrap();
        assert_eq!(load(&state).unwrap(), content);
        assert_ne!(version_of(&state), before);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        std::fs::write(&path, "users = 3").unwrap();
        assert!(load(&state).unwrap_err().contains("users.toml"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(load(&state).unwrap_err().contains("chmod 600"), "a users file others may read is refused");
    }
}
