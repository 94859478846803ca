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
            let drives = store.drive_reports();
            let online = drives.iter().filter(|d| d.state == isthmus_erasure::DriveState::Online).count();
            pools.push(serde_json::json!({
                "name": name, "kind": "erasure", "drives": drives.len(), "drives_online": online,
                "drives_slow": drives.iter().filter(|d| d.slow).count(),
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

/// Per-drive figures of the erasure-coded pools for `/metrics`: state, reads, errors, mean
/// read latency, and whether reads go around a drive for being slow; and each pool's heal
/// backlog and repairs.
pub fn drive_metrics(pools: &[(String, Arc<isthmus_erasure::ErasureStore>)]) -> String {
    use std::fmt::Write as _;
    if pools.is_empty() {
        return String::new();
    }
    let families = [
        ("isthmus_pool_drive_up", "gauge", "1 when a drive of an erasure-coded pool serves reads and writes."),
        ("isthmus_pool_drive_reads_total", "counter", "Shard reads from a drive."),
        ("isthmus_pool_drive_errors_total", "counter", "Failed shard reads and writes on a drive."),
        (
            "isthmus_pool_drive_read_latency_seconds",
            "gauge",
            "Mean shard read latency of a drive (weighted to recent reads).",
        ),
        ("isthmus_pool_drive_slow", "gauge", "1 when reads go around a drive much slower than its peers."),
    ];
    let mut out = String::new();
    for (index, (name, kind, help)) in families.iter().enumerate() {
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
        for (pool, store) in pools {
            for drive in store.drive_reports() {
                let value = match index {
                    0 => f64::from(u8::from(drive.state == isthmus_erasure::DriveState::Online)),
                    1 => drive.reads as f64,
                    2 => drive.errors as f64,
                    3 => match drive.mean_latency_ms {
                        Some(ms) => ms / 1000.0,
                        None => continue,
                    },
                    _ => f64::from(u8::from(drive.slow)),
                };
                let _ = writeln!(out, "{name}{{pool=\"{pool}\",drive=\"{}\"}} {value}", drive.path.display());
            }
        }
    }
    let heal = [
        ("isthmus_pool_heal_queue", "gauge", "Objects waiting for the background healer of an erasure-coded pool."),
        ("isthmus_pool_heal_repaired_total", "counter", "Objects the background healer found damaged and repaired."),
    ];
    for (index, (name, kind, help)) in heal.iter().enumerate() {
        let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n");
        for (pool, store) in pools {
            let (queued, repaired) = store.heal_backlog();
            let value = if index == 0 { queued as u64 } else { repaired };
            let _ = writeln!(out, "{name}{{pool=\"{pool}\"}} {value}");
        }
    }
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
