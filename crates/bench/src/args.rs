//! The command line of `isthmus-bench` (`isthmus bench ...` runs it): the workload and every
//! option, the `reproduce` subcommand, and the `completions` script.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use isthmus_store::Durability;

use crate::units::{parse_duration, parse_size};
use crate::workload::Op;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchWorkload {
    /// Single operations (--ops) with a fixed object size, for a duration
    Ops,
    /// IO500 mdtest-easy: each rank creates, stats, (on POSIX) renames and removes directories,
    /// then creates, stats, reads and deletes empty files, in its own directory
    MdtestEasy,
    /// IO500 mdtest-hard: as mdtest-easy, all ranks in one shared directory, files of 3901 bytes
    MdtestHard,
    /// IO500 ior-easy: a file per rank, 2 MiB transfers, write then read
    IorEasy,
    /// IO500 ior-hard: one shared file, 47008-byte interleaved transfers, write then read
    IorHard,
    /// IOR easy and hard, mdtest easy and hard, and the IO500-style score per target
    Io500,
    /// N parallel streams (--workers) each write then read one object of --size
    Streams,
    /// MD-Workbench: pre-create --datasets x --files objects per rank, then --iterations rounds
    /// of stat, read and delete the oldest, write a new one
    MdWorkbench,
    /// A COSBench workload file (--cosbench FILE.xml); its <storage> endpoint and keys are used
    /// when no --target or --serve is given
    Cosbench,
    /// Compare result files (given after the workload) side by side with "% of POSIX"
    Compare,
    /// VPIC-IO: --workers ranks each write 8 float32 properties of --particles particles per
    /// step for --steps steps, --compute apart; raw files (pwrite) against Zarr arrays
    /// (in-process with embedded:///path, through a gateway's local socket with unix:///socket,
    /// through the gateway with --serve or http://) at strong and session consistency
    VpicIo,
    /// BD-CATS-IO: VPIC-IO's particles written (untimed), then read back property by property
    BdcatsIo,
    /// The EQSIM analysis patterns on a synthetic ground-motion dataset (--eqsim-shape) written
    /// as HDF5 by h5py: h5py (the baseline), h5py with a large chunk cache, Isthmus in-process on
    /// the HDF5 file in place and on Zarr copies, the gateway's selection, zarr-python over S3
    Eqsim,
    /// Parallel streams writing and reading large objects on erasure-coded pools of each
    /// --layouts and --block-sizes, read back with ranged reads of each --read-sizes, beside
    /// raw files in the same run (--size default 128 MiB, --workers streams); in --pool-dir
    Pools,
    /// Every door on the same objects in one run, with each transport's ceiling: stat and
    /// open+read (POSIX), in-process, the local socket beside a bare Unix-socket echo, HTTP
    /// signed and anonymous beside nginx serving the same files (when installed); HEAD and GET
    /// of --size with each --workers count, then one --bulk-size object read and written with one
    /// worker; p50/p99 latencies, a table, --json and --svg
    Doors,
}

