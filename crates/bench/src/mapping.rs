//! The ways a file-system benchmark's files become S3 buckets and objects, the three the S3-for-
//! HPC study (Gadban & Kunkel 2021) ran IOR and mdtest with: one bucket for the run with keys
//! named by path (each rank's files under its rank's prefix), one bucket per dataset (per
//! directory), one bucket per file (IOR's libs3 `bucket-per-file`). A `MappedTarget` wraps an
//! object target and turns the workloads' paths into buckets and keys; POSIX is never mapped.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::target::{BenchError, BenchResult, Connection, Target};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum S3Mapping {
    /// One bucket for the run (`--bucket`), one object per file named by its path, so each
    /// rank's files sit under its rank's prefix (`mdtest-easy/rank3/file.5`, `ior-easy/file.3/`)
    /// and shared files under their dataset's; IOR transfers are objects `FILE/OFFSET`. What
    /// the bench always did, and IOR's libs3 default (one bucket for all dirs and files).
    #[default]
    PrefixPerRank,
    /// One bucket per dataset, a dataset being a directory of the benchmark (ior-easy,
    /// mdtest-easy/rank3, mdtest-hard, an MD-Workbench dataset): its files are objects in that
    /// bucket, named by their last path component. Buckets are made on first use.
    BucketPerDataset,
    /// One bucket per file, as IOR's libs3 `bucket-per-file`: creating a file creates its
    /// bucket (then its bytes go in object `0`; IOR transfers are objects named by offset),
    /// stat is HeadBucket, removing a file empties and deletes its bucket; an mdtest directory
    /// is a bucket too, and its rename creates the new bucket and deletes the old (buckets
    /// cannot be renamed or copied).
    BucketPerFile,
}

impl S3Mapping {
    pub fn name(self) -> &'static str {
        match self {
            Self::PrefixPerRank => "prefix-per-rank",
            Self::BucketPerDataset => "bucket-per-dataset",
            Self::BucketPerFile => "bucket-per-file",
        }
    }
}

/// A valid S3 bucket name for the path `path` under the run's bucket `run`: lowercase letters
/// and digits, every other character a hyphen (collapsed), at most 63 characters; a longer
/// name keeps its first 46 characters and ends with a hash of the whole path.
pub fn bucket_name(run: &str, path: &str) -> String {
    let mut name = String::with_capacity(run.len() + path.len() + 1);
    for c in format!("{run}-{path}").chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let mut name = name.trim_matches('-').to_string();
    if name.len() > 63 {
        // FNV-1a: a stable hash, so every rank and process names the bucket alike.
        let hash = path.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        name.truncate(46);
        name = format!("{}-{hash:016x}", name.trim_end_matches('-'));
    }
    while name.len() < 3 {
        name.push('0');
    }
    name
}

/// An object target seen through a mapping.
pub struct MappedTarget {
    pub inner: Box<dyn Target>,
    pub mapping: S3Mapping,
    /// The run's bucket, whose name prefixes the mapping's buckets.
    pub run_bucket: String,
    /// Buckets this process's connections made or used, removed by `cleanup`.
    used: Arc<Mutex<BTreeSet<String>>>,
}

impl MappedTarget {
    pub fn new(inner: Box<dyn Target>, mapping: S3Mapping, run_bucket: &str) -> Self {
        Self { inner, mapping, run_bucket: run_bucket.to_string(), used: Arc::default() }
    }
}

impl Target for MappedTarget {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn describe(&self) -> String {
        format!("{} ({})", self.inner.describe(), self.mapping.name())
    }
    fn prepare(&self) -> BenchResult<()> {
        self.inner.prepare()
    }
    fn connect(&self) -> BenchResult<Box<dyn Connection>> {
        Ok(Box::new(MappedConnection {
            inner: self.inner.connect()?,
            mapping: self.mapping,
            run_bucket: self.run_bucket.clone(),
            made: HashSet::new(),
            used: self.used.clone(),
        }))
    }
    /// Removes every bucket this process's connections used, then the run's bucket.
    fn cleanup(&self) -> BenchResult<()> {
        self.release()?;
        self.inner.cleanup()
    }
    /// Removes every bucket this process's connections used (each process removes those it
    /// used; a bucket another already removed is fine).
    fn release(&self) -> BenchResult<()> {
        let used: Vec<String> = std::mem::take(&mut *self.used.lock().expect("not poisoned")).into_iter().collect();
        if !used.is_empty() {
            let mut conn = self.inner.connect()?;
            for bucket in used {
                conn.remove_bucket(&bucket)?;
            }
        }
        Ok(())
    }
}

