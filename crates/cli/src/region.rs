//! `isthmus region push` and `pull`: a region of a Zarr array moved between this site's data
//! root and another site's S3 endpoint (another Isthmus, MinIO, AWS), only the chunks it
//! intersects, in parallel, verified, resumable (run the same command again), with a progress bar,
//! then where the time went (plan, metadata, source reads, resume checks, destination writes).

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use isthmus_array::{CopyMode, CopyReport, Location, RemoteEndpoint, ZarrArray, copy_region, parse_selection};
use isthmus_store::RequestContext;

#[derive(Debug, Args)]
pub struct RegionArgs {
    #[command(subcommand)]
    pub command: RegionCommand,
}

#[derive(Debug, Subcommand)]
pub enum RegionCommand {
    /// Send a region of a local array (BUCKET/PATH under --root) to http(s)://HOST:PORT/BUCKET/PATH
    Push(CopyArgs),
    /// Fetch a region of a remote array (http(s)://HOST:PORT/BUCKET/PATH) into BUCKET/PATH under --root
    Pull(CopyArgs),
}

#[derive(Debug, Args)]
pub struct CopyArgs {
    /// push: the local array, BUCKET/PATH; pull: the remote one, http(s)://HOST:PORT/BUCKET/PATH
    pub source: String,
    /// Where it goes: push: http(s)://HOST:PORT/BUCKET/PATH; pull: BUCKET/PATH [required]
    #[arg(long)]
    pub to: String,
    /// The region, as `[start:stop:step, index, ...]` [default: the whole array]
    #[arg(long)]
    pub select: Option<String>,
    /// The local data root
    #[arg(long, default_value = "./data")]
    pub root: PathBuf,
    /// Write the region as a new array of its own shape (decoded and re-chunked) instead of
    /// copying the chunks it intersects under the source's metadata
    #[arg(long)]
    pub as_new_array: bool,
    /// With --as-new-array: the new array's chunk shape, comma-separated [default: the
    /// source's, clipped to the region]
    #[arg(long, value_delimiter = ',')]
    pub chunks: Option<Vec<u64>>,
    /// Chunks moved at once
    #[arg(long, default_value_t = 8)]
    pub parallel: usize,
    /// Region remote requests are signed for
    #[arg(long, env = "AWS_REGION", default_value = "us-east-1")]
    pub region: String,
    /// Also write the counts and the time breakdown as JSON to this file [default: none: no
    /// JSON]
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// PEM file of the CA that signed the remote endpoint's certificate, or of its self-signed
    /// certificate itself (https) [default: the built-in Mozilla (webpki) roots]
    #[arg(long)]
    pub ca_bundle: Option<PathBuf>,
}

/// One copy's figures, seconds and bytes, as `--json` writes them (PDC-XF's Figure 9 reads
/// them: `isthmus bench reproduce pdc-xf`). `read_s`, `check_s` and `write_s` are thread time
/// summed over the chunks moved `parallel` at a time (see `isthmus_array::CopyTimes`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct MigrationBreakdown {
    /// `push` or `pull`.
    pub direction: String,
    /// Chunks the region intersects, sent now, already there (resumed), absent at the source.
    pub chunks: u64,
    pub sent: u64,
    pub skipped: u64,
    pub absent: u64,
    /// Bytes sent (encoded chunks and metadata).
    pub bytes: u64,
    pub wall_s: f64,
    pub plan_s: f64,
    pub metadata_s: f64,
    pub read_s: f64,
    pub check_s: f64,
    pub write_s: f64,
    /// Bytes over the wall time, MiB/s.
    pub mib_s: f64,
}

impl MigrationBreakdown {
    pub fn from_report(direction: &str, report: &CopyReport) -> Self {
        let t = &report.times;
        Self {
            direction: direction.to_string(),
            chunks: report.chunks,
            sent: report.sent,
            skipped: report.skipped,
            absent: report.absent,
            bytes: report.bytes,
            wall_s: t.wall.as_secs_f64(),
            plan_s: t.plan.as_secs_f64(),
            metadata_s: t.metadata.as_secs_f64(),
            read_s: t.read.as_secs_f64(),
            check_s: t.check.as_secs_f64(),
            write_s: t.write.as_secs_f64(),
            mib_s: report.bytes as f64 / (1 << 20) as f64 / t.wall.as_secs_f64().max(1e-9),
        }
    }

    /// One line: where the wall time went.
    pub fn describe(&self) -> String {
        format!(
            "{}: {:.3} s wall ({:.1} MiB/s): plan {:.3} s, metadata {:.3} s; summed over chunks: read source \
             {:.3} s, check destination {:.3} s, write destination {:.3} s",
            self.direction,
            self.wall_s,
            self.mib_s,
            self.plan_s,
            self.metadata_s,
            self.read_s,
            self.check_s,
            self.write_s
        )
    }
}

/// `BUCKET/PATH` as its two parts.
fn bucket_and_path(text: &str) -> Result<(String, String), String> {
    match text.trim_matches('/').split_once('/') {
        Some((bucket, path)) if !bucket.is_empty() && !path.is_empty() => Ok((bucket.to_string(), path.to_string())),
        _ => Err(format!("{text:?}: expected BUCKET/PATH (the array's path inside a bucket)")),
    }
}

