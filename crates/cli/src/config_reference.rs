//! The configuration reference (docs/operator/config-reference.md), generated from the code's
//! own definitions so it cannot drift: every key of the configuration file as serde reads it
//! (`FileConfig`), each with the `serve` flag clap defines for it (its help, possible values
//! and default) or, for keys that only the file has, the description below. A test fails when
//! the committed page differs from what this module generates, or when a key has no text.

use clap::Args;

use crate::config::{FileConfig, ServeArgs};

/// Keys the file has and the command line has not, each with what it means.
const FILE_ONLY: &[(&str, &str)] = &[
    (
        "sigv2",
        "Accept requests signed with AWS Signature Version 2 (the opposite of `--disable-sigv2`) [default: true]",
    ),
    (
        "console",
        "Serve the web console on `console_listen` (the opposite of `--no-console`); false: no console, and \
         `/console/` on the S3 address is an S3 path like any other [default: true]",
    ),
    (
        "root_user",
        "The root user's keys: a table with `access_key`, `secret_key` and, with identity = \"posix\", \
         `unix_user` or `uid` [default: ISTHMUS_ROOT_ACCESS_KEY/ISTHMUS_ROOT_SECRET_KEY, else ROOT/.isthmus/credentials.toml]",
    ),
    (
        "users",
        "Further users (`[[users]]`): `access_key`, `secret_key`, `display_name`, `buckets` (patterns of buckets \
         granted besides their own), and with identity = \"posix\" `unix_user` or `uid` (and `gid`)",
    ),
    (
        "root_identity",
        "The root user's Unix identity with identity = \"posix\" (`unix_user` or `uid`), if not in `root_user`",
    ),
    ("allow_root", "Permit users that map to uid 0 with identity = \"posix\" [default: false]"),
    (
        "allow_root_without_sticky_bit",
        "Serve identity = \"posix\" from a data root that users other than its owner may write without the sticky \
         bit (any of them could rename the gateway's state or another user's bucket away; fix the root with \
         `chmod +t` instead) [default: false]",
    ),
    (
        "identity_refresh_seconds",
        "Seconds between re-resolutions of the users' Unix identities (also on SIGHUP) [default: 300]",
    ),
    ("local_socket_max_connections", "Connections the local socket serves at once (each has a thread) [default: 256]"),
    (
        "local_socket_descriptors",
        "Answer local-socket GETs of objects that are one file (256 KiB and more) with a read-only descriptor of \
         the file, which the peer reads itself [default: true]",
    ),
    (
        "token_issuers",
        "Issuers whose bearer tokens (JWT: WLCG, SciTokens) the gateway trusts (`[[token_issuers]]`: `issuer`, \
         `jwks_file` or `jwks_url`, `audiences`, `base_path`, the users subjects and groups map to; see the \
         operator guide's tokens section)",
    ),
    (
        "outbound_allow",
        "Hosts third-party copy may reach besides public ones: networks, addresses, optionally with a port \
         (`[\"10.1.0.0/16\", \"127.0.0.1:9001\"]`); loopback, private, link-local and the gateway's own \
         listeners are refused unless listed [default: none]",
    ),
    (
        "tpc_response_timeout_seconds",
        "Seconds a third-party copy waits for the remote side's response, or for any read or write of its body, \
         before it fails with RequestTimeout [default: 30]",
    ),
    (
        "tpc_deadline_seconds",
        "Seconds one third-party copy may run in all before it fails with RequestTimeout and its staged bytes go \
         [default: 14400]",
    ),
    (
        "tpc_max_copies",
        "Third-party copies (pulls and pushes) the gateway runs at once, each on a thread of its own; more are \
         refused with 503 SlowDown [default: 64]",
    ),
    (
        "tpc_max_copies_per_user",
        "Third-party copies one user runs at once; more are refused with 503 SlowDown [default: 16]",
    ),
    ("quotas", "Hard quotas per bucket or user (`[[quotas]]`: `bucket` or `user`, `max_bytes`, `max_objects`)"),
    (
        "quota_rescan_seconds",
        "Seconds between recounts of the usage quotas check (changes made on the POSIX side are seen then) [default: 300]",
    ),
    (
        "bucket_acl_shares_objects",
        "A bucket's canned ACL (public-read, authenticated-read, public-read-write) also opens reading its objects, \
         as releases before issue 46 did; S3 (and the default) shares only the listing: objects take their own ACL \
         or a bucket policy. For sites whose published buckets relied on it, while they give them bucket policies \
         [default: false]",
    ),
    (
        "notify_webhook",
        "Bucket notification destinations of kind webhook (`[[notify_webhook]]`): `id`, `endpoint` (http:// or \
         https://; each event record is POSTed, redirects are never followed), optional `auth_token` (sent as \
         `Authorization: Bearer TOKEN`). A bucket's rule names it as `arn:isthmus:sqs::ID:webhook`",
    ),
    (
        "notify_nats",
        "NATS JetStream destinations (`[[notify_nats]]`): `id`, `url` (nats://[user:pass@]host:port, several \
         separated by commas), `subject` (a stream must capture it); named `arn:isthmus:sqs::ID:nats`",
    ),
    (
        "notify_amqp",
        "AMQP 0-9-1 destinations (`[[notify_amqp]]`): `id`, `url` (amqp://user:pass@host:port/vhost), `exchange`, \
         `routing_key`; persistent, mandatory publishes with publisher confirms; named `arn:isthmus:sqs::ID:amqp`",
    ),
    (
        "notify_redis",
        "Redis stream destinations (`[[notify_redis]]`): `id`, `url` (redis://[:pass@]host:port/db), `stream` \
         (`XADD stream * event RECORD key KEY`); named `arn:isthmus:sqs::ID:redis`",
    ),
    (
        "notify_queue_max_bytes",
        "The bound of the notification queue in ROOT/.isthmus/notify (at least 1 MiB) [default: 1GiB]",
    ),
    (
        "notify_queue_full",
        "What a full notification queue does: `block` (a write waits for room up to 30 s, then SlowDown), \
         `drop_oldest` (the oldest events are dropped, counted and logged) or `refuse` (writes to buckets with rules \
         answer 503 SlowDown) [default: block]",
    ),
    (
        "notify_watch",
        "How files written outside the gateway are announced: `auto` (kernel notifications where the data root is \
         on a local file system, scans where it is shared), `inotify`, `scan` or `off` [default: auto]",
    ),
    ("notify_scan_interval_seconds", "Seconds between scans of a shared file system for notifications [default: 60]"),
    (
        "notify_watch_max_directories",
        "The most directories the notification watcher watches with inotify per data root (the kernel's \
         fs.inotify.max_user_watches is shared by every process of the user); a bucket with directories past it, or \
         past the kernel's limit, is scanned every notify_scan_interval_seconds as well [default: the kernel's limit]",
    ),
];

