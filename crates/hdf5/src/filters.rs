//! The HDF5 filter pipeline, undone: the filters a chunk was written through are reversed in the
//! opposite order, skipping those its filter mask marks as not applied. Decodable here:
//! deflate (1), shuffle (2), Fletcher-32 (3, verified) and zstd (32015, the registered plugin).

use std::io::Read;

use serde::{Deserialize, Serialize};

use crate::Hdf5Error;

const DEFLATE: u32 = 1;
const SHUFFLE: u32 = 2;
const FLETCHER32: u32 = 3;
const ZSTD: u32 = 32015;

/// One filter of a dataset's pipeline, in write order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterStep {
    /// The HDF5 filter id.
    pub id: u32,
    /// Its name, for messages (`deflate`, `szip`, `filter 32001 (blosc)`).
    pub name: String,
}

impl FilterStep {
    pub fn new(id: u32) -> Self {
        let name = match id {
            DEFLATE => "deflate",
            SHUFFLE => "shuffle",
            FLETCHER32 => "fletcher32",
            4 => "szip",
            5 => "nbit",
            6 => "scaleoffset",
            32000 => "filter 32000 (lzf)",
            32001 => "filter 32001 (blosc)",
            32004 => "filter 32004 (lz4)",
            32008 => "filter 32008 (bitshuffle)",
            ZSTD => "filter 32015 (zstd)",
            other => return Self { id, name: format!("filter {other}") },
        };
        Self { id, name: name.to_string() }
    }

    fn decodable(&self) -> bool {
        matches!(self.id, DEFLATE | SHUFFLE | FLETCHER32 | ZSTD)
    }
}

/// Why a pipeline cannot be undone here, naming the first filter that cannot; `None` if it can.
pub fn undecodable(pipeline: &[FilterStep]) -> Option<String> {
    pipeline
        .iter()
        .find(|f| !f.decodable())
        .map(|f| format!("the {} filter cannot be decoded by Isthmus (use h5repack to remove it, or libhdf5)", f.name))
}

/// Undoes `pipeline` on a stored chunk; `mask` bit i set means filter i was not applied.
/// `element_size` is the data type's size (for shuffle); `decoded_size` the chunk's size once
/// decoded (a capacity hint: decompressed bytes land in one allocation of that size).
pub fn decode(
    pipeline: &[FilterStep],
    mask: u32,
    element_size: usize,
    decoded_size: usize,
    stored: Vec<u8>,
) -> Result<Vec<u8>, Hdf5Error> {
    let mut data = stored;
    for (position, filter) in pipeline.iter().enumerate().rev() {
        if position < 32 && mask & (1 << position) != 0 {
            continue;
        }
        data = match filter.id {
            DEFLATE => {
                // Fletcher-32 (applied after deflate) may add 4 bytes to what deflate holds.
                let mut out = Vec::with_capacity(decoded_size + 4);
                // The bufread decoder inflates straight from the stored bytes (the read one
                // would first copy them into a buffer of its own).
                flate2::bufread::ZlibDecoder::new(data.as_slice())
                    .read_to_end(&mut out)
                    .map_err(|e| Hdf5Error::Decode(format!("a deflate chunk did not decompress: {e}")))?;
                out
            }
            ZSTD => zstd::decode_all(data.as_slice())
                .map_err(|e| Hdf5Error::Decode(format!("a zstd chunk did not decompress: {e}")))?,
            SHUFFLE => unshuffle(&data, element_size),
            FLETCHER32 => verified_fletcher32(data)?,
            _ => return Err(Hdf5Error::Decode(undecodable(std::slice::from_ref(filter)).unwrap_or_default())),
        };
    }
    Ok(data)
}

/// Shuffle stored byte 0 of every element, then byte 1, ...; the tail that is not a whole
/// element was left as it was.
fn unshuffle(data: &[u8], element_size: usize) -> Vec<u8> {
    match element_size {
        0 | 1 => data.to_vec(),
        2 => unshuffle_n::<2>(data),
        4 => unshuffle_n::<4>(data),
        8 => unshuffle_n::<8>(data),
        _ => {
            let count = data.len() / element_size;
            let mut out = vec![0u8; data.len()];
            for byte in 0..element_size {
                let plane = &data[byte * count..(byte + 1) * count];
                for (i, value) in plane.iter().enumerate() {
                    out[i * element_size + byte] = *value;
                }
            }
            let whole = count * element_size;
            out[whole..].copy_from_slice(&data[whole..]);
            out
        }
    }
}

