//! `--tools DIR`: the community's own IOR, mdtest and md-workbench, built with their S3-libs3
//! backend, checked before any experiment runs, then run under mpirun (ranks as processes) on
//! POSIX, through the study's HTTP gateway (the tools' own libs3 4.1), in-process and through the
//! gateway's local socket (Isthmus's libs3.so.4 drop-in put in libs3's place by
//! `LD_LIBRARY_PATH`, the binaries unchanged). Each run's output is kept in OUT/tools/.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::tool_output::{ToolOutput, parse_ior, parse_md_workbench, parse_mdtest};

/// How a site builds the tools (hpc/ior's configure line for the S3-libs3 backend).
pub const CONFIGURE_LINE: &str = "build them with S3-libs3 against libs3 4.1: hpc/ior's ./bootstrap && ./configure \
    --with-S3-libs3 CPPFLAGS=-I<libs3>/include LDFLAGS=-L<libs3>/lib (or scripts/build-hpc-tools; \
    docs/benchmarks/s3-hpc-tools.md)";

/// The drop-in's file name: libs3 4.x's soname.
pub const DROP_IN: &str = "libs3.so.4";

/// The tools of hpc/ior a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Ior,
    Mdtest,
    MdWorkbench,
}

impl Tool {
    pub const ALL: [Tool; 3] = [Tool::Ior, Tool::Mdtest, Tool::MdWorkbench];

    pub fn file_name(self) -> &'static str {
        match self {
            Tool::Ior => "ior",
            Tool::Mdtest => "mdtest",
            Tool::MdWorkbench => "md-workbench",
        }
    }

    /// The name it goes by in a report.
    pub fn title(self) -> &'static str {
        match self {
            Tool::Ior => "IOR",
            Tool::Mdtest => "mdtest",
            Tool::MdWorkbench => "MD-Workbench",
        }
    }

    pub fn parse(self, text: &str) -> Result<ToolOutput, String> {
        match self {
            Tool::Ior => parse_ior(text),
            Tool::Mdtest => parse_mdtest(text),
            Tool::MdWorkbench => parse_md_workbench(text),
        }
    }
}

/// The tools found in `--tools DIR`, and the drop-in they run on for the local doors.
#[derive(Debug, Clone)]
pub struct Tools {
    pub dir: PathBuf,
    /// The directory holding Isthmus's libs3.so.4.
    pub libs3_dir: PathBuf,
}

impl Tools {
    pub fn path(&self, tool: Tool) -> PathBuf {
        self.dir.join(tool.file_name())
    }

    /// Checks that DIR holds the three tools, each built with S3-libs3 and able to start, that
    /// mpirun runs, and finds the drop-in: `libs3_dir` if given, else beside the `isthmus`
    /// executable, else beside this program. One line naming what is missing otherwise.
    pub fn check(dir: &Path, libs3_dir: Option<&Path>) -> Result<Tools, String> {
        for tool in Tool::ALL {
            check_tool(&dir.join(tool.file_name()))?;
        }
        match Command::new("mpirun").arg("--version").stdin(Stdio::null()).output() {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                return Err(format!("--tools: `mpirun --version` failed ({}): the tools run under MPI", out.status));
            }
            Err(e) => {
                return Err(format!(
                    "--tools: cannot run mpirun ({e}): the tools run under MPI (apt-get install openmpi-bin)"
                ));
            }
        }
        let libs3_dir = find_drop_in(libs3_dir)?;
        Ok(Tools { dir: dir.to_path_buf(), libs3_dir })
    }
}

