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

/// The reader thread's progress, as seen by the writer that owns the heartbeat: the file is
/// only touched while both halves of the pipeline make progress, and not while the reader
/// sees a consumer error repeating (a stalled topic is not healthy).
#[derive(Debug, Clone)]
pub struct ReaderLiveness(
    std::sync::Arc<std::sync::atomic::AtomicU64>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
);

/// A reader that blocks longer than this (outside of waiting for the writer) is stuck.
pub const READER_STALL: Duration = Duration::from_secs(30);

const WAITING_FOR_WRITER: u64 = u64::MAX;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX - 1))
}

impl Default for ReaderLiveness {
    fn default() -> Self {
        Self(
            std::sync::Arc::new(std::sync::atomic::AtomicU64::new(now_ms())),
            std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        )
    }
}

impl ReaderLiveness {
    /// The reader turned its loop.
    pub fn turn(&self) {
        self.0.store(now_ms(), std::sync::atomic::Ordering::Relaxed);
    }

    /// The reader is blocked handing a batch to the (busy) writer: that is the writer's
    /// time, not a stuck reader.
    pub fn waiting_for_writer(&self) {
        self.0
            .store(WAITING_FOR_WRITER, std::sync::atomic::Ordering::Relaxed);
    }

    /// The reader sees a consumer error repeating (`true`) or not (`false`).
    pub fn set_failing(&self, failing: bool) {
        self.1.store(failing, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the reader turned its loop within `within` (or waits for the writer), and
    /// no consumer error is repeating.
    pub fn is_alive(&self, within: Duration) -> bool {
        if self.1.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        let last = self.0.load(std::sync::atomic::Ordering::Relaxed);
        last == WAITING_FOR_WRITER
            || now_ms().saturating_sub(last)
                <= u64::try_from(within.as_millis()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_is_alive_while_turning_or_waiting_for_the_writer() {
        let liveness = ReaderLiveness::default();
        assert!(liveness.is_alive(Duration::from_secs(1)));
        liveness
            .0
            .store(now_ms() - 5_000, std::sync::atomic::Ordering::Relaxed);
        assert!(!liveness.is_alive(Duration::from_secs(1)), "stale");
        liveness.waiting_for_writer();
        assert!(liveness.is_alive(Duration::from_secs(1)));
        liveness.turn();
        assert!(liveness.is_alive(Duration::from_secs(1)));
        liveness.set_failing(true);
        assert!(
            !liveness.is_alive(Duration::from_secs(1)),
            "a stalling topic"
        );
        liveness.set_failing(false);
        assert!(liveness.is_alive(Duration::from_secs(1)));
    }

    #[test]
    fn heartbeat_writes_at_most_once_per_interval() {
        let dir = std::env::temp_dir().join(format!("sluice-hb-test-{}", std::process::id()));
        let mut heartbeat = Heartbeat::new(&dir, "reviews");
        heartbeat.beat();
        let first = std::fs::metadata(path(&dir, "reviews"))
            .and_then(|m| m.modified())
            .unwrap();
        heartbeat.beat();
        let second = std::fs::metadata(path(&dir, "reviews"))
            .and_then(|m| m.modified())
            .unwrap();
        assert_eq!(first, second, "rate-limited");
        assert!(age(&dir, "reviews").is_some_and(|a| a < Duration::from_secs(5)));
        assert_eq!(age(&dir, "missing"), None);
        let _ = std::fs::remove_dir_all(dir);
    }
}
