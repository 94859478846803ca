//! Bucket notifications in `isthmus serve`: the destinations and queue settings of the
//! configuration file, the notifier started on the gateway's state directory, the announcer
//! the session floor's announcing wrapper calls, and the watcher that announces files written
//! outside the gateway (kernel notifications on local file systems, scans on shared ones).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use isthmus_notify::destination::{Destination, Settings, valid_id};
use isthmus_notify::dispatch::{Notifier, QueueLimits, Target as QueueTarget, WhenFull};
use isthmus_notify::event::{Event, EventName};
use isthmus_session::announcing::{Announcement, Announcer, Target};
use isthmus_store::byte_size::ByteSize;
use isthmus_store::state_dir::StateDir;
use isthmus_store::{RequestContext, StoreError, StoreResult};
use serde::Deserialize;

/// `[[notify_webhook]]`: an HTTP(S) endpoint each record is POSTed to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookEntry {
    pub id: String,
    pub endpoint: String,
    pub auth_token: Option<String>,
}

/// `[[notify_nats]]`: a JetStream subject.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsEntry {
    pub id: String,
    pub url: String,
    pub subject: String,
}

/// `[[notify_amqp]]`: an AMQP 0-9-1 exchange and routing key.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmqpEntry {
    pub id: String,
    pub url: String,
    pub exchange: String,
    pub routing_key: String,
}

/// `[[notify_redis]]`: a Redis stream.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisEntry {
    pub id: String,
    pub url: String,
    pub stream: String,
}

/// How files written outside the gateway are seen (`notify_watch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WatchMode {
    /// Kernel notifications where the data root is on a local file system, scans where it is
    /// shared (CephFS, NFS, Lustre: the kernel does not see other nodes' writes).
    #[default]
    Auto,
    Inotify,
    Scan,
    /// Only writes through the gateway are announced.
    Off,
}

/// The default bound of the queue: 1 GiB of records (about 2.5 million events).
const DEFAULT_QUEUE_BYTES: u64 = 1 << 30;
/// The default interval between scans of a shared file system.
const DEFAULT_SCAN_SECONDS: u64 = 60;
/// How long a write through the gateway waits for room in a full queue (`block`) before it is
/// refused with SlowDown.
const ADMIT_WAIT: Duration = Duration::from_secs(30);

/// The notification settings of the configuration file, resolved.
#[derive(Debug, Clone)]
pub struct NotifySettings {
    pub destinations: Vec<Destination>,
    pub limits: QueueLimits,
    pub watch: WatchMode,
    pub scan_interval: Duration,
    /// The most directories a kernel watcher watches (`None`: the kernel's limit).
    pub watch_max_directories: Option<usize>,
}

/// The keys of the configuration file this module reads, as `FileConfig` holds them.
pub struct NotifyKeys<'a> {
    pub webhook: &'a [WebhookEntry],
    pub nats: &'a [NatsEntry],
    pub amqp: &'a [AmqpEntry],
    pub redis: &'a [RedisEntry],
    pub queue_max_bytes: Option<&'a ByteSize>,
    pub queue_full: Option<WhenFull>,
    pub watch: Option<WatchMode>,
    pub scan_interval_seconds: Option<u64>,
    pub watch_max_directories: Option<usize>,
    pub strict_sync: bool,
}

