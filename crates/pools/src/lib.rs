//! Pools: several backends behind one namespace. The data root is always the pool named
//! `default`; more are declared in `ROOT/.isthmus/pools.toml`, so every door that opens the
//! root (the gateway, the C library, the Python package, the CLI and benchmarks) sees the same
//! namespace with no setting of its own, and gateways sharing a root agree by construction.
//!
//! ```toml
//! default = "default"        # where a bucket goes without a LocationConstraint
//! [[pool]]
//! name = "archive"
//! kind = "posix"             # one directory on any file system, file/object duality as today
//! path = "/mnt/hdd/isthmus"
//! ```
//!
//! A relative path (a posix pool's `path`, an erasure pool's `drives`) is relative to the data
//! root, so gateways that mount one shared file system at different places (two CephFS clients)
//! find the same directories through their own mount.
//!
//! `Pools` routes each bucket to the pool that holds it (found by asking each pool, then
//! remembered); CreateBucket places a bucket by its LocationConstraint (a pool name); a bucket
//! name is unique across pools; ListBuckets spans them all; a copy between pools streams.
//! `routing` has the `Store` implementation; `migration` moves a bucket between pools online.

mod migration;
mod routing;

pub use migration::{MIGRATIONS_DIR, MigrationProgress, MigrationRecord, MigrationReport, Phase};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use isthmus_store::byte_size::ByteSize;
use isthmus_store::state_dir::{STATE_FILE_LIMIT, StateDir, StateTrust};

use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::{RequestContext, Store};
use migration::{Migrations, Phase as MigrationPhase};

