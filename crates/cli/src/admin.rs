//! `isthmus admin`: site administration that reads the data root directly. `usage` prints what
//! each bucket holds (objects, bytes, owner) against its quota, and each user's total against
//! theirs, counted now from the buckets' listings (what quotas count: current objects).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use isthmus_store::RequestContext;
use isthmus_store::quota::{Limits, Quotas, Usage, count};

use crate::config::FileConfig;

#[derive(Args, Debug)]
pub struct AdminArgs {
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// Usage of every bucket and of every user with a quota, against the configured quotas
    Usage {
        /// The data root
        #[arg(long, default_value = "./data")]
        root: PathBuf,
        /// The configuration file whose [[quotas]] apply
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print JSON lines instead of a table
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: AdminArgs) -> Result<(), String> {
    match args.command {
        AdminCommand::Usage { root, config, json } => usage(root, config, json),
    }
}

fn limit(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn usage(root: PathBuf, config: Option<PathBuf>, json: bool) -> Result<(), String> {
    let file = match &config {
        Some(path) => FileConfig::load(path)?,
        None => FileConfig::default(),
    };
    let root_owner = file.root_user.as_ref().map_or("root", |u| u.access_key.as_str()).to_string();
    let quotas = Quotas::new(&file.quotas, &root_owner)?;
    let store = isthmus_store::open_root(&root, isthmus_store::StoreOptions::default())
        .map_err(|e| format!("cannot open {}: {e}", root.display()))?;
    let cx = RequestContext::process();
    let mut rows: Vec<(String, String, Usage, Limits)> = Vec::new();
    let limits_of = |name: &str| {
        file.quotas.iter().find(|q| q.bucket.as_deref() == Some(name)).map_or(Ok(Limits::default()), |q| {
            Ok::<_, String>(Limits {
                bytes: q.max_bytes.as_ref().map(|b| b.bytes()).transpose()?,
                objects: q.max_objects,
            })
        })
    };
    for bucket in store.list_buckets(&cx).map_err(|e| e.to_string())? {
        let used = count(&*store, &bucket.name).map_err(|e| format!("bucket {}: {e}", bucket.name))?;
        let owner = store.bucket_owner(&cx, &bucket.name).ok().flatten().unwrap_or_else(|| root_owner.clone());
        rows.push((format!("bucket {}", bucket.name), owner, used, limits_of(&bucket.name)?));
    }
    for (name, used, limits) in quotas.report(&*store).map_err(|e| e.to_string())? {
        if name.starts_with("user ") {
            rows.push((name, String::new(), used, limits));
        }
    }
    if json {
        for (name, owner, used, limits) in &rows {
            let (kind, name) = name.split_once(' ').unwrap_or(("", name));
            let line = serde_json::json!({
                "kind": kind, "name": name, "owner": owner, "objects": used.objects, "bytes": used.bytes,
                "max_objects": limits.objects, "max_bytes": limits.bytes,
            });
            println!("{line}");
        }
        return Ok(());
    }
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::NOTHING);
    table.set_header(["", "owner", "objects", "max objects", "bytes", "max bytes", "used"]);
    for (name, owner, used, limits) in rows {
        let share = limits
            .bytes
            .filter(|&m| m > 0)
            .map_or_else(|| "-".to_string(), |max| format!("{:.1}%", used.bytes as f64 * 100.0 / max as f64));
        table.add_row([
            name,
            owner,
            used.objects.to_string(),
            limit(limits.objects),
            used.bytes.to_string(),
            limit(limits.bytes),
            share,
        ]);
    }
    println!("{table}");
    Ok(())
}
