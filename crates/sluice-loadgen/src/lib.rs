//! Realistic generated messages for the load generators, the demo and the benchmarks.
//!
//! Pure and seeded: the same configuration yields the same records, so a benchmark can
//! feed exactly the same rows to every contender. A crawl produces one app-stats message
//! per app and a burst of reviews whose thumbs-up counts grow from crawl to crawl; knobs add
//! re-sent duplicates, out-of-order older versions and every kind of poison message.

mod analyzer;
mod crawler;
mod messages;
mod poison;
mod text;

pub use analyzer::{AnalyzerConfig, analysis};
pub use crawler::{CrawlerConfig, app_names, app_stats_for_crawl, reviews_for_crawl};
pub use messages::{AppStats, NetworkMetrics, Review};
pub use poison::{PoisonKind, poison};

use sluice_core::PipelineKind;

/// What the consumer is expected to do with a generated record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A new row (or an update of a review seen in an earlier crawl).
    Row,
    /// A re-sent copy or an older version: no change (`skipped`).
    NoChange,
    /// A dead letter of this kind.
    DeadLetter(PoisonKind),
}

/// One generated Kafka record.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// The topic's pipeline.
    pub pipeline: PipelineKind,
    /// The record key (package name, or analysis id).
    pub key: Vec<u8>,
    /// The value; `None` is a tombstone.
    pub payload: Option<Vec<u8>>,
    /// What should happen to it.
    pub expect: Expect,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> CrawlerConfig {
        CrawlerConfig {
            apps: 20,
            reviews: 3_000,
            duplicate_fraction: 0.05,
            out_of_order_fraction: 0.05,
            poison_fraction: 0.02,
            ..CrawlerConfig::default()
        }
    }

    /// A generated value as JSON (the seed mappings' decoding of them is checked end to end
    /// by the storage tests, against the live schema).
    fn json(record: &Generated) -> serde_json::Value {
        serde_json::from_slice(record.payload.as_deref().unwrap_or(b"null"))
            .unwrap_or(serde_json::Value::Null)
    }

    #[test]
    fn every_poison_kind_appears_and_good_records_are_complete_objects() {
        let reviews = reviews_for_crawl(&small());
        let mut kinds = std::collections::BTreeSet::new();
        for record in &reviews {
            match record.expect {
                Expect::Row | Expect::NoChange => {
                    let value = json(record);
                    for field in ["review_id", "package_name", "score", "at", "last_synced_at"] {
                        assert!(!value[field].is_null(), "{field} in {value}");
                    }
                }
                Expect::DeadLetter(PoisonKind::UnknownPackage) => {
                    assert_eq!(json(record)["package_name"], "com.unknown.app");
                    kinds.insert(PoisonKind::UnknownPackage);
                }
                Expect::DeadLetter(kind) => {
                    kinds.insert(kind);
                }
            }
        }
        assert_eq!(
            kinds.len(),
            PoisonKind::ALL.len(),
            "every poison kind appears: {kinds:?}"
        );
        for record in app_stats_for_crawl(&small()) {
            assert!(json(&record)["crawled_at"].is_string());
        }
        let config = AnalyzerConfig {
            apps: app_names("p", 3),
            seed: 1,
        };
        for n in 0..50 {
            let value = json(&analysis(&config, n, chrono::Utc::now()));
            assert!(value["analysis_id"].is_string() && value["packet_count"].is_i64());
        }
    }

    #[test]
    fn an_older_version_is_a_row_the_table_accepts_even_at_zero_thumbs() {
        // Every review followed by an older version: about one in 2,500 has 0 thumbs.
        let config = CrawlerConfig {
            reviews: 20_000,
            out_of_order_fraction: 1.0,
            poison_fraction: 0.0,
            ..small()
        };
        let thumbs: Vec<i64> = reviews_for_crawl(&config)
            .iter()
            .filter(|r| r.expect == Expect::NoChange)
            .filter_map(|r| json(r)["thumbs_up_count"].as_i64())
            .collect();
        assert!(thumbs.len() >= 19_000, "{} older versions", thumbs.len());
        assert!(thumbs.contains(&0), "some older version is at 0 thumbs");
        assert!(thumbs.iter().all(|t| *t >= 0), "no negative thumbs");
    }

    #[test]
    fn generation_is_deterministic_and_later_crawls_grow_thumbs() {
        assert_eq!(reviews_for_crawl(&small()), reviews_for_crawl(&small()));
        let first = CrawlerConfig {
            poison_fraction: 0.0,
            duplicate_fraction: 0.0,
            out_of_order_fraction: 0.0,
            ..small()
        };
        let second = CrawlerConfig {
            crawl: 2,
            ..first.clone()
        };
        let a: Vec<_> = reviews_for_crawl(&first).iter().map(json).collect();
        let b: Vec<_> = reviews_for_crawl(&second).iter().map(json).collect();
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x["review_id"], y["review_id"]);
            let synced = |v: &serde_json::Value| {
                chrono::DateTime::parse_from_rfc3339(v["last_synced_at"].as_str().unwrap()).unwrap()
            };
            assert!(synced(y) > synced(x));
            assert!(y["thumbs_up_count"].as_i64() >= x["thumbs_up_count"].as_i64());
        }
        let texts: Vec<usize> = a
            .iter()
            .map(|r| r["content"].as_str().unwrap_or("").chars().count())
            .collect();
        assert!(
            texts.contains(&0) && texts.iter().any(|n| *n > 2000),
            "texts from empty to thousands"
        );
    }
}
