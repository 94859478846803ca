//! The gateway's own state directory (`ROOT/.isthmus`: users, keys, pools, bucket settings):
//! opened once, checked, and then read and written only through the descriptor it holds, so
//! that a user who can write in the data root can neither swap it nor plant a file in it.
//!
//! What is trusted: the directory and every file read from it must be owned by a trusted
//! user and writable by nobody else (no group or other write bit), and must not be a symlink.
//! The trusted users are root and the process's effective user; an in-process door, which runs
//! as whichever user calls it, also trusts the data root's owner, so that it can read the
//! gateway's state on a root the gateway owns (it can only ever do what its user could do).
//! A directory held open stays the one checked even if its name is renamed away and replaced:
//! the attack of issue 42 (a group member renaming `ROOT/.isthmus` and planting a users file)
//! changes nothing the running gateway reads, and a gateway starting later refuses the plant.

use std::fmt;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use crate::key::INTERNAL_DIR;

/// Whose files a state directory believes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StateTrust {
    /// A gateway serving other users: only root and its own effective user.
    Gateway,
    /// An in-process door running as its caller: also the data root's owner (see the module
    /// comment).
    #[default]
    Process,
}

/// Why a state file or directory cannot be used.
#[derive(Debug)]
pub enum StateError {
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// Owned by someone untrusted, writable by others, a symlink or not the expected type;
    /// `fix` is the command that repairs it.
    Untrusted {
        path: PathBuf,
        why: String,
        fix: String,
    },
    TooLarge {
        path: PathBuf,
        limit: u64,
    },
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Io { what, path, source } => write!(f, "cannot {what} {}: {source}", path.display()),
            StateError::Untrusted { path, why, fix } => {
                write!(f, "{} {why}; the gateway trusts none of it: fix with `{fix}`", path.display())
            }
            StateError::TooLarge { path, limit } => {
                write!(f, "{} is larger than the {limit} bytes such a file may have", path.display())
            }
        }
    }
}

impl std::error::Error for StateError {}

impl From<StateError> for crate::error::StoreError {
    fn from(err: StateError) -> Self {
        match err {
            // A process that may not write the gateway's state (an in-process door as a user).
            StateError::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
                crate::error::StoreError::AccessDenied
            }
            StateError::Io { what, path, source } => crate::error::StoreError::io(what, &path, source),
            other => crate::error::StoreError::Io(std::io::Error::other(other.to_string())),
        }
    }
}

pub type StateResult<T> = Result<T, StateError>;

/// The largest file the gateway reads from its state directory (a users file with thousands
/// of users, a bucket policy of 20 KB): a bound before anything is read.
pub const STATE_FILE_LIMIT: u64 = 16 << 20;

/// A checked, open state directory (the data root's `.isthmus`, or a directory beneath it).
#[derive(Clone)]
pub struct StateDir {
    fd: Arc<OwnedFd>,
    path: PathBuf,
    trusted: Trusted,
}

#[derive(Debug, Clone, Copy)]
struct Trusted {
    euid: u32,
    /// The data root's owner, for `StateTrust::Process`.
    also: Option<u32>,
}

impl Trusted {
    fn trusts(&self, uid: u32) -> bool {
        uid == 0 || uid == self.euid || self.also == Some(uid)
    }
}

impl StateDir {
    /// Opens (creating it, mode 0755, if missing) the state directory of the data root open as
    /// `root` (at `root_path`, for messages), and checks it.
    pub fn open(root: BorrowedFd<'_>, root_path: &Path, trust: StateTrust) -> StateResult<Self> {
        crate::identity::as_gateway(|| {
            let path = root_path.join(INTERNAL_DIR);
            let root_stat = rustix::fs::fstat(root).map_err(|e| StateError::Io {
                what: "inspect the data root",
                path: root_path.to_path_buf(),
                source: e.into(),
            })?;
            let trusted = Trusted {
                euid: rustix::process::geteuid().as_raw(),
                also: (trust == StateTrust::Process).then_some(root_stat.st_uid),
            };
            let fd = open_checked_dir(root, INTERNAL_DIR, &path, trusted, true)?;
            Ok(Self { fd: Arc::new(fd), path, trusted })
        })
    }

