//! Ordered listing: keys in strict UTF-8 byte order across nested directories, with prefix,
//! delimiter, start-after and max-keys. Each directory's entries are read and sorted once and
//! cached while the directory's identity and timestamps are unchanged (for a directory that has
//! been still for a moment: `SETTLE`), so paging through a huge directory costs a binary search
//! per page, not a new readdir and sort.

use std::cmp::Ordering;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType};

use crate::current::head;
use crate::meta::MetaStore;
use crate::resolve::open_dir_beneath;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::{MAX_KEY_LEN, ObjectPath, is_internal_name};
use isthmus_store::{ListPage, ListRequest};

/// One directory entry: its name and whether it sorts (and is walked) as a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    name: Box<str>,
    is_dir: bool,
}

impl Entry {
    /// Compares the entry's key suffix (`name`, or `name/` for a directory) with `s`.
    fn cmp_key(&self, s: &str) -> Ordering {
        self.key_bytes().cmp(s.bytes())
    }

    fn key_bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.name.bytes().chain(self.is_dir.then_some(b'/'))
    }

    fn sort_cmp(a: &Self, b: &Self) -> Ordering {
        a.key_bytes().cmp(b.key_bytes())
    }
}

/// A directory's entries in key order.
#[derive(Debug)]
struct DirListing {
    entries: Vec<Entry>,
}

impl DirListing {
    /// The entries of `dir` whose names begin with `name_prefix` ("" for all), sorted.
    fn read(dir: BorrowedFd<'_>, name_prefix: &str) -> StoreResult<Self> {
        let mut entries = Vec::new();
        for entry in rustix::fs::Dir::read_from(dir)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().to_str() else {
                continue;
            };
            if !name.starts_with(name_prefix) {
                continue;
            }
            // `.isthmus` is the gateway's at any depth (it holds the versions of a key in the
            // versions tree), and `.isthmus.*` are writes in progress; no key has such a segment.
            if name == "." || name == ".." || is_internal_name(name) {
                continue;
            }
            let is_dir = match entry.file_type() {
                FileType::Directory => true,
                FileType::RegularFile => false,
                // Symlinks and unknown types: what they resolve to decides. Whether a symlink
                // stays inside the bucket is checked when it is opened.
                FileType::Symlink | FileType::Unknown => match rustix::fs::statat(dir, name, AtFlags::empty()) {
                    Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
                        FileType::Directory => true,
                        FileType::RegularFile => false,
                        _ => continue,
                    },
                    Err(_) => continue,
                },
                _ => continue,
            };
            entries.push(Entry { name: name.into(), is_dir });
        }
        entries.sort_unstable_by(Entry::sort_cmp);
        Ok(Self { entries })
    }

    /// The first entry that can hold keys after `marker` (relative to this directory).
    fn start_after(&self, marker: &str) -> usize {
        let idx = self.entries.partition_point(|e| e.cmp_key(marker) == Ordering::Less);
        if idx > 0 {
            let prev = &self.entries[idx - 1];
            if prev.is_dir
                && marker.len() > prev.name.len()
                && marker.starts_with(&*prev.name)
                && marker.as_bytes()[prev.name.len()] == b'/'
            {
                return idx - 1;
            }
        }
        idx
    }
}

/// What identifies one version of a directory's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct DirVersion {
    dev: u64,
    ino: u64,
    mtime: (i64, u64),
    ctime: (i64, u64),
    nlink: u64,
}

#[derive(Clone)]
struct EntryCountWeighter;

impl quick_cache::Weighter<DirVersion, Arc<DirListing>> for EntryCountWeighter {
    fn weight(&self, _key: &DirVersion, val: &Arc<DirListing>) -> u64 {
        val.entries.len() as u64 + 1
    }
}

/// Sorted directory listings, bounded by the total number of entries held.
pub(crate) struct DirCache {
    cache: quick_cache::sync::Cache<DirVersion, Arc<DirListing>, EntryCountWeighter>,
}

/// How long a directory must have been unchanged before a listing of it is kept. A directory's
/// version is its timestamps, which file systems keep at a granularity (a clock tick on older
/// kernels, a second on Lustre): a change within the granule of the one before leaves the
/// version as it was, and a listing kept from between the two would miss the second change
/// for good. A listing read once the directory has been still for longer than any granularity
/// cannot be.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether a directory last changed at `changed` (its later timestamp) has been still for
/// `SETTLE` at `now` (a timestamp in the future, from a skewed clock, is not settled).
fn settled(changed: std::time::SystemTime, now: std::time::SystemTime) -> bool {
    now.duration_since(changed).is_ok_and(|age| age >= SETTLE)
}

