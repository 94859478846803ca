//! `isthmus bench --ranks N` on one host: N processes of this program as the ranks of one run,
//! one gateway shared by all, stopped together when one fails.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::args::{BenchArgs, SHARED_GATEWAY_VAR};
use crate::gateway::{SpawnedProcess, spawn_gateway};

/// `--ranks N` on one host: starts N copies of this command as ranks 0..N, with one gateway
/// shared by all when `--serve` is given, and waits for them; rank 0 prints the merged report.
pub fn launch_ranks(args: &BenchArgs, data_root: &Path) -> Result<(), String> {
    let sync_dir = args
        .sync_dir
        .clone()
        .unwrap_or_else(|| data_root.join(".isthmus").join(format!("bench-sync-{}", std::process::id())));
    if sync_dir.exists() {
        return Err(format!("{} already exists: remove it or pass another --sync-dir", sync_dir.display()));
    }
    std::fs::create_dir_all(&sync_dir).map_err(|e| format!("cannot create {}: {e}", sync_dir.display()))?;
    let outcome = run_ranks(args, &sync_dir);
    let _ = std::fs::remove_dir_all(&sync_dir);
    outcome
}

fn run_ranks(args: &BenchArgs, sync_dir: &Path) -> Result<(), String> {
    let gateway = match &args.serve {
        Some(root) => Some(spawn_gateway(root, args.durability)?),
        None => None,
    };
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut ranks = Vec::with_capacity(args.ranks);
    for rank in 0..args.ranks {
        let mut command = Command::new(&exe);
        command
            .args(std::env::args_os().skip(1))
            .env(crate::team::RANK_VAR, rank.to_string())
            .env(crate::team::SIZE_VAR, args.ranks.to_string())
            .env(crate::team::SYNC_VAR, sync_dir);
        if let Some((_, endpoint, key, secret)) = &gateway {
            command.env(SHARED_GATEWAY_VAR, format!("{endpoint} {key} {secret}"));
        }
        ranks.push(SpawnedProcess(command.spawn().map_err(|e| format!("cannot start rank {rank}: {e}"))?));
    }
    // Wait for all; a failed rank would leave the others waiting at a barrier, so on the first
    // failure the rest are stopped (dropping them kills them).
    let mut running: Vec<(usize, SpawnedProcess)> = ranks.into_iter().enumerate().collect();
    while !running.is_empty() {
        let mut still_running = Vec::with_capacity(running.len());
        for (rank, mut child) in running {
            match child.0.try_wait() {
                Ok(None) => still_running.push((rank, child)),
                Ok(Some(status)) if status.success() => {}
                Ok(Some(status)) => return Err(format!("rank {rank} failed ({status})")),
                Err(e) => return Err(format!("rank {rank}: {e}")),
            }
        }
        running = still_running;
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