/// Measure S3 and embedded targets against the raw POSIX file system in one run
#[derive(Debug, Parser)]
#[command(name = "isthmus-bench", version, args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    /// A published study reproduced by one command (`isthmus bench reproduce --help`), or the
    /// shell completion script
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    /// The workload
    #[arg(value_enum, default_value = "ops")]
    pub workload: BenchWorkload,
    /// compare: the `--json` result files; cosbench: the workload file
    #[arg(value_name = "FILES")]
    pub results: Vec<PathBuf>,
    /// Also write the results as CSV (compare: the compared rows; a run: every result, POSIX
    /// included, with its % of POSIX) [default: none: no CSV]
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// compare: also draw "% of POSIX" as an SVG chart; doors: the latencies per door; pools:
    /// box plots of the seconds per stream of every row; io500: a radar chart of the IO500
    /// phases as % of POSIX per target; md-workbench: the density of the time per operation
    /// per target [default: none: no chart]
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// mdtest: files each rank (worker) creates
    #[arg(long, default_value_t = 1000)]
    pub files: usize,
    /// mdtest: bytes written to each file at create and read back (mdtest -w/-e; the paper ran
    /// -w 3901 -e 3901) [default: the IO500's, 0 for mdtest-easy, 3901 for mdtest-hard]
    #[arg(long, value_parser = parse_size)]
    pub mdtest_bytes: Option<u64>,
    /// mdtest: times every phase runs (mdtest -i); each phase is reported over them (max, min,
    /// mean, standard deviation, mean ms per operation, per node). A flag of its own rather
    /// than --repeat, whose default of 3 is eqsim's, so one mdtest run stays one iteration as
    /// in mdtest; io500 always runs one, as the IO500 does
    #[arg(long, default_value_t = 1)]
    pub mdtest_iterations: usize,
    /// cosbench: the workload file (or give it after `cosbench`) [required for cosbench, here
    /// or after it]
    #[arg(long)]
    pub cosbench: Option<PathBuf>,
    /// md-workbench: datasets per rank
    #[arg(long, default_value_t = 10)]
    pub datasets: usize,
    /// md-workbench: benchmark iterations
    #[arg(long, default_value_t = 100)]
    pub iterations: usize,
    /// ior: transfers per rank (ior-easy: 2 MiB each, ior-hard: 47008 bytes each)
    #[arg(long, default_value_t = 64)]
    pub transfers: usize,
    /// mdtest: stop the create phase after this long (the IO500 stonewall) [default: none:
    /// every file is created]
    #[arg(long, value_parser = parse_duration)]
    pub stonewall: Option<Duration>,
    /// mdtest: skip the directory phases (mkdir, stat, rename on POSIX, rmdir) and time files
    /// only, as mdtest -F does; io500 always runs files only, as the IO500 does
    #[arg(long)]
    pub files_only: bool,
    /// Targets besides the POSIX baseline: http(s)://host:port (keys from AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY), unix:///socket (a gateway's local socket, as this process's Unix
    /// user), embedded:///path (the engine in-process) or posix:///path (raw file operations in
    /// another directory). Repeatable. [default: none: the baseline and --serve's gateway only]
    #[arg(long = "target")]
    pub targets: Vec<String>,
    /// Start an Isthmus gateway on this data root for the run (same durability) and add it as
    /// a target [default: none: no gateway is started]
    #[arg(long)]
    pub serve: Option<PathBuf>,
    /// Operations, comma-separated: put,get,head,delete,list
    #[arg(long, default_value = "put,get,head,delete,list", value_delimiter = ',')]
    pub ops: Vec<Op>,
    /// Object sizes, comma-separated (4KiB,64MiB)
    #[arg(long, default_value = "4KiB", value_delimiter = ',', value_parser = parse_size)]
    pub size: Vec<u64>,
    /// Worker counts, comma-separated
    #[arg(long, default_value = "4", value_delimiter = ',')]
    pub workers: Vec<usize>,
    /// How long each timed workload runs
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Objects populated for get/head/delete [default: as many as fit in 1 GiB, at most 2000]
    #[arg(long)]
    pub objects: Option<usize>,
    /// Objects in the flat prefix that list pages through
    #[arg(long, default_value_t = 100_000)]
    pub list_objects: usize,
    /// Directory for the raw POSIX baseline; put it on the file system under test
    /// [default: DATA/.isthmus/bench-posix, DATA being --serve or ./data]
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// strict: the baseline fsyncs files and directories as the gateway does; relaxed: no fsync
    #[arg(long, default_value = "strict")]
    pub durability: Durability,
    /// Address http(s) targets virtual-host style (bucket.host), as AWS prefers; default is
    /// path style (host/bucket), which every S3 server accepts
    #[arg(long)]
    pub virtual_host: bool,
    /// Region http(s) targets sign requests for
    #[arg(long, env = "AWS_REGION", default_value = "us-east-1")]
    pub region: String,
    /// mdtest, ior, io500, md-workbench: how files become S3 buckets and objects on the S3,
    /// embedded and local-socket targets (the POSIX baseline stays files)
    #[arg(long, value_enum, default_value = "prefix-per-rank")]
    pub s3_mapping: S3MappingArg,
    /// Bucket used on S3 and embedded targets
    #[arg(long, default_value = "isthmus-bench")]
    pub bucket: String,
    /// ops --ops put: on each S3, socket and embedded target, PUT to --bucket and to this bucket
    /// alternately, in slices of --slice (A B B A order), and report each slice's rate: a
    /// paired comparison of two buckets' settings (one with a notification rule) that a noisy
    /// machine's drift affects alike [default: none: one bucket]
    #[arg(long)]
    pub interleave_bucket: Option<String>,
    /// --interleave-bucket: the length of one slice
    #[arg(long, default_value = "250ms", value_parser = parse_duration)]
    pub slice: Duration,
    /// Write the results as JSON to this file [default: none: no JSON]
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Run as this many processes on this host, phases started together by a barrier, one merged
    /// report. Under mpirun or srun, leave it out: rank and size come from the launcher.
    #[arg(long, default_value_t = 1)]
    pub ranks: usize,
    /// vpic-io, bdcats-io: particles per rank
    #[arg(long, default_value_t = 1 << 20)]
    pub particles: u64,
    /// vpic-io, bdcats-io: time steps
    #[arg(long, default_value_t = 5)]
    pub steps: u64,
    /// vpic-io, bdcats-io: how the particle arrays are stored (several: each measured)
    #[arg(long, value_enum, value_delimiter = ',', default_value = "chunks")]
    pub array_layout: Vec<ArrayLayoutArg>,
    /// vpic-io, bdcats-io: emulated computation between two steps
    #[arg(long, default_value = "500ms", value_parser = parse_duration)]
    pub compute: Duration,
    /// Directory all ranks share for barriers and reports; needed under mpirun or srun (put it on
    /// the shared file system) [default: with --ranks, DATA/.isthmus/bench-sync-PID; else none]
    #[arg(long)]
    pub sync_dir: Option<PathBuf>,
    /// eqsim: the dataset's time steps, X and Y extents (time x X x Y x 1 float32)
    #[arg(long, default_value = "4096,256,256", value_delimiter = ',')]
    pub eqsim_shape: Vec<u64>,
    /// eqsim: times each pattern runs on each target (the median is reported)
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// pools: concurrent streams, each one object [default: 64] (--workers other than its
    /// default of 4 also sets it, as before)
    #[arg(long)]
    pub streams: Option<usize>,
    /// pools: where the pools' drives and the raw baseline go (repeat it for several mounts of
    /// one shared file system: an engine each, streams alternate) [default: ./bench-pools]
    #[arg(long)]
    pub pool_dir: Vec<PathBuf>,
    /// pools: erasure layouts, k+m
    #[arg(long, default_value = "4+2,8+2,16+2", value_delimiter = ',')]
    pub layouts: Vec<String>,
    /// pools: erasure block sizes
    #[arg(long, default_value = "1MiB,4MiB,16MiB,64MiB", value_delimiter = ',', value_parser = parse_size)]
    pub block_sizes: Vec<u64>,
    /// pools: sizes of the ranged reads that read each object back
    #[arg(long, default_value = "1MiB,128MiB", value_delimiter = ',', value_parser = parse_size)]
    pub read_sizes: Vec<u64>,
    /// doors: the large object read and written once per door, for bandwidth (0: none)
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub bulk_size: u64,
    /// pools: also time reads on the first layout with one drive this many ms slow, with and
    /// without hedged reads [default: none: no slow-drive run]
    #[arg(long)]
    pub slow_drive_ms: Option<u64>,
    /// pools: the erasure pools' ETags (the pool table's `etag` key): the MD5 of each object,
    /// or a tag unique to each write, which spares the MD5's CPU
    #[arg(long, default_value = "md5", value_parser = ["md5", "unique"])]
    pub etag: String,
    /// pools: also time writes with the file system of the first --pool-dir filled to each of
    /// these levels, in percent (it must be a mount point of its own: a loop-mounted image)
    /// [default: none: no filled runs]
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=99))]
    pub fill_levels: Vec<u32>,
    /// pools: also run the plain pool and the first erasure pool through S3 gateways the bench
    /// starts, one per --pool-dir (each object one PUT and one GET): the native file system
    /// against access through the frontend, CERN's Table 3
    #[arg(long)]
    pub via_gateway: bool,
}

