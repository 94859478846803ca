//! A bucket's settings (owner, ACL, policy, public access block, tags, versioning), kept by the
//! gateway out of every user's reach: one record per bucket in the gateway's state directory
//! (`ROOT/.isthmus/buckets/NAME.json`), bound to the inode of the bucket directory it was
//! written for.
//!
//! Why not in the bucket: a bucket directory is often writable by a project's group, and any
//! member could rename the bucket's `.isthmus` away and put their own owner, ACL or policy in
//! its place (issue 42, finding 2). Why the binding: a directory removed and made again under
//! the same name by POSIX tools is a new bucket, never the heir of the old one's owner and
//! grants (the inode is the one identity every client of a shared file system agrees on; the
//! device number is not). Settings an earlier version wrote inside the bucket are taken over
//! once, and only if the gateway's own user (or root) owns them and nobody else could have
//! written them.

use std::collections::BTreeMap;
use std::os::fd::BorrowedFd;

use serde::{Deserialize, Serialize};

use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::key::INTERNAL_DIR;
use isthmus_store::state_dir::{StateDir, StateError};
use isthmus_store::{BucketConfig, Versioning};

/// The directory of bucket records in the state directory.
pub(crate) const RECORDS_DIR: &str = "buckets";
/// Held while a record is compared with what a write read and replaced (one lock for all:
/// settings change rarely).
const LOCK_FILE: &str = ".lock";
/// A bound before a record is read (a policy is at most 20 KB; 50 tags; grants).
const RECORD_LIMIT: u64 = 1 << 20;

#[derive(Serialize, Deserialize)]
struct BucketRecord {
    /// The inode of the bucket directory these settings belong to.
    directory: u64,
    config: BucketConfig,
}

fn record_name(bucket: &str) -> String {
    format!("{bucket}.json")
}

fn directory_of(dir: BorrowedFd<'_>, bucket: &str) -> StoreResult<u64> {
    rustix::fs::fstat(dir).map(|s| s.st_ino).map_err(|e| StoreError::io_at("inspect the bucket directory", bucket, e))
}

/// The records directory of the state directory `state` (made if `create`).
fn records_dir(state: &StateDir, create: bool) -> StoreResult<Option<StateDir>> {
    Ok(state.subdir(RECORDS_DIR, create)?)
}

/// The settings of `bucket`, open as `dir`: its record if it was written for this very
/// directory; otherwise what a former version kept in the bucket (if the gateway wrote it),
/// recorded now so that the bucket is never read again; otherwise none (the defaults).
pub(crate) fn read(state: &StateDir, bucket: &str, dir: BorrowedFd<'_>) -> StoreResult<BucketConfig> {
    let directory = directory_of(dir, bucket)?;
    if let Some(records) = records_dir(state, false)?
        && let Some(config) = recorded(&records, bucket, directory)?
    {
        return Ok(config);
    }
    let config = legacy_settings(state, bucket, dir);
    // Recorded now, unless a writer recorded something meanwhile; a process that may not
    // write the state directory (an in-process door as another user) keeps reading the
    // legacy settings.
    let recorded_now = records_dir(state, true).and_then(|records| {
        let records = records.expect("created when missing");
        let _lock = records.lock(LOCK_FILE)?;
        match recorded(&records, bucket, directory)? {
            Some(config) => Ok(config),
            None => save(&records, bucket, directory, &config).map(|()| config.clone()),
        }
    });
    match recorded_now {
        Ok(config) => Ok(config),
        Err(err) => {
            tracing::debug!(bucket, error = %err, "cannot record a bucket's settings in the state directory");
            Ok(config)
        }
    }
}

/// The record of `bucket` if it is bound to `directory`.
fn recorded(records: &StateDir, bucket: &str, directory: u64) -> StoreResult<Option<BucketConfig>> {
    let Some(bytes) = records.read(&record_name(bucket), RECORD_LIMIT)? else { return Ok(None) };
    let record: BucketRecord = serde_json::from_slice(&bytes).map_err(|e| {
        StoreError::io("parse the bucket settings", &records.path().join(record_name(bucket)), e.into())
    })?;
    if record.directory != directory {
        tracing::warn!(
            bucket,
            "the bucket directory was replaced since its settings were recorded: the old settings do not apply to it"
        );
        return Ok(None);
    }
    Ok(Some(record.config))
}

