//! `isthmus serve`: opens the data root, sets up credentials, and runs the S3 gateway.

use std::sync::Arc;
use std::time::Duration;

use isthmus_posix::StoreOptions;
use isthmus_s3::{GatewayConfig, console};
use isthmus_session::users::{credentials_path, load_or_create_root};
use isthmus_session::{GridAuth, Identities, IoPolicy, Principals, Runner, User, UserDirectory};
use isthmus_store::Durability;

use crate::config::{IdentityMode, ServeSettings};
use crate::serve_status::{drive_metrics, identity_of, pool_metrics, status_extras};

/// Temporary files older than this are left over from crashed writers.
const STALE_TEMPORARY_AGE: Duration = Duration::from_secs(3600);
/// Named third-party copy staging untouched this long was left by an earlier version (which kept
/// interrupted pulls to resume); pulls now stage without a name.
const STALE_PULL_AGE: Duration = Duration::from_secs(24 * 3600);

/// Raises the open-file limit to its hard maximum: every connection and open object is a file
/// descriptor, and the usual soft limit of 1024 is reached by a modest flood of clients.
fn raise_file_limit() {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    if let Some(max) = limit.maximum
        && limit.current.is_some_and(|cur| cur < max)
    {
        let _ = rustix::process::setrlimit(
            rustix::process::Resource::Nofile,
            rustix::process::Rlimit { current: Some(max), maximum: Some(max) },
        );
    }
}

