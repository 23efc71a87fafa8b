//! The reader's offset commits (docs/ARCHITECTURE.md#batch-loop): the writers' reports, each
//! stored batch's offsets committed synchronously only once its transaction committed, and
//! the lag measured from the reader's thread.

use super::flights::Flights;
use super::{Stored, WriterEvent};
use crate::batch::Behind;
use crate::error::{MAX_CONSECUTIVE_COMMIT_FAILURES, PipelineError, PipelineTotals};
use crate::events::{BatchCommitted, OffsetCommitFailed};
use crate::metrics::PipelineMetrics;
use sluice_kafka::BatchConsumer;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

/// How often the reader measures its lag, from the high watermarks its fetches carry.
pub const LAG_INTERVAL: Duration = Duration::from_secs(2);
/// How often that measurement asks the broker instead (a round trip per partition, which
/// holds up the reader: done every 2 s it delayed 1 in 20 records by up to ~100 ms while the
/// machine was busy; measured with `sluice-lab bench`).
pub const LAG_BROKER_INTERVAL: Duration = Duration::from_secs(30);

/// The reader's side of the writers' reports: commits each stored batch's offsets, counts
/// what was committed, and measures the lag.
pub(super) struct Committer {
    /// The pipeline's name, on the reader's own log lines.
    pub(super) name: String,
    /// What the batches committed so far did.
    pub(super) totals: PipelineTotals,
    failures: u32,
    metrics: PipelineMetrics,
    /// The newest Kafka timestamp among the records of the last committed batch.
    last_timestamp_ms: Option<i64>,
    started_ms: i64,
    lag_partitions: Vec<(String, i32)>,
    /// The consumer's rebalance counts already exported.
    rebalances_seen: [u64; 3],
    next_lag: Instant,
    next_broker_lag: Instant,
    /// Test-only: the stored batch after which the process kills itself ([`crate::failpoint`]).
    kill_after: Option<u64>,
    /// Partitions the writers found behind in PostgreSQL, with the epoch of their batch's
    /// hand-over, until the reader seeks them.
    pub(super) behind: Vec<(Behind, u64)>,
}

impl Committer {
    /// A committer of pipeline `name` with nothing committed yet, the pipeline starting now.
    pub(super) fn new(name: String, metrics: PipelineMetrics) -> Self {
        Self {
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
            kill_after: crate::failpoint::after_db_commit(),
            behind: Vec::new(),
        }
    }

    /// Every [`LAG_INTERVAL`]: the assignment, the lag per partition and its age in seconds.
    /// The age is an estimate: while records are left, now minus the Kafka timestamp of the
    /// last record committed (or minus the pipeline's start, before its first commit); 0 when
    /// nothing is left.
    pub(super) fn observe_lag(&mut self, consumer: &BatchConsumer) {
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
        // Assigned as the client says: the lag of a partition whose statistics have not come
        // yet (its first 2 s) is left out.
        let assigned = consumer
            .assigned_partitions()
            .map_or(!lags.is_empty(), |partitions| !partitions.is_empty());
        self.metrics.set_assigned(assigned);
        let behind = lags.iter().any(|(_, _, lag)| *lag > 0);
        let seconds = if behind {
            let since = self.last_timestamp_ms.unwrap_or(self.started_ms);
            let age_ms = chrono::Utc::now().timestamp_millis() - since;
            (age_ms.max(0) as f64) / 1000.0
        } else {
            0.0
        };
        self.metrics.set_lag(&lags, &self.lag_partitions, seconds);
        self.lag_partitions = lags.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
    }

    /// Handles every writer event already waiting (commits the stored batches); `Ok(false)`
    /// if every writer is gone.
    pub(super) fn commit_ready(
        &mut self,
        consumer: &BatchConsumer,
        events: &Receiver<WriterEvent>,
        flights: &mut Flights,
    ) -> Result<bool, PipelineError> {
        loop {
            match events.try_recv() {
                Ok(event) => self.handle(consumer, event, flights)?,
                Err(TryRecvError::Empty) => return Ok(true),
                Err(TryRecvError::Disconnected) => return Ok(false),
            }
        }
    }

    /// Waits up to `wait` for a writer's report and handles it; `Ok(false)` if every writer
    /// is gone.
    pub(super) fn await_report(
        &mut self,
        consumer: &BatchConsumer,
        events: &Receiver<WriterEvent>,
        flights: &mut Flights,
        wait: Duration,
    ) -> Result<bool, PipelineError> {
        match events.recv_timeout(wait) {
            Ok(event) => self.handle(consumer, event, flights).map(|()| true),
            Err(RecvTimeoutError::Timeout) => Ok(true),
            Err(RecvTimeoutError::Disconnected) => Ok(false),
        }
    }

    /// Commits a stored batch's offsets (its partition's next batch may go), or notes a
    /// batch taken from the writers' channel.
    pub(super) fn handle(
        &mut self,
        consumer: &BatchConsumer,
        event: WriterEvent,
        flights: &mut Flights,
    ) -> Result<(), PipelineError> {
        match event {
            WriterEvent::Took(partition) => {
                flights.took(&partition);
                Ok(())
            }
            WriterEvent::Stored(done) => {
                flights.settled(&done.partition);
                self.commit(consumer, *done)
            }
        }
    }

    /// Only now, with the transaction committed, does the offset move.
    fn commit(&mut self, consumer: &BatchConsumer, done: Stored) -> Result<(), PipelineError> {
        let Stored {
            partition: _,
            writer,
            records,
            report,
            tables,
            behind,
            epoch,
            mut phases,
        } = done;
        self.behind.extend(behind.into_iter().map(|b| (b, epoch)));
        if records.is_empty() {
            return Ok(()); // every partition of the batch is read again
        }
        if self.kill_after == Some(self.totals.batches + 1) {
            crate::failpoint::kill_self();
        }
        let committing = Instant::now();
        let committed = consumer.commit(&records);
        match committed {
            Ok(()) => self.failures = 0,
            Err(ref error) => {
                self.failures += 1;
                OffsetCommitFailed {
                    metrics: &self.metrics,
                    error,
                    consecutive: self.failures,
                }
                .emit();
            }
        }
        phases.commit = committing.elapsed();
        self.totals.batches += 1;
        self.totals.report += report;
        // Writers finish out of order: the age estimate follows the newest record committed.
        if let Some(newest) = records.iter().filter_map(|r| r.timestamp_ms).max() {
            self.last_timestamp_ms = Some(self.last_timestamp_ms.map_or(newest, |t| t.max(newest)));
        }
        BatchCommitted {
            metrics: &self.metrics,
            records: &records,
            writer,
            report: &report,
            tables: &tables,
            phases: &phases,
            offsets_committed: committed.is_ok(),
        }
        .emit();
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
