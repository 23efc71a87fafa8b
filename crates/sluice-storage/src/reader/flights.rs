//! The reader's batches on their way to the writers: what it read ahead per partition
//! ([`Queues`]), which partitions it holds back ([`Holds`]), and how many batches wait in
//! the writers' channel. The writers' reports move it on: a batch taken, a batch settled.

use crate::held::Holds;
use crate::queues::{PartitionKey, Queues};
use std::time::Instant;

/// What the reader knows of the batches not yet stored.
#[derive(Debug)]
pub(super) struct Flights {
    /// The records read ahead, per partition, and each partition's batch in flight.
    pub(super) queues: Queues,
    /// Which partitions are held back.
    pub(super) holds: Holds,
    /// Batches in the writers' channel (sent, not yet taken).
    pub(super) queued: usize,
    /// The most batches the channel holds: one per writer.
    capacity: usize,
}

impl Flights {
    /// Nothing read ahead, for `writers` writers taking batches of up to `batch_size`
    /// records and `batch_bytes` bytes.
    pub(super) fn new(writers: usize, batch_size: usize, batch_bytes: usize) -> Self {
        Self {
            queues: Queues::new(writers, batch_size, batch_bytes),
            holds: Holds::new(),
            queued: 0,
            capacity: writers.max(1),
        }
    }

    /// Whether the writers' channel has room for another batch.
    pub(super) fn has_room(&self) -> bool {
        self.queued < self.capacity
    }

    /// A writer took the partition's batch from the channel.
    pub(super) fn took(&mut self, (topic, partition): &PartitionKey) {
        self.queued = self.queued.saturating_sub(1);
        self.queues.took(topic, *partition, Instant::now());
    }

    /// The partition's batch was stored: its next batch may go, to any writer.
    pub(super) fn settled(&mut self, key: &PartitionKey) {
        self.queues.settled(&key.0, key.1);
        self.holds.settled(key);
    }
}
