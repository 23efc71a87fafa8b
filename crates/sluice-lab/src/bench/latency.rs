//! The latency probe: network-metrics messages produced at a steady rate while the reviews
//! backlog drains, each timed from just before it is sent until its row is visible
//! (committed) in PostgreSQL.

use crate::Failure;
use chrono::Utc;
use sluice_kafka::ResilientProducer;
use sluice_kafka::producer::Outgoing;
use sluice_loadgen::{AnalyzerConfig, analysis};
use sluice_storage::StorageSettings;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Percentiles of the probe.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Messages measured.
    pub count: usize,
    /// Median, ms.
    pub p50: f64,
    /// 99th percentile, ms.
    pub p99: f64,
    /// Maximum, ms.
    pub max: f64,
    /// Every measured latency, ms, ascending.
    pub samples: Vec<f64>,
}

type Sent = Arc<Mutex<Vec<(uuid::Uuid, Instant)>>>;
type Seen = Arc<Mutex<HashMap<uuid::Uuid, Instant>>>;

/// A running probe: a sender thread and a watcher thread that polls PostgreSQL every
/// couple of milliseconds for the rows of messages not yet seen.
#[derive(Debug)]
pub struct Probe {
    running: Arc<AtomicBool>,
    started: Arc<AtomicBool>,
    watching: Arc<AtomicBool>,
    sent: Sent,
    seen: Seen,
    sender: Mutex<Option<std::thread::JoinHandle<()>>>,
    watcher: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Probe {
    /// Prepares the sender thread (it waits for [`Probe::start`]).
    pub fn new(
        settings: &StorageSettings,
        url: &str,
        apps: &[String],
        rate: f64,
    ) -> Result<Probe, Failure> {
        let topic = settings
            .pipeline(sluice_core::PipelineKind::NetworkMetrics)
            .map(|p| p.topic.clone())
            .unwrap_or_default();
        let producer = probe_producer(settings)?;
        let running = Arc::new(AtomicBool::new(true));
        let started = Arc::new(AtomicBool::new(false));
        let sent: Sent = Arc::default();
        let sender = Sender {
            producer,
            topic,
            config: AnalyzerConfig {
                apps: apps.to_vec(),
                seed: 99,
            },
            interval: Duration::from_secs_f64(1.0 / rate.max(0.1)),
            running: Arc::clone(&running),
            started: Arc::clone(&started),
            sent: Arc::clone(&sent),
        }
        .spawn();
        let watching = Arc::new(AtomicBool::new(true));
        let seen: Seen = Arc::default();
        let watcher = {
            let (watching, sent, seen, url) = (
                Arc::clone(&watching),
                Arc::clone(&sent),
                Arc::clone(&seen),
                url.to_owned(),
            );
            std::thread::spawn(move || watch(&url, &watching, &sent, &seen))
        };
        Ok(Probe {
            running,
            started,
            watching,
            sent,
            seen,
            sender: Mutex::new(Some(sender)),
            watcher: Mutex::new(Some(watcher)),
        })
    }

    /// Starts sending.
    pub fn start(&self) {
        self.started.store(true, Ordering::Relaxed);
    }

    /// Stops sending.
    pub fn stop(&self) {
        self.running.store(false, Ordering::Relaxed);
        if let Ok(mut sender) = self.sender.lock()
            && let Some(handle) = sender.take()
        {
            let _ = handle.join();
        }
    }

    /// Waits until every sent message is visible (at most 30 s), then stops the watcher.
    pub async fn wait_drained(&self) -> Result<(), Failure> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let sent = self.sent.lock().map(|s| s.len()).unwrap_or(0);
            let seen = self.seen.lock().map(|s| s.len()).unwrap_or(0);
            if seen >= sent || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.watching.store(false, Ordering::Relaxed);
        if let Ok(mut watcher) = self.watcher.lock()
            && let Some(handle) = watcher.take()
        {
            let _ = handle.join();
        }
        Ok(())
    }