    /// Opens the state directory of the data root at `root` by path (for tools that read the
    /// gateway's state without opening a store).
    pub fn open_path(root: &Path, trust: StateTrust) -> StateResult<Self> {
        let dir = rustix::fs::open(root, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| StateError::Io { what: "open the data root", path: root.to_path_buf(), source: e.into() })?;
        Self::open(dir.as_fd(), root, trust)
    }

    /// Where it is (for messages; never opened by this path again).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A path that reaches this very directory through the descriptor held
    /// (`/proc/self/fd/N`), for code that takes paths: valid while this value (or a clone)
    /// lives, and never the directory a user may have renamed into its name since.
    pub fn path_through_fd(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&*self.fd)))
    }

    fn at(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The directory `name` beneath this one, checked like it (created if `create`); `None`
    /// if it does not exist and `create` is false.
    pub fn subdir(&self, name: &str, create: bool) -> StateResult<Option<StateDir>> {
        check_name(name, &self.path)?;
        self.checked_child(self.fd.as_fd(), name, self.at(name), create)
    }

    /// The directory `name` beneath `parent` (a directory elsewhere, such as a bucket's
    /// internal area written by an earlier version), judged with this directory's trust: `None`
    /// if it does not exist; refused if a user could have made or changed it.
    pub fn foreign_dir(&self, parent: BorrowedFd<'_>, name: &str, path: PathBuf) -> StateResult<Option<StateDir>> {
        self.checked_child(parent, name, path, false)
    }

    fn checked_child(
        &self,
        parent: BorrowedFd<'_>,
        name: &str,
        path: PathBuf,
        create: bool,
    ) -> StateResult<Option<StateDir>> {
        crate::identity::as_gateway(|| match open_checked_dir(parent, name, &path, self.trusted, create) {
            Ok(fd) => Ok(Some(StateDir { fd: Arc::new(fd), path, trusted: self.trusted })),
            Err(StateError::Io { source, .. }) if !create && source.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        })
    }

    /// The file `name`'s bytes (`None`: no such file), checked to be trusted, at most `limit`.
    pub fn read(&self, name: &str, limit: u64) -> StateResult<Option<Vec<u8>>> {
        self.read_checked(name, limit, false)
    }

    /// Like `read`, for a secret: also refused if anyone but its owner may read it.
    pub fn read_private(&self, name: &str, limit: u64) -> StateResult<Option<Vec<u8>>> {
        self.read_checked(name, limit, true)
    }

    fn read_checked(&self, name: &str, limit: u64, private: bool) -> StateResult<Option<Vec<u8>>> {
        check_name(name, &self.path)?;
        crate::identity::as_gateway(|| {
            let path = self.at(name);
            let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
            let fd = match rustix::fs::openat(self.fd.as_fd(), name, flags, Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::NOENT) => return Ok(None),
                Err(Errno::LOOP) => return Err(untrusted_symlink(&path)),
                Err(err) => return Err(StateError::Io { what: "open", path, source: err.into() }),
            };
            let stat = rustix::fs::fstat(&fd).map_err(|e| StateError::Io {
                what: "inspect",
                path: path.clone(),
                source: e.into(),
            })?;
            if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                return Err(StateError::Untrusted {
                    path: path.clone(),
                    why: "is not a regular file".into(),
                    fix: format!("rm -r {}", path.display()),
                });
            }
            check_trusted(&stat, &path, self.trusted)?;
            if private && stat.st_mode & 0o077 != 0 {
                return Err(StateError::Untrusted {
                    why: format!("is readable by other users (mode {:o})", stat.st_mode & 0o7777),
                    fix: format!("chmod 600 {}", path.display()),
                    path,
                });
            }
            if stat.st_size as u64 > limit {
                return Err(StateError::TooLarge { path, limit });
            }
            let mut bytes = Vec::with_capacity(stat.st_size as usize);
            std::fs::File::from(fd).take(limit + 1).read_to_end(&mut bytes).map_err(|e| StateError::Io {
                what: "read",
                path: path.clone(),
                source: e,
            })?;
            if bytes.len() as u64 > limit {
                return Err(StateError::TooLarge { path, limit });
            }
            Ok(Some(bytes))
        })
    }

    /// Creates `name` with `bytes` (mode `mode`, durable) unless it exists: whether it was
    /// created. Atomic: the file appears whole or not at all (a temporary file hard-linked into
    /// place, which works on every file system, NFS included), so another process creating the
    /// same file at once reads either nothing or all of it.
    pub fn create_new(&self, name: &str, bytes: &[u8], mode: u32) -> StateResult<bool> {
        check_name(name, &self.path)?;
        crate::identity::as_gateway(|| {
            let temporary = self.write_temporary(name, bytes, mode)?;
            let linked =
                rustix::fs::linkat(self.fd.as_fd(), temporary.as_str(), self.fd.as_fd(), name, AtFlags::empty());
            let _ = rustix::fs::unlinkat(self.fd.as_fd(), temporary.as_str(), AtFlags::empty());
            match linked {
                Ok(()) => {
                    self.sync();
                    Ok(true)
                }
                Err(Errno::EXIST) => Ok(false),
                Err(err) => Err(StateError::Io { what: "create", path: self.at(name), source: err.into() }),
            }
        })
    }

    /// Replaces `name` with `bytes` atomically (a temporary file renamed over it; mode `mode`,
    /// durable before the rename).
    pub fn replace(&self, name: &str, bytes: &[u8], mode: u32) -> StateResult<()> {
        check_name(name, &self.path)?;
        crate::identity::as_gateway(|| {
            let temporary = self.write_temporary(name, bytes, mode)?;
            if let Err(err) = rustix::fs::renameat_with(
                self.fd.as_fd(),
                temporary.as_str(),
                self.fd.as_fd(),
                name,
                RenameFlags::empty(),
            ) {
                let _ = rustix::fs::unlinkat(self.fd.as_fd(), temporary.as_str(), AtFlags::empty());
                return Err(StateError::Io { what: "write", path: self.at(name), source: err.into() });
            }
            self.sync();
            Ok(())
        })
    }

    /// A new temporary file in this directory holding `bytes` (mode `mode` whatever the umask,
    /// durable), for `name`'s sake; its name. Nothing is left behind when it fails.
    fn write_temporary(&self, name: &str, bytes: &[u8], mode: u32) -> StateResult<String> {
        let temporary = format!(".tmp.{}", random_suffix());
        let io = |what: &'static str, e: std::io::Error| StateError::Io { what, path: self.at(name), source: e };
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(self.fd.as_fd(), temporary.as_str(), flags, Mode::from_raw_mode(mode))
            .map_err(|e| io("create a temporary file for", e.into()))?;
        let written = rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
            .map_err(std::io::Error::from)
            .and_then(|()| write_durably(&fd, bytes));
        if let Err(err) = written {
            let _ = rustix::fs::unlinkat(self.fd.as_fd(), temporary.as_str(), AtFlags::empty());
            return Err(io("write", err));
        }
        Ok(temporary)
    }

    /// Removes the file `name` (a missing one is not an error).
    pub fn remove(&self, name: &str) -> StateResult<()> {
        check_name(name, &self.path)?;
        crate::identity::as_gateway(|| match rustix::fs::unlinkat(self.fd.as_fd(), name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {
                self.sync();
                Ok(())
            }
            Err(err) => Err(StateError::Io { what: "remove", path: self.at(name), source: err.into() }),
        })
    }

    /// Which version of `name` is there (inode, size, change time), without following a link:
    /// a cheap way to notice another gateway changed it.
    pub fn version_of(&self, name: &str) -> Option<(u64, u64, i64, i64)> {
        crate::identity::as_gateway(|| {
            rustix::fs::statat(self.fd.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW)
                .ok()
                .map(|s| (s.st_ino, s.st_size as u64, s.st_ctime, s.st_ctime_nsec as i64))
        })
    }

    /// Takes the exclusive advisory lock `name` (a file made for it), held while the value lives.
    pub fn lock(&self, name: &str) -> StateResult<StateLock> {
        check_name(name, &self.path)?;
        crate::identity::as_gateway(|| {
            let path = self.at(name);
            let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(self.fd.as_fd(), name, flags, Mode::from_raw_mode(0o600))
                .map_err(|e| StateError::Io { what: "open the lock", path: path.clone(), source: e.into() })?;
            rustix::fs::flock(&fd, FlockOperation::LockExclusive).map_err(|e| StateError::Io {
                what: "lock",
                path,
                source: e.into(),
            })?;
            Ok(StateLock(fd))
        })
    }

    /// A secret kept in `name` (mode 0600): the one there, or `generate`d and saved now if
    /// there is none. Returns it and whether it was created now.
    pub fn load_or_create_secret(
        &self,
        name: &str,
        generate: impl FnOnce() -> Vec<u8>,
    ) -> StateResult<(Vec<u8>, bool)> {
        // Read first: a full or read-only file system holds its secrets but takes no new file.
        if let Some(bytes) = self.read_private(name, STATE_FILE_LIMIT)? {
            return Ok((bytes, false));
        }
        let fresh = generate();
        if self.create_new(name, &fresh, 0o600)? {
            return Ok((fresh, true));
        }
        let bytes = self.read_private(name, STATE_FILE_LIMIT)?.ok_or_else(|| StateError::Io {
            what: "read",
            path: self.at(name),
            source: std::io::ErrorKind::NotFound.into(),
        })?;
        Ok((bytes, false))
    }

    /// A 32-byte random key kept in `name` as hex (mode 0600), made now if there is none.
    pub fn load_or_create_key(&self, name: &str) -> StateResult<[u8; 32]> {
        let generate = || {
            let mut key = [0u8; 32];
            getrandom::fill(&mut key).expect("the system has a random source");
            hex::encode(key).into_bytes()
        };
        let (text, _) = self.load_or_create_secret(name, generate)?;
        hex::decode(String::from_utf8_lossy(&text).trim()).ok().and_then(|b| <[u8; 32]>::try_from(b).ok()).ok_or_else(
            || StateError::Untrusted {
                path: self.at(name),
                why: "is not a 32-byte hex key".into(),
                fix: format!("rm {} (what it sealed or signed is then no longer believed)", self.at(name).display()),
            },
        )
    }

    fn sync(&self) {
        let _ = rustix::fs::fsync(self.fd.as_fd());
    }
}

