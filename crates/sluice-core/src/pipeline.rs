//! The three storage pipelines and their built-in defaults (docs/ARCHITECTURE.md#batch-loop).

use std::fmt;
use std::str::FromStr;

/// One storage pipeline: one topic, one consumer group, one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PipelineKind {
    /// `app-stats` → `app_stats`: steady, one message per app per crawl.
    AppStats,
    /// `reviews` → `reviews`: throughput, bursts of hundreds of thousands.
    Reviews,
    /// `network-metrics` → `network_metrics`: latency, a person is waiting.
    NetworkMetrics,
}

impl PipelineKind {
    /// All pipelines, in the order they are started and reported.
    pub const ALL: [PipelineKind; 3] = [Self::AppStats, Self::Reviews, Self::NetworkMetrics];

    /// The pipeline's name, as used in `STORAGE_PIPELINES`, group names and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            Self::AppStats => "app-stats",
            Self::Reviews => "reviews",
            Self::NetworkMetrics => "network-metrics",
        }
    }

    /// The default topic name (equal to the pipeline name).
    pub fn default_topic(self) -> &'static str {
        self.name()
    }

    /// The table the pipeline writes.
    pub fn table(self) -> &'static str {
        match self {
            Self::AppStats => "app_stats",
            Self::Reviews => "reviews",
            Self::NetworkMetrics => "network_metrics",
        }
    }

    /// Built-in max poll records (docs/ARCHITECTURE.md#batch-loop).
    pub fn default_batch_size(self) -> usize {
        match self {
            Self::AppStats => 200,
            Self::Reviews => 500,
            Self::NetworkMetrics => 50,
        }
    }

    /// The upper-case suffix of per-pipeline environment variables (`APP_STATS` …).
    pub fn env_suffix(self) -> &'static str {
        match self {
            Self::AppStats => "APP_STATS",
            Self::Reviews => "REVIEWS",
            Self::NetworkMetrics => "NETWORK_METRICS",
        }
    }
}

impl fmt::Display for PipelineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A pipeline name that is not one of the three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown pipeline `{0}` (expected one of: app-stats, reviews, network-metrics)")]
pub struct UnknownPipeline(pub String);

impl FromStr for PipelineKind {
    type Err = UnknownPipeline;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.name() == s.trim())
            .ok_or_else(|| UnknownPipeline(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in PipelineKind::ALL {
            assert_eq!(kind.name().parse::<PipelineKind>(), Ok(kind));
        }
        assert!("reviewz".parse::<PipelineKind>().is_err());
    }
}