pub fn run(settings: ServeSettings) -> Result<(), String> {
    raise_file_limit();
    // Before any other thread exists: what every request thread starts as.
    isthmus_store::identity::capture_gateway_identity();
    let options = StoreOptions {
        durability: settings.durability,
        metadata: settings.metadata,
        etag_md5_limit: settings.etag_md5_limit,
        // A gateway serving other users believes only its own and root's files.
        state_trust: isthmus_store::state_dir::StateTrust::Gateway,
        ..StoreOptions::default()
    };
    check_root_mode(&settings)?;
    let isthmus_pools::RootStores { engine, posix: posix_pools, erasure: erasure_pools } =
        isthmus_pools::open_root_with_pools(&settings.root, options)
            .map_err(|e| format!("cannot open data root {}: {e}", settings.root.display()))?;
    let store = posix_pools[0].1.clone();
    // Third-party copies stage in the state directory, reached through its descriptor.
    let tpc_dir = store.state_dir().subdir("tpc", true).map_err(|e| e.to_string())?.expect("created when missing");
    let (root_user, announce) = match settings.root_user.clone() {
        Some(user) => (user, None),
        None => {
            let path = credentials_path(&store.internal_dir());
            let (user, created) = load_or_create_root(store.state_dir()).map_err(|e| e.to_string())?;
            (user, Some((path, created)))
        }
    };
    let mut users = vec![root_user.clone()];
    users.extend(settings.users.iter().cloned());
    let identities = Arc::new(identities_of(&settings, &root_user, &users)?);
    let grid = grid_auth(&settings, &users, store.state_dir())?;
    let quotas = quotas_of(&settings, &root_user.access_key, &engine)?;
    let users = UserDirectory::new(&root_user.access_key, users);
    let extras = status_extras(&settings, &posix_pools, &erasure_pools);
    let admin = isthmus_s3::admin::Administration::open(
        users.clone(),
        identities.clone(),
        store.state_dir().clone(),
        engine.clone(),
        extras,
    )?;
    watch_users_file(admin.clone())?;
    let notifier = crate::notify::start(&settings.notify, store.state_dir())?;
    let local_socket = match &settings.local_socket {
        Some(path) => {
            Some(isthmus_local::LocalSocket::bind(path)?.passing_descriptors(settings.local_socket_descriptors))
        }
        None => None,
    };

    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if identities.is_posix() {
        // Each runtime thread gets its own umask, so a request's umask is its own, and starts as
        // the gateway whichever thread created it.
        runtime.on_thread_start(|| {
            if let Err(err) = isthmus_store::identity::init_request_thread() {
                tracing::error!(error = %err, "a runtime thread cannot hold its own umask; its requests are refused");
            }
        });
    }
    let runtime = runtime.enable_all().build().map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(settings.address)
            .await
            .map_err(|e| format!("cannot listen on {}: {e} (choose another with --address)", settings.address))?;
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        let tls = match &settings.tls {
            Some((cert, key)) => {
                let files = isthmus_s3::tls::TlsFiles::open(cert, key)?;
                tokio::spawn(files.clone().watch());
                Some(files)
            }
            None => None,
        };
        let http_listener = bind_optional(settings.http_address, "http_address").await?;
        let admin_listener = bind_optional(settings.admin_address, "admin_address").await?;
        let console_listener = bind_optional(settings.console_address(), "console_listen").await?;
        let console_port = console_listener.as_ref().and_then(|l| l.local_addr().ok()).map(|a| a.port());
        let access_log = match &settings.access_log {
            Some(target) => {
                let format = match settings.access_log_format {
                    crate::config::AccessFormat::Text => isthmus_s3::access_log::AccessLogFormat::Text,
                    crate::config::AccessFormat::Json => isthmus_s3::access_log::AccessLogFormat::Json,
                };
                let log = Arc::new(isthmus_s3::access_log::AccessLog::open(
                    isthmus_s3::access_log::AccessLogTarget::parse(target),
                    format,
                )?);
                tokio::spawn(reopen_on_hangup(log.clone()));
                Some(log)
            }
            None => None,
        };
        let filesystem = store.filesystem();
        let io = IoPolicy::for_pools(&posix_pools, &erasure_pools, settings.durability != Durability::Relaxed);
        // Third-party copy never reaches these unless the operator names them.
        let own_listeners: Vec<std::net::SocketAddr> =
            [Some(&listener), http_listener.as_ref(), admin_listener.as_ref(), console_listener.as_ref()]
                .into_iter()
                .flatten()
                .filter_map(|listener| listener.local_addr().ok())
                .collect();
        let served_ports: Vec<u16> = own_listeners.iter().map(|a| a.port()).collect();
        let domain = settings.domain.as_deref().map(|d| (d, served_ports));
        let socket_path = local_socket.as_ref().map(|socket| socket.path().to_path_buf());
        // The one store stack every door serves (the session floor assembles it) and who asks.
        let served = isthmus_session::stack::served(engine.clone(), &users, quotas.clone(), settings.bucket_acl_shares_objects);
        // Announced writes: the stack every door serves, its writes and deletes queued for the
        // buckets' notification rules (when the operator configured a destination).
        let announcer = notifier.as_ref().map(|notifier| {
            Arc::new(crate::notify::QueueAnnouncer {
                notifier: notifier.clone(),
                when_full: settings.notify.limits.when_full,
                region: isthmus_s3::server::DEFAULT_REGION.to_string(),
            })
        });
        let (served, announcing) = match &announcer {
            Some(announcer) => {
                let announcing =
                    Arc::new(isthmus_session::stack::announced(served, announcer.clone(), &root_user.access_key));
                (announcing.clone() as Arc<dyn isthmus_store::Store>, Some(announcing))
            }
            None => (served, None),
        };
        let principals = Principals::new(users.clone(), identities.clone(), grid.clone());
        // Files written outside the gateway, in the posix pools' roots, announced too.
        let watching = match (announcing, announcer) {
            (Some(announcing), Some(announcer)) => {
                let roots: Vec<(std::path::PathBuf, bool)> = posix_pools
                    .iter()
                    .map(|(_, pool)| (pool.root().to_path_buf(), pool.filesystem().is_local()))
                    .collect();
                let context = crate::notify::WatchContext::new(announcing, announcer, principals.clone());
                crate::notify::watch_files(&settings.notify, &roots, store.state_dir(), context)?.map(Arc::new)
            }
            _ => None,
        };
        if let Some(socket) = local_socket {
            socket.serve(served.clone(), Arc::new(principals.clone()), settings.local_socket_max_connections)?;
        }
        // The same table, for botocore's SigV2 bucket requests (`GatewayConfig::users`).
        let signing_users = users.clone();
        let service =
            isthmus_s3::build_service(
            Runner::new(served, io),
            principals,
            isthmus_s3::ServiceOptions {
                domain,
                select_max_bytes: settings.select_max_bytes,
                quotas: quotas.clone(),
                tpc_staging: Some(tpc_dir.path_through_fd()),
                outbound: Arc::new(isthmus_grid::OutboundPolicy::new(settings.outbound_allow.clone(), own_listeners)),
                tpc_limits: settings.tpc_limits,
                admin: Some(admin),
                notification_destinations: settings.notify.arns(),
            },
        )?;
        let root = std::fs::canonicalize(&settings.root).unwrap_or(settings.root.clone());
        let scheme = if tls.is_some() { "https" } else { "http" };
        println!("Isthmus serves {} on {scheme}://{local}", root.display());
        if let Some(listener) = &http_listener {
            println!("  also plain HTTP on http://{}", listener.local_addr().map_err(|e| e.to_string())?);
        }
        if let Some(listener) = &console_listener {
            let address = listener.local_addr().map_err(|e| e.to_string())?;
            println!("  web console: {scheme}://{address}/ (an origin of its own: no object is served there)");
        }
        if let Some(listener) = &admin_listener {
            let address = listener.local_addr().map_err(|e| e.to_string())?;
            println!("  admin: http://{address}/metrics, /health/live, /health/ready");
        }
        println!(
            "  file system: {} ({}), durability: {:?}, metadata: {:?}",
            filesystem.name(),
            if filesystem.is_local() {
                "local: short reads run inline"
            } else {
                "shared: all I/O on the blocking pool"
            },
            settings.durability,
            store.metadata_mode()
        );
        if posix_pools.len() > 1 {
            for (name, pool) in &posix_pools {
                println!("  pool {name}: posix, {}", pool.root().display());
            }
        }
        match announce {
            Some((path, true)) => {
                println!(
                    "Root credentials were created and saved in {} (mode 0600). They are shown only now:",
                    path.display()
                );
                println!("  AWS_ACCESS_KEY_ID={}", root_user.access_key);
                println!("  AWS_SECRET_ACCESS_KEY={}", root_user.secret_key);
            }
            Some((path, false)) => {
                println!("Root credentials: access key {} (secret in {})", root_user.access_key, path.display())
            }
            None => {
                println!("Root credentials: access key {} (from the environment or config file)", root_user.access_key)
            }
        }
        if identities.is_posix() || socket_path.is_some() {
            tokio::spawn(refresh_identities(identities.clone(), settings.identity_refresh));
        }
        if identities.is_posix() {
            println!("  identity: posix (each user's requests run with its Unix identity; the kernel decides)");
        } else if rustix::process::geteuid().is_root() {
            println!(
                "  identity: gateway, running as root: every file is created as root and only the gateway's rules protect them; see docs/operator/identity.md for identity = \"posix\""
            );
        }
        // At start and then every hour, on the blocking pool: what dead writers left, expired
        // records of completed uploads, the trash of interrupted DeleteBuckets.
        let cleaners: Vec<_> = posix_pools.iter().map(|(_, pool)| pool.clone()).collect();
        let tpc_staging = tpc_dir.path_through_fd();
        tokio::spawn(async move {
            let _held = tpc_dir;
            loop {
                let pools = cleaners.clone();
                let staging = tpc_staging.clone();
                let cleaned = tokio::task::spawn_blocking(move || {
                    // Named pull staging an earlier version left.
                    match isthmus_grid::tpc::clean_stale(&staging, STALE_PULL_AGE) {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(removed = n, "removed abandoned third-party copy staging"),
                        Err(err) => tracing::warn!(error = %err, "could not clean third-party copy staging"),
                    }
                    pools.iter().map(|pool| pool.clean_stale_temporaries(STALE_TEMPORARY_AGE)).sum::<Result<usize, _>>()
                });
                match cleaned.await {
                    Ok(Ok(0)) => {}
                    Ok(Ok(n)) => tracing::info!(removed = n, "removed stale temporary files"),
                    Ok(Err(err)) => tracing::warn!(error = %err, "could not clean stale temporary files"),
                    Err(err) => tracing::warn!(error = %err, "the cleanup task failed"),
                }
                tokio::time::sleep(STALE_TEMPORARY_AGE).await;
            }
        });
        let log_to_flush = access_log.clone();
        let config = GatewayConfig {
            accept_sigv2: settings.sigv2,
            header_timeout: settings.header_timeout,
            idle_timeout: settings.idle_timeout,
            grid,
            access_log,
            // S3 listeners tell where the console is; `console = false`: nothing.
            console: if settings.console { console::Role::Pointer(console_port) } else { console::Role::Absent },
            users: Some(signing_users),
            ..GatewayConfig::default()
        };
        let console_config = GatewayConfig {
            console: console::Role::Site(console::Site { s3_port: local.port(), s3_tls: tls.is_some() }),
            ..config.clone()
        };
        if let Some(path) = &socket_path {
            println!("  local socket: {} (peers are the S3 users their uid maps to)", path.display());
        }
        // One shutdown signal, every listener told.
        let (stop, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            shutdown_signal().await;
            let _ = stop.send(true);
        });
        let until_stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        if let Some(listener) = admin_listener {
            let pools: Vec<(String, std::path::PathBuf)> =
                posix_pools.iter().map(|(name, pool)| (name.clone(), pool.root().to_path_buf())).collect();
            let served: Vec<(std::path::PathBuf, Option<(u64, u64)>)> =
                pools.iter().map(|(_, path)| (path.clone(), identity_of(path))).collect();
            let coded = erasure_pools.clone();
            let queue = notifier.clone();
            let watched = watching.clone();
            let extra: isthmus_s3::admin_http::ExtraMetrics = Arc::new(move || {
                pool_metrics(&pools)
                    + &drive_metrics(&coded)
                    + &queue.as_ref().map(|q| q.prometheus()).unwrap_or_default()
                    + &watched.as_ref().map(|w| w.prometheus()).unwrap_or_default()
            });
            let check: isthmus_s3::admin_http::ReadyCheck = Arc::new(move || {
                for (path, identity) in &served {
                    if identity_of(path) != *identity {
                        return Err(format!("{} is no longer the directory served (unmounted or moved?)", path.display()));
                    }
                }
                Ok(())
            });
            tokio::spawn(isthmus_s3::admin_http::serve_admin(listener, engine.clone(), extra, check, until_stopped(stopped.clone())));
        }
        let plain = http_listener.map(|listener| {
            isthmus_s3::serve(listener, service.clone(), config.clone(), None, until_stopped(stopped.clone()))
        });
        let console = console_listener.map(|listener| {
            isthmus_s3::serve(listener, service.clone(), console_config, tls.clone(), until_stopped(stopped.clone()))
        });
        let main = isthmus_s3::serve(listener, service, config, tls, until_stopped(stopped.clone()));
        let optional = |served: Option<_>| async move {
            if let Some(served) = served {
                served.await;
            }
        };
        tokio::join!(main, optional(plain), optional(console));
        // What was queued is kept (and the cursors saved) for the next start.
        if let Some(notifier) = notifier {
            drop(watching);
            let _ = tokio::task::spawn_blocking(move || notifier.shutdown()).await;
        }
        if let Some(path) = socket_path {
            let _ = std::fs::remove_file(path);
        }
        // The last requests' lines are written before the process ends.
        if let Some(log) = log_to_flush {
            let _ = tokio::task::spawn_blocking(move || log.flush(Duration::from_secs(5))).await;
        }
        Ok(())
    })
}

