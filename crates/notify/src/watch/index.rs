//! The scanner's index: one small table per directory of a bucket, kept as a file in the
//! bucket's index directory (named by a hash of the directory's path), holding what the last
//! pass saw of the directory itself and of each entry. Decoding checks every length against
//! the bytes there, so a damaged table is refused, never trusted.

use crate::bytes::Reader;
use sha2::{Digest, Sha256};

use super::tree::Kind;

/// What a pass saw of one entry (times in nanoseconds since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub name: String,
    pub kind: Kind,
    pub ino: u64,
    pub size: u64,
    pub mtime: i64,
    pub ctime: i64,
}

impl Entry {
    /// Whether the file changed between the two passes.
    pub fn differs(&self, other: &Entry) -> bool {
        (self.kind, self.ino, self.size, self.mtime, self.ctime)
            != (other.kind, other.ino, other.size, other.mtime, other.ctime)
    }
}

/// What a pass saw of one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DirTable {
    /// The directory's path relative to the bucket (checked when read back: a hash collision
    /// or a misplaced file is refused).
    pub rel: String,
    pub ino: u64,
    pub mtime: i64,
    pub ctime: i64,
    /// When the entries were read from the directory (ns since the epoch).
    pub listed_at: i64,
    /// Sorted by name.
    pub entries: Vec<Entry>,
}

const MAGIC: &[u8] = b"isthmus-scan-1\n";
const ENTRY_FIXED: usize = 1 + 8 * 4 + 2;

/// The file name of the table of directory `rel`.
pub(crate) fn table_name(rel: &str) -> String {
    let digest = Sha256::digest(rel.as_bytes());
    format!("d{}", hex::encode(&digest[..16]))
}

impl DirTable {
    pub fn encode(&self) -> Vec<u8> {
        let names: usize = self.entries.iter().map(|e| e.name.len()).sum();
        let mut out = Vec::with_capacity(MAGIC.len() + 40 + self.rel.len() + self.entries.len() * ENTRY_FIXED + names);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(self.rel.len() as u32).to_le_bytes());
        out.extend_from_slice(self.rel.as_bytes());
        for n in [self.ino, self.mtime as u64, self.ctime as u64, self.listed_at as u64] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for e in &self.entries {
            out.push(match e.kind {
                Kind::File => b'f',
                Kind::Dir => b'd',
            });
            for n in [e.ino, e.size, e.mtime as u64, e.ctime as u64] {
                out.extend_from_slice(&n.to_le_bytes());
            }
            out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
            out.extend_from_slice(e.name.as_bytes());
        }
        out
    }

    /// The table in `bytes`, if it is whole and well formed.
    pub fn decode(bytes: &[u8]) -> Option<DirTable> {
        let mut r = Reader(bytes.strip_prefix(MAGIC)?);
        let rel_len = r.u32()? as usize;
        let rel = r.text(rel_len)?;
        let (ino, mtime, ctime, listed_at) = (r.u64()?, r.u64()? as i64, r.u64()? as i64, r.u64()? as i64);
        let count = r.u32()? as usize;
        if count > r.0.len() / ENTRY_FIXED {
            return None;
        }
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            let kind = match r.u8()? {
                b'f' => Kind::File,
                b'd' => Kind::Dir,
                _ => return None,
            };
            let (ino, size, mtime, ctime) = (r.u64()?, r.u64()?, r.u64()? as i64, r.u64()? as i64);
            let len = r.u16()? as usize;
            let name = r.text(len)?;
            if name.is_empty() || name.contains('/') {
                return None;
            }
            entries.push(Entry { name, kind, ino, size, mtime, ctime });
        }
        if !r.0.is_empty() || !entries.windows(2).all(|w| w[0].name < w[1].name) {
            return None;
        }
        Some(DirTable { rel, ino, mtime, ctime, listed_at, entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DirTable {
        let entry = |name: &str, kind| Entry { name: name.into(), kind, ino: 7, size: 3, mtime: -1, ctime: 9 };
        DirTable {
            rel: "a/b".into(),
            ino: 1,
            mtime: 2,
            ctime: 3,
            listed_at: 4,
            entries: vec![entry("x\ny", Kind::File), entry("z", Kind::Dir)],
        }
    }

    #[test]
    fn tables_round_trip() {
        let table = sample();
        assert_eq!(DirTable::decode(&table.encode()), Some(table));
        assert_ne!(table_name("a"), table_name("b"));
    }

    #[test]
    fn damaged_tables_are_refused() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert_eq!(DirTable::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut huge = bytes.clone();
        let count_at = MAGIC.len() + 4 + 3 + 32;
        huge[count_at..count_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(DirTable::decode(&huge), None);
        let mut trailing = bytes;
        trailing.push(0);
        assert_eq!(DirTable::decode(&trailing), None);
    }
}
