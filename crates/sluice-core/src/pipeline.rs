//! The seed pipelines' names: the three topics sluice was built for, shipped as mapping files
//! (`deploy/sinks/*.toml`, compiled into the binary by `sluice-sinks`) and run by `sluice run`
//! when no mapping file is given (docs/ARCHITECTURE.md#sinks). They run through the one
//! declared-sink engine like any user's sink; this enum only names them, for the `STORAGE_*`
//! variables that existing deployments set, the operations commands and the load generators
//! (which need no mapping engine).

use std::fmt;
use std::str::FromStr;

/// One seed pipeline: one topic, one consumer group, one table, one mapping file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PipelineKind {
    /// `deploy/sinks/app-stats.toml`: one row per app per crawl, the first delivery wins.
    AppStats,
    /// `deploy/sinks/reviews.toml`: one row per review, the newest crawl wins.
    Reviews,
    /// `deploy/sinks/network-metrics.toml`: one row per analysed capture, the first wins.
    NetworkMetrics,
}

/// A seed's name, table, variable suffix and default batch size; the mapping file states
/// the same (the seed test `seed_files_agree_with_their_kinds` checks it).
struct SeedSpec {
    name: &'static str,
    table: &'static str,
    env_suffix: &'static str,
    default_batch_size: usize,
}

const fn spec(kind: PipelineKind) -> &'static SeedSpec {
    match kind {
        PipelineKind::AppStats => &SeedSpec {
            name: "app-stats",
            table: "app_stats",
            env_suffix: "APP_STATS",
            default_batch_size: 200,
        },
        PipelineKind::Reviews => &SeedSpec {
            name: "reviews",
            table: "reviews",
            env_suffix: "REVIEWS",
            default_batch_size: 500,
        },
        PipelineKind::NetworkMetrics => &SeedSpec {
            name: "network-metrics",
            table: "network_metrics",
            env_suffix: "NETWORK_METRICS",
            default_batch_size: 50,
        },
    }
}

impl PipelineKind {
    /// All seed pipelines, in the order they are started and reported.
    pub const ALL: [PipelineKind; 3] = [Self::AppStats, Self::Reviews, Self::NetworkMetrics];

    /// The pipeline's name, as used in `STORAGE_PIPELINES`, group names and the CLI.
    pub const fn name(self) -> &'static str {
        spec(self).name
    }

    /// The default topic name (equal to the pipeline name).
    pub const fn default_topic(self) -> &'static str {
        self.name()
    }

    /// The table the pipeline writes.
    pub const fn table(self) -> &'static str {
        spec(self).table
    }

    /// Built-in max poll records (docs/ARCHITECTURE.md#batch-loop).
    pub const fn default_batch_size(self) -> usize {
        spec(self).default_batch_size
    }

    /// The upper-case suffix of per-pipeline environment variables (`APP_STATS` …).
    pub const fn env_suffix(self) -> &'static str {
        spec(self).env_suffix
    }

    /// The variable naming the pipeline's topic (`STORAGE_TOPIC_REVIEWS` …); the one place
    /// that builds these names.
    pub fn topic_variable(self) -> String {
        format!("STORAGE_TOPIC_{}", self.env_suffix())
    }

    /// The variable of the pipeline's own batch size (`STORAGE_MAX_POLL_RECORDS_REVIEWS` …).
    pub fn batch_size_variable(self) -> String {
        format!("STORAGE_MAX_POLL_RECORDS_{}", self.env_suffix())
    }

    /// The variable of the pipeline's own writer count (`STORAGE_WRITERS_REVIEWS` …).
    pub fn writers_variable(self) -> String {
        format!("STORAGE_WRITERS_{}", self.env_suffix())
    }

    /// Every pipeline name, comma-separated, in order (the default of `STORAGE_PIPELINES`).
    pub fn all_names() -> String {
        Self::ALL.map(Self::name).join(",")
    }

    /// The length of the longest pipeline name (group and member ids must fit Kafka's and
    /// the database's limits with any of them).
    pub const fn longest_name() -> usize {
        let mut longest = 0;
        let mut i = 0;
        while i < Self::ALL.len() {
            let len = Self::ALL[i].name().len();
            if len > longest {
                longest = len;
            }
            i += 1;
        }
        longest
    }
}

impl fmt::Display for PipelineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A pipeline name that is not one of the registry's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown pipeline `{0}` (expected one of: {names})", names = PipelineKind::ALL.map(PipelineKind::name).join(", "))]
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

    #[test]
    fn names_and_variables_are_what_dashboards_and_operators_use() {
        let names: Vec<(&str, &str, usize, String)> = PipelineKind::ALL
            .iter()
            .map(|k| {
                (
                    k.name(),
                    k.table(),
                    k.default_batch_size(),
                    k.topic_variable(),
                )
            })
            .collect();
        // The seed topics keep their names; a topic added after them is not pinned here.
        assert_eq!(
            names[..3],
            vec![
                (
                    "app-stats",
                    "app_stats",
                    200,
                    "STORAGE_TOPIC_APP_STATS".to_owned()
                ),
                (
                    "reviews",
                    "reviews",
                    500,
                    "STORAGE_TOPIC_REVIEWS".to_owned()
                ),
                (
                    "network-metrics",
                    "network_metrics",
                    50,
                    "STORAGE_TOPIC_NETWORK_METRICS".to_owned()
                ),
            ]
        );
        assert!(PipelineKind::longest_name() >= "network-metrics".len());
        assert!(UnknownPipeline("x".into()).to_string().starts_with(
            "unknown pipeline `x` (expected one of: app-stats, reviews, network-metrics"
        ));
    }
}
