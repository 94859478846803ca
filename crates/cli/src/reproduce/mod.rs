//! `isthmus bench reproduce <study>`: the experiments of a published study, run by one command
//! at a quick or a full size, and a report (Markdown tables and SVG figures) with the paper's
//! figures beside ours and a sentence on each difference.

use std::path::PathBuf;

use clap::Args;

/// The studies Isthmus starts from (see DESIGN.md, "Why it exists").
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Study {
    /// MinIO as an S3 gateway on Lustre against Ceph RGW and JuiceFS: COSBench, mdtest, cost
    LustreMinio,
    /// Gadban and Kunkel, the S3 API for HPC workloads: IO500 and MD-Workbench over S3,
    /// in-process (S3Embedded) and a local gateway (S3Remote)
    S3Hpc,
    /// CERN's erasure-coded layouts: EC 4+2, 8+2, 16+2, block sizes, a slow drive
    CephfsEc,
    /// PDC-XF: regions of arrays, asynchronous transfers, session against strong consistency,
    /// cross-facility migration, the EQSIM analysis patterns
    PdcXf,
}

#[derive(Debug, Args)]
pub struct ReproduceArgs {
    /// The study
    #[arg(value_enum)]
    pub study: Study,
    /// The quick size (under 10 minutes on 2 cores); without it, the full size the README gives
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
}

pub fn run(args: ReproduceArgs) -> Result<(), String> {
    Err(format!("{:?}: not reproduced yet", args.study))
}
