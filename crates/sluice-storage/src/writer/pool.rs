//! The database side of a pipeline: N writers, each on its own thread with its own
//! single-threaded runtime, connection, cache and retries (docs/ARCHITECTURE.md#batch-loop).
//!
//! The writers share one channel of batches: any free writer takes the next one. A batch
//! holds one partition's records, and the reader hands over a partition's next batch only
//! once the one before is reported stored (`queues.rs`), so one partition's batches are
//! stored one after another in poll order, one transaction each, whichever writer takes
//! them; the reader commits a batch's offsets only after its writer reports its
//! transaction committed. A writer's waits and retries hold up only its batch's partition. A fatal error in any writer cancels the pipeline: the
//! others finish the batch they are storing and stop, and the reader commits every batch
//! stored before it closes the consumer.

use crate::batch::{Behind, DecodedBatch, decode_batch};
use crate::by_table::ByTable;
use crate::error::PipelineError;
use crate::heartbeat::{Heartbeat, READER_STALL, ReaderLiveness, WriterLiveness};
use crate::metrics::PipelineMetrics;
use crate::origins::Origins;
use crate::reader::{Polled, Stored, WriterEvent};
use crate::selected::Identity;
use crate::settings::StorageSettings;
use crate::sink::Tables;
use crate::writer::{Attempted, Committed, Writer};
use sluice_core::BatchReport;
use sluice_kafka::Record;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A writer that has not turned its loop for this long (plus the poll timeout, its idle
/// wait) is stuck, e.g. in a statement that never returns: the heartbeat stops.
pub const WRITER_STALL: Duration = Duration::from_secs(5);

/// One writer's end of the channels.
#[derive(Debug)]
pub struct WriterChannels {
    /// The batches of every writer: it takes the next when it is free.
    pub batches: crossbeam_channel::Receiver<Polled>,
    /// Back to the reader: batch taken, batch stored.
    pub events: Sender<WriterEvent>,
}

/// What every writer of a pipeline borrows, handed to each at spawn (as [`ReaderParts`] is
/// to the reader).
///
/// [`ReaderParts`]: crate::reader::ReaderParts
#[derive(Debug, Clone, Copy)]
pub struct WriterParts<'a> {
    /// The settings: connection, retries, poll timeout, heartbeat folder.
    pub settings: &'a StorageSettings,
    /// The pipeline: its name and consumer group.
    pub pipeline: &'a Identity,
    /// The pipeline's sink (shared with the reader): the writers store through it.
    pub sink: &'a Tables,
    /// The pipeline's metric handles.
    pub metrics: &'a PipelineMetrics,
    /// Cancelled to stop the pipeline; a writer's fatal error cancels it.
    pub stop: &'a CancellationToken,
}

