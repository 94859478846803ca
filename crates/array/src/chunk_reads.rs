//! How the chunks of a read are decoded (`read_pieces` runs the plan): each chunk a read
//! touches becomes one or more decode jobs, run in parallel, whose bytes are then copied into the
//! caller's buffers. A sharded chunk read for one piece is decoded inner chunk by inner chunk,
//! only those holding an element of the piece, through one shard decoder (the shard's index read
//! once per read, not once per inner chunk); any other chunk is decoded whole when it must be
//! decompressed anyway (or most of it is wanted), else only the piece's span. A chunk never
//! written is not decoded: its pieces are filled with the fill value. What a read decodes is
//! bounded by what it returns (`size::decoded_bytes`).

use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;
use zarrs::array::{ArrayBytes, ArrayPartialDecoderTraits, ArrayShardedExt, ArraySubset, CodecOptions};

use crate::ArrayError;
use crate::chunks::{Piece, ZArray, copy_box, split};
use crate::size::SizeError;

/// A span smaller than this share of its chunk is decoded alone (when the codecs allow it):
/// below it, fetching and assembling the span's rows costs less than the whole chunk.
const SPAN_SHARE_DENOMINATOR: u64 = 4;

/// A piece to read: where it comes from in its chunk and which output buffer (by index) it
/// lands in, shaped `shape`.
pub(crate) struct Target<'a> {
    pub piece: Piece,
    pub output: usize,
    pub shape: &'a [u64],
}

/// Reads every chunk of `targets` into `outputs`: chunks decoded in parallel, a bounded group at
/// a time, then copied into place (this module plans how each chunk is decoded). Refused as soon
/// as the bytes decoded pass what a read of the targets' bytes may decode.
pub(crate) fn read_pieces(
    array: &ZArray,
    targets: Vec<Target<'_>>,
    outputs: &mut [&mut [u8]],
) -> Result<(), ArrayError> {
    read_pieces_within(array, targets, outputs, crate::size::decoded_bytes)
}

