//! Readers of file systems that keep a change log, the cheapest way to see other nodes'
//! writes where one exists: a `ChangeLog` yields numbered changes and is told which ones are
//! processed. `LustreChangelog` reads a Lustre MDT's changelog through the `lfs` tool.
//!
//! UNTESTED AGAINST A REAL LUSTRE: no Lustre is available where this was written. The parser
//! is tested on record lines in the format `lfs changelog` prints (samples from the Lustre
//! manual and the lustre-discuss list, Lustre 2.x: `INDEX NNTYPE TIME DATE FLAGS t=[FID]
//! [j=JOBID] [ef=MASK] [u=UID:GID] [nid=NID] [m=MODE] p=[FID] NAME`, renames adding
//! ` s=[FID] sp=[FID] OLDNAME`); the commands are run as the manual documents them.

use std::collections::HashMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Change, is_bucket_name, segment};

/// A source of numbered changes that must be acknowledged (`clear`) once processed.
pub trait ChangeLog {
    /// Up to `max` changes after the last one returned, each with its record index (a record
    /// may give two changes, a rename's `Removed` and `Written`; records that name no key of a
    /// bucket give none). An empty batch means nothing new for now.
    fn next_batch(&mut self, max: usize) -> io::Result<Vec<(u64, Change)>>;
    /// Tells the log that records up to `upto` (inclusive) are processed and may be freed.
    fn clear(&mut self, upto: u64) -> io::Result<()>;
}

/// What a changelog record says happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordKind {
    Create,
    Close,
    Mtime,
    Unlink,
    /// A rename: the target name is `parent`/`name`, the old one `source_parent`/`source_name`
    /// (Lustre 2.4+; older versions split it into `Rename` with the old name and `RenameTo`).
    Rename,
    RenameTo,
    /// Any other type (MKDIR, RMDIR, SATTR, XATTR, OPEN, ...): no key changes.
    Other(String),
}

/// One parsed line of `lfs changelog`. FIDs are kept as printed (`[0x200000402:0x1:0x0]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub index: u64,
    pub kind: RecordKind,
    pub target: String,
    pub parent: Option<String>,
    pub name: Option<String>,
    pub source: Option<String>,
    pub source_parent: Option<String>,
    pub source_name: Option<String>,
}

