//! The Kafka side of a pipeline, on its own thread: poll and decode the next batches while
//! the writers store the current ones, and commit each batch's offsets as soon as its writer
//! reports its transaction committed.
//!
//! Invariant: offsets are committed only for batches that come back as
//! [`WriterEvent::Stored`], that is, after their PostgreSQL transaction committed; and
//! synchronously, so a failed commit is seen and counted (five in a row are fatal,
//! docs/ARCHITECTURE.md#batch-loop). A batch holds the records of one writer's partitions
//! only (each partition has one writer for good, [`crate::lanes`]), so committing it moves only
//! partitions whose every earlier batch that writer already stored. The read-ahead is
//! bounded (per writer: two batches in its lane, one in its channel, one being stored); it
//! was never committed, so dropping it on shutdown or on a rebalance only means it is
//! redelivered. A writer that stays behind stalls only its own partitions: they are paused
//! while the reader polls the others ([`crate::held`]).
//!
//! The reader knows where each partition's fetch continued from ([`crate::origins`]) and hands
//! it over with each batch; a partition a writer finds behind in PostgreSQL is sought back to
//! PostgreSQL's offset before any more of its records is handed over (`rewind`).

use crate::batch::{Behind, DecodedBatch, decode_batch};
use crate::error::{MAX_CONSECUTIVE_COMMIT_FAILURES, PipelineError, PipelineTotals};
use crate::events::{BatchCommitted, OffsetCommitFailed, Phases};
use crate::heartbeat::ReaderLiveness;
use crate::held::Holds;
use crate::lanes::Lanes;
use crate::linger::Linger;
use crate::metrics::PipelineMetrics;
use crate::origins::{Origins, Positions};
use crate::sink::Declared;
use sluice_core::BatchReport;
use sluice_kafka::{BatchConsumer, Record};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The longest a poll waits while partitions are held back.
const HELD_SLICE: Duration = Duration::from_millis(10);

/// A polled and decoded batch, on its way to a writer.
#[derive(Debug)]
pub struct Polled {
    /// The records.
    pub records: Vec<Record>,
    /// Their decoding.
    pub decoded: DecodedBatch,
    /// Where each of its partitions' fetch continued from ([`crate::origins`]).
    pub origins: Origins,
    /// The reader's count of positionings when it was handed over.
    pub epoch: u64,
    /// Time spent so far.
    pub phases: Phases,
}

/// A batch whose transaction committed, on its way back for the offset commit.
#[derive(Debug)]
pub struct Stored {
    /// The records whose offsets are committed (only their coordinates are used: the writer
    /// dropped their keys, values and headers): the batch's, less those of the partitions in
    /// `behind`.
    pub records: Vec<Record>,
    /// What the batch did.
    pub report: BatchReport,
    /// Partitions none of whose records were written: PostgreSQL's offset is behind where
    /// their fetch continued; the reader seeks them there.
    pub behind: Vec<Behind>,
    /// The reader's count of positionings when the batch was handed over.
    pub epoch: u64,
    /// Time spent so far.
    pub phases: Phases,
}

/// What a writer tells the reader.
#[derive(Debug)]
pub enum WriterEvent {
    /// Writer `.0` took a batch from its channel: there is room for the next one.
    Took(usize),
    /// A batch's transaction committed: its offsets may be committed.
    Stored(Box<Stored>),
}

/// Everything the reader thread owns, moved in once at spawn.
#[derive(Debug)]
pub struct ReaderParts {
    /// The pipeline's sink (shared with its writers): the reader decodes with it.
    pub sink: Arc<Declared>,
    /// The pipeline's name, on the reader's own log lines.
    pub name: String,
    /// The pipeline's consumer, subscribed to its topic.
    pub consumer: BatchConsumer,
    /// Records per batch handed to a writer, at most.
    pub batch_size: usize,
    /// Bytes of records per batch handed to a writer, at most (a larger record goes alone).
    pub batch_bytes: usize,
    /// The longest one wait for records lasts.
    pub poll_timeout: Duration,
    /// How long a busy pipeline's partial batch waits to fill ([`crate::linger`]).
    pub linger: Duration,
    /// Each writer's channel, in writer order (a partition's batches go to the writer of its
    /// lane, [`crate::lanes`]).
    pub to_writers: Vec<SyncSender<Polled>>,
    /// What the writers report back: a batch taken, a batch stored.
    pub events: Receiver<WriterEvent>,
    /// Cancelled to stop the pipeline.
    pub stop: CancellationToken,
    /// The reader's progress, watched by the heartbeat.
    pub liveness: ReaderLiveness,
    /// The pipeline's metric handles.
    pub metrics: PipelineMetrics,
}

