//! `isthmus serve` settings: command-line flags over the TOML configuration file over defaults,
//! and the root credentials from the environment or the data root.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::Args;
use isthmus_s3::{IdentitySpec, User};
use isthmus_store::{Durability, MetadataMode};
use serde::Deserialize;

pub const DEFAULT_ROOT: &str = "./data";
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:9000";

#[derive(Debug, Args, Default)]
pub struct ServeArgs {
    /// Data root: every top-level directory is a bucket [default: ./data]
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:9000]
    #[arg(long)]
    pub address: Option<SocketAddr>,
    /// strict: fsync data and directory entry before acknowledging a write; relaxed: leave it
    /// to the file system [default: strict]
    #[arg(long, value_parser = listed::<Durability>(&["strict", "relaxed"]))]
    pub durability: Option<Durability>,
    /// Where object metadata lives: auto, xattr or sidecar [default: auto]
    #[arg(long, value_parser = listed::<MetadataMode>(&["auto", "xattr", "sidecar"]))]
    pub metadata: Option<MetadataMode>,
    /// Files written outside the gateway up to this many bytes get the MD5 of their content as
    /// ETag; larger ones an ETag derived from their identity [default: 1048576]
    #[arg(long)]
    pub etag_md5_limit: Option<u64>,
    /// Log level: error, warn, info (also one line per refused request), debug (every request)
    /// [default: info]
    #[arg(long, value_parser = listed::<String>(&["error", "warn", "info", "debug", "trace"]))]
    pub log_level: Option<String>,
    /// Log format: text (human-readable) or json (one object per line) [default: text]
    #[arg(long)]
    pub log_format: Option<LogFormat>,
    /// Domain for virtual-hosted-style requests (bucket.DOMAIN); path style always works
    /// [default: none: path-style requests only]
    #[arg(long)]
    pub domain: Option<String>,
    /// Seconds a client may take to send a request's headers (also closes idle keep-alive
    /// connections) [default: 30]
    #[arg(long)]
    pub header_timeout: Option<u64>,
    /// Seconds a connection may stay with nothing read or written before it is closed
    /// [default: 120]
    #[arg(long)]
    pub idle_timeout: Option<u64>,
    /// Refuse requests signed with AWS Signature Version 2 (accepted by default for old
    /// clients such as libs3 2.0)
    #[arg(long)]
    pub disable_sigv2: bool,
    /// Whose permissions file-system calls run with: gateway (the gateway's own user, its
    /// authorization rules decide) or posix (each S3 user's Unix identity, the kernel decides;
    /// needs root or CAP_SETUID+CAP_SETGID, and a Unix identity for every user) [default: gateway]
    #[arg(long)]
    pub identity: Option<IdentityMode>,
    /// Also serve the engine on this Unix socket to processes of this node, without HTTP and
    /// without keys: a peer is the S3 user its uid maps to (unix_user/uid in the config)
    /// [default: none: no local socket]
    #[arg(long)]
    pub local_socket: Option<PathBuf>,
    /// The largest array selection (`GET path.zarr?select=[...]`) answered at once, e.g. 1GiB;
    /// larger ones are refused with InvalidArgument [default: 1GiB]
    #[arg(long, value_parser = parse_byte_size)]
    pub select_max_bytes: Option<u64>,
    /// PEM certificate chain: `address` serves HTTPS (TLS 1.2 and 1.3); reloaded when the
    /// file changes or on SIGHUP [default: none: plain HTTP]
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of the certificate [required with --tls-cert]
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// A plain-HTTP listener beside the HTTPS one (e.g. 127.0.0.1:9080 for local clients)
    /// [default: none: no second listener]
    #[arg(long)]
    pub http_address: Option<SocketAddr>,
    /// Admin listener: Prometheus /metrics, /health/live, /health/ready (keep it private)
    /// [default: none: no admin listener]
    #[arg(long)]
    pub admin_address: Option<SocketAddr>,
    /// Access log, one line per request: stdout or a file path [default: none: no access log]
    #[arg(long)]
    pub access_log: Option<String>,
    /// Access log format: text or json [default: text]
    #[arg(long, value_enum)]
    pub access_log_format: Option<AccessFormat>,
    /// The web console's own listener, e.g. 127.0.0.1:9001: an origin no object shares (objects
    /// are served on `address` only); `/console/` on the S3 address tells where it is
    /// [default: none: no console]
    #[arg(long)]
    pub console_listen: Option<SocketAddr>,
    /// No web console, even with console_listen; `/console/` on the S3 address is then an S3
    /// path like any other
    #[arg(long)]
    pub no_console: bool,
    /// TOML configuration file (docs/operator/configuration.md); flags given here override it
    /// [default: none: flags and built-in defaults only]
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// How access log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AccessFormat {
    #[default]
    Text,
    Json,
}

