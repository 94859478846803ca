//! The identity every drive of an erasure-coded pool carries (`.isthmus/ec/drive.json`, after
//! MinIO's format.json): the pool's name and random id, the drive's slot and own id, the number
//! of drives, and for every slot whether its drive was its own mount point when formatted. A
//! drive's files are untrusted: the format is read bounded and checked, then judged against the
//! pool's identity, which `resolve` settles when the pool opens (and makes for a new pool).

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use super::manifest::random_id;
use isthmus_store::error::{StoreError, StoreResult};

/// The pool's area on a drive: its format, shards, uploads and locks.
pub(crate) const EC_DIR: &str = ".isthmus/ec";
/// The format's file name in `EC_DIR`.
pub(crate) const FORMAT_NAME: &str = "drive.json";
/// Directories of `EC_DIR` made when a drive is formatted: writes never create them later.
pub(crate) const AREAS: [&str; 3] = ["data", "uploads", "locks"];
/// The format written now. 1 (no `version` field): pool, index, drives, rebuilding; 2 adds the
/// pool id, the drive id and the mount points.
const FORMAT_VERSION: u32 = 2;
/// A format larger than this is not read (a real one is a few hundred bytes).
const MAX_FORMAT_BYTES: u64 = 64 << 10;
/// The most drives a format may claim.
const MAX_DRIVES: usize = 4096;
/// A directory with more entries than this is not blank (and is not read further).
const BLANK_SCAN: usize = 64;

fn version_one() -> u32 {
    1
}

/// What a drive records about itself, so it is never taken for another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct DriveFormat {
    #[serde(default = "version_one")]
    pub(crate) version: u32,
    /// The pool's name in the pool table.
    pub(crate) pool: String,
    /// Made at random when the pool was first formatted (absent in version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pool_id: Option<String>,
    /// The drive's slot: its place in the pool's drive list.
    pub(crate) index: usize,
    /// Made at random when this disk was formatted into its slot (absent in version 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) drive_id: Option<String>,
    pub(crate) drives: usize,
    /// For every slot, whether its drive was its own mount point when formatted (absent in
    /// version 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) mounts: Vec<bool>,
    /// A replaced drive not yet rebuilt: takes writes, serves no reads.
    #[serde(default)]
    pub(crate) rebuilding: bool,
}

