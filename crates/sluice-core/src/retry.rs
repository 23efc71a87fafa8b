//! The one back-off policy, as plain data (docs/ARCHITECTURE.md#errors).
//!
//! Every retry in sluice waits by the same formula: the n-th delay (n ≥ 1) is
//! `min(cap, base · 2^(n−1))`, shortened by a random part of at most [`JITTER`] of itself so
//! that clients failing together (three pipelines after a PostgreSQL restart, dispatchers
//! after a broker outage) do not retry in lock-step. Jitter only ever shortens a delay, so
//! the nominal sequence is an upper bound: a budget checked against it (the storage retries
//! must fit in `max.poll.interval.ms`) holds with any jitter.
//!
//! The storage consumer retries a batch after 1, 2, 4, 8 and 16 s (nominal), with a fresh
//! connection before each attempt; when the delays run out the error is fatal and the next
//! start resumes from the last committed offset. The outbox dispatcher puts a failed event
//! back to PENDING after `OUTBOX_BACKOFF_BASE_MS · 2^(attempts−1)`, capped at 5 minutes.
//! The random part is injected, so the policy is tested without sleeping or randomness.

use std::time::Duration;

/// The largest share of a delay that jitter may take off (10 %).
pub const JITTER: f64 = 0.1;

/// The longest delay of any back-off.
pub const MAX_DELAY: Duration = Duration::from_secs(300);

/// Capped exponential back-off: `base, 2·base, 4·base, …` up to `cap`, for `max_attempts`
/// retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// How many retries follow the first failure.
    pub max_attempts: u32,
    /// The first delay; each following one doubles.
    pub base: Duration,
    /// No delay is longer than this.
    pub cap: Duration,
}

impl Backoff {
    /// The storage default: 5 retries from 1 s (1, 2, 4, 8, 16 s; 31 s in all, nominal).
    pub const DEFAULT: Backoff = Backoff {
        max_attempts: 5,
        base: Duration::from_secs(1),
        cap: MAX_DELAY,
    };

    /// The nominal (jitter-free) delay before retry `n` (1-based): `min(cap, base·2^(n−1))`.
    pub fn nominal(self, n: u32) -> Duration {
        let exponent = n.saturating_sub(1).min(31);
        self.base
            .saturating_mul(2u32.saturating_pow(exponent))
            .min(self.cap)
    }

    /// The delay before retry `n` with jitter `unit` (in `[0, 1)`; 0 gives the nominal
    /// delay): shorter than the nominal one by at most [`JITTER`] of it.
    pub fn delay(self, n: u32, unit: f64) -> Duration {
        let nominal = self.nominal(n);
        nominal.saturating_sub(nominal.mul_f64(JITTER * unit.clamp(0.0, 1.0)))
    }

    /// The delays to sleep before each retry, in order, with random jitter.
    pub fn delays(self) -> impl Iterator<Item = Duration> {
        self.delays_with(random_unit)
    }

    /// The delays with jitter drawn from `unit` (tests pass a constant).
    pub fn delays_with(self, mut unit: impl FnMut() -> f64) -> impl Iterator<Item = Duration> {
        (1..=self.max_attempts).map(move |n| self.delay(n, unit()))
    }

    /// The sum of the nominal delays: the longest a batch can be held by retries.
    pub fn total(self) -> Duration {
        (1..=self.max_attempts)
            .map(|n| self.nominal(n))
            .fold(Duration::ZERO, Duration::saturating_add)
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A pseudo-random number in `[0, 1)` for jitter (not for anything that needs real
/// randomness): the standard library's randomly keyed hasher over a counter.
pub fn random_unit() -> f64 {
    use std::collections::hash_map::RandomState;
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let bits = RandomState::new().hash_one(n) >> 11;
    bits as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_sequence_is_1_2_4_8_16_seconds() {
        let secs: Vec<u64> = Backoff::DEFAULT
            .delays_with(|| 0.0)
            .map(|d| d.as_secs())
            .collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16]);
        assert_eq!(Backoff::DEFAULT.total(), Duration::from_secs(31));
    }

    #[test]
    fn custom_base_and_count() {
        let backoff = Backoff {
            max_attempts: 3,
            base: Duration::from_millis(10),
            cap: MAX_DELAY,
        };
        let ms: Vec<u128> = backoff.delays_with(|| 0.0).map(|d| d.as_millis()).collect();
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
    fn huge_attempt_counts_saturate_at_the_cap_instead_of_overflowing() {
        let backoff = Backoff {
            max_attempts: 80,
            base: Duration::from_secs(1),
            cap: MAX_DELAY,
        };
        assert_eq!(backoff.delays().count(), 80);
        assert_eq!(backoff.nominal(9), Duration::from_secs(256));
        assert_eq!(backoff.nominal(10), MAX_DELAY, "512 s is past the cap");
        assert_eq!(backoff.nominal(u32::MAX), MAX_DELAY);
        assert_eq!(backoff.total(), Duration::from_secs(511 + 71 * 300));
    }

    #[test]
    fn jitter_only_shortens_and_by_at_most_a_tenth() {
        let backoff = Backoff::DEFAULT;
        for (n, unit, expected_ms) in [
            (1, 0.0, 1000),
            (1, 0.5, 950),
            (1, 0.999_999, 900),
            (3, 1.0, 3600),
            (5, 0.25, 15_600),
            (2, -3.0, 2000),
            (2, 7.0, 1800),
        ] {
            assert_eq!(
                backoff.delay(n, unit).as_millis(),
                expected_ms,
                "retry {n}, unit {unit}"
            );
        }
        for _ in 0..1000 {
            let unit = random_unit();
            assert!((0.0..1.0).contains(&unit), "{unit}");
        }
        let random: Vec<Duration> = backoff.delays().collect();
        for (n, delay) in (1..).zip(random) {
            assert!(delay <= backoff.nominal(n));
            assert!(delay >= backoff.nominal(n).mul_f64(1.0 - JITTER));
        }
    }
}
