//! The erasure code of an erasure-coded pool: a block of an object is cut into k data shards
//! and m parity shards (Reed-Solomon, `reed-solomon-simd`), each framed with CRC-32Cs of its
//! bytes so a shard that rotted on its drive is known bad on every read: one per 64 KiB chunk
//! (`Framing::Chunked`, what writes use), so that a read of part of a shard checks just the
//! chunks it reads, or one for the whole shard (`Framing::Whole`, segments written before).
//! Any k good shards give the block back; fewer is an error, never wrong bytes.

mod rebuild;

use isthmus_store::error::{StoreError, StoreResult};

/// Shard sizes are a multiple of this (the codec works on 64-byte lanes).
const SHARD_ALIGN: usize = 64;
/// Bytes of one CRC-32C in a frame's header.
const CRC_LEN: usize = 4;
/// The bytes each CRC of a chunked frame covers.
pub const CHUNK: usize = 64 << 10;

/// How a shard's bytes are checked: a header of CRC-32Cs before the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Framing {
    /// One CRC over the whole shard.
    #[default]
    Whole,
    /// One CRC per `CHUNK` bytes of the shard (the last chunk may be shorter).
    Chunked,
}

impl Framing {
    /// The header's length before a shard of `shard_len` data bytes.
    pub fn header_len(self, shard_len: usize) -> usize {
        match self {
            Self::Whole => CRC_LEN,
            Self::Chunked => CRC_LEN * shard_len.div_ceil(CHUNK).max(1),
        }
    }

    /// The bytes each CRC covers.
    fn chunk(self, shard_len: usize) -> usize {
        match self {
            Self::Whole => shard_len.max(1),
            Self::Chunked => CHUNK,
        }
    }

    /// Whether `data`, the shard's bytes from chunk `first` on (whole chunks, the shard's last
    /// one possibly short), matches `crcs`, the header's entries from `first` on.
    pub fn verify(self, crcs: &[u8], data: &[u8], shard_len: usize) -> bool {
        let chunk = self.chunk(shard_len);
        !data.is_empty()
            && crcs.len() == CRC_LEN * data.len().div_ceil(chunk)
            && data.chunks(chunk).zip(crcs.chunks(CRC_LEN)).all(|(bytes, stored)| crc(bytes).to_le_bytes() == stored)
    }
}

/// k data shards and m parity shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub data: usize,
    pub parity: usize,
}

impl Layout {
    pub fn new(data: usize, parity: usize) -> StoreResult<Self> {
        if data == 0 || parity == 0 || data + parity > 256 {
            return Err(StoreError::InvalidArgument(format!(
                "an erasure layout needs at least 1 data and 1 parity shard and at most 256 in all, not {data}+{parity}"
            )));
        }
        Ok(Self { data, parity })
    }

    pub fn shards(&self) -> usize {
        self.data + self.parity
    }

    /// The data bytes each shard of a block of `block_len` bytes carries.
    pub fn shard_len(&self, block_len: usize) -> usize {
        block_len.div_ceil(self.data).div_ceil(SHARD_ALIGN).max(1) * SHARD_ALIGN
    }
}

