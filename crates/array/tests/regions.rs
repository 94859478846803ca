//! Property: for random shapes (1-4 dimensions), chunk shapes, codecs (none, zstd, gzip,
//! crc32c, sharding) and strided regions, a region
//! read through the engine equals the same slice of an ndarray reference, and a region write
//! changes exactly the region's elements.

use std::sync::Arc;

use isthmus_array::{EngineStorage, Region, read_region, write_region};
use isthmus_store::{Authorized, PosixStore, RequestContext, Store, StoreOptions};
use ndarray::{ArrayD, Dimension, IxDyn, Slice};
use proptest::prelude::*;
use zarrs::array::{ArrayBuilder, data_type};
use zarrs::storage::ReadableWritableListableStorage;

/// How chunks are encoded.
#[derive(Debug, Clone, Copy)]
enum Codecs {
    Plain,
    Zstd,
    Gzip,
    Crc32c,
    /// Sharding with inner chunks of one element per dimension (zstd inside).
    Sharded,
}

/// An array's shape, chunk shape and codecs, and a region inside it.
#[derive(Debug, Clone)]
struct Case {
    shape: Vec<u64>,
    chunks: Vec<u64>,
    codecs: Codecs,
    region: Region,
}

fn codecs() -> impl Strategy<Value = Codecs> {
    prop_oneof![
        Just(Codecs::Plain),
        Just(Codecs::Zstd),
        Just(Codecs::Gzip),
        Just(Codecs::Crc32c),
        Just(Codecs::Sharded)
    ]
}

/// A new int32 array of `case` at `/a` in `storage`.
fn create(
    storage: ReadableWritableListableStorage,
    case: &Case,
) -> zarrs::array::Array<dyn zarrs::storage::ReadableWritableListableStorageTraits> {
    use zarrs::array::codec::{Crc32cCodec, GzipCodec, ZstdCodec};
    let mut builder = ArrayBuilder::new(case.shape.clone(), case.chunks.clone(), data_type::int32(), 0i32);
    match case.codecs {
        Codecs::Plain => {}
        Codecs::Zstd => {
            builder.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(3, false))]);
        }
        Codecs::Gzip => {
            builder.bytes_to_bytes_codecs(vec![Arc::new(GzipCodec::new(5).unwrap())]);
        }
        Codecs::Crc32c => {
            builder.bytes_to_bytes_codecs(vec![Arc::new(Crc32cCodec::new())]);
        }
        Codecs::Sharded => {
            builder.subchunk_shape(vec![1; case.shape.len()]);
            builder.bytes_to_bytes_codecs(vec![Arc::new(ZstdCodec::new(3, false))]);
        }
    }
    let array = builder.build(storage, "/a").unwrap();
    array.store_metadata().unwrap();
    let named = match case.codecs {
        Codecs::Plain => "bytes",
        Codecs::Zstd => "zstd",
        Codecs::Gzip => "gzip",
        Codecs::Crc32c => "crc32c",
        Codecs::Sharded => "sharding_indexed",
    };
    let metadata = array.metadata().to_string();
    assert!(metadata.contains(named), "{named} missing from {metadata}");
    array
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=4)
        .prop_flat_map(|dims| (prop::collection::vec(1u64..=9, dims), prop::collection::vec(1u64..=5, dims)))
        .prop_flat_map(|(shape, chunks)| (Just(shape), Just(chunks), codecs()))
        .prop_flat_map(|(shape, chunks, codecs)| {
            let per_dim: Vec<_> = shape
                .iter()
                .map(|&extent| {
                    (0..extent, 1u64..=3).prop_flat_map(move |(offset, stride)| {
                        let max = (extent - offset - 1) / stride + 1;
                        (Just(offset), 0..=max, Just(stride))
                    })
                })
                .collect();
            (Just(shape), Just(chunks), Just(codecs), per_dim)
        })
        .prop_map(|(shape, chunks, codecs, dims)| {
            let offset = dims.iter().map(|d| d.0).collect();
            let count = dims.iter().map(|d| d.1).collect();
            let stride = dims.iter().map(|d| d.2).collect();
            Case { shape, chunks, codecs, region: Region::new(offset, count).with_stride(stride) }
        })
}