/// A tool must exist, start, and list S3-libs3 among its APIs (`-h`, which exits 1).
fn check_tool(path: &Path) -> Result<(), String> {
    let name = path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    if !path.is_file() {
        return Err(format!("--tools: no `{name}` in {}: {CONFIGURE_LINE}", path.parent().unwrap_or(path).display()));
    }
    let out = Command::new(path)
        .arg("-h")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("--tools: {} cannot run ({e}): {CONFIGURE_LINE}", path.display()))?;
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if text.contains("S3-libs3") {
        return Ok(());
    }
    let why = text
        .lines()
        .find(|l| l.contains("error while loading shared libraries"))
        .map_or_else(|| "it lists no S3-libs3 API".to_string(), |l| l.trim().to_string());
    Err(format!("--tools: {} is not usable ({why}): {CONFIGURE_LINE}", path.display()))
}

/// The directory of the drop-in: the one given, else that of the `isthmus` executable, else that
/// of this program (cargo builds them all into target/release).
fn find_drop_in(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(dir) = given {
        return if dir.join(DROP_IN).is_file() {
            Ok(dir.to_path_buf())
        } else {
            Err(format!("--libs3-dir {}: no {DROP_IN} there (Isthmus's libs3 4.x drop-in)", dir.display()))
        };
    }
    let beside = |exe: PathBuf| exe.parent().filter(|d| !d.as_os_str().is_empty()).map(Path::to_path_buf);
    let mut candidates: Vec<PathBuf> = Vec::new();
    for dir in
        [Some(crate::gateway::gateway_binary()), std::env::current_exe().ok()].into_iter().flatten().filter_map(beside)
    {
        if !candidates.contains(&dir) {
            candidates.push(dir);
        }
    }
    candidates.iter().find(|d| d.join(DROP_IN).is_file()).cloned().ok_or_else(|| {
        let looked: Vec<String> = candidates.iter().map(|d| d.display().to_string()).collect();
        format!(
            "--tools: no {DROP_IN} (Isthmus's libs3 4.x drop-in) in {}: build it with cargo build --release -p \
             isthmus-libs3-4, or give --libs3-dir",
            if looked.is_empty() { "the executables' directories".into() } else { looked.join(" or ") }
        )
    })
}

/// One experiment of the tools: a tool with its arguments, named as the IO500 phase family it
/// measures (`ior-easy`, `mdtest-hard`, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRun {
    pub name: &'static str,
    pub tool: Tool,
    /// The arguments after the API's, with BASE for the run's path prefix.
    pub args: Vec<String>,
}

/// The tools' experiments at the study's size: IOR's easy (a file per rank, 1 MiB transfers) and
/// hard (one shared file, 47,008-byte transfers) with its write and read checks and each rank
/// reading what another wrote (-C); mdtest's easy (a directory per rank, empty files) and hard
/// (one directory, 3,901 bytes written and read back, verified); MD-Workbench verifying its
/// reads.
pub fn experiments(quick: bool, base: &str) -> Vec<ToolRun> {
    let (block, segments, files, (datasets, precreate, ops)) = if quick {
        ("16m", "100", "500", ("5", "100", "100"))
    } else {
        ("256m", "1000", "5000", ("10", "1000", "1000"))
    };
    let path = |name: &str| format!("{base}/{name}");
    let run = |name: &'static str, tool: Tool, args: Vec<String>| ToolRun { name, tool, args };
    let ior = ["-w", "-r", "-W", "-R", "-C", "-e"].map(String::from);
    let with =
        |head: &[String], tail: &[&str]| head.iter().cloned().chain(tail.iter().map(|s| s.to_string())).collect();
    vec![
        run("ior-easy", Tool::Ior, with(&ior, &["-F", "-t", "1m", "-b", block, "-o", &path("ior-easy/file")])),
        run(
            "ior-hard",
            Tool::Ior,
            with(&ior, &["-t", "47008", "-b", "47008", "-s", segments, "-o", &path("ior-hard/file")]),
        ),
        run("mdtest-easy", Tool::Mdtest, with(&[], &["-F", "-u", "-L", "-n", files, "-d", &path("mdtest-easy")])),
        run(
            "mdtest-hard",
            Tool::Mdtest,
            with(&[], &["-F", "-n", files, "-w", "3901", "-e", "3901", "-X", "-d", &path("mdtest-hard")]),
        ),
        run(
            "md-workbench",
            Tool::MdWorkbench,
            with(&[], &["-X", "-D", datasets, "-P", precreate, "-I", ops, "-R", "3", "-o", &path("md-workbench")]),
        ),
    ]
}

