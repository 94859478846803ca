//! Arrays of uncompressed shards are written in place: a small region is a write into the
//! shard's existing file (same inode), the shard stays a valid Zarr shard that zarrs reads from
//! the plain files, concurrent writers of one inner chunk lose nothing, and where in place is
//! not allowed (a versioned bucket, a token that may only create, a shard in another layout, a
//! hostile shard file) the whole shard is written as before or the write is refused.

use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use isthmus_access::Authorized;
use isthmus_array::{ArraySpec, DataType, Location, Region, ZarrArray};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::scopes::Scopes;
use isthmus_store::{RequestContext, Store, StoreError, Versioning};
use ndarray::ArrayD;
use zarrs::storage::ReadableWritableListableStorage;

fn engine(root: &std::path::Path) -> Arc<dyn Store> {
    Arc::new(Authorized::without_grants(PosixStore::open(root, StoreOptions::default()).unwrap()))
}

fn location(store: &Arc<dyn Store>, bucket: &str) -> Location {
    Location::Engine {
        store: store.clone(),
        cx: RequestContext::process(),
        bucket: bucket.into(),
        prefix: String::new(),
    }
}

/// A float32 array of 8 x 16, one shard of 4 x 16 per 4 rows, inner chunks of 1 x 8.
fn spec() -> ArraySpec {
    let mut spec = ArraySpec::new(vec![8, 16], DataType::Float32, vec![4, 16]);
    spec.inner_chunks = Some(vec![1, 8]);
    spec.fill_value = Some(-1.0);
    spec
}

fn floats(values: impl IntoIterator<Item = f32>) -> Vec<u8> {
    values.into_iter().flat_map(f32::to_le_bytes).collect()
}

