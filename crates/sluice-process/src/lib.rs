//! The process shell that sluice's binaries share (`sluice`, `sluice-lab`, the
//! `sluice-mailbox` example): a `.env` file, the arguments and logging ([`start`]), the exit
//! code of a [`Failure`] ([`finish`]), the process environment, the runtimes and the stop
//! signals of a long-running command, and the HTTP endpoint for metrics and health
//! ([`endpoint`]).
//!
//! It holds no command of its own, so an application built on sluice's libraries (the
//! mailbox example) starts and stops like `sluice` without depending on the production
//! binary's crate.
//!
//! Exit codes: 0 success; 1 runtime failure (a pipeline died, a step failed); 2 bad
//! configuration or usage (nothing was consumed).

mod build_info;
pub mod endpoint;
mod env_file;
mod environment;
mod failure;
mod kafka;
mod logging;
mod runtime;
mod signals;
mod start;

pub use build_info::register_build_info;
pub use env_file::EnvFileError;
pub use environment::{env_lookup, env_names};
pub use failure::{Failure, describe};
pub use kafka::{check_kafka, kafka_settings};
pub use runtime::{runtime, service_runtime};
pub use signals::{StopSignals, run_until_signal, stopping};
pub use start::{finish, start};
