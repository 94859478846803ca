//! Isthmus benchmarks: workloads (what is done) and targets (what it is done to) are separate
//! pieces, so every figure for S3 or the embedded engine has its raw POSIX baseline from the
//! same run. `report` turns results into a table with ratios, and JSON. The `isthmus-bench`
//! binary (src/main.rs; `isthmus bench ...` runs it) reads its command line (`args`), runs a
//! workload (`run`; the studies with their own runs: `doors`, `pools`, `vpic`, `eqsim`) or
//! reproduces a published study (`reproduce`), starting gateways as processes of the `isthmus`
//! binary (`gateway`).

pub mod args;
pub mod bars;
pub mod boxplot;
pub mod compare;
pub mod cosbench;
pub mod density;
pub mod doors;
pub mod engine;
pub mod eqsim;
pub mod find;
pub mod gateway;
#[cfg(test)]
mod help_check;
pub mod interleave;
pub mod io500;
pub mod ior;
pub mod latency;
pub mod mapping;
pub mod mdtest;
pub mod mdworkbench;
pub mod merge;
pub mod pdc_migration;
pub mod phase_stats;
pub mod pools;
pub mod progress;
pub mod radar;
mod ranks;
pub mod report;
pub mod reproduce;
pub mod run;
pub mod streams;
pub mod target;
pub mod target_engine;
pub mod target_s3;
pub mod team;
pub mod units;
pub mod vpic;
pub mod workload;

pub use io500::{Io500Score, io500_scores};
pub use ior::{Ior, IorVariant};
pub use mdtest::{Mdtest, Variant};
pub use mdworkbench::MdWorkbench;
pub use report::{Report, ratio_to_posix};
pub use streams::{StreamsResult, run_streams, run_streams_synced};
pub use target::{BenchError, BenchResult, Connection, PosixTarget, Target};
pub use target_engine::{EmbeddedTarget, LocalSocketTarget};
pub use target_s3::S3Target;
pub use team::Team;
pub use workload::{Op, OpResult, Workload};