/// `unshuffle` for elements of `N` bytes: each output element is gathered whole from the N
/// planes, blocks of elements at a time, without bounds checks in the loop (the byte-by-byte
/// scatter was 4 % of an EQSIM run's CPU time).
fn unshuffle_n<const N: usize>(data: &[u8]) -> Vec<u8> {
    const BLOCK: usize = 64;
    let count = data.len() / N;
    let whole = count * N;
    let planes: [&[u8]; N] = std::array::from_fn(|byte| &data[byte * count..(byte + 1) * count]);
    let mut out = vec![0u8; data.len()];
    let blocks = count / BLOCK;
    for (block, chunk) in out[..blocks * BLOCK * N].chunks_exact_mut(BLOCK * N).enumerate() {
        let sources: [&[u8; BLOCK]; N] =
            std::array::from_fn(|byte| planes[byte][block * BLOCK..][..BLOCK].try_into().expect("a block"));
        for (i, element) in chunk.chunks_exact_mut(N).enumerate() {
            for byte in 0..N {
                element[byte] = sources[byte][i % BLOCK];
            }
        }
    }
    for i in blocks * BLOCK..count {
        for byte in 0..N {
            out[i * N + byte] = planes[byte][i];
        }
    }
    out[whole..].copy_from_slice(&data[whole..]);
    out
}

/// HDF5's Fletcher-32 (`H5_checksum_fletcher32`): 16-bit big-endian words summed in blocks of
/// 360, folded after each; an odd last byte is the high half of one more word.
fn fletcher32(data: &[u8]) -> u32 {
    let fold = |sum: u32| (sum & 0xffff) + (sum >> 16);
    let (mut sum1, mut sum2) = (0u32, 0u32);
    let words = data.len() / 2 * 2;
    for block in data[..words].chunks(360 * 2) {
        for word in block.chunks_exact(2) {
            sum1 += (u32::from(word[0]) << 8) | u32::from(word[1]);
            sum2 += sum1;
        }
        sum1 = fold(sum1);
        sum2 = fold(sum2);
    }
    if data.len() % 2 == 1 {
        sum1 += u32::from(data[words]) << 8;
        sum2 += sum1;
        sum1 = fold(sum1);
        sum2 = fold(sum2);
    }
    (fold(sum2) << 16) | fold(sum1)
}

/// The data without its trailing checksum, if the checksum matches (libhdf5 accepts the
/// checksum in either byte order, as files of old versions have it swapped).
fn verified_fletcher32(mut data: Vec<u8>) -> Result<Vec<u8>, Hdf5Error> {
    if data.len() < 4 {
        return Err(Hdf5Error::Decode("a Fletcher-32 chunk is shorter than its checksum".into()));
    }
    let stored: [u8; 4] = data[data.len() - 4..].try_into().expect("4 bytes");
    data.truncate(data.len() - 4);
    let computed = fletcher32(&data);
    if computed == u32::from_be_bytes(stored) || computed == u32::from_le_bytes(stored) {
        Ok(data)
    } else {
        Err(Hdf5Error::Decode("a chunk failed its Fletcher-32 checksum: the file is damaged".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unshuffle_restores_interleaved_elements() {
        let elements: Vec<u8> = (0u8..22).collect(); // 5 four-byte elements and 2 tail bytes
        let mut shuffled = Vec::new();
        for byte in 0..4 {
            shuffled.extend((0..5).map(|i| elements[i * 4 + byte]));
        }
        shuffled.extend_from_slice(&elements[20..]);
        assert_eq!(unshuffle(&shuffled, 4), elements);
        // Every element size, specialised (2, 4, 8) or not (3, 16), restores the same bytes.
        for size in [2usize, 3, 4, 8, 16] {
            let elements: Vec<u8> = (0..(7 * size + size / 2) as u32).map(|i| (i * 7 + 3) as u8).collect();
            let count = elements.len() / size;
            let mut shuffled: Vec<u8> = (0..size)
                .flat_map(|byte| (0..count).map(move |i| (i, byte)))
                .map(|(i, b)| elements[i * size + b])
                .collect();
            shuffled.extend_from_slice(&elements[count * size..]);
            assert_eq!(unshuffle(&shuffled, size), elements, "element size {size}");
        }
    }

    #[test]
    fn pipelines_name_the_filter_they_cannot_undo() {
        let pipeline = [FilterStep::new(2), FilterStep::new(4)];
        assert!(undecodable(&pipeline).unwrap().contains("szip"));
        assert_eq!(undecodable(&[FilterStep::new(2), FilterStep::new(1)]), None);
    }

    #[test]
    fn a_damaged_fletcher32_chunk_is_refused() {
        let mut data = b"some chunk bytes".to_vec();
        data.extend_from_slice(&fletcher32(&data).to_le_bytes());
        assert_eq!(verified_fletcher32(data.clone()).unwrap(), b"some chunk bytes");
        data[0] ^= 1;
        assert!(verified_fletcher32(data).is_err());
    }
}