/// Whether the file system of `dir` gives a change made after its timestamps were looked at a
/// timestamp of its own (multigrain timestamps: Linux 6.13 and later, on ext4, XFS and Btrfs).
/// There the version read with a listing changes with the next change, however soon, and the
/// listing can be kept at once. Not tmpfs: measured on Linux 6.18, 199 of 200 unlinks in a row
/// left a tmpfs directory's timestamps as they were.
fn changes_get_new_timestamps(dir: BorrowedFd<'_>) -> bool {
    static MULTIGRAIN_KERNEL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let kernel = *MULTIGRAIN_KERNEL
        .get_or_init(|| kernel_at_least(&rustix::system::uname().release().to_string_lossy(), (6, 13)));
    kernel
        && matches!(
            isthmus_store::FileSystemKind::of(dir),
            isthmus_store::FileSystemKind::Local("ext4" | "xfs" | "btrfs")
        )
}

/// Whether a kernel release ("6.18.44-fc") is `at_least` (major, minor).
fn kernel_at_least(release: &str, at_least: (u32, u32)) -> bool {
    let mut numbers = release.split(|c: char| !c.is_ascii_digit()).map(|n| n.parse::<u32>().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= at_least,
        _ => false,
    }
}

impl DirCache {
    pub(crate) fn new(max_entries: u64) -> Self {
        Self { cache: quick_cache::sync::Cache::with_weighter(1024, max_entries.max(1), EntryCountWeighter) }
    }

    fn listing(&self, dir: BorrowedFd<'_>) -> StoreResult<Arc<DirListing>> {
        self.listing_from(dir, "")
    }

    /// The listing of `dir` as far as entries beginning with `name_prefix` go: the whole
    /// listing when it is cached; else, for a directory that changed within `SETTLE`, only the
    /// matching entries, read and sorted for this request and not kept (a listing of one name
    /// in a large directory that keeps changing, as IOR's S3 backend makes after each delete,
    /// sorts what matches, not the directory); else the whole directory, kept.
    fn listing_from(&self, dir: BorrowedFd<'_>, name_prefix: &str) -> StoreResult<Arc<DirListing>> {
        let stat = rustix::fs::fstat(dir)?;
        let version = DirVersion {
            dev: stat.st_dev,
            ino: stat.st_ino,
            mtime: (stat.st_mtime, stat.st_mtime_nsec as u64),
            ctime: (stat.st_ctime, stat.st_ctime_nsec as u64),
            nlink: stat.st_nlink,
        };
        if let Some(listing) = self.cache.get(&version) {
            return Ok(listing);
        }
        let changed = crate::system_time(stat.st_mtime, stat.st_mtime_nsec as i64)
            .max(crate::system_time(stat.st_ctime, stat.st_ctime_nsec as i64));
        if !settled(changed, std::time::SystemTime::now()) && !changes_get_new_timestamps(dir) {
            return Ok(Arc::new(DirListing::read(dir, name_prefix)?));
        }
        let listing = Arc::new(DirListing::read(dir, "")?);
        self.cache.insert(version, listing.clone());
        Ok(listing)
    }
}

/// One level of the depth-first walk.
struct Frame {
    /// Key prefix of this directory: "" at the bucket root, else "a/b/".
    dir_key: String,
    listing: Arc<DirListing>,
    pos: usize,
}

/// Where a marker falls relative to a directory with key prefix `dir_key`.
fn start_position(listing: &DirListing, dir_key: &str, marker: Option<&str>) -> usize {
    match marker {
        None => 0,
        Some(m) if m < dir_key => 0,
        Some(m) if m.starts_with(dir_key) => listing.start_after(&m[dir_key.len()..]),
        Some(_) => listing.entries.len(),
    }
}

struct Walk<'a> {
    meta: MetaStore<'a>,
    /// Set when an entry needed long work its context may not do: the page is given up.
    would_block: bool,
    bucket: BorrowedFd<'a>,
    cache: &'a DirCache,
    request: &'a ListRequest,
    page: ListPage,
    /// Set for a listing of names alone (`list_keys`): the keys, no object read.
    names: Option<Vec<String>>,
    /// Objects plus common prefixes collected so far.
    count: usize,
}

