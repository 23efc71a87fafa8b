//! The crawler simulator: app-stats (one per app per crawl) and reviews.

use crate::messages::{AppStats, Review};
use crate::poison::{PoisonKind, poison};
use crate::text::{review_text, user_name};
use crate::{Expect, Generated};
use chrono::{DateTime, Duration, TimeZone, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice_core::PipelineKind;

/// Knobs of one crawl.
#[derive(Debug, Clone)]
pub struct CrawlerConfig {
    /// Number of apps (package names `<prefix>.app<i>`).
    pub apps: usize,
    /// Reviews in this crawl.
    pub reviews: usize,
    /// Crawl number, from 1: later crawls re-read the same reviews with more thumbs-up.
    pub crawl: u32,
    /// Package name prefix.
    pub app_prefix: String,
    /// Fraction of reviews re-sent identically (0–1).
    pub duplicate_fraction: f64,
    /// Fraction of reviews followed by an older version of themselves (0–1).
    pub out_of_order_fraction: f64,
    /// Fraction of records replaced by a poison message (0–1), cycling through every kind.
    pub poison_fraction: f64,
    /// RNG seed.
    pub seed: u64,
}

impl Default for CrawlerConfig {
    fn default() -> Self {
        Self {
            apps: 1000,
            reviews: 200_000,
            crawl: 1,
            app_prefix: "com.sluice.demo".into(),
            duplicate_fraction: 0.01,
            out_of_order_fraction: 0.01,
            poison_fraction: 0.0005,
            seed: 7,
        }
    }
}

/// The package names of the simulated apps.
pub fn app_names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}.app{i}")).collect()
}

fn crawl_time(crawl: u32) -> DateTime<Utc> {
    // Crawls are a day apart, from a fixed origin, so re-runs are reproducible.
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
        .single()
        .unwrap_or_default()
        + Duration::days(i64::from(crawl))
}

fn json(value: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// One app-stats message per app for this crawl.
pub fn app_stats_for_crawl(config: &CrawlerConfig) -> Vec<Generated> {
    let mut rng = StdRng::seed_from_u64(config.seed ^ u64::from(config.crawl) << 32);
    let at = crawl_time(config.crawl);
    app_names(&config.app_prefix, config.apps)
        .into_iter()
        .enumerate()
        .map(|(i, package)| {
            let histogram: Vec<i64> = (0..5).map(|_| rng.random_range(0..100_000)).collect();
            let ratings: i64 = histogram.iter().sum();
            let weighted: i64 = histogram.iter().zip(1..).map(|(n, s)| n * s).sum();
            let message = AppStats {
                package_name: package.clone(),
                crawled_at: at + Duration::microseconds(i as i64 * 1_001),
                title: Some(format!("App {i} — ✓")),
                score: Some(if ratings == 0 {
                    0.0
                } else {
                    weighted as f64 / ratings as f64
                }),
                ratings: Some(ratings),
                reviews_count: Some(ratings / 3),
                installs_min: Some(10_i64.pow(rng.random_range(3..9))),
                installs_real: Some(rng.random_range(1_000..2_000_000_000)),
                histogram: Some(histogram),
                price: Some(if rng.random_bool(0.9) { 0.0 } else { 1.99 }),
                free: Some(true),
                version: Some(format!("{}.{}.{}", config.crawl, i % 10, i % 7)),
                updated_at: Some(at - Duration::hours(rng.random_range(1..500))),
            };
            Generated {
                pipeline: PipelineKind::AppStats,
                key: package.into_bytes(),
                payload: Some(json(&message)),
                expect: Expect::Row,
            }
        })
        .collect()
}

/// The reviews of this crawl, with duplicates, older versions and poison mixed in.
pub fn reviews_for_crawl(config: &CrawlerConfig) -> Vec<Generated> {
    let apps = app_names(&config.app_prefix, config.apps.max(1));
    let mut rng = StdRng::seed_from_u64(config.seed.wrapping_mul(31) ^ u64::from(config.crawl));
    let synced = crawl_time(config.crawl);
    let mut out = Vec::with_capacity(config.reviews + config.reviews / 50);
    let mut poison_turn = 0usize;
    for i in 0..config.reviews {
        // A skewed spread: a few apps get most reviews.
        let app = &apps[(i * i / config.reviews.max(1) + i) % apps.len()];
        if rng.random_bool(config.poison_fraction.clamp(0.0, 1.0)) {
            let kind = PoisonKind::ALL[poison_turn % PoisonKind::ALL.len()];
            poison_turn += 1;
            out.push(poison(PipelineKind::Reviews, kind, app, &mut rng));
            continue;
        }
        let review = review_at(i, app, config.crawl, synced);
        let record = Generated {
            pipeline: PipelineKind::Reviews,
            key: app.clone().into_bytes(),
            payload: Some(json(&review)),
            expect: Expect::Row,
        };
        if rng.random_bool(config.duplicate_fraction.clamp(0.0, 1.0)) {
            out.push(Generated {
                expect: Expect::NoChange,
                ..record.clone()
            });
        }
        out.push(record);
        if rng.random_bool(config.out_of_order_fraction.clamp(0.0, 1.0)) {
            let mut older = review.clone();
            older.last_synced_at -= Duration::hours(12);
            // Never below 0 (`saturating_sub` on an i32 would give -1, a row the reviews
            // table refuses: a dead letter where the crawl means "no change").
            older.thumbs_up_count = (older.thumbs_up_count - 1).max(0);
            out.push(Generated {
                pipeline: PipelineKind::Reviews,
                key: app.clone().into_bytes(),
                payload: Some(json(&older)),
                expect: Expect::NoChange,
            });
        }
    }
    out
}

fn review_at(i: usize, app: &str, crawl: u32, synced: DateTime<Utc>) -> Review {
    // Stable per review across crawls: written once, then thumbs grow with each crawl.
    let mut stable = StdRng::seed_from_u64(i as u64);
    let written = Utc
        .with_ymd_and_hms(2025, 6, 1, 0, 0, 0)
        .single()
        .unwrap_or_default()
        + Duration::minutes(stable.random_range(0..300_000));
    let base_thumbs: i32 = stable.random_range(0..500);
    let growth_per_crawl: i32 = stable.random_range(0..5);
    let replied = stable.random_bool(0.2);
    Review {
        review_id: format!("gp:AOqpTO{i:09}"),
        package_name: app.to_owned(),
        user_name: Some(user_name(&mut stable)),
        score: stable.random_range(1..=5),
        content: Some(review_text(&mut stable)),
        thumbs_up_count: base_thumbs
            + i32::try_from(crawl).unwrap_or(i32::MAX / 8).min(1_000_000) * growth_per_crawl,
        app_version: Some(format!(
            "{}.{}",
            stable.random_range(1..9),
            stable.random_range(0..20)
        )),
        at: written,
        reply_content: replied.then(|| "Thank you for the feedback! — پشتیبانی".to_owned()),
        replied_at: replied.then(|| written + Duration::days(2)),
        last_synced_at: synced + Duration::microseconds(i as i64),
    }
}
