//! Rows per second without asking any sluice process: every few seconds the console reads
//! each pipeline's committed offsets (summed over its partitions) and keeps the last few
//! minutes of samples in memory; the rate between two samples is the difference over the
//! time between them. A committed offset that goes down (a replay moved the group back)
//! gives no negative rate: that interval counts as zero.

use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// How often the offsets are sampled.
pub const INTERVAL: Duration = Duration::from_secs(5);
/// How many samples each pipeline keeps (five minutes at [`INTERVAL`]).
pub const KEPT: usize = 61;

/// One point of a chart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Point {
    /// Seconds since the Unix epoch (the end of the interval).
    pub t: i64,
    /// The value over the interval.
    pub v: f64,
}

/// The samples of every pipeline: (time, committed offsets summed).
#[derive(Debug, Default)]
pub struct Samples {
    by_pipeline: HashMap<String, VecDeque<(DateTime<Utc>, i64)>>,
}

impl Samples {
    /// Records one sample, dropping the oldest beyond [`KEPT`].
    pub fn record(&mut self, pipeline: &str, at: DateTime<Utc>, committed: i64) {
        let kept = self.by_pipeline.entry(pipeline.to_owned()).or_default();
        kept.push_back((at, committed));
        while kept.len() > KEPT {
            kept.pop_front();
        }
    }

    /// Rows per second between consecutive samples, oldest first.
    pub fn rates(&self, pipeline: &str) -> Vec<Point> {
        let Some(kept) = self.by_pipeline.get(pipeline) else {
            return Vec::new();
        };
        kept.iter()
            .zip(kept.iter().skip(1))
            .filter_map(|((t0, c0), (t1, c1))| {
                let seconds = (*t1 - *t0).num_milliseconds() as f64 / 1000.0;
                (seconds > 0.0).then(|| Point {
                    t: t1.timestamp(),
                    v: ((c1 - c0).max(0)) as f64 / seconds,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn rates_are_differences_over_time_and_never_negative() {
        let at = |s: i64| Utc.timestamp_opt(1_000_000 + s, 0).unwrap();
        let mut samples = Samples::default();
        assert!(samples.rates("p").is_empty());
        samples.record("p", at(0), 100);
        samples.record("p", at(5), 600);
        samples.record("p", at(10), 50);
        samples.record("p", at(10), 60);
        let rates = samples.rates("p");
        assert_eq!(
            rates,
            vec![
                Point {
                    t: 1_000_005,
                    v: 100.0
                },
                Point {
                    t: 1_000_010,
                    v: 0.0
                }
            ]
        );
    }

    #[test]
    fn only_the_last_minutes_are_kept() {
        let mut samples = Samples::default();
        for i in 0..(KEPT as i64 + 20) {
            samples.record("p", Utc::now() + chrono::Duration::seconds(i), i);
        }
        assert_eq!(samples.rates("p").len(), KEPT - 1);
    }
}