/// Runs the Kafka side until `stop`, a fatal error, or a writer hanging up; then commits
/// every batch the writers stored and closes the consumer (leaving the group).
/// `parts.poll_timeout` bounds each wait for records; each writer's batches hold up to
/// `parts.batch_size` records and `parts.batch_bytes` bytes.
pub fn run_reader(parts: ReaderParts) -> Result<PipelineTotals, PipelineError> {
    let ReaderParts {
        sink,
        name,
        mut consumer,
        batch_size,
        batch_bytes,
        poll_timeout,
        linger,
        to_writers,
        events,
        stop,
        liveness,
        metrics,
    } = parts;
    let sink = &*sink;
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
        kill_after: crate::failpoint::after_db_commit(),
        behind: Vec::new(),
    };
    let mut positions = Positions::default();
    let mut lanes = Lanes::new(to_writers.len(), batch_size, batch_bytes);
    let mut linger = Linger::new(linger);
    let mut holds = Holds::new(lanes.count());
    // Batches in each writer's channel (sent, not yet taken): one at most.
    let mut queued = vec![0usize; to_writers.len()];
    let mut revocations = consumer.rebalances().revoke;
    // Poll in short slices so stored batches are committed promptly when the topic is idle.
    let slice = poll_timeout.min(Duration::from_millis(100));
    // Whether the last poll took everything the client had (hand over partial batches).
    let mut caught_up = false;
    let outcome = loop {
        liveness.turn();
        // Commit what the writers finished, first.
        match committer.commit_ready(&consumer, &events, &mut queued) {
            Ok(true) => {}
            Ok(false) => break Ok(()), // every writer is gone
            Err(error) => break Err(error),
        }
        holds.writers_ready(&queued);
        if stop.is_cancelled() {
            break Ok(());
        }
        // Before anything more is handed over: partitions behind in PostgreSQL are read
        // again from there.
        let behind = std::mem::take(&mut committer.behind);
        if let Err(error) = rewind(
            &consumer,
            &mut lanes,
            &mut positions,
            behind,
            &committer.name,
        ) {
            break Err(error);
        }
        committer.observe_lag(&consumer);
        forget_revoked(&consumer, &mut lanes, &mut revocations, &committer.name);
        let partial = if caught_up {
            Partial::AfterLinger(&linger, Instant::now())
        } else {
            Partial::Never
        };
        let Ok(lingering) = hand_over(
            sink,
            &mut lanes,
            &mut positions,
            &to_writers,
            &mut queued,
            partial,
        ) else {
            break Ok(()); // a writer stopped; the batches stored are committed below
        };
        if lanes.any_full() {
            // Before waiting, give every writer with room whatever its lane holds.
            let handed = hand_over(
                sink,
                &mut lanes,
                &mut positions,
                &to_writers,
                &mut queued,
                Partial::Always,
            );
            if handed.is_err() {
                break Ok(());
            }
        }
        // A lane full for a moment: wait for its writer. Full for longer: its writer is
        // stuck, so hold its partitions back and poll the others (crate::held).
        let next = holds.next(&lanes, Instant::now());
        let held = !next.held.is_empty();
        let unheld = match consumer.hold(&next.held) {
            Ok(()) => false,
            Err(error) => {
                tracing::warn!(pipeline = %committer.name, %error,
                    "cannot pause the partitions of a writer that is behind; waiting for it");
                true
            }
        };
        if next.wait || unheld {
            liveness.waiting_for_writer();
            match committer.await_report(&consumer, &events, &mut queued, slice) {
                Ok(true) => continue,
                Ok(false) => break Ok(()), // every writer is gone
                Err(error) => break Err(error),
            }
        }
        // While partitions are held back, poll in short slices: their writer's next report
        // is handled (and the partitions released) promptly.
        let slice = if held { HELD_SLICE.min(slice) } else { slice };
        if let Some(due) = lingering {
            // A batch lingers: let the client's queue fill until it is due instead of waking
            // for every fetch (the writers' reports are still handled as they come), then
            // poll what arrived meanwhile; it is handed over on the next turn.
            let wait = due.saturating_duration_since(Instant::now());
            match committer.await_report(&consumer, &events, &mut queued, wait) {
                Ok(true) => {}
                Ok(false) => break Ok(()),
                Err(error) => break Err(error),
            }
        }
        let slice = if lingering.is_some() {
            Duration::ZERO
        } else {
            slice
        };
        let polled_at = Instant::now();
        let polled = consumer.poll_batch(batch_size, batch_bytes, slice);
        // A consumer error that keeps coming back makes the pipeline unhealthy at once,
        // before it becomes fatal.
        liveness.set_failing(consumer.is_failing());
        let records = match polled {
            Ok(records) => records,
            Err(error) => break Err(PipelineError::Consume(error)),
        };
        if let Some(reason) = consumer.take_unpositioned() {
            // The records of this poll may start past what PostgreSQL holds: drop them and
            // start again (nothing read since the assignment was handed to a writer).
            break Err(PipelineError::StartUnknown { reason });
        }
        // A partition assigned again starts afresh: what the lanes hold of it is of the
        // previous assignment (this poll's records of it were fetched after).
        for (topic, partition, start) in consumer.take_starts() {
            lanes.drop_partition(&topic, partition);
            positions.assigned(&topic, partition, start);
        }
        caught_up = records.len() < batch_size
            && records.iter().map(Record::bytes).sum::<usize>() < batch_bytes;
        let now = Instant::now();
        linger.read(records.len(), now);
        lanes.push(records, now.saturating_duration_since(polled_at));
        lanes.stamp(now);
    };
    // Hang up so the writers stop taking batches, then commit what they finish.
    drop(to_writers);
    let drained = loop {
        match events.recv() {
            Ok(event) => {
                if let Err(error) = committer.handle(&consumer, event, &mut queued) {
                    break Err(error);
                }
            }
            Err(_) => break Ok(()),
        }
    };
    consumer.close();
    outcome.and(drained).map(|()| committer.totals)
}