/// Whose permissions file-system calls run with (`identity` in the configuration).
///
/// The default is `gateway` even for a gateway started as root: `posix` needs a Unix identity
/// for every S3 user (root's included), which no default can invent, and the quick start must
/// work with no configuration. A root gateway in `gateway` mode says so when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum IdentityMode {
    #[default]
    Gateway,
    Posix,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// The configuration file.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub root: Option<PathBuf>,
    pub address: Option<SocketAddr>,
    pub durability: Option<Durability>,
    pub metadata: Option<MetadataMode>,
    pub etag_md5_limit: Option<u64>,
    pub log_level: Option<String>,
    pub log_format: Option<LogFormat>,
    pub domain: Option<String>,
    /// Accept Signature Version 2 (default true).
    pub sigv2: Option<bool>,
    pub header_timeout: Option<u64>,
    pub idle_timeout: Option<u64>,
    /// Root credentials; otherwise from the environment or the data root.
    pub root_user: Option<User>,
    #[serde(default)]
    pub users: Vec<User>,
    /// `gateway` or `posix` (see `IdentityMode`).
    pub identity: Option<IdentityMode>,
    /// The Unix identity of the root user with `identity = "posix"` (else the `root_user`
    /// table's own `unix_user`/`uid` keys).
    pub root_identity: Option<IdentitySpec>,
    /// Permit users that map to uid 0 with `identity = "posix"`.
    #[serde(default)]
    pub allow_root: bool,
    /// Serve `identity = "posix"` from a data root that others may write without the sticky
    /// bit (any of them could rename the gateway's state or another user's bucket away).
    #[serde(default)]
    pub allow_root_without_sticky_bit: bool,
    /// Seconds between re-resolutions of the users' Unix identities (also on SIGHUP).
    pub identity_refresh_seconds: Option<u64>,
    /// The local socket (see `ServeArgs::local_socket`).
    pub local_socket: Option<PathBuf>,
    /// Connections the local socket serves at once (each has a thread) [default: 256].
    pub local_socket_max_connections: Option<usize>,
    /// Answer local-socket GETs of objects that are one file (256 KiB and more) with a
    /// read-only descriptor of the file, which the peer reads itself [default: true].
    pub local_socket_descriptors: Option<bool>,
    /// See `ServeArgs::select_max_bytes` (bytes) [default: 1 GiB].
    pub select_max_bytes: Option<u64>,
    /// Issuers whose bearer tokens (JWT) the gateway trusts (`[[token_issuers]]`).
    #[serde(default)]
    pub token_issuers: Vec<isthmus_grid::IssuerConfig>,
    /// Hosts third-party copy may reach besides public ones: networks, addresses, optionally
    /// with a port (`["10.1.0.0/16", "127.0.0.1:9001"]`). Loopback, private, link-local and
    /// the gateway's own listeners are refused unless listed here [default: none].
    #[serde(default)]
    pub outbound_allow: Vec<String>,
    /// Seconds a third-party copy waits for the remote side's response (or any read or write of
    /// its body) [default: 30].
    pub tpc_response_timeout_seconds: Option<u64>,
    /// Seconds one third-party copy may run in all [default: 14400].
    pub tpc_deadline_seconds: Option<u64>,
    /// Third-party copies the gateway runs at once [default: 64].
    pub tpc_max_copies: Option<usize>,
    /// Third-party copies one user runs at once [default: 16].
    pub tpc_max_copies_per_user: Option<usize>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub http_address: Option<SocketAddr>,
    pub admin_address: Option<SocketAddr>,
    pub access_log: Option<String>,
    pub access_log_format: Option<AccessFormat>,
    /// Serve the web console on `console_listen` (default true).
    pub console: Option<bool>,
    pub console_listen: Option<SocketAddr>,
    /// Hard quotas per bucket or user (`[[quotas]]`).
    #[serde(default)]
    pub quotas: Vec<isthmus_access::quota::QuotaEntry>,
    /// Seconds between recounts of the usage quotas check (POSIX-side changes are seen then)
    /// [default: 300].
    pub quota_rescan_seconds: Option<u64>,
    /// A bucket's canned ACL (public-read, authenticated-read, public-read-write) also shares
    /// reading its objects, as releases before S3's rule was followed did; S3 shares only the
    /// listing, objects need their own ACL or a bucket policy [default: false].
    #[serde(default)]
    pub bucket_acl_shares_objects: bool,
    /// Bucket notification destinations, one table array per kind (`crate::notify`).
    #[serde(default)]
    pub notify_webhook: Vec<crate::notify::WebhookEntry>,
    #[serde(default)]
    pub notify_nats: Vec<crate::notify::NatsEntry>,
    #[serde(default)]
    pub notify_amqp: Vec<crate::notify::AmqpEntry>,
    #[serde(default)]
    pub notify_redis: Vec<crate::notify::RedisEntry>,
    /// The notification queue's bound [default: 1 GiB].
    pub notify_queue_max_bytes: Option<isthmus_store::byte_size::ByteSize>,
    /// What a full notification queue does: block, drop_oldest or refuse [default: block].
    pub notify_queue_full: Option<isthmus_notify::dispatch::WhenFull>,
    /// How files written outside the gateway are seen: auto, inotify, scan or off [default: auto].
    pub notify_watch: Option<crate::notify::WatchMode>,
    /// Seconds between scans of a shared file system for notifications [default: 60].
    pub notify_scan_interval_seconds: Option<u64>,
    /// The most directories the notification watcher watches with inotify per data root;
    /// buckets with more are scanned as well [default: the kernel's limit].
    pub notify_watch_max_directories: Option<usize>,
}

