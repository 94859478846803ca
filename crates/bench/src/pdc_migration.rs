//! PDC-XF's cross-facility migration (its Figure 9): a region of an array pushed from one site
//! to another and pulled back, each copy with its counts and time breakdown (plan, metadata,
//! source reads, resume checks, destination writes, wall), the figures `isthmus region push` /
//! `pull` report.

use isthmus_array::{CopyMode, CopyReport, Location, Region, copy_region};

use crate::{BenchError, BenchResult};

/// A push and the pull that brings the region back.
#[derive(Debug, Clone)]
pub struct Migration {
    pub push: CopyReport,
    pub pull: CopyReport,
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
    Ok(Migration { push, pull })
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
        for m in [&migration.push, &migration.pull] {
            assert_eq!((m.chunks, m.sent, m.skipped), (6, 6, 0), "{m:?}");
            let t = &m.times;
            assert!(!t.wall.is_zero() && !t.read.is_zero() && !t.write.is_zero(), "{m:?}");
            assert!(t.plan + t.metadata <= t.wall, "{m:?}");
        }
        let back = ZarrArray::open(&here, "back/vel").unwrap();
        let original = array.read_vec(&region).unwrap();
        assert_eq!(back.read_vec(&region).unwrap(), original);
        // Run again: every chunk is already there.
        let again = push_then_pull(&here, "run/vel", &there, "copy/vel", "back/vel", &region, 2).unwrap();
        assert_eq!((again.push.sent, again.push.skipped), (0, 6));
    }
}
