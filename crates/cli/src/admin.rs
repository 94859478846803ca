//! `isthmus admin`: site administration. Against a running gateway, as its root user
//! (`admin_client`): `status`, `users` (list, add, disable, enable, rotate, map, remove),
//! `buckets` (owner, pool, usage). On the data root directly: `usage` prints what each bucket
//! holds (objects, bytes, owner) against its quota, and each user's total against theirs,
//! counted now from the buckets' listings (what quotas count: current objects).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use isthmus_access::quota::{Limits, Quotas, Usage, count};
use isthmus_store::BucketSettings;
use isthmus_store::RequestContext;
use serde_json::{Value, json};

use crate::admin_client::{Connection, call, print_object, print_rows};
use crate::config::FileConfig;

#[derive(Args, Debug)]
pub struct AdminArgs {
    #[command(flatten)]
    pub connection: Connection,
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Subcommand, Debug)]
pub enum AdminCommand {
    /// One page about the running gateway: version, listeners, pools, users, buckets, traffic
    Status,
    /// The gateway's users: list, add, disable, enable, rotate, map, remove
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// Every bucket with its owner, pool and usage (counted now from its listing)
    Buckets {
        /// Leave out objects and bytes (no listing of each bucket)
        #[arg(long)]
        no_usage: bool,
    },
    /// Usage of every bucket and user against the configured quotas (reads --root directly)
    Usage,
}

#[derive(Subcommand, Debug)]
pub enum UsersCommand {
    /// Every user: access key, name, where it is defined, disabled, bucket grants, Unix identity
    List,
    /// Add a user; its keys are printed once
    Add {
        /// The user's display name (unique)
        name: String,
        /// The access key [default: generated]
        #[arg(long)]
        access_key: Option<String>,
        /// A bucket the user may use besides its own (a name, or a prefix ending in *); repeat
        /// [default: none: its own buckets only]
        #[arg(long = "bucket", value_name = "PATTERN")]
        buckets: Vec<String>,
        #[command(flatten)]
        identity: IdentityFlags,
    },
    /// Refuse every request of a user (any credential), until enabled again
    Disable { user: String },
    /// Accept a disabled user's requests again
    Enable { user: String },
    /// Give a user a new secret key (the access key stays: it is the user's id); printed once
    Rotate { user: String },
    /// Map a user to a Unix identity (what its requests run as with identity = "posix")
    Map {
        user: String,
        #[command(flatten)]
        identity: IdentityFlags,
    },
    /// Remove a user added with `users add` (the buckets it owns stay)
    Remove { user: String },
}

/// A Unix identity on the command line.
#[derive(Args, Debug, Default)]
pub struct IdentityFlags {
    /// A Unix user name (uid, gid and groups from NSS) [default: none; without it or --uid, no
    /// Unix identity]
    #[arg(long, conflicts_with = "uid")]
    pub unix_user: Option<String>,
    /// An explicit uid (with --gid) [default: none; without it or --unix-user, no Unix identity]
    #[arg(long, requires = "gid")]
    pub uid: Option<u32>,
    /// The primary gid with --uid [required with --uid]
    #[arg(long)]
    pub gid: Option<u32>,
    /// Supplementary group ids, comma-separated [default: none: only --gid, or NSS's groups]
    #[arg(long, value_delimiter = ',')]
    pub groups: Vec<u32>,
    /// The umask of what the user's requests create, in octal (e.g. 027) [default: 022]
    #[arg(long, value_parser = parse_umask)]
    pub umask: Option<u32>,
}

fn parse_umask(text: &str) -> Result<u32, String> {
    let digits = text.trim_start_matches("0o");
    u32::from_str_radix(digits, 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| format!("{text:?} is not an octal umask such as 027"))
}

impl IdentityFlags {
    fn to_json(&self) -> Value {
        let mut out = serde_json::Map::new();
        if let Some(name) = &self.unix_user {
            out.insert("unix_user".into(), json!(name));
        }
        if let Some(uid) = self.uid {
            out.insert("uid".into(), json!(uid));
        }
        if let Some(gid) = self.gid {
            out.insert("gid".into(), json!(gid));
        }
        if !self.groups.is_empty() {
            out.insert("groups".into(), json!(self.groups));
        }
        if let Some(umask) = self.umask {
            out.insert("umask".into(), json!(umask));
        }
        Value::Object(out)
    }
}

pub fn run(args: AdminArgs) -> Result<(), String> {
    let connection = args.connection;
    let json = connection.json;
    match args.command {
        AdminCommand::Usage => usage(connection.root, connection.config, json),
        AdminCommand::Status => {
            print_object(&call(&connection, "status", &[], None)?, json);
            Ok(())
        }
        AdminCommand::Buckets { no_usage } => {
            let params: &[(&str, &str)] = if no_usage { &[("usage", "false")] } else { &[] };
            let rows = call(&connection, "buckets", params, None)?;
            print_rows(&rows, &["name", "owner", "pool", "objects", "bytes"], json);
            Ok(())
        }
        AdminCommand::Users { command } => users(&connection, command),
    }
}

fn users(connection: &Connection, command: UsersCommand) -> Result<(), String> {
    let json = connection.json;
    let (answer, secret_shown) = match command {
        UsersCommand::List => {
            let rows = call(connection, "users", &[], None)?;
            print_rows(&rows, &["access_key", "display_name", "source", "disabled", "buckets", "unix"], json);
            return Ok(());
        }
        UsersCommand::Add { name, access_key, buckets, identity } => {
            let mut body = identity.to_json();
            body["display_name"] = json!(name);
            body["buckets"] = json!(buckets);
            if let Some(key) = access_key {
                body["access_key"] = json!(key);
            }
            (call(connection, "add-user", &[], Some(&body))?, true)
        }
        UsersCommand::Disable { user } => {
            (call(connection, "disable-user", &[("user", &user)], Some(&json!({})))?, false)
        }
        UsersCommand::Enable { user } => {
            (call(connection, "enable-user", &[("user", &user)], Some(&json!({})))?, false)
        }
        UsersCommand::Rotate { user } => (call(connection, "rotate-key", &[("user", &user)], Some(&json!({})))?, true),
        UsersCommand::Map { user, identity } => {
            (call(connection, "map-user", &[("user", &user)], Some(&identity.to_json()))?, false)
        }
        UsersCommand::Remove { user } => {
            (call(connection, "remove-user", &[("user", &user)], Some(&json!({})))?, false)
        }
    };
    print_object(&answer, json);
    if secret_shown && !json {
        eprintln!("The secret key is shown only now: hand it to the user over a private channel.");
    }
    Ok(())
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
    let store = isthmus_pools::open_root(&root, isthmus_posix::StoreOptions::default())
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
