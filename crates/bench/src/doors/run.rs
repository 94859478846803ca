//! `isthmus bench doors`: one data root, one set of objects, reached through every door in one
//! run: raw POSIX (`stat`, open+read: the file system's ceiling), the engine in-process, a
//! gateway's local socket, the gateway over HTTP signed and anonymous (a bucket policy lets
//! anyone read), nginx serving the very same files when it is installed (the HTTP ceiling),
//! and a bare Unix-socket echo (the local socket's ceiling). Small objects are read with every
//! --workers count; one large object per door (--bulk-size) is read and written with one
//! worker, for bandwidth. The gateway and nginx are started for the run and stopped after it;
//! the data root is a new directory (under --baseline, default the current directory),
//! removed at the end.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use isthmus_posix::StoreOptions;
use isthmus_store::{BucketSettings, Durability, RequestContext};

use crate::args::BenchArgs;
use crate::doors::{self, DoorRow, OpenOperation, Probe, TargetOp};
use crate::gateway::{SpawnedProcess, free_address, start_gateway, wait_for};
use crate::{EmbeddedTarget, LocalSocketTarget, PosixTarget, S3Target, Target};

/// The size of an echo message: about a HEAD request's frame.
const ECHO_MESSAGE: usize = 64;

/// The nginx binary, if installed.
fn find_nginx() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).map(|dir| dir.join("nginx")).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path.into_iter().chain([PathBuf::from("/usr/sbin/nginx")]).find(|path| path.is_file())
}

