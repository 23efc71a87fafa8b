//! Logging: `tracing` to stderr, human-readable by default (`SLUICE_LOG_FORMAT` unset, empty or
//! `text`), JSON with `SLUICE_LOG_FORMAT=json`, filtered by `RUST_LOG` (default `info`).

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// `SLUICE_LOG_FORMAT`.
const FORMAT: &str = "SLUICE_LOG_FORMAT";

/// The default filter when `RUST_LOG` is unset or empty.
const DEFAULT_FILTER: &str = "info,rdkafka=warn,sqlx=warn";

/// Installs the global subscriber; a `SLUICE_LOG_FORMAT` or `RUST_LOG` it cannot use is an
/// error naming the variable (the caller exits 2), never a silent fallback.
pub(crate) fn init() -> Result<(), String> {
    let json = match std::env::var(FORMAT).unwrap_or_default().trim() {
        "" | "text" => false,
        "json" => true,
        other => return Err(format!("{FORMAT}={other:?}: expected json or text")),
    };
    let filter = match std::env::var(EnvFilter::DEFAULT_ENV) {
        Ok(directives) if !directives.trim().is_empty() => EnvFilter::try_new(&directives)
            .map_err(|e| format!("{}={directives:?}: {e}", EnvFilter::DEFAULT_ENV))?,
        _ => EnvFilter::new(DEFAULT_FILTER),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().flatten_event(true).init();
    } else {
        builder
            .with_target(false)
            .with_ansi(std::io::stderr().is_terminal())
            .init();
    }
    Ok(())
}