impl FileConfig {
    pub fn load(path: &Path) -> Result<Self, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("config file {}: {}", path.display(), e.message()))
    }
}

/// Everything `serve` needs, resolved.
#[derive(Debug)]
pub struct ServeSettings {
    pub root: PathBuf,
    pub address: SocketAddr,
    pub durability: Durability,
    pub metadata: MetadataMode,
    pub etag_md5_limit: u64,
    pub log_level: String,
    pub log_format: LogFormat,
    pub domain: Option<String>,
    pub sigv2: bool,
    pub header_timeout: std::time::Duration,
    pub idle_timeout: std::time::Duration,
    pub root_user: Option<User>,
    pub users: Vec<User>,
    pub identity: IdentityMode,
    pub root_identity: Option<IdentitySpec>,
    pub allow_root: bool,
    pub allow_root_without_sticky_bit: bool,
    pub identity_refresh: std::time::Duration,
    pub local_socket: Option<PathBuf>,
    pub local_socket_max_connections: usize,
    pub local_socket_descriptors: bool,
    pub select_max_bytes: u64,
    pub token_issuers: Vec<isthmus_grid::IssuerConfig>,
    pub outbound_allow: Vec<isthmus_grid::AllowEntry>,
    /// Third-party copies' caps and timeouts.
    pub tpc_limits: isthmus_grid::CopyLimits,
    pub quotas: Vec<isthmus_access::quota::QuotaEntry>,
    pub quota_rescan: std::time::Duration,
    /// See `FileConfig::bucket_acl_shares_objects`.
    pub bucket_acl_shares_objects: bool,
    /// Bucket notifications: destinations, the queue, the watcher.
    pub notify: crate::notify::NotifySettings,
    /// Certificate chain and key: the main listener serves HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    pub http_address: Option<SocketAddr>,
    pub admin_address: Option<SocketAddr>,
    pub access_log: Option<String>,
    pub access_log_format: AccessFormat,
    /// The console is wanted (`console`, `--no-console`): `/console/` on the S3 address tells
    /// where it is.
    pub console: bool,
    /// The console's own listener; served only when `console` is set too.
    pub console_listen: Option<SocketAddr>,
}

impl ServeSettings {
    /// Where the web console is served, if it is.
    pub fn console_address(&self) -> Option<SocketAddr> {
        self.console_listen.filter(|_| self.console)
    }