/// The region's elements along dimension `d`, as an ndarray slice.
fn slice_of(region: &Region, d: usize) -> Slice {
    let stride = region.stride.as_ref().map_or(1, |s| s[d]);
    let start = region.offset[d] as isize;
    let span = if region.count[d] == 0 { 0 } else { (region.count[d] - 1) * stride + 1 };
    Slice::new(start, Some(start + span as isize), stride as isize)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn regions_read_and_write_as_the_reference(case in case()) {
        let dir = tempfile::tempdir().unwrap();
        let store = Authorized::without_grants(PosixStore::open(dir.path(), StoreOptions::default()).unwrap());
        store.create_bucket(&RequestContext::process(), "arrays", &Default::default()).unwrap();
        let engine: Arc<dyn Store> = Arc::new(store);
        let storage: ReadableWritableListableStorage =
            Arc::new(EngineStorage::new(engine, RequestContext::process(), "arrays", ""));
        let array = create(storage, &case);
        let (shape, region) = (&case.shape, &case.region);
        let dims: Vec<usize> = shape.iter().map(|&s| s as usize).collect();
        let mut reference = ArrayD::from_shape_fn(IxDyn(&dims), |ix| {
            ix.as_array_view().iter().fold(7i32, |acc, &i| acc.wrapping_mul(31).wrapping_add(i as i32))
        });
        let whole = Region::new(vec![0; shape.len()], shape.clone());
        write_region(&array, &whole, &reference).unwrap();

        let got: ArrayD<i32> = read_region(&array, region).unwrap();
        prop_assert_eq!(&got, &reference.slice_each_axis(|axis| slice_of(region, axis.axis.index())).to_owned());

        let update = got.mapv(|v| v.wrapping_neg().wrapping_sub(1));
        write_region(&array, region, &update).unwrap();
        reference.slice_each_axis_mut(|axis| slice_of(region, axis.axis.index())).assign(&update);
        let after: ArrayD<i32> = read_region(&array, &whole).unwrap();
        prop_assert_eq!(after, reference);
    }
}

#[test]
fn regions_outside_the_array_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store = Authorized::without_grants(PosixStore::open(dir.path(), StoreOptions::default()).unwrap());
    store.create_bucket(&RequestContext::process(), "arrays", &Default::default()).unwrap();
    let storage: ReadableWritableListableStorage =
        Arc::new(EngineStorage::new(Arc::new(store), RequestContext::process(), "arrays", ""));
    let array = ArrayBuilder::new(vec![4, 4], vec![2, 2], data_type::int32(), 0i32).build(storage, "/a").unwrap();
    array.store_metadata().unwrap();
    let past = read_region::<i32, _>(&array, &Region::new(vec![2, 0], vec![3, 1])).unwrap_err();
    assert!(past.to_string().contains("passes the array's extent 4"), "{past}");
    let strided = read_region::<i32, _>(&array, &Region::new(vec![0, 0], vec![3, 1]).with_stride(vec![2, 1]));
    assert!(strided.is_err(), "0, 2, 4 passes an extent of 4");
    let dims = read_region::<i32, _>(&array, &Region::new(vec![0], vec![1])).unwrap_err();
    assert!(dims.to_string().contains("1 dimensions, the array 2"), "{dims}");
    let zero = read_region::<i32, _>(&array, &Region::new(vec![0, 0], vec![1, 1]).with_stride(vec![0, 1])).unwrap_err();
    assert!(zero.to_string().contains("stride must be at least 1"), "{zero}");
    let shape =
        write_region(&array, &Region::new(vec![0, 0], vec![2, 2]), &ArrayD::from_elem(IxDyn(&[2, 3]), 1)).unwrap_err();
    assert!(shape.to_string().contains("shape"), "{shape}");
}
