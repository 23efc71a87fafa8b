//! How long a partial batch waits to fill before its writer gets it.
//!
//! Each transaction costs the same fixed work whatever its size (`BEGIN`, the offsets row,
//! the statements, `COMMIT`, the Kafka commit, a log line): at a moderate rate the reader
//! is caught up after every poll and would hand each writer a few dozen records at a time
//! (measured with `sluice-lab bench`: 39 records per transaction at 5,000 reviews/s, 2.8 ×
//! the CPU per record of a backlog). A pipeline that reads at least [`BUSY_RATE`] records a
//! second therefore lets a partition's partial batch wait up to the linger (`STORAGE_LINGER_MS`)
//! from its first record for more to arrive, and its reader sleeps meanwhile instead of
//! waking for every fetch response (crate::reader); a full batch goes at once. A quiet
//! pipeline (below that rate) never waits: a trickle would gain nothing and its records
//! their latency. A pure state machine (no Kafka, no clock of its own).

use std::time::{Duration, Instant};

/// Records a second from which a pipeline's partial batches linger.
pub const BUSY_RATE: f64 = 1_000.0;

/// The span over which the reading rate is measured.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// The pipeline's reading rate and the linger it allows.
#[derive(Debug, Clone)]
pub struct Linger {
    wait: Duration,
    window_start: Option<Instant>,
    window_records: usize,
    /// Records a second over the last whole window (0 before one ended).
    rate: f64,
}

impl Linger {
    /// Partial batches of a busy pipeline wait up to `wait` (zero: never).
    pub fn new(wait: Duration) -> Self {
        Self {
            wait,
            window_start: None,
            window_records: 0,
            rate: 0.0,
        }
    }

    /// `n` records were read at `now` (called after every poll, also an empty one, so the
    /// window moves on while nothing arrives).
    pub fn read(&mut self, n: usize, now: Instant) {
        self.roll(now);
        self.window_records += n;
    }

    /// Closes the current window once it is [`RATE_WINDOW`] long: its records over its
    /// length are the rate until the next one closes.
    fn roll(&mut self, now: Instant) {
        let Some(start) = self.window_start else {
            self.window_start = Some(now);
            return;
        };
        let span = now.saturating_duration_since(start);
        if span >= RATE_WINDOW {
            self.rate = self.window_records as f64 / span.as_secs_f64();
            self.window_start = Some(now);
            self.window_records = 0;
        }
    }

    /// Whether a partition whose oldest record arrived at `first` may be handed over at `now` as
    /// a partial batch: `Ok` when it may, `Err(due)` while it should wait until `due`. The
    /// rate is the one [`Linger::read`] last closed (it is told of every poll).
    pub fn release(&self, first: Instant, now: Instant) -> Result<(), Instant> {
        if self.wait.is_zero() || self.rate < BUSY_RATE {
            return Ok(());
        }
        let due = first + self.wait;
        if now >= due { Ok(()) } else { Err(due) }
    }
}

#[cfg(test)]
mod tests {
    use super::{BUSY_RATE, Linger};
    use std::time::{Duration, Instant};

    const WAIT: Duration = Duration::from_millis(20);

    /// A linger that has seen `per_second` records a second for two seconds up to `t0`.
    fn reading(per_second: usize, t0: Instant) -> Linger {
        let mut linger = Linger::new(WAIT);
        let start = t0 - Duration::from_secs(2);
        for tick in 0..=200u32 {
            linger.read(per_second / 100, start + Duration::from_millis(10) * tick);
        }
        linger
    }

    #[test]
    fn a_busy_pipeline_holds_a_partial_batch_until_the_linger_from_its_first_record() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let linger = reading(5_000, t0);
        assert!(linger.rate >= BUSY_RATE, "{}", linger.rate);
        let first = t0;
        assert_eq!(linger.release(first, t0), Err(t0 + WAIT));
        assert_eq!(
            linger.release(first, t0 + Duration::from_millis(19)),
            Err(t0 + WAIT)
        );
        assert_eq!(linger.release(first, t0 + WAIT), Ok(()));
    }

    #[test]
    fn a_quiet_pipeline_never_waits() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let linger = reading(500, t0);
        assert!(linger.rate < BUSY_RATE, "{}", linger.rate);
        assert_eq!(linger.release(t0, t0), Ok(()));
    }

    #[test]
    fn before_a_rate_is_known_and_with_no_linger_nothing_waits() {
        let t0 = Instant::now();
        let mut fresh = Linger::new(WAIT);
        fresh.read(10_000, t0);
        assert_eq!(fresh.release(t0, t0), Ok(()), "no whole window yet");
        let mut off = Linger::new(Duration::ZERO);
        let t1 = t0 + Duration::from_secs(10);
        let busy = reading(5_000, t1);
        assert!(busy.release(t1, t1).is_err());
        off.read(10_000, t0);
        off.read(0, t0 + Duration::from_secs(1));
        assert!(off.rate >= BUSY_RATE);
        assert_eq!(off.release(t1, t1), Ok(()), "STORAGE_LINGER_MS=0");
    }

    #[test]
    fn a_burst_that_stops_is_forgotten_after_a_quiet_window() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let mut linger = reading(5_000, t0);
        assert!(linger.release(t0, t0).is_err());
        // Nothing read for two seconds (the reader reports its empty polls).
        for tick in 1..=20u32 {
            linger.read(0, t0 + Duration::from_millis(100) * tick);
        }
        let later = t0 + Duration::from_secs(2);
        assert_eq!(linger.release(later, later), Ok(()));
        assert!(linger.rate < 1.0, "{}", linger.rate);
    }
}