fn save(records: &StateDir, bucket: &str, directory: u64, config: &BucketConfig) -> StoreResult<()> {
    let record = BucketRecord { directory, config: BucketConfig { version: None, ..config.clone() } };
    let bytes = serde_json::to_vec(&record).expect("settings serialize");
    Ok(records.replace(&record_name(bucket), &bytes, 0o644)?)
}

/// Replaces the settings of `bucket` (open as `dir`) with `config` if they are still the
/// version `config` names (see `BucketConfig::check_replaces`).
pub(crate) fn replace(state: &StateDir, bucket: &str, dir: BorrowedFd<'_>, config: &BucketConfig) -> StoreResult<()> {
    let current = read(state, bucket, dir)?;
    let records = records_dir(state, true)?.expect("created when missing");
    let _lock = records.lock(LOCK_FILE)?;
    let directory = directory_of(dir, bucket)?;
    let current = recorded(&records, bucket, directory)?.unwrap_or(current);
    config.check_replaces(&current)?;
    save(&records, bucket, directory, config)
}

/// A new bucket directory `dir`: no settings, whatever a bucket of that name had before.
pub(crate) fn start(state: &StateDir, bucket: &str, dir: BorrowedFd<'_>) -> StoreResult<()> {
    let directory = directory_of(dir, bucket)?;
    let records = records_dir(state, true)?.expect("created when missing");
    let _lock = records.lock(LOCK_FILE)?;
    save(&records, bucket, directory, &BucketConfig::default())
}

/// Forgets the settings of a deleted bucket.
pub(crate) fn remove(state: &StateDir, bucket: &str) {
    let removed = records_dir(state, false).and_then(|records| match records {
        Some(records) => Ok(records.remove(&record_name(bucket))?),
        None => Ok(()),
    });
    if let Err(err) = removed {
        tracing::warn!(bucket, error = %err, "cannot remove a deleted bucket's settings");
    }
}

/// Files an earlier version kept a bucket's settings in (`BUCKET/.isthmus/NAME`).
const OWNER_FILE: &str = "owner";
const ACL_FILE: &str = "acl";
const POLICY_FILE: &str = "policy.json";
const PUBLIC_ACCESS_BLOCK_FILE: &str = "public-access-block.json";
const TAGS_FILE: &str = "tags.json";
const VERSIONING_FILE: &str = "versioning";

/// The settings an earlier version kept in the bucket's internal area, if the gateway's user
/// (or root) owns that area and each file and nobody else may write them; otherwise none,
/// with a warning (a user could have put them there).
fn legacy_settings(state: &StateDir, bucket: &str, dir: BorrowedFd<'_>) -> BucketConfig {
    let path = std::path::Path::new(bucket).join(INTERNAL_DIR);
    let read = || -> Result<BucketConfig, String> {
        let Some(area) = state.foreign_dir(dir, INTERNAL_DIR, path.clone()).map_err(|e| e.to_string())? else {
            return Ok(BucketConfig::default());
        };
        parse_legacy(|name| area.read(name, RECORD_LIMIT))
    };
    read().unwrap_or_else(|why| {
        tracing::warn!(bucket, why, "settings found in the bucket directory are not the gateway's: ignored");
        BucketConfig::default()
    })
}