/// The pool the data root itself is.
pub const DEFAULT_POOL: &str = "default";
/// How long a bucket's pool, once found, is used without asking the pool again (a lookup per
/// call cost a fifth of a small GET). A bucket that POSIX tools or another gateway move to
/// another pool is found there after this; one deleted meanwhile answers NoSuchBucket from
/// its old pool, as it should.
const PLACEMENT_TTL: Duration = Duration::from_secs(2);
/// Where the pool table lives, relative to the data root.
pub const POOLS_FILE: &str = ".isthmus/pools.toml";
/// Its name in the state directory.
const POOLS_FILE_NAME: &str = "pools.toml";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolsFile {
    default: Option<String>,
    #[serde(default)]
    pool: Vec<PoolEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolEntry {
    name: String,
    kind: String,
    /// A posix pool's directory.
    path: Option<PathBuf>,
    /// An erasure pool's drive directories, and its layout.
    drives: Option<Vec<PathBuf>>,
    data: Option<usize>,
    parity: Option<usize>,
    block_size: Option<ByteSize>,
    inline_limit: Option<ByteSize>,
    hedged_reads: Option<bool>,
    /// An erasure pool's ETags: "md5" (default) or "unique".
    etag: Option<String>,
    /// The pace of an erasure pool's background rebuild of a replaced drive, in MiB of objects
    /// a second (default `isthmus_erasure::DEFAULT_HEAL_RATE_MIB`; 0: no background rebuild).
    heal_rate_mib: Option<u64>,
}

impl PoolEntry {
    /// The erasure layout this entry declares (relative drive paths are relative to `root`).
    fn erasure_config(&self, root: &Path) -> Result<isthmus_erasure::ErasureConfig, String> {
        let drives = self.drives.as_ref().ok_or("an erasure pool lists its drives: drives = [\"/mnt/d0\", ...]")?;
        let drives = drives.iter().map(|d| root.join(d)).collect();
        let (Some(data), Some(parity)) = (self.data, self.parity) else {
            return Err("an erasure pool names its layout: data = 4, parity = 2".into());
        };
        if self.path.is_some() {
            return Err("an erasure pool has drives, not a path".into());
        }
        let mut config = isthmus_erasure::ErasureConfig::new(drives, data, parity);
        if let Some(size) = &self.block_size {
            config.block_size = size.bytes()?;
        }
        if let Some(size) = &self.inline_limit {
            config.inline_limit = size.bytes()?;
        }
        if let Some(hedged) = self.hedged_reads {
            config.hedged_reads = hedged;
        }
        if let Some(etag) = &self.etag {
            config.etag = isthmus_erasure::EtagPolicy::parse(etag)?;
        }
        if let Some(rate) = self.heal_rate_mib {
            if rate > MAX_HEAL_RATE_MIB {
                return Err(format!(
                    "heal_rate_mib = {rate}: at most {MAX_HEAL_RATE_MIB} (MiB a second; 0 turns the background rebuild off)"
                ));
            }
            config.heal_rate_mib = rate;
        }
        Ok(config)
    }

    /// The directory of a posix pool (a relative path is relative to `root`).
    fn posix_path(&self, root: &Path) -> Result<PathBuf, String> {
        if self.drives.is_some()
            || self.data.is_some()
            || self.parity.is_some()
            || self.block_size.is_some()
            || self.etag.is_some()
            || self.heal_rate_mib.is_some()
        {
            return Err("drives, data, parity, block_size, etag and heal_rate_mib belong to erasure pools".into());
        }
        self.path.as_ref().map(|p| root.join(p)).ok_or_else(|| "a posix pool has a path".into())
    }
}

/// One declared pool: its name, where it is, and its store.
pub struct Pool {
    pub name: String,
    pub kind: String,
    pub path: PathBuf,
    pub store: Arc<dyn Store>,
}

/// The engine over a data root: the root's `PosixStore` alone when no pools are declared,
/// otherwise `Pools` over the root and every declared pool.
pub fn open_root(root: &Path, options: StoreOptions) -> StoreResult<Arc<dyn Store>> {
    Ok(open_root_with_pools(root, options)?.engine)
}

/// Every posix pool's store by name, the data root's first.
pub type PosixPools = Vec<(String, Arc<PosixStore>)>;

/// Every erasure-coded pool's store by name.
pub type ErasurePools = Vec<(String, Arc<isthmus_erasure::ErasureStore>)>;

/// A data root opened for serving: the engine, and each pool's own store for what a gateway
/// does to pools directly (cleaning what crashed writers left, reporting drives).
pub struct RootStores {
    pub engine: Arc<dyn Store>,
    pub posix: PosixPools,
    pub erasure: ErasurePools,
}

/// `open_root`, with every pool's store.
pub fn open_root_with_pools(root: &Path, options: StoreOptions) -> StoreResult<RootStores> {
    let Some(table) = read_table(root, options.state_trust)? else {
        let store = Arc::new(PosixStore::open(root, options)?);
        let posix = vec![(DEFAULT_POOL.to_string(), store.clone())];
        return Ok(RootStores { engine: store, posix, erasure: Vec::new() });
    };
    let (pools, posix, erasure) = build_pools(root, table, options)?;
    Ok(RootStores { engine: Arc::new(pools), posix, erasure })
}

/// The pools of a data root that declares some (for the admin commands: migrate).
pub fn open_pools(root: &Path, options: StoreOptions) -> StoreResult<Pools> {
    let table = read_table(root, options.state_trust)?.ok_or_else(|| {
        StoreError::InvalidArgument(format!(
            "{} declares no pools: add [[pool]] entries to {}",
            root.display(),
            root.join(POOLS_FILE).display()
        ))
    })?;
    Ok(build_pools(root, table, options)?.0)
}

/// The root's pool table, if it has one.
/// Read through the state directory, checked (`state_dir`): a table a user could have written
/// or planted would let them send buckets to a directory of their choosing.
fn read_table(root: &Path, trust: StateTrust) -> StoreResult<Option<PoolsFile>> {
    let file = root.join(POOLS_FILE);
    std::fs::create_dir_all(root).map_err(|e| StoreError::io("create the data root", root, e))?;
    let state = StateDir::open_path(root, trust)?;
    let Some(bytes) = state.read(POOLS_FILE_NAME, STATE_FILE_LIMIT)? else { return Ok(None) };
    let text =
        String::from_utf8(bytes).map_err(|_| StoreError::InvalidArgument(format!("{}: not UTF-8", file.display())))?;
    toml::from_str(&text)
        .map(Some)
        .map_err(|e| StoreError::InvalidArgument(format!("{}: {}", file.display(), e.message())))
}

fn build_pools(root: &Path, table: PoolsFile, options: StoreOptions) -> StoreResult<(Pools, PosixPools, ErasurePools)> {
    let file = root.join(POOLS_FILE);
    let store = Arc::new(PosixStore::open(root, options)?);
    let mut posix = vec![(DEFAULT_POOL.to_string(), store.clone())];
    let mut erasure: ErasurePools = Vec::new();
    let mut pools =
        vec![Pool { name: DEFAULT_POOL.to_string(), kind: "posix".into(), path: root.to_path_buf(), store }];
    for entry in table.pool {
        let bad =
            |why: String| StoreError::InvalidArgument(format!("{}: pool {:?}: {why}", file.display(), entry.name));
        if entry.name.is_empty() || !entry.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(bad("a pool name is letters, digits, '-' and '_'".into()));
        }
        if pools.iter().any(|p| p.name == entry.name) {
            return Err(bad("declared twice (or named like the data root's pool, default)".into()));
        }
        let (store, path): (Arc<dyn Store>, PathBuf) = match entry.kind.as_str() {
            "posix" => {
                let path = entry.posix_path(root).map_err(bad)?;
                let store = Arc::new(PosixStore::open(&path, options)?);
                posix.push((entry.name.clone(), store.clone()));
                (store, path)
            }
            "erasure" => {
                let config = entry.erasure_config(root).map_err(bad)?;
                let first = config.drives.first().cloned().unwrap_or_default();
                let store = isthmus_erasure::ErasureStore::open(&entry.name, config, options)
                    .map_err(|e| bad(e.to_string()))?;
                // Its calls and streams run with the gateway's identity, as every
                // `ErasureStore`'s do (its files are the gateway's).
                let store = Arc::new(store);
                erasure.push((entry.name.clone(), store.clone()));
                (store, first)
            }
            other => return Err(bad(format!("unknown kind {other:?}: posix or erasure"))),
        };
        pools.push(Pool { name: entry.name, kind: entry.kind, path, store });
    }
    let default = table.default.unwrap_or_else(|| DEFAULT_POOL.to_string());
    // Migration records decide where a bucket's requests go: read through the state
    // directory's descriptor, never a path a user could have swapped.
    let mut routed = Pools::new(pools, &default)?;
    routed.migrations = Migrations::new(Some(posix[0].1.state_dir().path_through_fd().join("migrations")));
    Ok((routed, posix, erasure))
}