/// Every key of the configuration file, in declaration order, as serde knows them: a key no
/// struct field reads is refused with the list of those it expects.
pub fn file_keys() -> Vec<String> {
    let probe = "no_such_key_lists_the_keys = 0";
    let message = match toml::from_str::<FileConfig>(probe) {
        Ok(_) => return Vec::new(),
        Err(e) => e.message().to_string(),
    };
    let expected = message.split("expected one of").nth(1).unwrap_or_default();
    expected.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// One row of the reference: the key, its flag (if any), what it does.
struct Row {
    key: String,
    flag: Option<String>,
    help: String,
    values: Vec<String>,
}

fn rows() -> Result<Vec<Row>, String> {
    let command = ServeArgs::augment_args(clap::Command::new("serve"));
    let mut rows = Vec::new();
    for key in file_keys() {
        let flag = command.get_arguments().find(|a| a.get_long().is_some_and(|l| l.replace('-', "_") == key));
        let row = match (flag, FILE_ONLY.iter().find(|(k, _)| *k == key)) {
            (Some(arg), _) => Row {
                key: key.clone(),
                flag: arg.get_long().map(|l| format!("--{l}")),
                help: arg.get_help().map(|h| h.to_string()).unwrap_or_default(),
                values: arg.get_possible_values().iter().map(|v| v.get_name().to_string()).collect(),
            },
            (None, Some((_, help))) => Row { key: key.clone(), flag: None, help: help.to_string(), values: Vec::new() },
            (None, None) => {
                return Err(format!("configuration key {key:?} has no flag and no description in FILE_ONLY"));
            }
        };
        rows.push(row);
    }
    Ok(rows)
}

/// The reference page, Markdown.
pub fn markdown() -> Result<String, String> {
    let mut text = String::from(
        "# Configuration reference\n\n\
         Generated by `isthmus config reference` from the code's own definitions (the configuration file's keys \
         and the `serve` flags); a test fails when this page is stale. Every key can be set in the TOML file given \
         with `--config`; a flag, where there is one, overrides the file. How the pieces fit: \
         [Configuration](configuration.md).\n\n\
         | key | flag | values | what it does |\n|---|---|---|---|\n",
    );
    for row in rows()? {
        let help = row.help.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|");
        text += &format!(
            "| `{}` | {} | {} | {} |\n",
            row.key,
            row.flag.map_or_else(|| "file only".to_string(), |f| format!("`{f}`")),
            row.values.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", "),
            help
        );
    }
    let flags: Vec<String> = ServeArgs::augment_args(clap::Command::new("serve"))
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| !file_keys().contains(&l.replace('-', "_")))
        .map(|l| format!("`--{l}`"))
        .collect();
    text += &format!(
        "\nFlags with no key of their own: {} (`--disable-sigv2` and `--no-console` are the keys `sigv2 = false` \
         and `console = false`; `--config` names the file).\n",
        flags.join(", ")
    );
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_lists_the_file_keys_and_each_has_a_text() {
        let keys = file_keys();
        assert!(
            keys.len() > 20 && keys.contains(&"root".to_string()) && keys.contains(&"quotas".to_string()),
            "{keys:?}"
        );
        for (key, _) in FILE_ONLY {
            assert!(keys.contains(&key.to_string()), "FILE_ONLY names {key:?}, which the file does not have");
        }
        rows().expect("every key described");
    }

    #[test]
    fn the_committed_reference_is_current() {
        // Read when the test runs (the page is the repository's, not this crate's).
        let page = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/operator/config-reference.md");
        let committed = std::fs::read_to_string(page).expect("docs/operator/config-reference.md");
        assert!(
            committed == markdown().expect("a reference"),
            "docs/operator/config-reference.md is stale: run `isthmus config reference > docs/operator/config-reference.md`"
        );
    }
}