impl Walk<'_> {
    fn full(&self) -> bool {
        self.count >= self.request.max_keys
    }

    fn after_marker(&self, key: &str) -> bool {
        self.request.start_after.as_deref().is_none_or(|m| key > m)
    }

    /// Records a key or common prefix; returns false once the page is full (and marks it
    /// truncated, since this item would have been next).
    fn push_object(&mut self, key: &str) -> bool {
        if let Some(d) = self.request.delimiter.as_deref().filter(|d| *d != "/" && !d.is_empty())
            && let Some(pos) = key[self.request.prefix.len()..].find(d)
        {
            let prefix = &key[..self.request.prefix.len() + pos + d.len()];
            return self.push_common_prefix(prefix);
        }
        let Ok(path) = ObjectPath::parse(key) else {
            return true;
        };
        let full = self.full();
        if let Some(names) = &mut self.names {
            if full {
                self.page.is_truncated = true;
                return false;
            }
            self.page.next_marker = Some(key.to_string());
            names.push(key.to_string());
            self.count += 1;
            return true;
        }
        let info = match head(&self.meta, &path) {
            Ok((_, _, info)) => info,
            Err(StoreError::WouldBlock) => {
                self.would_block = true;
                return false;
            }
            // Vanished, unreadable, or a symlink out of the bucket: not an object.
            Err(_) => return true,
        };
        if self.full() {
            self.page.is_truncated = true;
            return false;
        }
        self.page.next_marker = Some(info.key.clone());
        self.page.objects.push(info);
        self.count += 1;
        true
    }

    fn push_common_prefix(&mut self, prefix: &str) -> bool {
        if self.page.common_prefixes.last().is_some_and(|p| p == prefix) {
            return true;
        }
        if let Some(m) = self.request.start_after.as_deref()
            && (prefix == m || (prefix < m && !m.starts_with(prefix)))
        {
            return true;
        }
        if self.full() {
            self.page.is_truncated = true;
            return false;
        }
        self.page.next_marker = Some(prefix.to_string());
        self.page.common_prefixes.push(prefix.to_string());
        self.count += 1;
        true
    }

    fn open_dir(&self, dir_key: &str) -> Option<OwnedFd> {
        let rel = dir_key.strip_suffix('/').unwrap_or(".");
        open_dir_beneath(self.bucket, if rel.is_empty() { "." } else { rel }).ok()
    }

    fn run(&mut self) -> StoreResult<()> {
        let prefix = self.request.prefix.as_str();
        let (top_key, name_prefix) = match prefix.rfind('/') {
            Some(i) => (&prefix[..=i], &prefix[i + 1..]),
            None => ("", prefix),
        };
        let Some(top_fd) = self.open_dir(top_key) else {
            // A bucket the request's identity may not read is refused as `ls` refuses it; a
            // directory beneath it is left out, like every directory it may not read.
            if top_key.is_empty() && open_dir_beneath(self.bucket, ".").err() == Some(rustix::io::Errno::ACCESS) {
                return Err(StoreError::AccessDenied);
            }
            return Ok(());
        };
        // A prefix naming a directory ("a/b/"): the folder object of that name, if there is one,
        // is the first key that begins with the prefix.
        if name_prefix.is_empty()
            && !top_key.is_empty()
            && self.after_marker(top_key)
            && self.meta.load(top_fd.as_fd(), top_key).is_some()
            && !self.push_object(top_key)
        {
            return Ok(());
        }
        let listing = self.cache.listing_from(top_fd.as_fd(), name_prefix)?;
        let marker = self.request.start_after.as_deref();
        let from_prefix = listing.entries.partition_point(|e| e.cmp_key(name_prefix) == Ordering::Less);
        let pos = start_position(&listing, top_key, marker).max(from_prefix);
        let mut stack = vec![Frame { dir_key: top_key.to_string(), listing, pos }];
        let roll_up_dirs = self.request.delimiter.as_deref() == Some("/");

        while let Some(frame) = stack.last_mut() {
            let Some(entry) = frame.listing.entries.get(frame.pos).cloned() else {
                stack.pop();
                continue;
            };
            frame.pos += 1;
            let key = format!("{}{}", frame.dir_key, entry.name);
            if stack.len() == 1 && !entry.name.starts_with(name_prefix) {
                break;
            }
            if key.len() > MAX_KEY_LEN {
                continue;
            }
            if !entry.is_dir {
                if self.after_marker(&key) && !self.push_object(&key) {
                    return Ok(());
                }
                continue;
            }
            let dir_key = key + "/";
            if roll_up_dirs {
                if !self.push_common_prefix(&dir_key) {
                    return Ok(());
                }
                continue;
            }
            if let Some(m) = marker
                && dir_key.as_str() < m
                && !m.starts_with(&dir_key)
            {
                continue;
            }
            let Some(dir_fd) = self.open_dir(&dir_key) else {
                continue;
            };
            if self.after_marker(&dir_key)
                && self.meta.load(dir_fd.as_fd(), &dir_key).is_some()
                && !self.push_object(&dir_key)
            {
                return Ok(());
            }
            let listing = self.cache.listing(dir_fd.as_fd())?;
            let pos = start_position(&listing, &dir_key, marker);
            stack.push(Frame { dir_key, listing, pos });
        }
        Ok(())
    }
}

