//! The Kafka side of a pipeline, on its own thread: poll and decode the next batches while
//! the writers store the current ones, and commit each batch's offsets as soon as its writer
//! reports its transaction committed.
//!
//! Invariant: offsets are committed only for batches that come back as
//! [`WriterEvent::Stored`], that is, after their PostgreSQL transaction committed; and
//! synchronously, so a failed commit is seen and counted (five in a row are fatal,
//! docs/ARCHITECTURE.md#batch-loop). A batch holds the records of one partition, and a
//! partition's next batch is handed over only once the one before is stored (`queues.rs`),
//! so committing it moves only a partition whose every earlier batch is already stored —
//! whichever writer stored it. The read-ahead is bounded (per writer: two batches in the
//! queues, one in the writers' channel, one being stored); it was never committed, so
//! dropping it on shutdown or on a rebalance only means it is redelivered. A writer that
//! waits stalls only its batch's partition: the other writers take the other partitions'
//! batches, and the partition is paused while its queue stays full (`held.rs`).
//!
//! The reader knows where each partition's fetch continued from ([`crate::origins`]) and hands
//! it over with each batch; a partition a writer finds behind in PostgreSQL is sought back to
//! PostgreSQL's offset before any more of its records is handed over (`rewind`).
//!
//! This file holds the reader's loop, one method per step of a turn; `hand_over.rs` what a
//! turn does to the queues (hand over, rewind, forget the revoked), `flights.rs` what the
//! writers' reports move on, `committer.rs` the offset commits and the lag.

mod committer;
mod flights;
mod hand_over;

use crate::batch::{Behind, DecodedBatch};
use crate::error::{PipelineError, PipelineTotals};
use crate::events::Phases;
use crate::heartbeat::ReaderLiveness;
use crate::linger::Linger;
use crate::metrics::PipelineMetrics;
use crate::origins::{Origins, Positions};
use crate::queues::PartitionKey;
use crate::sink::Tables;
use committer::Committer;
use flights::Flights;
use hand_over::{Partial, forget_revoked, hand_over, rewind};
use sluice_core::BatchReport;
use sluice_kafka::{BatchConsumer, Record};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The longest a poll waits while partitions are held back.
const HELD_SLICE: Duration = Duration::from_millis(10);

/// A polled and decoded batch, on its way to a writer.
#[derive(Debug)]
pub struct Polled {
    /// Its partition: every record is of it.
    pub partition: PartitionKey,
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
    /// The batch's partition.
    pub partition: PartitionKey,
    /// The writer that stored it.
    pub writer: usize,
    /// The records whose offsets are committed (only their coordinates are used: the writer
    /// dropped their keys, values and headers): the batch's, less those of the partitions in
    /// `behind`.
    pub records: Vec<Record>,
    /// What the batch did.
    pub report: BatchReport,
    /// Each table's share of it.
    pub tables: crate::by_table::ByTable,
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
    /// A writer took the batch of partition `.0` from the channel: there is room for the
    /// next one.
    Took(PartitionKey),
    /// A batch's transaction committed: its offsets may be committed.
    Stored(Box<Stored>),
}

/// Everything the reader thread owns, moved in once at spawn.
#[derive(Debug)]
pub struct ReaderParts {
    /// The pipeline's sink (shared with its writers): the reader decodes with it.
    pub sink: Arc<Tables>,
    /// The pipeline's name, on the reader's own log lines.
    pub name: String,
    /// The pipeline's consumer, subscribed to its topic.
    pub consumer: BatchConsumer,
    /// Records per batch handed to a writer, at most.
    pub batch_size: usize,
    /// Bytes of records per batch handed to a writer, at most (a larger record goes alone).
    pub batch_bytes: usize,
    /// The writers (each takes the next batch when it is free).
    pub writers: usize,
    /// The longest one wait for records lasts.
    pub poll_timeout: Duration,
    /// How long a busy pipeline's partial batch waits to fill ([`crate::linger`]).
    pub linger: Duration,
    /// The writers' channel: any free writer takes the next batch.
    pub to_writers: crossbeam_channel::Sender<Polled>,
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
    let mut reader = Reader::new(parts);
    let outcome = loop {
        if let ControlFlow::Break(ended) = reader.turn() {
            break ended;
        }
    };
    reader.finish(outcome)
}

/// How the reader's loop ends: `Ok` on a stop or a writer gone, else the fatal error.
type Ended = Result<(), PipelineError>;

