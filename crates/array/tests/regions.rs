//! Property: for random shapes (1-5 dimensions), data types, chunk shapes, codecs (none, zstd,
//! gzip, blosc, crc32c, sharding with inner chunks) and strided regions, a region read through
//! the engine equals the same slice of an ndarray reference, and a region write changes exactly
//! the region's elements. The reference holds each element as its bytes (a trailing axis), so
//! every data type is compared bit for bit.

use std::sync::Arc;

use isthmus_access::Authorized;
use isthmus_array::{ArraySpec, Codec, DataType, Location, Region, ZarrArray};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{RequestContext, Store};
use ndarray::{ArrayD, Dimension, IxDyn, Slice};
use proptest::prelude::*;

/// An array's spec and a region inside it.
#[derive(Debug, Clone)]
struct Case {
    spec: ArraySpec,
    region: Region,
}

fn data_type() -> impl Strategy<Value = DataType> {
    prop_oneof![
        Just(DataType::UInt8),
        Just(DataType::Int16),
        Just(DataType::Int32),
        Just(DataType::Float32),
        Just(DataType::Int64),
        Just(DataType::Float64),
    ]
}

/// Codecs, and whether chunks are shards of inner chunks.
fn codecs() -> impl Strategy<Value = (Vec<Codec>, bool)> {
    prop_oneof![
        Just((vec![], false)),
        Just((vec![Codec::Zstd { level: 3, checksum: false }], false)),
        Just((vec![Codec::Gzip { level: 5 }], false)),
        Just((ArraySpec::parse_codecs("blosc:lz4:5:shuffle").unwrap(), false)),
        Just((vec![Codec::Crc32c], false)),
        Just((vec![Codec::Zstd { level: 1, checksum: false }, Codec::Crc32c], true)),
        // Uncompressed shards: written in place.
        Just((vec![], true)),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=5)
        .prop_flat_map(|dims| {
            let extent = if dims > 3 { 1u64..=4 } else { 1u64..=9 };
            (prop::collection::vec(extent, dims), prop::collection::vec(1u64..=4, dims), data_type(), codecs())
        })
        .prop_flat_map(|(shape, chunks, data_type, codecs)| {
            let per_dim: Vec<_> = shape
                .iter()
                .map(|&extent| {
                    (0..extent, 1u64..=3).prop_flat_map(move |(offset, stride)| {
                        let max = (extent - offset - 1) / stride + 1;
                        (Just(offset), 0..=max, Just(stride))
                    })
                })
                .collect();
            (Just(shape), Just(chunks), Just(data_type), Just(codecs), per_dim)
        })
        .prop_map(|(shape, chunks, data_type, (codecs, sharded), dims)| {
            let mut spec = ArraySpec::new(shape, data_type, chunks.clone());
            spec.codecs = codecs;
            if sharded {
                // Shards of two inner chunks per dimension.
                spec.chunk_shape = chunks.iter().map(|c| c * 2).collect();
                spec.inner_chunks = Some(chunks);
            }
            spec.fill_value = Some(3.0);
            let offset = dims.iter().map(|d| d.0).collect();
            let count = dims.iter().map(|d| d.1).collect();
            let stride = dims.iter().map(|d| d.2).collect();
            Case { spec, region: Region::new(offset, count).with_stride(stride) }
        })
}

/// A fresh engine with a bucket `arrays`, as a location.
fn engine(dir: &std::path::Path) -> Location {
    let store = Authorized::without_grants(PosixStore::open(dir, StoreOptions::default()).unwrap());
    store.create_bucket(&RequestContext::process(), "arrays", &Default::default()).unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    Location::Engine { store, cx: RequestContext::process(), bucket: "arrays".into(), prefix: String::new() }
}

/// The region's elements along dimension `d`, as an ndarray slice (the trailing byte axis whole).
fn slice_of(region: &Region, d: usize) -> Slice {
    if d == region.offset.len() {
        return Slice::from(..);
    }
    let stride = region.stride.as_ref().map_or(1, |s| s[d]);
    let start = region.offset[d] as isize;
    let span = if region.count[d] == 0 { 0 } else { (region.count[d] - 1) * stride + 1 };
    Slice::new(start, Some(start + span as isize), stride as isize)
}

/// `shape` with a trailing axis of one element's bytes.
fn byte_shape(shape: &[u64], element: usize) -> IxDyn {
    let mut dims: Vec<usize> = shape.iter().map(|&s| s as usize).collect();
    dims.push(element);
    IxDyn(&dims)
}

