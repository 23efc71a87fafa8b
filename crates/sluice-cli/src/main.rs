//! `sluice`: move events between PostgreSQL and Apache Kafka without losing or duplicating
//! anything.
//!
//! Exit codes: 0 success; 1 runtime failure (a pipeline died, a step failed); 2 bad
//! configuration or usage (nothing was consumed).

use clap::{Parser, Subcommand};
use sluice_cli::cmd;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
    about = "Kafka ⇄ PostgreSQL without loss or duplicates"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Apply sluice's numbered SQL migrations (serialised by an advisory lock): its own
    /// tables, and with --seeds the seed system's.
    Migrate(cmd::migrate::MigrateArgs),
    /// Manage the storage topics.
    Topics {
        #[command(subcommand)]
        action: cmd::topics::TopicsAction,
    },
    /// Run the storage consumer: migrations, then one pipeline per topic.
    #[command(after_long_help = cmd::run::settings_help())]
    Run(cmd::run::RunArgs),
    /// Exit 0 only if every expected pipeline's heartbeat is fresh.
    Health(cmd::health::HealthArgs),
    /// Check a deployment step by step; exits non-zero naming the first failing step.
    Verify(cmd::verify::VerifyArgs),
    /// Committed offset, end offset and lag per group, topic and partition.
    Lag(cmd::lag::LagArgs),
    /// Move one pipeline's group offsets (dry run without --execute).
    Replay(cmd::replay::ReplayArgs),
    /// Inspect and replay dead letters.
    Dlq {
        #[command(subcommand)]
        action: cmd::dlq::DlqAction,
    },
    /// Retry topics of a business consumer: records waiting per tier.
    Retry {
        #[command(subcommand)]
        action: cmd::retry::RetryAction,
    },
    /// Inspect and replay the dead-letter topic `<topic>.dlt` of the retry tiers.
    Dlt {
        #[command(subcommand)]
        action: cmd::dlt::DltAction,
    },
    /// Declared sinks: check a mapping file against the schema, print the plan.
    Sinks {
        #[command(subcommand)]
        action: cmd::sinks::SinksAction,
    },
    /// Run the outbox dispatcher: publish committed outbox events until SIGTERM/SIGINT.
    #[command(after_long_help = cmd::dispatch::settings_help())]
    Dispatch,
    /// Capture a publication's changes into Kafka as Debezium-compatible change events
    /// (logical replication, no JVM) until SIGTERM/SIGINT.
    #[command(after_long_help = cmd::capture::settings_help())]
    Capture {
        #[command(subcommand)]
        action: Option<cmd::capture::CaptureAction>,
    },
    /// Inspect the outbox; release PREQUEUED events; re-open FAILURE events.
    Outbox {
        #[command(subcommand)]
        action: cmd::outbox::OutboxAction,
    },
    /// Serve the operator's web page: pipelines and lag, dead letters, the outbox.
    #[command(after_long_help = cmd::console::settings_help())]
    Console(cmd::console::ConsoleArgs),
    /// sluice's version, librdkafka's version and its built-in features.
    Version,
}

fn main() -> ExitCode {
    let cli: Cli = match sluice_process::start("sluice") {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let result = match cli.command {
        Command::Migrate(args) => cmd::migrate::run(&args),
        Command::Topics { action } => cmd::topics::run(action),
        Command::Run(args) => cmd::run::run(&args),
        Command::Health(args) => cmd::health::run(&args),
        Command::Verify(args) => cmd::verify::run(&args),
        Command::Lag(args) => cmd::lag::run(&args),
        Command::Replay(args) => cmd::replay::run(&args),
        Command::Dlq { action } => cmd::dlq::run(action),
        Command::Retry { action } => cmd::retry::run(action),
        Command::Dlt { action } => cmd::dlt::run(action),
        Command::Sinks { action } => cmd::sinks::run(action),
        Command::Dispatch => cmd::dispatch::run(),
        Command::Capture { action } => cmd::capture::run(action),
        Command::Outbox { action } => cmd::outbox::run(action),
        Command::Console(args) => cmd::console::run(&args),
        Command::Version => cmd::version::run(),
    };
    sluice_process::finish("sluice", result)
}
