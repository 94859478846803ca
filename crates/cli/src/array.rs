//! `isthmus array`: HDF5 files as arrays. `ls FILE.h5` lists every dataset with its shape, type,
//! chunks, filters and whether it can be served in place (and if not, which filter or type
//! stops it); `import FILE.h5 --to BUCKET/PATH` converts datasets to Zarr v3 under the data
//! root with the chunking and codecs asked for, reading the file through the same in-place
//! reader the gateway serves it with.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use isthmus_array::{ArraySpec, CopyMode, Location, Region, copy_region, create_group};
use isthmus_hdf5::{Hdf5File, open_local};
use isthmus_store::RequestContext;

#[derive(Debug, Args)]
pub struct ArrayArgs {
    #[command(subcommand)]
    pub command: ArrayCommand,
}

#[derive(Debug, Subcommand)]
pub enum ArrayCommand {
    /// List the datasets of an HDF5 file and whether each can be served in place
    Ls {
        /// The HDF5 file
        file: PathBuf,
        /// Print JSON instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Convert datasets of an HDF5 file to Zarr v3 arrays under the data root
    Import(ImportArgs),
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The HDF5 file
    pub file: PathBuf,
    /// Where the arrays go, BUCKET/PATH: a group holding each dataset at its HDF5 path, or with
    /// one --dataset, that dataset's array [required]
    #[arg(long)]
    pub to: String,
    /// The dataset(s) to convert (repeatable) [default: every dataset that can be read]
    #[arg(long)]
    pub dataset: Vec<String>,
    /// The new chunk shape, comma-separated (for datasets of that many dimensions)
    /// [default: the HDF5 chunk shape]
    #[arg(long, value_delimiter = ',')]
    pub chunks: Option<Vec<u64>>,
    /// Store the new arrays as shards of inner chunks of this shape (each --chunks object holds
    /// many), comma-separated [default: none: not sharded]
    #[arg(long, value_delimiter = ',')]
    pub inner_chunks: Option<Vec<u64>>,
    /// Codecs of the new arrays, comma-separated short forms (`zstd:3`, `gzip:5`,
    /// `blosc:lz4:5:shuffle`, `crc32c`; empty for none)
    #[arg(long, default_value = "zstd:3")]
    pub codecs: String,
    /// The local data root
    #[arg(long, default_value = "./data")]
    pub root: PathBuf,
    /// Chunk rows converted at once
    #[arg(long, default_value_t = 4)]
    pub parallel: usize,
}

pub fn run(args: ArrayArgs) -> Result<(), String> {
    match args.command {
        ArrayCommand::Ls { file, json } => list(&file, json),
        ArrayCommand::Import(import) => import_file(&import),
    }
}

fn open(file: &std::path::Path) -> Result<Hdf5File, String> {
    open_local(file).map_err(|e| e.to_string())
}

fn list(file: &std::path::Path, json: bool) -> Result<(), String> {
    let described = open(file)?.describe();
    if json {
        println!("{}", serde_json::to_string_pretty(&described).unwrap_or_default());
        return Ok(());
    }
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::NOTHING);
    table.set_header(["dataset", "shape", "dtype", "chunks", "filters", "served in place"]);
    let text = |v: &serde_json::Value| v.to_string().replace('"', "");
    for d in described["datasets"].as_array().into_iter().flatten() {
        let served = match d["reason"].as_str() {
            Some(reason) => format!("no: {reason}"),
            None => "yes".to_string(),
        };
        table.add_row([
            text(&d["path"]),
            text(&d["shape"]),
            text(&d["dtype"]),
            text(&d["chunks"]),
            text(&d["filters"]),
            served,
        ]);
    }
    println!("{table}");
    Ok(())
}

fn import_file(args: &ImportArgs) -> Result<(), String> {
    let file = open(&args.file)?;
    let codecs = ArraySpec::parse_codecs(&args.codecs).map_err(|e| e.to_string())?;
    let (bucket, path) = match args.to.trim_matches('/').split_once('/') {
        Some((bucket, path)) if !bucket.is_empty() && !path.is_empty() => (bucket.to_string(), path.to_string()),
        _ => return Err(format!("--to {:?}: expected BUCKET/PATH", args.to)),
    };
    let chosen: Vec<String> = if args.dataset.is_empty() {
        file.index().datasets.iter().map(|d| d.path.clone()).collect()
    } else {
        args.dataset.iter().map(|d| format!("/{}", d.trim_start_matches('/'))).collect()
    };
    // Every dataset is checked before anything is written: a named one that cannot be read
    // fails the import; without names, those that cannot be read are reported and skipped.
    let mut sources = Vec::new();
    for dataset in &chosen {
        match file.chunks(dataset) {
            Ok(chunks) => sources.push((dataset.clone(), Location::Chunks(chunks))),
            Err(err) if args.dataset.is_empty() => eprintln!("isthmus: skipped {dataset}: {err}"),
            Err(err) => return Err(err.to_string()),
        }
    }
    if sources.is_empty() {
        return Err(format!("{}: no dataset can be imported", args.file.display()));
    }
    let store = crate::open_engine(&args.root, &bucket)?;
    let cx = RequestContext::process();
    let target = Location::Engine { store, cx, bucket: bucket.clone(), prefix: String::new() };
    let single = args.dataset.len() == 1;
    if !single {
        create_group(&target, &path, Default::default()).map_err(|e| format!("{bucket}/{path}: {e}"))?;
    }
    for (dataset, source) in &sources {
        let shape = file.index().dataset(dataset).map(|d| d.shape.clone()).unwrap_or_default();
        let target_path = if single { path.clone() } else { format!("{path}{dataset}") };
        if !single && let Some((parent, _)) = target_path.rsplit_once('/') {
            ensure_groups(&target, &path, parent)?;
        }
        let chunk_shape = args.chunks.clone().filter(|c| c.len() == shape.len());
        let inner = args.inner_chunks.clone().filter(|c| c.len() == shape.len());
        let mode = CopyMode::AsNewArray { chunks: chunk_shape, inner_chunks: inner, codecs: codecs.clone() };
        let whole = Region::whole(&shape);
        let report = copy_region(source, "", &target, &target_path, &whole, &mode, args.parallel, &|_, _| {})
            .map_err(|e| format!("{dataset}: {e}"))?;
        println!("{dataset} -> {bucket}/{target_path}: {shape:?}, {:.1} MiB", report.bytes as f64 / (1 << 20) as f64);
    }
    Ok(())
}

/// Creates the groups between `root` (already a group) and `parent`.
fn ensure_groups(target: &Location, root: &str, parent: &str) -> Result<(), String> {
    let mut at = root.to_string();
    for part in parent.strip_prefix(root).unwrap_or("").split('/').filter(|p| !p.is_empty()) {
        at = format!("{at}/{part}");
        match create_group(target, &at, Default::default()) {
            Ok(()) | Err(isthmus_array::ArrayError::Exists(_)) => {}
            Err(e) => return Err(format!("{at}: {e}")),
        }
    }
    Ok(())
}