/// The erasure-coded pool `name` declared in the root's pool table, opened on its own (for the
/// admin commands: heal, status).
pub fn open_erasure_pool(root: &Path, name: &str, options: StoreOptions) -> StoreResult<isthmus_erasure::ErasureStore> {
    let file = root.join(POOLS_FILE);
    let table = read_table(root, options.state_trust)?
        .ok_or_else(|| StoreError::InvalidArgument(format!("{} does not exist", file.display())))?;
    let names: Vec<String> = table.pool.iter().filter(|p| p.kind == "erasure").map(|p| p.name.clone()).collect();
    let entry = table.pool.into_iter().find(|p| p.name == name && p.kind == "erasure").ok_or_else(|| {
        StoreError::InvalidArgument(format!(
            "{name:?} is not an erasure pool of {} (erasure pools: {})",
            file.display(),
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        ))
    })?;
    let mut config =
        entry.erasure_config(root).map_err(|why| StoreError::InvalidArgument(format!("pool {name:?}: {why}")))?;
    // A one-shot command beside the gateway: the gateway rebuilds replaced drives.
    config.background_heal = false;
    isthmus_erasure::ErasureStore::open(name, config, options)
}

/// The fastest background rebuild a pool table may ask for (MiB a second): far beyond any
/// drive, it only keeps the rate's arithmetic sane.
const MAX_HEAL_RATE_MIB: u64 = 1 << 20;

/// Several pools as one `Store`.
pub struct Pools {
    pools: Vec<Pool>,
    default: usize,
    /// Which pool holds a bucket, as last found, and when.
    placed: quick_cache::sync::Cache<String, (usize, Instant)>,
    /// Buckets being moved between pools.
    migrations: Migrations,
}

/// Where a bucket's requests go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    One(usize),
    /// Being migrated: writes to `to`; reads in `to`, then in `from`.
    Moving {
        from: usize,
        to: usize,
    },
}