/// How the tools reach storage through one door.
#[derive(Debug, Clone, PartialEq)]
pub struct Door {
    /// As the project's results name it: posix, s3 (HTTP), embedded (in-process), local (socket).
    pub kind: &'static str,
    /// `--S3-libs3.host`; none for POSIX.
    pub host: Option<String>,
    /// What the ranks need in their environment (handed on by mpirun's -x).
    pub env: Vec<(String, String)>,
    /// The path prefix of the run's files or objects.
    pub base: String,
}

/// The four doors of a run: POSIX on `posix`, the gateway at `http`, the drop-in in-process on
/// `root` (host `isthmus`, `ISTHMUS_ROOT`) and over the gateway's `socket` (host `unix:PATH`).
/// `inherited` is the caller's LD_LIBRARY_PATH, kept after the drop-in's directory.
pub fn door_specs(
    libs3_dir: &Path,
    inherited: Option<&str>,
    http: &str,
    socket: &Path,
    root: &Path,
    posix: &Path,
) -> Vec<Door> {
    let library_path = match inherited.filter(|p| !p.is_empty()) {
        Some(rest) => format!("{}:{rest}", libs3_dir.display()),
        None => libs3_dir.display().to_string(),
    };
    let ld = ("LD_LIBRARY_PATH".to_string(), library_path);
    let base = "s3-hpc".to_string();
    vec![
        Door { kind: "posix", host: None, env: Vec::new(), base: posix.display().to_string() },
        Door { kind: "s3", host: Some(http.into()), env: Vec::new(), base: base.clone() },
        Door {
            kind: "embedded",
            host: Some("isthmus".into()),
            env: vec![ld.clone(), ("ISTHMUS_ROOT".into(), root.display().to_string())],
            base: base.clone(),
        },
        Door { kind: "local", host: Some(format!("unix:{}", socket.display())), env: vec![ld], base },
    ]
}

/// A command line to run, and how the report shows it (the keys as the variables holding them).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCommand {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub shown: Vec<String>,
}

/// `mpirun [--allow-run-as-root] --oversubscribe -np RANKS [-x VAR]... TOOL -a API ... ARGS`:
/// ranks as processes on this node, the door's environment handed to each.
pub fn command(
    tools: &Tools,
    run: &ToolRun,
    door: &Door,
    ranks: usize,
    as_root: bool,
    keys: (&str, &str),
) -> ToolCommand {
    let mut mpi = vec!["mpirun".to_string()];
    if as_root {
        mpi.push("--allow-run-as-root".into());
    }
    mpi.extend(["--oversubscribe".into(), "-np".into(), ranks.to_string()]);
    for (name, _) in &door.env {
        mpi.extend(["-x".into(), name.clone()]);
    }
    mpi.push(tools.path(run.tool).display().to_string());
    let api = |access: &str, secret: &str| -> Vec<String> {
        match &door.host {
            None => vec!["-a".into(), "POSIX".into()],
            Some(host) => vec![
                "-a".into(),
                "S3-libs3".into(),
                format!("--S3-libs3.host={host}"),
                format!("--S3-libs3.access-key={access}"),
                format!("--S3-libs3.secret-key={secret}"),
            ],
        }
    };
    let args_of = |api: Vec<String>| -> Vec<String> {
        let rest = run.args.iter().map(|a| a.replace("BASE", &door.base));
        mpi[1..].iter().cloned().chain(api).chain(rest).collect()
    };
    let args = args_of(api(keys.0, keys.1));
    let shown = door
        .env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .chain(std::iter::once("mpirun".to_string()))
        .chain(args_of(api("$AWS_ACCESS_KEY_ID", "$AWS_SECRET_ACCESS_KEY")))
        .collect();
    ToolCommand { program: mpi[0].clone(), args, env: door.env.clone(), shown }
}

