//! `isthmus bench ...`: the benchmarks are a binary of their own, `isthmus-bench`; this command
//! runs it in place of this process (exec) with the same arguments, so its output, exit status
//! and signals are the benchmark's own, and the gateways it starts are this binary.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

/// The variable naming the benchmark binary.
const BENCH_BIN_VAR: &str = "ISTHMUS_BENCH_BIN";

/// Where `isthmus-bench` is: `$ISTHMUS_BENCH_BIN`, else `isthmus-bench` beside this program, else
/// `isthmus-bench` on the PATH.
fn bench_binary() -> PathBuf {
    if let Some(path) = std::env::var_os(BENCH_BIN_VAR) {
        return path.into();
    }
    let beside = std::env::current_exe().ok().map(|exe| exe.with_file_name("isthmus-bench"));
    beside.filter(|path| path.is_file()).unwrap_or_else(|| "isthmus-bench".into())
}

/// Runs `isthmus-bench ARGS` in place of this process; returns only when it cannot start.
pub fn run(args: Vec<OsString>) -> Result<(), String> {
    let binary = bench_binary();
    let mut command = Command::new(&binary);
    // Its usage and errors name the command that was typed.
    command.arg0("isthmus bench").args(args);
    // The gateways it starts (`--serve`, the studies) are this very binary.
    if let Ok(me) = std::env::current_exe() {
        command.env("ISTHMUS_BIN", me);
    }
    let error = command.exec();
    Err(match error.kind() {
        std::io::ErrorKind::NotFound => format!(
            "isthmus bench needs the isthmus-bench binary ({} not found): cargo build --release -p isthmus-bench, \
             or set {BENCH_BIN_VAR}",
            binary.display()
        ),
        _ => format!("cannot run {}: {error}", binary.display()),
    })
}
