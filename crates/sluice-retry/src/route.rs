//! Where a failed record goes next, and when it is due: pure rules.

use crate::tiers::Tiers;

/// Which consumer the failed record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The main topic.
    Main,
    /// Retry tier `index` (0-based).
    Tier(usize),
}

/// How a handler's failure is to be treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureClass {
    /// It may pass: try again after the next tier's delay.
    Retryable,
    /// It will not pass: straight to the dead-letter topic.
    Permanent,
}

impl FailureClass {
    /// `retryable` or `permanent` (the error-class header).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Retryable => "retryable",
            FailureClass::Permanent => "permanent",
        }
    }
}

/// A handler's failure on one record (not an infrastructure error: those end the run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Retry or dead-letter.
    pub class: FailureClass,
    /// Why, for the error-message header.
    pub message: String,
}

impl Failure {
    /// A retryable failure.
    pub fn retryable(message: impl Into<String>) -> Failure {
        Failure {
            class: FailureClass::Retryable,
            message: message.into(),
        }
    }

    /// A permanent failure.
    pub fn permanent(message: impl Into<String>) -> Failure {
        Failure {
            class: FailureClass::Permanent,
            message: message.into(),
        }
    }
}

/// Where a failed record is forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// Retry tier `index`.
    Tier(usize),
    /// The dead-letter topic.
    DeadLetter,
}

/// The next destination of a record that failed with `class` in `source`: the next tier for
/// a retryable failure (the first tier from the main topic), the dead-letter topic after the
/// last tier or for a permanent failure.
pub fn next_destination(tiers: &Tiers, source: Source, class: FailureClass) -> Destination {
    if class == FailureClass::Permanent {
        return Destination::DeadLetter;
    }
    let next = match source {
        Source::Main => 0,
        Source::Tier(index) => index.saturating_add(1),
    };
    if next < tiers.len() {
        Destination::Tier(next)
    } else {
        Destination::DeadLetter
    }
}

/// When a record forwarded at `now_ms` to `destination` is due: now plus the tier's delay
/// (now for the dead-letter topic).
pub fn due_ms(tiers: &Tiers, destination: Destination, now_ms: i64) -> i64 {
    match destination {
        Destination::Tier(index) => {
            let delay = tiers
                .get(index)
                .map(|t| i64::try_from(t.delay().as_millis()).unwrap_or(i64::MAX))
                .unwrap_or(0);
            now_ms.saturating_add(delay)
        }
        Destination::DeadLetter => now_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Destination::*;
    use FailureClass::*;

    #[test]
    fn retryable_failures_walk_the_tiers_then_dead_letter() {
        let tiers = Tiers::parse("1s,2s,3s").unwrap_or_else(|e| panic!("{e}"));
        let cases = [
            (Source::Main, Retryable, Tier(0)),
            (Source::Tier(0), Retryable, Tier(1)),
            (Source::Tier(1), Retryable, Tier(2)),
            (Source::Tier(2), Retryable, DeadLetter),
            (Source::Tier(9), Retryable, DeadLetter),
            (Source::Main, Permanent, DeadLetter),
            (Source::Tier(0), Permanent, DeadLetter),
        ];
        for (source, class, expected) in cases {
            assert_eq!(
                next_destination(&tiers, source, class),
                expected,
                "{source:?} {class:?}"
            );
        }
    }

    #[test]
    fn due_is_now_plus_the_tier_delay() {
        let tiers = Tiers::parse("1s,2m").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(due_ms(&tiers, Tier(0), 10_000), 11_000);
        assert_eq!(due_ms(&tiers, Tier(1), 10_000), 130_000);
        assert_eq!(due_ms(&tiers, DeadLetter, 10_000), 10_000);
    }
}
