//! Rebuilding lost data shards as a sum of the k shards read, each times a factor. The code is
//! linear over GF(2^16), symbol by symbol, so each lost data shard is one fixed combination of
//! the shards used; the factors depend only on which shards those are (the erasure pattern).
//! They are found once per pattern by decoding unit shards with `reed-solomon-simd` itself and
//! kept; a block is then rebuilt with the library's own SIMD multiply and XOR. The library's
//! decoder costs a fixed ~0.3 ms per call (an evaluation over the whole field) and transforms
//! all shards: with one drive slow, a 4+2 pool decodes most blocks, at about 1 ms per MiB; the
//! combination takes a fifth of that.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use reed_solomon_simd::engine::{DefaultEngine, Engine, tables, utils};

/// The bytes the library works on at once; shards whose length is not a multiple of it go to
/// the library's decoder.
const LANE: usize = 64;
/// Erasure patterns whose factors are kept (a pool meets a handful; the map is emptied when full).
const MAX_PATTERNS: usize = 4096;

/// Which shards rebuild a block: k and m, and the k shard indices used (data shards first,
/// parity shards as k + their index), ascending.
type Pattern = (usize, usize, Vec<usize>);

/// The factors of one pattern: for each lost data shard (ascending), the factor of each shard
/// used, in the pattern's order.
struct Recipe {
    lost: Vec<usize>,
    factors: Vec<Vec<u16>>,
}

fn recipes() -> &'static Mutex<HashMap<Pattern, Arc<Recipe>>> {
    static RECIPES: OnceLock<Mutex<HashMap<Pattern, Arc<Recipe>>>> = OnceLock::new();
    RECIPES.get_or_init(Default::default)
}

fn engine() -> &'static DefaultEngine {
    static ENGINE: OnceLock<DefaultEngine> = OnceLock::new();
    ENGINE.get_or_init(DefaultEngine::new)
}

/// The lost data shards of a block of `data` + `parity` shards, from exactly `data` good ones:
/// `originals` (data shard index, bytes) and `recovery` (parity shard index, bytes), all of
/// one length. What `reed_solomon_simd::decode` gives, for less work.
pub(super) fn rebuild(
    data: usize,
    parity: usize,
    originals: &[(usize, &[u8])],
    recovery: &[(usize, &[u8])],
) -> Result<BTreeMap<usize, Vec<u8>>, reed_solomon_simd::Error> {
    let shard_len = originals.iter().chain(recovery).map(|(_, s)| s.len()).next().unwrap_or(0);
    if originals.len() + recovery.len() != data
        || shard_len == 0
        || !shard_len.is_multiple_of(LANE)
        || originals.iter().chain(recovery).any(|(_, s)| s.len() != shard_len)
    {
        return library(data, parity, originals, recovery);
    }
    let used: Vec<usize> = originals.iter().map(|&(i, _)| i).chain(recovery.iter().map(|&(i, _)| data + i)).collect();
    let mut sorted = used.clone();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.len() != used.len() || sorted.last().is_some_and(|&last| last >= data + parity) {
        return library(data, parity, originals, recovery);
    }
    let recipe = recipe(data, parity, sorted.clone())?;
    let bytes_of = |index: usize| -> &[u8] {
        let position = used.iter().position(|&u| u == index).expect("a used shard");
        if index < data { originals[position].1 } else { recovery[position - originals.len()].1 }
    };
    let exp_log = tables::get_exp_log();
    let mut scratch = vec![0u8; shard_len];
    let mut restored = BTreeMap::new();
    for (&lost, factors) in recipe.lost.iter().zip(&recipe.factors) {
        let mut out = vec![0u8; shard_len];
        for (&index, &factor) in sorted.iter().zip(factors) {
            if factor == 0 {
                continue;
            }
            let shard = bytes_of(index);
            let (into, _) = out.as_chunks_mut::<LANE>();
            if factor == 1 {
                utils::xor(into, shard.as_chunks::<LANE>().0);
                continue;
            }
            scratch.copy_from_slice(shard);
            let (term, _) = scratch.as_chunks_mut::<LANE>();
            engine().mul(term, exp_log.log[usize::from(factor)]);
            utils::xor(into, term);
        }
        restored.insert(lost, out);
    }
    Ok(restored)
}

/// The library's decoder, for what `rebuild` does not take.
fn library(
    data: usize,
    parity: usize,
    originals: &[(usize, &[u8])],
    recovery: &[(usize, &[u8])],
) -> Result<BTreeMap<usize, Vec<u8>>, reed_solomon_simd::Error> {
    Ok(reed_solomon_simd::decode(data, parity, originals.iter().copied(), recovery.iter().copied())?
        .into_iter()
        .collect())
}

