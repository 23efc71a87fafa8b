//! Logging: `tracing` to stderr, human-readable by default, JSON with `SLUICE_LOG_FORMAT=json`,
//! filtered by `RUST_LOG` (default `info`).

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber.
pub(crate) fn init() {
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
