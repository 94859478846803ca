//! A Zarr v3 array written through the engine is a directory of plain files that a plain
//! file-system Zarr store reads the same, and the reverse; regions read back as written.

use std::sync::Arc;

use isthmus_access::Authorized;
use isthmus_array::EngineStorage;
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{RequestContext, Store};
use ndarray::{ArrayD, IxDyn};
use zarrs::array::{ArrayBuilder, data_type};
use zarrs::storage::ReadableWritableListableStorage;

fn engine(root: &std::path::Path) -> Arc<dyn Store> {
    let store = Authorized::without_grants(PosixStore::open(root, StoreOptions::default()).unwrap());
    store.create_bucket(&RequestContext::process(), "arrays", &Default::default()).unwrap();
    Arc::new(store)
}

#[test]
fn an_array_written_through_the_engine_is_plain_files_and_reads_back_by_region() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let storage: ReadableWritableListableStorage =
        Arc::new(EngineStorage::new(engine(&root), RequestContext::process(), "arrays", "run1"));
    let array = ArrayBuilder::new(vec![8, 6], vec![4, 3], data_type::float32(), 0.0f32)
        .dimension_names(["t", "x"].into())
        .build(storage.clone(), "/vel")
        .unwrap();
    array.store_metadata().unwrap();
    // A region that covers chunk (0, 0) whole and parts of three others.
    let region: Vec<f32> = (0..5 * 4).map(|i| i as f32).collect();
    array.store_array_subset(&[0..5, 0..4], ArrayD::from_shape_vec(IxDyn(&[5, 4]), region).unwrap()).unwrap();
    let all: ArrayD<f32> = array.retrieve_array_subset(&array.subset_all()).unwrap();
    for t in 0..8 {
        for x in 0..6 {
            let want = if t < 5 && x < 4 { (t * 4 + x) as f32 } else { 0.0 };
            assert_eq!(all[[t, x]], want, "({t}, {x})");
        }
    }
    // The duality: zarr.json and the chunks are files where Zarr puts them.
    let on_disk = root.join("arrays/run1/vel");
    let meta: serde_json::Value = serde_json::from_slice(&std::fs::read(on_disk.join("zarr.json")).unwrap()).unwrap();
    assert_eq!(meta["zarr_format"], 3);
    assert_eq!(meta["shape"], serde_json::json!([8, 6]));
    for chunk in ["c/0/0", "c/0/1", "c/1/0", "c/1/1"] {
        assert!(on_disk.join(chunk).is_file(), "{chunk}");
    }
    // A plain file-system store reads the same array.
    let fs: ReadableWritableListableStorage =
        Arc::new(zarrs::filesystem::FilesystemStore::new(root.join("arrays/run1")).unwrap());
    let again = zarrs::array::Array::open(fs.clone(), "/vel").unwrap();
    let from_files: ArrayD<f32> = again.retrieve_array_subset(&again.subset_all()).unwrap();
    assert_eq!(from_files, all);
    // And the reverse: written as files, read through the engine (a listing finds it).
    again.store_array_subset(&[7..8, 5..6], ArrayD::from_elem(IxDyn(&[1, 1]), 42.0f32)).unwrap();
    let through_engine = zarrs::array::Array::open(storage.clone(), "/vel").unwrap();
    let corner: ArrayD<f32> = through_engine.retrieve_array_subset(&[7..8, 5..6]).unwrap();
    assert_eq!(corner[[0, 0]], 42.0);
    let keys = storage.list_prefix(&zarrs::storage::StorePrefix::new("vel/").unwrap()).unwrap();
    assert!(keys.iter().any(|k| k.as_str() == "vel/zarr.json"), "{keys:?}");
}

#[test]
fn the_engine_store_passes_the_zarrs_store_checks() {
    let dir = tempfile::tempdir().unwrap();
    let storage = EngineStorage::new(engine(&dir.path().join("data")), RequestContext::process(), "arrays", "checks");
    zarrs_storage::store_test::store_write(&storage).unwrap();
    zarrs_storage::store_test::store_read(&storage).unwrap();
    zarrs_storage::store_test::store_list(&storage).unwrap();
    zarrs_storage::store_test::store_list_size(&storage).unwrap();
}
