//! Logging: `tracing` to stderr, human-readable by default, JSON with `SLUICE_LOG_FORMAT=json`,
//! filtered by `RUST_LOG` (default `info`).

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber.
pub fn init() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,rdkafka=warn,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::env::var("SLUICE_LOG_FORMAT").is_ok_and(|v| v == "json") {
        builder.json().flatten_event(true).init();
    } else {
        builder
            .with_target(false)
            .with_ansi(std::io::stderr().is_terminal())
            .init();
    }
}

/// The start of every sluice binary: a `.env` file in the working directory fills in the
/// variables the process environment does not set (the environment wins; read before the
/// arguments, whose defaults read variables), then the arguments, then logging. An
/// unreadable `.env` is exit 2 naming `program`.
pub fn start<C: clap::Parser>(program: &str) -> Result<C, std::process::ExitCode> {
    let dotenv = dotenvy::dotenv();
    let cli = C::parse();
    init();
    match dotenv {
        Ok(path) => tracing::debug!(path = %path.display(), "loaded .env"),
        Err(error) if error.not_found() => {}
        Err(error) => {
            eprintln!("{program}: error: .env: {error}");
            return Err(std::process::ExitCode::from(2));
        }
    }
    Ok(cli)
}
