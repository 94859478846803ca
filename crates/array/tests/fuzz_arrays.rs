//! Fuzz targets for what a hostile user controls in the array service: the `zarr.json` of an
//! array (shapes up to 2^64, chunk shapes, data types, codecs), the selection text and the
//! `where` expression. Property-based (proptest) rather than coverage-guided: cargo-fuzz and
//! libFuzzer need a nightly compiler, and this project builds with stable Rust 1.95. Each case
//! must end in an answer or a typed error, never a panic, an abort or an allocation beyond
//! the selection bound; a crash found is kept as a regression case below.
//!
//! `cargo test --release -p isthmus-array --test fuzz_arrays` runs 256 cases per target (CI);
//! `PROPTEST_CASES=100000 scripts/fuzz` runs them longer.

use std::cell::Cell;
use std::sync::Arc;

use isthmus_access::Authorized;
use isthmus_array::{Expr, Location, ZarrArray, parse_selection, remove_node, select::find};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{Durability, PutRequest, RequestContext, Store, StoreExt};
use proptest::prelude::*;

/// The most bytes a fuzz case may ask to read (the gateway's `select_max_bytes`, scaled down).
const READ_LIMIT: u64 = 1 << 20;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
}

/// An engine without fsync (nothing here must survive a crash), with a bucket `fuzz`.
fn location(dir: &std::path::Path) -> Location {
    let options = StoreOptions { durability: Durability::Relaxed, ..StoreOptions::default() };
    let store: Arc<dyn Store> = Arc::new(Authorized::without_grants(PosixStore::open(dir, options).unwrap()));
    store.create_bucket(&RequestContext::process(), "fuzz", &Default::default()).unwrap();
    Location::Engine { store, cx: RequestContext::process(), bucket: "fuzz".into(), prefix: String::new() }
}

/// A case's array: one engine per test thread (an engine opened and a bucket made for each case
/// cost more than most cases: 3000 cases took minutes on a busy disk), a fresh array for each
/// case, removed when the case ends (a long run leaves nothing behind).
struct Case {
    location: Location,
    path: String,
}

impl Case {
    fn new() -> Self {
        thread_local! {
            static ENGINE: (tempfile::TempDir, Location, Cell<u64>) = {
                let dir = tempfile::tempdir().unwrap();
                let location = location(dir.path());
                (dir, location, Cell::new(0))
            };
        }
        ENGINE.with(|(_, location, cases)| {
            cases.set(cases.get() + 1);
            Case { location: location.clone(), path: format!("case{}.zarr", cases.get()) }
        })
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        let _ = remove_node(&self.location, &self.path);
    }
}

fn put(location: &Location, key: &str, bytes: &[u8]) {
    let Location::Engine { store, cx, .. } = location else { unreachable!() };
    store.put_bytes(cx, "fuzz", key, bytes, PutRequest::default()).unwrap();
}

/// A dimension: small, at a power of two, or near the top of u64.
fn extent() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..6, (0u32..64).prop_map(|p| 1u64 << p), (u64::MAX - 4)..=u64::MAX, any::<u64>()]
}

fn data_type() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["uint8", "int16", "float32", "float64", "int64", "bool", "complex128", "string", "r8"])
}

/// A `zarr.json` document, mostly well-formed, with hostile sizes.
fn zarr_json() -> impl Strategy<Value = String> {
    (1usize..4)
        .prop_flat_map(|dims| {
            (prop::collection::vec(extent(), dims), prop::collection::vec(extent(), dims), data_type())
        })
        .prop_map(|(shape, chunks, dtype)| {
            serde_json::json!({
                "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": dtype,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            })
            .to_string()
        })
}

/// A selection in numpy's slicing syntax, with hostile numbers.
fn selection() -> impl Strategy<Value = String> {
    let number = prop_oneof![
        Just(String::new()),
        (-5i64..5).prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string())
    ];
    let part = (number.clone(), number.clone(), number).prop_map(|(a, b, c)| format!("{a}:{b}:{c}"));
    prop::collection::vec(part, 0..4).prop_map(|parts| format!("[{}]", parts.join(",")))
}