/// Runs a command with its output (stdout and stderr) in `log`, stopped after `limit`; its
/// output, or why it failed.
pub fn run_logged(command: &ToolCommand, log: &Path, limit: Duration) -> Result<String, String> {
    let file = std::fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let err = file.try_clone().map_err(|e| e.to_string())?;
    let mut child = Command::new(&command.program)
        .args(&command.args)
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", command.program))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(status);
        }
        if started.elapsed() > limit {
            stop(&mut child);
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(log).unwrap_or_default();
    match status {
        Some(status) if status.success() => Ok(text),
        Some(status) => Err(format!("{status}{}", last_words(&text))),
        None => Err(format!("stopped after {} s{}", limit.as_secs(), last_words(&text))),
    }
}

/// mpirun forwards SIGTERM to its ranks; SIGKILL if it does not end.
fn stop(child: &mut std::process::Child) {
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    for _ in 0..100 {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The first problem a failed run printed, else its last line: what a report cell can say.
fn last_words(text: &str) -> String {
    let problems = super::tool_output::problems(text);
    let line =
        problems.first().cloned().or_else(|| text.lines().rev().find(|l| !l.trim().is_empty()).map(str::to_string));
    line.map_or_else(String::new, |l| format!(": {}", l.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Tools {
        Tools { dir: "/opt/hpc/bin".into(), libs3_dir: "/opt/isthmus/lib".into() }
    }

    #[test]
    fn command_lines_and_environment_per_door() {
        let doors = door_specs(
            Path::new("/opt/isthmus/lib"),
            Some("/opt/mpi/lib"),
            "127.0.0.1:9000",
            Path::new("/tmp/s/gateway.sock"),
            Path::new("/data/root"),
            Path::new("/data/posix"),
        );
        let runs = experiments(true, "BASE");
        let ior = &runs[0];
        let keys = ("AK", "SK");
        let line = |door: &Door, as_root: bool| command(&tools(), ior, door, 2, as_root, keys);
        let tail = "-w -r -W -R -C -e -F -t 1m -b 16m -o";

        let posix = line(&doors[0], false);
        assert_eq!(posix.program, "mpirun");
        assert_eq!(
            posix.args.join(" "),
            format!("--oversubscribe -np 2 /opt/hpc/bin/ior -a POSIX {tail} /data/posix/ior-easy/file")
        );
        assert!(posix.env.is_empty());

        let s3 = " -a S3-libs3 --S3-libs3.host=";
        let keys_arg = "--S3-libs3.access-key=AK --S3-libs3.secret-key=SK";
        let http = line(&doors[1], true);
        assert_eq!(
            http.args.join(" "),
            format!(
                "--allow-run-as-root --oversubscribe -np 2 /opt/hpc/bin/ior{s3}127.0.0.1:9000 {keys_arg} {tail} s3-hpc/ior-easy/file"
            )
        );
        assert!(http.env.is_empty(), "HTTP runs on the tools' own libs3 4.1");

        let embedded = line(&doors[2], true);
        assert_eq!(
            embedded.args.join(" "),
            format!(
                "--allow-run-as-root --oversubscribe -np 2 -x LD_LIBRARY_PATH -x ISTHMUS_ROOT /opt/hpc/bin/ior{s3}isthmus \
                 {keys_arg} {tail} s3-hpc/ior-easy/file"
            )
        );
        assert_eq!(
            embedded.env,
            [
                ("LD_LIBRARY_PATH".to_string(), "/opt/isthmus/lib:/opt/mpi/lib".to_string()),
                ("ISTHMUS_ROOT".to_string(), "/data/root".to_string())
            ]
        );
        assert!(embedded.shown.join(" ").starts_with(
            "LD_LIBRARY_PATH=/opt/isthmus/lib:/opt/mpi/lib ISTHMUS_ROOT=/data/root mpirun --allow-run-as-root"
        ));
        assert!(
            embedded
                .shown
                .join(" ")
                .contains("--S3-libs3.access-key=$AWS_ACCESS_KEY_ID --S3-libs3.secret-key=$AWS_SECRET_ACCESS_KEY")
        );
        assert!(!embedded.shown.join(" ").contains("SK"), "no key in the report");

        let socket = line(&doors[3], true);
        assert!(
            socket
                .args
                .join(" ")
                .contains(" -x LD_LIBRARY_PATH /opt/hpc/bin/ior -a S3-libs3 --S3-libs3.host=unix:/tmp/s/gateway.sock ")
        );
        assert_eq!(socket.env, [("LD_LIBRARY_PATH".to_string(), "/opt/isthmus/lib:/opt/mpi/lib".to_string())]);

        let alone = door_specs(Path::new("/l"), None, "h:1", Path::new("/s"), Path::new("/r"), Path::new("/p"));
        assert_eq!(alone[3].env[0].1, "/l");
    }

    #[test]
    fn experiments_at_both_sizes() {
        let names: Vec<&str> = experiments(true, "B").iter().map(|r| r.name).collect();
        assert_eq!(names, ["ior-easy", "ior-hard", "mdtest-easy", "mdtest-hard", "md-workbench"]);
        let full = experiments(false, "B");
        assert_eq!(full[3].args.join(" "), "-F -n 5000 -w 3901 -e 3901 -X -d B/mdtest-hard");
        assert_eq!(full[4].args.join(" "), "-X -D 10 -P 1000 -I 1000 -R 3 -o B/md-workbench");
        assert_eq!(
            experiments(true, "B")[1].args.join(" "),
            "-w -r -W -R -C -e -t 47008 -b 47008 -s 100 -o B/ior-hard/file"
        );
    }

    #[test]
    fn a_missing_or_unusable_tool_is_named_with_the_configure_line() {
        let dir = tempfile::tempdir().expect("a directory");
        let err = Tools::check(dir.path(), None).unwrap_err();
        assert!(err.starts_with("--tools: no `ior` in "), "{err}");
        assert!(err.contains("./configure --with-S3-libs3 CPPFLAGS=-I<libs3>/include"), "{err}");
        assert!(!err.contains('\n'));
        // A program that starts but has no S3-libs3 API: IOR built without --with-S3-libs3.
        for tool in Tool::ALL {
            let path = dir.path().join(tool.file_name());
            std::fs::write(&path, "#!/bin/sh\necho 'API for I/O [POSIX|DUMMY|MMAP]'\nexit 1\n").expect("written");
            let mut perms = std::fs::metadata(&path).expect("meta").permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
            std::fs::set_permissions(&path, perms).expect("executable");
        }
        let err = Tools::check(dir.path(), None).unwrap_err();
        assert!(err.contains("/ior is not usable (it lists no S3-libs3 API)"), "{err}");
        let err = find_drop_in(Some(dir.path())).unwrap_err();
        assert!(err.starts_with("--libs3-dir ") && err.contains("no libs3.so.4"), "{err}");
    }

    #[test]
    fn a_run_that_fails_or_hangs_says_why() {
        let dir = tempfile::tempdir().expect("a directory");
        let sh = |script: &str| ToolCommand {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![("X".into(), "1".into())],
            shown: Vec::new(),
        };
        let log = dir.path().join("log.txt");
        assert_eq!(run_logged(&sh("echo $X"), &log, Duration::from_secs(10)).expect("runs"), "1\n");
        let failed = sh("echo 'WARNING: S3 S3_init:574 (path:b) \"ErrorInterrupted\": x'; exit 3");
        let err = run_logged(&failed, &log, Duration::from_secs(10)).unwrap_err();
        assert_eq!(err, "exit status: 3: S3_init \"ErrorInterrupted\"");
        let err = run_logged(&sh("echo started; sleep 30"), &log, Duration::from_millis(200)).unwrap_err();
        assert_eq!(err, "stopped after 0 s: started");
    }
}