/// An advisory lock of a state directory, released when dropped.
pub struct StateLock(#[allow(dead_code)] OwnedFd);

fn check_name(name: &str, dir: &Path) -> StateResult<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(StateError::Untrusted {
            path: dir.join(name),
            why: "is not a plain file name".into(),
            fix: "report this as a bug".into(),
        });
    }
    Ok(())
}

fn untrusted_symlink(path: &Path) -> StateError {
    StateError::Untrusted {
        path: path.to_path_buf(),
        why: "is a symbolic link".into(),
        fix: format!("rm {}", path.display()),
    }
}

/// Checks who owns `stat`'s file and who may write it.
fn check_trusted(stat: &rustix::fs::Stat, path: &Path, trusted: Trusted) -> StateResult<()> {
    if !trusted.trusts(stat.st_uid) {
        return Err(StateError::Untrusted {
            path: path.to_path_buf(),
            why: format!("is owned by uid {}, not by the gateway's user (uid {}) or root", stat.st_uid, trusted.euid),
            fix: format!("chown -R {} {}", trusted.euid, path.display()),
        });
    }
    if stat.st_mode & 0o022 != 0 {
        return Err(StateError::Untrusted {
            path: path.to_path_buf(),
            why: format!("is writable by other users (mode {:o})", stat.st_mode & 0o7777),
            fix: format!("chmod go-w {}", path.display()),
        });
    }
    Ok(())
}