struct MappedConnection {
    inner: Box<dyn Connection>,
    mapping: S3Mapping,
    run_bucket: String,
    /// Buckets this connection made or found, so each is created once.
    made: HashSet<String>,
    used: Arc<Mutex<BTreeSet<String>>>,
}

/// The object of a file's bytes under bucket-per-file.
const FILE_OBJECT: &str = "0";

/// (directory, last component) of `path`.
fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

impl MappedConnection {
    /// Creates `bucket` unless this connection already did, and remembers it for cleanup.
    fn ensure(&mut self, bucket: &str) -> BenchResult<()> {
        if !self.made.contains(bucket) {
            self.inner.create_bucket(bucket)?;
            self.made.insert(bucket.to_string());
            self.used.lock().expect("not poisoned").insert(bucket.to_string());
        }
        Ok(())
    }

    /// The bucket of `path`'s own name.
    fn bucket_of(&self, path: &str) -> String {
        bucket_name(&self.run_bucket, path)
    }

    /// Under bucket-per-dataset, addresses `path`'s dataset bucket (made on first use) and
    /// returns the key in it; under prefix-per-rank, the run's bucket and the path itself.
    fn in_dataset<'p>(&mut self, path: &'p str) -> BenchResult<&'p str> {
        if self.mapping != S3Mapping::BucketPerDataset {
            self.inner.use_bucket(None)?;
            return Ok(path);
        }
        let (dir, name) = split(path);
        let bucket = self.bucket_of(dir);
        self.ensure(&bucket)?;
        self.inner.use_bucket(Some(&bucket))?;
        Ok(name)
    }

    /// Under bucket-per-file, addresses the bucket of file `path`.
    fn in_file(&mut self, path: &str) -> BenchResult<String> {
        let bucket = self.bucket_of(path);
        self.inner.use_bucket(Some(&bucket))?;
        Ok(bucket)
    }

    fn per_file(&self) -> bool {
        self.mapping == S3Mapping::BucketPerFile
    }
}

/// The object of the transfer at `offset` of a file that is a bucket.
fn offset_key(offset: u64) -> String {
    format!("{offset:016}")
}

impl Connection for MappedConnection {
    fn put(&mut self, key: &str, data: &[u8]) -> BenchResult<()> {
        if self.per_file() {
            let bucket = self.bucket_of(key);
            self.inner.create_bucket(&bucket)?;
            self.used.lock().expect("not poisoned").insert(bucket.clone());
            self.inner.use_bucket(Some(&bucket))?;
            return self.inner.put(FILE_OBJECT, data);
        }
        let key = self.in_dataset(key)?;
        self.inner.put(key, data)
    }

    fn get(&mut self, key: &str) -> BenchResult<u64> {
        if self.per_file() {
            self.in_file(key)?;
            return self.inner.get(FILE_OBJECT);
        }
        let key = self.in_dataset(key)?;
        self.inner.get(key)
    }

    fn head(&mut self, key: &str) -> BenchResult<()> {
        if self.per_file() {
            return self.inner.head_bucket(&self.bucket_of(key));
        }
        let key = self.in_dataset(key)?;
        self.inner.head(key)
    }

    fn delete(&mut self, key: &str) -> BenchResult<()> {
        if self.per_file() {
            let bucket = self.in_file(key)?;
            self.inner.delete(FILE_OBJECT)?;
            return self.inner.delete_bucket(&bucket);
        }
        let key = self.in_dataset(key)?;
        self.inner.delete(key)
    }

    fn list_page(&mut self, prefix: &str, after: Option<&str>, max: usize) -> BenchResult<(usize, Option<String>)> {
        // Only the single-operation workload lists, and it is not mapped.
        self.inner.use_bucket(None)?;
        self.inner.list_page(prefix, after, max)
    }

