//! ListObjectVersions of a `PosixStore` bucket: the keys of the current listing (plain files)
//! merged in key order with the keys of the versions tree, each key's versions newest first,
//! paged by key and version id markers, with common prefixes for any delimiter.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, BorrowedFd};

use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;

use super::list::{DirCache, list_objects};
use super::versions::{VERSIONS_DIR, has_entries_besides, keeps_versions, versions_of};
use crate::meta::MetaStore;
use crate::resolve::open_dir_beneath;
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::INTERNAL_DIR;
use isthmus_store::{ListRequest, ListVersionsRequest, ObjectInfo, VersionsPage};

/// A key or a common prefix, in the order of a listing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Entry {
    Key(String),
    Prefix(String),
}

impl Entry {
    fn name(&self) -> &str {
        match self {
            Self::Key(name) | Self::Prefix(name) => name,
        }
    }
}

/// The walk of the versions tree: the keys that have kept versions, in key order.
struct TreeWalk<'r> {
    prefix: &'r str,
    delimiter: Option<&'r str>,
    after: Option<&'r str>,
    limit: usize,
    found: Vec<Entry>,
}

impl TreeWalk<'_> {
    /// The common prefix `name` folds into, if the delimiter occurs after the prefix.
    fn common_prefix(&self, name: &str) -> Option<String> {
        let delimiter = self.delimiter?;
        let rest = name.strip_prefix(self.prefix)?;
        rest.find(delimiter).map(|at| name[..self.prefix.len() + at + delimiter.len()].to_string())
    }

    /// Adds an entry; false once the limit is reached.
    fn push(&mut self, entry: Entry) -> bool {
        if self.found.last() != Some(&entry) {
            self.found.push(entry);
        }
        self.found.len() < self.limit
    }

    fn key(&mut self, key: String) -> bool {
        if !key.starts_with(self.prefix) {
            return true;
        }
        match self.common_prefix(&key) {
            // A marker at or past the prefix means a page before this one returned it.
            Some(cp) if self.after.is_some_and(|a| a >= cp.as_str()) => true,
            Some(cp) => self.push(Entry::Prefix(cp)),
            None if self.after.is_some_and(|a| key.as_str() <= a) => true,
            None => self.push(Entry::Key(key)),
        }
    }

    /// Walks the directory of the versions tree whose keys begin with `dir_key` ("" or "a/b/").
    /// Returns false once the limit is reached.
    fn dir(&mut self, dir: BorrowedFd<'_>, dir_key: &str) -> StoreResult<bool> {
        let mut items = Vec::new();
        for entry in rustix::fs::Dir::read_from(dir).map_err(|e| StoreError::io_at("list the versions", dir_key, e))? {
            let entry = entry.map_err(|e| StoreError::io_at("list the versions", dir_key, e))?;
            let Ok(name) = entry.file_name().to_str() else { continue };
            if matches!(name, "." | ".." | INTERNAL_DIR) || entry.file_type() != FileType::Directory {
                continue;
            }
            // The key `name` itself sorts apart from the keys beneath it: "a" < "a-b" < "a/x".
            items.push((format!("{dir_key}{name}"), false, name.to_string()));
            items.push((format!("{dir_key}{name}/"), true, name.to_string()));
        }
        items.sort();
        for (full, beneath, name) in items {
            if !beneath {
                let has_versions =
                    rustix::fs::statat(dir, format!("{name}/{INTERNAL_DIR}").as_str(), AtFlags::SYMLINK_NOFOLLOW)
                        .is_ok();
                if has_versions && !self.key(full) {
                    return Ok(false);
                }
                continue;
            }
            if !(full.starts_with(self.prefix) || self.prefix.starts_with(full.as_str())) {
                continue;
            }
            // Every key beneath is before the marker.
            if self.after.is_some_and(|a| a > full.as_str() && !a.starts_with(full.as_str())) {
                continue;
            }
            let child = match open_dir_beneath(dir, &name) {
                Ok(child) => child,
                Err(Errno::NOENT | Errno::NOTDIR) => continue,
                Err(err) => return Err(StoreError::io_at("open the versions", &full, err)),
            };
            if let Some(cp) = self.common_prefix(&full) {
                // The whole subtree folds into one prefix, if it holds any key.
                if self.after.is_some_and(|a| a >= cp.as_str()) || !holds_keys(child.as_fd()) {
                    continue;
                }
                if !self.push(Entry::Prefix(cp)) {
                    return Ok(false);
                }
                continue;
            }
            if !self.dir(child.as_fd(), &full)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Whether a directory of the versions tree has keys beneath it (entries besides the versions
/// of its own key; emptied directories are removed as their last version goes).
fn holds_keys(dir: BorrowedFd<'_>) -> bool {
    has_entries_besides(dir, &[INTERNAL_DIR])
}

/// The keys (and common prefixes) of the versions tree after `after`, up to `limit`.
fn kept_keys(
    bucket: BorrowedFd<'_>,
    request: &ListVersionsRequest,
    after: Option<&str>,
    limit: usize,
) -> StoreResult<Vec<Entry>> {
    let root = match open_dir_beneath(bucket, VERSIONS_DIR) {
        Ok(root) => root,
        Err(Errno::NOENT) => return Ok(Vec::new()),
        Err(err) => return Err(StoreError::io_at("open the versions", VERSIONS_DIR, err)),
    };
    let mut walk =
        TreeWalk { prefix: &request.prefix, delimiter: request.delimiter.as_deref(), after, limit, found: Vec::new() };
    walk.dir(root.as_fd(), "")?;
    Ok(walk.found)
}

/// One page of ListObjectVersions.
pub(crate) fn list_versions(
    meta: MetaStore<'_>,
    cache: &DirCache,
    request: &ListVersionsRequest,
) -> StoreResult<VersionsPage> {
    if request.version_id_marker.is_some() && request.key_marker.is_none() {
        return Err(StoreError::InvalidArgument(
            "A version-id marker cannot be specified without a key marker.".into(),
        ));
    }
    let max = request.max_keys;
    let keeps_any = keeps_versions(meta.bucket);
    // Each entry yields at least one version or prefix: one more than a page tells truncation.
    let limit = max.saturating_add(1);
    let after = request.key_marker.as_deref();
    let current = list_objects(
        meta,
        cache,
        &ListRequest {
            prefix: request.prefix.clone(),
            delimiter: request.delimiter.clone(),
            start_after: request.key_marker.clone(),
            max_keys: limit,
        },
    )?;
    let mut currents: BTreeMap<String, ObjectInfo> = BTreeMap::new();
    let mut entries: Vec<Entry> = current.common_prefixes.into_iter().map(Entry::Prefix).collect();
    for object in current.objects {
        entries.push(Entry::Key(object.key.clone()));
        currents.insert(object.key.clone(), object);
    }
    entries.extend(kept_keys(meta.bucket, request, after, limit)?);
    entries.sort_by(|a, b| a.name().cmp(b.name()));
    entries.dedup();

    let mut page = VersionsPage::default();
    let mut count = 0usize;
    // The rest of the marker key's versions, after the marker version.
    if let (Some(key), Some(marker)) = (after, request.version_id_marker.as_deref()) {
        let current = match isthmus_store::key::ObjectPath::parse(key).map(|path| super::current::head(&meta, &path)) {
            Ok(Ok((_, _, info))) => Some(info),
            Ok(Err(StoreError::NoSuchKey)) | Err(_) => None,
            Ok(Err(err)) => return Err(err),
        };
        let versions = versions_of(meta.bucket, key, current, keeps_any)?;
        let rest = versions.iter().position(|v| v.info.version_id.as_deref() == Some(marker)).map_or(0, |i| i + 1);
        for version in versions.into_iter().skip(rest) {
            if count == max {
                page.is_truncated = true;
                return Ok(page);
            }
            page.next_key_marker = Some(key.to_string());
            page.next_version_id_marker = version.info.version_id.clone();
            page.versions.push(version);
            count += 1;
        }
    }
    for entry in entries {
        match entry {
            Entry::Prefix(prefix) => {
                if count == max {
                    page.is_truncated = true;
                    break;
                }
                page.next_key_marker = Some(prefix.clone());
                page.next_version_id_marker = None;
                page.common_prefixes.push(prefix);
                count += 1;
            }
            Entry::Key(key) => {
                let current = currents.remove(&key);
                for version in versions_of(meta.bucket, &key, current, keeps_any)? {
                    if count == max {
                        page.is_truncated = true;
                        break;
                    }
                    page.next_key_marker = Some(key.clone());
                    page.next_version_id_marker = version.info.version_id.clone();
                    page.versions.push(version);
                    count += 1;
                }
                if page.is_truncated {
                    break;
                }
            }
        }
    }
    if !page.is_truncated {
        page.next_key_marker = None;
        page.next_version_id_marker = None;
    }
    Ok(page)
}