/// Reads what `selection` asks of the array in `json`, when it is small enough, as the gateway
/// does: the size is checked against the limit before anything is read.
fn select(json: &str, selection: &str, expr: Option<&Expr>) {
    let case = Case::new();
    put(&case.location, &format!("{}/zarr.json", case.path), json.as_bytes());
    let Ok(array) = ZarrArray::open(&case.location, &case.path) else { return };
    let Ok(parsed) = parse_selection(selection, array.shape()) else { return };
    let Ok(bytes) = array.region_bytes(&parsed.region) else { return };
    if bytes as u64 > READ_LIMIT {
        return;
    }
    let array = Arc::new(array);
    match expr {
        None => {
            if let Ok(read) = array.read_vec(&parsed.region) {
                assert_eq!(read.len(), bytes, "a read returns the bytes its size said");
            }
        }
        Some(expr) => {
            let _ = find(&array, &parsed, expr, 0, 100, 64 << 10);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn fuzz_zarr_json_and_selections_end_in_an_answer_or_an_error(json in zarr_json(), selection in selection()) {
        select(&json, &selection, None);
    }

    #[test]
    fn fuzz_where_expressions_parse_or_refuse(text in "[a-z()<>=!&|. 0-9eE+-]{0,200}") {
        if let Ok(expr) = Expr::parse(&text) {
            let _ = expr.holds(1.5);
        }
    }

    #[test]
    fn fuzz_threshold_queries_over_hostile_arrays(json in zarr_json(), selection in selection()) {
        let expr = Expr::parse("abs(value) > 0.5 or not value == 0").unwrap();
        select(&json, &selection, Some(&expr));
    }

    #[test]
    fn fuzz_arbitrary_zarr_json_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        select(&String::from_utf8_lossy(&bytes), "[:]", None);
    }
}

/// Crashes the fuzzing (and the audit) found, kept.
#[test]
fn regressions_of_hostile_arrays() {
    let typed = |data_type: &str, shape: &[u64], chunks: &[u64]| {
        serde_json::json!({
            "zarr_format": 3, "node_type": "array", "shape": shape, "data_type": data_type,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        })
        .to_string()
    };
    let wrap = |shape: &[u64], chunks: &[u64]| typed("float64", shape, chunks);
    let threshold = Expr::parse("abs(value) > 0.5 or not value == 0").unwrap();
    // Issue 28, finding 1: 2^64 + 8 elements wrapped to 8, then the read aborted.
    select(&wrap(&[(1 << 61) + 1, 8], &[1, 1]), "[:, :]", None);
    select(&wrap(&[1 << 40, 1 << 40, 1 << 40], &[1, 1, 1]), "[:, :, :]", None);
    // A two-element strided selection over 2^40 one-element chunks visits two chunks.
    select(&wrap(&[1 << 40], &[1]), "[::549755813888]", None);
    // Issue 46: a selection of no element (its start is past the second dimension) whose first has 2^51
    // rows: the threshold query walked 2^35 empty slabs (it never ended).
    let json = typed("int16", &[1 << 51, 1, 4], &[5, 4, 65536]);
    select(&json, "[::, 8564849623931854373::5678640273608100967]", Some(&threshold));
    // Issue 46: a few elements from each of 64 chunks of 1 GiB never written: each chunk was
    // made whole of fill values (64 GiB written for 128 KiB; the threshold query once per slab).
    let json = typed("uint8", &[4096, 4096, 4096], &[1024, 1024, 1024]);
    select(&json, "[::512, ::512, ::2]", None);
    select(&json, "[::512, ::512, ::2]", Some(&threshold));
    // Nesting deep enough to exhaust a stack is refused, not recursed into.
    let deep = format!("{}value > 0{}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(Expr::parse(&deep).is_err());
    assert!(Expr::parse(&format!("{}value > 0", "not ".repeat(100_000))).is_err());
    assert!(Expr::parse(&vec!["value > 0"; 5000].join(" and ")).is_err());
    assert!(Expr::parse(&format!("{}value > 0{}", "(".repeat(30), ")".repeat(30))).is_ok());
}