fn is_id(text: &str) -> bool {
    text.len() == 32 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl DriveFormat {
    /// Whether the parsed format is one a gateway could have written.
    fn check(&self) -> Result<(), String> {
        if self.version == 0 {
            return Err("version 0".into());
        }
        if self.pool.is_empty() || self.pool.len() > 255 {
            return Err(format!("a pool name of {} bytes", self.pool.len()));
        }
        if !(1..=MAX_DRIVES).contains(&self.drives) || self.index >= self.drives {
            return Err(format!("slot {} of {} drives", self.index, self.drives));
        }
        if [&self.pool_id, &self.drive_id].into_iter().flatten().any(|id| !is_id(id)) {
            return Err("an id that is not 32 hex digits".into());
        }
        if !self.mounts.is_empty() && self.mounts.len() != self.drives {
            return Err(format!("{} mount points for {} drives", self.mounts.len(), self.drives));
        }
        Ok(())
    }
}

/// Why a drive's format was not read.
#[derive(Debug)]
pub(crate) enum FormatError {
    /// No format: a blank or unformatted drive.
    Missing,
    /// The drive did not answer (it is failing or gone).
    Unreadable(std::io::Error),
    /// Something is there that is no format of any pool: damaged or planted.
    Damaged(String),
}

/// The format in the drive's `EC_DIR`, read bounded and checked.
pub(crate) fn read_format(ec: BorrowedFd<'_>) -> Result<DriveFormat, FormatError> {
    let fd =
        match rustix::fs::openat(ec, FORMAT_NAME, OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Err(FormatError::Missing),
            Err(Errno::LOOP) => return Err(FormatError::Damaged(format!("{FORMAT_NAME} is a symbolic link"))),
            Err(err) => return Err(FormatError::Unreadable(err.into())),
        };
    let stat = rustix::fs::fstat(&fd).map_err(|e| FormatError::Unreadable(e.into()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(FormatError::Damaged(format!("{FORMAT_NAME} is not a regular file")));
    }
    let too_big = || {
        FormatError::Damaged(format!("{FORMAT_NAME} is larger than a drive format ({MAX_FORMAT_BYTES} bytes at most)"))
    };
    if u64::try_from(stat.st_size).unwrap_or(u64::MAX) > MAX_FORMAT_BYTES {
        return Err(too_big());
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd).take(MAX_FORMAT_BYTES + 1).read_to_end(&mut bytes).map_err(FormatError::Unreadable)?;
    if bytes.len() as u64 > MAX_FORMAT_BYTES {
        return Err(too_big());
    }
    let format: DriveFormat = serde_json::from_slice(&bytes)
        .map_err(|e| FormatError::Damaged(format!("{FORMAT_NAME} is not a drive format: {e}")))?;
    format.check().map_err(|why| FormatError::Damaged(format!("{FORMAT_NAME} holds {why}")))?;
    Ok(format)
}

/// Writes `format` as the drive's format in its `EC_DIR` (a temporary file, synced, renamed).
pub(crate) fn write_format(ec: BorrowedFd<'_>, format: &DriveFormat) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(format).expect("a drive format serializes");
    write_file_at(ec, FORMAT_NAME, &bytes, true)
}

/// Formats the blank drive directory `dir` with `format`: its `EC_DIR` and areas, then the
/// format itself (last: a drive is formatted once its format is there). Its `EC_DIR`.
pub(crate) fn format_blank(dir: BorrowedFd<'_>, format: &DriveFormat) -> std::io::Result<OwnedFd> {
    let ec = isthmus_posix::resolve::create_dirs_beneath(dir, EC_DIR, true)?;
    make_areas(ec.as_fd())?;
    write_format(ec.as_fd(), format)?;
    Ok(ec)
}

/// Makes the areas of a formatted drive's `EC_DIR` that are missing.
pub(crate) fn make_areas(ec: BorrowedFd<'_>) -> std::io::Result<()> {
    for area in AREAS {
        match rustix::fs::mkdirat(ec, area, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// Whether the directory `dir` is its own mount point: its device differs from its parent's,
/// or the kernel says it is a mount's root (a bind mount of the parent's file system).
pub(crate) fn is_mount_point(dir: BorrowedFd<'_>) -> std::io::Result<bool> {
    let own = rustix::fs::fstat(dir)?;
    let parent = rustix::fs::statat(dir, "..", AtFlags::empty())?;
    if own.st_dev != parent.st_dev {
        return Ok(true);
    }
    use rustix::fs::{StatxAttributes, StatxFlags};
    Ok(rustix::fs::statx(dir, "", AtFlags::EMPTY_PATH, StatxFlags::empty()).is_ok_and(|s| {
        s.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT)
            && s.stx_attributes.contains(StatxAttributes::MOUNT_ROOT)
    }))
}

/// The names in the directory `dir` (without `.` and `..`) and whether each is a directory;
/// `None` when there are more than `BLANK_SCAN`.
fn entries(dir: BorrowedFd<'_>) -> std::io::Result<Option<Vec<(String, bool)>>> {
    let mut found = Vec::new();
    let mut reader = rustix::fs::Dir::read_from(dir)?;
    while let Some(entry) = reader.read() {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "." || name == ".." {
            continue;
        }
        if found.len() == BLANK_SCAN {
            return Ok(None);
        }
        let is_dir = match entry.file_type() {
            FileType::Unknown => rustix::fs::statat(dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Directory),
            kind => kind == FileType::Directory,
        };
        found.push((name, is_dir));
    }
    Ok(Some(found))
}

/// Whether `name` beneath `dir` is a directory that `blank` judges blank.
fn blank_below(
    dir: BorrowedFd<'_>,
    name: &str,
    blank: impl Fn(BorrowedFd<'_>, &str, bool) -> std::io::Result<bool>,
) -> std::io::Result<bool> {
    let below = isthmus_posix::resolve::open_dir_beneath(dir, name)?;
    let Some(entries) = entries(below.as_fd())? else { return Ok(false) };
    for (name, is_dir) in entries {
        if !blank(below.as_fd(), &name, is_dir)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the drive directory `dir` is blank: nothing in it but an empty `lost+found` (a new
/// file system) and what a format interrupted before its format file was written leaves (empty
/// areas, temporaries of the format file). A drive that holds anything else is never taken
/// for a replacement.
pub(crate) fn is_blank(dir: BorrowedFd<'_>) -> std::io::Result<bool> {
    let empty = |_: BorrowedFd<'_>, _: &str, _: bool| Ok(false);
    blank_below(dir, ".", |dir, name, is_dir| match (name, is_dir) {
        ("lost+found", true) => blank_below(dir, name, empty),
        (".isthmus", true) => blank_below(dir, name, |dir, name, is_dir| match (name, is_dir) {
            ("ec", true) => blank_below(dir, name, |dir, name, is_dir| {
                if is_dir && AREAS.contains(&name) {
                    blank_below(dir, name, empty)
                } else {
                    Ok(!is_dir && name.starts_with(&format!("{FORMAT_NAME}.tmp.")))
                }
            }),
            _ => Ok(false),
        }),
        _ => Ok(false),
    })
}

/// How a drive's format compares with the pool's identity.
pub(crate) enum Judgment {
    /// The slot's own drive. `current`: its format carries the pool's identity as it is now
    /// (else it is rewritten: an old format upgraded, mount points learnt).
    Ours { rebuilding: bool, current: bool },
    /// Another pool's drive, or another slot's: never written. Why, for the log.
    Foreign(String),
}

/// Who the pool is: its name and random id, its number of drives, and which slots' drives
/// were mount points when formatted.
pub(crate) struct PoolIdentity {
    pub(crate) name: String,
    pub(crate) id: String,
    pub(crate) drives: usize,
    mounts: Mutex<Vec<bool>>,
}

impl PoolIdentity {
    fn new(name: &str, id: String, mounts: Vec<bool>) -> Self {
        Self { name: name.to_string(), id, drives: mounts.len(), mounts: Mutex::new(mounts) }
    }

    fn mounts(&self) -> Vec<bool> {
        self.mounts.lock().expect("mount points lock").clone()
    }

    /// The format of the drive in `slot`, with the pool's identity as it is now.
    pub(crate) fn format(&self, slot: usize, drive_id: Option<String>, rebuilding: bool) -> DriveFormat {
        DriveFormat {
            version: FORMAT_VERSION,
            pool: self.name.clone(),
            pool_id: Some(self.id.clone()),
            index: slot,
            drive_id: Some(drive_id.unwrap_or_else(random_id)),
            drives: self.drives,
            mounts: self.mounts(),
            rebuilding,
        }
    }

    /// Whether the drive of `slot` was its own mount point when formatted.
    pub(crate) fn was_mount_point(&self, slot: usize) -> bool {
        self.mounts.lock().expect("mount points lock").get(slot).copied().unwrap_or(false)
    }

    /// Notes that the drive of `slot` is a mount point; whether that is news.
    pub(crate) fn learn_mount_point(&self, slot: usize) -> bool {
        let mut mounts = self.mounts.lock().expect("mount points lock");
        match mounts.get_mut(slot) {
            Some(known) if !*known => {
                *known = true;
                true
            }
            _ => false,
        }
    }

    /// Whether `found` (read from the drive listed in `slot`) is that slot's drive.
    pub(crate) fn judge(&self, found: &DriveFormat, slot: usize) -> Judgment {
        let what = || {
            format!(
                "it carries the format of slot {} of {} drives of pool {:?} (id {})",
                found.index,
                found.drives,
                found.pool,
                found.pool_id.as_deref().unwrap_or("none")
            )
        };
        if found.version > FORMAT_VERSION {
            return Judgment::Foreign(format!(
                "its format is version {}, written by a newer gateway (this one reads up to {FORMAT_VERSION})",
                found.version
            ));
        }
        if found.pool != self.name || found.pool_id.as_ref().is_some_and(|id| *id != self.id) {
            return Judgment::Foreign(format!(
                "{}: a drive of another pool (this is pool {:?}, id {})",
                what(),
                self.name,
                self.id
            ));
        }
        if found.drives != self.drives || found.index != slot {
            return Judgment::Foreign(format!(
                "{}: it belongs in another slot (this is slot {slot} of {}); were drives swapped or copied?",
                what(),
                self.drives
            ));
        }
        // Mount points are only ever learnt: what another process (or an earlier run) learnt
        // is kept, never written back as not known.
        if found.mounts.len() == self.drives {
            let mut mounts = self.mounts.lock().expect("mount points lock");
            mounts.iter_mut().zip(&found.mounts).for_each(|(known, was)| *known |= *was);
        }
        let current = found.version == FORMAT_VERSION
            && found.pool_id.is_some()
            && found.drive_id.is_some()
            && found.mounts == self.mounts();
        Judgment::Ours { rebuilding: found.rebuilding, current }
    }
}

/// What `resolve` found in one drive directory.
struct Found {
    dir: Option<OwnedFd>,
    format: Result<DriveFormat, FormatError>,
}

fn look_at(path: &std::path::Path) -> Found {
    let dir = match rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) {
        Ok(dir) => dir,
        Err(err) => return Found { dir: None, format: Err(FormatError::Unreadable(err.into())) },
    };
    let format = match isthmus_posix::resolve::open_dir_beneath(dir.as_fd(), EC_DIR) {
        Ok(ec) => read_format(ec.as_fd()),
        Err(Errno::NOENT) => Err(FormatError::Missing),
        Err(Errno::NOTDIR | Errno::LOOP) => Err(FormatError::Damaged(format!("{EC_DIR} is not a directory"))),
        Err(err) => Err(FormatError::Unreadable(err.into())),
    };
    Found { dir: Some(dir), format }
}

/// The identity of the pool `name` over `paths`, from the formats its drives carry: the pool
/// id most drives in their own slot carry (version 1 drives get a new one); the mount points
/// they record, and those of its formatted drives that are mount points now. A pool none of
/// whose drives carries a format is new: its directories are made and formatted, unless some
/// are mount points and others not (a disk not mounted: never formatted onto its parent).
pub(crate) fn resolve(name: &str, paths: &[PathBuf]) -> StoreResult<Arc<PoolIdentity>> {
    let n = paths.len();
    let found: Vec<Found> = paths.iter().map(|p| look_at(p)).collect();
    let formatted = found.iter().any(|f| matches!(f.format, Ok(_) | Err(FormatError::Damaged(_))));
    if !formatted {
        return format_new_pool(name, paths);
    }
    let in_slot = |slot: usize, f: &DriveFormat| f.pool == name && f.drives == n && f.index == slot;
    let mut ids: Vec<(&str, usize)> = Vec::new();
    for (slot, f) in found.iter().enumerate() {
        if let Ok(format) = &f.format
            && in_slot(slot, format)
            && let Some(id) = &format.pool_id
        {
            match ids.iter_mut().find(|(known, _)| *known == id) {
                Some((_, count)) => *count += 1,
                None => ids.push((id, 1)),
            }
        }
    }
    ids.sort_by_key(|&(_, count)| std::cmp::Reverse(count));
    if let [(first, most), (second, also), ..] = ids[..]
        && most == also
    {
        return Err(StoreError::InvalidArgument(format!(
            "pool {name:?}: as many drives carry pool id {first} as pool id {second}: the drive list mixes two \
             pools of that name; list only this pool's drives"
        )));
    }
    let upgrading = ids.is_empty();
    let id = match ids.first() {
        Some((id, _)) => id.to_string(),
        None => {
            tracing::info!(pool = name, "erasure pool formatted before pool ids: its drives' formats are upgraded");
            random_id()
        }
    };
    let ours: Vec<bool> = found
        .iter()
        .enumerate()
        .map(|(slot, f)| {
            f.format
                .as_ref()
                .is_ok_and(|format| in_slot(slot, format) && format.pool_id.as_ref().is_none_or(|p| *p == id))
        })
        .collect();
    let mut mounts = vec![false; n];
    for (slot, f) in found.iter().enumerate() {
        if let Ok(format) = &f.format
            && ours[slot]
            && format.mounts.len() == n
        {
            mounts.iter_mut().zip(&format.mounts).for_each(|(known, was)| *known |= *was);
        }
        if ours[slot] && f.dir.as_ref().is_some_and(|dir| is_mount_point(dir.as_fd()).unwrap_or(false)) {
            mounts[slot] = true;
        }
    }
    // Version 1 recorded no mount points: where every formatted drive is a mount point, a slot
    // without one is taken for a mount point too (its disk is then taken only once mounted).
    let formatted_slots: Vec<usize> = (0..n).filter(|&s| ours[s]).collect();
    if upgrading && !formatted_slots.is_empty() && formatted_slots.iter().all(|&s| mounts[s]) {
        mounts = vec![true; n];
    }
    Ok(Arc::new(PoolIdentity::new(name, id, mounts)))
}

/// A new pool: every drive directory made and formatted, all as mount points or none.
fn format_new_pool(name: &str, paths: &[PathBuf]) -> StoreResult<Arc<PoolIdentity>> {
    let mut dirs = Vec::with_capacity(paths.len());
    for path in paths {
        std::fs::create_dir_all(path).map_err(|e| StoreError::io("create the drive directory", path, e))?;
        let dir = rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| StoreError::io("open the drive directory", path, e.into()))?;
        dirs.push(dir);
    }
    let mut mounts = Vec::with_capacity(paths.len());
    for (dir, path) in dirs.iter().zip(paths) {
        mounts.push(is_mount_point(dir.as_fd()).map_err(|e| StoreError::io("look at the drive directory", path, e))?);
    }
    if mounts.iter().any(|m| *m) && mounts.iter().any(|m| !*m) {
        let plain: Vec<String> =
            paths.iter().zip(&mounts).filter(|(_, m)| !**m).map(|(p, _)| p.display().to_string()).collect();
        return Err(StoreError::InvalidArgument(format!(
            "pool {name:?} is new and some of its drives are mount points, but {} sit on their parent's disk: \
             mount their disks first (a pool's drives are all mount points or all plain directories)",
            plain.join(", ")
        )));
    }
    let identity = Arc::new(PoolIdentity::new(name, random_id(), mounts));
    for (slot, (dir, path)) in dirs.iter().zip(paths).enumerate() {
        format_blank(dir.as_fd(), &identity.format(slot, None, false))
            .map_err(|e| StoreError::io("format the drive", path, e))?;
    }
    tracing::info!(pool = name, id = %identity.id, drives = paths.len(), "erasure pool formatted");
    Ok(identity)
}

/// Writes the small file `name` in `dir` atomically: a temporary file, optionally synced (and
/// the directory after the rename), renamed into place; the temporary removed on failure.
pub(crate) fn write_file_at(dir: BorrowedFd<'_>, name: &str, bytes: &[u8], sync: bool) -> std::io::Result<()> {
    let tmp = format!("{name}.tmp.{}", isthmus_posix::writer_names::unique_suffix());
    let result = (|| -> std::io::Result<()> {
        let fd = rustix::fs::openat(
            dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )?;
        let mut file = std::fs::File::from(fd);
        std::io::Write::write_all(&mut file, bytes)?;
        if sync {
            file.sync_all()?;
        }
        rustix::fs::renameat(dir, tmp.as_str(), dir, name)?;
        if sync {
            rustix::fs::fsync(dir)?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = rustix::fs::unlinkat(dir, tmp.as_str(), AtFlags::empty());
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format() -> DriveFormat {
        PoolIdentity::new("ec", random_id(), vec![false; 4]).format(1, None, false)
    }

    #[test]
    fn damaged_formats_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let ec = rustix::fs::open(dir.path(), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        let write = |bytes: &[u8]| std::fs::write(dir.path().join(FORMAT_NAME), bytes).unwrap();
        let damaged = |expected: &str| match read_format(ec.as_fd()) {
            Err(FormatError::Damaged(why)) => assert!(why.contains(expected), "{why}"),
            other => panic!("{other:?}"),
        };
        assert!(matches!(read_format(ec.as_fd()), Err(FormatError::Missing)));
        write(b"\x00\xffnot json");
        damaged("not a drive format");
        write(&vec![b' '; (MAX_FORMAT_BYTES + 1) as usize]);
        damaged("larger than a drive format");
        for (field, value) in [("index", "7"), ("drives", "0"), ("pool_id", "\"../x\""), ("mounts", "[true]")] {
            let mut json: serde_json::Value = serde_json::to_value(format()).unwrap();
            json[field] = serde_json::from_str(value).unwrap();
            write(&serde_json::to_vec(&json).unwrap());
            damaged("holds");
        }
        let good = format();
        write(&serde_json::to_vec(&good).unwrap());
        assert_eq!(read_format(ec.as_fd()).unwrap(), good);
        // Version 1: no version, ids or mount points.
        write(br#"{"pool":"ec","index":2,"drives":4,"rebuilding":true}"#);
        let old = read_format(ec.as_fd()).unwrap();
        assert_eq!((old.version, old.pool_id, old.mounts.len(), old.rebuilding), (1, None, 0, true));
    }

    #[test]
    fn a_bind_mount_of_the_parents_file_system_is_a_mount_point() {
        let dir = tempfile::tempdir().unwrap();
        let drive = dir.path().join("d");
        std::fs::create_dir(&drive).unwrap();
        let fd = || rustix::fs::open(&drive, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        assert!(!is_mount_point(fd().as_fd()).unwrap());
        let bound = std::process::Command::new("mount").arg("--bind").arg(&drive).arg(&drive).output();
        if !bound.is_ok_and(|out| out.status.success()) {
            eprintln!("skipped: bind mounts are not possible here");
            return;
        }
        let mounted = is_mount_point(fd().as_fd());
        std::process::Command::new("umount").arg(&drive).status().unwrap();
        assert!(mounted.unwrap(), "a bind mount is a mount point");
    }

    #[test]
    fn blank_means_nothing_but_a_new_file_system_or_an_interrupted_format() {
        let dir = tempfile::tempdir().unwrap();
        let fd = || rustix::fs::open(dir.path(), OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty()).unwrap();
        assert!(is_blank(fd().as_fd()).unwrap());
        std::fs::create_dir(dir.path().join("lost+found")).unwrap();
        std::fs::create_dir_all(dir.path().join(".isthmus/ec/data")).unwrap();
        std::fs::write(dir.path().join(".isthmus/ec/drive.json.tmp.1"), b"{").unwrap();
        assert!(is_blank(fd().as_fd()).unwrap());
        std::fs::write(dir.path().join(".isthmus/ec/data/x"), b"").unwrap();
        assert!(!is_blank(fd().as_fd()).unwrap());
        std::fs::remove_file(dir.path().join(".isthmus/ec/data/x")).unwrap();
        std::fs::write(dir.path().join("lost+found/#12"), b"").unwrap();
        assert!(!is_blank(fd().as_fd()).unwrap());
        std::fs::remove_file(dir.path().join("lost+found/#12")).unwrap();
        std::fs::create_dir(dir.path().join("bucket")).unwrap();
        assert!(!is_blank(fd().as_fd()).unwrap());
    }
}
