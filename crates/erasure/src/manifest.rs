//! The manifest of an erasure-coded object: one small file per object on every drive, at the
//! object's key in the drive's bucket directory, holding what HEAD reports and where the
//! object's bytes are: inline (small objects, kept whole in the manifest) or as segments, each
//! a run of blocks cut into k + m shards on named drives. A single PUT is one segment; a
//! multipart object is one segment per part.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::codec::{Framing, Layout};
use isthmus_store::error::{StoreError, StoreResult};
use isthmus_store::{Checksum, ObjectInfo, ObjectMeta};

/// One run of blocks of an object, erasure-coded over `drives` (shard i on `drives[i]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Segment {
    /// Names the segment's shard file on each of its drives.
    pub(crate) data_id: String,
    pub(crate) size: u64,
    pub(crate) block_size: u64,
    pub(crate) data: usize,
    pub(crate) parity: usize,
    pub(crate) drives: Vec<usize>,
    /// How the shards' bytes are checked (segments written before chunked frames have none
    /// recorded: one CRC per shard).
    #[serde(default, skip_serializing_if = "is_whole")]
    pub(crate) framing: Framing,
}

fn is_whole(framing: &Framing) -> bool {
    *framing == Framing::Whole
}

impl Segment {
    pub(crate) fn layout(&self) -> Layout {
        Layout { data: self.data, parity: self.parity }
    }

    pub(crate) fn blocks(&self) -> u64 {
        self.size.div_ceil(self.block_size)
    }

    /// The length of block `b`.
    pub(crate) fn block_len(&self, b: u64) -> usize {
        (self.size - b * self.block_size).min(self.block_size) as usize
    }

    /// Where block `b`'s framed shard starts in each shard file.
    pub(crate) fn shard_offset(&self, b: u64) -> u64 {
        let shard_len = self.layout().shard_len(self.block_size as usize);
        b * (self.framing.header_len(shard_len) + shard_len) as u64
    }

    /// The data length of block `b`'s shards.
    pub(crate) fn shard_len(&self, b: u64) -> usize {
        self.layout().shard_len(self.block_len(b))
    }

    /// The header length (CRCs) of block `b`'s shards.
    pub(crate) fn header_len(&self, b: u64) -> usize {
        self.framing.header_len(self.shard_len(b))
    }

    /// The framed length of block `b`'s shards.
    pub(crate) fn framed_len(&self, b: u64) -> usize {
        self.header_len(b) + self.shard_len(b)
    }

    /// The size of every complete shard file of this segment.
    pub(crate) fn shard_file_len(&self) -> u64 {
        match self.blocks() {
            0 => 0,
            n => self.shard_offset(n - 1) + self.framed_len(n - 1) as u64,
        }
    }
}

/// Everything known about one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// When the write committed (nanoseconds since the epoch): of two manifests of a key, the
    /// later one is the object.
    pub(crate) written_ns: u64,
    /// Unique per write; breaks ties and tells two writes apart.
    pub(crate) write_id: String,
    pub(crate) size: u64,
    pub(crate) etag: String,
    pub(crate) meta: ObjectMeta,
    #[serde(default)]
    pub(crate) checksum: Option<Checksum>,
    #[serde(default)]
    pub(crate) parts: Vec<(u64, u32)>,
    /// Empty for an object kept inline.
    #[serde(default)]
    pub(crate) segments: Vec<Segment>,
    /// The object's bytes follow the manifest's JSON line.
    #[serde(default)]
    pub(crate) inline: bool,
    /// A tombstone: the object was deleted at `written_ns`. Kept on the drives until every
    /// drive has it (`isthmus heal` then removes it), so a drive that was away during the
    /// delete and still holds the object cannot bring it back: the later record wins.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) deleted: bool,
}

/// A manifest with its inline bytes, as read from a drive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub(crate) manifest: Manifest,
    pub(crate) inline: Vec<u8>,
}