/// The reader's state across the turns of its loop: what [`ReaderParts`] moved in, and what
/// it keeps from one poll to the next.
struct Reader {
    /// The pipeline's sink: the reader decodes with it.
    sink: Arc<Tables>,
    /// The pipeline's consumer.
    consumer: BatchConsumer,
    /// Records per batch, at most.
    batch_size: usize,
    /// Bytes of records per batch, at most.
    batch_bytes: usize,
    /// The writers' channel; `None` once the reader hangs up.
    to_writers: Option<crossbeam_channel::Sender<Polled>>,
    /// What the writers report back.
    events: Receiver<WriterEvent>,
    /// Cancelled to stop the pipeline.
    stop: CancellationToken,
    /// The reader's progress, watched by the heartbeat.
    liveness: ReaderLiveness,
    /// Commits the stored batches' offsets.
    committer: Committer,
    /// Where each partition's fetch continued from.
    positions: Positions,
    /// The records read ahead and the batches in flight.
    flights: Flights,
    /// How long a partial batch waits to fill.
    linger: Linger,
    /// The consumer's count of revocations already acted on.
    revocations: u64,
    /// Poll in short slices so stored batches are committed promptly when the topic is idle.
    slice: Duration,
    /// Whether the last poll took everything the client had (hand over partial batches).
    caught_up: bool,
}

/// What the holds call for before the next poll.
struct Holding {
    /// Some partitions are held back.
    held: bool,
    /// Wait for a writer's report instead of polling.
    wait: bool,
}

/// A committer's `Ok(false)` (every writer is gone) or error as the end of the loop.
fn reported(handled: Result<bool, PipelineError>) -> ControlFlow<Ended> {
    match handled {
        Ok(true) => ControlFlow::Continue(()),
        Ok(false) => ControlFlow::Break(Ok(())), // every writer is gone
        Err(error) => ControlFlow::Break(Err(error)),
    }
}

impl Reader {
    /// The reader's state before its first turn.
    fn new(parts: ReaderParts) -> Self {
        let ReaderParts {
            sink,
            name,
            consumer,
            batch_size,
            batch_bytes,
            writers,
            poll_timeout,
            linger,
            to_writers,
            events,
            stop,
            liveness,
            metrics,
        } = parts;
        let committer = Committer::new(name, metrics);
        let positions = Positions::default();
        let flights = Flights::new(writers, batch_size, batch_bytes);
        let linger = Linger::new(linger);
        let revocations = consumer.rebalances().revoke;
        Self {
            sink,
            consumer,
            batch_size,
            batch_bytes,
            to_writers: Some(to_writers),
            events,
            stop,
            liveness,
            committer,
            positions,
            flights,
            linger,
            revocations,
            slice: poll_timeout.min(Duration::from_millis(100)),
            caught_up: false,
        }
    }

    /// One turn of the loop: commit what the writers stored, rewind the partitions behind,
    /// hand over batches, hold back or wait for a stuck writer, poll.
    fn turn(&mut self) -> ControlFlow<Ended> {
        self.liveness.turn();
        // Commit what the writers finished, first.
        reported(
            self.committer
                .commit_ready(&self.consumer, &self.events, &mut self.flights),
        )?;
        if self.stop.is_cancelled() {
            return ControlFlow::Break(Ok(()));
        }
        // Before anything more is handed over: partitions behind in PostgreSQL are read
        // again from there.
        self.rewind_behind()?;
        self.committer.observe_lag(&self.consumer);
        forget_revoked(
            &self.consumer,
            &mut self.flights.queues,
            &mut self.revocations,
            &self.committer.name,
        );
        let lingering = self.hand_over_batches()?;
        let holding = self.hold_back();
        if holding.wait {
            self.liveness.waiting_for_writer();
            let slice = self.slice;
            reported(self.committer.await_report(
                &self.consumer,
                &self.events,
                &mut self.flights,
                slice,
            ))?;
            return ControlFlow::Continue(());
        }
        let slice = self.linger_wait(lingering, holding.held)?;
        self.poll(slice)
    }

    /// Seeks the partitions the writers found behind in PostgreSQL back to PostgreSQL's
    /// offset (`rewind`).
    fn rewind_behind(&mut self) -> ControlFlow<Ended> {
        let behind = std::mem::take(&mut self.committer.behind);
        if let Err(error) = rewind(
            &self.consumer,
            &mut self.flights.queues,
            &mut self.positions,
            behind,
            &self.committer.name,
        ) {
            return ControlFlow::Break(Err(error));
        }
        ControlFlow::Continue(())
    }

    /// Hands the writers the next batches (partial ones too, of every partition, when a
    /// queue is full); when the earliest partition kept back by its linger is due, if one is.
    fn hand_over_batches(&mut self) -> ControlFlow<Ended, Option<Instant>> {
        let Some(to_writers) = &self.to_writers else {
            return ControlFlow::Break(Ok(()));
        };
        let partial = if self.caught_up {
            Partial::AfterLinger(&self.linger, Instant::now())
        } else {
            Partial::Never
        };
        let Ok(lingering) = hand_over(
            &self.sink,
            &mut self.flights,
            &mut self.positions,
            to_writers,
            partial,
        ) else {
            // The writers stopped; the batches stored are committed as the reader finishes.
            return ControlFlow::Break(Ok(()));
        };
        if self.flights.queues.any_full() {
            // Before waiting, give the writers whatever the queues hold.
            let handed = hand_over(
                &self.sink,
                &mut self.flights,
                &mut self.positions,
                to_writers,
                Partial::Always,
            );
            if handed.is_err() {
                return ControlFlow::Break(Ok(()));
            }
        }
        ControlFlow::Continue(lingering)
    }

