//! CERN's erasure-coding study of CephFS on high-density disk servers: EC 4+2, 8+2 and 16+2
//! with several block (object) sizes, throughput and tails, and what one slow drive costs. The
//! experiments are `isthmus bench pools` (the erasure-coding work owns them); this study runs it
//! at its size and folds its rows and box plots into the report.

use serde::Deserialize;

use super::report::{Section, StudyReport, Table, number, percent};
use super::runner::{Runner, path_arg, words};

/// What the study published, as this project quotes it (docs/benchmarks/reproduce.md, cephfs-ec).
const PUBLISHED_BEST_WRITE: &str = "EC 16+2 with 64 MiB objects";
const PUBLISHED_SLOW_DRIVE: (f64, f64) = (25.0, 5.0);

/// The fields of a `bench pools --json` row this report reads.
#[derive(Debug, Clone, Deserialize)]
struct PoolRow {
    pool: String,
    layout: String,
    block_size: u64,
    op: String,
    read_size: Option<u64>,
    streams: usize,
    object_size: u64,
    mean_seconds: f64,
    p99_seconds: f64,
    max_seconds: f64,
    aggregate_mib_s: f64,
    ratio_of_ideal: Option<f64>,
    errors: usize,
}

impl PoolRow {
    fn slow(&self) -> bool {
        self.pool.contains("-slow-")
    }

    /// How far the slowest streams lag the typical one.
    fn tail(&self) -> f64 {
        self.p99_seconds / self.mean_seconds
    }
}

fn size_label(bytes: u64) -> String {
    crate::units::format_size(bytes)
}

pub fn run(runner: &mut Runner, report: &mut StudyReport) -> Result<(), String> {
    let dir = runner.fresh_dir("pools")?;
    let (streams, size, blocks, reads) = if runner.quick {
        ("8", "64MiB", "4MiB,64MiB", "1MiB,64MiB")
    } else {
        ("64", "128MiB", "1MiB,4MiB,16MiB,64MiB", "1MiB,128MiB")
    };
    let svg = runner.output("pools.svg");
    let mut args = words(&["pools", "--pool-dir"]);
    args.push(path_arg(&dir));
    args.extend(words(&[
        "--layouts",
        "4+2,8+2,16+2",
        "--block-sizes",
        blocks,
        "--read-sizes",
        reads,
        "--size",
        size,
        "--streams",
        streams,
        "--slow-drive-ms",
        "20",
        "--svg",
    ]));
    args.push(path_arg(&svg));
    if !runner.quick {
        args.push("--via-gateway".into());
    }
    let rows: Vec<PoolRow> = runner.bench("pools", &args)?;
    report.sections.extend(sections(&rows)?);
    Ok(())
}

/// The report's sections, computed from the bench's rows.
fn sections(rows: &[PoolRow]) -> Result<Vec<Section>, String> {
    let failed: usize = rows.iter().map(|r| r.errors).sum();
    if failed > 0 {
        return Err(format!("bench pools: {failed} streams failed; no report from a run with errors"));
    }
    let first = rows.first().ok_or("bench pools wrote no rows")?;
    let writes: Vec<&PoolRow> =
        rows.iter().filter(|r| r.op == "write" && r.layout.contains('+') && !r.slow()).collect();
    let raw_write = rows.iter().find(|r| r.pool == "raw" && r.op == "write").ok_or("no raw write row")?;
    let mut layouts = Section::new("Layouts and block sizes: write throughput and tails");
    layouts.text.push(format!(
        "{} streams, each writing one {} object, then reading it back with ranged reads; the same streams on \
         raw files of the same file system in the same run ({} MiB/s written). The ideal for a k+m layout is \
         k/(k+m) of the raw bandwidth. Tail: the 99th percentile of the seconds per stream over their mean.",
        first.streams,
        size_label(first.object_size),
        number(raw_write.aggregate_mib_s)
    ));
    let mut table =
        Table::new(&["layout", "block", "write MiB/s", "of ideal", "write p99 / mean", "read MiB/s (size)"]);
    for w in &writes {
        let reads: Vec<String> = rows
            .iter()
            .filter(|r| r.pool == w.pool && r.op == "read")
            .map(|r| format!("{} ({})", number(r.aggregate_mib_s), r.read_size.map(size_label).unwrap_or_default()))
            .collect();
        table.row(vec![
            w.layout.clone(),
            size_label(w.block_size),
            number(w.aggregate_mib_s),
            w.ratio_of_ideal.map(percent).unwrap_or_default(),
            format!("{:.2}", w.tail()),
            reads.join(", "),
        ]);
    }
    layouts.tables.push(table);
    layouts.figures.push(("pools.svg".into(), "seconds per stream, every row (box plots)".into()));
    let best =
        writes.iter().max_by(|a, b| a.aggregate_mib_s.total_cmp(&b.aggregate_mib_s)).ok_or("no erasure write rows")?;
    let longest = writes.iter().max_by(|a, b| a.tail().total_cmp(&b.tail())).ok_or("no erasure write rows")?;
    let name = |r: &PoolRow| format!("EC {} with {} blocks", r.layout, size_label(r.block_size));
    layouts.differences.push(format!(
        "The paper's best write throughput and longest tails were both {PUBLISHED_BEST_WRITE}; here the best write \
         throughput is {} ({} MiB/s, {} of ideal) and the longest tail {} (p99 {:.2}x the mean, max {:.2} s).",
        name(best),
        number(best.aggregate_mib_s),
        best.ratio_of_ideal.map(percent).unwrap_or_default(),
        name(longest),
        longest.tail(),
        longest.max_seconds
    ));
    layouts.differences.push(
        "Scale: CERN measured a Ceph cluster of high-density JBOD disk servers on 100 Gb Ethernet; this run has \
         every drive of a pool as a directory of one file system on one machine, so the layouts compare in shape \
         (ratios to the raw file system), not in absolute rate."
            .into(),
    );
    let mut sections = vec![layouts];
    if let Some(slow) = slow_drive(rows) {
        sections.push(slow);
    }
    Ok(sections)
}

