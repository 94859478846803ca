//! A region's writes, chunk by chunk: its pieces grouped by chunk and each chunk written as one
//! object (`chunks::write_chunk`) or, for an array of uncompressed shards, into its shard in
//! place (`in_place`); chunks in parallel on the current rayon pool.

use rayon::prelude::*;

use crate::ArrayError;
use crate::backend::ChunkStore;
use crate::chunks::{self, Source, ZArray};
use crate::in_place::FixedShards;

/// Writes every chunk of `sources` (grouped by chunk, in chunk order), in parallel; `shards`
/// is the array's fixed shard layout, if it has one.
pub(crate) fn write_pieces(
    array: &ZArray,
    shards: Option<&FixedShards>,
    store: &dyn ChunkStore,
    mut sources: Vec<Source<'_>>,
) -> Result<(), ArrayError> {
    sources.sort_by(|a, b| a.piece.chunk.cmp(&b.piece.chunk));
    let groups: Vec<&[Source<'_>]> = sources.chunk_by(|a, b| a.piece.chunk == b.piece.chunk).collect();
    let write = |group: &&[Source<'_>]| {
        let chunk = &group[0].piece.chunk;
        match shards {
            Some(layout) => layout.write_shard(array, store, chunk, group),
            None => chunks::write_chunk(array, store, chunk, group),
        }
    };
    // One chunk is written on this thread: a parallel iterator would hand it to a pool thread
    // (rayon's global pool when called from outside one) and wait, for nothing to overlap.
    if let [group] = groups[..] {
        return write(&group);
    }
    groups.par_iter().try_for_each(write)
}