/// The quotas of the configuration, recounted every `quota_rescan_seconds` on a thread of
/// their own (as the gateway), so what POSIX tools changed is counted within that time.
fn quotas_of(
    settings: &ServeSettings,
    root: &str,
    engine: &Arc<dyn isthmus_store::Store>,
) -> Result<Option<Arc<isthmus_access::quota::Quotas>>, String> {
    if settings.quotas.is_empty() {
        return Ok(None);
    }
    let quotas = Arc::new(isthmus_access::quota::Quotas::new(&settings.quotas, root)?);
    let (counter, store, period) = (quotas.clone(), engine.clone(), settings.quota_rescan);
    std::thread::Builder::new()
        .name("quota-rescan".into())
        .spawn(move || {
            loop {
                if let Err(err) = counter.rescan(&*store) {
                    tracing::warn!(error = %err, "cannot recount quota usage");
                }
                std::thread::sleep(period);
            }
        })
        .map_err(|e| format!("cannot start the quota recount: {e}"))?;
    Ok(Some(quotas))
}

/// Bearer tokens and temporary credentials: the session key that signs temporary credentials
/// is loaded from (or created in) the data root, so every gateway on that root accepts the same
/// temporary credentials (made from a user's keys with GetSessionToken, as the web console
/// does, or from a token); with `[[token_issuers]]` configured, their keys are loaded now (a
/// JWKS URL fetched; refreshed on a thread of its own).
fn grid_auth(
    settings: &ServeSettings,
    users: &[User],
    state: &isthmus_store::state_dir::StateDir,
) -> Result<GridAuth, String> {
    let sessions = isthmus_grid::SessionKeys::load_or_create(state)?;
    if settings.token_issuers.is_empty() {
        return Ok(GridAuth { tokens: None, sessions: Some(sessions) });
    }
    let user_of = |name: &str| {
        users
            .iter()
            .find(|u| u.access_key == name)
            .or_else(|| users.iter().find(|u| u.display_name == name))
            .map(|u| u.access_key.clone())
    };
    let tokens = Arc::new(isthmus_grid::TokenVerifier::new(&settings.token_issuers, user_of)?);
    let refresher = tokens.clone();
    std::thread::Builder::new()
        .name("jwks-refresh".into())
        .spawn(move || refresher.refresh_forever())
        .map_err(|e| format!("cannot start the token key refresher: {e}"))?;
    Ok(GridAuth { tokens: Some(tokens), sessions: Some(sessions) })
}