fn read_floats(array: &ZarrArray, region: &Region) -> Vec<f32> {
    array.read_vec(region).unwrap().chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

fn setup(bucket: &str) -> (tempfile::TempDir, Arc<dyn Store>, ZarrArray) {
    let dir = tempfile::tempdir().unwrap();
    let store = engine(&dir.path().join("data"));
    store.create_bucket(&RequestContext::process(), bucket, &Default::default()).unwrap();
    let array = ZarrArray::create(&location(&store, bucket), "a", &spec()).unwrap();
    (dir, store, array)
}

#[test]
fn small_regions_are_written_into_the_existing_shard() {
    let (dir, store, array) = setup("arrays");
    let shard = dir.path().join("data/arrays/a/c/0/0");
    // The first write creates the shard whole: the other inner chunks hold the fill value.
    array.write(&Region::new(vec![1, 0], vec![1, 8]), &floats((0..8).map(|i| i as f32))).unwrap();
    let inode = std::fs::metadata(&shard).unwrap().ino();
    // Whole inner chunks, a part of one and a strided region across two: all in place.
    array.write(&Region::new(vec![2, 8], vec![1, 8]), &floats((0..8).map(|i| 100.0 + i as f32))).unwrap();
    array.write(&Region::new(vec![1, 2], vec![1, 3]), &floats([7.0, 8.0, 9.0])).unwrap();
    array
        .write(&Region::new(vec![3, 1], vec![1, 5]).with_stride(vec![1, 3]), &floats([50.0, 51.0, 52.0, 53.0, 54.0]))
        .unwrap();
    assert_eq!(std::fs::metadata(&shard).unwrap().ino(), inode, "the shard's file was replaced, not written in place");
    assert_eq!(std::fs::metadata(&shard).unwrap().len(), 4 * 2 * 32 + 8 * 16 + 4);

    let mut expected = vec![-1.0f32; 8 * 16];
    for i in 0..8 {
        expected[16 + i] = i as f32;
        expected[2 * 16 + 8 + i] = 100.0 + i as f32;
    }
    expected[16 + 2..16 + 5].copy_from_slice(&[7.0, 8.0, 9.0]);
    for (k, column) in [1, 4, 7, 10, 13].into_iter().enumerate() {
        expected[3 * 16 + column] = 50.0 + k as f32;
    }
    assert_eq!(read_floats(&array, &Region::whole(&[8, 16])), expected);
    // The plain files are a valid Zarr array that zarrs reads on its own.
    let files: ReadableWritableListableStorage =
        Arc::new(zarrs::filesystem::FilesystemStore::new(dir.path().join("data/arrays")).unwrap());
    let plain = zarrs::array::Array::open(files, "/a").unwrap();
    let read: ArrayD<f32> = plain.retrieve_array_subset(&plain.subset_all()).unwrap();
    assert_eq!(read.iter().copied().collect::<Vec<_>>(), expected);
    // And over the engine, the shard is an object whose ETag follows its bytes.
    let head = store.head_object(&RequestContext::process(), "arrays", "a/c/0/0", &Default::default()).unwrap();
    assert_eq!(head.size, std::fs::metadata(&shard).unwrap().len());
}

#[test]
fn concurrent_writers_of_one_inner_chunk_lose_no_update() {
    let (dir, store, _) = setup("arrays");
    let handles: Vec<ZarrArray> = (0..3).map(|_| ZarrArray::open(&location(&store, "arrays"), "a").unwrap()).collect();
    // Four writers, each its own element of inner chunk (0, 0), 200 times each; the last two
    // share a handle (and its open shard file), the others have their own.
    std::thread::scope(|scope| {
        for writer in 0..4 {
            let array = &handles[writer.min(2)];
            let dir = &dir;
            scope.spawn(move || {
                for round in 0..200 {
                    let value = (writer * 1000 + round) as f32;
                    let element = Region::new(vec![0, writer as u64 * 2], vec![1, 1]);
                    array.write(&element, &floats([value])).unwrap();
                    // A writer of another element that read the inner chunk before this write
                    // must not write it back after: the write would be lost.
                    let got = read_floats(array, &element);
                    if got != [value] {
                        let bytes = std::fs::read(dir.path().join("data/arrays/a/c/0/0")).unwrap();
                        let on_disk: Vec<f32> =
                            bytes[..32].chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
                        let again = read_floats(array, &element);
                        panic!("writer {writer} round {round}: read {got:?}, on disk {on_disk:?}, again {again:?}");
                    }
                }
            });
        }
    });
    let row = read_floats(&handles[0], &Region::new(vec![0, 0], vec![1, 8]));
    assert_eq!(row, [199.0, -1.0, 1199.0, -1.0, 2199.0, -1.0, 3199.0, -1.0]);
    drop(dir);
}

#[test]
fn a_shard_in_another_layout_is_rewritten_once_then_written_in_place() {
    let (dir, _store, array) = setup("arrays");
    // zarrs writes the shard on its own: inner chunks of fill values are left out of it.
    let files: ReadableWritableListableStorage =
        Arc::new(zarrs::filesystem::FilesystemStore::new(dir.path().join("data/arrays")).unwrap());
    let plain = zarrs::array::Array::open(files, "/a").unwrap();
    plain.store_array_subset(&[0..1, 0..8], ArrayD::from_elem(ndarray::IxDyn(&[1, 8]), 5.0f32)).unwrap();
    let shard = dir.path().join("data/arrays/a/c/0/0");
    let compact = std::fs::metadata(&shard).unwrap();
    assert!(compact.len() < 4 * 2 * 32, "zarrs wrote a compact shard ({} bytes)", compact.len());

    array.write(&Region::new(vec![1, 8], vec![1, 1]), &floats([6.0])).unwrap();
    let fixed = std::fs::metadata(&shard).unwrap();
    assert_ne!(fixed.ino(), compact.ino(), "rewritten in the fixed layout");
    array.write(&Region::new(vec![2, 8], vec![1, 1]), &floats([7.0])).unwrap();
    assert_eq!(std::fs::metadata(&shard).unwrap().ino(), fixed.ino(), "then written in place");
    let got = read_floats(&array, &Region::new(vec![0, 0], vec![3, 16]));
    assert_eq!(got[..8], [5.0; 8]);
    assert_eq!((got[16 + 8], got[32 + 8], got[15]), (6.0, 7.0, -1.0));
}

#[test]
fn a_hostile_shard_file_is_never_written_where_its_index_points() {
    let (dir, store, array) = setup("arrays");
    array.write(&Region::new(vec![0, 0], vec![1, 8]), &floats([1.0; 8])).unwrap();
    let shard = dir.path().join("data/arrays/a/c/0/0");
    // Someone rewrites the index (same size): every entry points at inner chunk 0's bytes.
    let mut bytes = std::fs::read(&shard).unwrap();
    let index_at = 8 * 32;
    for entry in 0..8 {
        bytes[index_at + entry * 16..index_at + entry * 16 + 8].copy_from_slice(&0u64.to_le_bytes());
    }
    let crc = crc32c(&bytes[index_at..index_at + 128]);
    bytes[index_at + 128..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&shard, &bytes).unwrap();
    // A write of inner chunk 1 must not land in inner chunk 0 (where the entry points) nor at
    // its own offset behind a lying index: the shard is rewritten in the fixed layout (by a
    // handle that opens the file anew: an open handle keeps a checked file for a second).
    let array = ZarrArray::open(&location(&store, "arrays"), "a").unwrap();
    array.write(&Region::new(vec![0, 8], vec![1, 8]), &floats([2.0; 8])).unwrap();
    let row = read_floats(&array, &Region::new(vec![0, 0], vec![2, 16]));
    assert_eq!(row[..16], [[1.0; 8], [2.0; 8]].concat()[..]);
    assert_eq!(row[16..], [1.0; 8].iter().chain(&[1.0; 8]).copied().collect::<Vec<_>>()[..], "as the index said");
    // Garbage of the right size is refused with an error, and left as it was.
    let garbage = vec![0xffu8; bytes.len()];
    std::fs::write(&shard, &garbage).unwrap();
    let array = ZarrArray::open(&location(&store, "arrays"), "a").unwrap();
    assert!(array.write(&Region::new(vec![0, 0], vec![1, 1]), &floats([3.0])).is_err());
    assert_eq!(std::fs::read(&shard).unwrap(), garbage);
}

fn crc32c(bytes: &[u8]) -> u32 {
    // CRC-32C (Castagnoli), bit by bit: the test's own, independent of the crate's.
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
        }
    }
    !crc
}

