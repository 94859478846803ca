//! What an erasure-coded pool says about itself: each drive (state, healing progress, free
//! space, latency, errors, slow) and the pool's read and write quorums, as `isthmus pool
//! status`, the console and `/metrics` show them. `PoolStatus::to_json` is the one place the
//! JSON field names are made (documented in docs/operator/pools.md).

use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use super::drives::DriveState;
use super::{ErasureStore, Inner};

impl DriveState {
    /// Every state, in the order status output lists them (one series each in the metrics).
    pub const ALL: [DriveState; 6] = [
        DriveState::Online,
        DriveState::Rebuilding,
        DriveState::ReadOnly,
        DriveState::Offline,
        DriveState::Unformatted,
        DriveState::Foreign,
    ];
}

/// How far the rebuild of a replaced drive has come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HealProgress {
    /// Objects rebuilt (or found whole) so far in this pass.
    pub done: u64,
    /// Objects the pass goes through; `None` while they are being counted.
    pub total: Option<u64>,
}

impl HealProgress {
    /// Objects still to go, once counted (objects written meanwhile are not counted: they
    /// reach the drive as they are written).
    pub fn left(&self) -> Option<u64> {
        self.total.map(|t| t.saturating_sub(self.done))
    }

    /// Percent done, once counted (100 for a pool with no objects).
    pub fn percent(&self) -> Option<f64> {
        self.total
            .map(|t| if t == 0 { 100.0 } else { (self.done.min(t) as f64 * 100.0 / t as f64 * 10.0).floor() / 10.0 })
    }
}

/// One drive as the admin commands, the console and the metrics show it.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveReport {
    /// Its place in the pool's drive list.
    pub slot: usize,
    pub path: std::path::PathBuf,
    pub state: DriveState,
    /// While the drive is being rebuilt (`DriveState::Rebuilding`).
    pub healing: Option<HealProgress>,
    /// Mean read latency (exponentially weighted), when measured.
    pub mean_latency_ms: Option<f64>,
    pub reads: u64,
    pub errors: u64,
    /// Much slower than its peers: reads go around it.
    pub slow: bool,
    /// The drive's file system: bytes available to the gateway, and its size (`None` when it
    /// cannot be asked: a missing drive).
    pub free_bytes: Option<u64>,
    pub size_bytes: Option<u64>,
}

impl DriveReport {
    /// Whether the drive serves reads now.
    pub fn serves_reads(&self) -> bool {
        matches!(self.state, DriveState::Online | DriveState::ReadOnly)
    }

    /// Whether the drive takes writes now (a drive being rebuilt does).
    pub fn takes_writes(&self) -> bool {
        matches!(self.state, DriveState::Online | DriveState::Rebuilding)
    }
}

/// An erasure-coded pool's state.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolStatus {
    pub name: String,
    /// k and m.
    pub data: usize,
    pub parity: usize,
    pub drives: Vec<DriveReport>,
    /// Drives that must serve reads for every object to read: k (and at least m + 1, the
    /// drives an object's record is read from).
    pub read_quorum: usize,
    /// Drives that must take writes for a write to be acknowledged: N - m (and at least the
    /// k, or k + 1 when k = m, its shards need).
    pub write_quorum: usize,
    /// Objects waiting for this process's background healer, and objects it repaired since
    /// the pool was opened; `None` in a process that does not serve the pool (an admin command
    /// beside the gateway: the gateway's are in its metrics and console).
    pub heal_queue: Option<usize>,
    pub heal_repaired: Option<u64>,
    /// The pace of the background rebuild (MiB of objects a second; 0: off).
    pub heal_rate_mib: u64,
}

impl PoolStatus {
    pub fn drives_serving_reads(&self) -> usize {
        self.drives.iter().filter(|d| d.serves_reads()).count()
    }

    pub fn drives_taking_writes(&self) -> usize {
        self.drives.iter().filter(|d| d.takes_writes()).count()
    }

    pub fn read_quorum_met(&self) -> bool {
        self.drives_serving_reads() >= self.read_quorum
    }

    pub fn write_quorum_met(&self) -> bool {
        self.drives_taking_writes() >= self.write_quorum
    }

