//! Reads as the EQSIM patterns make them: strided and single-point selections of a time x X x
//! Y x 1 array give the same elements from a sharded copy (decoded inner chunk by inner chunk)
//! as from plain chunks, compressed or not; a threshold scan paged with `after` finds each match
//! once, slabs before `after` skipped.

use std::sync::Arc;

use isthmus_access::Authorized;
use isthmus_array::select::{Expr, find};
use isthmus_array::{ArraySpec, Codec, DataType, Location, ZarrArray, parse_selection};
use isthmus_posix::{PosixStore, StoreOptions};
use isthmus_store::{RequestContext, Store};

fn engine(dir: &std::path::Path) -> Location {
    let store = Authorized::without_grants(PosixStore::open(dir, StoreOptions::default()).unwrap());
    store.create_bucket(&RequestContext::process(), "arrays", &Default::default()).unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    Location::Engine { store, cx: RequestContext::process(), bucket: "arrays".into(), prefix: String::new() }
}

const SHAPE: [u64; 4] = [40, 24, 20, 1];

/// Element (t, x, y) holds t * 1000 + x * 30 + y, as float32.
fn values() -> Vec<u8> {
    let mut out = Vec::new();
    for t in 0..SHAPE[0] {
        for x in 0..SHAPE[1] {
            for y in 0..SHAPE[2] {
                out.extend_from_slice(&((t * 1000 + x * 30 + y) as f32).to_le_bytes());
            }
        }
    }
    out
}

fn array(location: &Location, path: &str, chunks: Vec<u64>, inner: Option<Vec<u64>>, codecs: &str) -> ZarrArray {
    let mut spec = ArraySpec::new(SHAPE.to_vec(), DataType::Float32, chunks);
    spec.inner_chunks = inner;
    spec.codecs = ArraySpec::parse_codecs(codecs).unwrap();
    let array = ZarrArray::create(location, path, &spec).unwrap();
    let whole = parse_selection("[:]", &SHAPE).unwrap();
    array.write(&whole.region, &values()).unwrap();
    array
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

#[test]
fn strided_reads_of_sharded_and_plain_copies_agree_with_the_values() {
    let dir = tempfile::tempdir().unwrap();
    let location = engine(dir.path());
    let copies = [
        array(&location, "plain", vec![16, 8, 8, 1], None, ""),
        array(&location, "gzip", vec![16, 8, 8, 1], None, "shuffle,gzip:1"),
        array(&location, "sharded", vec![32, 16, 16, 1], Some(vec![8, 4, 4, 1]), "zstd:1"),
    ];
    assert_eq!(copies[1].metadata()["codecs"][1]["name"], "numcodecs.shuffle");
    for text in ["[:,7,5,0]", "[::5,::3,::7,0]", "[3:39:9,1:23:11,::4]", "[5:9,2:20,3:17,0]", "[::13,::25,::19,0]"] {
        let selection = parse_selection(text, &SHAPE).unwrap();
        let region = &selection.region;
        let step = region.stride.clone().unwrap_or(vec![1; 4]);
        let mut expected = Vec::new();
        for i in 0..region.count[0] {
            for j in 0..region.count[1] {
                for k in 0..region.count[2] {
                    let (t, x, y) = (
                        region.offset[0] + i * step[0],
                        region.offset[1] + j * step[1],
                        region.offset[2] + k * step[2],
                    );
                    expected.push((t * 1000 + x * 30 + y) as f32);
                }
            }
        }
        for copy in &copies {
            assert_eq!(floats(&copy.read_vec(region).unwrap()), expected, "{text} from {}", copy.path());
        }
    }
}

#[test]
fn a_threshold_scan_paged_with_after_finds_each_match_once() {
    let dir = tempfile::tempdir().unwrap();
    let location = engine(dir.path());
    let array = Arc::new(array(&location, "sharded", vec![32, 16, 16, 1], Some(vec![8, 4, 4, 1]), "zstd:1"));
    let selection = parse_selection("[2:38,:,:,0]", &SHAPE).unwrap();
    let expr = Expr::parse("value >= 0").unwrap();
    let all = find(&array, &selection, &expr, 0, usize::MAX, 4 << 10).unwrap();
    assert_eq!(all.values.len() as u64, 36 * 24 * 20);
    let expr = Expr::parse("value > 20000 and value < 20100").unwrap();
    let all = find(&array, &selection, &expr, 0, usize::MAX, 4 << 10).unwrap();
    // t = 20, x = 0..3 (x * 30 + y < 100): 20 + 20 + 20 + 10 values, minus 20000 itself.
    assert_eq!(all.values.len(), 69);
    // Pages of 7 with 4 KiB slabs (about two rows of t each): the slabs before `after` are
    // skipped, and the pages together are the whole answer, in order.
    let (mut values, mut coordinates, mut after) = (Vec::new(), Vec::new(), 0);
    loop {
        let page = find(&array, &selection, &expr, after, 7, 4 << 10).unwrap();
        values.extend(page.values);
        coordinates.extend(page.coordinates);
        match page.next {
            Some(next) => after = next,
            None => break,
        }
    }
    assert_eq!(values, all.values);
    assert_eq!(coordinates, all.coordinates);
    assert!(coordinates.iter().all(|c| c[0] == 20 && c[3] == 0));
}

#[test]
fn codecs_name_shuffle() {
    assert_eq!(ArraySpec::parse_codecs("shuffle,gzip:1").unwrap(), vec![Codec::Shuffle, Codec::Gzip { level: 1 }]);
}
