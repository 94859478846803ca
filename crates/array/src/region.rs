//! Regions of an array: an offset and a count per dimension, optionally a stride (every
//! `stride`-th element, as downsampling reads ask). Reads and writes go through zarrs, which
//! touches only the chunks a region intersects: chunks a write covers whole are written without
//! being read, partly covered ones are read, merged and written back (each chunk one atomic
//! object write).

use std::ops::Range;

use ndarray::{ArrayD, Slice};
use zarrs::array::{Array, ArrayError, ElementOwned};
use zarrs::storage::{ReadableStorageTraits, ReadableWritableStorageTraits};

/// A region: `count[d]` elements of dimension `d` from `offset[d]`, every `stride[d]`-th
/// (all 1 when `stride` is `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    pub offset: Vec<u64>,
    pub count: Vec<u64>,
    pub stride: Option<Vec<u64>>,
}

/// Why a region cannot be used with an array.
#[derive(Debug, thiserror::Error)]
pub enum RegionError {
    #[error("the region has {region} dimensions, the array {array}")]
    Dimensions { region: usize, array: usize },
    #[error("dimension {dim}: offset {offset} + count {count} (stride {stride}) passes the array's extent {extent}")]
    OutOfBounds { dim: usize, offset: u64, count: u64, stride: u64, extent: u64 },
    #[error("dimension {dim}: a stride must be at least 1")]
    ZeroStride { dim: usize },
    #[error("the data has shape {data:?}, the region {region:?}")]
    Shape { data: Vec<usize>, region: Vec<usize> },
    #[error(transparent)]
    Array(#[from] ArrayError),
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

    fn stride_of(&self, dim: usize) -> u64 {
        self.stride.as_ref().map_or(1, |s| s[dim])
    }

    /// The shape of the region's elements.
    pub fn shape(&self) -> Vec<usize> {
        self.count.iter().map(|&c| c as usize).collect()
    }

    /// The smallest box holding the region, checked against `extent` (the array's shape).
    fn bounding_box(&self, extent: &[u64]) -> Result<Vec<Range<u64>>, RegionError> {
        let dims = extent.len();
        for len in [self.offset.len(), self.count.len(), self.stride.as_ref().map_or(dims, Vec::len)] {
            if len != dims {
                return Err(RegionError::Dimensions { region: len, array: dims });
            }
        }
        (0..dims)
            .map(|dim| {
                let (offset, count, stride) = (self.offset[dim], self.count[dim], self.stride_of(dim));
                if stride == 0 {
                    return Err(RegionError::ZeroStride { dim });
                }
                let span = match count {
                    0 => Some(0),
                    _ => (count - 1).checked_mul(stride).and_then(|s| s.checked_add(1)),
                }
                .unwrap_or(u64::MAX);
                match offset.checked_add(span) {
                    Some(end) if end <= extent[dim] => Ok(offset..end),
                    _ => Err(RegionError::OutOfBounds { dim, offset, count, stride, extent: extent[dim] }),
                }
            })
            .collect()
    }

    fn is_strided(&self) -> bool {
        self.stride.as_ref().is_some_and(|s| s.iter().any(|&x| x != 1))
    }
}

/// Reads `region` of `array`.
pub fn read_region<T, S>(array: &Array<S>, region: &Region) -> Result<ArrayD<T>, RegionError>
where
    T: ElementOwned,
    S: ?Sized + ReadableStorageTraits + 'static,
{
    let bounds = region.bounding_box(array.shape())?;
    let whole: ArrayD<T> = array.retrieve_array_subset(&bounds.as_slice())?;
    if !region.is_strided() {
        return Ok(whole);
    }
    let strided = whole.slice_each_axis(|axis| Slice::new(0, None, region.stride_of(axis.axis.index()) as isize));
    Ok(strided.to_owned())
}

/// Writes `data` (shaped as the region) into `region` of `array`. A strided region reads its
/// bounding box, sets the region's elements and writes the box back.
pub fn write_region<T, S>(array: &Array<S>, region: &Region, data: &ArrayD<T>) -> Result<(), RegionError>
where
    T: ElementOwned,
    S: ?Sized + ReadableWritableStorageTraits + 'static,
{
    let bounds = region.bounding_box(array.shape())?;
    if data.shape() != region.shape().as_slice() {
        return Err(RegionError::Shape { data: data.shape().to_vec(), region: region.shape() });
    }
    if !region.is_strided() {
        let elements: Vec<T> = data.iter().cloned().collect();
        array.store_array_subset(&bounds.as_slice(), elements)?;
        return Ok(());
    }
    let mut whole: ArrayD<T> = array.retrieve_array_subset(&bounds.as_slice())?;
    whole.slice_each_axis_mut(|axis| Slice::new(0, None, region.stride_of(axis.axis.index()) as isize)).assign(data);
    let elements: Vec<T> = whole.iter().cloned().collect();
    array.store_array_subset(&bounds.as_slice(), elements)?;
    Ok(())
}