fn crc(bytes: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

/// A framed shard's data, if its checksums hold.
pub fn unframe(framing: Framing, shard: &[u8], shard_len: usize) -> Option<&[u8]> {
    let (header, data) = shard.split_at_checked(framing.header_len(shard_len))?;
    (data.len() == shard_len && framing.verify(header, data, shard_len)).then_some(data)
}

/// The k + m framed shards of one block (data shards first). Each data shard is copied from
/// the block once, straight into its frame; parity is encoded from the framed data shards.
pub fn encode(layout: Layout, block: &[u8], framing: Framing) -> StoreResult<Vec<Vec<u8>>> {
    let shard_len = layout.shard_len(block.len());
    let header = framing.header_len(shard_len);
    let framed_shard = |bytes: &[u8]| {
        let mut shard = Vec::with_capacity(header + shard_len);
        shard.resize(header, 0);
        shard.extend_from_slice(bytes);
        shard.resize(header + shard_len, 0);
        shard
    };
    let mut shards: Vec<Vec<u8>> = (0..layout.data)
        .map(|i| {
            let start = (i * shard_len).min(block.len());
            let end = ((i + 1) * shard_len).min(block.len());
            framed_shard(&block[start..end])
        })
        .collect();
    let parity = reed_solomon_simd::encode(layout.data, layout.parity, shards.iter().map(|s| &s[header..]))
        .map_err(|e| StoreError::InvalidArgument(format!("erasure encoding failed: {e}")))?;
    shards.extend(parity.iter().map(|p| framed_shard(p)));
    let chunk = framing.chunk(shard_len);
    for shard in &mut shards {
        let (crcs, data) = shard.split_at_mut(header);
        for (stored, bytes) in crcs.chunks_mut(CRC_LEN).zip(data.chunks(chunk)) {
            stored.copy_from_slice(&crc(bytes).to_le_bytes());
        }
    }
    Ok(shards)
}

/// What decoding found: the block, and which shards were missing or bad (to heal).
pub struct Decoded {
    pub block: Vec<u8>,
    pub bad: Vec<usize>,
}

/// The block of `block_len` bytes from its framed shards (`None` for a shard that could not
/// be read). Shards whose checksum fails count as missing.
pub fn decode(layout: Layout, shards: &[Option<Vec<u8>>], block_len: usize, framing: Framing) -> StoreResult<Decoded> {
    assemble(layout, shards, block_len, framing, Checks::Verify)
}

/// As `decode`, for framed shards whose checksums the caller has verified (a read's lanes check
/// each shard as it arrives): each is used as it is, not checked a second time.
pub fn decode_verified(
    layout: Layout,
    shards: &[Option<Vec<u8>>],
    block_len: usize,
    framing: Framing,
) -> StoreResult<Decoded> {
    assemble(layout, shards, block_len, framing, Checks::Done)
}

/// Whether `assemble` checks the shards' checksums.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Checks {
    Verify,
    Done,
}

