//! The start and the end of every sluice binary's `main`.

use crate::{Failure, describe, env_file, logging};
use std::process::ExitCode;

/// The start of every sluice binary: a `.env` file in the working directory fills in the
/// variables the process environment does not set (the environment wins; read before the
/// arguments, whose defaults read variables), then the arguments, then logging. An
/// unreadable `.env`, or a `SLUICE_LOG_FORMAT` or `RUST_LOG` logging cannot use, is exit 2
/// naming `program`.
pub fn start<C: clap::Parser>(program: &str) -> Result<C, ExitCode> {
    let env_file = env_file::load();
    let cli = C::parse();
    if let Err(error) = logging::init() {
        eprintln!("{program}: error: {error}");
        return Err(ExitCode::from(2));
    }
    match env_file {
        Ok(Some(path)) => {
            tracing::info!(path = %path.display(), "settings read from a .env file (the environment's own win)")
        }
        Ok(None) => {}
        Err(error) => {
            eprintln!("{program}: error: {error}");
            return Err(ExitCode::from(2));
        }
    }
    Ok(cli)
}

/// The end of every sluice binary: exit 0, or print `<program>: error: …` to stderr and exit
/// with the failure's code.
pub fn finish(program: &str, result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("{program}: error: {}", describe(failure.error()));
            ExitCode::from(failure.code())
        }
    }
}