/// The Unix identities of the users (`identity = "posix"`): every user, root included, must map
/// to one, and none to uid 0 unless `allow_root`; errors name the user and the fix.
/// In `gateway` mode, users are mapped only to tell who a local socket's peer is: those without
/// an identity cannot use the socket.
fn identities_of(settings: &ServeSettings, root: &User, users: &[User]) -> Result<Identities, String> {
    let posix = settings.identity == IdentityMode::Posix;
    if !posix {
        if settings.local_socket.is_none() {
            return Ok(Identities::gateway());
        }
        let mapped = users
            .iter()
            .filter_map(|user| {
                let spec = identity_spec(settings, root, user);
                spec.is_set().then(|| (user.access_key.clone(), user.label(), spec))
            })
            .collect();
        return Identities::new(false, mapped, settings.allow_root);
    }
    let mapped = users
        .iter()
        .map(|user| {
            let is_root = user.access_key == root.access_key;
            let spec = identity_spec(settings, root, user);
            if !spec.is_set() {
                return Err(if is_root {
                    "identity = \"posix\": the root user needs a Unix identity; set root_identity = { unix_user = \"NAME\" } in the config file".to_string()
                } else {
                    format!("identity = \"posix\": user {:?} needs a Unix identity; set unix_user = \"NAME\" (or uid and gid) in its [[users]] entry", user.label())
                });
            }
            Ok((user.access_key.clone(), user.label(), spec))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Identities::new(true, mapped, settings.allow_root)
}

/// With `identity = "posix"`, a data root that users other than its owner may write without
/// the sticky bit is refused (unless `allow_root_without_sticky_bit`): any of them could rename
/// another user's bucket directory away and put their own in its place. (The gateway's state
/// is safe from that either way: it is read through the directory opened and checked at
/// start, `state_dir`.)
fn check_root_mode(settings: &ServeSettings) -> Result<(), String> {
    if settings.identity != IdentityMode::Posix || settings.allow_root_without_sticky_bit {
        return Ok(());
    }
    let root = &settings.root;
    let Ok(dir) = std::fs::File::open(root) else { return Ok(()) };
    match isthmus_store::state_dir::renamable_by_others(std::os::fd::AsFd::as_fd(&dir)) {
        Ok(true) => Err(format!(
            "identity = \"posix\": the data root {0} is writable by other users without the sticky bit, so any of them could rename the gateway's state or another user's bucket away; fix it with `chmod +t {0}` (or set allow_root_without_sticky_bit = true)",
            root.display()
        )),
        _ => Ok(()),
    }
}

/// A user's configured Unix identity (root's from `root_identity` when that is set).
fn identity_spec(settings: &ServeSettings, root: &User, user: &User) -> isthmus_session::IdentitySpec {
    match &settings.root_identity {
        Some(spec) if user.access_key == root.access_key => spec.clone(),
        _ => user.identity.clone(),
    }
}

/// How often a gateway looks whether the users file changed (another gateway's change).
const USERS_FILE_CHECK: Duration = Duration::from_secs(2);

/// Applies the users file again whenever it changes (a stat every `USERS_FILE_CHECK`, on a
/// thread of its own).
fn watch_users_file(admin: Arc<isthmus_s3::admin::Administration>) -> Result<(), String> {
    std::thread::Builder::new()
        .name("users-file".into())
        .spawn(move || {
            loop {
                std::thread::sleep(USERS_FILE_CHECK);
                match admin.reload_if_changed() {
                    Ok(true) => tracing::info!("users file changed: users applied again"),
                    Ok(false) => {}
                    Err(err) => tracing::warn!(error = %err, "cannot read the users file; users stay as they were"),
                }
            }
        })
        .map(drop)
        .map_err(|e| format!("cannot start the users file watcher: {e}"))
}

/// Re-resolves the users' Unix identities every `period` and on SIGHUP, off the async workers.
async fn refresh_identities(identities: Arc<Identities>, period: Duration) {
    let Ok(mut hangup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
        tracing::warn!("no SIGHUP handler: identities are re-resolved only periodically");
        return;
    };
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = hangup.recv() => tracing::info!("SIGHUP: resolving the users' Unix identities again"),
        }
        let ids = identities.clone();
        match tokio::task::spawn_blocking(move || ids.refresh()).await {
            Ok(0) => {}
            Ok(changed) => tracing::info!(changed, "users' Unix identities changed"),
            Err(err) => tracing::warn!(error = %err, "resolving identities failed"),
        }
    }
}

/// A listener on `address` if one is configured; the error names the setting to change.
async fn bind_optional(
    address: Option<std::net::SocketAddr>,
    setting: &str,
) -> Result<Option<tokio::net::TcpListener>, String> {
    let Some(address) = address else { return Ok(None) };
    tokio::net::TcpListener::bind(address)
        .await
        .map(Some)
        .map_err(|e| format!("cannot listen on {address}: {e} (choose another {setting})"))
}

/// Opens the access log file again on SIGHUP (after logrotate moved it).
async fn reopen_on_hangup(log: Arc<isthmus_s3::access_log::AccessLog>) {
    let Ok(mut hangup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else { return };
    while hangup.recv().await.is_some() {
        if let Err(err) = log.reopen() {
            tracing::warn!(error = %err, "cannot reopen the access log");
        }
    }
}

async fn shutdown_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
