//! One module per subcommand.

pub mod capture;
pub mod console;
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
mod sample;
pub mod sinks;
pub mod topics;
pub mod verify;
pub mod version;

use sluice_process::{Failure, check_kafka, env_lookup, env_names};
use sluice_storage::StorageSettings;

/// The settings from the process environment; a bad value is a configuration failure
/// (exit 2) naming the variable.
pub fn settings() -> Result<StorageSettings, Failure> {
    let names = env_names();
    let settings = StorageSettings::from_vars(&env_lookup, names.iter().map(String::as_str))
        .map_err(Failure::config)?;
    check_kafka(&settings.kafka)?;
    Ok(settings)
}