/// The factors of the pattern `used` (k shard indices, ascending), found once: decoding a
/// one-lane block whose shards are all zero but the first symbol of one used shard, which is
/// 1, gives each lost shard's first symbol as that shard's factor.
fn recipe(data: usize, parity: usize, used: Vec<usize>) -> Result<Arc<Recipe>, reed_solomon_simd::Error> {
    let key = (data, parity, used);
    if let Some(recipe) = recipes().lock().expect("recipe lock").get(&key) {
        return Ok(recipe.clone());
    }
    let used = &key.2;
    let lost: Vec<usize> = (0..data).filter(|i| !used.contains(i)).collect();
    let mut factors = vec![Vec::with_capacity(used.len()); lost.len()];
    for &one in used {
        let unit = |index: usize| {
            let mut shard = [0u8; LANE];
            shard[0] = u8::from(index == one);
            (index, shard)
        };
        let originals: Vec<(usize, [u8; LANE])> = used.iter().filter(|&&i| i < data).map(|&i| unit(i)).collect();
        let recovery: Vec<(usize, [u8; LANE])> =
            used.iter().filter(|&&i| i >= data).map(|&i| (i - data, unit(i).1)).collect();
        let restored = reed_solomon_simd::decode(data, parity, originals, recovery)?;
        for (factors, index) in factors.iter_mut().zip(&lost) {
            // A symbol is a lane's byte p (low) and byte p + 32 (high).
            let symbol = restored.get(index).map_or(0, |s| u16::from(s[0]) | (u16::from(s[LANE / 2]) << 8));
            factors.push(symbol);
        }
    }
    let recipe = Arc::new(Recipe { lost, factors });
    let mut recipes = recipes().lock().expect("recipe lock");
    if recipes.len() >= MAX_PATTERNS {
        recipes.clear();
    }
    recipes.insert(key, recipe.clone());
    Ok(recipe)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(len: usize, seed: &mut u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                *seed ^= *seed << 13;
                *seed ^= *seed >> 7;
                *seed ^= *seed << 17;
                *seed as u8
            })
            .collect()
    }

    /// Every choice of k shards out of k + m (small layouts) or many (wide ones) rebuilds
    /// exactly what the library's decoder rebuilds, for lengths of one lane to many.
    #[test]
    fn rebuilds_what_the_library_decodes() {
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        for (k, m) in [(1, 1), (2, 1), (3, 2), (4, 2), (4, 4), (5, 3), (8, 2), (10, 4), (16, 2), (20, 6)] {
            for len in [64, 4096 + 64, 65536] {
                let shards: Vec<Vec<u8>> = (0..k).map(|_| random(len, &mut seed)).collect();
                let parity = reed_solomon_simd::encode(k, m, &shards).unwrap();
                let all: Vec<&[u8]> = shards.iter().chain(&parity).map(Vec::as_slice).collect();
                // Patterns: every subset of size k when there are few, else 16 random ones.
                let patterns: Vec<Vec<usize>> = if k + m <= 10 {
                    (0u32..1 << (k + m))
                        .filter(|set| set.count_ones() as usize == k)
                        .map(|set| (0..k + m).filter(|i| set & (1 << i) != 0).collect())
                        .collect()
                } else {
                    (0..16)
                        .map(|_| {
                            let mut order: Vec<usize> = (0..k + m).collect();
                            for i in (1..order.len()).rev() {
                                order.swap(i, random(1, &mut seed)[0] as usize % (i + 1));
                            }
                            let mut used = order[..k].to_vec();
                            used.sort_unstable();
                            used
                        })
                        .collect()
                };
                for used in patterns {
                    let originals: Vec<(usize, &[u8])> =
                        used.iter().filter(|&&i| i < k).map(|&i| (i, all[i])).collect();
                    let recovery: Vec<(usize, &[u8])> =
                        used.iter().filter(|&&i| i >= k).map(|&i| (i - k, all[i])).collect();
                    let fast = rebuild(k, m, &originals, &recovery).unwrap();
                    let slow = library(k, m, &originals, &recovery).unwrap();
                    assert_eq!(fast.keys().collect::<Vec<_>>(), slow.keys().collect::<Vec<_>>(), "{k}+{m} {used:?}");
                    for (index, bytes) in &fast {
                        assert!(*bytes == shards[*index], "{k}+{m}, {len} bytes, from {used:?}: shard {index} wrong");
                        assert!(*bytes == slow[index]);
                    }
                }
            }
        }
    }

    #[test]
    fn what_it_does_not_take_goes_to_the_library() {
        let mut seed = 7;
        let shards: Vec<Vec<u8>> = (0..4).map(|_| random(66, &mut seed)).collect();
        let parity = reed_solomon_simd::encode(4, 2, &shards).unwrap();
        // A length that is not whole lanes, and more shards than needed.
        let originals: Vec<(usize, &[u8])> = vec![(1, &shards[1]), (2, &shards[2]), (3, &shards[3])];
        let recovery: Vec<(usize, &[u8])> = vec![(0, &parity[0]), (1, &parity[1])];
        let restored = rebuild(4, 2, &originals, &recovery).unwrap();
        assert_eq!(restored[&0], shards[0]);
        assert!(rebuild(4, 2, &originals[..2], &recovery[..1]).is_err(), "too few shards is an error");
    }
}