/// How vpic-io's particle arrays are stored (`VpicLayout` of the vpic module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ArrayLayoutArg {
    /// A chunk per rank and step: every region an object of its own
    Chunks,
    /// Uncompressed shards holding many regions (inner chunk = one region), each region
    /// written in place into its shard's file
    Shards,
}

/// The S3 mappings of the S3-for-HPC study (`crate::mapping::S3Mapping`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum S3MappingArg {
    /// One bucket for the run, one object per file named by its path, each rank's files under
    /// its rank's prefix (what the bench always did; IOR's libs3 default)
    PrefixPerRank,
    /// One bucket per dataset (a directory: ior-easy, mdtest-easy/rankN, mdtest-hard, an
    /// MD-Workbench dataset), its files objects in it
    BucketPerDataset,
    /// One bucket per file, as IOR's libs3 bucket-per-file: create makes the bucket, stat is
    /// HeadBucket, remove deletes it; IOR transfers are objects named by offset
    BucketPerFile,
}

impl From<S3MappingArg> for crate::mapping::S3Mapping {
    fn from(arg: S3MappingArg) -> Self {
        match arg {
            S3MappingArg::PrefixPerRank => Self::PrefixPerRank,
            S3MappingArg::BucketPerDataset => Self::BucketPerDataset,
            S3MappingArg::BucketPerFile => Self::BucketPerFile,
        }
    }
}