fn assemble(
    layout: Layout,
    shards: &[Option<Vec<u8>>],
    block_len: usize,
    framing: Framing,
    checks: Checks,
) -> StoreResult<Decoded> {
    let shard_len = layout.shard_len(block_len);
    let header = framing.header_len(shard_len);
    let mut good: Vec<Option<&[u8]>> = Vec::with_capacity(layout.shards());
    let mut bad = Vec::new();
    for (index, shard) in shards.iter().enumerate().take(layout.shards()) {
        let data = shard.as_deref().and_then(|s| match checks {
            Checks::Verify => unframe(framing, s, shard_len),
            Checks::Done => s.get(header..).filter(|data| data.len() == shard_len),
        });
        match data {
            Some(data) => good.push(Some(data)),
            None => {
                good.push(None);
                bad.push(index);
            }
        }
    }
    good.resize(layout.shards(), None);
    // Missing data shards, rebuilt from parity; present ones are copied once, into the block.
    let mut restored: std::collections::BTreeMap<usize, Vec<u8>> = std::collections::BTreeMap::new();
    let missing = good[..layout.data].iter().filter(|s| s.is_none()).count();
    if missing > 0 {
        let available = good.iter().filter(|s| s.is_some()).count();
        if available < layout.data {
            return Err(StoreError::InsufficientShards(format!(
                "{available} of {} shards are readable; {} are needed",
                layout.shards(),
                layout.data
            )));
        }
        let originals: Vec<(usize, &[u8])> =
            good[..layout.data].iter().enumerate().filter_map(|(i, s)| s.map(|s| (i, s))).collect();
        // Exactly as many recovery shards as originals are missing: each one more makes the
        // decoder's work larger for nothing (a hedged read may have brought extra ones).
        let recovery: Vec<(usize, &[u8])> =
            good[layout.data..].iter().enumerate().filter_map(|(i, s)| s.map(|s| (i, s))).take(missing).collect();
        restored = rebuild::rebuild(layout.data, layout.parity, &originals, &recovery)
            .map_err(|e| StoreError::InsufficientShards(format!("reconstruction failed: {e}")))?;
    }
    let mut block = Vec::with_capacity(shard_len * layout.data);
    for (index, shard) in good[..layout.data].iter().enumerate() {
        match shard {
            Some(bytes) => block.extend_from_slice(bytes),
            None => block.extend_from_slice(
                restored
                    .get(&index)
                    .ok_or_else(|| StoreError::InsufficientShards("a data shard was not rebuilt".into()))?,
            ),
        }
        if block.len() >= block_len {
            break;
        }
    }
    block.truncate(block_len);
    Ok(Decoded { block, bad })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 % 251) as u8).collect()
    }

    #[test]
    fn any_k_shards_give_the_block_back() {
        for (k, m, framing) in [
            (4, 2, Framing::Whole),
            (4, 2, Framing::Chunked),
            (8, 2, Framing::Chunked),
            (16, 2, Framing::Whole),
            (2, 1, Framing::Chunked),
        ] {
            let layout = Layout::new(k, m).unwrap();
            for len in [0, 1, 1000, 1 << 20, (1 << 20) + 100] {
                let original = block(len);
                let shards = encode(layout, &original, framing).unwrap();
                assert_eq!(shards.len(), k + m);
                // Lose m shards, data ones first: the worst case.
                let mut some: Vec<Option<Vec<u8>>> = shards.into_iter().map(Some).collect();
                for lost in some.iter_mut().take(m) {
                    *lost = None;
                }
                let decoded = decode(layout, &some, len, framing).unwrap();
                assert_eq!(decoded.block, original, "{k}+{m}, {len} bytes");
                assert_eq!(decoded.bad, (0..m).collect::<Vec<_>>());
                let trusted = decode_verified(layout, &some, len, framing).unwrap();
                assert_eq!((trusted.block, trusted.bad), (decoded.block, decoded.bad));
            }
        }
    }

    #[test]
    fn rotten_shards_are_found_and_too_many_are_an_error() {
        for framing in [Framing::Whole, Framing::Chunked] {
            rot_is_found(framing);
        }
    }

    fn rot_is_found(framing: Framing) {
        let layout = Layout::new(4, 2).unwrap();
        let original = block(1_000_000);
        let mut shards: Vec<Option<Vec<u8>>> =
            encode(layout, &original, framing).unwrap().into_iter().map(Some).collect();
        shards[1].as_mut().unwrap()[100] ^= 0x40; // bitrot in a data shard
        shards[5].as_mut().unwrap()[7] ^= 1; // and in a parity shard
        let decoded = decode(layout, &shards, original.len(), framing).unwrap();
        assert_eq!(decoded.block, original);
        assert_eq!(decoded.bad, vec![1, 5]);
        // Shards already checked are not checked again, but one of the wrong length is bad.
        let mut checked = shards.clone();
        checked[1] = None;
        checked[5].as_mut().unwrap().pop();
        let decoded = decode_verified(layout, &checked, original.len(), framing).unwrap();
        assert_eq!((decoded.block, decoded.bad), (original.clone(), vec![1, 5]));
        shards[2] = None; // m + 1 lost
        let err = decode(layout, &shards, original.len(), framing).err().expect("three of six lost");
        assert!(err.to_string().contains("3 of 6"), "{err}");
    }

    #[test]
    fn a_chunked_frame_checks_any_run_of_its_chunks_alone() {
        let layout = Layout::new(2, 1).unwrap();
        let original = block(7 * CHUNK + 5000);
        let shard_len = layout.shard_len(original.len());
        let mut shard = encode(layout, &original, Framing::Chunked).unwrap().swap_remove(0);
        let header = Framing::Chunked.header_len(shard_len);
        assert_eq!(header, 4 * shard_len.div_ceil(CHUNK));
        let (crcs, data) = shard.split_at(header);
        // Chunk 1 alone, and chunk 1 to the shard's short last chunk.
        assert!(Framing::Chunked.verify(&crcs[4..8], &data[CHUNK..2 * CHUNK], shard_len));
        assert!(Framing::Chunked.verify(&crcs[4..], &data[CHUNK..], shard_len));
        // A table entry too few, a short run, or one flipped byte: not good.
        assert!(!Framing::Chunked.verify(&crcs[4..8], &data[CHUNK..], shard_len));
        assert!(!Framing::Chunked.verify(&crcs[4..8], &data[CHUNK..CHUNK + 100], shard_len));
        shard[header + CHUNK + 7] ^= 1;
        let (crcs, data) = shard.split_at(header);
        assert!(!Framing::Chunked.verify(&crcs[4..8], &data[CHUNK..2 * CHUNK], shard_len));
        assert!(Framing::Chunked.verify(&crcs[..4], &data[..CHUNK], shard_len), "the other chunks still check out");
        assert!(unframe(Framing::Chunked, &shard, shard_len).is_none());
    }
}
