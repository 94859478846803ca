//! `isthmus bench eqsim`: the earthquake-analysis read patterns on a synthetic ground-motion
//! dataset (time x X x Y x 1 float32, chunks of (TC, 32, 32, 1), gzip with shuffle) that h5py
//! writes into the data root as the simulation would (`eqsim.py generate`). Isthmus converts it
//! to three Zarr v3 copies through the HDF5-in-place reader: the same chunking with the same
//! compression (gzip level 1 after a byte shuffle), the same chunking with zstd, and the layout
//! it recommends for these patterns (shards of (4 TC, 64, 64, 1) holding inner chunks of
//! (TC, 8, 8, 1): a point's time series and a strided overview touch few small inner chunks).
//! Each pattern then runs on h5py (the baseline), h5py with a 1 GiB chunk cache, Isthmus
//! in-process (HDF5 in place, the three Zarr copies), the gateway's server-side selection and
//! zarr-python over S3 through the gateway (`eqsim.py run`); every target's answer is checked
//! against the baseline's, and times are medians of `--repeat` runs with a warm page cache.
//! The report keeps the two effects apart: targets on the HDF5 file's own layout ("same
//! layout") and on the re-chunked copy ("re-chunked"), each with its median speedup over h5py
//! and over h5py with its chunk cache across the six patterns (`report` has the JSON fields).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use isthmus_array::select::{Expr, find};
use isthmus_array::{ArraySpec, CopyMode, Location, Region, ZarrArray, copy_region, create_group, parse_selection};
use isthmus_posix::StoreOptions;
use isthmus_store::{RequestContext, Store};
use serde_json::{Map, Value, json};

use crate::args::BenchArgs;
use crate::engine::{create_bucket, open_engine};
use crate::gateway::spawn_gateway;

mod report;

const SCRIPT: &str = include_str!("eqsim.py");
const H5_KEY: &str = "ground.h5";
const ZARR_KEY: &str = "ground.zarr";
const GZIP_KEY: &str = "ground-gzip.zarr";
const RECOMMENDED_KEY: &str = "ground-rec.zarr";
/// Bumped when `prepare` makes other copies, so an older data root is converted again.
const LAYOUT_VERSION: &str = "v2";
const SLAB_BYTES: u64 = 8 << 20;
/// The same-codec copy's codecs: HDF5's shuffle filter then deflate level 1.
const GZIP_CODECS: &str = "shuffle,gzip:1";

/// One read pattern.
struct Pattern {
    name: &'static str,
    /// select (sum and count of the selection), where (count and sum of |v| > threshold in the
    /// selection), latlon (min and max of lat and lon over the selection).
    kind: &'static str,
    select: String,
    threshold: f64,
}

fn patterns(t: u64, x: u64, y: u64) -> Vec<Pattern> {
    let (px, py) = (x / 3, y / 2);
    let (sx, sy) = (x.saturating_sub(32) / 2, y.saturating_sub(32) / 4);
    let t0 = t / 2;
    let pattern = |name, kind, select: String| Pattern { name, kind, select, threshold: 0.9 };
    vec![
        pattern("point time series", "select", format!("[:,{px},{py},0]")),
        pattern("32x32 region, all time", "select", format!("[:,{sx}:{},{sy}:{},0]", sx + 32, sy + 32)),
        pattern("|v| > 0.9, 64 steps", "where", format!("[{t0}:{},:,:,0]", (t0 + 64).min(t))),
        pattern("downsampled by 200", "select", "[::200,::200,::200,0]".into()),
        pattern("downsampled by 25", "select", "[::25,::25,::25,0]".into()),
        pattern("lat/lon of a region", "latlon", format!("[{sx}:{},{sy}:{}]", sx + 32, sy + 32)),
    ]
}

/// The arrays a target reads: the velocity and the coordinates.
struct Arrays {
    vel: Arc<ZarrArray>,
    lat: ZarrArray,
    lon: ZarrArray,
}

/// The sum in f64 (as numpy's `sum(dtype=float64)` in the Python targets); float32, the
/// dataset's type, without a type dispatch per element.
fn sum_of(array: &ZarrArray, bytes: &[u8]) -> f64 {
    let data_type = array.data_type();
    if data_type == isthmus_array::DataType::Float32 {
        return bytes.chunks_exact(4).map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))).sum();
    }
    (0..bytes.len() / data_type.size()).map(|i| data_type.value_at(bytes, i)).sum()
}