/// `http(s)://HOST:PORT/BUCKET/PATH` as a location (keys from the environment) and a path.
fn remote(url: &str, region: &str, ca_bundle: Option<&Path>) -> Result<(Location, String), String> {
    let parsed: url::Url =
        url.parse().map_err(|e| format!("{url:?}: {e}: expected http(s)://HOST:PORT/BUCKET/PATH"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{url:?}: expected http(s)://HOST:PORT/BUCKET/PATH"));
    }
    let (bucket, path) = bucket_and_path(parsed.path())?;
    let key = std::env::var("AWS_ACCESS_KEY_ID")
        .map_err(|_| "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for the remote endpoint".to_string())?;
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY").map_err(|_| "set AWS_SECRET_ACCESS_KEY too".to_string())?;
    let endpoint = RemoteEndpoint {
        endpoint: parsed[..url::Position::BeforePath].to_string(),
        bucket,
        access_key: key,
        secret_key: secret,
        region: region.to_string(),
        ca_bundle: ca_bundle.map(Path::to_path_buf),
    };
    Ok((Location::Remote { endpoint, prefix: String::new() }, path))
}

/// `BUCKET/PATH` under the local root (the bucket made if needed).
fn local(text: &str, root: &std::path::Path) -> Result<(Location, String), String> {
    let (bucket, path) = bucket_and_path(text)?;
    let store = crate::open_engine(root, &bucket)?;
    Ok((Location::Engine { store, cx: RequestContext::process(), bucket, prefix: String::new() }, path))
}

pub fn run(args: RegionArgs) -> Result<(), String> {
    let (push, copy) = match &args.command {
        RegionCommand::Push(copy) => (true, copy),
        RegionCommand::Pull(copy) => (false, copy),
    };
    let ((source, source_path), (target, target_path)) = if push {
        (local(&copy.source, &copy.root)?, remote(&copy.to, &copy.region, copy.ca_bundle.as_deref())?)
    } else {
        (remote(&copy.source, &copy.region, copy.ca_bundle.as_deref())?, local(&copy.to, &copy.root)?)
    };
    let array = ZarrArray::open(&source, &source_path).map_err(|e| format!("{}: {e}", copy.source))?;
    let selection =
        parse_selection(copy.select.as_deref().unwrap_or("[]"), array.shape()).map_err(|e| e.to_string())?;
    let mode = match copy.as_new_array {
        true => CopyMode::AsNewArray { chunks: copy.chunks.clone(), inner_chunks: None, codecs: Vec::new() },
        false if copy.chunks.is_some() => return Err("--chunks goes with --as-new-array".into()),
        false => CopyMode::Chunks,
    };
    let bar = indicatif::ProgressBar::new(0);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] [{bar:40}] {pos}/{len} chunks ({per_sec})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    let progress = |done: u64, total: u64| {
        bar.set_length(total);
        bar.set_position(done);
    };
    let report =
        copy_region(&source, &source_path, &target, &target_path, &selection.region, &mode, copy.parallel, &progress)
            .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    println!(
        "{} {} of {} chunks ({} already there, {} absent at the source), {:.1} MiB",
        if push { "pushed" } else { "pulled" },
        report.sent,
        report.chunks,
        report.skipped,
        report.absent,
        report.bytes as f64 / (1 << 20) as f64
    );
    let breakdown = MigrationBreakdown::from_report(if push { "push" } else { "pull" }, &report);
    println!("{}", breakdown.describe());
    if let Some(path) = &copy.json {
        let json = serde_json::to_vec_pretty(&breakdown).map_err(|e| e.to_string())?;
        std::fs::write(path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use isthmus_array::{CopyReport, CopyTimes};

    use super::MigrationBreakdown;

    #[test]
    fn a_copy_is_described_by_where_its_time_went() {
        let ms = Duration::from_millis;
        let times =
            CopyTimes { plan: ms(10), metadata: ms(5), read: ms(300), check: ms(20), write: ms(400), wall: ms(500) };
        let report = CopyReport { chunks: 6, sent: 6, skipped: 0, absent: 0, bytes: 3 << 20, times };
        let m = MigrationBreakdown::from_report("push", &report);
        assert_eq!((m.direction.as_str(), m.chunks, m.sent, m.skipped), ("push", 6, 6, 0));
        assert!((m.wall_s - 0.5).abs() < 1e-9 && (m.mib_s - 6.0).abs() < 1e-9, "{m:?}");
        let line = m.describe();
        assert!(line.starts_with("push: 0.500 s wall (6.0 MiB/s): plan 0.010 s"), "{line}");
        assert!(line.contains("write destination 0.400 s"), "{line}");
        let json = serde_json::to_value(&m).unwrap();
        for field in [
            "direction",
            "chunks",
            "sent",
            "bytes",
            "wall_s",
            "plan_s",
            "metadata_s",
            "read_s",
            "check_s",
            "write_s",
            "mib_s",
        ] {
            assert!(json.get(field).is_some(), "{field} (read by the pdc-xf study)");
        }
    }
}