/// nginx serving `root` as static files on a free port (the same files the gateway serves:
/// `/bucket/key` is the object's path under the root), or why not.
fn start_nginx(nginx: &Path, root: &Path, work: &Path) -> Result<(SpawnedProcess, SocketAddr), String> {
    let address = free_address()?;
    let dir = work.join("nginx");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    // Workers run as root when the bench does (the data root is private to this user); as
    // the same user otherwise (nginx ignores `user` then).
    let user = if rustix::process::geteuid().is_root() { "user root;\n" } else { "" };
    let config = format!(
        "{user}worker_processes auto;\ndaemon off;\npid {dir}/nginx.pid;\nerror_log {dir}/error.log;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  access_log off;\n  sendfile on;\n  tcp_nopush on;\n  client_body_temp_path {dir}/body;\n\
           server {{ listen {address}; root {root}; }}\n}}\n",
        dir = dir.display(),
        root = root.display(),
    );
    let config_path = dir.join("nginx.conf");
    std::fs::write(&config_path, config).map_err(|e| e.to_string())?;
    let child = Command::new(nginx)
        .arg("-p")
        .arg(&dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-c")
        .arg(&config_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", nginx.display()))?;
    let process = SpawnedProcess(child);
    wait_for("nginx", || std::net::TcpStream::connect(address).is_ok())
        .map_err(|e| format!("{e} (see {})", dir.join("error.log").display()))?;
    Ok((process, address))
}

/// Writes the objects every door reads: `objects` small ones and one large one per bulk reader.
fn populate(target: &dyn Target, keys: &[String], size: u64, bulk: &[String], bulk_size: u64) -> Result<(), String> {
    let mut connection = target.connect().map_err(|e| e.to_string())?;
    let small = crate::workload::payload(size);
    for key in keys {
        connection.put(key, &small).map_err(|e| format!("populating {key}: {e}"))?;
    }
    if bulk_size > 0 {
        let large = crate::workload::payload(bulk_size);
        for key in bulk {
            connection.put(key, &large).map_err(|e| format!("populating {key}: {e}"))?;
        }
    }
    Ok(())
}

fn probe(op: &str, door: &str, size: u64, ceiling: Option<&str>, open: OpenOperation) -> Probe {
    Probe { op: op.into(), door: door.into(), size, ceiling: ceiling.map(str::to_string), open }
}

pub fn run(args: &BenchArgs) -> Result<(), String> {
    let size = args.size.first().copied().unwrap_or(4096);
    let bulk_size = args.bulk_size;
    let objects = args.objects.unwrap_or(1000).max(1);
    let base = args.baseline.clone().unwrap_or_else(|| PathBuf::from("."));
    std::fs::create_dir_all(&base).map_err(|e| format!("cannot create {}: {e}", base.display()))?;
    let temporary = |parent: &Path| {
        let dir = tempfile::Builder::new().prefix(".isthmus-bench-doors-").tempdir_in(parent);
        dir.map_err(|e| format!("cannot create a directory in {}: {e}", parent.display()))
    };
    let (root_dir, work_dir) = (temporary(&base)?, temporary(&std::env::temp_dir())?);
    let root = std::fs::canonicalize(root_dir.path()).map_err(|e| e.to_string())?;
    let work = work_dir.path().to_path_buf();
    eprintln!(
        "doors: {objects} objects of {} and one of {} in {}; for each of {:?} workers, {:?} per door and op \
         (HEAD and GET through 6 doors, an echo), then the large object read and written once per door",
        crate::units::format_size(size),
        crate::units::format_size(bulk_size),
        root.display(),
        args.workers,
        args.duration,
    );

    let gateway = start_gateway(&root, &work, args.durability)?;
    let bucket = args.bucket.clone();
    let options = StoreOptions { durability: args.durability, ..StoreOptions::default() };
    let store = isthmus_pools::open_root(&root, options).map_err(|e| format!("cannot open {}: {e}", root.display()))?;
    let engine: Arc<dyn Target> =
        Arc::new(EmbeddedTarget { store: store.clone(), root: root.clone(), bucket: bucket.clone() });
    engine.prepare().map_err(|e| e.to_string())?;
    let keys: Arc<Vec<String>> = Arc::new((0..objects).map(|i| format!("data/o{i:08}")).collect());
    let bulk_keys = vec!["bulk/large".to_string()];
    populate(&*engine, &keys, size, &bulk_keys, bulk_size)?;
    // Anyone may read the bucket's objects: a bucket policy, as an S3 data portal publishes
    // (a bucket's canned ACL shares only its listing).
    let public_read = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::{bucket}/*"}}]}}"#
    );
    store
        .set_bucket_policy(&RequestContext::process(), &bucket, Some(public_read))
        .map_err(|e| format!("cannot give {bucket} a public-read policy: {e}"))?;

    let posix: Arc<dyn Target> =
        Arc::new(PosixTarget { dir: root.join(&bucket), sync: args.durability == Durability::Strict });
    let local = isthmus_local::LocalStore::connect(&gateway.socket).map_err(|e| format!("local socket: {e}"))?;
    let socket: Arc<dyn Target> = Arc::new(LocalSocketTarget {
        store: Arc::new(local),
        address: format!("unix://{}", gateway.socket.display()),
        bucket: bucket.clone(),
    });
    let endpoint = format!("http://{}", gateway.address);
    let http: Arc<dyn Target> = Arc::new(
        S3Target::new(&endpoint, &bucket, &gateway.access_key, &gateway.secret_key).map_err(|e| e.to_string())?,
    );
    // The gateway keeps a bucket's settings for a second: wait until it serves the bucket as
    // readable by anyone.
    let first = format!("/{bucket}/{}", keys[0]);
    wait_for("anonymous reads of the public bucket", || {
        crate::doors::RawHttp::new(gateway.address).request("HEAD", &first).is_ok()
    })?;
    let nginx = match find_nginx() {
        Some(binary) => match start_nginx(&binary, &root, &work) {
            Ok(started) => Some(started),
            Err(err) => {
                eprintln!("doors: nginx rows left out: {err}");
                None
            }
        },
        None => {
            eprintln!("doors: nginx is not installed (apt install nginx-light): its rows are left out");
            None
        }
    };
    let echo = crate::doors::EchoServer::start(&work.join("echo.sock"), ECHO_MESSAGE).map_err(|e| e.to_string())?;

    let no_data = Arc::new(Vec::new());
    let on = |target: &Arc<dyn Target>, op: TargetOp, keys: &Arc<Vec<String>>, data: &Arc<Vec<u8>>| {
        doors::target_operation(target.clone(), op, keys.clone(), data.clone())
    };
    let mut probes = Vec::new();
    for (op, target_op, ceiling, method) in
        [("head", TargetOp::Head, doors::STAT, "HEAD"), ("get", TargetOp::Get, doors::OPEN_READ, "GET")]
    {
        probes.push(probe(op, ceiling, size, None, on(&posix, target_op, &keys, &no_data)));
        probes.push(probe(op, doors::IN_PROCESS, size, Some(ceiling), on(&engine, target_op, &keys, &no_data)));
        probes.push(probe(op, doors::LOCAL_SOCKET, size, Some(ceiling), on(&socket, target_op, &keys, &no_data)));
        probes.push(probe(op, doors::HTTP_SIGNED, size, Some(ceiling), on(&http, target_op, &keys, &no_data)));
        let anonymous_ceiling = if nginx.is_some() { doors::NGINX } else { ceiling };
        let anonymous = doors::http_operation(gateway.address, method, bucket.clone(), keys.clone());
        probes.push(probe(op, doors::HTTP_ANONYMOUS, size, Some(anonymous_ceiling), anonymous));
        if let Some((_, address)) = &nginx {
            let served = doors::http_operation(*address, method, bucket.clone(), keys.clone());
            probes.push(probe(op, doors::NGINX, size, Some(ceiling), served));
        }
    }
    probes.push(probe("echo", doors::ECHO, ECHO_MESSAGE as u64, None, echo.operation(ECHO_MESSAGE)));

    let mut rows: Vec<DoorRow> = Vec::new();
    for &workers in &args.workers {
        for probe in &probes {
            rows.push(measure(probe, workers, args.duration)?);
        }
    }
    if bulk_size > 0 {
        let bulk_keys = Arc::new(bulk_keys);
        let data = Arc::new(crate::workload::payload(bulk_size));
        // Per op: the raw POSIX ceiling, then the doors beside it.
        let mut bulk = Vec::new();
        for (op, target_op, ceiling, body) in
            [("get", TargetOp::Get, doors::OPEN_READ, &no_data), ("put", TargetOp::Put, doors::WRITE_RENAME, &data)]
        {
            bulk.push(probe(op, ceiling, bulk_size, None, on(&posix, target_op, &bulk_keys, body)));
            for (door, target) in
                [(doors::IN_PROCESS, &engine), (doors::LOCAL_SOCKET, &socket), (doors::HTTP_SIGNED, &http)]
            {
                bulk.push(probe(op, door, bulk_size, Some(ceiling), on(target, target_op, &bulk_keys, body)));
            }
        }
        for probe in &bulk {
            rows.push(measure(probe, 1, args.duration)?);
        }
    }
    doors::relate(&mut rows);
    drop(nginx);
    drop(gateway);
    println!("{}", doors::table(&rows));
    let bounds = doors::socket_bounds(&rows);
    for line in &bounds {
        println!("{line}");
    }
    if let Some(path) = &args.json {
        let report = serde_json::json!({ "workload": "doors", "rows": rows, "socket_bounds": bounds });
        std::fs::write(path, serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if let Some(path) = &args.svg {
        doors::write_svg(&rows, path)?;
    }
    if let Some(row) = rows.iter().find(|r| r.errors > 0) {
        eprintln!(
            "doors: {} {} through {} had {} errors, the first: {}",
            row.op,
            crate::units::format_size(row.size),
            row.door,
            row.errors,
            row.first_error.as_deref().unwrap_or("-")
        );
    }
    let _ = std::io::stdout().flush();
    drop(root_dir);
    drop(work_dir);
    Ok(())
}

/// Runs one probe, saying what runs.
fn measure(probe: &Probe, workers: usize, duration: Duration) -> Result<DoorRow, String> {
    let _progress = crate::progress::announce(
        format!("{} {} through {}, {workers} workers", probe.op, crate::units::format_size(probe.size), probe.door),
        None,
    );
    doors::measure(probe, workers, duration).map_err(|e| format!("{} {}: {e}", probe.op, probe.door))
}
