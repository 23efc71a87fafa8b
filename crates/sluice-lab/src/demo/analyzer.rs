//! The demo's network analyzer: one network-metrics message every `--metrics-interval`
//! seconds from its own thread, after one unmeasured warm-up message, for the latency
//! figures of the report.

use super::send_all;
use crate::Failure;
use anyhow::anyhow;
use chrono::Utc;
use sluice_kafka::ResilientProducer;
use sluice_loadgen::{AnalyzerConfig, analysis};
use sluice_storage::StorageSettings;
use sqlx::PgConnection;
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The analyzer's thread and the flags that start and stop its sending.
pub(super) struct Analyzer {
    stop: Arc<AtomicBool>,
    go: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Analyzer {
    /// Starts the analyzer's thread: it sends its warm-up message, then waits for [`Analyzer::go`].
    pub(super) fn spawn(
        settings: &StorageSettings,
        apps: &[String],
        interval: f64,
        crawl: u32,
    ) -> Analyzer {
        let analyzer_stop = Arc::new(AtomicBool::new(false));
        let analyzer_go = Arc::new(AtomicBool::new(false));
        let thread = {
            let (settings, apps) = (settings.clone(), apps.to_vec());
            let (stop, go) = (Arc::clone(&analyzer_stop), Arc::clone(&analyzer_go));
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                match runtime {
                    Ok(rt) => rt.block_on(analyzer_loop(settings, apps, interval, crawl, stop, go)),
                    Err(error) => {
                        eprintln!("analyzer: {error}");
                        0
                    }
                }
            })
        };
        Analyzer {
            stop: analyzer_stop,
            go: analyzer_go,
            thread,
        }
    }

    /// Starts the measured sending.
    pub(super) fn go(&self) {
        self.go.store(true, Ordering::Relaxed);
    }

    /// Stops the sending and waits for the thread: how many messages it delivered.
    pub(super) fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}

/// The analyzer's generator settings for `crawl`.
pub(super) fn analyzer_config(apps: Vec<String>, crawl: u32) -> AnalyzerConfig {
    AnalyzerConfig {
        apps,
        seed: u64::from(crawl),
    }
}

/// The analyzer's unmeasured first message.
fn warm_up(config: &AnalyzerConfig) -> sluice_loadgen::Generated {
    analysis(config, u64::MAX, Utc::now() - chrono::Duration::days(1))
}

/// Waits (at most 60 s) until the analyzer's warm-up message is in PostgreSQL.
pub(super) async fn wait_for_warm_up(
    conn: &mut PgConnection,
    config: &AnalyzerConfig,
    child: &mut Child,
    log: &std::path::Path,
) -> Result<(), Failure> {
    let id = String::from_utf8_lossy(&warm_up(config).key).into_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait()? {
            return Err(anyhow!("the consumer exited with {status}; see {}", log.display()).into());
        }
        let seen: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM network_metrics WHERE analysis_id = $1::uuid)",
        )
        .bind(&id)
        .fetch_one(&mut *conn)
        .await?;
        if seen {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(anyhow!("the analyzer's warm-up message did not land within 60 s").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends the warm-up message, then one analysis every `interval` seconds from `go` to
/// `stop`; returns how many of those were delivered.
async fn analyzer_loop(
    settings: StorageSettings,
    apps: Vec<String>,
    interval: f64,
    crawl: u32,
    stop: Arc<AtomicBool>,
    go: Arc<AtomicBool>,
) -> u64 {
    let Ok(producer) = ResilientProducer::new(&settings.kafka, "sluice-demo-analyzer") else {
        return 0;
    };
    let config = analyzer_config(apps, crawl);
    let hidden = indicatif::ProgressBar::hidden();
    let warm = warm_up(&config);
    if let Err(error) = send_all(
        &settings,
        &producer,
        std::slice::from_ref(&warm),
        0,
        &hidden,
    )
    .await
    {
        eprintln!("analyzer: {:#}", error.error());
    }
    while !go.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut delivered = 0;
    for n in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let record = analysis(&config, n, Utc::now());
        match send_all(
            &settings,
            &producer,
            std::slice::from_ref(&record),
            0,
            &hidden,
        )
        .await
        {
            Ok(n) => delivered += n,
            Err(error) => eprintln!("analyzer: {:#}", error.error()),
        }
        tokio::time::sleep(Duration::from_secs_f64(interval.max(0.05))).await;
    }
    delivered
}
