//! Directory reading shared by the watcher and the scanner: directories opened beneath their
//! parent's descriptor without following a link, and listings that keep only what can hold or
//! be a key (regular files and directories with key-worthy names).

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};

/// What an entry is, as far as keys go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
}

impl Kind {
    /// `None` for symlinks and other non-regular files: never objects, never followed.
    pub(crate) fn of(file_type: FileType) -> Option<Kind> {
        match file_type {
            FileType::RegularFile => Some(Kind::File),
            FileType::Directory => Some(Kind::Dir),
            _ => None,
        }
    }
}

/// Opens the directory `name` beneath `parent`; a symlink or a non-directory is an error.
pub(crate) fn open_dir(parent: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(parent, name, flags, Mode::empty())?)
}

/// Opens the directory `rel` (`/`-separated, `""` for the bucket itself) of `bucket` beneath
/// the data root, one segment at a time.
pub(crate) fn open_beneath(root: BorrowedFd<'_>, bucket: &str, rel: &str) -> io::Result<OwnedFd> {
    let mut dir = open_dir(root, bucket)?;
    for segment in rel.split('/').filter(|s| !s.is_empty()) {
        dir = open_dir(dir.as_fd(), segment)?;
    }
    Ok(dir)
}

/// The entries of `dir` that may be keys or hold keys, with what they are. Entries whose type
/// the directory does not record are looked at without following links.
pub(crate) fn list(dir: BorrowedFd<'_>) -> io::Result<Vec<(String, Kind)>> {
    let mut entries = Vec::new();
    for entry in Dir::read_from(dir)? {
        let entry = entry?;
        let Some(name) = super::segment(OsStr::from_bytes(entry.file_name().to_bytes())) else {
            continue;
        };
        let file_type = match entry.file_type() {
            FileType::Unknown => match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => FileType::from_raw_mode(stat.st_mode),
                Err(_) => continue,
            },
            known => known,
        };
        if let Some(kind) = Kind::of(file_type) {
            entries.push((name.to_string(), kind));
        }
    }
    Ok(entries)
}

/// The key of the same file after its directory `from` moved to `to` (both relative to their
/// buckets): `key` lies beneath `to`; the result lies beneath `from`.
pub(crate) fn rebase(key: &str, to: &str, from: &str) -> Option<String> {
    let rest = key.strip_prefix(to)?.trim_start_matches('/');
    super::child_key(from, rest)
}