#[test]
fn a_versioned_bucket_keeps_every_version_whole() {
    let (dir, store, array) = setup("arrays");
    let cx = RequestContext::process();
    array.write(&Region::new(vec![0, 0], vec![1, 8]), &floats([1.0; 8])).unwrap();
    let mut config = store.bucket_config(&cx, "arrays").unwrap();
    config.versioning = Some(Versioning::Enabled);
    store.set_bucket_config(&cx, "arrays", &config).unwrap();
    let array = ZarrArray::open(&location(&store, "arrays"), "a").unwrap();
    array.write(&Region::new(vec![0, 8], vec![1, 8]), &floats([2.0; 8])).unwrap();
    array.write(&Region::new(vec![1, 0], vec![1, 8]), &floats([3.0; 8])).unwrap();
    let versions = store
        .list_object_versions(
            &cx,
            "arrays",
            &isthmus_store::ListVersionsRequest { prefix: "a/c/0/0".into(), max_keys: 100, ..Default::default() },
        )
        .unwrap();
    assert!(versions.versions.len() >= 2, "each write made a version: {:?}", versions.versions.len());
    let got = read_floats(&array, &Region::new(vec![0, 0], vec![2, 16]));
    assert_eq!(got, [[1.0; 8], [2.0; 8], [3.0; 8], [-1.0; 8]].concat());
    drop(dir);
}

#[test]
fn a_token_that_may_only_create_updates_nothing_in_place() {
    let (dir, store, array) = setup("arrays");
    array.write(&Region::new(vec![0, 0], vec![1, 8]), &floats([1.0; 8])).unwrap();
    let mut cx = RequestContext::process();
    cx.scopes = Some(Arc::new(Scopes::parse("storage.create:/arrays storage.read:/arrays", "/").unwrap()));
    let refused = store.files().unwrap().object_file_for_update(&cx, "arrays", "a/c/0/0");
    assert!(matches!(refused, Err(StoreError::OutOfScope(_))), "{refused:?}");
    let scoped = Location::Engine { store: store.clone(), cx, bucket: "arrays".into(), prefix: String::new() };
    let array = ZarrArray::open(&scoped, "a").unwrap();
    assert!(array.write(&Region::new(vec![0, 8], vec![1, 8]), &floats([2.0; 8])).is_err());
    let got = read_floats(&array, &Region::new(vec![0, 0], vec![1, 16]));
    assert_eq!(got, [[1.0; 8], [-1.0; 8]].concat());
    drop(dir);
}

