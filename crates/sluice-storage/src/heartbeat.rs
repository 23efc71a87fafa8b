//! Health without an HTTP server (SPEC S6): each pipeline touches its own file on every
//! loop turn, at most about once a second. A write error warns once and never stops
//! ingestion; `sluice health` reads the files' modification times.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The minimum time between two writes.
pub const INTERVAL: Duration = Duration::from_secs(1);

/// The heartbeat file of one pipeline.
pub fn path(dir: &Path, pipeline: &str) -> PathBuf {
    dir.join(format!("{pipeline}.heartbeat"))
}

/// A rate-limited heartbeat writer.
#[derive(Debug)]
pub struct Heartbeat {
    path: PathBuf,
    last: Option<Instant>,
    warned: bool,
}

impl Heartbeat {
    /// A heartbeat for `pipeline` in `dir` (created on first beat).
    pub fn new(dir: &Path, pipeline: &str) -> Self {
        Self {
            path: path(dir, pipeline),
            last: None,
            warned: false,
        }
    }

    /// Touches the file unless it was touched less than [`INTERVAL`] ago.
    pub fn beat(&mut self) {
        if self.last.is_some_and(|t| t.elapsed() < INTERVAL) {
            return;
        }
        self.last = Some(Instant::now());
        let result = self
            .path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&self.path, format!("{:?}\n", SystemTime::now())));
        if let Err(error) = result {
            if !self.warned {
                self.warned = true;
                tracing::warn!(path = %self.path.display(), %error,
                    "cannot write the heartbeat file; ingestion continues, health checks will fail");
            }
        } else {
            self.warned = false;
        }
    }
}

/// How old a heartbeat file is, or `None` if it is missing.
pub fn age(dir: &Path, pipeline: &str) -> Option<Duration> {
    let modified = std::fs::metadata(path(dir, pipeline))
        .and_then(|m| m.modified())
        .ok()?;
    Some(
        SystemTime::now()
            .duration_since(modified)
            .unwrap_or(Duration::ZERO),
    )
}