/// Parses one record line; `None` for a line that is not one.
pub fn parse_record(line: &str) -> Option<Record> {
    let line = line.trim_end_matches(['\n', '\r']);
    let mut rest = line;
    let mut word = || -> Option<&str> {
        let (head, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        rest = tail;
        (!head.is_empty()).then_some(head)
    };
    let index = word()?.parse().ok()?;
    let type_field = word()?;
    let (_time, _date, _flags) = (word()?, word()?, word()?);
    let kind_name = type_field.get(2..).filter(|_| type_field.as_bytes()[..2].iter().all(u8::is_ascii_digit))?;
    let kind = match kind_name {
        "CREAT" => RecordKind::Create,
        "CLOSE" => RecordKind::Close,
        "MTIME" => RecordKind::Mtime,
        "UNLNK" => RecordKind::Unlink,
        "RENME" => RecordKind::Rename,
        "RNMTO" => RecordKind::RenameTo,
        other => RecordKind::Other(other.to_string()),
    };
    let mut record = Record {
        index,
        kind,
        target: String::new(),
        parent: None,
        name: None,
        source: None,
        source_parent: None,
        source_name: None,
    };
    // `key=value` fields up to `p=[FID]`; the name (which may hold spaces) follows it.
    while !rest.is_empty() {
        let (field, tail) = rest.split_once(' ').unwrap_or((rest, ""));
        let Some((key, value)) = field.split_once('=') else { break };
        rest = tail;
        match key {
            "t" => record.target = fid(value)?,
            "p" => {
                record.parent = Some(fid(value)?);
                break;
            }
            _ => {}
        }
    }
    if record.target.is_empty() {
        return None;
    }
    if !rest.is_empty() {
        match split_rename(rest) {
            Some((name, s, sp, old)) => {
                record.name = Some(name.to_string());
                record.source = Some(s);
                record.source_parent = Some(sp);
                record.source_name = Some(old.to_string());
            }
            None => record.name = Some(rest.to_string()),
        }
    }
    Some(record)
}

fn fid(value: &str) -> Option<String> {
    (value.starts_with('[') && value.ends_with(']') && value.len() > 2).then(|| value.to_string())
}

/// `NAME s=[FID] sp=[FID] OLDNAME` split, at the first place the pattern holds whole.
fn split_rename(text: &str) -> Option<(&str, String, String, &str)> {
    let mut from = 0;
    while let Some(at) = text[from..].find(" s=[").map(|i| i + from) {
        let after = &text[at + 3..];
        if let Some((s, tail)) = after.split_once(' ')
            && let Some(tail) = tail.strip_prefix("sp=")
            && let Some((sp, old)) = tail.split_once(' ')
            && let (Some(s), Some(sp)) = (fid(s), fid(sp))
        {
            return Some((&text[..at], s, sp, old));
        }
        from = at + 1;
    }
    None
}

/// Reads a Lustre MDT's changelog with `lfs changelog MDT START END`, maps FIDs to paths with
/// `lfs fid2path MOUNT FID` (one run per FID a batch needs, cached within the batch, each
/// with a timeout) and clears with `lfs changelog_clear MDT USER INDEX`. Paths outside the
/// data root, internal names and non-buckets give no change. Untested on a real Lustre.
pub struct LustreChangelog {
    mdt: String,
    user: String,
    mount: PathBuf,
    root: PathBuf,
    next: u64,
    timeout: Duration,
}

/// The most output read from one `lfs` run (a batch of records, or one path).
const OUTPUT_LIMIT: u64 = 64 << 20;

impl LustreChangelog {
    /// `mdt` as `lfs changelog` names it (`testfs-MDT0000`), `user` the changelog user
    /// registered with `lctl changelog_register` (`cl1`), `mount` the Lustre mount point and
    /// `root` the data root beneath it; reading starts after record `start`.
    pub fn new(mdt: &str, user: &str, mount: &Path, root: &Path, start: u64) -> Self {
        Self {
            mdt: mdt.into(),
            user: user.into(),
            mount: mount.into(),
            root: root.into(),
            next: start + 1,
            timeout: Duration::from_secs(30),
        }
    }

    /// The last record read so far (also those that gave no change): what to `clear` up to.
    pub fn last_read(&self) -> u64 {
        self.next.saturating_sub(1)
    }

    fn path_of(&self, fid: &str, cache: &mut HashMap<String, Option<PathBuf>>) -> Option<PathBuf> {
        if let Some(known) = cache.get(fid) {
            return known.clone();
        }
        let mount = self.mount.to_string_lossy();
        let found = run("lfs", &["fid2path", &mount, fid], self.timeout)
            .ok()
            .and_then(|out| out.lines().next().map(|l| PathBuf::from(l.trim_end())));
        cache.insert(fid.to_string(), found.clone());
        found
    }

    fn change(&self, path: Option<PathBuf>, name: Option<&str>, written: bool) -> Option<Change> {
        let mut path = path?;
        if let Some(name) = name {
            path.push(name);
        }
        let (bucket, key) = bucket_and_key(&self.root, &path)?;
        Some(if written { Change::Written { bucket, key } } else { Change::Removed { bucket, key } })
    }
}

/// The bucket and key of `path` beneath the data root `root`, if it names one.
pub fn bucket_and_key(root: &Path, path: &Path) -> Option<(String, String)> {
    let mut parts = path.strip_prefix(root).ok()?.iter();
    let bucket = parts.next().and_then(segment).filter(|b| is_bucket_name(b))?.to_string();
    let segments: Option<Vec<&str>> = parts.map(segment).collect();
    let segments = segments.filter(|s| !s.is_empty())?;
    let key = segments.join("/");
    (key.len() <= isthmus_store::key::MAX_KEY_LEN).then_some((bucket, key))
}

impl ChangeLog for LustreChangelog {
    fn next_batch(&mut self, max: usize) -> io::Result<Vec<(u64, Change)>> {
        let end = self.next.saturating_add(max.max(1) as u64 - 1);
        let output = run("lfs", &["changelog", &self.mdt, &self.next.to_string(), &end.to_string()], self.timeout)?;
        let mut cache = HashMap::new();
        let mut changes = Vec::new();
        for record in output.lines().filter_map(parse_record) {
            self.next = self.next.max(record.index + 1);
            let parent = |s: &Self, c: &mut HashMap<_, _>| record.parent.as_deref().and_then(|p| s.path_of(p, c));
            let found: Vec<Option<Change>> = match record.kind {
                RecordKind::Create | RecordKind::Close | RecordKind::Mtime => {
                    vec![self.change(self.path_of(&record.target, &mut cache), None, true)]
                }
                RecordKind::Unlink => vec![self.change(parent(self, &mut cache), record.name.as_deref(), false)],
                RecordKind::Rename if record.source.is_some() => {
                    let old_parent = record.source_parent.as_deref().and_then(|p| self.path_of(p, &mut cache));
                    vec![
                        self.change(old_parent, record.source_name.as_deref(), false),
                        self.change(parent(self, &mut cache), record.name.as_deref(), true),
                    ]
                }
                RecordKind::Rename => vec![self.change(parent(self, &mut cache), record.name.as_deref(), false)],
                RecordKind::RenameTo => vec![self.change(parent(self, &mut cache), record.name.as_deref(), true)],
                RecordKind::Other(_) => Vec::new(),
            };
            changes.extend(found.into_iter().flatten().map(|c| (record.index, c)));
        }
        Ok(changes)
    }

    fn clear(&mut self, upto: u64) -> io::Result<()> {
        run("lfs", &["changelog_clear", &self.mdt, &self.user, &upto.to_string()], self.timeout).map(drop)
    }
}

/// Runs `program` with `args`, returning its standard output (at most `OUTPUT_LIMIT` bytes);
/// killed after `timeout`.
fn run(program: &str, args: &[&str], timeout: Duration) -> io::Result<String> {
    let mut child =
        Command::new(program).args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = (&mut stdout).take(OUTPUT_LIMIT).read_to_end(&mut bytes);
        bytes
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::new(io::ErrorKind::TimedOut, format!("{program} {} timed out", args.join(" "))));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let bytes = reader.join().unwrap_or_default();
    if !status.success() {
        return Err(io::Error::other(format!("{program} {} failed: {status}", args.join(" "))));
    }
    String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "lfs printed text that is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as `lfs changelog` prints them (lustre-discuss, Aug 2024; the Lustre manual).
    const CREAT: &str = "1 01CREAT 04:24:09.779203918 2024.08.20 0x0 t=[0x2000013a1:0x1:0x0] j=cp.0 ef=0xf u=0:0 nid=0@lo p=[0x200000007:0x1:0x0] testfile";
    const SPACES: &str = "3 01CREAT 04:27:54.551053189 2024.08.20 0x0 t=[0x2000013a1:0x4:0x0] j=cp.0 ef=0xf u=0:0 nid=0@lo p=[0x2000013a1:0x3:0x0] file with spaces";
    const OLD_STYLE: &str =
        "2 01CREAT 19:10:36.180416016 2008.07.21 0x0 t=[0x200000420:0x4:0x0] p=[0x200000420:0x3:0x0] chloe.jpg";
    const UNLNK: &str =
        "3 06UNLNK 19:10:40.578004108 2008.07.21 0x1 t=[0x200000420:0x4:0x0] p=[0x200000420:0x3:0x0] chloe.jpg";
    const RENME: &str = "231770 08RENME 13:31:35.825896252 2021.04.18 0x0 t=[0:0x0:0x0] ef=0xf u=160:160 nid=10.0.0.1@tcp p=[0x200000403:0x1a00a:0x0] new name s=[0x200000403:0x1a00d:0x0] sp=[0x200000403:0x1a00a:0x0] old name";
    const CLOSE: &str =
        "4 11CLOSE 02:52:19.798 2026.03.16 0x242 t=[0x200000401:0x3:0x0] ef=0xf u=1000:1000 nid=172.31.39.56@tcp";
    const MKDIR: &str =
        "1 02MKDIR 19:10:21.509659173 2008.07.21 0x0 t=[0x200000420:0x3:0x0] p=[0x61b4:0xca2c7dde:0x0] pics";

    #[test]
    fn creates_unlinks_and_closes_parse() {
        let r = parse_record(CREAT).unwrap();
        assert_eq!((r.index, &r.kind, r.target.as_str()), (1, &RecordKind::Create, "[0x2000013a1:0x1:0x0]"));
        assert_eq!((r.parent.as_deref(), r.name.as_deref()), (Some("[0x200000007:0x1:0x0]"), Some("testfile")));
        assert_eq!(parse_record(SPACES).unwrap().name.as_deref(), Some("file with spaces"));
        assert_eq!(parse_record(OLD_STYLE).unwrap().name.as_deref(), Some("chloe.jpg"));
        let u = parse_record(UNLNK).unwrap();
        assert_eq!((u.index, u.kind), (3, RecordKind::Unlink));
        let c = parse_record(CLOSE).unwrap();
        assert_eq!(
            (c.kind, c.target.as_str(), c.parent, c.name),
            (RecordKind::Close, "[0x200000401:0x3:0x0]", None, None)
        );
        assert_eq!(parse_record(MKDIR).unwrap().kind, RecordKind::Other("MKDIR".into()));
    }

    #[test]
    fn renames_give_both_names() {
        let r = parse_record(RENME).unwrap();
        assert_eq!(r.kind, RecordKind::Rename);
        assert_eq!(r.name.as_deref(), Some("new name"));
        assert_eq!(r.source.as_deref(), Some("[0x200000403:0x1a00d:0x0]"));
        assert_eq!(r.source_parent.as_deref(), Some("[0x200000403:0x1a00a:0x0]"));
        assert_eq!(r.source_name.as_deref(), Some("old name"));
    }

    #[test]
    fn garbage_is_not_a_record() {
        for bad in [
            "",
            "x",
            "1 01CREAT",
            "1 XXCREAT a b c t=[1]",
            "one 01CREAT a b c t=[1] p=[2] n",
            "1 01CREAT a b c p=[2] n",
        ] {
            assert_eq!(parse_record(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn paths_map_to_buckets_and_keys() {
        let root = Path::new("/lustre/data");
        let key = |p: &str| bucket_and_key(root, Path::new(p));
        assert_eq!(key("/lustre/data/sim/run 1/out.h5"), Some(("sim".into(), "run 1/out.h5".into())));
        assert_eq!(key("/lustre/data/sim"), None);
        assert_eq!(key("/lustre/other/sim/x"), None);
        assert_eq!(key("/lustre/data/.isthmus/x"), None);
        assert_eq!(key("/lustre/data/sim/.isthmus.tmp.1"), None);
        assert_eq!(key("/lustre/data/Not_A_Bucket/x"), None);
    }

    #[test]
    fn a_missing_lfs_is_an_error_not_a_panic() {
        let mut log =
            LustreChangelog::new("testfs-MDT0000", "cl1", Path::new("/nonexistent"), Path::new("/nonexistent/d"), 0);
        if which_lfs() {
            return; // a machine with Lustre tools: not this test's business
        }
        assert!(log.next_batch(10).is_err());
        assert!(log.clear(5).is_err());
        assert_eq!(log.last_read(), 0);
    }

    fn which_lfs() -> bool {
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("lfs").exists()))
    }
}
