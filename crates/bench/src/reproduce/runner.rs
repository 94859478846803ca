//! Runs a study's experiments: each one an `isthmus bench ...` process of this same binary (or an
//! `isthmus ...` process of the gateway's binary) with its results in a JSON file of the
//! report's directory, its data in a fresh directory of its own, and its command line kept for
//! the report (so a reader can run any one again).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde::de::DeserializeOwned;

pub struct Runner {
    /// This program, which runs the `isthmus bench` experiments.
    exe: PathBuf,
    /// The report's directory: report.md, figures, raw JSON.
    pub out: PathBuf,
    /// Where experiments put their data.
    pub data: PathBuf,
    pub quick: bool,
    /// The command lines run, for the report.
    pub commands: Vec<String>,
    /// Environment the experiments run with (the keys of a gateway the study started).
    pub env: Vec<(String, String)>,
    /// Short paths for what must be short: a Unix socket's path has at most 107 bytes.
    pub scratch: PathBuf,
}

/// `word` as a shell would need it written.
pub fn quoted(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

impl Runner {
    pub fn new(out: PathBuf, data: PathBuf, quick: bool) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this program's path: {e}"))?;
        for dir in [&out, &data] {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let scratch = std::env::temp_dir().join(format!("isthmus-reproduce-{}", std::process::id()));
        Ok(Self { exe, out, data, quick, commands: Vec::new(), env: Vec::new(), scratch })
    }

    /// A fresh, empty directory for one experiment's data.
    pub fn fresh_dir(&self, name: &str) -> Result<PathBuf, String> {
        let dir = self.data.join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| format!("cannot empty {}: {e}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(dir)
    }

    /// A fresh directory with a short path (a gateway's socket, its configuration and log):
    /// kept after a failed run, for its log.
    pub fn scratch_dir(&self, name: &str) -> Result<PathBuf, String> {
        let dir = self.scratch.join(name);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| format!("cannot empty {}: {e}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(dir)
    }

    /// A file of the report's directory.
    pub fn output(&self, file: &str) -> PathBuf {
        self.out.join(file)
    }

    /// Runs `isthmus ARGS` (the gateway's binary) with its progress shown, and records the
    /// command.
    pub fn isthmus(&mut self, args: &[String]) -> Result<(), String> {
        self.run(&crate::gateway::gateway_binary(), "isthmus", args)
    }

    /// Runs `isthmus bench ARGS --json OUT/NAME.json` and reads the JSON it wrote.
    pub fn bench<T: DeserializeOwned>(&mut self, name: &str, args: &[String]) -> Result<T, String> {
        let json = self.output(&format!("{name}.json"));
        let mut all = args.to_vec();
        all.extend(["--json".to_string(), path_arg(&json)]);
        self.run(&self.exe.clone(), "isthmus bench", &all)?;
        read_json(&json)
    }

    /// Runs `program ARGS`, shown and recorded as `shown ARGS`.
    fn run(&mut self, program: &Path, shown: &str, args: &[String]) -> Result<(), String> {
        let line = std::iter::once(shown.to_string()).chain(args.iter().map(|a| quoted(a))).collect::<Vec<_>>();
        let line = line.join(" ");
        eprintln!("\n== {line}");
        let started = Instant::now();
        let status = Command::new(program)
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .status()
            .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
        if !status.success() {
            return Err(format!("`{line}` failed ({status})"));
        }
        eprintln!("== done in {:.1} s", started.elapsed().as_secs_f64());
        self.commands.push(line);
        Ok(())
    }
}

pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not the result expected: {e}", path.display()))
}

/// A path as a command-line argument.
pub fn path_arg(path: &Path) -> String {
    path.display().to_string()
}

/// Owned arguments from string slices.
pub fn words(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn command_lines_are_quoted_for_a_shell() {
        assert_eq!(super::quoted("--size=4KiB"), "--size=4KiB");
        assert_eq!(super::quoted("a b"), "'a b'");
        assert_eq!(super::quoted("it's"), "'it'\\''s'");
        assert_eq!(super::quoted(""), "''");
    }
}
