//! The servers a benchmark run starts and stops: a process stopped when dropped, a free
//! loopback port, an Isthmus gateway on a data root (HTTP; or HTTP and a local socket with its
//! root user mapped to this process's uid), and waiting for a server to come up. A gateway is a
//! process of the `isthmus` binary (`isthmus serve`), as a deployment runs it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use isthmus_store::Durability;

/// The variable naming the `isthmus` binary whose gateway a run starts (`isthmus bench` sets it
/// to itself).
pub const GATEWAY_BIN_VAR: &str = "ISTHMUS_BIN";

/// The `isthmus` binary: `$ISTHMUS_BIN`, else `isthmus` beside this program, else `isthmus` on
/// the PATH.
pub fn gateway_binary() -> PathBuf {
    if let Some(path) = std::env::var_os(GATEWAY_BIN_VAR) {
        return path.into();
    }
    let beside = std::env::current_exe().ok().map(|exe| exe.with_file_name("isthmus"));
    beside.filter(|path| path.is_file()).unwrap_or_else(|| "isthmus".into())
}

/// Why the `isthmus` binary could not be started, and the fix.
pub fn gateway_binary_error(binary: &Path, e: std::io::Error) -> String {
    format!(
        "cannot start the gateway ({}): {e}: build it with cargo build --release -p isthmus, or set {GATEWAY_BIN_VAR}",
        binary.display()
    )
}

/// `isthmus serve`, of the binary `gateway_binary` finds.
fn serve_command() -> (Command, PathBuf) {
    let binary = gateway_binary();
    let mut command = Command::new(&binary);
    command.arg("serve");
    (command, binary)
}

/// A process started for the run (a gateway, a rank); stopped when dropped.
pub(crate) struct SpawnedProcess(pub(crate) Child);

impl Drop for SpawnedProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free TCP address on 127.0.0.1 for a server the bench starts.
pub(crate) fn free_address() -> Result<std::net::SocketAddr, String> {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())
}

pub(crate) fn spawn_gateway(
    root: &PathBuf,
    durability: Durability,
) -> Result<(SpawnedProcess, String, String, String), String> {
    let port = free_address()?.port();
    let user = isthmus_session::User::generate("bench");
    let (mut command, binary) = serve_command();
    let child = command
        .args(["--address", &format!("127.0.0.1:{port}"), "--log-level", "warn", "--durability"])
        .arg(match durability {
            Durability::Strict => "strict",
            Durability::Relaxed => "relaxed",
        })
        .arg("--root")
        .arg(root)
        .env("ISTHMUS_ROOT_ACCESS_KEY", &user.access_key)
        .env("ISTHMUS_ROOT_SECRET_KEY", &user.secret_key)
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| gateway_binary_error(&binary, e))?;
    let gateway = SpawnedProcess(child);
    let endpoint = format!("http://127.0.0.1:{port}");
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok((gateway, endpoint, user.access_key, user.secret_key));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Err("the gateway did not start listening within 5 s".into())
}

/// Waits until `ready` holds (up to 10 s).
pub(crate) fn wait_for(what: &str, mut ready: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Err(format!("{what} did not come up within 10 s"))
}

/// The gateway for the run: HTTP on a free port and a local socket, its root user mapped to
/// this process's uid (so the socket serves this process as root).
pub(crate) struct Gateway {
    _process: SpawnedProcess,
    pub(crate) address: SocketAddr,
    pub(crate) socket: PathBuf,
    pub(crate) access_key: String,
    pub(crate) secret_key: String,
}

pub(crate) fn start_gateway(root: &Path, work: &Path, durability: Durability) -> Result<Gateway, String> {
    let address = free_address()?;
    let socket = work.join("gateway.sock");
    let user = isthmus_session::User::generate("bench");
    let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
    let config = format!(
        "root = {root:?}\ndurability = {durability:?}\nlog_level = \"warn\"\nlocal_socket = {socket:?}\n\
         # The bench's own gateway on its own data root: its root user is this process.\n\
         allow_root = {allow_root}\n\n[root_user]\naccess_key = {key:?}\nsecret_key = {secret:?}\nuid = {uid}\ngid = {gid}\n",
        root = root.display().to_string(),
        durability = match durability {
            Durability::Strict => "strict",
            Durability::Relaxed => "relaxed",
        },
        socket = socket.display().to_string(),
        allow_root = uid == 0,
        key = user.access_key,
        secret = user.secret_key,
    );
    let config_path = work.join("gateway.toml");
    std::fs::write(&config_path, config).map_err(|e| format!("cannot write {}: {e}", config_path.display()))?;
    let (mut command, binary) = serve_command();
    let child = command
        .arg("--config")
        .arg(&config_path)
        .args(["--address", &address.to_string()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(work.join("gateway.log")).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| gateway_binary_error(&binary, e))?;
    let process = SpawnedProcess(child);
    wait_for("the gateway", || std::net::TcpStream::connect(address).is_ok() && socket.exists())
        .map_err(|e| format!("{e} (see {})", work.join("gateway.log").display()))?;
    Ok(Gateway { _process: process, address, socket, access_key: user.access_key, secret_key: user.secret_key })
}