#[test]
fn a_shard_of_zeros_is_created_as_a_hole_with_its_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = engine(&dir.path().join("data"));
    store.create_bucket(&RequestContext::process(), "arrays", &Default::default()).unwrap();
    // 4 x 4096 float32 shards (64 KiB of data each), inner chunks of one row: fill value 0.
    let mut spec = ArraySpec::new(vec![8, 4096], DataType::Float32, vec![4, 4096]);
    spec.inner_chunks = Some(vec![1, 4096]);
    let array = ZarrArray::create(&location(&store, "arrays"), "z", &spec).unwrap();
    array.write(&Region::new(vec![2, 0], vec![1, 4]), &floats([1.0, 2.0, 3.0, 4.0])).unwrap();
    let shard = std::fs::metadata(dir.path().join("data/arrays/z/c/0/0")).unwrap();
    assert_eq!(shard.len(), 4 * 4096 * 4 + 4 * 16 + 4);
    assert!(shard.blocks() * 512 < 3 * 4096 * 4, "{} bytes allocated: the zeros were written", shard.blocks() * 512);
    let got = read_floats(&array, &Region::new(vec![1, 0], vec![2, 6]));
    assert_eq!(got, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 0.0, 0.0]);
}

#[test]
fn shards_allocated_ahead_take_every_region_in_place() {
    let (dir, store, array) = setup("arrays");
    assert_eq!(array.allocate_shards().unwrap(), 2, "two shards of 4 rows");
    assert_eq!(array.allocate_shards().unwrap(), 0, "none missing any more");
    let shard = dir.path().join("data/arrays/a/c/1/0");
    let inode = std::fs::metadata(&shard).unwrap().ino();
    array.write(&Region::new(vec![5, 3], vec![2, 10]), &floats((0..20).map(|i| i as f32))).unwrap();
    assert_eq!(std::fs::metadata(&shard).unwrap().ino(), inode);
    let got = read_floats(&array, &Region::new(vec![4, 0], vec![2, 16]));
    assert_eq!(got[..16], [-1.0; 16]);
    assert_eq!(got[16..19], [-1.0, -1.0, -1.0]);
    assert_eq!(got[19..29], (0..10).map(|i| i as f32).collect::<Vec<_>>()[..]);
    // Chunked arrays have nothing to allocate ahead.
    let plain =
        ZarrArray::create(&location(&store, "arrays"), "plain", &ArraySpec::new(vec![4], DataType::UInt8, vec![2]))
            .unwrap();
    assert!(plain.allocate_shards().is_err());
}

#[test]
fn a_user_the_kernel_refuses_the_shard_file_writes_nothing_in_place() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: switching to another user needs root");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let posix: Arc<dyn Store> = Arc::new(PosixStore::open(dir.path().join("data"), StoreOptions::default()).unwrap());
    posix.create_bucket(&RequestContext::process(), "arrays", &Default::default()).unwrap();
    let array = ZarrArray::create(&location(&posix, "arrays"), "a", &spec()).unwrap();
    array.allocate_shards().unwrap();
    // Every directory open to all, the shard readable by all and writable by its owner (root).
    for path in ["data", "data/arrays", "data/arrays/a", "data/arrays/a/c", "data/arrays/a/c/0"] {
        std::fs::set_permissions(dir.path().join(path), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let shard = dir.path().join("data/arrays/a/c/0/0");
    std::fs::set_permissions(&shard, std::fs::Permissions::from_mode(0o644)).unwrap();
    let before = std::fs::read(&shard).unwrap();

    let nobody = isthmus_store::identity::UnixIdentity::of_user("nobody").unwrap();
    let cx = RequestContext::process().with_identity(Some(Arc::new(nobody)));
    // The store stack every door uses: its identity wrapper runs each chunk call as `cx`.
    let stack = isthmus_session::stack::in_process(posix.clone());
    let as_nobody = Location::Engine { store: stack, cx, bucket: "arrays".into(), prefix: String::new() };
    let theirs = ZarrArray::open(&as_nobody, "a").unwrap();
    let refused = theirs.write(&Region::new(vec![0, 0], vec![1, 8]), &floats([9.0; 8]));
    let code = refused.as_ref().err().and_then(|e| e.engine_error()).map(|e| e.s3_code());
    assert_eq!(code, Some("AccessDenied"), "{refused:?}");
    assert_eq!(std::fs::read(&shard).unwrap(), before, "the shard is unchanged");
    assert_eq!(read_floats(&theirs, &Region::new(vec![0, 0], vec![1, 8])), [-1.0; 8], "reading is allowed");
}