/// `read_pieces`, refused when `within(decoded, wanted)` refuses the bytes decoded so far.
fn read_pieces_within(
    array: &ZArray,
    mut targets: Vec<Target<'_>>,
    outputs: &mut [&mut [u8]],
    within: impl Fn(u64, u64) -> Result<(), SizeError>,
) -> Result<(), ArrayError> {
    let element = array.fill_value().size() as u64;
    let wanted = targets.iter().fold(0u64, |n, t| n.saturating_add(t.piece.elements())).saturating_mul(element);
    targets.sort_by(|a, b| a.piece.chunk.cmp(&b.piece.chunk));
    let groups: Vec<&[Target<'_>]> = targets.chunk_by(|a, b| a.piece.chunk == b.piece.chunk).collect();
    let at_once = rayon::current_num_threads() * 2;
    let mut decoded = 0u64;
    for batch in groups.chunks(at_once) {
        decoded = decoded.saturating_add(read_groups(array, batch, outputs)?);
        within(decoded, wanted)?;
    }
    Ok(())
}

/// One decode: a box of a chunk and the pieces (output buffer, its shape, the piece) it feeds.
struct Job<'a> {
    chunk: &'a [u64],
    /// The shard's decoder, for an inner chunk of a sharded array.
    shard: Option<Arc<dyn ArrayPartialDecoderTraits>>,
    /// The box decoded, in chunk coordinates; `None`: the whole chunk.
    span: Option<Vec<Range<u64>>>,
    pieces: Vec<(Piece, usize, &'a [u64])>,
}

/// A job's result: its bytes, the box they hold (origin and shape in the chunk), its pieces;
/// `filled`: the chunk was never written (no bytes), its pieces are its fill value.
struct Decoded<'a> {
    bytes: Vec<u8>,
    origin: Vec<u64>,
    shape: Vec<u64>,
    pieces: Vec<(Piece, usize, &'a [u64])>,
    filled: bool,
}

/// The decode jobs of one chunk's targets.
fn plan<'a>(array: &ZArray, group: &'a [Target<'a>]) -> Result<Vec<Job<'a>>, ArrayError> {
    let chunk = group[0].piece.chunk.as_slice();
    let pieces = || group.iter().map(|t| (t.piece.clone(), t.output, t.shape)).collect::<Vec<_>>();
    if let ([single], true, Some(inner)) = (group, array.is_exclusively_sharded(), array.effective_subchunk_shape()) {
        let inner: Vec<u64> = inner.iter().map(|n| n.get()).collect();
        let shard = array.partial_decoder(chunk)?;
        return Ok(split(&single.piece, &inner)
            .into_iter()
            .map(|sub| Job {
                chunk,
                shard: Some(shard.clone()),
                span: Some(sub.span()),
                pieces: vec![(sub, single.output, single.shape)],
            })
            .collect());
    }
    let chunk_elements: u64 = array.chunk_shape(chunk)?.iter().map(|n| n.get()).product();
    let span = match group {
        [single] => single.piece.span(),
        _ => {
            // Several pieces: the chunk is decoded once for all of them.
            return Ok(vec![Job { chunk, shard: None, span: None, pieces: pieces() }]);
        }
    };
    let span_elements: u64 = span.iter().map(|r| r.end - r.start).product();
    // Compressed chunks are decompressed whole whatever part is asked for: asking for the whole
    // saves zarrs extracting the span before we copy the piece out of it.
    let whole =
        !array.codecs().bytes_to_bytes_codecs().is_empty() || span_elements * SPAN_SHARE_DENOMINATOR >= chunk_elements;
    Ok(vec![Job { chunk, shard: None, span: (!whole).then_some(span), pieces: pieces() }])
}

fn decode<'a>(array: &ZArray, job: Job<'a>) -> Result<Decoded<'a>, ArrayError> {
    let (bytes, origin, shape): (ArrayBytes<'_>, Vec<u64>, Vec<u64>) = match (&job.shard, &job.span) {
        (Some(shard), Some(span)) => {
            let subset = ArraySubset::new_with_ranges(span);
            let bytes = shard.partial_decode(&subset, &CodecOptions::default())?;
            (bytes.into_owned(), span.iter().map(|r| r.start).collect(), span.iter().map(|r| r.end - r.start).collect())
        }
        (_, Some(span)) => {
            let bytes: ArrayBytes<'static> =
                array.retrieve_chunk_subset(job.chunk, &ArraySubset::new_with_ranges(span))?;
            (bytes, span.iter().map(|r| r.start).collect(), span.iter().map(|r| r.end - r.start).collect())
        }
        (_, None) => {
            // A chunk never written is not made (up to `MAX_CHUNK_BYTES` of fill values for a
            // few elements): its pieces are filled where they land.
            let Some(bytes) = array.retrieve_chunk_if_exists::<ArrayBytes<'static>>(job.chunk)? else {
                let (origin, shape) = (Vec::new(), Vec::new());
                return Ok(Decoded { bytes: Vec::new(), origin, shape, pieces: job.pieces, filled: true });
            };
            let shape = array.chunk_shape(job.chunk)?.iter().map(|n| n.get()).collect();
            (bytes, vec![0; job.chunk.len()], shape)
        }
    };
    let bytes = bytes.into_fixed().map_err(|e| ArrayError::Spec(e.to_string()))?.into_owned();
    Ok(Decoded { bytes, origin, shape, pieces: job.pieces, filled: false })
}

/// Writes `fill` (one element) into every element of `piece` in `output`, shaped `shape`.
fn fill_piece(fill: &[u8], piece: &Piece, output: &mut [u8], shape: &[u64]) {
    let Some(&row) = piece.count.last() else { return };
    let dims = piece.count.len();
    // One row of fill values, read again for every row of the piece.
    let (mut row_shape, mut row_step) = (vec![1; dims], vec![0; dims]);
    (row_shape[dims - 1], row_step[dims - 1]) = (row, 1);
    let (zeros, ones) = (vec![0; dims], vec![1; dims]);
    let values = fill.repeat(row as usize);
    copy_box(
        fill.len(),
        &piece.count,
        &values,
        &row_shape,
        &zeros,
        &row_step,
        output,
        shape,
        &piece.region_start,
        &ones,
    );
}

