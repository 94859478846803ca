//! Region I/O chunk by chunk. A region (or a batch of regions) is cut into pieces, one per chunk
//! it touches; chunks are read and written in parallel on the current rayon pool. A chunk a
//! write covers whole is encoded and written without being read; a chunk covered in part is
//! read, merged and written back only if it is still the version read (retried otherwise), so
//! concurrent writers of different parts of one chunk never lose an update. Every chunk write is
//! one atomic object write: readers see the old chunk or the new one.

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::ops::Range;

use zarrs::array::{Array, ArrayBytes, ArraySubset};
use zarrs::array::{ArrayToBytesCodecTraits, CodecOptions};
use zarrs::storage::ReadableWritableListableStorageTraits;

use crate::ArrayError;
use crate::backend::{ChunkStore, WriteCondition};

/// How many times a partial chunk write retries after losing a race to another writer.
pub(crate) const CONFLICT_RETRIES: usize = 1000;

pub(crate) type ZArray = Array<dyn ReadableWritableListableStorageTraits>;

/// The part of one region inside one chunk.
#[derive(Debug, Clone)]
pub(crate) struct Piece {
    pub chunk: Vec<u64>,
    /// Where the piece starts in the chunk, and its step there (the region's stride).
    pub local_start: Vec<u64>,
    pub step: Vec<u64>,
    /// Where the piece starts in the region's own buffer, and how many elements per dimension.
    pub region_start: Vec<u64>,
    pub count: Vec<u64>,
}

impl Piece {
    pub(crate) fn elements(&self) -> u64 {
        self.count.iter().product()
    }

    /// The part of the piece inside the box `lo..hi` (per dimension, in the piece's chunk),
    /// placed relative to `lo`; `None` when none of its elements is there.
    pub(crate) fn clip(&self, lo: &[u64], hi: &[u64]) -> Option<Piece> {
        let mut clipped = self.clone();
        for d in 0..self.count.len() {
            let (start, step, count) = (self.local_start[d], self.step[d], self.count[d]);
            // The piece's elements in the box are start + k * step for k in first..end.
            let first = lo[d].saturating_sub(start).div_ceil(step);
            let end = if hi[d] <= start { 0 } else { ((hi[d] - 1 - start) / step + 1).min(count) };
            if first >= end {
                return None;
            }
            clipped.local_start[d] = start + first * step - lo[d];
            clipped.region_start[d] = self.region_start[d] + first;
            clipped.count[d] = end - first;
        }
        Some(clipped)
    }

    /// The box the piece spans in the chunk (its elements and the gaps of a stride).
    pub(crate) fn span(&self) -> Vec<Range<u64>> {
        (0..self.count.len())
            .map(|d| self.local_start[d]..self.local_start[d] + (self.count[d] - 1) * self.step[d] + 1)
            .collect()
    }
}

/// A region as checked ranges: `start`, `count` and `step` per dimension.
#[derive(Debug, Clone)]
pub(crate) struct Extent {
    pub start: Vec<u64>,
    pub count: Vec<u64>,
    pub step: Vec<u64>,
}

impl Extent {
    /// The smallest box holding the region.
    pub fn bounding_box(&self) -> Vec<Range<u64>> {
        (0..self.start.len())
            .map(|d| match self.count[d] {
                0 => self.start[d]..self.start[d],
                n => self.start[d]..self.start[d] + (n - 1) * self.step[d] + 1,
            })
            .collect()
    }
}

