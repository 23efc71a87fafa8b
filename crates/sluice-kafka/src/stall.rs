//! When a consumer error stops being "the client is retrying" and becomes "this topic is
//! stalled".
//!
//! librdkafka reports most consumer errors for information and keeps retrying by itself.
//! That is right for a broker restart or a leader change, and wrong for an error that can
//! never heal: a record batch in a codec the client cannot read, a topic deleted under the
//! consumer. Such an error comes back on every fetch, forever, while the process looks
//! healthy. The rule kept here:
//!
//! | class | examples | what happens |
//! |---|---|---|
//! | [`ErrorClass::Transient`] | broker down, leader change, coordinator moved | ridden out, however long |
//! | [`ErrorClass::Persistent`] | unknown topic or partition, anything unclassified | unhealthy after it repeats; fatal once it has repeated for the bound |
//! | [`ErrorClass::Permanent`] | unreadable codec, corrupt batch, fatal client | fatal at once |
//!
//! An episode of a persistent error starts at its first report and ends when the error has
//! not been seen for a whole bound. It is fatal when it has been reported at least twice
//! and spans the bound. The clock is injected, so the rule is tested without sleeping.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How a consumer error behaves over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The client recovers by itself once the cause passes (the broker comes back).
    Transient,
    /// May heal (metadata catching up) or may not (a deleted topic); bounded in time.
    Persistent,
    /// Retrying cannot fix it.
    Permanent,
}

/// What the pipeline should do after an error was observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Keep polling: the client retries.
    Ride,
    /// Stop the pipeline: the error did not heal within the bound (or cannot heal).
    Stalled {
        /// How long the error has been reported.
        for_: Duration,
        /// How many times.
        reports: u64,
    },
}

#[derive(Debug, Clone, Copy)]
struct Episode {
    first: Instant,
    last: Instant,
    reports: u64,
}

/// Tracks persistent consumer errors by key (the error code) for one consumer.
#[derive(Debug)]
pub struct StallWatch<K> {
    bound: Duration,
    episodes: HashMap<K, Episode>,
}

/// An episode counts against health once it repeated over at least this long.
const UNHEALTHY_AFTER: Duration = Duration::from_secs(2);

impl<K: std::hash::Hash + Eq + Clone> StallWatch<K> {
    /// A watch that declares a persistent error fatal after `bound`.
    pub fn new(bound: Duration) -> Self {
        Self {
            bound,
            episodes: HashMap::new(),
        }
    }

    /// The bound.
    pub fn bound(&self) -> Duration {
        self.bound
    }

    /// Records one report of an error of class `class` at `now`.
    pub fn observe(&mut self, key: K, class: ErrorClass, now: Instant) -> Verdict {
        match class {
            ErrorClass::Transient => Verdict::Ride,
            ErrorClass::Permanent => Verdict::Stalled {
                for_: Duration::ZERO,
                reports: 1,
            },
            ErrorClass::Persistent => {
                let bound = self.bound;
                let episode = self
                    .episodes
                    .entry(key)
                    .and_modify(|e| {
                        if now.saturating_duration_since(e.last) > bound {
                            // Quiet for a whole bound: it healed; this is a new episode.
                            *e = Episode {
                                first: now,
                                last: now,
                                reports: 0,
                            };
                        }
                    })
                    .or_insert(Episode {
                        first: now,
                        last: now,
                        reports: 0,
                    });
                episode.last = now;
                episode.reports += 1;
                let span = now.saturating_duration_since(episode.first);
                if episode.reports >= 2 && span >= bound {
                    Verdict::Stalled {
                        for_: span,
                        reports: episode.reports,
                    }
                } else {
                    Verdict::Ride
                }
            }
        }
    }