    /// A queue full for a moment: wait for a writer. Full for longer: its partition's writer
    /// is stuck, so hold the partition back and poll the others (crate::held).
    fn hold_back(&mut self) -> Holding {
        let next = self
            .flights
            .holds
            .next(&self.flights.queues, Instant::now());
        let mut pause = next.held;
        if next.pause_all {
            match self.consumer.assigned_partitions() {
                Ok(assigned) => pause.extend(assigned),
                Err(error) => {
                    tracing::debug!(pipeline = %self.committer.name, %error,
                        "cannot read the assignment; waiting for a writer instead");
                    return Holding {
                        held: !pause.is_empty(),
                        wait: true,
                    };
                }
            }
        }
        let held = !pause.is_empty();
        let unheld = match self.consumer.hold(&pause) {
            Ok(()) => false,
            Err(error) => {
                tracing::warn!(pipeline = %self.committer.name, %error,
                    "cannot pause the partitions of a writer that is behind; waiting for it");
                true
            }
        };
        Holding {
            held,
            wait: next.wait || unheld,
        }
    }

    /// Lets a lingering batch's queue fill until it is due (handling the writers' reports
    /// meanwhile); how long the next poll may then wait.
    fn linger_wait(
        &mut self,
        lingering: Option<Instant>,
        held: bool,
    ) -> ControlFlow<Ended, Duration> {
        // While partitions are held back, poll in short slices: their writer's next report
        // is handled (and the partitions released) promptly.
        let slice = if held {
            HELD_SLICE.min(self.slice)
        } else {
            self.slice
        };
        if let Some(due) = lingering {
            // A batch lingers: let the client's queue fill until it is due instead of waking
            // for every fetch (the writers' reports are still handled as they come), then
            // poll what arrived meanwhile; it is handed over on the next turn.
            let wait = due.saturating_duration_since(Instant::now());
            reported(self.committer.await_report(
                &self.consumer,
                &self.events,
                &mut self.flights,
                wait,
            ))?;
        }
        let slice = if lingering.is_some() {
            Duration::ZERO
        } else {
            slice
        };
        ControlFlow::Continue(slice)
    }

    /// Polls for up to `slice` and puts what came into the queues; a consumer error, or a poll
    /// that may start past what PostgreSQL holds, ends the loop.
    fn poll(&mut self, slice: Duration) -> ControlFlow<Ended> {
        let polled_at = Instant::now();
        let polled = self
            .consumer
            .poll_batch(self.batch_size, self.batch_bytes, slice);
        // A consumer error that keeps coming back makes the pipeline unhealthy at once,
        // before it becomes fatal.
        self.liveness.set_failing(self.consumer.is_failing());
        let records = match polled {
            Ok(records) => records,
            Err(error) => return ControlFlow::Break(Err(PipelineError::Consume(error))),
        };
        if let Some(reason) = self.consumer.take_unpositioned() {
            // The records of this poll may start past what PostgreSQL holds: drop them and
            // start again (nothing read since the assignment was handed to a writer).
            return ControlFlow::Break(Err(PipelineError::StartUnknown { reason }));
        }
        // A partition assigned again starts afresh: what the queues hold of it is of the
        // previous assignment (this poll's records of it were fetched after).
        for (topic, partition, start) in self.consumer.take_starts() {
            self.flights.queues.drop_partition(&topic, partition);
            self.positions.assigned(&topic, partition, start);
        }
        self.caught_up = records.len() < self.batch_size
            && records.iter().map(Record::bytes).sum::<usize>() < self.batch_bytes;
        let now = Instant::now();
        self.linger.read(records.len(), now);
        self.flights
            .queues
            .push(records, now.saturating_duration_since(polled_at));
        self.flights.queues.stamp(now);
        ControlFlow::Continue(())
    }

    /// Hangs up so the writers stop taking batches, commits every batch they finish, and
    /// closes the consumer (leaving the group); the totals, or the first error.
    fn finish(mut self, outcome: Ended) -> Result<PipelineTotals, PipelineError> {
        // Hang up so the writers stop taking batches, then commit what they finish.
        drop(self.to_writers.take());
        let drained = loop {
            match self.events.recv() {
                Ok(event) => {
                    if let Err(error) =
                        self.committer
                            .handle(&self.consumer, event, &mut self.flights)
                    {
                        break Err(error);
                    }
                }
                Err(_) => break Ok(()),
            }
        };
        self.consumer.close();
        outcome.and(drained).map(|()| self.committer.totals)
    }
}
