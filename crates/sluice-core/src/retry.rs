//! Retry policy for transient errors, as plain data (docs/ARCHITECTURE.md#errors).
//!
//! A transient failure (the database restarting, a lost connection) retries the *same*
//! batch after 1 s, 2 s, 4 s, 8 s and 16 s, with a fresh connection before each attempt.
//! When the delays run out the error is fatal: the process exits and the next start
//! resumes from the last committed offset, so nothing is lost either way.

use std::time::Duration;

/// Exponential back-off: `base, 2·base, 4·base, …` for `max_attempts` retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// How many retries follow the first failure.
    pub max_attempts: u32,
    /// The first delay; each following one doubles.
    pub base: Duration,
}

impl Backoff {
    /// The default: 5 retries from 1 s (1, 2, 4, 8, 16 s; 31 s in all).
    pub const DEFAULT: Backoff = Backoff {
        max_attempts: 5,
        base: Duration::from_secs(1),
    };

    /// The delays to sleep before each retry, in order.
    pub fn delays(self) -> impl Iterator<Item = Duration> {
        (0..self.max_attempts).map(move |attempt| {
            self.base
                .saturating_mul(2u32.saturating_pow(attempt.min(31)))
        })
    }

    /// The sum of all delays: the longest a batch can be held by retries.
    pub fn total(self) -> Duration {
        self.delays().fold(Duration::ZERO, Duration::saturating_add)
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_sequence_is_1_2_4_8_16_seconds() {
        let secs: Vec<u64> = Backoff::DEFAULT.delays().map(|d| d.as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16]);
        assert_eq!(Backoff::DEFAULT.total(), Duration::from_secs(31));
    }

    #[test]
    fn custom_base_and_count() {
        let backoff = Backoff {
            max_attempts: 3,
            base: Duration::from_millis(10),
        };
        let ms: Vec<u128> = backoff.delays().map(|d| d.as_millis()).collect();
        assert_eq!(ms, vec![10, 20, 40]);
        assert_eq!(
            Backoff {
                max_attempts: 0,
                ..backoff
            }
            .delays()
            .count(),
            0
        );
    }

    #[test]
    fn huge_attempt_counts_saturate_instead_of_overflowing() {
        let backoff = Backoff {
            max_attempts: 80,
            base: Duration::from_secs(1),
        };
        assert_eq!(backoff.delays().count(), 80);
        assert!(backoff.total() >= Duration::from_secs(1 << 31));
    }
}