/// Decodes `groups` (each the targets of one chunk) and copies every piece into `outputs`; the
/// bytes decoded.
fn read_groups(array: &ZArray, groups: &[&[Target<'_>]], outputs: &mut [&mut [u8]]) -> Result<u64, ArrayError> {
    let fill = array.fill_value().as_ne_bytes();
    let element = fill.len();
    let plans: Vec<Vec<Job<'_>>> = groups.par_iter().map(|group| plan(array, group)).collect::<Result<_, _>>()?;
    let decoded: Vec<Decoded<'_>> = plans
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .into_par_iter()
        .map(|job| decode(array, job))
        .collect::<Result<_, _>>()?;
    let mut spent = 0u64;
    for done in decoded {
        spent += done.bytes.len() as u64;
        for (piece, output, shape) in &done.pieces {
            if done.filled {
                fill_piece(fill, piece, outputs[*output], shape);
                continue;
            }
            let start: Vec<u64> = (0..done.origin.len()).map(|d| piece.local_start[d] - done.origin[d]).collect();
            // Trailing dimensions of extent 1 on both sides (EQSIM's last `1`) are dropped:
            // with them every element was a row of its own, its offsets computed anew.
            let keep = (1..=start.len()).rev().find(|&n| done.shape[n - 1] != 1 || shape[n - 1] != 1).unwrap_or(1);
            let ones = vec![1; keep];
            copy_box(
                element,
                &piece.count[..keep],
                &done.bytes,
                &done.shape[..keep],
                &start[..keep],
                &piece.step[..keep],
                outputs[*output],
                &shape[..keep],
                &piece.region_start[..keep],
                &ones,
            );
        }
    }
    Ok(spent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunks::{Extent, pieces};
    use crate::spec::{ArraySpec, DataType};

    #[test]
    fn a_read_is_refused_once_it_decodes_more_than_its_bound_and_unwritten_chunks_cost_nothing() {
        // 4 chunks of 64 int16 in a row, chunks 0 and 2 written: every 32nd element (2 from
        // each chunk, 16 bytes) decodes 2 x 128 bytes of written chunks.
        let spec = ArraySpec::new(vec![256], DataType::Int16, vec![64]);
        let metadata = serde_json::from_value(spec.metadata().unwrap()).unwrap();
        let store: Arc<dyn zarrs::storage::ReadableWritableListableStorageTraits> =
            Arc::new(zarrs::storage::store::MemoryStore::new());
        let array: ZArray = zarrs::array::Array::new_with_metadata(store, "/", metadata).unwrap();
        for chunk in [0u64, 2] {
            let values: Vec<i16> = (0..64).map(|i| chunk as i16 * 100 + i).collect();
            array.store_chunk(&[chunk], values).unwrap();
        }
        let extent = Extent { start: vec![0], count: vec![8], step: vec![32] };
        let read = |limit: u64| -> Result<Vec<u8>, ArrayError> {
            let shape = [8u64];
            let targets = pieces(&array, &extent)?.into_iter().map(|piece| Target { piece, output: 0, shape: &shape });
            let mut out = vec![0xaa; 16];
            read_pieces_within(&array, targets.collect(), &mut [&mut out], |decoded, wanted| {
                assert_eq!(wanted, 16);
                if decoded > limit { Err(SizeError::Decoded { wanted, decoded, limit }) } else { Ok(()) }
            })?;
            Ok(out)
        };
        let expected: Vec<u8> = [0i16, 32, 0, 0, 200, 232, 0, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(read(256).unwrap(), expected);
        assert!(matches!(read(255), Err(ArrayError::Size(SizeError::Decoded { .. }))));
    }

    fn piece(local_start: Vec<u64>, step: Vec<u64>, count: Vec<u64>) -> Piece {
        let dims = count.len();
        Piece { chunk: vec![0; dims], local_start, step, region_start: vec![0; dims], count }
    }

    #[test]
    fn a_strided_piece_touches_only_the_inner_chunks_holding_its_elements() {
        // Elements 0, 25, 50 of a 64-wide shard of 8-wide inner chunks: inner chunks 0, 3, 6.
        let subs = split(&piece(vec![0], vec![25], vec![3]), &[8]);
        let starts: Vec<(u64, u64, u64)> =
            subs.iter().map(|s| (s.local_start[0], s.region_start[0], s.count[0])).collect();
        assert_eq!(starts, vec![(0, 0, 1), (25, 1, 1), (50, 2, 1)]);
        // A dense run 5..21 crosses inner chunks 0, 1, 2 in runs of 3, 8 and 5.
        let subs = split(&piece(vec![5, 0], vec![1, 1], vec![16, 2]), &[8, 8]);
        let runs: Vec<(u64, u64, u64)> =
            subs.iter().map(|s| (s.local_start[0], s.region_start[0], s.count[0])).collect();
        assert_eq!(runs, vec![(5, 0, 3), (8, 3, 8), (16, 11, 5)]);
        // Every element lands once: the sub-pieces' counts add up to the piece's.
        let whole = piece(vec![3, 1, 0], vec![7, 2, 1], vec![9, 10, 4]);
        let subs = split(&whole, &[16, 4, 8]);
        let elements: u64 = subs.iter().map(|s| s.count.iter().product::<u64>()).sum();
        assert_eq!(elements, 9 * 10 * 4);
        assert!(subs.iter().all(|s| (0..3).all(|d| {
            let (first, last) = (s.local_start[d], s.local_start[d] + (s.count[d] - 1) * s.step[d]);
            first / [16, 4, 8][d] == last / [16, 4, 8][d]
        })));
    }
}