    fn write_at(&mut self, key: &str, offset: u64, data: &[u8]) -> BenchResult<()> {
        if self.per_file() {
            // IOR's open with create makes the file's bucket: once per connection and file.
            let bucket = self.bucket_of(key);
            self.ensure(&bucket)?;
            self.inner.use_bucket(Some(&bucket))?;
            return self.inner.put(&offset_key(offset), data);
        }
        let key = self.in_dataset(key)?;
        self.inner.write_at(key, offset, data)
    }

    fn read_at(&mut self, key: &str, offset: u64, len: usize) -> BenchResult<u64> {
        if self.per_file() {
            self.in_file(key)?;
            return self.inner.get(&offset_key(offset));
        }
        let key = self.in_dataset(key)?;
        self.inner.read_at(key, offset, len)
    }

    fn close_file(&mut self, key: &str) -> BenchResult<()> {
        if self.per_file() {
            return Ok(());
        }
        let key = self.in_dataset(key)?;
        self.inner.close_file(key)
    }

    fn remove_file(&mut self, key: &str, offsets: &[u64]) -> BenchResult<()> {
        if self.per_file() {
            let bucket = self.in_file(key)?;
            for &offset in offsets {
                self.inner.delete(&offset_key(offset))?;
            }
            return self.inner.delete_bucket(&bucket);
        }
        let key = self.in_dataset(key)?;
        self.inner.remove_file(key, offsets)
    }

    fn mkdir(&mut self, key: &str) -> BenchResult<()> {
        if self.per_file() {
            let bucket = self.bucket_of(key);
            self.used.lock().expect("not poisoned").insert(bucket.clone());
            return self.inner.create_bucket(&bucket);
        }
        let key = self.in_dataset(key)?;
        self.inner.mkdir(key)
    }

    fn stat_dir(&mut self, key: &str) -> BenchResult<()> {
        if self.per_file() {
            return self.inner.head_bucket(&self.bucket_of(key));
        }
        let key = self.in_dataset(key)?;
        self.inner.stat_dir(key)
    }

    fn rmdir(&mut self, key: &str) -> BenchResult<()> {
        if self.per_file() {
            return self.inner.delete_bucket(&self.bucket_of(key));
        }
        let key = self.in_dataset(key)?;
        self.inner.rmdir(key)
    }

    fn rename_dir(&mut self, from: &str, to: &str) -> BenchResult<()> {
        if self.per_file() {
            let (from, to) = (self.bucket_of(from), self.bucket_of(to));
            self.used.lock().expect("not poisoned").insert(to.clone());
            self.inner.create_bucket(&to)?;
            return self.inner.delete_bucket(&from);
        }
        let from = self.in_dataset(from)?;
        self.inner.rename_dir(from, split(to).1)
    }

