//! What the in-process doors (the C library, the libs3 drop-in, the Python package) share:
//! byte ranges from an offset and a length without overflow, HTTP Range headers, the loop that
//! streams a body out in chunks (the engine's `stream_out`), and the guard that keeps a panic
//! from crossing into a host program. Here, not in the engine: the engine knows no door.

use std::num::NonZeroU64;
use std::panic::{AssertUnwindSafe, catch_unwind};

pub use isthmus_store::stream_out;
use isthmus_store::{ByteRange, StoreError, StoreResult};

/// The range of an object from `offset`, `length` bytes long or to the end when `length` is
/// `None`. An offset and length that would pass the largest possible object are refused
/// instead of wrapping around.
pub fn range_of(offset: u64, length: Option<NonZeroU64>) -> StoreResult<Option<ByteRange>> {
    match length {
        None if offset == 0 => Ok(None),
        None => Ok(Some(ByteRange::FromTo { first: offset, last: None })),
        Some(n) => match offset.checked_add(n.get() - 1) {
            Some(last) => Ok(Some(ByteRange::FromTo { first: offset, last: Some(last) })),
            None => Err(StoreError::InvalidArgument(format!(
                "offset {offset} plus length {n} is past the largest possible object"
            ))),
        },
    }
}

/// An HTTP Range header of one range: `bytes=first-last`, `bytes=first-` or `bytes=-suffix`.
pub fn http_range(header: &str) -> StoreResult<ByteRange> {
    let invalid =
        || StoreError::InvalidArgument(format!("invalid Range {header:?}: use bytes=FIRST-LAST, FIRST- or -N"));
    let spec = header.trim().strip_prefix("bytes=").ok_or_else(invalid)?;
    let (first, last) = spec.split_once('-').ok_or_else(invalid)?;
    let number = |s: &str| s.trim().parse::<u64>().map_err(|_| invalid());
    match (first.trim(), last.trim()) {
        ("", "") => Err(invalid()),
        ("", suffix) => Ok(ByteRange::Suffix(number(suffix)?)),
        (first, "") => Ok(ByteRange::FromTo { first: number(first)?, last: None }),
        (first, last) => Ok(ByteRange::FromTo { first: number(first)?, last: Some(number(last)?) }),
    }
}

/// Runs a door's call so that a panic in it becomes an error instead of unwinding into (or
/// aborting) the host program.
pub fn guard<T, E: From<StoreError>>(call: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(StoreError::Io(std::io::Error::other(format!("internal error in the engine: {what}"))).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_never_wrap() {
        let n = |v: u64| NonZeroU64::new(v);
        assert_eq!(range_of(0, None).unwrap(), None);
        assert_eq!(range_of(5, None).unwrap(), Some(ByteRange::FromTo { first: 5, last: None }));
        assert_eq!(range_of(0, n(1)).unwrap(), Some(ByteRange::FromTo { first: 0, last: Some(0) }));
        assert_eq!(range_of(10, n(5)).unwrap(), Some(ByteRange::FromTo { first: 10, last: Some(14) }));
        assert_eq!(range_of(1, n(u64::MAX)).unwrap(), Some(ByteRange::FromTo { first: 1, last: Some(u64::MAX) }));
        assert!(matches!(range_of(2, n(u64::MAX)), Err(StoreError::InvalidArgument(_))));
        assert!(matches!(range_of(u64::MAX, n(2)), Err(StoreError::InvalidArgument(_))));
    }

    #[test]
    fn http_ranges_parse() {
        assert_eq!(http_range("bytes=-100").unwrap(), ByteRange::Suffix(100));
        assert_eq!(http_range("bytes=3-").unwrap(), ByteRange::FromTo { first: 3, last: None });
        assert!(http_range("bytes=-").is_err() && http_range("items=1-2").is_err());
    }

    #[test]
    fn panics_become_errors() {
        let result: StoreResult<()> = guard(|| panic!("boom"));
        assert!(matches!(result, Err(StoreError::Io(e)) if e.to_string().contains("boom")));
    }
}