impl Pools {
    pub fn new(pools: Vec<Pool>, default: &str) -> StoreResult<Self> {
        let Some(default) = pools.iter().position(|p| p.name == default) else {
            let names: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
            return Err(StoreError::InvalidArgument(format!(
                "the default pool {default:?} is not declared (pools: {})",
                names.join(", ")
            )));
        };
        // Migration records live in the data root's internal area (the posix pool `default`).
        let root = pools.iter().find(|p| p.name == DEFAULT_POOL && p.kind == "posix").map(|p| p.path.clone());
        let migrations = Migrations::new(root.map(|root| root.join(MIGRATIONS_DIR)));
        Ok(Self { pools, default, placed: quick_cache::sync::Cache::new(4096), migrations })
    }

    pub fn pools(&self) -> &[Pool] {
        &self.pools
    }

    /// Where `bucket`'s requests go: as its migration record says while it is moved, else to
    /// the pool holding it.
    fn route(&self, cx: &RequestContext, bucket: &str) -> StoreResult<Route> {
        if let Some(record) = self.migrations.get(bucket) {
            let index = |name: &str| self.pools.iter().position(|p| p.name == name);
            match (record.phase, index(&record.from), index(&record.to)) {
                (MigrationPhase::Copying, Some(from), Some(to)) => {
                    // Remembered, so the bucket is found in the target as soon as the move ends.
                    self.placed.insert(bucket.to_string(), (to, Instant::now()));
                    return Ok(Route::Moving { from, to });
                }
                (MigrationPhase::Preparing, Some(from), _) => return Ok(Route::One(from)),
                _ => tracing::warn!(bucket, "migration record names an undeclared pool: ignored"),
            }
        }
        Ok(Route::One(self.find_holder(cx, bucket)?))
    }

    /// The pool a bucket-wide request goes to (the target of a migration).
    fn find(&self, cx: &RequestContext, bucket: &str) -> StoreResult<usize> {
        Ok(match self.route(cx, bucket)? {
            Route::One(index) | Route::Moving { to: index, .. } => index,
        })
    }

    /// The index of the pool holding `bucket`: the remembered one (taken as it is for
    /// `PLACEMENT_TTL`, then asked again), else the first that has it (the default pool first).
    fn find_holder(&self, cx: &RequestContext, bucket: &str) -> StoreResult<usize> {
        let holds = |index: usize| match self.pools[index].store.head_bucket(cx, bucket) {
            Ok(()) | Err(StoreError::AccessDenied | StoreError::Denied(_)) => Ok(true),
            Err(StoreError::NoSuchBucket | StoreError::InvalidBucketName(_)) => Ok(false),
            Err(err) => Err(err),
        };
        if let Some((index, found)) = self.placed.get(bucket) {
            if found.elapsed() < PLACEMENT_TTL {
                return Ok(index);
            }
            if holds(index)? {
                self.placed.insert(bucket.to_string(), (index, Instant::now()));
                return Ok(index);
            }
        }
        let order = std::iter::once(self.default).chain((0..self.pools.len()).filter(|&i| i != self.default));
        for index in order {
            if holds(index)? {
                self.placed.insert(bucket.to_string(), (index, Instant::now()));
                return Ok(index);
            }
        }
        Err(StoreError::NoSuchBucket)
    }

    fn pool(&self, cx: &RequestContext, bucket: &str) -> StoreResult<&Arc<dyn Store>> {
        Ok(&self.pools[self.find(cx, bucket)?].store)
    }

    /// The pool a CreateBucket's LocationConstraint names: none (or an AWS region, which
    /// SDKs send by default) is the default pool.
    fn placement(&self, location: Option<&str>) -> StoreResult<usize> {
        let Some(name) = location.filter(|l| !l.is_empty()) else { return Ok(self.default) };
        if let Some(index) = self.pools.iter().position(|p| p.name == name) {
            return Ok(index);
        }
        if looks_like_region(name) {
            return Ok(self.default);
        }
        let names: Vec<&str> = self.pools.iter().map(|p| p.name.as_str()).collect();
        Err(StoreError::InvalidLocationConstraint(format!(
            "{name:?} is not a pool of this gateway (pools: {})",
            names.join(", ")
        )))
    }
}