/// Runs `pattern` and returns its check values (as `eqsim.py`'s `check` does).
fn run_pattern(arrays: &Arrays, pattern: &Pattern) -> Result<Vec<f64>, String> {
    let error = |e: isthmus_array::ArrayError| format!("{}: {e}", pattern.name);
    match pattern.kind {
        "latlon" => {
            let mut out = Vec::new();
            for array in [&arrays.lat, &arrays.lon] {
                let selection = parse_selection(&pattern.select, array.shape()).map_err(error)?;
                let bytes = array.read_vec(&selection.region).map_err(error)?;
                let values: Vec<f64> = (0..bytes.len() / 8).map(|i| array.data_type().value_at(&bytes, i)).collect();
                out.push(values.iter().copied().fold(f64::INFINITY, f64::min));
                out.push(values.iter().copied().fold(f64::NEG_INFINITY, f64::max));
            }
            Ok(out)
        }
        "where" => {
            let selection = parse_selection(&pattern.select, arrays.vel.shape()).map_err(error)?;
            let expr = Expr::parse(&format!("abs(value)>{}", pattern.threshold)).map_err(error)?;
            let found = find(&arrays.vel, &selection, &expr, 0, usize::MAX, SLAB_BYTES).map_err(error)?;
            Ok(vec![found.values.len() as f64, found.values.iter().sum()])
        }
        _ => {
            let selection = parse_selection(&pattern.select, arrays.vel.shape()).map_err(error)?;
            let bytes = arrays.vel.read_vec(&selection.region).map_err(error)?;
            Ok(vec![sum_of(&arrays.vel, &bytes), (bytes.len() / 4) as f64])
        }
    }
}