impl NotifySettings {
    /// Checks the destinations (ids well formed and unique per kind, URLs of their scheme) and
    /// resolves the queue's settings.
    pub fn resolve(keys: NotifyKeys<'_>) -> Result<Self, String> {
        let mut destinations = Vec::new();
        let webhooks = keys.webhook.iter().map(|e| {
            (&e.id, Settings::Webhook { endpoint: e.endpoint.clone(), auth_token: e.auth_token.clone() }, &e.endpoint)
        });
        let nats = keys
            .nats
            .iter()
            .map(|e| (&e.id, Settings::Nats { url: e.url.clone(), subject: e.subject.clone() }, &e.url));
        let amqp = keys.amqp.iter().map(|e| {
            let settings =
                Settings::Amqp { url: e.url.clone(), exchange: e.exchange.clone(), routing_key: e.routing_key.clone() };
            (&e.id, settings, &e.url)
        });
        let redis = keys
            .redis
            .iter()
            .map(|e| (&e.id, Settings::Redis { url: e.url.clone(), stream: e.stream.clone() }, &e.url));
        for (id, settings, url) in webhooks.chain(nats).chain(amqp).chain(redis) {
            let kind = settings.kind().as_str();
            if !valid_id(id) {
                return Err(format!("[[notify_{kind}]] id {id:?}: 1 to 64 letters, digits, '-' or '_'"));
            }
            let schemes: &[&str] = match settings.kind() {
                isthmus_notify::destination::Kind::Webhook => &["http://", "https://"],
                isthmus_notify::destination::Kind::Nats => &["nats://", "tls://"],
                isthmus_notify::destination::Kind::Amqp => &["amqp://", "amqps://"],
                isthmus_notify::destination::Kind::Redis => &["redis://", "rediss://"],
            };
            if !schemes.iter().any(|scheme| url.starts_with(scheme)) {
                return Err(format!("[[notify_{kind}]] {id}: the URL must start with {}", schemes.join(" or ")));
            }
            let destination = Destination { id: id.clone(), settings };
            if destinations.iter().any(|d: &Destination| d.arn() == destination.arn()) {
                return Err(format!("[[notify_{kind}]] id {id:?} is given twice"));
            }
            destinations.push(destination);
        }
        let max_bytes = match keys.queue_max_bytes {
            Some(size) => size.bytes().map_err(|e| format!("notify_queue_max_bytes: {e}"))?,
            None => DEFAULT_QUEUE_BYTES,
        };
        if max_bytes < 1 << 20 {
            return Err("notify_queue_max_bytes: at least 1 MiB".into());
        }
        Ok(Self {
            destinations,
            limits: QueueLimits {
                max_bytes,
                when_full: keys.queue_full.unwrap_or_default(),
                strict_sync: keys.strict_sync,
            },
            watch: keys.watch.unwrap_or_default(),
            scan_interval: Duration::from_secs(keys.scan_interval_seconds.unwrap_or(DEFAULT_SCAN_SECONDS).max(1)),
            watch_max_directories: keys.watch_max_directories,
        })
    }

    /// The ARNs a bucket's rules may name.
    pub fn arns(&self) -> Vec<String> {
        self.destinations.iter().map(Destination::arn).collect()
    }
}

/// Starts the notifier on `ROOT/.isthmus/notify`, if any destination is configured.
pub fn start(settings: &NotifySettings, state: &StateDir) -> Result<Option<Arc<Notifier>>, String> {
    if settings.destinations.is_empty() {
        return Ok(None);
    }
    let dir = state
        .subdir("notify", true)
        .map_err(|e| e.to_string())?
        .ok_or("cannot make the notification queue's directory")?;
    let notifier = Notifier::start(dir, settings.destinations.clone(), settings.limits).map_err(|e| match e {
        isthmus_notify::dispatch::NotifyError::Busy(_) => format!(
            "cannot start bucket notifications: {e}: one gateway per data root sends them (remove the [[notify_*]] \
             tables from the configuration of the others)"
        ),
        e => format!("cannot start bucket notifications: {e}"),
    })?;
    Ok(Some(notifier))
}

/// The announcer of a gateway: announcements become events in the notifier's queue.
pub struct QueueAnnouncer {
    pub notifier: Arc<Notifier>,
    pub when_full: WhenFull,
    pub region: String,
}

impl Announcer for QueueAnnouncer {
    fn admit(&self, cx: &RequestContext) -> StoreResult<()> {
        if self.notifier.has_room() {
            return Ok(());
        }
        match self.when_full {
            WhenFull::DropOldest => Ok(()),
            WhenFull::Refuse => Err(queue_full()),
            WhenFull::Block if !cx.may_block => Err(StoreError::WouldBlock),
            WhenFull::Block if self.notifier.wait_for_room(ADMIT_WAIT) => Ok(()),
            WhenFull::Block => Err(queue_full()),
        }
    }