/// `us-east-1`, `eu-west-3`: what SDKs send as LocationConstraint from their region setting.
fn looks_like_region(name: &str) -> bool {
    let parts: Vec<&str> = name.split('-').collect();
    parts.len() >= 3
        && parts[..parts.len() - 1].iter().all(|p| p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts[parts.len() - 1].bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_the_default_pool_and_unknown_names_are_refused() {
        assert!(looks_like_region("us-east-1") && looks_like_region("eu-central-2"));
        assert!(!looks_like_region("archive") && !looks_like_region("fast-ssd"));
        let dir = tempfile::tempdir().unwrap();
        let pool = |name: &str| Pool {
            name: name.into(),
            kind: "posix".into(),
            path: dir.path().join(name),
            store: Arc::new(PosixStore::open(dir.path().join(name), StoreOptions::default()).unwrap()),
        };
        let pools = Pools::new(vec![pool("default"), pool("archive")], "default").unwrap();
        assert_eq!(pools.placement(None).unwrap(), 0);
        assert_eq!(pools.placement(Some("us-west-2")).unwrap(), 0);
        assert_eq!(pools.placement(Some("archive")).unwrap(), 1);
        let err = pools.placement(Some("tape")).unwrap_err();
        assert_eq!(err.s3_code(), "InvalidLocationConstraint");
        assert!(err.to_string().contains("archive"));
        assert!(Pools::new(vec![pool("default")], "nvme").is_err());
    }

    /// Opens a root whose table declares one pool "ec" of `kind` with `extra` keys.
    fn one_pool_table(dir: &Path, extra: &str, kind: &str) -> StoreResult<RootStores> {
        let place =
            if kind == "erasure" { "drives = [\"d0\", \"d1\", \"d2\"]\ndata = 2\nparity = 1" } else { "path = \"p\"" };
        std::fs::create_dir_all(dir.join(".isthmus")).unwrap();
        std::fs::write(dir.join(POOLS_FILE), format!("[[pool]]\nname = \"ec\"\nkind = \"{kind}\"\n{place}\n{extra}\n"))
            .unwrap();
        open_root_with_pools(dir, StoreOptions::default())
    }

    #[test]
    fn an_erasure_pool_heal_rate_is_read_and_a_wrong_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let stores = one_pool_table(dir.path(), "", "erasure").unwrap();
        assert_eq!(stores.erasure[0].1.config().heal_rate_mib, isthmus_erasure::DEFAULT_HEAL_RATE_MIB);
        assert!(stores.erasure[0].1.config().background_heal, "a gateway rebuilds replaced drives");
        let stores = one_pool_table(dir.path(), "heal_rate_mib = 0", "erasure").unwrap();
        assert_eq!(stores.erasure[0].1.config().heal_rate_mib, 0);
        let one_shot = open_erasure_pool(dir.path(), "ec", StoreOptions::default()).unwrap();
        assert!(!one_shot.config().background_heal, "admin commands leave the rebuild to the gateway");
        for wrong in ["heal_rate_mib = -1", "heal_rate_mib = \"fast\"", "heal_rate_mib = 99999999999"] {
            assert!(one_pool_table(dir.path(), wrong, "erasure").is_err(), "{wrong}");
        }
        let err = one_pool_table(dir.path(), "heal_rate_mib = 10", "posix").err().unwrap().to_string();
        assert!(err.contains("belong to erasure pools"), "{err}");
    }

    #[test]
    fn an_erasure_pool_etag_policy_is_read_and_a_wrong_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let table = |extra: &str, kind: &str| one_pool_table(dir.path(), extra, kind);
        let stores = table("etag = \"unique\"", "erasure").unwrap();
        assert_eq!(stores.erasure[0].1.config().etag, isthmus_erasure::EtagPolicy::Unique);
        let err = table("etag = \"sha1\"", "erasure").err().unwrap().to_string();
        assert!(err.contains("etag = \"md5\"") && err.contains("\"sha1\""), "{err}");
        let err = table("etag = \"unique\"", "posix").err().unwrap().to_string();
        assert!(err.contains("belong to erasure pools"), "{err}");
    }
}
