//! Sizes computed from untrusted metadata: a `zarr.json`'s shape and chunk shape, an HDF5
//! file's dataspace and chunk dimensions, a request's region. Every product is checked here, in
//! one place, and a chunk is bounded before anything is allocated for it; an array whose size
//! does not fit is refused when it is opened, so the arithmetic on its regions and chunks that
//! follows cannot wrap.

/// The largest chunk (decoded) this engine reads or writes: a chunk is decoded whole, so one
/// bigger than this would make one request allocate that much.
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;

/// The most chunks one read or write of a region touches: each costs a record of its place,
/// so a region of millions of one-element chunks would cost far more memory than its bytes.
pub const MAX_CHUNKS_PER_CALL: u64 = 1 << 20;

/// The most bytes one read decodes for each byte it returns, once it has decoded more than
/// `DECODE_ALLOWANCE`. A read that takes few elements from each of many large or compressed
/// chunks decodes them whole: a 128 KiB strided read of 64 chunks of 1 GiB decoded 64 GiB.
/// Decision: 1024x, so a downsampling by 32 in two dimensions (or a column of 2-D chunks up to
/// 1024 wide) of any size still reads in one call; past it a read is refused and is taken in
/// parts. Chunks never written are not decoded and not counted.
pub const MAX_DECODE_RATIO: u64 = 1024;

/// What any read may decode whatever it returns: 16 chunks of the largest size. Decision: a
/// time series through chunks that hold one step each (a pixel's history through 4 MiB
/// chunks: 4 MiB decoded per 4 bytes returned) is the common read with the highest ratio; up to
/// 4096 such steps read in one call, and a read crafted to decode much for little is bounded
/// to 16 GiB of work (seconds of one blocking thread, never memory: chunks are decoded one at
/// a time).
pub const DECODE_ALLOWANCE: u64 = 16 * MAX_CHUNK_BYTES;

/// Why a size from metadata is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    #[error("{what} of shape {shape:?} has more than 2^64 elements")]
    Elements { what: &'static str, shape: Vec<u64> },
    #[error("{what} of shape {shape:?} with {element_size}-byte elements has more than 2^64 bytes")]
    Bytes { what: &'static str, shape: Vec<u64>, element_size: u64 },
    #[error("{what} of shape {shape:?} is {bytes} bytes, more than the {limit} bytes this gateway decodes at once")]
    TooLarge { what: &'static str, shape: Vec<u64>, bytes: u64, limit: u64 },
    #[error("the region touches {chunks} chunks, more than the {limit} one call reads or writes: take it in parts")]
    Chunks { chunks: u64, limit: u64 },
    #[error(
        "reading {wanted} bytes decoded {decoded} bytes of chunks, more than the {limit} one read may decode \
         ({MAX_DECODE_RATIO} times its bytes, at least {DECODE_ALLOWANCE}): it takes few elements from each of many \
         large or compressed chunks; take it in parts"
    )]
    Decoded { wanted: u64, decoded: u64, limit: u64 },
}

/// `decoded` bytes of chunks decoded so far by a read returning `wanted` bytes, refused above
/// `MAX_DECODE_RATIO` times `wanted` (at least `DECODE_ALLOWANCE`).
pub fn decoded_bytes(decoded: u64, wanted: u64) -> Result<(), SizeError> {
    let limit = wanted.saturating_mul(MAX_DECODE_RATIO).max(DECODE_ALLOWANCE);
    if decoded > limit {
        return Err(SizeError::Decoded { wanted, decoded, limit });
    }
    Ok(())
}

/// `chunks` (the chunks a call touches, per dimension), refused above `MAX_CHUNKS_PER_CALL`.
pub fn chunk_count(per_dimension: &[u64]) -> Result<u64, SizeError> {
    let chunks = per_dimension.iter().try_fold(1u64, |n, &d| n.checked_mul(d)).unwrap_or(u64::MAX);
    if chunks > MAX_CHUNKS_PER_CALL {
        return Err(SizeError::Chunks { chunks, limit: MAX_CHUNKS_PER_CALL });
    }
    Ok(chunks)
}

/// The number of elements of `shape` (1 for a scalar), or an error naming `what` if it
/// overflows.
pub fn elements(what: &'static str, shape: &[u64]) -> Result<u64, SizeError> {
    shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(|| SizeError::Elements { what, shape: shape.to_vec() })
}

/// The bytes of `shape` with `element_size`-byte elements.
pub fn bytes(what: &'static str, shape: &[u64], element_size: u64) -> Result<u64, SizeError> {
    elements(what, shape)?.checked_mul(element_size).ok_or_else(|| SizeError::Bytes {
        what,
        shape: shape.to_vec(),
        element_size,
    })
}

/// `bytes`, refused above `limit`.
pub fn bounded_bytes(what: &'static str, shape: &[u64], element_size: u64, limit: u64) -> Result<u64, SizeError> {
    let size = bytes(what, shape, element_size)?;
    if size > limit {
        return Err(SizeError::TooLarge { what, shape: shape.to_vec(), bytes: size, limit });
    }
    Ok(size)
}

/// A chunk's decoded bytes, refused above `MAX_CHUNK_BYTES`.
pub fn chunk_bytes(shape: &[u64], element_size: u64) -> Result<u64, SizeError> {
    bounded_bytes("a chunk", shape, element_size, MAX_CHUNK_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_that_wrap_are_refused() {
        assert_eq!(elements("x", &[]), Ok(1));
        assert_eq!(elements("x", &[3, 0, 5]), Ok(0));
        assert_eq!(bytes("x", &[4, 5], 8), Ok(160));
        // Issue 28, finding 1: [2^40]*3 wrapped to 0, [2^61 + 1, 8] to 8.
        assert!(matches!(elements("x", &[1 << 40, 1 << 40, 1 << 40]), Err(SizeError::Elements { .. })));
        assert!(matches!(elements("x", &[(1 << 61) + 1, 8]), Err(SizeError::Elements { .. })));
        assert!(matches!(bytes("x", &[1 << 61, 1], 8), Err(SizeError::Bytes { .. })));
        assert_eq!(chunk_bytes(&[1 << 14, 1 << 15], 2), Ok(MAX_CHUNK_BYTES));
        assert!(matches!(chunk_bytes(&[1 << 15, 1 << 15], 2), Err(SizeError::TooLarge { .. })));
        assert_eq!(chunk_count(&[1 << 10, 1 << 10]), Ok(MAX_CHUNKS_PER_CALL));
        assert!(matches!(chunk_count(&[1 << 40, 1 << 40]), Err(SizeError::Chunks { .. })));
        assert_eq!(decoded_bytes(DECODE_ALLOWANCE, 1), Ok(()));
        assert!(matches!(decoded_bytes(DECODE_ALLOWANCE + 1, 1), Err(SizeError::Decoded { .. })));
        assert_eq!(decoded_bytes(MAX_DECODE_RATIO << 30, 1 << 30), Ok(()));
        assert!(matches!(decoded_bytes((MAX_DECODE_RATIO << 30) + 1, 1 << 30), Err(SizeError::Decoded { .. })));
        assert_eq!(decoded_bytes(DECODE_ALLOWANCE, 4096 * 4), Ok(()), "a time series of 4096 steps");
        assert!(matches!(decoded_bytes(u64::MAX, u64::MAX / 2), Ok(())));
    }
}
