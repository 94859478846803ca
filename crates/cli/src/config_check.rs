//! `isthmus config check FILE`: validates a configuration file as `serve` would read it (keys,
//! values, users and their Unix identities, token issuers and their keys, quotas, TLS files,
//! the data root's pool table) and prints what it means, without starting anything.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::config::{IdentityMode, ServeArgs, ServeSettings};

#[derive(Args, Debug)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Validate a configuration file and print what it means
    Check {
        /// The TOML configuration file
        file: PathBuf,
    },
    /// Print the configuration reference (every key and flag, Markdown), generated from the
    /// code's definitions: docs/operator/config-reference.md is this output
    Reference,
}

pub fn run(args: ConfigArgs) -> Result<(), String> {
    match args.command {
        ConfigCommand::Check { file } => check(file),
        ConfigCommand::Reference => {
            print!("{}", crate::config_reference::markdown()?);
            Ok(())
        }
    }
}

fn check(file: PathBuf) -> Result<(), String> {
    let args = ServeArgs { config: Some(file.clone()), ..ServeArgs::default() };
    let env = (std::env::var("ISTHMUS_ROOT_ACCESS_KEY").ok(), std::env::var("ISTHMUS_ROOT_SECRET_KEY").ok());
    let settings = ServeSettings::resolve(args, env)?;
    let mut lines = Vec::new();
    let scheme = if settings.tls.is_some() { "https" } else { "http" };
    lines.push(format!("serves {} on {scheme}://{}", settings.root.display(), settings.address));
    if let Some((cert, key)) = &settings.tls {
        isthmus_s3::tls::load(cert, key)?;
        lines.push(format!("  TLS: {} with {} (TLS 1.2 and 1.3; reloaded on change)", cert.display(), key.display()));
    }
    if let Some(address) = settings.http_address {
        lines.push(format!("  plain HTTP also on http://{address}"));
    }
    if let Some(address) = settings.admin_address {
        lines.push(format!("  admin: http://{address}/metrics, /health/live, /health/ready"));
    }
    if let Some(log) = &settings.access_log {
        lines.push(format!("  access log: {log} ({:?})", settings.access_log_format));
    }
    match settings.console_address() {
        Some(address) => lines.push(format!("  web console: {scheme}://{address}/ (an origin of its own)")),
        None => lines.push("  web console: off (console_listen serves it on an address of its own)".to_string()),
    }
    if settings.outbound_allow.is_empty() {
        lines.push("  third-party copy reaches public hosts only (outbound_allow is empty)".to_string());
    } else {
        let allowed: Vec<String> = settings.outbound_allow.iter().map(ToString::to_string).collect();
        lines.push(format!("  third-party copy reaches public hosts and {}", allowed.join(", ")));
    }
    let tpc = settings.tpc_limits;
    lines.push(format!(
        "  third-party copy: at most {} at once, {} per user; {} s for a remote answer, {} s per copy",
        tpc.max_copies,
        tpc.max_copies_per_user,
        tpc.response_timeout.as_secs(),
        tpc.deadline.as_secs()
    ));
    lines.push(format!(
        "  durability {:?}, metadata {:?}, identity {:?}",
        settings.durability, settings.metadata, settings.identity
    ));
    match &settings.root_user {
        Some(user) => lines.push(format!("  root user: {} (from the file or the environment)", user.access_key)),
        None => lines.push("  root user: from ROOT/.isthmus/credentials.toml (created on first start)".into()),
    }
    for user in &settings.users {
        let identity = if user.identity.is_set() {
            match user.identity.resolve() {
                Ok(id) => format!("runs as uid {} gid {}", id.uid, id.gid),
                Err(err) => return Err(format!("user {:?}: {err}", user.access_key)),
            }
        } else if settings.identity == IdentityMode::Posix {
            return Err(format!(
                "user {:?}: identity = \"posix\" needs a Unix identity: set unix_user = \"NAME\" (or uid and gid)",
                user.access_key
            ));
        } else {
            "no Unix identity".into()
        };
        let grants = if user.buckets.is_empty() { String::new() } else { format!(", buckets {:?}", user.buckets) };
        lines.push(format!("  user {}: {identity}{grants}", user.access_key));
    }
    if !settings.token_issuers.is_empty() {
        let users: Vec<&isthmus_s3::User> = settings.users.iter().chain(settings.root_user.iter()).collect();
        let user_of = |name: &str| {
            users.iter().find(|u| u.access_key == name || u.display_name == name).map(|u| u.access_key.clone())
        };
        isthmus_grid::TokenVerifier::new(&settings.token_issuers, user_of)?;
        for issuer in &settings.token_issuers {
            lines.push(format!(
                "  token issuer {} (keys loaded; audiences {:?}; base path {})",
                issuer.issuer,
                issuer.audiences,
                issuer.base_path.as_deref().unwrap_or("/")
            ));
        }
    }
    if !settings.quotas.is_empty() {
        isthmus_access::quota::Quotas::new(&settings.quotas, "root")?;
        for quota in &settings.quotas {
            let who = match (&quota.bucket, &quota.user) {
                (Some(bucket), _) => format!("bucket {bucket}"),
                (_, Some(user)) => format!("user {user}"),
                _ => String::new(),
            };
            let limit = |v: Option<u64>| v.map_or_else(|| "unlimited".to_string(), |v| v.to_string());
            let bytes = quota.max_bytes.as_ref().map(|b| b.bytes()).transpose()?;
            lines.push(format!("  quota {who}: max bytes {}, max objects {}", limit(bytes), limit(quota.max_objects)));
        }
        lines.push(format!("  quota usage recounted every {}s", settings.quota_rescan.as_secs()));
    }
    if settings.root.exists() {
        let pools = isthmus_pools::open_root(&settings.root, isthmus_posix::StoreOptions::default())
            .map_err(|e| format!("the data root {}: {e}", settings.root.display()))?;
        drop(pools);
        lines.push(format!("  data root {} opens (its pool table, if any, is valid)", settings.root.display()));
    } else {
        lines.push(format!("  data root {} does not exist yet (serve creates it)", settings.root.display()));
    }
    println!("{}: valid", file.display());
    for line in lines {
        println!("{line}");
    }
    Ok(())
}