    pub fn resolve(args: ServeArgs, env_keys: (Option<String>, Option<String>)) -> Result<Self, String> {
        let file = match &args.config {
            Some(path) => FileConfig::load(path)?,
            None => FileConfig::default(),
        };
        let tpc_limits = tpc_limits(&file);
        let root_user = match env_keys {
            (Some(access_key), Some(secret_key)) => {
                Some(User { display_name: "root".into(), ..User::new(access_key, secret_key) })
            }
            (None, None) => file.root_user,
            _ => {
                return Err("set both ISTHMUS_ROOT_ACCESS_KEY and ISTHMUS_ROOT_SECRET_KEY, or neither".into());
            }
        };
        let log_level = args.log_level.or(file.log_level).unwrap_or_else(|| "info".into());
        if !["error", "warn", "info", "debug", "trace"].contains(&log_level.as_str()) {
            return Err(format!("unknown log level {log_level:?}: use error, warn, info, debug or trace"));
        }
        for user in root_user.iter().chain(&file.users) {
            if user.access_key.len() < 3 || user.secret_key.len() < 8 {
                return Err(format!("user {:?}: access keys need 3+ characters and secret keys 8+", user.access_key));
            }
        }
        let durability = args.durability.or(file.durability).unwrap_or_default();
        Ok(Self {
            root: args.root.or(file.root).unwrap_or_else(|| PathBuf::from(DEFAULT_ROOT)),
            address: args.address.or(file.address).unwrap_or_else(|| DEFAULT_ADDRESS.parse().expect("valid default")),
            durability,
            metadata: args.metadata.or(file.metadata).unwrap_or_default(),
            etag_md5_limit: args
                .etag_md5_limit
                .or(file.etag_md5_limit)
                .unwrap_or(isthmus_posix::DEFAULT_ETAG_MD5_LIMIT),
            log_level,
            log_format: args.log_format.or(file.log_format).unwrap_or_default(),
            domain: args.domain.or(file.domain),
            sigv2: !args.disable_sigv2 && file.sigv2.unwrap_or(true),
            header_timeout: std::time::Duration::from_secs(
                args.header_timeout.or(file.header_timeout).unwrap_or(30).max(1),
            ),
            idle_timeout: std::time::Duration::from_secs(args.idle_timeout.or(file.idle_timeout).unwrap_or(120).max(1)),
            root_user,
            users: file.users,
            identity: args.identity.or(file.identity).unwrap_or_default(),
            root_identity: file.root_identity,
            allow_root: file.allow_root,
            allow_root_without_sticky_bit: file.allow_root_without_sticky_bit,
            identity_refresh: std::time::Duration::from_secs(file.identity_refresh_seconds.unwrap_or(300).max(1)),
            local_socket: args.local_socket.or(file.local_socket),
            local_socket_max_connections: file.local_socket_max_connections.unwrap_or(256).max(1),
            local_socket_descriptors: file.local_socket_descriptors.unwrap_or(true),
            select_max_bytes: args
                .select_max_bytes
                .or(file.select_max_bytes)
                .unwrap_or(isthmus_s3::DEFAULT_SELECT_MAX_BYTES),
            token_issuers: file.token_issuers,
            outbound_allow: isthmus_grid::OutboundPolicy::parse_allow(&file.outbound_allow)?,
            tpc_limits,
            quotas: file.quotas,
            quota_rescan: std::time::Duration::from_secs(file.quota_rescan_seconds.unwrap_or(300).max(1)),
            bucket_acl_shares_objects: file.bucket_acl_shares_objects,
            notify: crate::notify::NotifySettings::resolve(crate::notify::NotifyKeys {
                webhook: &file.notify_webhook,
                nats: &file.notify_nats,
                amqp: &file.notify_amqp,
                redis: &file.notify_redis,
                queue_max_bytes: file.notify_queue_max_bytes.as_ref(),
                queue_full: file.notify_queue_full,
                watch: file.notify_watch,
                scan_interval_seconds: file.notify_scan_interval_seconds,
                watch_max_directories: file.notify_watch_max_directories,
                strict_sync: durability == Durability::Strict,
            })?,
            tls: match (args.tls_cert.or(file.tls_cert), args.tls_key.or(file.tls_key)) {
                (Some(cert), Some(key)) => Some((cert, key)),
                (None, None) => None,
                _ => return Err("TLS needs both tls_cert and tls_key (PEM files)".into()),
            },
            http_address: args.http_address.or(file.http_address),
            admin_address: args.admin_address.or(file.admin_address),
            access_log: args.access_log.or(file.access_log),
            access_log_format: args.access_log_format.or(file.access_log_format).unwrap_or_default(),
            console: !args.no_console && file.console.unwrap_or(true),
            console_listen: args.console_listen.or(file.console_listen),
        })
    }
}