/// The subcommands beside the workloads: `isthmus bench reproduce <study>`, the experiments of a
/// published study with the paper's figures beside ours in a report; and `completions`.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Reproduce a published study: run its experiments and write a report (Markdown tables and
    /// SVG figures) with the paper's numbers beside ours and a sentence on each difference
    Reproduce(crate::reproduce::ReproduceArgs),
    /// Print a shell completion script for isthmus-bench (bash, zsh, fish, elvish, powershell)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The environment variable through which `--ranks` hands the gateway it started to its ranks:
/// "ENDPOINT ACCESS_KEY SECRET_KEY".
pub(crate) const SHARED_GATEWAY_VAR: &str = "ISTHMUS_BENCH_GATEWAY";

#[cfg(test)]
mod reproduce_tests {
    use clap::Parser;

    use super::{BenchArgs, BenchCommand, BenchWorkload};
    use crate::reproduce::Study;

    fn parse(words: &[&str]) -> Result<BenchArgs, clap::Error> {
        BenchArgs::try_parse_from(words)
    }

    #[test]
    fn reproduce_is_a_subcommand_beside_the_workloads() {
        let args = parse(&["bench", "reproduce", "s3-hpc", "--quick"]).expect("parses");
        let Some(BenchCommand::Reproduce(study)) = args.command else { panic!("not the reproduce subcommand") };
        assert_eq!(study.study, Study::S3Hpc);
        assert!(study.quick);
        let workload = parse(&["bench", "io500", "--workers", "2"]).expect("parses");
        assert!(workload.command.is_none());
        assert_eq!(workload.workload, BenchWorkload::Io500);
        let unknown = parse(&["bench", "reproduce", "nonsense"]).expect_err("refused");
        assert!(unknown.to_string().contains("lustre-minio"), "{unknown}");
    }
}