    /// Latency of each message: from just before its send to the first poll that saw its
    /// row (committed rows only are visible; the poll interval bounds the error).
    pub async fn finish(&self) -> Result<Summary, Failure> {
        let seen = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
        let sent = self.sent.lock().map(|s| s.clone()).unwrap_or_default();
        let mut ms: Vec<f64> = sent
            .iter()
            .filter_map(|(id, at)| {
                seen.get(id)
                    .map(|v| v.duration_since(*at).as_secs_f64() * 1000.0)
            })
            .collect();
        ms.sort_by(f64::total_cmp);
        let pick = |q: f64| {
            ms.get(((ms.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or(0.0)
        };
        Ok(Summary {
            count: ms.len(),
            p50: pick(0.5),
            p99: pick(0.99),
            max: ms.last().copied().unwrap_or(0.0),
            samples: ms,
        })
    }
}

/// The probe's producer. The latency measured is sluice's (broker → row visible), so the
/// probe's own producer does not wait the default 20 ms linger before sending.
fn probe_producer(settings: &StorageSettings) -> Result<ResilientProducer, Failure> {
    Ok(ResilientProducer::with_timings(
        &settings.kafka,
        "sluice-bench-probe",
        Duration::from_secs(30),
        Duration::from_millis(1),
        64 << 20,
    )?)
}

/// The sender thread's part of the probe: what it sends, how often, and the flags and log it
/// shares with [`Probe`].
struct Sender {
    producer: ResilientProducer,
    topic: String,
    config: AnalyzerConfig,
    interval: Duration,
    running: Arc<AtomicBool>,
    started: Arc<AtomicBool>,
    sent: Sent,
}

impl Sender {
    /// Starts the sender thread, on a runtime of its own.
    fn spawn(self) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(self.run());
        })
    }

    /// Warms the producer up, waits for the start, then sends one analysis per interval
    /// until stopped, logging each one sent with the instant just before its send.
    async fn run(self) {
        let Sender {
            producer,
            topic,
            config,
            interval,
            running: run,
            started: go,
            sent: log,
        } = self;
        // Warm the producer up (metadata, producer id) with one unmeasured message.
        let warm = analysis(&config, u64::MAX, Utc::now());
        let _ = producer
            .send(Outgoing {
                topic: &topic,
                key: Some(&warm.key),
                payload: warm.payload.as_deref().unwrap_or_default(),
                partition: None,
                headers: &[],
            })
            .await;
        while !go.load(Ordering::Relaxed) && run.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut n = 0u64;
        while run.load(Ordering::Relaxed) {
            let record = analysis(&config, n, Utc::now());
            n += 1;
            let id = String::from_utf8_lossy(&record.key)
                .parse::<uuid::Uuid>()
                .unwrap_or_default();
            let at = Instant::now();
            let outgoing = Outgoing {
                topic: &topic,
                key: Some(&record.key),
                payload: record.payload.as_deref().unwrap_or_default(),
                partition: None,
                headers: &[],
            };
            if producer.send(outgoing).await.is_ok()
                && let Ok(mut sent) = log.lock()
            {
                sent.push((id, at));
            }
            tokio::time::sleep(interval).await;
        }
    }
}

/// Polls for rows of sent-but-unseen messages until told to stop.
fn watch(url: &str, watching: &AtomicBool, sent: &Sent, seen: &Seen) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async {
        let Ok(mut conn) = sluice_postgres::connect(url, "bench").await else {
            return;
        };
        while watching.load(Ordering::Relaxed) {
            let pending: Vec<uuid::Uuid> = {
                let seen = seen
                    .lock()
                    .map(|s| s.keys().copied().collect::<Vec<_>>())
                    .unwrap_or_default();
                sent.lock()
                    .map(|s| {
                        s.iter()
                            .map(|(id, _)| *id)
                            .filter(|id| !seen.contains(id))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            if !pending.is_empty() {
                let found: Vec<uuid::Uuid> = sqlx::query_scalar(
                    "SELECT analysis_id FROM network_metrics WHERE analysis_id = ANY($1)",
                )
                .bind(&pending)
                .fetch_all(&mut conn)
                .await
                .unwrap_or_default();
                let now = Instant::now();
                if let Ok(mut seen) = seen.lock() {
                    for id in found {
                        seen.entry(id).or_insert(now);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
}