fn bytes_of(array: ArrayD<u8>) -> Vec<u8> {
    array.as_standard_layout().iter().copied().collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn regions_read_and_write_as_the_reference(case in case()) {
        let dir = tempfile::tempdir().unwrap();
        let array = ZarrArray::create(&engine(dir.path()), "a", &case.spec).unwrap();
        let (shape, region) = (&case.spec.shape, &case.region);
        let element = case.spec.data_type.size();
        // Arbitrary bytes: every bit pattern of every type must survive (NaN payloads included).
        let mut reference = ArrayD::from_shape_fn(byte_shape(shape, element), |ix| {
            ix.as_array_view().iter().fold(7u32, |acc, &i| acc.wrapping_mul(31).wrapping_add(i as u32)) as u8
        });
        if case.spec.data_type == DataType::Float32 || case.spec.data_type == DataType::Float64 {
            // Keep floats out of the signalling-NaN space some codecs may canonicalise.
            reference.mapv_inplace(|b| b & 0x3f);
        }
        let whole = Region::whole(shape);
        array.write(&whole, &bytes_of(reference.clone())).unwrap();

        let got = array.read_vec(region).unwrap();
        let expected = reference.slice_each_axis(|axis| slice_of(region, axis.axis.index())).to_owned();
        prop_assert_eq!(&got, &bytes_of(expected.clone()));

        let update: Vec<u8> = got.iter().map(|b| b.wrapping_add(1) & 0x3f).collect();
        array.write(region, &update).unwrap();
        let update = ArrayD::from_shape_vec(expected.raw_dim(), update).unwrap();
        reference.slice_each_axis_mut(|axis| slice_of(region, axis.axis.index())).assign(&update);
        let reopened = ZarrArray::open(&engine_again(dir.path()), "a").unwrap();
        prop_assert_eq!(reopened.read_vec(&whole).unwrap(), bytes_of(reference));
    }
}

/// The same engine opened again (the bucket exists).
fn engine_again(dir: &std::path::Path) -> Location {
    let store: Arc<dyn Store> =
        Arc::new(Authorized::without_grants(PosixStore::open(dir, StoreOptions::default()).unwrap()));
    Location::Engine { store, cx: RequestContext::process(), bucket: "arrays".into(), prefix: String::new() }
}

#[test]
fn regions_outside_the_array_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let array =
        ZarrArray::create(&engine(dir.path()), "a", &ArraySpec::new(vec![4, 4], DataType::Int32, vec![2, 2])).unwrap();
    let past = array.read_vec(&Region::new(vec![2, 0], vec![3, 1])).unwrap_err();
    assert!(past.to_string().contains("passes the array's extent 4"), "{past}");
    let strided = array.read_vec(&Region::new(vec![0, 0], vec![3, 1]).with_stride(vec![2, 1]));
    assert!(strided.is_err(), "0, 2, 4 passes an extent of 4");
    let dims = array.read_vec(&Region::new(vec![0], vec![1])).unwrap_err();
    assert!(dims.to_string().contains("1 dimensions, the array 2"), "{dims}");
    let zero = array.read_vec(&Region::new(vec![0, 0], vec![1, 1]).with_stride(vec![0, 1])).unwrap_err();
    assert!(zero.to_string().contains("stride must be at least 1"), "{zero}");
    let size = array.write(&Region::new(vec![0, 0], vec![2, 2]), &[0u8; 12]).unwrap_err();
    assert!(size.to_string().contains("the buffer has 12 bytes, the region needs 16"), "{size}");
}

#[test]
fn creating_over_an_existing_array_is_refused_and_opening_nothing_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let location = engine(dir.path());
    let spec = ArraySpec::new(vec![4], DataType::UInt8, vec![2]);
    ZarrArray::create(&location, "x/a", &spec).unwrap();
    let again = ZarrArray::create(&location, "x/a", &spec).err().expect("a second create");
    assert!(again.to_string().contains("already exists at /x/a"), "{again}");
    let missing = ZarrArray::open(&location, "x/b").err().expect("nothing there");
    assert!(missing.to_string().contains("no array or group at /x/b"), "{missing}");
}