impl Stored {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(&self.manifest).expect("a manifest serializes");
        bytes.push(b'\n');
        bytes.extend_from_slice(&self.inline);
        bytes
    }

    pub(crate) fn decode(bytes: &[u8]) -> StoreResult<Self> {
        let end = bytes.iter().position(|&b| b == b'\n').unwrap_or(bytes.len());
        let manifest: Manifest = serde_json::from_slice(&bytes[..end])
            .map_err(|e| StoreError::InvalidArgument(format!("an unreadable object manifest: {e}")))?;
        let inline = bytes.get(end + 1..).unwrap_or_default().to_vec();
        if manifest.inline && inline.len() as u64 != manifest.size {
            return Err(StoreError::InvalidArgument("a truncated object manifest".into()));
        }
        Ok(Self { manifest, inline })
    }

    /// The record of a delete, now.
    pub(crate) fn tombstone() -> Self {
        let written_ns =
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos().min(u128::from(u64::MAX)) as u64);
        let manifest = Manifest {
            written_ns,
            write_id: random_id(),
            size: 0,
            etag: String::new(),
            meta: ObjectMeta::default(),
            checksum: None,
            parts: Vec::new(),
            segments: Vec::new(),
            inline: false,
            deleted: true,
        };
        Self { manifest, inline: Vec::new() }
    }

    /// Whether this manifest is of a later write than `other`.
    pub(crate) fn newer_than(&self, other: &Self) -> bool {
        (self.manifest.written_ns, &self.manifest.write_id) > (other.manifest.written_ns, &other.manifest.write_id)
    }

    pub(crate) fn info(&self, key: &str) -> ObjectInfo {
        let m = &self.manifest;
        ObjectInfo {
            key: key.to_string(),
            size: m.size,
            last_modified: UNIX_EPOCH + Duration::from_nanos(m.written_ns),
            etag: m.etag.clone(),
            meta: m.meta.clone(),
            checksum: m.checksum.clone(),
            parts: m.parts.clone(),
            version_id: None,
        }
    }
}

/// Now, in nanoseconds since the epoch.
pub(crate) fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// A fresh random id (32 hex digits).
pub(crate) fn random_id() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_round_trip_with_inline_bytes() {
        let stored = Stored {
            manifest: Manifest {
                written_ns: 5,
                write_id: "w".into(),
                size: 3,
                etag: "e".into(),
                meta: ObjectMeta::default(),
                checksum: None,
                parts: vec![],
                segments: vec![],
                inline: true,
                deleted: false,
            },
            inline: b"a\nb".to_vec(),
        };
        assert_eq!(Stored::decode(&stored.encode()).unwrap(), stored);
        let mut cut = stored.encode();
        cut.pop();
        assert!(Stored::decode(&cut).is_err());
    }

    #[test]
    fn segment_geometry() {
        let s = Segment {
            data_id: "d".into(),
            size: 10_000,
            block_size: 4096,
            data: 4,
            parity: 2,
            drives: vec![],
            framing: Framing::Whole,
        };
        assert_eq!(s.blocks(), 3);
        assert_eq!(s.block_len(2), 10_000 - 8192);
        assert_eq!(s.shard_offset(1), (4 + 1024) as u64);
        assert_eq!(s.framed_len(2), 4 + 512);
        assert_eq!(s.shard_file_len(), 2 * (4 + 1024) as u64 + (4 + 512) as u64);
        // Chunked: a CRC per 64 KiB of each shard (1 MiB blocks over 4: 256 KiB shards).
        let c = Segment { size: (3 << 20) + 100, block_size: 1 << 20, framing: Framing::Chunked, ..s };
        assert_eq!(c.header_len(0), 16);
        assert_eq!(c.shard_offset(2), 2 * (16 + (256 << 10)) as u64);
        assert_eq!(c.framed_len(3), 4 + 64);
    }
}
