//! The Kafka side of a pipeline, on its own thread: poll and decode the next batch while
//! the database side stores the current one, and commit each batch's offsets as soon as
//! the database side reports its transaction committed.
//!
//! Invariant: offsets are committed only for batches that come back on the `stored`
//! channel, that is, after their PostgreSQL transaction committed; and synchronously, so a
//! failed commit is seen and counted (five in a row are fatal, docs/ARCHITECTURE.md#batch-loop). At most one
//! batch is read ahead; it was never committed, so dropping it on shutdown or on a
//! rebalance only means it is redelivered.

use crate::batch::{Decoded, decode_batch};
use crate::heartbeat::ReaderLiveness;
use crate::metrics::PipelineMetrics;
use crate::pipeline::{MAX_CONSECUTIVE_COMMIT_FAILURES, PipelineError, PipelineTotals};
use crate::sink::StorageSink;
use sluice_core::BatchReport;
use sluice_kafka::{BatchConsumer, Record};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A polled and decoded batch, on its way to the database side.
#[derive(Debug)]
pub struct Polled<M> {
    /// The records.
    pub records: Vec<Record>,
    /// Their decoding.
    pub decoded: Decoded<M>,
    /// Time spent so far.
    pub phases: Phases,
}

/// A batch whose transaction committed, on its way back for the offset commit.
#[derive(Debug)]
pub struct Stored {
    /// The records (only their coordinates are used).
    pub records: Vec<Record>,
    /// What the batch did.
    pub report: BatchReport,
    /// Time spent so far.
    pub phases: Phases,
}

/// Where a batch's time went.
#[derive(Debug, Default, Clone, Copy)]
pub struct Phases {
    /// Waiting for and copying the records out of the client.
    pub poll: Duration,
    /// Decoding and validating.
    pub decode: Duration,
    /// The writer waiting for this batch after finishing the previous one (a non-zero
    /// value means the database side was starved by the Kafka side).
    pub writer_wait: Duration,
    /// The database transaction, retries included.
    pub store: Duration,
    /// The synchronous offset commit.
    pub commit: Duration,
}

/// Runs the Kafka side until `stop`, a fatal error, or the database side hanging up; then
/// commits every batch the database side stored and closes the consumer (leaving the group).
/// `poll_timeout` bounds each wait for records.
#[allow(
    clippy::too_many_arguments,
    reason = "the reader thread's whole world, moved in once at spawn"
)]
pub fn run_reader<S: StorageSink>(
    sink: &S,
    name: String,
    mut consumer: BatchConsumer,
    batch_size: usize,
    poll_timeout: Duration,
    to_writer: SyncSender<Polled<S::Message>>,
    stored: Receiver<Stored>,
    stop: CancellationToken,
    liveness: ReaderLiveness,
    metrics: PipelineMetrics,
) -> Result<PipelineTotals, PipelineError> {
    let mut committer = Committer {
        name,
        totals: PipelineTotals::default(),
        failures: 0,
        metrics,
        last_timestamp_ms: None,
        started_ms: chrono::Utc::now().timestamp_millis(),
        lag_partitions: Vec::new(),
        rebalances_seen: [0; 3],
        next_lag: Instant::now(),
        next_broker_lag: Instant::now(),
    };
    // Poll in short slices so stored batches are committed promptly when the topic is idle.
    let slice = poll_timeout.min(Duration::from_millis(100));
    let outcome = loop {
        liveness.turn();
        // Commit what the database side finished, first.
        match committer.commit_ready(&consumer, &stored) {
            Ok(true) => {}
            Ok(false) => break Ok(()), // the database side is gone
            Err(error) => break Err(error),
        }
        if stop.is_cancelled() {
            break Ok(());
        }
        committer.observe_lag(&consumer);
        let polled_at = Instant::now();
        let polled = consumer.poll_batch(batch_size, slice);
        // A consumer error that keeps coming back makes the pipeline unhealthy at once,
        // before it becomes fatal.
        liveness.set_failing(consumer.is_failing());
        let records = match polled {
            Ok(records) => records,
            Err(error) => break Err(PipelineError::Consume(error)),
        };
        if records.is_empty() {
            continue;
        }
        let decoding = Instant::now();
        let decoded = decode_batch(sink, &records);
        let phases = Phases {
            poll: decoding - polled_at,
            decode: decoding.elapsed(),
            ..Phases::default()
        };
        // Blocks while the writer still has a batch waiting: at most one is read ahead.
        liveness.waiting_for_writer();
        let writer_gone = to_writer
            .send(Polled {
                records,
                decoded,
                phases,
            })
            .is_err();
        liveness.turn();
        if writer_gone {
            break Ok(()); // the writer stopped; its batches are committed below
        }
    };
    // Hang up so the database side stops taking batches, then commit what it finishes.
    drop(to_writer);
    let drained = loop {
        match stored.recv() {
            Ok(done) => {
                if let Err(error) = committer.commit(&consumer, done) {
                    break Err(error);
                }
            }
            Err(_) => break Ok(()),
        }
    };
    consumer.close();
    outcome.and(drained).map(|()| committer.totals)
}

