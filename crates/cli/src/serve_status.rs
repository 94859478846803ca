//! What a serving gateway reports about itself beyond its requests: the per-pool and
//! per-drive figures of `/metrics`, the directory identity `/health/ready` checks, and the
//! process's part of `isthmus admin status`.

use std::sync::Arc;

use crate::config::ServeSettings;

/// What the status page adds about this process: the root served, listeners, pools with their
/// space and drives.
pub fn status_extras(
    settings: &ServeSettings,
    posix: &[(String, Arc<isthmus_posix::PosixStore>)],
    erasure: &[(String, Arc<isthmus_erasure::ErasureStore>)],
) -> isthmus_s3::admin::StatusExtras {
    let root = std::fs::canonicalize(&settings.root).unwrap_or(settings.root.clone());
    let listeners = serde_json::json!({
        "s3": settings.address.to_string(),
        "tls": settings.tls.is_some(),
        "http": settings.http_address.map(|a| a.to_string()),
        "admin": settings.admin_address.map(|a| a.to_string()),
        "local_socket": settings.local_socket.as_ref().map(|p| p.display().to_string()),
    });
    let posix: Vec<(String, std::path::PathBuf)> =
        posix.iter().map(|(name, pool)| (name.clone(), pool.root().to_path_buf())).collect();
    let erasure = erasure.to_vec();
    let durability = format!("{:?}", settings.durability).to_lowercase();
    Arc::new(move || {
        let mut pools: Vec<serde_json::Value> = posix
            .iter()
            .map(|(name, path)| {
                let space = rustix::fs::statvfs(path).ok();
                serde_json::json!({
                    "name": name, "kind": "posix", "path": path.display().to_string(),
                    "size_bytes": space.as_ref().map(|s| s.f_blocks * s.f_frsize),
                    "free_bytes": space.as_ref().map(|s| s.f_bavail * s.f_frsize),
                })
            })
            .collect();
        for (name, store) in &erasure {
            let status = store.status();
            let online = status.drives.iter().filter(|d| d.state == isthmus_erasure::DriveState::Online).count();
            pools.push(serde_json::json!({
                "name": name, "kind": "erasure", "drives": status.drives.len(), "drives_online": online,
                "drives_slow": status.drives.iter().filter(|d| d.slow).count(),
                // What `isthmus pool status --json` prints (the console's pool view shows it).
                "status": status.to_json(),
            }));
        }
        serde_json::json!({
            "root": root.display().to_string(),
            "durability": durability,
            "listeners": listeners,
            "pools": pools,
        })
    })
}

