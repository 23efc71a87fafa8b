//! What the reader does to its lanes between polls: hands each writer with room its next
//! batch (decoded on the way), seeks partitions a writer found behind in PostgreSQL
//! (docs/ARCHITECTURE.md#offsets), and drops what it read ahead of partitions revoked.

use super::Polled;
use crate::batch::{Behind, decode_batch};
use crate::error::PipelineError;
use crate::events::Phases;
use crate::lanes::Lanes;
use crate::linger::Linger;
use crate::origins::Positions;
use crate::sink::Declared;
use sluice_kafka::BatchConsumer;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::Instant;

/// A writer's channel is gone (it stopped).
#[derive(Debug)]
pub(super) struct WriterGone;

/// Which lanes may hand over fewer records than a batch.
pub(super) enum Partial<'a> {
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
pub(super) fn hand_over(
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
pub(super) fn rewind(
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
pub(super) fn forget_revoked(
    consumer: &BatchConsumer,
    lanes: &mut Lanes,
    revocations: &mut u64,
    name: &str,
) {
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