/// The pieces of `extent`, one per chunk holding at least one of its elements.
///
/// Only chunks that hold an element are visited, dimension by dimension (every grid zarrs
/// knows is separable: a coordinate's chunk along a dimension depends on that coordinate
/// only): a strided region whose bounding box spans 2^40 chunks for two elements visits two.
/// The chunks visited are at most the region's elements, which the array's size bounds.
pub(crate) fn pieces(array: &ZArray, extent: &Extent) -> Result<Vec<Piece>, ArrayError> {
    if extent.count.contains(&0) {
        return Ok(Vec::new());
    }
    let bounds = ArraySubset::new_with_ranges(&extent.bounding_box());
    let Some(chunks) = array.chunks_in_array_subset(&bounds).map_err(|e| ArrayError::Spec(e.to_string()))? else {
        return Err(ArrayError::Spec("the array's chunk grid cannot locate the region's chunks".into()));
    };
    let dims = extent.start.len();
    let mut candidates: Vec<Vec<u64>> = Vec::with_capacity(dims);
    for d in 0..dims {
        let (first_chunk, spanned) = (chunks.start()[d], chunks.shape()[d]);
        if extent.count[d] >= spanned || extent.step[d] == 1 {
            crate::size::chunk_count(&[spanned])?;
            // Every chunk of the span holds an element (or there are no more chunks than
            // elements to look at).
            candidates.push((first_chunk..first_chunk + spanned).collect());
            continue;
        }
        // Fewer elements than chunks: the chunk of each element, in order, once each.
        crate::size::chunk_count(&[extent.count[d]])?;
        let mut along: Vec<u64> = Vec::new();
        for k in 0..extent.count[d] {
            let mut point: Vec<Range<u64>> = (0..dims).map(|e| extent.start[e]..extent.start[e] + 1).collect();
            let at = extent.start[d] + k * extent.step[d];
            point[d] = at..at + 1;
            let Some(found) = array
                .chunks_in_array_subset(&ArraySubset::new_with_ranges(&point))
                .map_err(|e| ArrayError::Spec(e.to_string()))?
            else {
                return Err(ArrayError::Spec("the array's chunk grid cannot locate the region's chunks".into()));
            };
            let index = found.start()[d];
            if along.last() != Some(&index) {
                along.push(index);
            }
        }
        candidates.push(along);
    }
    crate::size::chunk_count(&candidates.iter().map(|c| c.len() as u64).collect::<Vec<_>>())?;
    // The whole region as one piece of the array, cut to each chunk's box.
    let region = Piece {
        chunk: Vec::new(),
        local_start: extent.start.clone(),
        step: extent.step.clone(),
        region_start: vec![0; dims],
        count: extent.count.clone(),
    };
    let mut pieces = Vec::new();
    for chunk in cartesian(&candidates) {
        crate::size::chunk_bytes(
            &array.chunk_shape(&chunk)?.iter().map(|n| n.get()).collect::<Vec<_>>(),
            element_size(array),
        )?;
        let subset = array.chunk_subset_bounded(&chunk)?;
        let hi: Vec<u64> = subset.start().iter().zip(subset.shape()).map(|(s, n)| s + n).collect();
        if let Some(mut piece) = region.clip(subset.start(), &hi) {
            piece.chunk = chunk;
            pieces.push(piece);
        }
    }
    Ok(pieces)
}

/// `piece` cut along the inner chunks of a shard (`inner` elements each): one sub-piece per
/// inner chunk holding at least one of its elements (a stride skips the others).
pub(crate) fn split(piece: &Piece, inner: &[u64]) -> Vec<Piece> {
    let dims = piece.count.len();
    // Per dimension, runs of the piece's elements (first index, how many) in one inner chunk.
    let runs: Vec<Vec<(u64, u64)>> = (0..dims)
        .map(|d| {
            let mut runs: Vec<(u64, u64)> = Vec::new();
            let mut k = 0;
            while k < piece.count[d] {
                let at = piece.local_start[d] + k * piece.step[d];
                let inner_end = (at / inner[d] + 1) * inner[d];
                // The piece's elements before the inner chunk ends: k..end.
                let end = ((inner_end - 1 - piece.local_start[d]) / piece.step[d] + 1).min(piece.count[d]);
                runs.push((k, end - k));
                k = end;
            }
            runs
        })
        .collect();
    let mut subs = Vec::new();
    let total: usize = runs.iter().map(Vec::len).product();
    for mut n in 0..total {
        let mut sub = piece.clone();
        for d in (0..dims).rev() {
            let (first, count) = runs[d][n % runs[d].len()];
            n /= runs[d].len();
            sub.local_start[d] = piece.local_start[d] + first * piece.step[d];
            sub.region_start[d] = piece.region_start[d] + first;
            sub.count[d] = count;
        }
        subs.push(sub);
    }
    subs
}

/// Every combination of one entry per list, in row-major order.
pub(crate) fn cartesian(lists: &[Vec<u64>]) -> impl Iterator<Item = Vec<u64>> + '_ {
    let total: usize = if lists.is_empty() { 0 } else { lists.iter().map(Vec::len).product() };
    (0..total).map(move |mut n| {
        let mut out = vec![0; lists.len()];
        for (d, list) in lists.iter().enumerate().rev() {
            out[d] = list[n % list.len()];
            n /= list.len();
        }
        out
    })
}

