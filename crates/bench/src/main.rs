//! The `isthmus-bench` binary (`isthmus bench ...` runs it with the same arguments): the
//! workloads against the raw POSIX file system and each target in one run, and the published
//! studies reproduced. The gateways it starts are processes of the `isthmus` binary.

use clap::{CommandFactory, Parser};
use isthmus_bench::args::{BenchArgs, BenchCommand};
use tracing_subscriber::EnvFilter;

fn main() {
    let args = BenchArgs::parse();
    // ISTHMUS_LOG (a tracing filter) wins; otherwise warnings only, as `isthmus` logs for its
    // in-process commands.
    let filter = std::env::var("ISTHMUS_LOG").unwrap_or_else(|_| "warn".into());
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match args.command {
        Some(BenchCommand::Reproduce(study)) => isthmus_bench::reproduce::run(study),
        Some(BenchCommand::Completions { shell }) => {
            clap_complete::generate(shell, &mut BenchArgs::command(), "isthmus-bench", &mut std::io::stdout());
            Ok(())
        }
        None => isthmus_bench::run::run(args),
    };
    if let Err(message) = result {
        eprintln!("isthmus: error: {message}");
        std::process::exit(1);
    }
}
