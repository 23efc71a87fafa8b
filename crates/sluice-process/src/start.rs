//! The start and the end of every sluice binary's `main`.

use crate::{Failure, describe, env_file, logging};
use std::process::ExitCode;

/// The start of every sluice binary: a `.env` file in the working directory fills in the
/// variables the process environment does not set (the environment wins; read before the
/// arguments, whose defaults read variables), then the arguments, then logging. An
/// unreadable `.env`, or a `SLUICE_LOG_FORMAT` or `RUST_LOG` logging cannot use, is exit 2
/// naming `program`.
pub fn start<C: clap::Parser>(program: &str) -> Result<C, ExitCode> {
    quiet_broken_pipe();
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

/// The exit code of a process that SIGPIPE ended (128 + 13), as a shell reports it.
const BROKEN_PIPE_EXIT: i32 = 141;

/// A standard output closed by its reader (`sluice dlq list | head -1`) ends the process as
/// SIGPIPE would end a C program — exit 141, nothing more printed — instead of a panic and
/// its backtrace (Rust ignores SIGPIPE, so the write fails and `println!` panics).
fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if is_broken_stdout(message) {
            std::process::exit(BROKEN_PIPE_EXIT);
        }
        default(info);
    }));
}

/// Whether a panic's message is `println!`'s on a standard output nobody reads any more.
fn is_broken_stdout(message: &str) -> bool {
    message.starts_with("failed printing to stdout") && message.contains("Broken pipe")
}

#[cfg(test)]
mod tests {
    use super::is_broken_stdout;

    #[test]
    fn only_a_broken_standard_output_is_quiet() {
        assert!(is_broken_stdout(
            "failed printing to stdout: Broken pipe (os error 32)"
        ));
        assert!(!is_broken_stdout(
            "failed printing to stdout: No space left on device (os error 28)"
        ));
        assert!(!is_broken_stdout("index out of bounds: Broken pipe"));
    }
}
