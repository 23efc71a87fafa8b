//! One module per subcommand.

pub mod bench;
pub mod demo;
pub mod dispatch;
pub mod dlq;
pub mod health;
pub mod lag;
pub mod mailbox;
pub mod migrate;
pub mod outbox;
pub mod produce;
pub mod replay;
pub mod run;
pub mod topics;
pub mod verify;

use crate::Failure;
use sluice_core::Settings;

/// The settings from the process environment; a bad value is a configuration failure
/// (exit 2) naming the variable.
pub fn settings() -> Result<Settings, Failure> {
    Settings::from_lookup(&|name| std::env::var(name).ok()).map_err(Failure::config)
}

/// A single-threaded runtime for the commands that do I/O on the main thread.
pub fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}
