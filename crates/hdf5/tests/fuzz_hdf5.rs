//! Fuzz target for HDF5 files served in place: anyone who can write a file in the data root
//! can hand the gateway a crafted HDF5 file. Property-based (proptest: cargo-fuzz needs a
//! nightly compiler): a valid file (groups, a chunked deflate+shuffle dataset, a contiguous
//! one, attributes) is written with libhdf5, then bytes of it are changed, and the changed
//! file is indexed and read through the array layer. Each case must end in data or a typed
//! error, never a panic or an allocation the file asked for; a crash found is kept below.
//!
//! `cargo test --release -p isthmus-hdf5 --test fuzz_hdf5` runs 256 cases (CI);
//! `scripts/fuzz` runs more.
//!
//! The test process's address space is capped (`ADDRESS_SPACE`): a case that makes the reader
//! allocate what the file asks for aborts this process at once ("memory allocation failed"),
//! where it once had a CI machine kill the run at 20 GB. Each case is written to
//! `CARGO_TARGET_TMPDIR/fuzz_hdf5-<test>.h5` before it is served, so after such an abort the
//! file that caused it is on disk (proptest's own record of failures needs the process alive).

use std::path::{Path, PathBuf};

use isthmus_array::parse_selection;
use isthmus_hdf5::open_local;
use proptest::prelude::*;

/// The most address space the test process may take: libhdf5 and the template need little, and
/// no case may take more than a chunk's worth.
const ADDRESS_SPACE: u64 = 4 << 30;

/// Caps the process's address space at `ADDRESS_SPACE` (once; see the module comment).
fn cap_address_space() {
    static CAPPED: std::sync::Once = std::sync::Once::new();
    CAPPED.call_once(|| {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let maximum = getrlimit(Resource::As).maximum;
        let current = maximum.map_or(ADDRESS_SPACE, |max| max.min(ADDRESS_SPACE));
        setrlimit(Resource::As, Rlimit { current: Some(current), maximum }).expect("cap the address space");
    });
}

/// Where a test's current case is kept while it is served (see the module comment).
fn case_path(test: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz_hdf5-{test}.h5"))
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
}

/// The bytes of a small valid file, made once.
fn template() -> &'static [u8] {
    static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BYTES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("template.h5");
        {
            // Every handle closes at the end of this block, and with the last one the file.
            let file = hdf5::File::create(&path).unwrap();
            let group = file.create_group("grid").unwrap();
            let values: Vec<f32> = (0..16 * 12).map(|i| i as f32 * 0.5).collect();
            let temp = group.new_dataset::<f32>().shape([16, 12]).chunk([4, 6]).shuffle().deflate(4).create("temp");
            temp.unwrap().write_raw(&values).unwrap();
            let flat: Vec<i64> = (0..40).collect();
            file.new_dataset::<i64>().shape([40]).create("flat").unwrap().write_raw(&flat).unwrap();
            file.new_attr::<u32>().create("version").unwrap().write_scalar(&3u32).unwrap();
        }
        std::fs::read(&path).unwrap()
    })
}

/// Indexes the file at `path` and reads what each servable dataset holds (bounded).
fn serve(path: &Path) {
    let Ok(file) = open_local(path) else { return };
    let datasets: Vec<_> = file.index().datasets.iter().filter(|d| d.not_servable.is_none()).cloned().collect();
    for dataset in datasets {
        let Ok(array) = file.array(&dataset.path) else { continue };
        let selection = dataset.shape.iter().map(|_| "0:4").collect::<Vec<_>>().join(",");
        let Ok(parsed) = parse_selection(&format!("[{selection}]"), array.shape()) else { continue };
        let Ok(bytes) = array.region_bytes(&parsed.region) else { continue };
        if bytes > 1 << 20 {
            continue;
        }
        if let Ok(read) = array.read_vec(&parsed.region) {
            assert_eq!(read.len(), bytes);
        }
    }
}

fn write_case(dir: &Path, bytes: &[u8]) -> PathBuf {
    let path = dir.join("case.h5");
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Serves `bytes` as a file, kept meanwhile at `case_path(test)`, within the capped address space.
fn serve_case(test: &str, bytes: &[u8]) {
    cap_address_space();
    let kept = case_path(test);
    std::fs::write(&kept, bytes).unwrap();
    serve(&kept);
    std::fs::remove_file(&kept).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn fuzz_mutated_hdf5_files(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8), early in any::<bool>()) {
        let mut bytes = template().to_vec();
        // Half the cases change only the first 2 KiB: superblock, object headers, B-tree nodes.
        let span = if early { bytes.len().min(2048) } else { bytes.len() };
        for (at, byte) in flips {
            bytes[at.index(span)] = byte;
        }
        serve_case("mutated", &bytes);
    }

    #[test]
    fn fuzz_truncated_hdf5_files(keep in any::<prop::sample::Index>()) {
        let bytes = template();
        serve_case("truncated", &bytes[..keep.index(bytes.len())]);
    }
}

#[test]
fn the_template_serves_its_datasets() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_case(dir.path(), template());
    let file = open_local(&path).unwrap();
    let servable: Vec<_> =
        file.index().datasets.iter().filter(|d| d.not_servable.is_none()).map(|d| d.path.clone()).collect();
    assert_eq!(servable, ["/flat", "/grid/temp"]);
    serve(&path);
}

/// The cap holds: an allocation as large as the one the fuzzer once found a file asking for
/// (4 GB) fails instead of being granted (this machine overcommits: uncapped, it would be).
#[test]
fn the_address_space_is_capped_for_every_case() {
    cap_address_space();
    let (mut huge, mut small) = (Vec::<u8>::new(), Vec::<u8>::new());
    assert!(huge.try_reserve_exact(4 << 30).is_err(), "the address space is not capped");
    assert!(small.try_reserve_exact(1 << 20).is_ok());
}