pub(crate) fn list_objects(meta: MetaStore<'_>, cache: &DirCache, request: &ListRequest) -> StoreResult<ListPage> {
    walk(meta, cache, request, None).map(|(page, _)| page)
}

/// A page of a listing by names alone: the keys (in `keys`, `page.objects` empty) and common
/// prefixes, no object's file or metadata read. For a namespace whose every file is an
/// object the caller describes itself (an erasure-coded pool's drive).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPage {
    pub keys: Vec<String>,
    pub page: ListPage,
}

pub(crate) fn list_keys(meta: MetaStore<'_>, cache: &DirCache, request: &ListRequest) -> StoreResult<KeyPage> {
    walk(meta, cache, request, Some(Vec::new())).map(|(page, keys)| KeyPage { keys: keys.unwrap_or_default(), page })
}

fn walk(
    meta: MetaStore<'_>,
    cache: &DirCache,
    request: &ListRequest,
    names: Option<Vec<String>>,
) -> StoreResult<(ListPage, Option<Vec<String>>)> {
    if request.max_keys == 0 {
        return Ok((ListPage::default(), names));
    }
    let bucket = meta.bucket;
    let mut walk =
        Walk { meta, would_block: false, bucket, cache, request, page: ListPage::default(), names, count: 0 };
    match walk.run() {
        Ok(()) if walk.would_block => return Err(StoreError::WouldBlock),
        Ok(()) => {}
        Err(StoreError::NoSuchKey) => {}
        Err(err) => return Err(err),
    }
    if !walk.page.is_truncated {
        walk.page.next_marker = None;
    }
    Ok((walk.page, walk.names))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(name: &str, is_dir: bool) -> Entry {
        Entry { name: name.into(), is_dir }
    }

    fn key_of(x: &Entry) -> String {
        format!("{}{}", x.name, if x.is_dir { "/" } else { "" })
    }

    #[test]
    fn only_a_directory_still_for_longer_than_any_timestamp_granule_is_kept() {
        use std::time::{Duration, SystemTime};
        let now = SystemTime::now();
        assert!(!settled(now, now));
        // Lustre keeps directory times to the second: a change a second ago may share its
        // timestamp with the next one.
        assert!(!settled(now - Duration::from_secs(1), now));
        assert!(settled(now - SETTLE, now));
        // A timestamp from a clock ahead of this host's is not settled.
        assert!(!settled(now + Duration::from_secs(60), now));
        assert!(kernel_at_least("6.13.0", (6, 13)) && kernel_at_least("6.18.44-fc-v669", (6, 13)));
        assert!(!kernel_at_least("5.14.0-427.el9.x86_64", (6, 13)) && !kernel_at_least("4.18.0", (6, 13)));
        assert!(!kernel_at_least("garbage", (6, 13)));
    }

    #[test]
    fn entries_sort_in_full_key_byte_order() {
        // "a-c" < "a/..." < "a0" < "ab" because '-' < '/' < '0' < 'b'.
        let mut v = [
            e("ab", false),
            e("a", true),
            e("a0", false),
            e("a-c", false),
            e("B", false),
            e("é", false),
            e("a.", true),
        ];
        v.sort_by(Entry::sort_cmp);
        let keys: Vec<String> = v.iter().map(key_of).collect();
        let mut expected = keys.clone();
        expected.sort();
        assert_eq!(keys, expected);
        assert_eq!(keys, ["B", "a-c", "a./", "a/", "a0", "ab", "é"]);
    }

    #[test]
    fn cmp_key_matches_string_comparison() {
        let entries = [e("a", true), e("a", false), e("ab", true), e("a-", true), e("", true)];
        let probes = ["", "a", "a/", "a/b", "a0", "a-", "a.", "ab/", "ab/c", "aa", "b", "/", "a//"];
        for entry in &entries {
            for probe in probes {
                assert_eq!(entry.cmp_key(probe), key_of(entry).as_str().cmp(probe), "{entry:?} vs {probe:?}");
            }
        }
    }

    #[test]
    fn start_after_descends_into_the_directory_holding_the_marker() {
        let mut entries = vec![e("a", true), e("a-c", false), e("b", false)];
        entries.sort_by(Entry::sort_cmp);
        let listing = DirListing { entries };
        // Order: a-c, a/, b
        assert_eq!(listing.start_after(""), 0);
        assert_eq!(listing.start_after("a-c"), 0); // the file a-c itself is filtered by the caller
        assert_eq!(listing.start_after("a/x"), 1); // inside a/: descend into it
        assert_eq!(listing.start_after("a/"), 1); // the prefix a/ itself
        assert_eq!(listing.start_after("a0"), 2);
        assert_eq!(listing.start_after("z"), 3);
    }
}