    /// The status as JSON, with the stable field names of `isthmus pool status --json`.
    pub fn to_json(&self) -> Value {
        let drives: Vec<Value> = self
            .drives
            .iter()
            .map(|d| {
                json!({
                    "slot": d.slot,
                    "path": d.path.display().to_string(),
                    "state": d.state.name(),
                    "healing": d.healing.map(|h| json!({
                        "objects_done": h.done,
                        "objects_total": h.total,
                        "objects_left": h.left(),
                        "percent": h.percent(),
                    })),
                    "slow": d.slow,
                    "free_bytes": d.free_bytes,
                    "size_bytes": d.size_bytes,
                    "mean_latency_ms": d.mean_latency_ms,
                    "reads": d.reads,
                    "errors": d.errors,
                })
            })
            .collect();
        json!({
            "pool": self.name,
            "data": self.data,
            "parity": self.parity,
            "read_quorum": { "needed": self.read_quorum, "drives": self.drives_serving_reads(), "met": self.read_quorum_met() },
            "write_quorum": { "needed": self.write_quorum, "drives": self.drives_taking_writes(), "met": self.write_quorum_met() },
            "heal_queue": self.heal_queue,
            "heal_repaired": self.heal_repaired,
            "heal_rate_mib": self.heal_rate_mib,
            "drives": drives,
        })
    }
}

/// The size and free space of the file system at `path`.
fn space(path: &std::path::Path) -> (Option<u64>, Option<u64>) {
    match rustix::fs::statvfs(path) {
        Ok(s) => (s.f_bavail.checked_mul(s.f_frsize), s.f_blocks.checked_mul(s.f_frsize)),
        Err(_) => (None, None),
    }
}

impl Inner {
    pub(crate) fn drive_reports(&self) -> Vec<DriveReport> {
        let median = self.median_latency_us();
        self.drives
            .iter()
            .map(|d| {
                let state = d.state();
                let (free_bytes, size_bytes) = if state == DriveState::Offline { (None, None) } else { space(&d.path) };
                DriveReport {
                    slot: d.index,
                    path: d.path.clone(),
                    state,
                    healing: (state == DriveState::Rebuilding).then(|| self.healer.rebuild_progress(d)),
                    mean_latency_ms: d.latency.mean_us().map(|us| us as f64 / 1000.0),
                    reads: d.latency.samples(),
                    errors: d.errors.load(Ordering::Relaxed),
                    slow: self.is_slow(d, median),
                    free_bytes,
                    size_bytes,
                }
            })
            .collect()
    }

    fn status(&self) -> PoolStatus {
        let serving = self.config.background_heal;
        let (heal_queue, heal_repaired) = self.healer.backlog();
        PoolStatus {
            name: self.name.clone(),
            data: self.layout.data,
            parity: self.layout.parity,
            drives: self.drive_reports(),
            read_quorum: self.layout.data.max(self.meta_read_quorum()),
            write_quorum: self.meta_write_quorum().max(self.shard_write_quorum()),
            heal_queue: serving.then_some(heal_queue),
            heal_repaired: serving.then_some(heal_repaired),
            heal_rate_mib: self.config.heal_rate_mib,
        }
    }
}

impl ErasureStore {
    /// The pool's drives: state, healing progress, space, latency, errors.
    pub fn drive_reports(&self) -> Vec<DriveReport> {
        self.inner().drive_reports()
    }

    /// The pool's drives and quorums.
    pub fn status(&self) -> PoolStatus {
        self.inner().status()
    }
}

#[cfg(test)]
mod tests {
    use super::HealProgress;

    #[test]
    fn progress_counts_down_and_rounds_down() {
        let p = HealProgress { done: 1, total: Some(3) };
        assert_eq!(p.left(), Some(2));
        assert_eq!(p.percent(), Some(33.3));
        assert_eq!(HealProgress { done: 5, total: Some(3) }.left(), Some(0), "objects written meanwhile");
        assert_eq!(HealProgress { done: 5, total: Some(3) }.percent(), Some(100.0));
        assert_eq!(HealProgress { done: 0, total: Some(0) }.percent(), Some(100.0));
        assert_eq!(HealProgress { done: 9, total: None }.percent(), None);
    }
}