    fn announce(&self, announcement: Announcement, targets: Vec<Target>) {
        let Some(name) = EventName::parse(announcement.name) else {
            tracing::error!(name = announcement.name, "an announcement names no event Isthmus sends");
            return;
        };
        let event = Event {
            name,
            bucket: announcement.bucket,
            key: announcement.key,
            size: announcement.size,
            etag: announcement.etag,
            version_id: announcement.version_id,
            principal: announcement.principal,
            source_ip: announcement.source_ip.map(|ip| ip.to_string()).unwrap_or_else(|| "127.0.0.1".into()),
            time: SystemTime::now(),
            region: self.region.clone(),
            bucket_owner: announcement.bucket_owner,
        };
        let targets: Vec<QueueTarget> =
            targets.into_iter().map(|t| QueueTarget { configuration_id: t.rule_id, arn: t.arn }).collect();
        // The write happened; an event the queue refuses (full past the wait, or an ARN no
        // longer configured) is counted and logged, with its key, by the queue.
        let _ = self.notifier.enqueue(event, targets);
    }
}

/// The refusal of a write while the queue is full: S3's 503 SlowDown, which every SDK retries.
fn queue_full() -> StoreError {
    StoreError::SlowDown("the bucket's notification queue is full: retry later".into())
}

/// What keeps the watchers of files written outside the gateway running (dropped: stopped).
pub struct Watching {
    kernel: Vec<isthmus_notify::watch::Watcher>,
    _scans: Vec<isthmus_notify::watch::ScanLoop>,
    _announcing: std::thread::JoinHandle<()>,
}

impl Watching {
    /// The kernel watchers' figures for `/metrics`: directories watched, watches the kernel
    /// refused (`fs.inotify.max_user_watches`), queue overflows (each followed by a rescan).
    pub fn prometheus(&self) -> String {
        let (mut watches, mut refused, mut overflows) = (0, 0, 0);
        for watcher in &self.kernel {
            let stats = watcher.stats();
            watches += stats.watches;
            refused += stats.watch_limit_hits;
            overflows += stats.overflows;
        }
        format!(
            "# HELP isthmus_notify_watches Directories the notification watcher watches.\n\
             # TYPE isthmus_notify_watches gauge\nisthmus_notify_watches {watches}\n\
             # HELP isthmus_notify_watch_refused_total Directories left unwatched at the inotify watch limit.\n\
             # TYPE isthmus_notify_watch_refused_total counter\nisthmus_notify_watch_refused_total {refused}\n\
             # HELP isthmus_notify_watch_overflows_total Kernel event queue overflows (each followed by a rescan).\n\
             # TYPE isthmus_notify_watch_overflows_total counter\nisthmus_notify_watch_overflows_total {overflows}\n"
        )
    }
}

/// Changes waiting to be announced; past this the watcher waits (and the kernel's own queue
/// takes the slack, then overflows into a rescan).
const CHANGES_WAITING: usize = 10_000;

/// Keys whose last announced ETag is kept (a scan that caught a file mid-write sees it change
/// again when the write ends: the same content is not announced twice).
const LAST_ANNOUNCED: usize = 100_000;

/// What the thread that announces watched changes needs.
pub struct WatchContext {
    /// The announcing stack (rules per bucket, the gateway's own recent writes).
    announcing: Arc<isthmus_session::announcing::Announcing>,
    announcer: Arc<dyn Announcer>,
    /// Who is asking: a change is described as the bucket's owner sees it.
    principals: isthmus_session::Principals,
    /// The ETag last announced per key written outside the gateway.
    last: std::sync::Mutex<std::collections::HashMap<(String, String), String>>,
}

impl WatchContext {
    pub fn new(
        announcing: Arc<isthmus_session::announcing::Announcing>,
        announcer: Arc<dyn Announcer>,
        principals: isthmus_session::Principals,
    ) -> Self {
        Self { announcing, announcer, principals, last: Default::default() }
    }

