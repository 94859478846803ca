//! What a study needs before it starts (Python modules, free space), checked at once so a run
//! never stops at its end for something missing: one line naming what is missing and the one
//! command that installs it. `docs/benchmarks/reproduce.md` lists the same per study; the
//! tools of `s3-hpc --tools` (and mpirun) are checked by `s3_hpc::Tools::check`.

use std::path::Path;
use std::process::{Command, Stdio};

use super::Study;

/// Python modules a study's experiments import, with the pip names that install them.
/// pdc-xf: EQSIM's baseline is h5py on numpy, and its comparison reads the Zarr copy with
/// zarr-python through s3fs (those rows were skipped silently before; now the study asks).
fn python_modules(study: Study) -> &'static [&'static str] {
    match study {
        Study::PdcXf => &["numpy", "h5py", "zarr", "s3fs"],
        Study::LustreMinio | Study::S3Hpc | Study::CephfsEc => &[],
    }
}

const GIB: u64 = 1 << 30;

/// Bytes as GiB with one decimal ("3.0 GiB"), as `--help` and the refusals print them.
fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / GIB as f64)
}

/// Free space a study's data directory needs (what its largest experiment writes at once, with
/// room for the baseline beside it), quick and full. Decision: rounded up from the sizes
/// docs/benchmarks/reproduce.md gives, so a run that starts has the room to finish.
fn space_needed(study: Study, quick: bool) -> u64 {
    match (study, quick) {
        (Study::LustreMinio, true) => 2 * GIB,
        (Study::LustreMinio, false) => 8 * GIB,
        (Study::S3Hpc, true) => 2 * GIB,
        (Study::S3Hpc, false) => 8 * GIB,
        (Study::CephfsEc, true) => 3 * GIB,
        (Study::CephfsEc, false) => 12 * GIB,
        (Study::PdcXf, true) => 3 * GIB,
        (Study::PdcXf, false) => 24 * GIB,
    }
}

/// What a study needs, as `--help` (the study's own line, a doc comment of `Study`) must say it:
/// the test that holds the help to these figures.
#[cfg(test)]
fn summary(study: Study) -> String {
    let modules = python_modules(study);
    let space = format!("{} free ({} with --quick)", gib(space_needed(study, false)), gib(space_needed(study, true)));
    if modules.is_empty() {
        format!("needs {space}")
    } else {
        format!("needs {space}, python3 with {}", modules.join(", "))
    }
}

/// Refuses to start `study` when something it needs is missing: Python modules (asked of the
/// `python3` the experiments run), free space where `data` will be.
pub fn check(study: Study, quick: bool, data: &Path) -> Result<(), String> {
    check_python(study)?;
    check_space(study, quick, data)
}

fn check_python(study: Study) -> Result<(), String> {
    let modules = python_modules(study);
    if modules.is_empty() {
        return Ok(());
    }
    let install = format!("python3 -m pip install {}", modules.join(" "));
    let probe =
        "import importlib.util, sys\nprint(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))";
    let output = Command::new("python3").arg("-c").arg(probe).args(modules).stdin(Stdio::null()).output();
    let missing = match output {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        Ok(out) => {
            return Err(format!("{}: python3 could not check its modules ({}); {install}", study.name(), out.status));
        }
        Err(e) => {
            return Err(format!(
                "{} needs python3 with {} (cannot run python3: {e}): apt-get install python3 python3-pip, then {install}",
                study.name(),
                modules.join(", ")
            ));
        }
    };
    if missing.is_empty() {
        return Ok(());
    }
    let missing: Vec<&str> = missing.split_whitespace().collect();
    Err(format!(
        "{} needs the Python modules {} (missing: {}): python3 -m pip install {}",
        study.name(),
        modules.join(", "),
        missing.join(", "),
        missing.join(" ")
    ))
}

fn check_space(study: Study, quick: bool, data: &Path) -> Result<(), String> {
    // The data directory may not exist yet: its nearest existing ancestor's file system.
    let existing = data.ancestors().find(|p| p.exists()).unwrap_or(Path::new("."));
    let existing = if existing.as_os_str().is_empty() { Path::new(".") } else { existing };
    let stat = rustix::fs::statvfs(existing).map_err(|e| format!("{}: {e}", existing.display()))?;
    let free = stat.f_bavail.saturating_mul(stat.f_frsize);
    space_verdict(study, quick, free, existing)
}

/// `check_space` for `free` bytes at `place`.
fn space_verdict(study: Study, quick: bool, free: u64, place: &Path) -> Result<(), String> {
    let needed = space_needed(study, quick);
    if free >= needed {
        return Ok(());
    }
    Err(format!(
        "{}{} needs {} free where its data goes, {} has {}: give --dir a directory with room",
        study.name(),
        if quick { " --quick" } else { "" },
        gib(needed),
        place.display(),
        gib(free)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_study_says_what_it_needs_in_its_help() {
        use clap::ValueEnum;
        for study in Study::value_variants() {
            assert!(space_needed(*study, true) <= space_needed(*study, false));
            let value = study.to_possible_value().unwrap();
            let help = value.get_help().map(|h| h.to_string()).unwrap_or_default().replace('\n', " ");
            assert!(
                help.contains(&summary(*study)),
                "the --help of {}: {help:?} lacks {:?}",
                study.name(),
                summary(*study)
            );
        }
        assert!(summary(Study::PdcXf).contains("h5py"));
    }

    #[test]
    fn too_little_space_is_refused_with_the_fix() {
        let place = Path::new("/scratch");
        let err = space_verdict(Study::PdcXf, false, GIB, place).unwrap_err();
        assert!(err.contains("pdc-xf needs") && err.contains("/scratch has") && err.contains("give --dir"), "{err}");
        assert!(space_verdict(Study::PdcXf, true, 100 * GIB, place).is_ok());
        // A data directory not made yet is judged by its nearest existing ancestor.
        let dir = tempfile::tempdir().unwrap();
        if let Err(err) = check_space(Study::S3Hpc, true, &dir.path().join("not/yet")) {
            assert!(err.contains("give --dir"), "statvfs of a missing directory: {err}");
        }
    }
}
