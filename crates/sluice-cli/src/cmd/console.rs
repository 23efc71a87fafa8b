//! `sluice console`: serve the operator's web page (`sluice_console`) on
//! `SLUICE_CONSOLE_ADDR` until SIGTERM/SIGINT. It reads the same settings as the other
//! commands (the pipelines of `STORAGE_PIPELINES` and the mapping file, the outbox's stale
//! cut-off, the retry tiers of `MAILBOX_TOPIC`/`MAILBOX_GROUP` when set) and talks to no
//! running sluice process. A non-loopback address without `SLUICE_CONSOLE_TOKEN`, a short
//! token or a port in use exit 2 naming the variable.

use super::pipelines::Pipelines;
use clap::Args;
use sluice_console::settings::{ADDR_VAR, TOKEN_VAR};
use sluice_console::{ConsoleError, ConsoleSettings, PipelineSource, RetrySource, Sources};
use sluice_process::{Failure, env_lookup};
use sluice_storage::dead_letter_replay::DEFAULT_MAX_REPLAYS;
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// Options of `sluice console`.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// The mapping file (or folder) of declared sinks; default `SLUICE_SINKS_FILE`.
    #[arg(long = "sinks", value_name = "FILE|DIR")]
    sinks: Option<String>,
    /// Refuse to replay a dead letter already replayed this many times.
    #[arg(long, default_value_t = DEFAULT_MAX_REPLAYS)]
    max_replays: i32,
}

/// The `--help` text of the console's variables.
pub fn settings_help() -> String {
    format!(
        "Settings (environment or .env), besides those of `sluice run` and `sluice dispatch`:\n  \
         {ADDR_VAR:<22} Where to serve the console [default: {}]\n  \
         {TOKEN_VAR:<22} The operator token (at least {} characters); unset: read-only, and \
         only a loopback address is accepted\n",
        sluice_console::settings::DEFAULT_ADDR,
        sluice_console::settings::MIN_TOKEN_LEN,
    )
}

/// Entry point.
pub fn run(args: &ConsoleArgs) -> Result<(), Failure> {
    let settings = ConsoleSettings::parse(
        env_lookup(ADDR_VAR).as_deref(),
        env_lookup(TOKEN_VAR).as_deref(),
    )
    .map_err(Failure::config)?;
    let sources = sources(args)?;
    let (runtime, mut signals) = sluice_process::service_runtime()?;
    runtime.block_on(async {
        let listener = sluice_console::bind(&settings)
            .await
            .map_err(Failure::config)?;
        let stop = CancellationToken::new();
        let task = tokio::spawn(sluice_console::serve(
            listener,
            settings,
            sources,
            stop.clone(),
        ));
        sluice_process::run_until_signal::<(), ConsoleError>("console", &mut signals, stop, task)
            .await
    })
}

/// What the console reads, from the same settings as the other commands.
fn sources(args: &ConsoleArgs) -> Result<Sources, Failure> {
    let pipelines = Pipelines::load(args.sinks.as_deref())?;
    let outbox = super::dispatch::outbox_settings()?;
    let set = |name: &str| env_lookup(name).is_some_and(|v| !v.is_empty());
    let retry = if set("MAILBOX_TOPIC") && set("MAILBOX_GROUP") {
        Some(RetrySource {
            topic: super::retry::main_topic(None)?,
            group: super::retry::main_group(None)?,
            tiers: super::retry::tiers(None)?,
        })
    } else {
        None
    };
    Ok(Sources {
        pipelines: pipelines
            .names()?
            .into_iter()
            .map(|(name, topics, group)| PipelineSource {
                name,
                topics,
                group,
            })
            .collect(),
        kafka: pipelines.settings.kafka.clone(),
        database_url: pipelines.settings.database_url.clone(),
        heartbeat_dir: Some(PathBuf::from(&pipelines.settings.heartbeat_dir)),
        stale_dispatch: outbox.stale_dispatch,
        retry,
        max_replays: args.max_replays,
    })
}