/// A Prometheus label value: backslashes, quotes and line ends escaped.
fn label(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Writes one metric family: its help, its type, then `rows` (labels, value).
fn family(out: &mut String, name: &str, kind: &str, help: &str, rows: impl IntoIterator<Item = (String, f64)>) {
    use std::fmt::Write as _;
    let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
    for (labels, value) in rows {
        let _ = writeln!(out, "{name}{{{labels}}} {value}");
    }
}

/// Per-drive figures of the erasure-coded pools for `/metrics`: state, reads, errors, mean
/// read latency, whether reads go around a drive for being slow, free space, and the objects a
/// drive being rebuilt has left; and each pool's quorums, heal backlog and repairs.
pub fn drive_metrics(pools: &[(String, Arc<isthmus_erasure::ErasureStore>)]) -> String {
    if pools.is_empty() {
        return String::new();
    }
    let statuses: Vec<isthmus_erasure::PoolStatus> = pools.iter().map(|(_, store)| store.status()).collect();
    let pool_names = || pools.iter().map(|(name, _)| label(name));
    // Every drive of every pool: its labels and its report.
    let drives: Vec<(String, &isthmus_erasure::DriveReport)> = pool_names()
        .zip(&statuses)
        .flat_map(|(pool, status)| {
            status
                .drives
                .iter()
                .map(move |d| (format!("pool=\"{pool}\",drive=\"{}\"", label(&d.path.display().to_string())), d))
        })
        .collect();
    let per_drive = |value: &dyn Fn(&isthmus_erasure::DriveReport) -> Option<f64>| -> Vec<(String, f64)> {
        drives.iter().filter_map(|(labels, d)| value(d).map(|v| (labels.clone(), v))).collect()
    };
    let flag = |yes: bool| f64::from(u8::from(yes));
    let mut out = String::new();
    family(
        &mut out,
        "isthmus_pool_drive_up",
        "gauge",
        "1 when a drive of an erasure-coded pool serves reads and writes.",
        per_drive(&|d| Some(flag(d.state == isthmus_erasure::DriveState::Online))),
    );
    family(
        &mut out,
        "isthmus_pool_drive_state",
        "gauge",
        "1 for the state a drive of an erasure-coded pool is in (online, healing, read-only, offline, unformatted, foreign).",
        drives.iter().flat_map(|(labels, d)| {
            isthmus_erasure::DriveState::ALL
                .iter()
                .map(move |state| (format!("{labels},state=\"{}\"", state.name()), flag(d.state == *state)))
        }),
    );
    family(
        &mut out,
        "isthmus_pool_drive_reads_total",
        "counter",
        "Shard reads from a drive.",
        per_drive(&|d| Some(d.reads as f64)),
    );
    family(
        &mut out,
        "isthmus_pool_drive_errors_total",
        "counter",
        "Failed shard reads and writes on a drive.",
        per_drive(&|d| Some(d.errors as f64)),
    );
    family(
        &mut out,
        "isthmus_pool_drive_read_latency_seconds",
        "gauge",
        "Mean shard read latency of a drive (weighted to recent reads).",
        per_drive(&|d| d.mean_latency_ms.map(|ms| ms / 1000.0)),
    );
    family(
        &mut out,
        "isthmus_pool_drive_slow",
        "gauge",
        "1 when reads go around a drive much slower than its peers.",
        per_drive(&|d| Some(flag(d.slow))),
    );
    family(
        &mut out,
        "isthmus_pool_drive_free_bytes",
        "gauge",
        "Bytes available to the gateway on a drive's file system.",
        per_drive(&|d| d.free_bytes.map(|b| b as f64)),
    );
    family(
        &mut out,
        "isthmus_pool_drive_size_bytes",
        "gauge",
        "Size of a drive's file system.",
        per_drive(&|d| d.size_bytes.map(|b| b as f64)),
    );
    family(
        &mut out,
        "isthmus_pool_drive_heal_objects_left",
        "gauge",
        "Objects the rebuild of a replaced drive has still to go through (drives being rebuilt, once counted).",
        per_drive(&|d| d.healing.and_then(|h| h.left()).map(|n| n as f64)),
    );
    family(
        &mut out,
        "isthmus_pool_drive_heal_objects_done",
        "gauge",
        "Objects the rebuild of a replaced drive has gone through (drives being rebuilt).",
        per_drive(&|d| d.healing.map(|h| h.done as f64)),
    );
    let per_pool = |value: &dyn Fn(&isthmus_erasure::PoolStatus) -> f64| -> Vec<(String, f64)> {
        pool_names().zip(&statuses).map(|(pool, status)| (format!("pool=\"{pool}\""), value(status))).collect()
    };
    family(
        &mut out,
        "isthmus_pool_read_quorum_met",
        "gauge",
        "1 when enough drives of an erasure-coded pool serve reads for every object to read.",
        per_pool(&|s| flag(s.read_quorum_met())),
    );
    family(
        &mut out,
        "isthmus_pool_write_quorum_met",
        "gauge",
        "1 when enough drives of an erasure-coded pool take writes for writes to be acknowledged.",
        per_pool(&|s| flag(s.write_quorum_met())),
    );
    family(
        &mut out,
        "isthmus_pool_heal_queue",
        "gauge",
        "Objects waiting for the background healer of an erasure-coded pool.",
        per_pool(&|s| s.heal_queue.unwrap_or_default() as f64),
    );
    family(
        &mut out,
        "isthmus_pool_heal_repaired_total",
        "counter",
        "Objects the background healer found damaged and repaired.",
        per_pool(&|s| s.heal_repaired.unwrap_or_default() as f64),
    );
    out
}

/// The device and inode of a directory: which directory a path names now.
pub fn identity_of(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Per-pool figures for `/metrics`: each posix pool's file-system size and free space.
pub fn pool_metrics(pools: &[(String, std::path::PathBuf)]) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "# HELP isthmus_pool_size_bytes Size of the file system a pool is on.\n# TYPE isthmus_pool_size_bytes gauge\n",
    );
    let mut free = String::from(
        "# HELP isthmus_pool_free_bytes Bytes available to the gateway on a pool's file system.\n# TYPE isthmus_pool_free_bytes gauge\n",
    );
    for (name, path) in pools {
        if let Ok(stat) = rustix::fs::statvfs(path) {
            let _ = writeln!(out, "isthmus_pool_size_bytes{{pool=\"{name}\"}} {}", stat.f_blocks * stat.f_frsize);
            let _ = writeln!(free, "isthmus_pool_free_bytes{{pool=\"{name}\"}} {}", stat.f_bavail * stat.f_frsize);
        }
    }
    out + &free
}