/// Runs `channels.len()` writers until the reader hangs up, `parts.stop`, or a fatal error
/// (which cancels `parts.stop`); meanwhile keeps the heartbeat while the reader and every
/// writer make progress. Returns the first writer error.
pub fn run_writers(
    parts: WriterParts<'_>,
    channels: Vec<WriterChannels>,
    reader: &ReaderLiveness,
) -> Result<(), PipelineError> {
    let WriterParts {
        settings,
        pipeline,
        metrics,
        stop,
        ..
    } = parts;
    let count = channels.len();
    let (done_tx, done_rx) = mpsc::channel::<Result<(), PipelineError>>();
    let liveness: Vec<WriterLiveness> = (0..count).map(|_| WriterLiveness::default()).collect();
    let mut heartbeat = Heartbeat::new(Path::new(&settings.heartbeat_dir), &pipeline.name);
    let stall = WRITER_STALL + settings.poll_timeout;
    let committed = Committed::default();
    std::thread::scope(|scope| {
        let mut running = 0usize;
        let mut first_error: Option<PipelineError> = None;
        for (index, (channels, alive)) in channels.into_iter().zip(&liveness).enumerate() {
            let done = done_tx.clone();
            let committed = committed.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("pipeline-{}-writer-{index}", pipeline.name))
                .spawn_scoped(scope, move || {
                    let run = || run_writer(parts, (index, committed), channels, alive);
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
                        .unwrap_or(Err(PipelineError::WriterPanicked));
                    if result.is_err() {
                        // Stop the reader and the other writers; the reader still commits
                        // the batches stored before the error.
                        stop.cancel();
                    }
                    let _ = done.send(result);
                });
            match spawned {
                Ok(_) => running += 1,
                Err(error) => {
                    stop.cancel();
                    first_error = Some(PipelineError::Thread(error));
                    break;
                }
            }
        }
        drop(done_tx);
        let tick = settings.poll_timeout.min(Duration::from_millis(500));
        while running > 0 {
            // Healthy means every part makes progress: a stuck reader or writer stops it.
            if !stop.is_cancelled()
                && reader.is_alive(READER_STALL)
                && liveness.iter().all(|l| l.is_alive(stall))
            {
                heartbeat.beat();
                metrics.beat();
            }
            match done_rx.recv_timeout(tick) {
                Ok(result) => {
                    running -= 1;
                    if let Err(error) = result {
                        first_error.get_or_insert(error);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                // Every writer thread reports before it ends, panics included.
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        first_error.map_or(Ok(()), Err)
    })
}

/// One writer: takes its batches in order and stores each in one transaction (with
/// retries), then reports it stored.
fn run_writer(
    parts: WriterParts<'_>,
    (index, committed): (usize, Committed),
    channels: WriterChannels,
    liveness: &WriterLiveness,
) -> Result<(), PipelineError> {
    let WriterParts { settings, stop, .. } = parts;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(PipelineError::Thread)?;
    let written = runtime.block_on(async {
        let mut writer = Writer::new(parts, committed, index);
        let written = writer_loop(&mut writer, settings, stop, channels, liveness).await;
        writer.close().await;
        written
    });
    // A registry request a stop left behind ends on its own, at its timeout: not waited for.
    runtime.shutdown_background();
    written
}

/// The batch made ready (its tables planned, its writers' schemas fetched) and stored, again
/// from its decoding when a table changed under it; `None` when stopped first.
async fn stored_batch(
    writer: &mut Writer<'_>,
    mut decoded: DecodedBatch,
    (records, origins): (&[Record], &Origins),
    stop: &CancellationToken,
    liveness: &WriterLiveness,
) -> Result<Option<(DecodedBatch, BatchReport, Vec<Behind>, ByTable)>, PipelineError> {
    let mut changes = 0u32;
    loop {
        let Some(ready) = writer.ready(decoded, records, stop, liveness).await? else {
            return Ok(None);
        };
        match writer
            .store_with_retries((records, &ready, origins), stop, liveness)
            .await?
        {
            Attempted::Stored(report, behind, tables) => {
                return Ok(Some((ready, report, behind, tables)));
            }
            Attempted::Stopped => return Ok(None),
            // A table changed under its plan: decoded again against what it is now (a table
            // that keeps changing is waited for a second each time).
            Attempted::TablesChanged => {
                changes += 1;
                if changes > 1
                    && !super::schemas::sleep_or_stop(TABLE_CHANGED_WAIT, stop, liveness).await
                {
                    return Ok(None);
                }
                decoded = decode_batch(writer.sink(), records);
            }
        }
    }
}

/// The wait before a batch is decoded again when a table changed under it more than once.
const TABLE_CHANGED_WAIT: Duration = Duration::from_secs(1);

async fn writer_loop(
    writer: &mut Writer<'_>,
    settings: &StorageSettings,
    stop: &CancellationToken,
    WriterChannels { batches, events }: WriterChannels,
    liveness: &WriterLiveness,
) -> Result<(), PipelineError> {
    loop {
        liveness.turn();
        if stop.is_cancelled() {
            return Ok(());
        }
        let waiting = Instant::now();
        // The runtime runs nothing else: blocking it while waiting for a batch is fine.
        let Polled {
            partition,
            mut records,
            decoded,
            origins,
            epoch,
            mut phases,
        } = match batches.recv_timeout(settings.poll_timeout) {
            Ok(batch) => batch,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                writer.verify_idle().await?;
                continue;
            }
            // The reader ended (stop, or a Kafka error it will report).
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return Ok(()),
        };
        let _ = events.send(WriterEvent::Took(partition.clone()));
        let storing = Instant::now();
        let Some((decoded, report, behind, tables)) =
            stored_batch(writer, decoded, (&records, &origins), stop, liveness).await?
        else {
            // Stopped while waiting (the registry, the database): nothing committed,
            // redelivered.
            return Ok(());
        };
        phases.writer_wait = storing - waiting;
        phases.store = storing.elapsed();
        // A partition read again has none of its offsets committed.
        records.retain(|r| {
            !behind
                .iter()
                .any(|b| b.partition == r.partition && b.topic == r.topic)
        });
        // The offset commit needs only the coordinates: the batch's bytes are freed
        // now rather than after the reader's commit (docs/ARCHITECTURE.md#memory).
        drop(decoded);
        records.iter_mut().for_each(Record::drop_contents);
        let stored = Stored {
            partition,
            writer: writer.index(),
            records,
            report,
            tables,
            behind,
            epoch,
            phases,
        };
        if events.send(WriterEvent::Stored(Box::new(stored))).is_err() {
            return Ok(()); // the reader is gone; it reports why
        }
    }
}
