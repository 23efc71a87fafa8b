//! The commands of the `sluice` binary, as a library: `main.rs` dispatches to them, and
//! `sluice-lab` (demo, load generators, benchmarks) reuses the settings, migrations and lag
//! helpers without being part of the production binary.
//!
//! Exit codes: 0 success; 1 runtime failure (a pipeline died, a step failed); 2 bad
//! configuration or usage (nothing was consumed).

pub mod cmd;
pub mod logging;
pub mod observe;

/// A failure with its exit code.
#[derive(Debug)]
pub struct Failure {
    code: u8,
    error: anyhow::Error,
}

impl Failure {
    /// Bad configuration or usage: exit 2.
    pub fn config(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: 2,
            error: error.into(),
        }
    }

    /// The exit code: 1 or 2.
    pub fn code(&self) -> u8 {
        self.code
    }

    /// The error.
    pub fn error(&self) -> &anyhow::Error {
        &self.error
    }
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(error: E) -> Self {
        Self {
            code: 1,
            error: error.into(),
        }
    }
}

/// The error and its causes, each cause once: our error types already print their source
/// inline, so anyhow's `{:#}` would repeat it.
pub fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