    /// Whether an open episode makes the consumer unhealthy at `now`: the error repeated
    /// over a couple of seconds and was reported within the bound.
    pub fn is_failing(&self, now: Instant) -> bool {
        self.episodes.values().any(|e| {
            e.reports >= 2
                && e.last.saturating_duration_since(e.first) >= UNHEALTHY_AFTER
                && now.saturating_duration_since(e.last) <= self.bound
        })
    }

    /// When the oldest open episode started, if any (for diagnosis).
    pub fn oldest_open(&self, now: Instant) -> Option<Instant> {
        self.episodes
            .values()
            .filter(|e| now.saturating_duration_since(e.last) <= self.bound)
            .map(|e| e.first)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_secs(30);

    fn at(start: Instant, secs: f64) -> Instant {
        start + Duration::from_secs_f64(secs)
    }

    #[test]
    fn transient_errors_are_ridden_out_forever() {
        let start = Instant::now();
        let mut watch = StallWatch::new(BOUND);
        for i in 0..1000 {
            let now = at(start, f64::from(i));
            assert_eq!(
                watch.observe("down", ErrorClass::Transient, now),
                Verdict::Ride
            );
            assert!(!watch.is_failing(now));
        }
    }

    #[test]
    fn a_permanent_error_is_fatal_at_once() {
        let mut watch = StallWatch::new(BOUND);
        assert!(matches!(
            watch.observe("codec", ErrorClass::Permanent, Instant::now()),
            Verdict::Stalled { .. }
        ));
    }

    #[test]
    fn a_persistent_error_is_fatal_once_it_spans_the_bound() {
        let start = Instant::now();
        let mut watch = StallWatch::new(BOUND);
        // Twice a second, like librdkafka's fetch retries.
        let mut verdict = Verdict::Ride;
        let mut t = 0.0;
        while verdict == Verdict::Ride {
            verdict = watch.observe("gone", ErrorClass::Persistent, at(start, t));
            if t >= 2.0 {
                assert!(watch.is_failing(at(start, t)), "unhealthy meanwhile, t={t}");
            }
            t += 0.5;
        }
        assert_eq!(
            verdict,
            Verdict::Stalled {
                for_: BOUND,
                reports: 61
            }
        );
    }

    #[test]
    fn a_rare_repetition_still_adds_up_but_a_healed_error_starts_over() {
        let start = Instant::now();
        let mut watch = StallWatch::new(BOUND);
        // Every 20 s: still within the bound of the previous report, so one episode.
        assert_eq!(
            watch.observe(1, ErrorClass::Persistent, at(start, 0.0)),
            Verdict::Ride
        );
        assert_eq!(
            watch.observe(1, ErrorClass::Persistent, at(start, 20.0)),
            Verdict::Ride
        );
        assert!(matches!(
            watch.observe(1, ErrorClass::Persistent, at(start, 40.0)),
            Verdict::Stalled { .. }
        ));
        // Another error, with a quiet gap longer than the bound: healed in between.
        let mut watch = StallWatch::new(BOUND);
        assert_eq!(
            watch.observe(2, ErrorClass::Persistent, at(start, 0.0)),
            Verdict::Ride
        );
        assert_eq!(
            watch.observe(2, ErrorClass::Persistent, at(start, 31.0)),
            Verdict::Ride
        );
        assert!(
            !watch.is_failing(at(start, 31.0)),
            "one report is no episode"
        );
        assert!(watch.oldest_open(at(start, 31.0)).is_some());
    }

    #[test]
    fn a_single_report_does_not_make_the_consumer_unhealthy() {
        let start = Instant::now();
        let mut watch = StallWatch::new(BOUND);
        watch.observe("blip", ErrorClass::Persistent, start);
        assert!(!watch.is_failing(at(start, 1.0)));
        watch.observe("blip", ErrorClass::Persistent, at(start, 3.0));
        assert!(watch.is_failing(at(start, 3.0)));
        assert!(
            !watch.is_failing(at(start, 40.0)),
            "quiet for a bound: healed"
        );
    }
}
