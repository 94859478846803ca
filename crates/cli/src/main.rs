//! The `isthmus` command: `serve` runs the S3 gateway over a directory, `bench` measures it
//! against the raw file system (the `isthmus-bench` binary, run in place of this one).

mod admin;
mod admin_client;
mod array;
mod config;
mod config_check;
mod config_reference;
mod copy;
mod cost;
mod exec_bench;
#[cfg(test)]
mod help_check;
mod notify;
mod pool;
mod region;
mod serve;
mod serve_status;

use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(name = "isthmus", version, about = "One copy of scientific data, reachable as POSIX files and as S3 objects")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve a directory over S3 (every top-level directory is a bucket)
    Serve(config::ServeArgs),
    /// Measure S3 and embedded targets against the raw POSIX file system in one run (runs the
    /// isthmus-bench binary with these arguments: `isthmus bench --help`)
    #[command(disable_help_flag = true)]
    Bench {
        /// The benchmark's arguments, given to isthmus-bench as they are
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Compare the cost of cloud and on-premises storage over time
    Cost(cost::CostArgs),
    /// Move a region of a Zarr array to or from another site's S3 endpoint
    Region(region::RegionArgs),
    /// HDF5 files as arrays: list their datasets, convert them to Zarr v3
    Array(array::ArrayArgs),
    /// Scan an erasure-coded pool and repair every missing or rotten shard (rebuilds a
    /// replaced drive)
    Heal(pool::HealArgs),
    /// Pool administration: status of an erasure-coded pool's drives
    Pool(pool::PoolArgs),
    /// Site administration of a running gateway (users, buckets, status) and quota usage
    Admin(admin::AdminArgs),
    /// Copy an object between two S3 endpoints, server-side (an Isthmus gateway moves the bytes)
    Copy(copy::CopyArgs),
    /// Configuration files: check one
    Config(config_check::ConfigArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The engine over a data root (with its pools), as every in-process command uses it, with
/// `bucket` made if it is not there yet.
pub(crate) fn open_engine(
    root: &std::path::Path,
    bucket: &str,
) -> Result<std::sync::Arc<dyn isthmus_store::Store>, String> {
    let store = isthmus_session::stack::open_root(root, isthmus_posix::StoreOptions::default())
        .map_err(|e| format!("cannot open {}: {e}", root.display()))?;
    match store.create_bucket(&isthmus_store::RequestContext::process(), bucket, &Default::default()) {
        Ok(()) => Ok(store),
        Err(e) if e.s3_code().starts_with("BucketAlready") => Ok(store),
        Err(e) => Err(format!("bucket {bucket}: {e}")),
    }
}

fn init_logging(level: &str, format: config::LogFormat) {
    // ISTHMUS_LOG (a tracing filter) wins; otherwise our crates log at `level`, libraries at
    // warn. The protocol layer logs every error answer at ERROR, client mistakes included: the
    // door logs them itself (refusals at INFO, server errors at WARN, internal ones at ERROR).
    let filter = std::env::var("ISTHMUS_LOG").unwrap_or_else(|_| {
        format!("warn,s3s::ops=off,isthmus={level},isthmus_s3={level},isthmus_store={level},isthmus_access={level}")
    });
    let builder = tracing_subscriber::fmt().with_env_filter(EnvFilter::new(filter)).with_writer(std::io::stderr);
    match format {
        config::LogFormat::Json => builder.json().with_current_span(true).init(),
        config::LogFormat::Text => builder.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init(),
    }
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => {
            let env = (std::env::var("ISTHMUS_ROOT_ACCESS_KEY").ok(), std::env::var("ISTHMUS_ROOT_SECRET_KEY").ok());
            config::ServeSettings::resolve(args, env).and_then(|settings| {
                init_logging(&settings.log_level, settings.log_format);
                serve::run(settings)
            })
        }
        Command::Bench { args } => exec_bench::run(args),
        Command::Cost(args) => cost::run(args),
        Command::Region(args) => {
            init_logging("warn", config::LogFormat::Text);
            region::run(args)
        }
        Command::Array(args) => {
            init_logging("warn", config::LogFormat::Text);
            array::run(args)
        }
        Command::Heal(args) => {
            init_logging("warn", config::LogFormat::Text);
            pool::heal(args)
        }
        Command::Pool(args) => {
            init_logging("warn", config::LogFormat::Text);
            pool::run(args)
        }
        Command::Config(args) => {
            init_logging("warn", config::LogFormat::Text);
            config_check::run(args)
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut <Cli as clap::CommandFactory>::command(),
                "isthmus",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        Command::Copy(args) => {
            init_logging("warn", config::LogFormat::Text);
            copy::run(args)
        }
        Command::Admin(args) => {
            init_logging("warn", config::LogFormat::Text);
            admin::run(args)
        }
    };
    if let Err(message) = result {
        eprintln!("isthmus: error: {message}");
        std::process::exit(1);
    }
}