    fn walk(&mut self, prefix: &str, seen: &mut dyn FnMut(&str, u64, SystemTime)) -> BenchResult<()> {
        match self.mapping {
            S3Mapping::PrefixPerRank => {
                self.inner.use_bucket(None)?;
                self.inner.walk(prefix, seen)
            }
            // The directory is a bucket: walk all of it.
            S3Mapping::BucketPerDataset => {
                self.inner.use_bucket(Some(&self.bucket_of(prefix)))?;
                self.inner.walk("", seen)
            }
            // Decision: its files are buckets, and finding them would list buckets, which the
            // bench's S3 client does not do; find reports this rather than a figure.
            S3Mapping::BucketPerFile => Err(BenchError::Setup(format!(
                "find under bucket-per-file would list buckets (ListBuckets) to walk {prefix}: not measured"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ior::{Ior, IorVariant};
    use crate::mdtest::{Mdtest, Variant};
    use crate::target_engine::EmbeddedTarget;
    use crate::workload::Op;

    #[test]
    fn bucket_names_are_valid_s3_names_and_distinct() {
        let paths = [
            "mdtest-easy/rank0/file.12",
            "mdtest-hard/file.1.2",
            "mdtest-hard/file.12",
            "ior-easy/file.3",
            "md-workbench/rank10/ds3",
            "",
            "mdtest-easy/rank0/dir.5.renamed",
        ];
        let long = "a/".repeat(100);
        let names: Vec<String> =
            paths.iter().chain([&long.as_str()]).map(|p| bucket_name("isthmus-bench", p)).collect();
        for name in &names {
            isthmus_store::key::validate_bucket_name(name).unwrap();
        }
        assert_eq!(names[0], "isthmus-bench-mdtest-easy-rank0-file-12");
        assert_eq!(names.iter().collect::<HashSet<_>>().len(), names.len());
        assert_eq!(bucket_name("B", &long).len(), bucket_name("B", &long).len().min(63));
    }

    fn engine(dir: &std::path::Path) -> Box<dyn Target> {
        let store = isthmus_posix::PosixStore::open(dir, isthmus_posix::StoreOptions::default()).unwrap();
        Box::new(EmbeddedTarget { store: Arc::new(store), root: dir.into(), bucket: "run".into() })
    }

    fn buckets(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn each_mapping_runs_ior_and_mdtest_and_leaves_nothing() {
        for mapping in [S3Mapping::PrefixPerRank, S3Mapping::BucketPerDataset, S3Mapping::BucketPerFile] {
            let dir = tempfile::tempdir().unwrap();
            let target = MappedTarget::new(engine(dir.path()), mapping, "run");
            target.prepare().unwrap();
            let ior = Ior { variant: IorVariant::Easy, ranks: 2, transfers: 3 }.run(&target).unwrap();
            assert!(ior.iter().all(|r| r.errors == 0 && r.ops == 6), "{mapping:?} {ior:?}");
            let md = Mdtest { directories: true, ..Mdtest::io500(Variant::Easy, 2, 5, None) };
            let mut seen_buckets = Vec::new();
            let mut alone = None::<crate::Team>;
            let (create, made) = md.create_files(&target, &mut alone).unwrap();
            assert_eq!((create.ops, create.errors), (10, 0), "{mapping:?}");
            seen_buckets.extend(buckets(dir.path()));
            let rest = md.after_create(&target, &mut alone, &made).unwrap();
            assert!(rest.iter().all(|r| r.errors == 0 && r.ops == 10), "{mapping:?} {rest:?}");
            let all = md.run(&target).unwrap();
            assert!(all.iter().all(|r| r.errors == 0 && r.ops == 10), "{mapping:?} {all:?}");
            assert_eq!(all[2].op, Op::Rename);
            // Where the files went: one bucket, a bucket per rank directory, a bucket per file.
            let expected = match mapping {
                S3Mapping::PrefixPerRank => vec!["run".to_string()],
                S3Mapping::BucketPerDataset => {
                    vec![
                        "run".into(),
                        "run-ior-easy".into(),
                        "run-mdtest-easy-rank0".into(),
                        "run-mdtest-easy-rank1".into(),
                    ]
                }
                // IOR removed its files, so their buckets are gone already.
                S3Mapping::BucketPerFile => {
                    let mut v: Vec<String> = vec!["run".into()];
                    v.extend((0..2).flat_map(|r| (0..5).map(move |i| format!("run-mdtest-easy-rank{r}-file-{i}"))));
                    v.sort();
                    v
                }
            };
            assert_eq!(seen_buckets, expected, "{mapping:?}");
            target.cleanup().unwrap();
            assert_eq!(buckets(dir.path()), Vec::<String>::new(), "{mapping:?}");
        }
    }

    #[test]
    fn find_walks_dataset_buckets_and_says_it_cannot_under_bucket_per_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = MappedTarget::new(engine(dir.path()), S3Mapping::BucketPerDataset, "run");
        target.prepare().unwrap();
        let mut alone = None::<crate::Team>;
        let hard = Mdtest::io500(Variant::Hard, 2, 120, None);
        hard.create_files(&target, &mut alone).unwrap();
        let filter = crate::find::FindFilter::io500(SystemTime::UNIX_EPOCH);
        let found = crate::find::run_find(&target, &mut alone, 2, &filter).unwrap();
        // The two (empty) mdtest-easy rank buckets are missing: those walks fail; the hard
        // bucket holds the 240 files, two of them named *01*.
        assert_eq!((found.ops, found.keys), (240, 2));
        let per_file = MappedTarget::new(engine(dir.path()), S3Mapping::BucketPerFile, "run");
        let found = crate::find::run_find(&per_file, &mut alone, 1, &filter).unwrap();
        assert!(found.errors > 0 && found.first_error.unwrap().contains("ListBuckets"));
        target.cleanup().unwrap();
    }
}