/// A bucket's settings from the files of the former layout, each read by `read`.
fn parse_legacy(read: impl Fn(&str) -> Result<Option<Vec<u8>>, StateError>) -> Result<BucketConfig, String> {
    let file = |name: &str| read(name).map_err(|e| e.to_string());
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).trim().to_string();
    let json_error = |name: &'static str| move |e: serde_json::Error| format!("{name}: {e}");
    let acl = match file(ACL_FILE)? {
        None => isthmus_store::Acl::default(),
        Some(bytes) if bytes.first() == Some(&b'{') => serde_json::from_slice(&bytes).map_err(json_error(ACL_FILE))?,
        Some(bytes) => isthmus_store::Acl::canned(text(bytes).parse().map_err(|e: StoreError| e.to_string())?),
    };
    let public_access_block = match file(PUBLIC_ACCESS_BLOCK_FILE)? {
        Some(bytes) => Some(serde_json::from_slice(&bytes).map_err(json_error(PUBLIC_ACCESS_BLOCK_FILE))?),
        None => None,
    };
    let tags = match file(TAGS_FILE)? {
        Some(bytes) => serde_json::from_slice(&bytes).map_err(json_error(TAGS_FILE))?,
        None => BTreeMap::new(),
    };
    Ok(BucketConfig {
        owner: file(OWNER_FILE)?.map(text).filter(|o| !o.is_empty()),
        acl,
        policy: file(POLICY_FILE)?.map(|b| String::from_utf8_lossy(&b).into_owned()),
        public_access_block,
        tags,
        versioning: file(VERSIONING_FILE)?.and_then(|b| Versioning::parse(&text(b))),
        cors: None,
        notification: None,
        version: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use isthmus_store::state_dir::StateTrust;
    use std::os::fd::AsFd;
    use std::os::unix::fs::PermissionsExt;

    fn setup() -> (tempfile::TempDir, StateDir, std::fs::File) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let records = StateDir::open_path(dir.path(), StateTrust::Gateway).unwrap();
        std::fs::create_dir(dir.path().join("b")).unwrap();
        let bucket = std::fs::File::open(dir.path().join("b")).unwrap();
        (dir, records, bucket)
    }

    #[test]
    fn settings_belong_to_the_directory_they_were_written_for() {
        let (dir, records, bucket) = setup();
        let config = BucketConfig { owner: Some("bob".into()), ..Default::default() };
        replace(&records, "b", bucket.as_fd(), &config).unwrap();
        assert_eq!(read(&records, "b", bucket.as_fd()).unwrap().owner.as_deref(), Some("bob"));
        // Removed and made again by POSIX tools: a new bucket, with no owner.
        std::fs::rename(dir.path().join("b"), dir.path().join("old")).unwrap();
        std::fs::create_dir(dir.path().join("b")).unwrap();
        let again = std::fs::File::open(dir.path().join("b")).unwrap();
        assert_eq!(read(&records, "b", again.as_fd()).unwrap(), BucketConfig::default());
    }

    #[test]
    fn a_stale_version_is_a_conflict() {
        let (_dir, records, bucket) = setup();
        let first = read(&records, "b", bucket.as_fd()).unwrap().versioned();
        let mut change = first.clone();
        change.owner = Some("alice".into());
        replace(&records, "b", bucket.as_fd(), &change).unwrap();
        let mut late = first;
        late.owner = Some("mallory".into());
        assert!(matches!(replace(&records, "b", bucket.as_fd(), &late), Err(StoreError::ConfigConflict)));
    }

    #[test]
    fn legacy_settings_are_taken_over_only_when_the_gateway_wrote_them() {
        let (dir, records, bucket) = setup();
        let area = dir.path().join("b").join(INTERNAL_DIR);
        std::fs::create_dir(&area).unwrap();
        std::fs::write(area.join(OWNER_FILE), "bob").unwrap();
        std::fs::write(area.join(ACL_FILE), "public-read").unwrap();
        std::fs::set_permissions(&area, std::fs::Permissions::from_mode(0o777)).unwrap();
        // An area others may write: nothing in it is believed.
        assert_eq!(read(&records, "b", bucket.as_fd()).unwrap(), BucketConfig::default());
        std::fs::remove_file(records.path().join(RECORDS_DIR).join("b.json")).unwrap();
        std::fs::set_permissions(&area, std::fs::Permissions::from_mode(0o755)).unwrap();
        let config = read(&records, "b", bucket.as_fd()).unwrap();
        assert_eq!(config.owner.as_deref(), Some("bob"));
        assert_eq!(config.acl.canned, isthmus_store::CannedAcl::PublicRead);
        // Taken over: what is in the bucket no longer counts.
        std::fs::write(area.join(OWNER_FILE), "mallory").unwrap();
        assert_eq!(read(&records, "b", bucket.as_fd()).unwrap().owner.as_deref(), Some("bob"));
    }
}
