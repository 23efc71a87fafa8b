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
    let json = is_json(&std::env::var(FORMAT).unwrap_or_default())?;
    let filter = filter(std::env::var(EnvFilter::DEFAULT_ENV).ok().as_deref())?;
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

/// Whether `SLUICE_LOG_FORMAT`'s value asks for JSON: `json` or `text` (any case), empty for
/// text.
fn is_json(format: &str) -> Result<bool, String> {
    match format.trim().to_ascii_lowercase().as_str() {
        "" | "text" => Ok(false),
        "json" => Ok(true),
        _ => Err(format!("{FORMAT}={format:?}: expected json or text")),
    }
}

/// The filter of `RUST_LOG`'s value (unset or blank: the default). Spaces around the
/// directives (`info, sluice=debug`) are dropped: tracing's parser would read them as part of
/// a target's name.
fn filter(directives: Option<&str>) -> Result<EnvFilter, String> {
    let Some(directives) = directives.filter(|d| !d.trim().is_empty()) else {
        return Ok(EnvFilter::new(DEFAULT_FILTER));
    };
    let tidy: Vec<&str> = directives
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    EnvFilter::try_new(tidy.join(","))
        .map_err(|e| format!("{}={directives:?}: {e}", EnvFilter::DEFAULT_ENV))
}

#[cfg(test)]
mod tests {
    use super::{filter, is_json};

    #[test]
    fn the_format_is_json_or_text_in_any_case() {
        assert_eq!(is_json(""), Ok(false));
        assert_eq!(is_json("text"), Ok(false));
        assert_eq!(is_json(" JSON "), Ok(true));
        let error = is_json("xml").unwrap_err();
        assert!(error.contains("SLUICE_LOG_FORMAT=\"xml\""), "{error}");
    }

    #[test]
    fn rust_log_takes_spaces_around_directives_and_refuses_what_does_not_parse() {
        for ok in [
            None,
            Some(""),
            Some("warn"),
            Some("info, sluice=debug"),
            Some("sluice=debug , rdkafka=info "),
            Some("info,sluice_retry=debug"),
        ] {
            assert!(filter(ok).is_ok(), "{ok:?}");
        }
        let error = filter(Some("info,==bad")).unwrap_err();
        assert!(error.starts_with("RUST_LOG=\"info,==bad\""), "{error}");
    }
}