/// The bytes of one element of `array` (fixed-size data types only: the engine's).
fn element_size(array: &ZArray) -> u64 {
    array.data_type().fixed_size().map_or(1, |n| n as u64)
}

/// One n-dimensional box of `count` elements from `src` (row-major, shape `src_shape`, from
/// `src_start` every `src_step`) to `dst` (likewise). Rows with step 1 on both sides are one copy.
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_box(
    element: usize,
    count: &[u64],
    src: &[u8],
    src_shape: &[u64],
    src_start: &[u64],
    src_step: &[u64],
    dst: &mut [u8],
    dst_shape: &[u64],
    dst_start: &[u64],
    dst_step: &[u64],
) {
    let dims = count.len();
    if count.contains(&0) {
        return;
    }
    let strides = |shape: &[u64]| {
        let mut strides = vec![1u64; dims];
        for d in (0..dims.saturating_sub(1)).rev() {
            strides[d] = strides[d + 1] * shape[d + 1];
        }
        strides
    };
    let (src_strides, dst_strides) = (strides(src_shape), strides(dst_shape));
    let last = dims - 1;
    let contiguous = src_step[last] == 1 && dst_step[last] == 1;
    let row = count[last] as usize;
    let mut index = vec![0u64; dims];
    loop {
        let offset = |start: &[u64], step: &[u64], strides: &[u64]| -> usize {
            (0..dims).map(|d| (start[d] + index[d] * step[d]) * strides[d]).sum::<u64>() as usize * element
        };
        let (s, t) = (offset(src_start, src_step, &src_strides), offset(dst_start, dst_step, &dst_strides));
        if contiguous {
            dst[t..t + row * element].copy_from_slice(&src[s..s + row * element]);
        } else {
            let (s_step, t_step) = (src_step[last] as usize * element, dst_step[last] as usize * element);
            for k in 0..row {
                let (a, b) = (s + k * s_step, t + k * t_step);
                dst[b..b + element].copy_from_slice(&src[a..a + element]);
            }
        }
        // The next row: count up the outer dimensions like an odometer.
        let mut d = last;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < count[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

fn nonzero_shape(shape: &[u64]) -> Result<Vec<NonZeroU64>, ArrayError> {
    shape
        .iter()
        .map(|&n| NonZeroU64::new(n).ok_or_else(|| ArrayError::Spec("a chunk has an empty dimension".into())))
        .collect()
}

fn full_chunk_shape(array: &ZArray, chunk: &[u64]) -> Result<Vec<u64>, ArrayError> {
    Ok(array.chunk_shape(chunk)?.iter().map(|n| n.get()).collect())
}

/// A chunk of fill values.
pub(crate) fn filled_chunk(array: &ZArray, elements: u64) -> Vec<u8> {
    let fill = array.fill_value().as_ne_bytes();
    if fill.iter().all(|&b| b == 0) {
        return vec![0; elements as usize * fill.len()];
    }
    fill.repeat(elements as usize)
}

pub(crate) fn decode_chunk(array: &ZArray, chunk: &[u64], encoded: &[u8]) -> Result<Vec<u8>, ArrayError> {
    let shape = nonzero_shape(&full_chunk_shape(array, chunk)?)?;
    let decoded = array.codecs().decode(
        Cow::Borrowed(encoded),
        &shape,
        array.data_type(),
        array.fill_value(),
        &CodecOptions::default(),
    )?;
    let fixed = decoded.into_fixed().map_err(|e| ArrayError::Spec(e.to_string()))?;
    Ok(fixed.into_owned())
}

fn encode_chunk<'a>(array: &ZArray, chunk: &[u64], decoded: Cow<'a, [u8]>) -> Result<Cow<'a, [u8]>, ArrayError> {
    let shape = nonzero_shape(&full_chunk_shape(array, chunk)?)?;
    let encoded = array.codecs().encode(
        ArrayBytes::new_flen(decoded),
        &shape,
        array.data_type(),
        array.fill_value(),
        &CodecOptions::default(),
    )?;
    Ok(encoded)
}

/// The source's bytes of a piece that is a whole chunk stored in the same order (the piece
/// spans the full trailing extents of its source), borrowed: such a chunk is encoded straight
/// from the caller's buffer, without being assembled first.
pub(crate) fn whole_chunk_bytes<'a>(element: usize, chunk_shape: &[u64], source: &Source<'a>) -> Option<&'a [u8]> {
    let piece = &source.piece;
    let dims = piece.count.len();
    if piece.count != chunk_shape || piece.step.iter().any(|&s| s != 1) || piece.local_start.iter().any(|&s| s != 0) {
        return None;
    }
    // Contiguous in the source: leading dimensions of count 1, then full extents.
    let first_partial = (0..dims).find(|&d| piece.count[d] != 1).unwrap_or(dims);
    if (first_partial + 1..dims).any(|d| piece.count[d] != source.shape[d]) {
        return None;
    }
    let mut offset = 0u64;
    for d in 0..dims {
        offset = offset * source.shape[d] + piece.region_start[d];
    }
    let start = offset as usize * element;
    let len = piece.elements() as usize * element;
    source.data.get(start..start + len)
}

