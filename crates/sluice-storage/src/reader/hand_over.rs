//! What the reader does to its queues between polls: hands the writers the next batches of
//! partitions with nothing in flight (decoded on the way), seeks partitions a writer found
//! behind in PostgreSQL (docs/ARCHITECTURE.md#offsets), and drops what it read ahead of
//! partitions revoked.

use super::Polled;
use super::flights::Flights;
use crate::batch::{Behind, decode_batch};
use crate::error::PipelineError;
use crate::events::Phases;
use crate::linger::Linger;
use crate::origins::Positions;
use crate::queues::{Queues, Taken};
use crate::sink::Tables;
use crossbeam_channel::{Sender, TrySendError};
use sluice_kafka::BatchConsumer;
use std::time::Instant;

/// The writers' channel is gone (they stopped).
#[derive(Debug)]
pub(super) struct WriterGone;

/// Which partitions may hand over fewer records than a batch.
pub(super) enum Partial<'a> {
    /// None: only full batches.
    Never,
    /// Every partition, whatever it holds.
    Always,
    /// A partition whose linger ended at this time ([`crate::linger`]).
    AfterLinger(&'a Linger, Instant),
}

impl Partial<'_> {
    /// Whether a partition whose oldest record arrived at `since` may hand over a partial
    /// batch; `Err(due)` while its linger lasts.
    fn allows(&self, since: Option<Instant>) -> Result<bool, Instant> {
        match (self, since) {
            (Partial::Never, _) => Ok(false),
            (Partial::Always, _) | (Partial::AfterLinger(..), None) => Ok(true),
            (Partial::AfterLinger(linger, now), Some(first)) => {
                linger.release(first, *now).map(|()| true)
            }
        }
    }
}

/// While the writers' channel has room, hands it the next batch of a partition with
/// nothing in flight, the oldest first: a full one, or a partial one as `partial` allows.
/// Decodes each batch on the way. Returns when the earliest partition kept back by its
/// linger is due, if one is.
pub(super) fn hand_over(
    sink: &Tables,
    flights: &mut Flights,
    positions: &mut Positions,
    to_writers: &Sender<Polled>,
    partial: Partial<'_>,
) -> Result<Option<Instant>, WriterGone> {
    let mut lingering: Option<Instant> = None;
    for ((topic, partition), since, full) in flights.queues.ready() {
        if !flights.has_room() {
            break;
        }
        let may_be_partial = match partial.allows(since) {
            Ok(allowed) => allowed,
            Err(due) => {
                lingering = Some(lingering.map_or(due, |d| d.min(due)));
                false
            }
        };
        if !full && !may_be_partial {
            continue;
        }
        let Some(taken) = flights.queues.take(&topic, partition, true) else {
            continue;
        };
        match to_writers.try_send(polled(sink, positions, taken)) {
            Ok(()) => flights.queued += 1,
            Err(TrySendError::Full(batch)) => {
                // Not expected (the channel was counted with room); keep the records in order.
                positions.restore(&batch.origins);
                flights.queues.put_back(Taken {
                    partition: batch.partition,
                    records: batch.records,
                    poll: batch.phases.poll,
                });
                break;
            }
            Err(TrySendError::Disconnected(_)) => return Err(WriterGone),
        }
    }
    Ok(lingering)
}

/// A batch taken from the queues, decoded, with where its partition's fetch continued from.
fn polled(sink: &Tables, positions: &mut Positions, taken: Taken) -> Polled {
    let Taken {
        partition,
        records,
        poll,
    } = taken;
    let decoding = Instant::now();
    let decoded = decode_batch(sink, &records);
    let phases = Phases {
        poll,
        decode: decoding.elapsed(),
        ..Phases::default()
    };
    let origins = positions.origins(&records);
    positions.handed(&records);
    Polled {
        partition,
        records,
        decoded,
        origins,
        epoch: positions.epoch(),
        phases,
    }
}

/// Seeks each partition a writer found behind in PostgreSQL to PostgreSQL's offset, unless it
/// was positioned again since that batch was handed over (a later report, or a new
/// assignment, which starts at PostgreSQL's offset anyway), and drops what the queues hold of
/// it: its records are read again from there (docs/ARCHITECTURE.md#offsets). A partition no
/// longer assigned is left to its new owner; a seek that fails otherwise starts the pipeline
/// again from PostgreSQL's offsets.
pub(super) fn rewind(
    consumer: &BatchConsumer,
    queues: &mut Queues,
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
        let dropped = queues.drop_partition(&b.topic, b.partition);
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

/// After a revocation, drops the queues' records of partitions this consumer no longer holds:
/// they were never committed, and their new owner reads them again.
pub(super) fn forget_revoked(
    consumer: &BatchConsumer,
    queues: &mut Queues,
    revocations: &mut u64,
    name: &str,
) {
    let now = consumer.rebalances().revoke;
    if now == *revocations || queues.is_empty() {
        *revocations = now;
        return;
    }
    match consumer.assigned_partitions() {
        Ok(held) => {
            *revocations = now;
            let dropped = queues.retain_partitions(&held);
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