/// Third-party copies' caps and timeouts from the file, each at least 1 (second or copy).
/// A size on the command line, read as the configuration file's sizes are ("1GiB", "64 KiB").
fn parse_byte_size(text: &str) -> Result<u64, String> {
    isthmus_store::byte_size::ByteSize::Text(text.to_string()).bytes()
}

fn tpc_limits(file: &FileConfig) -> isthmus_grid::CopyLimits {
    let defaults = isthmus_grid::CopyLimits::default();
    let seconds = |value: Option<u64>, default: std::time::Duration| {
        value.map_or(default, |s| std::time::Duration::from_secs(s.max(1)))
    };
    isthmus_grid::CopyLimits {
        response_timeout: seconds(file.tpc_response_timeout_seconds, defaults.response_timeout),
        deadline: seconds(file.tpc_deadline_seconds, defaults.deadline),
        max_copies: file.tpc_max_copies.unwrap_or(defaults.max_copies).max(1),
        max_copies_per_user: file.tpc_max_copies_per_user.unwrap_or(defaults.max_copies_per_user).max(1),
    }
}

/// A flag value parser that accepts exactly `values` (listed in `--help` as possible values)
/// and turns the chosen one into a `T`.
pub(crate) fn listed<T>(values: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
    T::Err: std::fmt::Debug,
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(values)
        .map(|value: String| value.parse::<T>().expect("every listed value parses"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Serve {
        #[command(flatten)]
        args: ServeArgs,
    }

    #[test]
    fn every_listed_flag_value_parses_and_others_are_refused_with_the_list() {
        use clap::Parser;
        for durability in ["strict", "relaxed"] {
            let parsed = Serve::try_parse_from(["serve", "--durability", durability]).unwrap();
            assert_eq!(parsed.args.durability, Some(durability.parse().unwrap()));
        }
        for metadata in ["auto", "xattr", "sidecar"] {
            Serve::try_parse_from(["serve", "--metadata", metadata]).unwrap();
        }
        for level in ["error", "warn", "info", "debug", "trace"] {
            let parsed = Serve::try_parse_from(["serve", "--log-level", level]).unwrap();
            assert_eq!(parsed.args.log_level.as_deref(), Some(level));
        }
        let refused = Serve::try_parse_from(["serve", "--durability", "fast"]).err().unwrap().to_string();
        assert!(refused.contains("possible values: strict, relaxed"), "{refused}");
    }

    #[test]
    fn flags_override_file_and_file_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("isthmus.toml");
        std::fs::write(
            &path,
            r#"
root = "/srv/data"
address = "127.0.0.1:9100"
durability = "relaxed"
[[users]]
access_key = "alice"
secret_key = "alice-secret-123"
display_name = "Alice"
"#,
        )
        .unwrap();
        let args = ServeArgs {
            config: Some(path.clone()),
            address: Some("127.0.0.1:9200".parse().unwrap()),
            ..Default::default()
        };
        let s = ServeSettings::resolve(args, (None, None)).unwrap();
        assert_eq!(s.root, PathBuf::from("/srv/data"));
        assert_eq!(s.address.port(), 9200);
        assert_eq!(s.durability, Durability::Relaxed);
        assert_eq!(s.users.len(), 1);
        assert!(s.root_user.is_none());

        let defaults =
            ServeSettings::resolve(ServeArgs::default(), (Some("AK123".into()), Some("secret-123".into()))).unwrap();
        assert_eq!(defaults.root, PathBuf::from("./data"));
        assert_eq!(defaults.address.to_string(), "127.0.0.1:9000");
        assert_eq!(defaults.durability, Durability::Strict);
        assert_eq!(defaults.root_user.unwrap().access_key, "AK123");
    }

    #[test]
    fn bad_settings_are_refused_with_a_reason() {
        assert!(ServeSettings::resolve(ServeArgs::default(), (Some("AK".into()), None)).unwrap_err().contains("both"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "rooot = 1").unwrap();
        let err =
            ServeSettings::resolve(ServeArgs { config: Some(path), ..Default::default() }, (None, None)).unwrap_err();
        assert!(err.contains("rooot"), "{err}");
    }
}
