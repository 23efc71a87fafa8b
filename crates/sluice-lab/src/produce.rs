//! `sluice produce crawler|analyzer`: load generators on the resilient producer (docs/ARCHITECTURE.md#producer).
//!
//! Every record's delivery report is awaited; the command fails if any record was not
//! acknowledged by the broker (acks=all).

use crate::Failure;
use chrono::Utc;
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use sluice_core::PipelineKind;
use sluice_kafka::ResilientProducer;
use sluice_kafka::producer::{Delivered, Outgoing};
use sluice_loadgen::{
    AnalyzerConfig, CrawlerConfig, Generated, analysis, app_names, app_stats_for_crawl,
    reviews_for_crawl,
};
use sluice_storage::StorageSettings;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Which simulator.
#[derive(Debug, Subcommand)]
pub enum ProduceAction {
    /// The crawler: one app-stats message per app, then a burst of reviews.
    Crawler(CrawlerArgs),
    /// The network analyzer: network-metrics messages at a steady rate.
    Analyzer(AnalyzerArgs),
}

/// Options of the crawler simulator.
#[derive(Debug, Args)]
pub struct CrawlerArgs {
    /// Number of apps.
    #[arg(long, default_value_t = 1000)]
    pub apps: usize,
    /// Reviews in this crawl.
    #[arg(long, default_value_t = 200_000)]
    pub reviews: usize,
    /// Crawl number (1, 2, …): later crawls re-read the same reviews with more thumbs-up.
    #[arg(long, default_value_t = 1)]
    pub crawl: u32,
    /// Package name prefix.
    #[arg(long, default_value = "com.sluice.demo")]
    pub app_prefix: String,
    /// Fraction of reviews re-sent identically.
    #[arg(long, default_value_t = 0.01)]
    pub duplicates: f64,
    /// Fraction of reviews followed by an older version.
    #[arg(long, default_value_t = 0.01)]
    pub out_of_order: f64,
    /// Fraction of poison messages (every kind, in turn).
    #[arg(long, default_value_t = 0.0005)]
    pub poison: f64,
    /// Messages per second (0: as fast as the broker takes them).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// RNG seed.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Options of the analyzer simulator.
#[derive(Debug, Args)]
pub struct AnalyzerArgs {
    /// Number of messages.
    #[arg(long, default_value_t = 100)]
    pub count: u64,
    /// Messages per second.
    #[arg(long, default_value_t = 1)]
    pub rate: u64,
    /// Number of apps analysed (round robin).
    #[arg(long, default_value_t = 1000)]
    pub apps: usize,
    /// Package name prefix.
    #[arg(long, default_value = "com.sluice.demo")]
    pub app_prefix: String,
    /// RNG seed.
    #[arg(long, default_value_t = 11)]
    pub seed: u64,
}

impl CrawlerArgs {
    /// The generator configuration.
    pub fn config(&self) -> CrawlerConfig {
        CrawlerConfig {
            apps: self.apps,
            reviews: self.reviews,
            crawl: self.crawl,
            app_prefix: self.app_prefix.clone(),
            duplicate_fraction: self.duplicates,
            out_of_order_fraction: self.out_of_order,
            poison_fraction: self.poison,
            seed: self.seed,
        }
    }
}

/// Sends generated records to their pipelines' topics, at most `rate` per second, awaiting
/// every delivery report. Returns how many were delivered.
pub async fn send_all(
    settings: &StorageSettings,
    producer: &ResilientProducer,
    records: &[Generated],
    rate: u64,
    progress: &ProgressBar,
) -> Result<u64, Failure> {
    const IN_FLIGHT: usize = 20_000;
    let started = Instant::now();
    let mut pending: VecDeque<_> = VecDeque::with_capacity(IN_FLIGHT);
    let mut delivered = 0u64;
    for (i, record) in records.iter().enumerate() {
        let topic = topic(settings, record.pipeline)?;
        if rate > 0 {
            let due = started + Duration::from_secs_f64(i as f64 / rate as f64);
            tokio::time::sleep_until(due.into()).await;
        }
        let future = producer.enqueue(Outgoing {
            topic,
            key: Some(&record.key),
            payload: record.payload.as_deref().unwrap_or_default(),
            partition: None,
            headers: &[],
        })?;
        pending.push_back(future);
        if pending.len() >= IN_FLIGHT
            && let Some(oldest) = pending.pop_front()
        {
            let _: Delivered = oldest.await?;
            delivered += 1;
            progress.inc(1);
        }
    }
    for future in pending {
        let _: Delivered = future.await?;
        delivered += 1;
        progress.inc(1);
    }
    Ok(delivered)
}

fn topic(settings: &StorageSettings, kind: PipelineKind) -> Result<&str, Failure> {
    settings
        .pipeline(kind)
        .map(|p| p.topic.as_str())
        .ok_or_else(|| {
            Failure::config(anyhow::anyhow!(
                "pipeline {kind} is not in STORAGE_PIPELINES"
            ))
        })
}

/// A progress bar (hidden when `quiet`).
pub fn bar(len: u64, what: &str, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    let style =
        ProgressStyle::with_template("{msg:>16} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(what.to_owned());
    bar
}

/// Entry point.
pub fn run(action: ProduceAction) -> Result<(), Failure> {
    let settings = super::settings()?;
    let producer = ResilientProducer::new(&settings.kafka, "sluice-produce")?;
    super::runtime()?.block_on(async {
        match action {
            ProduceAction::Crawler(args) => {
                let config = args.config();
                let mut records = app_stats_for_crawl(&config);
                records.extend(reviews_for_crawl(&config));
                let progress = bar(records.len() as u64, "crawler", args.quiet);
                let started = Instant::now();
                let n = send_all(&settings, &producer, &records, args.rate, &progress).await?;
                progress.finish();
                println!(
                    "produced {n} records (crawl {}, {} apps) in {:.1} s",
                    args.crawl,
                    args.apps,
                    started.elapsed().as_secs_f64()
                );
            }
            ProduceAction::Analyzer(args) => {
                let config = AnalyzerConfig {
                    apps: app_names(&args.app_prefix, args.apps),
                    seed: args.seed,
                };
                let progress = bar(args.count, "analyzer", false);
                let rate = args.rate.max(1);
                let started = Instant::now();
                for n in 0..args.count {
                    let due = started + Duration::from_secs_f64(n as f64 / rate as f64);
                    tokio::time::sleep_until(due.into()).await;
                    let record = analysis(&config, n, Utc::now());
                    send_all(
                        &settings,
                        &producer,
                        std::slice::from_ref(&record),
                        0,
                        &progress,
                    )
                    .await?;
                }
                progress.finish();
                println!("produced {} network-metrics records", args.count);
            }
        }
        Ok(())
    })
}