#[test]
fn a_chunk_covered_whole_is_written_without_being_read() {
    // A chunk holding bytes that are not a valid zstd frame: a partial write must read (and
    // fail), a whole-chunk write must not.
    let dir = tempfile::tempdir().unwrap();
    let mut spec = ArraySpec::new(vec![8], DataType::UInt8, vec![4]);
    spec.codecs = vec![Codec::Zstd { level: 1, checksum: false }];
    let array = ZarrArray::create(&engine(dir.path()), "a", &spec).unwrap();
    std::fs::create_dir_all(dir.path().join("arrays/a/c")).unwrap();
    std::fs::write(dir.path().join("arrays/a/c/0"), b"not zstd").unwrap();
    assert!(array.write(&Region::new(vec![1], vec![2]), &[1, 2]).is_err(), "a partial write reads the chunk");
    array.write(&Region::new(vec![0], vec![4]), &[1, 2, 3, 4]).unwrap();
    assert_eq!(array.read_vec(&Region::new(vec![0], vec![4])).unwrap(), vec![1, 2, 3, 4]);
}

#[test]
fn whole_chunks_written_straight_from_the_buffer_land_in_place() {
    // Chunks that are contiguous runs of the caller's buffer (rows of full width, planes), with
    // and without compression, next to partial ones.
    for codecs in ["", "zstd:1"] {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = ArraySpec::new(vec![5, 4, 6], DataType::Int16, vec![1, 4, 6]);
        spec.codecs = ArraySpec::parse_codecs(codecs).unwrap();
        let array = ZarrArray::create(&engine(dir.path()), "a", &spec).unwrap();
        let values: Vec<u8> = (0..3 * 4 * 6).flat_map(|i: i16| (i * 3 - 7).to_le_bytes()).collect();
        array.write(&Region::new(vec![1, 0, 0], vec![3, 4, 6]), &values).unwrap();
        assert_eq!(array.read_vec(&Region::new(vec![1, 0, 0], vec![3, 4, 6])).unwrap(), values);
        let fill: Vec<u8> = vec![0; 4 * 6 * 2];
        assert_eq!(array.read_vec(&Region::new(vec![0, 0, 0], vec![1, 4, 6])).unwrap(), fill);
        // A region inside one plane, then planes again over it.
        array.write(&Region::new(vec![2, 1, 1], vec![1, 2, 2]), &[9; 8]).unwrap();
        let plane = array.read_vec(&Region::new(vec![2, 1, 1], vec![1, 2, 2])).unwrap();
        assert_eq!(plane, vec![9; 8]);
    }
}

#[test]
fn chunks_never_written_read_as_the_fill_value_without_being_made() {
    // A strided read over written and unwritten chunks, into a buffer that is not zeroed: every
    // element of a chunk never written is the fill value.
    let dir = tempfile::tempdir().unwrap();
    let location = engine(dir.path());
    let mut spec = ArraySpec::new(vec![9, 10], DataType::Int16, vec![4, 3]);
    spec.fill_value = Some(-3.0);
    let array = ZarrArray::create(&location, "a", &spec).unwrap();
    let value = |row: u64, column: u64| if (4..8).contains(&row) { (row * 10 + column) as i16 } else { -3 };
    let rows: Vec<u8> = (4..8).flat_map(|r| (0..10).flat_map(move |c| value(r, c).to_le_bytes())).collect();
    array.write(&Region::new(vec![4, 0], vec![4, 10]), &rows).unwrap();
    let region = Region::new(vec![1, 1], vec![4, 3]).with_stride(vec![2, 4]);
    let mut out = vec![0xaa; 4 * 3 * 2];
    array.read(&region, &mut out).unwrap();
    let expected: Vec<u8> = [1, 3, 5, 7]
        .into_iter()
        .flat_map(|r| [1, 5, 9].into_iter().flat_map(move |c| value(r, c).to_le_bytes()))
        .collect();
    assert_eq!(out, expected);
    // A few elements from each of 64 chunks of 1 GiB never written: none is made (each was a
    // 1 GiB allocation of fill values before, 64 GiB for this read of 128 KiB).
    let spec = ArraySpec::new(vec![4096, 4096, 4096], DataType::UInt8, vec![1024, 1024, 1024]);
    let big = ZarrArray::create(&location, "big", &spec).unwrap();
    let region = Region::new(vec![0, 0, 0], vec![8, 8, 2048]).with_stride(vec![512, 512, 2]);
    assert_eq!(big.read_vec(&region).unwrap(), vec![0; 8 * 8 * 2048]);
}