/// A piece to write: where it goes in its chunk and the source buffer (shaped `shape`) it
/// comes from.
pub(crate) struct Source<'a> {
    pub piece: Piece,
    pub data: &'a [u8],
    pub shape: &'a [u64],
}

pub(crate) fn merge(element: usize, chunk_shape: &[u64], chunk: &mut [u8], sources: &[Source<'_>]) {
    for source in sources {
        let piece = &source.piece;
        let ones = vec![1; piece.count.len()];
        copy_box(
            element,
            &piece.count,
            source.data,
            source.shape,
            &piece.region_start,
            &ones,
            chunk,
            chunk_shape,
            &piece.local_start,
            &piece.step,
        );
    }
}

/// Writes one chunk from its sources (disjoint pieces).
pub(crate) fn write_chunk(
    array: &ZArray,
    store: &dyn ChunkStore,
    chunk: &[u64],
    sources: &[Source<'_>],
) -> Result<(), ArrayError> {
    let element = array.fill_value().size();
    let chunk_shape = full_chunk_shape(array, chunk)?;
    let elements: u64 = chunk_shape.iter().product();
    let key = array.chunk_key(chunk);
    let covered: u64 = sources.iter().map(|s| s.piece.elements()).sum();
    if let [single] = sources
        && let Some(bytes) = whole_chunk_bytes(element, &chunk_shape, single)
    {
        store.set_if(&key, &encode_chunk(array, chunk, Cow::Borrowed(bytes))?, WriteCondition::Always)?;
        return Ok(());
    }
    if covered == array.chunk_subset_bounded(chunk)?.num_elements() {
        let mut decoded = filled_chunk(array, elements);
        merge(element, &chunk_shape, &mut decoded, sources);
        store.set_if(&key, &encode_chunk(array, chunk, Cow::Owned(decoded))?, WriteCondition::Always)?;
        return Ok(());
    }
    for _ in 0..CONFLICT_RETRIES {
        let (mut decoded, condition) = match store.get_tagged(&key)? {
            Some((encoded, tag)) => (decode_chunk(array, chunk, &encoded)?, WriteCondition::IfTag(tag)),
            None => (filled_chunk(array, elements), WriteCondition::IfAbsent),
        };
        merge(element, &chunk_shape, &mut decoded, sources);
        if store.set_if(&key, &encode_chunk(array, chunk, Cow::Owned(decoded))?, condition)? {
            return Ok(());
        }
    }
    Err(ArrayError::Conflict { key: key.to_string() })
}

#[cfg(test)]
mod tests {
    use super::copy_box;

    #[test]
    fn copy_box_moves_a_strided_block() {
        // A 4x4 source of bytes 0..16; take rows 1 and 3, columns 0 and 2, into a 2x2 target.
        let src: Vec<u8> = (0..16).collect();
        let mut dst = vec![0u8; 4];
        copy_box(1, &[2, 2], &src, &[4, 4], &[1, 0], &[2, 2], &mut dst, &[2, 2], &[0, 0], &[1, 1]);
        assert_eq!(dst, vec![4, 6, 12, 14]);
        // And back, into a zeroed 4x4 at the same places.
        let mut back = vec![0u8; 16];
        copy_box(1, &[2, 2], &dst, &[2, 2], &[0, 0], &[1, 1], &mut back, &[4, 4], &[1, 0], &[2, 2]);
        let expected: Vec<u8> = (0..16).map(|i| if [4, 6, 12, 14].contains(&i) { i } else { 0 }).collect();
        assert_eq!(back, expected);
    }
}
