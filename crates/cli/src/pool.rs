//! The pool admin commands: `isthmus heal POOL` (scan and repair an erasure-coded pool, with a
//! progress bar), `isthmus pool status POOL` (its drives: state, healing progress, free space,
//! latency, errors, slow ones; its read and write quorums; `--json` for scripts) and
//! `isthmus pool migrate BUCKET --to POOL` (move a bucket between pools while it is served).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use isthmus_erasure::{DriveReport, ErasureStore, HealProgress};
use isthmus_posix::StoreOptions;

#[derive(Args, Debug)]
pub struct HealArgs {
    /// The erasure-coded pool to heal (a name from ROOT/.isthmus/pools.toml)
    pub pool: String,
    /// The data root whose pool table declares the pool
    #[arg(long, default_value = "./data")]
    pub root: PathBuf,
}

#[derive(Args, Debug)]
pub struct PoolArgs {
    #[command(subcommand)]
    pub command: PoolCommand,
}

#[derive(Subcommand, Debug)]
pub enum PoolCommand {
    /// Show an erasure-coded pool's drives (state, healing progress, free space, read latency,
    /// errors, slow drives) and whether its read and write quorums are met
    Status {
        pool: String,
        #[arg(long, default_value = "./data")]
        root: PathBuf,
        /// Print JSON (field names in docs/operator/pools.md) instead of a table
        #[arg(long)]
        json: bool,
    },
    /// Move a bucket to another pool while it stays readable and writable; run it again to
    /// resume one that was interrupted
    Migrate {
        /// The bucket to move
        bucket: String,
        /// The pool to move it to (a name from ROOT/.isthmus/pools.toml, or "default") [required]
        #[arg(long)]
        to: String,
        /// Abort multipart uploads begun in the old pool before the migration, instead of
        /// waiting for their clients to complete them
        #[arg(long)]
        abort_uploads: bool,
        #[arg(long, default_value = "./data")]
        root: PathBuf,
    },
}

fn open(root: &Path, pool: &str) -> Result<ErasureStore, String> {
    isthmus_pools::open_erasure_pool(root, pool, StoreOptions::default()).map_err(|e| e.to_string())
}

/// Bytes as "12.3 GiB".
fn bytes(n: Option<u64>) -> String {
    n.map_or("-".to_string(), |n| indicatif::BinaryBytes(n).to_string())
}

fn drive_table(drives: &[DriveReport]) -> comfy_table::Table {
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::NOTHING);
    table.set_header(["drive", "state", "healing", "free", "size", "mean latency", "I/Os", "errors", ""]);
    for d in drives {
        let healing = match d.healing {
            Some(HealProgress { total: None, done }) => format!("counting ({done} done)"),
            Some(progress) => format!(
                "{:.1} %, {} objects left",
                progress.percent().unwrap_or_default(),
                progress.left().unwrap_or_default()
            ),
            None => String::new(),
        };
        table.add_row([
            d.path.display().to_string(),
            d.state.name().to_string(),
            healing,
            bytes(d.free_bytes),
            bytes(d.size_bytes),
            d.mean_latency_ms.map_or("-".to_string(), |ms| format!("{ms:.3} ms")),
            d.reads.to_string(),
            d.errors.to_string(),
            if d.slow { "SLOW: much slower than its peers".to_string() } else { String::new() },
        ]);
    }
    table
}

/// `isthmus pool status`: the pool's layout, quorums and drives, as text or JSON.
fn status(root: &Path, pool: &str, json: bool) -> Result<(), String> {
    let store = open(root, pool)?;
    // Measure: a few small reads per drive, so the latency column means something.
    store.probe_drives();
    let status = store.status();
    if json {
        println!("{}", serde_json::to_string_pretty(&status.to_json()).map_err(|e| e.to_string())?);
        return Ok(());
    }
    let config = store.config();
    println!(
        "pool {pool}: erasure {}+{} over {} drives, block size {} bytes, objects up to {} bytes inline",
        config.data,
        config.parity,
        config.drives.len(),
        config.block_size,
        config.inline_limit
    );
    let met = |yes: bool| if yes { "met" } else { "NOT MET" };
    println!(
        "read quorum {}: {} drives serve reads ({}); write quorum {}: {} drives take writes ({})",
        status.read_quorum,
        status.drives_serving_reads(),
        met(status.read_quorum_met()),
        status.write_quorum,
        status.drives_taking_writes(),
        met(status.write_quorum_met())
    );
    let rate = match status.heal_rate_mib {
        0 => "off (run isthmus heal)".to_string(),
        mib => format!("{mib} MiB/s"),
    };
    println!("background rebuild of replaced drives: {rate}");
    println!("{}", drive_table(&status.drives));
    Ok(())
}

pub fn heal(args: HealArgs) -> Result<(), String> {
    let store = open(&args.root, &args.pool)?;
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("healing {pos}/{len} objects [{bar:40}] {elapsed_precise} eta {eta}")
            .map_err(|e| e.to_string())?,
    );
    let report = store
        .heal(|done, total| {
            bar.set_length(total);
            bar.set_position(done);
        })
        .map_err(|e| format!("heal of pool {:?} stopped: {e}", args.pool))?;
    bar.finish();
    println!(
        "pool {}: {} buckets, {} objects; {} shards rebuilt, {} object records repaired, {} leftover files removed",
        args.pool,
        report.buckets,
        report.objects,
        report.shards_rebuilt,
        report.manifests_repaired,
        report.leftovers_removed
    );
    println!("{}", drive_table(&report.drives));
    if report.unreadable.is_empty() {
        return Ok(());
    }
    for object in &report.unreadable {
        eprintln!("unreadable: {object}");
    }
    Err(format!(
        "{} objects have fewer than {} good shards: bring the missing drives back and heal again",
        report.unreadable.len(),
        store.config().data
    ))
}

fn migrate(root: &Path, bucket: &str, to: &str, abort_uploads: bool) -> Result<(), String> {
    let pools = isthmus_pools::open_pools(root, StoreOptions::default()).map_err(|e| e.to_string())?;
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "moving {pos}/{len} objects [{bar:40}] {msg} {elapsed_precise} eta {eta}",
        )
        .map_err(|e| e.to_string())?,
    );
    let report = pools
        .migrate(bucket, to, abort_uploads, |state| {
            bar.set_length(state.total);
            bar.set_position(state.done);
            bar.set_message(indicatif::HumanBytes(state.bytes).to_string());
        })
        .map_err(|e| {
            format!("migration of {bucket:?} to pool {to:?} stopped (run the command again to resume): {e}")
        })?;
    bar.finish();
    println!(
        "bucket {} moved from pool {} to pool {}{}: {} objects ({}) copied and verified, {} already in the target, {} \
         uploads aborted",
        report.bucket,
        report.from,
        report.to,
        if report.resumed { " (resumed)" } else { "" },
        report.moved,
        indicatif::HumanBytes(report.bytes),
        report.superseded,
        report.uploads_aborted
    );
    Ok(())
}

pub fn run(args: PoolArgs) -> Result<(), String> {
    match args.command {
        PoolCommand::Migrate { bucket, to, abort_uploads, root } => migrate(&root, &bucket, &to, abort_uploads),
        PoolCommand::Status { pool, root, json } => status(&root, &pool, json),
    }
}