/// How often the reader measures its lag, from the high watermarks its fetches carry.
pub const LAG_INTERVAL: Duration = Duration::from_secs(2);
/// How often that measurement asks the broker instead (a round trip per partition, which
/// holds up the reader: done every 2 s it delayed 1 in 20 records by up to ~100 ms while the
/// machine was busy; measured with `sluice-lab bench`).
pub const LAG_BROKER_INTERVAL: Duration = Duration::from_secs(30);

struct Committer {
    name: String,
    totals: PipelineTotals,
    failures: u32,
    metrics: PipelineMetrics,
    /// The newest Kafka timestamp among the records of the last committed batch.
    last_timestamp_ms: Option<i64>,
    started_ms: i64,
    lag_partitions: Vec<i32>,
    /// The consumer's rebalance counts already exported.
    rebalances_seen: [u64; 3],
    next_lag: Instant,
    next_broker_lag: Instant,
}

impl Committer {
    /// Every [`LAG_INTERVAL`]: the assignment, the lag per partition and its age in seconds.
    /// The age is an estimate: while records are left, now minus the Kafka timestamp of the
    /// last record committed (or minus the pipeline's start, before its first commit); 0 when
    /// nothing is left.
    fn observe_lag(&mut self, consumer: &BatchConsumer) {
        if Instant::now() < self.next_lag {
            return;
        }
        self.next_lag = Instant::now() + LAG_INTERVAL;
        let ask_broker = Instant::now() >= self.next_broker_lag;
        if ask_broker {
            self.next_broker_lag = Instant::now() + LAG_BROKER_INTERVAL;
        }
        self.metrics
            .rebalanced(consumer.rebalances().values(), &mut self.rebalances_seen);
        let lags = match consumer.lag(Duration::from_secs(1), ask_broker) {
            Ok(lags) => lags,
            Err(error) => {
                tracing::debug!(pipeline = %self.name, %error, "cannot measure the lag");
                return;
            }
        };
        self.metrics.set_assigned(!lags.is_empty());
        let behind = lags.iter().any(|(_, lag)| *lag > 0);
        let seconds = if behind {
            let since = self.last_timestamp_ms.unwrap_or(self.started_ms);
            let age_ms = chrono::Utc::now().timestamp_millis() - since;
            (age_ms.max(0) as f64) / 1000.0
        } else {
            0.0
        };
        self.metrics.set_lag(&lags, &self.lag_partitions, seconds);
        self.lag_partitions = lags.iter().map(|(p, _)| *p).collect();
    }

    /// Commits every stored batch already waiting; `Ok(false)` if the sender is gone.
    fn commit_ready(
        &mut self,
        consumer: &BatchConsumer,
        stored: &Receiver<Stored>,
    ) -> Result<bool, PipelineError> {
        loop {
            match stored.try_recv() {
                Ok(done) => self.commit(consumer, done)?,
                Err(TryRecvError::Empty) => return Ok(true),
                Err(TryRecvError::Disconnected) => return Ok(false),
            }
        }
    }

    /// Only now, with the transaction committed, does the offset move.
    fn commit(&mut self, consumer: &BatchConsumer, done: Stored) -> Result<(), PipelineError> {
        let Stored {
            records,
            report,
            mut phases,
        } = done;
        let committing = Instant::now();
        let committed = consumer.commit(&records);
        match committed {
            Ok(()) => self.failures = 0,
            Err(ref error) => {
                self.failures += 1;
                self.metrics.commit_failed();
                tracing::warn!(pipeline = %self.name, %error, consecutive = self.failures,
                    "offset commit failed; the data is durable and will be redelivered as a no-op");
            }
        }
        phases.commit = committing.elapsed();
        self.totals.batches += 1;
        self.totals.report += report;
        if let Some(newest) = records.iter().filter_map(|r| r.timestamp_ms).max() {
            self.last_timestamp_ms = Some(newest);
        }
        self.metrics.batch(
            &report,
            records.len(),
            [phases.poll, phases.decode, phases.store, phases.commit],
        );
        log_batch(&self.name, &report, &records, &phases, committed.is_ok());
        match committed {
            Err(last) if self.failures >= MAX_CONSECUTIVE_COMMIT_FAILURES => {
                Err(PipelineError::CommitFailures {
                    count: self.failures,
                    last,
                })
            }
            _ => Ok(()),
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn log_batch(
    name: &str,
    report: &BatchReport,
    records: &[Record],
    phases: &Phases,
    committed: bool,
) {
    let message = if committed {
        "batch committed"
    } else {
        "batch stored; offset commit failed"
    };
    let partitions: std::collections::BTreeSet<i32> = records.iter().map(|r| r.partition).collect();
    tracing::info!(
        pipeline = %name,
        records = report.records,
        inserted = report.write.inserted,
        updated = report.write.updated,
        skipped = report.write.skipped,
        dead_lettered = report.dead_lettered(),
        decode_errors = report.decode_errors,
        unknown_applications = report.unknown_applications,
        constraint_violations = report.constraint_violations,
        dead_letters_new = report.dead_letters_inserted,
        retries = report.retries,
        partitions = ?partitions,
        poll_us = micros(phases.poll),
        decode_us = micros(phases.decode),
        writer_wait_us = micros(phases.writer_wait),
        store_us = micros(phases.store),
        commit_us = micros(phases.commit),
        "{message}"
    );
}
