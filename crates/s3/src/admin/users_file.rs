//! The users administration manages, kept in the data root (`.isthmus/users.toml`, mode 0600):
//! users added by `isthmus admin users add` with their keys, bucket grants and Unix identity,
//! and the access keys of disabled users (any user but root). Written whole to a temporary
//! file and renamed over the old one, under an advisory lock, so gateways sharing the root
//! never see half a file nor lose each other's changes; each gateway reloads it when it changes.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::auth::User;

/// What the file holds.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct UsersFile {
    /// Access keys of disabled users (configuration users included).
    #[serde(default)]
    pub disabled: Vec<String>,
    #[serde(default)]
    pub users: Vec<User>,
}

/// Where the file and its lock live beneath a data root's internal directory.
pub fn users_file_path(internal_dir: &Path) -> PathBuf {
    internal_dir.join("users.toml")
}

/// Which version of the file is on disk (inode, size, change time): a cheap way to notice
/// that another gateway (or an editor) changed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileVersion(Option<(u64, u64, i64, i64)>);

pub fn version_of(path: &Path) -> FileVersion {
    FileVersion(std::fs::metadata(path).ok().map(|m| (m.ino(), m.size(), m.ctime(), m.ctime_nsec())))
}

/// Reads the file; a missing file is an empty one.
pub fn load(path: &Path) -> Result<UsersFile, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message())),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(UsersFile::default()),
        Err(err) => Err(format!("{}: {err}", path.display())),
    }
}

/// Holds the file's advisory lock (a `.lock` file beside it) while alive.
pub struct FileLock(#[allow(dead_code)] std::fs::File);

pub fn lock(path: &Path) -> Result<FileLock, String> {
    let lock_path = path.with_extension("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .map_err(|e| format!("{}: {e}", lock_path.display()))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| format!("{}: cannot lock: {e}", lock_path.display()))?;
    Ok(FileLock(file))
}

/// Replaces the file with `content` (mode 0600, durable before the rename).
pub fn save(path: &Path, content: &UsersFile, _lock: &FileLock) -> Result<(), String> {
    let text = format!(
        "# Users managed by `isthmus admin` (keys are secrets: keep this file mode 0600).\n# Changes are picked up by running gateways within seconds.\n{}",
        toml::to_string(content).map_err(|e| e.to_string())?
    );
    let temporary = path.with_extension("toml.tmp");
    let failed = |e: std::io::Error| format!("{}: {e}", temporary.display());
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(failed)?;
    file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(failed)?;
    std::fs::rename(&temporary, path).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some(dir) = path.parent()
        && let Ok(dir) = std::fs::File::open(dir)
    {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_file_loads_back_private_and_a_missing_one_is_empty() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = users_file_path(dir.path());
        assert_eq!(load(&path).unwrap(), UsersFile::default());
        let before = version_of(&path);
        let mut alice = User::generate("alice");
        alice.buckets = vec!["shared-*".into()];
        alice.identity.unix_user = Some("alice".into());
        let content = UsersFile { disabled: vec!["AKBOB".into()], users: vec![alice] };
        let guard = lock(&path).unwrap();
        save(&path, &content, &guard).unwrap();
        assert_eq!(load(&path).unwrap(), content);
        assert_ne!(version_of(&path), before);
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(!path.with_extension("toml.tmp").exists());
        std::fs::write(&path, "users = 3").unwrap();
        assert!(load(&path).unwrap_err().contains("users.toml"));
    }
}