/// Opens the directory `name` beneath `parent` without following a link (creating it, mode
/// 0755, if `create`), and checks it.
fn open_checked_dir(
    parent: BorrowedFd<'_>,
    name: &str,
    path: &Path,
    trusted: Trusted,
    create: bool,
) -> StateResult<OwnedFd> {
    if create {
        match rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(err) => return Err(StateError::Io { what: "create", path: path.to_path_buf(), source: err.into() }),
        }
    }
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(parent, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::LOOP) => return Err(untrusted_symlink(path)),
        Err(Errno::NOTDIR) => {
            return Err(StateError::Untrusted {
                path: path.to_path_buf(),
                why: "is not a directory".into(),
                fix: format!("rm {}", path.display()),
            });
        }
        Err(err) => return Err(StateError::Io { what: "open", path: path.to_path_buf(), source: err.into() }),
    };
    let stat = rustix::fs::fstat(&fd).map_err(|e| StateError::Io {
        what: "inspect",
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    check_trusted(&stat, path, trusted)?;
    Ok(fd)
}

fn write_durably(fd: &OwnedFd, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::write(fd, bytes) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    rustix::fs::fsync(fd)?;
    Ok(())
}

fn random_suffix() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the system has a random source");
    hex::encode(bytes)
}

/// Whether the data root (open as `root`) lets users other than its owner rename or remove
/// entries that are not theirs: writable by group or others without the sticky bit. Such a
/// user could rename the gateway's state and bucket directories away and put their own in
/// their place; the gateway refuses to serve other users' identities from it.
pub fn renamable_by_others(root: BorrowedFd<'_>) -> std::io::Result<bool> {
    let stat = rustix::fs::fstat(root)?;
    Ok(stat.st_mode & 0o022 != 0 && stat.st_mode & 0o1000 == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn root() -> (tempfile::TempDir, StateDir) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let state = StateDir::open_path(dir.path(), StateTrust::Gateway).unwrap();
        (dir, state)
    }

    #[test]
    fn files_are_written_atomically_and_read_back() {
        let (dir, state) = root();
        assert_eq!(state.read("users.toml", 100).unwrap(), None);
        state.replace("users.toml", b"hello", 0o600).unwrap();
        assert_eq!(state.read("users.toml", 100).unwrap().unwrap(), b"hello");
        let mode = std::fs::metadata(dir.path().join(".isthmus/users.toml")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(!state.create_new("users.toml", b"x", 0o600).unwrap());
        assert!(matches!(state.read("users.toml", 3), Err(StateError::TooLarge { .. })));
        let names: Vec<_> =
            std::fs::read_dir(dir.path().join(".isthmus")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("users.toml")], "no temporary file left");
    }

    #[test]
    fn a_file_created_by_many_at_once_is_read_whole_by_each() {
        let (_dir, state) = root();
        let readers: Vec<_> = (0..8)
            .map(|i| {
                let state = state.clone();
                std::thread::spawn(move || {
                    let mine = format!("{i:064}");
                    let created = state.create_new("key", mine.as_bytes(), 0o600).unwrap();
                    let read = state.read_private("key", 100).unwrap().unwrap();
                    assert_eq!(read.len(), 64, "never a file half written");
                    (created, read)
                })
            })
            .collect();
        let results: Vec<_> = readers.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(results.iter().filter(|(created, _)| *created).count(), 1);
        assert!(results.windows(2).all(|w| w[0].1 == w[1].1));
    }

    #[test]
    fn a_renamed_and_replaced_directory_changes_nothing_read_through_the_open_one() {
        let (dir, state) = root();
        state.replace("users.toml", b"genuine", 0o600).unwrap();
        let internal = dir.path().join(INTERNAL_DIR);
        std::fs::rename(&internal, dir.path().join("stolen")).unwrap();
        std::fs::create_dir(&internal).unwrap();
        std::fs::write(internal.join("users.toml"), b"planted").unwrap();
        assert_eq!(state.read("users.toml", 100).unwrap().unwrap(), b"genuine");
    }

    #[test]
    fn symlinks_and_writable_files_are_refused() {
        let (dir, state) = root();
        let internal = dir.path().join(INTERNAL_DIR);
        std::os::unix::fs::symlink("/etc/passwd", internal.join("users.toml")).unwrap();
        assert!(matches!(state.read("users.toml", 1 << 20), Err(StateError::Untrusted { .. })));
        std::fs::write(internal.join("open.toml"), b"x").unwrap();
        std::fs::set_permissions(internal.join("open.toml"), std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = state.read("open.toml", 100).unwrap_err().to_string();
        assert!(err.contains("chmod go-w"), "{err}");
        std::fs::set_permissions(internal.join("open.toml"), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(state.read_private("open.toml", 100).unwrap_err().to_string().contains("chmod 600"));
        std::fs::set_permissions(&internal, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = StateDir::open_path(dir.path(), StateTrust::Gateway).err().unwrap().to_string();
        assert!(err.contains("writable by other users"), "{err}");
    }
}
