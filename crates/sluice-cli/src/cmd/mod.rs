//! One module per subcommand.

mod dead_letters;
pub mod dispatch;
pub mod dlq;
pub mod dlt;
pub mod health;
pub mod lag;
pub mod migrate;
pub mod outbox;
pub mod pipelines;
pub mod replay;
pub mod retry;
pub mod run;
pub mod sinks;
pub mod topics;
pub mod verify;
pub mod version;

use crate::Failure;
use sluice_core::{KafkaClientSettings, Settings};

/// The settings from the process environment; a bad value is a configuration failure
/// (exit 2) naming the variable.
pub fn settings() -> Result<Settings, Failure> {
    let names = env_names();
    let settings = Settings::from_vars(&env_lookup, names.iter().map(String::as_str))
        .map_err(Failure::config)?;
    check_kafka(&settings.kafka)?;
    Ok(settings)
}

/// The Kafka client settings alone (`KAFKA_BOOTSTRAP_SERVERS`, `KAFKA_*`), checked.
pub fn kafka_settings() -> Result<KafkaClientSettings, Failure> {
    let names = env_names();
    let kafka = KafkaClientSettings::from_vars(&env_lookup, names.iter().map(String::as_str))
        .map_err(Failure::config)?;
    check_kafka(&kafka)?;
    Ok(kafka)
}

/// librdkafka accepts every `KAFKA_*` property, or exit 2 naming the variable.
pub fn check_kafka(kafka: &KafkaClientSettings) -> Result<(), Failure> {
    sluice_kafka::config::check_properties(kafka).map_err(Failure::config)
}

/// The names of the process environment's variables (to find the `KAFKA_*` properties).
pub fn env_names() -> Vec<String> {
    std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .collect()
}

/// The process environment; `HOSTNAME`, which shells set without exporting, falls back to
/// the kernel's host name (the default static group member id).
pub fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok().or_else(|| {
        (name == "HOSTNAME")
            .then(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .flatten()
            .map(|h| h.trim().to_owned())
    })
}

/// A single-threaded runtime for the commands that do I/O on the main thread.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The runtime of a long-running command (two worker threads) and its stop signals,
/// installed before any start-up work (see [`StopSignals`]).
pub fn service_runtime() -> Result<(tokio::runtime::Runtime, StopSignals), Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let signals = {
        let _context = runtime.enter();
        StopSignals::install()?
    };
    Ok((runtime, signals))
}

/// Runs `task` until it ends or SIGTERM/SIGINT arrives; on a signal, cancels `stop` and waits
/// for the task to finish its work in flight. `what` names the task in logs and errors.
pub async fn run_until_signal<T, E>(
    what: &str,
    signals: &mut StopSignals,
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<Result<T, E>>,
) -> Result<T, Failure>
where
    E: Into<anyhow::Error>,
{
    let mut task = task;
    let finished = tokio::select! {
        signal = signals.recv() => {
            tracing::info!("{signal}: {what} finishes the work in flight");
            None
        }
        result = &mut task => Some(result),
    };
    stop.cancel();
    let result = match finished {
        Some(result) => result,
        None => task.await,
    };
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(Failure::from(error.into())),
        Err(join) => Err(anyhow::anyhow!("the {what} task failed: {join}").into()),
    }
}

/// SIGTERM and SIGINT, listened to from the moment a long-running command has a runtime.
///
/// As PID 1 in a container a signal without a handler is ignored, and tokio drops a signal
/// that arrives while no stream listens; so each command installs these once, before its
/// start-up work (migrations, connecting, checking tables), and keeps them to the end: a
/// stop requested during start-up is seen as soon as the command looks.
pub struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl std::fmt::Debug for StopSignals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopSignals")
    }
}

impl StopSignals {
    /// Installs the handlers; needs the runtime's context (`Runtime::enter` or inside it).
    pub fn install() -> std::io::Result<StopSignals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(StopSignals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Waits for the next SIGTERM or SIGINT (one received since the last call counts);
    /// returns its name.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}