    /// Whether `etag` is news for `key` (`None`: the key is gone), remembering it.
    fn is_news(&self, bucket: &str, key: &str, etag: Option<&str>) -> bool {
        let mut last = self.last.lock().expect("last announced lock");
        let id = (bucket.to_string(), key.to_string());
        match etag {
            None => {
                last.remove(&id);
                true
            }
            Some(etag) if last.get(&id).is_some_and(|seen| seen == etag) => false,
            Some(etag) => {
                if last.len() >= LAST_ANNOUNCED {
                    last.clear();
                }
                last.insert(id, etag.to_string());
                true
            }
        }
    }
}

/// Starts watching the posix pools' roots (`(root, on a local file system)`) as
/// `settings.watch` says, their changes announced by a thread of their own.
pub fn watch_files(
    settings: &NotifySettings,
    roots: &[(std::path::PathBuf, bool)],
    state: &StateDir,
    context: WatchContext,
) -> Result<Option<Watching>, String> {
    use isthmus_notify::watch::{BucketFilter, Scanner, Sink, WatchOptions, Watcher};
    if settings.watch == WatchMode::Off || roots.is_empty() {
        return Ok(None);
    }
    let (changes, waiting) = std::sync::mpsc::sync_channel(CHANGES_WAITING);
    let sink: Sink = Arc::new(move |change| {
        let _ = changes.send(change);
    });
    let rules = context.announcing.clone();
    let buckets: BucketFilter = Arc::new(move |bucket| rules.rules_of(bucket).is_some());
    // The gateway's own writes are known by their size and time: the watcher skips them
    // without reading them again (the announcing thread still checks the ETag of the others).
    let recent = context.announcing.recent_writes();
    recent.watcher_started();
    let created_recent = recent.clone();
    let progress: Vec<_> = roots.iter().map(|_| recent.watcher_progress()).collect();
    let options = WatchOptions {
        known: Some(Arc::new(move |bucket, key, size, modified| recent.known_file(bucket, key, size, modified))),
        // A new key the gateway linked into place shows the watcher no close under its name:
        // its remembered write is settled when it appears, not left to age out.
        created: Some(Arc::new(move |bucket, key| created_recent.created(bucket, key))),
        max_watches: settings.watch_max_directories,
        ..WatchOptions::default()
    };
    let (mut kernel, mut scans) = (Vec::new(), Vec::new());
    let mut scanned_whole = false;
    for (index, (root, local)) in roots.iter().enumerate() {
        let kernel_sees_all = match settings.watch {
            WatchMode::Inotify => true,
            WatchMode::Scan => false,
            WatchMode::Auto | WatchMode::Off => *local,
        };
        let scan = |filter: BucketFilter| -> Result<isthmus_notify::watch::ScanLoop, String> {
            let dir = state
                .subdir("notify-scan", true)
                .and_then(|dir| dir.expect("made").subdir(&format!("pool-{index}"), true))
                .map_err(|e| e.to_string())?
                .expect("made");
            let scanner = Scanner::new(root, dir, sink.clone()).map_err(|e| e.to_string())?;
            scanner
                .start(settings.scan_interval, filter)
                .map_err(|e| format!("cannot scan {} for notifications: {e}", root.display()))
        };
        if kernel_sees_all {
            let read_to = progress[index].clone();
            let options =
                WatchOptions { caught_up: Some(Arc::new(move |at| read_to.caught_up(at))), ..options.clone() };
            let watcher = Watcher::start(root, buckets.clone(), options, sink.clone())
                .map_err(|e| format!("cannot watch {} for notifications: {e}", root.display()))?;
            // Buckets with directories past the watch limit are scanned as well: their
            // unwatched directories are seen within a scan interval (a write the watcher also
            // saw is announced once: the announcing thread skips an ETag it announced last).
            let (over_limit, with_rules) = (watcher.over_limit(), buckets.clone());
            scans.push(scan(Arc::new(move |bucket| over_limit(bucket) && with_rules(bucket)))?);
            kernel.push(watcher);
        } else {
            scans.push(scan(buckets.clone())?);
            scanned_whole = true;
        }
    }
    if !scanned_whole {
        // The gateway's new keys linked into buckets watched whole are not remembered (see
        // `RecentWrites`); a scanner of a whole root would find them by their times.
        let whole: Vec<_> = kernel.iter().map(|watcher: &Watcher| watcher.watches_whole()).collect();
        let test = Arc::new(move |bucket: &str| whole.iter().any(|w| w(bucket)));
        context.announcing.recent_writes().watchers_watch_whole(test, &progress);
    }
    let announcing = isthmus_store::identity::spawn_gateway_thread("notify-changes", move || {
        // It hashes files written outside the gateway (of any size): beside the requests, never
        // ahead of them.
        isthmus_notify::background::yield_to_requests();
        for change in waiting {
            announce_change(&context, change);
        }
    })
    .map_err(|e| format!("cannot start the notification thread: {e}"))?;
    Ok(Some(Watching { kernel, _scans: scans, _announcing: announcing }))
}

