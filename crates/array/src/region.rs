//! Regions of an array: an offset and a count per dimension, optionally a stride (every
//! `stride`-th element, as downsampling reads ask). A region is checked against an array's
//! shape once, here; `chunks` then moves its elements chunk by chunk.

use crate::chunks::Extent;

/// A region: `count[d]` elements of dimension `d` from `offset[d]`, every `stride[d]`-th
/// (all 1 when `stride` is `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    pub offset: Vec<u64>,
    pub count: Vec<u64>,
    pub stride: Option<Vec<u64>>,
}

/// Why a region cannot be used with an array.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegionError {
    #[error("the region has {region} dimensions, the array {array}")]
    Dimensions { region: usize, array: usize },
    #[error("dimension {dim}: offset {offset} + count {count} (stride {stride}) passes the array's extent {extent}")]
    OutOfBounds { dim: usize, offset: u64, count: u64, stride: u64, extent: u64 },
    #[error("dimension {dim}: a stride must be at least 1")]
    ZeroStride { dim: usize },
    #[error("the buffer has {buffer} bytes, the region needs {region} ({elements} elements of {element_size} bytes)")]
    BufferSize { buffer: usize, region: u64, elements: u64, element_size: usize },
}

impl Region {
    /// The region `offset .. offset + count` with stride 1.
    pub fn new(offset: Vec<u64>, count: Vec<u64>) -> Self {
        Self { offset, count, stride: None }
    }

    /// The same region, every `stride[d]`-th element.
    pub fn with_stride(self, stride: Vec<u64>) -> Self {
        Self { stride: Some(stride), ..self }
    }

    /// The whole of an array of `shape`.
    pub fn whole(shape: &[u64]) -> Self {
        Self::new(vec![0; shape.len()], shape.to_vec())
    }

    /// The shape of the region's elements.
    pub fn shape(&self) -> Vec<u64> {
        self.count.clone()
    }

    /// The number of elements (`None` if it does not fit in 64 bits).
    pub fn elements(&self) -> Option<u64> {
        crate::size::elements("a region", &self.count).ok()
    }

    /// The region checked against an array of shape `extent`.
    pub(crate) fn extent(&self, extent: &[u64]) -> Result<Extent, RegionError> {
        let dims = extent.len();
        for len in [self.offset.len(), self.count.len(), self.stride.as_ref().map_or(dims, Vec::len)] {
            if len != dims {
                return Err(RegionError::Dimensions { region: len, array: dims });
            }
        }
        let step: Vec<u64> = (0..dims).map(|d| self.stride.as_ref().map_or(1, |s| s[d])).collect();
        for dim in 0..dims {
            let (offset, count, stride) = (self.offset[dim], self.count[dim], step[dim]);
            if stride == 0 {
                return Err(RegionError::ZeroStride { dim });
            }
            let span = match count {
                0 => Some(0),
                _ => (count - 1).checked_mul(stride).and_then(|s| s.checked_add(1)),
            };
            if span.and_then(|span| offset.checked_add(span)).is_none_or(|end| end > extent[dim]) {
                return Err(RegionError::OutOfBounds { dim, offset, count, stride, extent: extent[dim] });
            }
        }
        Ok(Extent { start: self.offset.clone(), count: self.count.clone(), step })
    }
}
