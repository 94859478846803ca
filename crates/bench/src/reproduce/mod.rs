//! `isthmus bench reproduce <study>`: the experiments of a published study, run by one command
//! at a quick or a full size, and a report (Markdown tables and SVG figures) with the paper's
//! figures beside ours and a sentence on each difference.

mod cephfs_ec;
mod lustre_minio;
mod pdc_xf;
mod prerequisites;
mod report;
mod runner;
mod s3_hpc;

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use report::StudyReport;
use runner::Runner;

/// The studies Isthmus starts from (docs/benchmarks/reproduce.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Study {
    /// MinIO as an S3 gateway on Lustre against Ceph RGW and JuiceFS: COSBench, mdtest, cost;
    /// needs 8.0 GiB free (2.0 GiB with --quick)
    LustreMinio,
    /// Gadban and Kunkel, the S3 API for HPC workloads: IO500 and MD-Workbench over S3,
    /// in-process (S3Embedded) and a local gateway (S3Remote); needs 8.0 GiB free (2.0 GiB with --quick)
    S3Hpc,
    /// CERN's erasure-coded layouts: EC 4+2, 8+2, 16+2, block sizes, a slow drive; needs 12.0 GiB
    /// free (3.0 GiB with --quick)
    CephfsEc,
    /// PDC-XF: regions of arrays, asynchronous transfers, session against strong consistency,
    /// cross-facility migration, the EQSIM analysis patterns; needs 24.0 GiB free (3.0 GiB with
    /// --quick), python3 with numpy, h5py, zarr, s3fs
    PdcXf,
}

#[derive(Debug, Args)]
pub struct ReproduceArgs {
    /// The study
    #[arg(value_enum)]
    pub study: Study,
    /// The quick size (under 10 minutes on 2 cores); without it, the full size docs/benchmarks/reproduce.md gives
    #[arg(long)]
    pub quick: bool,
    /// Where the report goes (report.md, its SVG figures and the raw JSON results)
    /// [default: ./reproduce-STUDY]
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Where the experiments put their data: a directory on the file system under test
    /// [default: OUT/data, removed after the run]
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// s3-hpc: a directory holding the community's `ior`, `mdtest` and `md-workbench` built with
    /// S3-libs3 (docs/benchmarks/s3-hpc-tools.md); the study runs them through every door too
    /// [default: none: the project's own implementations only]
    #[arg(long, value_name = "DIR")]
    pub tools: Option<PathBuf>,
    /// s3-hpc --tools: the directory of Isthmus's libs3.so.4 drop-in the tools run on in-process
    /// and over the socket [default: beside the isthmus executable, else beside this program]
    #[arg(long, value_name = "DIR", requires = "tools")]
    pub libs3_dir: Option<PathBuf>,
}

impl Study {
    /// The name on the command line.
    fn name(self) -> &'static str {
        match self {
            Study::LustreMinio => "lustre-minio",
            Study::S3Hpc => "s3-hpc",
            Study::CephfsEc => "cephfs-ec",
            Study::PdcXf => "pdc-xf",
        }
    }

    /// The report's title, the paper, and what of it is quoted beside our figures.
    fn header(self) -> (&'static str, &'static str) {
        match self {
            Study::LustreMinio => (
                "MinIO as an S3 gateway on Lustre: COSBench, mdtest and cost",
                "The study of HPC storage integrated with the cloud that compared Lustre behind a MinIO S3 gateway \
                 with Ceph RGW and JuiceFS using COSBench and mdtest, and cloud with on-premises cost \
                 (ProQuest document 3214124306).",
            ),
            Study::S3Hpc => (
                "The S3 API for HPC workloads: IO500 and MD-Workbench",
                "Frank Gadban and Julian Kunkel, \"Analyzing the Performance of the S3 Object Storage API for HPC \
                 Workloads\", Applied Sciences 11(18), 8540, 2021 (doi:10.3390/app11188540).",
            ),
            Study::CephfsEc => (
                "Erasure-coded layouts on high-density disk servers",
                "CERN's evaluation of erasure coding in CephFS on high-density commodity disk servers (EC 4+2, \
                 8+2, 16+2; object sizes; one slow disk).",
            ),
            Study::PdcXf => (
                "PDC-XF: regions, asynchronous transfers and consistency",
                "Jean Luca Bez, Houjun Tang, Chen Wang and Suren Byna, \"Data Management in the Continuum: \
                 Cross-facility Object-based Data Transfers\", SBAC-PAD 2025.",
            ),
        }
    }
}