/// Announces a file written or removed outside the gateway, as its bucket's owner sees it:
/// a file the owner may not read is not announced (an event never tells what its reader could
/// not see), and the gateway's own writes, already announced, are not announced again.
fn announce_change(context: &WatchContext, change: isthmus_notify::watch::Change) {
    use isthmus_notify::watch::Change;
    use isthmus_store::{HeadRequest, Store};
    let (bucket, key) = (change.bucket(), change.key());
    let Some((rules, owner)) = context.announcing.rules_of(bucket) else { return };
    let name = match change {
        Change::Written { .. } => "ObjectCreated:Put",
        Change::Removed { .. } => "ObjectRemoved:Delete",
    };
    // Nothing is hashed for a key no rule wants.
    if rules.matching(name, key).next().is_none() {
        return;
    }
    // The gateway's own writes, the most frequent changes, are known by what the gateway sees
    // (one statx where it keeps the object's description): no identity to switch to.
    let recent = context.announcing.recent_writes();
    let gateway_sees = context.announcing.head_object(&RequestContext::process(), bucket, key, &HeadRequest::default());
    match (&change, &gateway_sees) {
        (Change::Written { .. }, Ok(info)) if recent.take(bucket, key, Some(&info.etag)) => return,
        (Change::Removed { .. }, Err(isthmus_store::StoreError::NoSuchKey)) if recent.take(bucket, key, None) => return,
        _ => {}
    }
    // Someone else's change: described as the bucket's owner sees it.
    let asking = isthmus_session::Asking { access_key: Some(&owner), bearer: None, security_token: None };
    let Ok(cx) = context.principals.context(&asking) else {
        tracing::debug!(bucket, owner, "the bucket's owner cannot be asked: its changes are not announced");
        return;
    };
    let seen = context.announcing.head_object(&cx, bucket, key, &HeadRequest::default());
    let (size, etag, version_id) = match (&change, seen) {
        (Change::Written { .. }, Ok(info)) => {
            if !context.is_news(bucket, key, Some(&info.etag)) {
                return;
            }
            (info.size, Some(info.etag), info.version_id)
        }
        (Change::Written { .. }, Err(err)) => {
            tracing::debug!(bucket, key, error = %err, "a file written outside the gateway is not announced");
            return;
        }
        // Removed, and nothing took its place since.
        (Change::Removed { .. }, Err(isthmus_store::StoreError::NoSuchKey)) => {
            context.is_news(bucket, key, None);
            (0, None, None)
        }
        (Change::Removed { .. }, _) => return,
    };
    let announcement = Announcement {
        name,
        bucket: bucket.to_string(),
        key: key.to_string(),
        size,
        etag,
        version_id,
        principal: "posix".into(),
        source_ip: None,
        bucket_owner: owner,
    };
    isthmus_session::announcing::announce_matching(&*context.announcer, &rules, announcement);
}