/// A writer's channel is gone (it stopped).
#[derive(Debug)]
struct WriterGone;

/// Which lanes may hand over fewer records than a batch.
enum Partial<'a> {
    /// None: only full batches.
    Never,
    /// Every lane, whatever it holds.
    Always,
    /// A lane whose linger ended at this time ([`crate::linger`]).
    AfterLinger(&'a Linger, Instant),
}

/// Hands each writer with room in its channel (`queued[lane] == 0`) its lane's next batch:
/// a full one, or a partial one as `partial` allows. Decodes each batch on the way.
/// Returns when the earliest lane kept back by its linger is due, if one is.
fn hand_over(
    sink: &Declared,
    lanes: &mut Lanes,
    positions: &mut Positions,
    to_writers: &[SyncSender<Polled>],
    queued: &mut [usize],
    partial: Partial<'_>,
) -> Result<Option<Instant>, WriterGone> {
    let mut lingering: Option<Instant> = None;
    for (lane, to_writer) in to_writers.iter().enumerate() {
        if queued[lane] > 0 {
            continue;
        }
        let may_be_partial = match &partial {
            Partial::Never => false,
            Partial::Always => true,
            Partial::AfterLinger(linger, now) => match lanes.since(lane) {
                None => true,
                Some(first) => match linger.release(first, *now) {
                    Ok(()) => true,
                    Err(due) => {
                        lingering = Some(lingering.map_or(due, |d| d.min(due)));
                        false
                    }
                },
            },
        };
        let Some((records, poll)) = lanes.take(lane, may_be_partial) else {
            continue;
        };
        let decoding = Instant::now();
        let decoded = decode_batch(sink, &records);
        let phases = Phases {
            poll,
            decode: decoding.elapsed(),
            ..Phases::default()
        };
        let origins = positions.origins(&records);
        positions.handed(&records);
        match to_writer.try_send(Polled {
            records,
            decoded,
            origins,
            epoch: positions.epoch(),
            phases,
        }) {
            Ok(()) => queued[lane] += 1,
            Err(TrySendError::Full(batch)) => {
                // Not expected (the channel was counted empty); keep the records in order.
                positions.restore(&batch.origins);
                lanes.put_back(lane, batch.records, batch.phases.poll);
            }
            Err(TrySendError::Disconnected(_)) => return Err(WriterGone),
        }
    }
    Ok(lingering)
}

