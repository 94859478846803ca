//! Real brokers for the sender tests, each started on 127.0.0.1 on a free port with its own
//! temporary directory, in its own process group, killed when dropped. A missing binary fails
//! the test with the line that installs it.

use std::fs::File;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const APT: &str = "apt-get install -y nats-server rabbitmq-server redis-server";

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The first of `candidates` that exists, or a failure naming the Debian packages.
pub fn binary(candidates: &[&str]) -> PathBuf {
    let found = candidates.iter().map(PathBuf::from).find(|path| path.is_file());
    found.unwrap_or_else(|| panic!("none of {candidates:?} is installed: run `{APT}`"))
}

/// A server process (and its children), killed with its process group when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
}

impl Server {
    /// Starts `command` with its output in `log`, and waits up to `patience` for `port` to
    /// accept connections.
    pub fn start(mut command: Command, port: u16, log: &Path, patience: Duration) -> Server {
        let output = File::create(log).unwrap();
        command.stdin(Stdio::null()).stdout(output.try_clone().unwrap()).stderr(output).process_group(0);
        let child = command.spawn().unwrap_or_else(|error| panic!("cannot start {command:?}: {error}"));
        let mut server = Server { child, port };
        let deadline = Instant::now() + patience;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            let log_text = || std::fs::read_to_string(log).unwrap_or_default();
            if let Some(status) = server.child.try_wait().unwrap() {
                panic!("{command:?} ended ({status}) before listening on {port}:\n{}", log_text());
            }
            assert!(
                Instant::now() < deadline,
                "{command:?} not listening on {port} after {patience:?}:\n{}",
                log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    /// `nats-server` with JetStream, its storage in `dir` (kept across restarts).
    pub fn nats(port: u16, dir: &Path) -> Server {
        let mut command = Command::new(binary(&["/usr/sbin/nats-server", "/usr/bin/nats-server"]));
        command.args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"]).arg(dir.join("jetstream"));
        Server::start(command, port, &dir.join("nats.log"), Duration::from_secs(20))
    }

    /// `redis-server` without persistence, with `password` if given.
    pub fn redis(port: u16, dir: &Path, password: Option<&str>) -> Server {
        let mut command = Command::new(binary(&["/usr/bin/redis-server", "/usr/sbin/redis-server"]));
        command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir"])
            .arg(dir);
        if let Some(password) = password {
            command.args(["--requirepass", password]);
        }
        Server::start(command, port, &dir.join("redis.log"), Duration::from_secs(20))
    }

    /// `rabbitmq-server` (the Debian script that runs it as root, not the wrapper that switches
    /// to the `rabbitmq` user and loses the environment) as node `isthmus-test-PORT`, with its
    /// database, logs, configuration, Erlang cookie and its own `epmd` (on a free port, in the
    /// same process group) in `dir`. Ready when it listens for AMQP: it opens that port last.
    pub fn rabbitmq(port: u16, dir: &Path) -> Server {
        let server = binary(&["/usr/lib/rabbitmq/bin/rabbitmq-server"]);
        let epmd = binary(&["/usr/bin/epmd"]);
        let epmd_port = free_port().to_string();
        std::fs::write(dir.join("rabbitmq.conf"), "").unwrap();
        std::fs::write(dir.join("enabled_plugins"), "[].\n").unwrap();
        let script = format!("{} -port {epmd_port} & exec {}", epmd.display(), server.display());
        let mut command = Command::new("/bin/sh");
        command.args(["-c", &script]).current_dir(dir).env("HOME", dir).env("ERL_EPMD_PORT", &epmd_port);
        for (name, value) in [
            ("RABBITMQ_MNESIA_BASE", dir.join("mnesia")),
            ("RABBITMQ_LOG_BASE", dir.join("log")),
            ("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq")),
            ("RABBITMQ_ADVANCED_CONFIG_FILE", dir.join("advanced.config")),
            ("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins")),
            ("RABBITMQ_PID_FILE", dir.join("rabbitmq.pid")),
        ] {
            command.env(name, value);
        }
        command
            .env("RABBITMQ_NODENAME", format!("isthmus-test-{port}@localhost"))
            .env("RABBITMQ_NODE_IP_ADDRESS", "127.0.0.1")
            .env("RABBITMQ_NODE_PORT", port.to_string())
            .env("RABBITMQ_DIST_PORT", free_port().to_string());
        Server::start(command, port, &dir.join("rabbitmq.log"), Duration::from_secs(90))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(group) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
        let _ = self.child.wait();
        // The port is free again once the kernel closed the listener.
        let deadline = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The `index`th test record: an AWS-style event document with its own sequencer.
pub fn record(index: usize) -> Vec<u8> {
    format!(
        r#"{{"Records":[{{"eventVersion":"2.1","eventSource":"isthmus:s3","eventName":"ObjectCreated:Put","s3":{{"bucket":{{"name":"b"}},"object":{{"key":"{}","size":{index},"sequencer":"{index:016X}"}}}}}}]}}"#,
        key(index)
    )
    .into_bytes()
}

pub fn key(index: usize) -> String {
    format!("dir/file-{index}.h5")
}

/// A runtime for the test's own clients (the senders own theirs).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

/// Sends `count` records (from `first`) one at a time and prints the rate.
pub fn send_timed(sender: &mut dyn isthmus_notify::destination::Sender, kind: &str, first: usize, count: usize) {
    let started = Instant::now();
    for index in first..first + count {
        sender.send(&key(index), &record(index)).unwrap_or_else(|error| panic!("{kind} record {index}: {error}"));
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{kind}: {count} records sent one at a time, each acknowledged, in {seconds:.2} s: {:.0} records/s",
        count as f64 / seconds
    );
}

/// Sends `count` records (from `first`) in batches of `batch` with `send_all`, each batch
/// taken whole, and prints the rate.
pub fn send_batched(
    sender: &mut dyn isthmus_notify::destination::Sender,
    kind: &str,
    first: usize,
    count: usize,
    batch: usize,
) {
    use isthmus_notify::destination::Outgoing;
    let started = Instant::now();
    let records: Vec<(String, Vec<u8>)> = (first..first + count).map(|index| (key(index), record(index))).collect();
    for chunk in records.chunks(batch) {
        let outgoing: Vec<Outgoing<'_>> =
            chunk.iter().map(|(key, record)| Outgoing { key, record: record.as_slice() }).collect();
        let (taken, failure) = sender.send_all(&outgoing);
        assert!(failure.is_none() && taken == chunk.len(), "{kind}: {taken} of {} taken: {failure:?}", chunk.len());
    }
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{kind}: {count} records sent in batches of {batch}, each acknowledged, in {seconds:.2} s: {:.0} records/s",
        count as f64 / seconds
    );
}
