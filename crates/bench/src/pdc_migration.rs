//! PDC-XF's cross-facility migration (its Figure 9): a region of an array pushed from one site
//! to another and pulled back, each copy with its time breakdown (plan, metadata, source reads,
//! resume checks, destination writes, wall), as `isthmus region push` / `pull` report it.

use isthmus_array::{CopyMode, CopyReport, Location, Region, copy_region};

use crate::{BenchError, BenchResult};

/// One copy's figures, seconds and bytes. `read_s`, `check_s` and `write_s` are thread time
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

/// A push and the pull that brings the region back.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Migration {
    pub push: MigrationBreakdown,
    pub pull: MigrationBreakdown,
}

/// Pushes `region` of the array at `here`/`path` to `there`/`there_path` (only the chunks it
/// intersects), then pulls the same region from there into `here`/`back_path`, `parallel`
/// chunks at a time; either side may be an engine or a gateway (`Location::Remote`). A
/// destination that already holds a chunk from the same source version skips it (`skipped`):
/// give fresh paths to measure a whole migration.
pub fn push_then_pull(
    here: &Location,
    path: &str,
    there: &Location,
    there_path: &str,
    back_path: &str,
    region: &Region,
    parallel: usize,
) -> BenchResult<Migration> {
    let copy = |from: &Location, from_path: &str, to: &Location, to_path: &str| {
        copy_region(from, from_path, to, to_path, region, &CopyMode::Chunks, parallel, &|_, _| {})
            .map_err(|e| BenchError::Setup(format!("region copy {from_path} -> {to_path}: {e}")))
    };
    let push = copy(here, path, there, there_path)?;
    let pull = copy(there, there_path, here, back_path)?;
    Ok(Migration {
        push: MigrationBreakdown::from_report("push", &push),
        pull: MigrationBreakdown::from_report("pull", &pull),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use isthmus_array::{ArraySpec, DataType, ZarrArray};
    use isthmus_posix::{PosixStore, StoreOptions};
    use isthmus_store::{RequestContext, Store};
    use std::sync::Arc;

    fn site(dir: &std::path::Path) -> Location {
        let store = PosixStore::open(dir, StoreOptions::default()).unwrap();
        store.create_bucket(&RequestContext::process(), "arrays", &Default::default()).unwrap();
        let store: Arc<dyn Store> = Arc::new(store);
        Location::Engine { store, cx: RequestContext::process(), bucket: "arrays".into(), prefix: String::new() }
    }

    #[test]
    fn a_region_goes_there_and_back_with_its_breakdown() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (here, there) = (site(a.path()), site(b.path()));
        let array = ZarrArray::create(&here, "run/vel", &ArraySpec::new(vec![40, 30], DataType::Float32, vec![10, 10]))
            .unwrap();
        let values: Vec<u8> = (0..1200u32).flat_map(|v| (v as f32).to_le_bytes()).collect();
        array.write(&Region::whole(&[40, 30]), &values).unwrap();
        // 20x15 at (5, 5): chunks rows 0..=2, columns 0..=1: 6 of 12.
        let region = Region::new(vec![5, 5], vec![20, 15]);
        let migration = push_then_pull(&here, "run/vel", &there, "copy/vel", "back/vel", &region, 2).unwrap();
        for (m, direction) in [(&migration.push, "push"), (&migration.pull, "pull")] {
            assert_eq!((m.direction.as_str(), m.chunks, m.sent, m.skipped), (direction, 6, 6, 0), "{m:?}");
            assert!(m.wall_s > 0.0 && m.read_s > 0.0 && m.write_s > 0.0, "{m:?}");
            assert!(m.plan_s + m.metadata_s <= m.wall_s, "{m:?}");
            assert!(m.describe().contains("write destination"));
        }
        let back = ZarrArray::open(&here, "back/vel").unwrap();
        let original = array.read_vec(&region).unwrap();
        assert_eq!(back.read_vec(&region).unwrap(), original);
        // Run again: every chunk is already there.
        let again = push_then_pull(&here, "run/vel", &there, "copy/vel", "back/vel", &region, 2).unwrap();
        assert_eq!((again.push.sent, again.push.skipped), (0, 6));
    }
}