/// One drive slowed: the first layout's rows with and without hedged reads against its healthy rows.
fn slow_drive(rows: &[PoolRow]) -> Option<Section> {
    let slowed: Vec<&PoolRow> = rows.iter().filter(|r| r.slow()).collect();
    let healthy_name = slowed.first()?.pool.split("-slow-").next()?.to_string();
    let healthy = |op: &str, read_size: Option<u64>| {
        rows.iter().find(|r| r.pool == healthy_name && r.op == op && r.read_size == read_size)
    };
    let mut section = Section::new("One slow drive");
    section.text.push(format!(
        "The first layout ({healthy_name}) again with one of its drives answering 20 ms late on every operation, \
         reads with and without hedging (a hedged read asks the parity drives when a data drive is late)."
    ));
    let mut table = Table::new(&["pool", "operation", "MiB/s", "of the healthy pool"]);
    let (published_healthy, published_slow) = PUBLISHED_SLOW_DRIVE;
    let mut worst: Option<f64> = None;
    for row in &slowed {
        let base = healthy(&row.op, row.read_size)?;
        let ratio = row.aggregate_mib_s / base.aggregate_mib_s;
        worst = Some(worst.map_or(ratio, |w: f64| w.min(ratio)));
        let op = match row.read_size {
            Some(size) => format!("read, {} ranges", size_label(size)),
            None => row.op.clone(),
        };
        table.row(vec![row.pool.clone(), op, number(row.aggregate_mib_s), percent(ratio)]);
    }
    section.tables.push(table);
    section.differences.push(format!(
        "The paper saw one slow disk take a cluster from {published_healthy} GiB/s to under {published_slow} GiB/s \
         (under {} of healthy); here the worst row keeps {} of the healthy pool's rate.",
        percent(published_slow / published_healthy),
        worst.map(percent).unwrap_or_default()
    ));
    Some(section)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pool: &str, layout: &str, op: &str, read: Option<u64>, mib_s: f64, mean: f64, p99: f64) -> PoolRow {
        PoolRow {
            pool: pool.into(),
            layout: layout.into(),
            block_size: 4 << 20,
            op: op.into(),
            read_size: read,
            streams: 8,
            object_size: 64 << 20,
            mean_seconds: mean,
            p99_seconds: p99,
            max_seconds: p99,
            aggregate_mib_s: mib_s,
            ratio_of_ideal: (op == "write" && layout.contains('+')).then_some(0.5),
            errors: 0,
        }
    }

    #[test]
    fn the_sentences_are_computed_from_the_rows() {
        let rows = vec![
            row("raw", "raw", "write", None, 800.0, 1.0, 1.1),
            row("ec4p2-4096k", "4+2", "write", None, 300.0, 1.0, 1.2),
            row("ec4p2-4096k", "4+2", "read", Some(1 << 20), 400.0, 1.0, 1.1),
            row("ec16p2-4096k", "16+2", "write", None, 350.0, 1.0, 3.0),
            row("ec4p2-4096k-slow-unhedged", "4+2", "read", Some(1 << 20), 100.0, 4.0, 5.0),
        ];
        let report = sections(&rows).expect("a report");
        let text: String = report.iter().flat_map(|s| s.differences.clone()).collect::<Vec<_>>().join("\n");
        assert!(text.contains("best write throughput is EC 16+2 with 4MiB blocks (350 MiB/s"), "{text}");
        assert!(text.contains("longest tail EC 16+2 with 4MiB blocks (p99 3.00x"), "{text}");
        assert!(text.contains("keeps 25.0 % of the healthy"), "{text}");
        let failed = vec![PoolRow { errors: 2, ..rows[0].clone() }];
        assert!(sections(&failed).is_err());
    }
}