/// What every report says of the published figures it sets beside ours: where they come from
/// (the paper its header names, and the study's section of docs/benchmarks/reproduce.md).
fn published_note(study: Study) -> String {
    format!(
        "The paper's figures beside ours are those this project quotes from it (the paper named above: its \
         headline results and abstract; docs/benchmarks/reproduce.md, section \"{}\", sets each beside the \
         experiment that answers it); its full tables are not in this repository, so where a table's values \
         are missing the report says so and gives our figures with the file system measured in the same run \
         as the reference. Every figure of ours is computed from the JSON results in this directory.",
        study.name()
    )
}

pub fn run(args: ReproduceArgs) -> Result<(), String> {
    let study = args.study;
    // The tools are checked before anything is created or run.
    let tools = match (&args.tools, study) {
        (Some(dir), Study::S3Hpc) => Some(s3_hpc::Tools::check(dir, args.libs3_dir.as_deref())?),
        (Some(_), _) => return Err(format!("--tools is for the s3-hpc study, not {}", study.name())),
        (None, _) => None,
    };
    let out = args.out.unwrap_or_else(|| PathBuf::from(format!("reproduce-{}", study.name())));
    let (data, remove_data) = match args.dir {
        Some(dir) => (dir, false),
        None => (out.join("data"), true),
    };
    // What the study needs (Python modules, free space) before anything runs.
    prerequisites::check(study, args.quick, &data)?;
    let mut runner = Runner::new(out.clone(), data.clone(), args.quick)?;
    let size = if args.quick { "quick" } else { "full" };
    let mut report = report_head(
        study,
        format!(
            "Run: `isthmus bench reproduce {}{}{}` ({size} size) on {}, {} cores, data in {}.",
            study.name(),
            if args.quick { " --quick" } else { "" },
            tools.as_ref().map_or_else(String::new, |t| format!(" --tools {}", t.dir.display())),
            hostname(),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            data.display()
        ),
    );
    let started = Instant::now();
    let result = match study {
        Study::LustreMinio => lustre_minio::run(&mut runner, &mut report),
        Study::CephfsEc => cephfs_ec::run(&mut runner, &mut report),
        Study::S3Hpc => s3_hpc::run(&mut runner, &mut report, tools.as_ref()),
        Study::PdcXf => pdc_xf::run(&mut runner, &mut report),
    };
    if remove_data {
        let _ = std::fs::remove_dir_all(&data);
    }
    result?;
    let _ = std::fs::remove_dir_all(&runner.scratch);
    report.commands = runner.commands;
    let path = out.join("report.md");
    std::fs::write(&path, report.markdown()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!(
        "isthmus bench reproduce {}: report written to {} ({} sections, {:.0} s)",
        study.name(),
        path.display(),
        report.sections.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A study's report before its experiments: its title, the paper, where the published figures
/// come from, and the run (`scale`).
fn report_head(study: Study, scale: String) -> StudyReport {
    let (title, source) = study.header();
    StudyReport {
        title: title.into(),
        source: format!("Paper: {source}"),
        published_note: published_note(study),
        scale,
        ..StudyReport::default()
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string()
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

    use super::*;

    #[test]
    fn reports_cite_the_paper_and_the_reproduce_doc_not_a_missing_file() {
        for &study in Study::value_variants() {
            let text = report_head(study, "Run: test.".into()).markdown();
            assert!(!text.contains("DESIGN.md"), "{}: {text}", study.name());
            assert!(text.contains("Paper: "), "{}", study.name());
            assert!(text.contains(&format!("docs/benchmarks/reproduce.md, section \"{}\"", study.name())));
        }
    }
}