/// Times every pattern on one target: {pattern: {seconds, check}}.
fn time_target(arrays: &Arrays, patterns: &[Pattern], repeat: usize) -> Result<Value, String> {
    let mut results = Map::new();
    for pattern in patterns {
        let mut times = Vec::new();
        let mut check = Vec::new();
        for _ in 0..repeat.max(1) {
            let start = Instant::now();
            check = run_pattern(arrays, pattern)?;
            times.push(start.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        results.insert(pattern.name.into(), json!({"seconds": times[times.len() / 2], "check": check}));
    }
    Ok(Value::Object(results))
}

fn python(args: &[&str], stdin: Option<&str>) -> Result<String, String> {
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot run python3 (the h5py baseline needs it): {e}"))?;
    if let Some(text) = stdin {
        child.stdin.take().expect("piped").write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    }
    drop(child.stdin.take());
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if !output.status.success() {
        return Err(format!("python3 eqsim.py {} failed (is h5py installed? pip install h5py)", args[0]));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The dataset, written by h5py and converted to the two Zarr copies, unless this shape is
/// already there from an earlier run.
fn prepare(root: &Path, store: &Arc<dyn Store>, bucket: &str, shape: &[u64], tc: u64) -> Result<(), String> {
    let dir = root.join(bucket);
    let marker = dir.join("ground.shape");
    let wanted = format!("{shape:?} {tc} {LAYOUT_VERSION}");
    if std::fs::read_to_string(&marker).is_ok_and(|s| s == wanted) {
        return Ok(());
    }
    for key in [ZARR_KEY, GZIP_KEY, RECOMMENDED_KEY] {
        let _ = std::fs::remove_dir_all(dir.join(key));
    }
    let h5 = dir.join(H5_KEY);
    let dims: Vec<String> = shape.iter().chain([&tc]).map(u64::to_string).collect();
    eprintln!("writing {} with h5py ({} MiB of float32)", h5.display(), (shape.iter().product::<u64>() * 4) >> 20);
    let h5_text = h5.display().to_string();
    python(&["generate", &h5_text, &dims[0], &dims[1], &dims[2], &dims[3]], None)?;
    eprintln!("converting to Zarr v3 through the HDF5-in-place reader");
    let cx = RequestContext::process();
    let file = isthmus_hdf5::open_file(store.clone(), &cx, bucket, H5_KEY).map_err(|e| e.to_string())?;
    let target = Location::Engine { store: store.clone(), cx, bucket: bucket.into(), prefix: String::new() };
    let zstd = ArraySpec::parse_codecs("zstd:1").map_err(|e| e.to_string())?;
    create_group(&target, ZARR_KEY, Map::new()).map_err(|e| e.to_string())?;
    let copy = |dataset: &str, path: &str, mode: CopyMode| -> Result<(), String> {
        let source = Location::Chunks(file.chunks(dataset).map_err(|e| e.to_string())?);
        let shape = file.index().dataset(dataset).map(|d| d.shape.clone()).unwrap_or_default();
        copy_region(&source, "", &target, path, &Region::whole(&shape), &mode, 2, &|_, _| {})
            .map(drop)
            .map_err(|e| format!("{dataset} -> {path}: {e}"))
    };
    let same = CopyMode::AsNewArray { chunks: None, inner_chunks: None, codecs: zstd.clone() };
    for name in ["vel", "lat", "lon"] {
        copy(&format!("/{name}"), &format!("{ZARR_KEY}/{name}"), same.clone())?;
    }
    // The HDF5 file's own compression (deflate level 1 after a byte shuffle) in Zarr terms, so
    // that this copy differs from the file in nothing but the container: same chunks, same codec.
    let gzip = ArraySpec::parse_codecs(GZIP_CODECS).map_err(|e| e.to_string())?;
    create_group(&target, GZIP_KEY, Map::new()).map_err(|e| e.to_string())?;
    copy("/vel", &format!("{GZIP_KEY}/vel"), CopyMode::AsNewArray { chunks: None, inner_chunks: None, codecs: gzip })?;
    let recommended = CopyMode::AsNewArray {
        chunks: Some(vec![4 * tc, 64, 64, 1]),
        inner_chunks: Some(vec![tc, 8, 8, 1]),
        codecs: zstd,
    };
    create_group(&target, RECOMMENDED_KEY, Map::new()).map_err(|e| e.to_string())?;
    copy("/vel", &format!("{RECOMMENDED_KEY}/vel"), recommended)?;
    std::fs::write(&marker, wanted).map_err(|e| e.to_string())
}

fn engine_arrays(location: &Location, vel: &str) -> Result<Arrays, String> {
    let open = |path: &str| ZarrArray::open(location, path).map_err(|e| format!("{path}: {e}"));
    Ok(Arrays {
        vel: Arc::new(open(vel)?),
        lat: open(&format!("{ZARR_KEY}/lat"))?,
        lon: open(&format!("{ZARR_KEY}/lon"))?,
    })
}

pub fn run(args: &BenchArgs, data_root: &Path) -> Result<(), String> {
    let [t, x, y] = args.eqsim_shape[..] else {
        return Err("--eqsim-shape takes three numbers: time steps, X, Y (e.g. 4096,256,256)".into());
    };
    if x < 32 || y < 32 || t < 8 {
        return Err("--eqsim-shape: at least 8 time steps and 32 x 32 grid points".into());
    }
    let tc = t.min(256);
    eprintln!(
        "isthmus bench eqsim: a {t} x {x} x {y} float32 dataset ({} MiB) written by h5py and copied to Zarr (once per \
         shape, kept in {}), then the six analysis patterns {} time(s) each on h5py, h5py cached, Isthmus in-process, \
         the gateway and zarr-python",
        (t * x * y * 4) >> 20,
        data_root.join(&args.bucket).display(),
        args.repeat
    );
    let store = open_engine(data_root, StoreOptions::default())?;
    create_bucket(&*store, &args.bucket)?;
    let cx = RequestContext::process();
    prepare(data_root, &store, &args.bucket, &[t, x, y], tc)?;
    let patterns = patterns(t, x, y);
    let location =
        Location::Engine { store: store.clone(), cx: cx.clone(), bucket: args.bucket.clone(), prefix: String::new() };
    let mut results = Map::new();
    // Isthmus in-process: the HDF5 file in place, then the Zarr copies.
    let file = isthmus_hdf5::open_file(store.clone(), &cx, &args.bucket, H5_KEY).map_err(|e| e.to_string())?;
    let in_place = Arrays {
        vel: Arc::new(file.array("/vel").map_err(|e| e.to_string())?),
        lat: file.array("/lat").map_err(|e| e.to_string())?,
        lon: file.array("/lon").map_err(|e| e.to_string())?,
    };
    eprintln!("timing Isthmus in-process");
    results.insert(report::IN_PLACE.into(), time_target(&in_place, &patterns, args.repeat)?);
    for (label, key) in
        [(report::ZARR_GZIP, GZIP_KEY), (report::ZARR_ZSTD, ZARR_KEY), (report::ZARR_RECOMMENDED, RECOMMENDED_KEY)]
    {
        let arrays = engine_arrays(&location, &format!("{key}/vel"))?;
        results.insert(label.into(), time_target(&arrays, &patterns, args.repeat)?);
    }
    // For profiling the Isthmus side alone (`perf record`): no h5py, gateway or zarr-python,
    // and so no speedups. An environment variable, not a flag: `bench`'s flags are shared by
    // every workload and are not this module's.
    if std::env::var_os("ISTHMUS_EQSIM_ISTHMUS_ONLY").is_some() {
        return report::report(&results, &patterns, args, tc);
    }
    // The Python targets, through a gateway on the same root.
    let (_gateway, endpoint, key, secret) = spawn_gateway(&data_root.to_path_buf(), args.durability)?;
    let plan = json!({
        "h5": data_root.join(&args.bucket).join(H5_KEY),
        "endpoint": endpoint, "access_key": key, "secret_key": secret, "bucket": args.bucket,
        "h5_key": H5_KEY, "zarr_key": ZARR_KEY, "zarr_recommended_key": RECOMMENDED_KEY,
        "repeat": args.repeat,
        "patterns": patterns.iter().map(|p| json!({"name": p.name, "kind": p.kind, "select": p.select, "threshold": p.threshold})).collect::<Vec<_>>(),
    });
    eprintln!("timing h5py, the gateway and zarr-python");
    let python_results: Value = serde_json::from_str(&python(&["run"], Some(&plan.to_string()))?)
        .map_err(|e| format!("eqsim.py printed no results: {e}"))?;
    if let Some(error) = python_results["error"].as_str() {
        return Err(error.to_string());
    }
    let mut all = python_results.as_object().cloned().unwrap_or_default();
    all.extend(results);
    report::report(&all, &patterns, args, tc)
}