/// Seeks each partition a writer found behind in PostgreSQL to PostgreSQL's offset, unless it
/// was positioned again since that batch was handed over (a later report, or a new
/// assignment, which starts at PostgreSQL's offset anyway), and drops what the lanes hold of
/// it: its records are read again from there (docs/ARCHITECTURE.md#offsets). A partition no
/// longer assigned is left to its new owner; a seek that fails otherwise starts the pipeline
/// again from PostgreSQL's offsets.
fn rewind(
    consumer: &BatchConsumer,
    lanes: &mut Lanes,
    positions: &mut Positions,
    behind: Vec<(Behind, u64)>,
    name: &str,
) -> Result<(), PipelineError> {
    for (b, epoch) in behind {
        if positions.positioned_since(&b.topic, b.partition, epoch) {
            tracing::debug!(pipeline = %name, topic = %b.topic, partition = b.partition,
                postgres = b.postgres, "partition positioned again since; no seek");
            continue;
        }
        let dropped = lanes.drop_partition(&b.topic, b.partition);
        tracing::warn!(pipeline = %name, topic = %b.topic, partition = b.partition,
            postgres = b.postgres, fetched_from = b.fetched_from, dropped,
            "PostgreSQL's offset is behind where this partition was read from; rewinding the \
             partition to it");
        match consumer.seek(&b.topic, b.partition, b.postgres) {
            Ok(()) => positions.sought(&b.topic, b.partition, b.postgres),
            Err(error) => {
                let assigned = consumer
                    .assigned_partitions()
                    .is_ok_and(|held| held.iter().any(|(t, p)| *p == b.partition && *t == b.topic));
                if assigned {
                    tracing::warn!(pipeline = %name, topic = %b.topic, partition = b.partition,
                        %error, "cannot seek the partition; starting again instead");
                    return Err(PipelineError::Rewound {
                        topic: b.topic,
                        partition: b.partition,
                        postgres: Some(b.postgres),
                        committed: b.fetched_from,
                    });
                }
                tracing::info!(pipeline = %name, topic = %b.topic, partition = b.partition,
                    "the partition was revoked meanwhile; its new owner starts at PostgreSQL's offset");
            }
        }
    }
    Ok(())
}

/// After a revocation, drops the lanes' records of partitions this consumer no longer holds:
/// they were never committed, and their new owner reads them again.
fn forget_revoked(consumer: &BatchConsumer, lanes: &mut Lanes, revocations: &mut u64, name: &str) {
    let now = consumer.rebalances().revoke;
    if now == *revocations || lanes.is_empty() {
        *revocations = now;
        return;
    }
    match consumer.assigned_partitions() {
        Ok(held) => {
            *revocations = now;
            let dropped = lanes.retain_partitions(&held);
            if dropped > 0 {
                tracing::info!(pipeline = %name, dropped, held = ?held,
                    "dropped records read ahead of partitions revoked; their new owner reads them");
            }
        }
        Err(error) => {
            tracing::debug!(pipeline = %name, %error, "cannot read the assignment");
        }
    }
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
    lag_partitions: Vec<(String, i32)>,
    /// The consumer's rebalance counts already exported.
    rebalances_seen: [u64; 3],
    next_lag: Instant,
    next_broker_lag: Instant,
    /// Test-only: the stored batch after which the process kills itself ([`crate::failpoint`]).
    kill_after: Option<u64>,
    /// Partitions the writers found behind in PostgreSQL, with the epoch of their batch's
    /// hand-over, until the reader seeks them.
    behind: Vec<(Behind, u64)>,
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
    fn commit_ready(
        &mut self,
        consumer: &BatchConsumer,
        events: &Receiver<WriterEvent>,
        queued: &mut [usize],
    ) -> Result<bool, PipelineError> {
        loop {
            match events.try_recv() {
                Ok(event) => self.handle(consumer, event, queued)?,
                Err(TryRecvError::Empty) => return Ok(true),
                Err(TryRecvError::Disconnected) => return Ok(false),
            }
        }
    }

    /// Waits up to `wait` for a writer's report and handles it; `Ok(false)` if every writer
    /// is gone.
    fn await_report(
        &mut self,
        consumer: &BatchConsumer,
        events: &Receiver<WriterEvent>,
        queued: &mut [usize],
        wait: Duration,
    ) -> Result<bool, PipelineError> {
        match events.recv_timeout(wait) {
            Ok(event) => self.handle(consumer, event, queued).map(|()| true),
            Err(RecvTimeoutError::Timeout) => Ok(true),
            Err(RecvTimeoutError::Disconnected) => Ok(false),
        }
    }

    /// Commits a stored batch's offsets, or counts a batch taken from a writer's channel.
    fn handle(
        &mut self,
        consumer: &BatchConsumer,
        event: WriterEvent,
        queued: &mut [usize],
    ) -> Result<(), PipelineError> {
        match event {
            WriterEvent::Took(lane) => {
                if let Some(n) = queued.get_mut(lane) {
                    *n = n.saturating_sub(1);
                }
                Ok(())
            }
            WriterEvent::Stored(done) => self.commit(consumer, *done),
        }
    }

    /// Only now, with the transaction committed, does the offset move.
    fn commit(&mut self, consumer: &BatchConsumer, done: Stored) -> Result<(), PipelineError> {
        let Stored {
            records,
            report,
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
            report: &report,
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
