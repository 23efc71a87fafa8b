//! `sluice-lab`: the demo, the load generators and the benchmarks — everything that runs
//! sluice on test data. Kept out of the production `sluice` binary; it starts that binary
//! (`sluice run`, found beside this one) where it needs the real consumer.
//!
//! Exit codes as `sluice`'s: 0 success; 1 runtime failure; 2 bad configuration or usage.

mod bench;
mod demo;
mod produce;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

pub(crate) use sluice_cli::cmd::{lag, migrate, settings, topics};
pub(crate) use sluice_process::{Failure, runtime};

#[derive(Debug, Parser)]
#[command(
    name = "sluice-lab",
    version,
    about = "sluice on test data: demo, load generators, benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Load generators: the crawler and network-analyzer simulators.
    Produce {
        #[command(subcommand)]
        action: produce::ProduceAction,
    },
    /// Benchmarks: sluice against baselines measured in the same run (not a test).
    // Boxed: the bench has many more options than the other commands (clippy large_enum_variant).
    Bench(Box<bench::BenchArgs>),
    /// The main job on the local stack: produce a crawl, consume it, report.
    Demo(demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli: Cli = match sluice_process::start("sluice-lab") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let result = match cli.command {
        Command::Produce { action } => produce::run(action),
        Command::Demo(args) => demo::run(&args),
        Command::Bench(args) => bench::run(&args),
    };
    sluice_process::finish("sluice-lab", result)
}

/// The production binary, `sluice`, beside this one (cargo builds both into one directory).
pub(crate) fn sluice_exe() -> Result<PathBuf, Failure> {
    let exe = std::env::current_exe()?.with_file_name("sluice");
    if !exe.exists() {
        return Err(Failure::config(anyhow::anyhow!(
            "{} not found: build it beside sluice-lab (cargo build --release --bin sluice)",
            exe.display()
        )));
    }
    Ok(exe)
}
