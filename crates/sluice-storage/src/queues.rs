//! The reader's records on their way to the writers: one queue per partition (of any of the
//! pipeline's topics), each in poll order, and at most one batch of a partition in flight
//! (handed to the writers and not yet reported stored). Any free writer takes the next
//! batch of any partition (docs/ARCHITECTURE.md#batch-loop): a writer that waits (a row lock
//! another session holds, a slow trigger) holds up only the partition of its own batch. A
//! pure state machine (no Kafka, no channels, no clock of its own).
//!
//! Invariants: a batch holds records of one partition only, in the order they were pushed;
//! a partition's next batch is taken only once its batch in flight has settled, so its
//! batches are stored one after another in poll order (whichever writer stores each); a
//! batch holds at most `batch_size` records and at most `batch_bytes` bytes (a record larger
//! than that is a batch of its own, never a stall); a partition's queue is full at two
//! batches' worth of records or bytes, and the queues together are over budget at two
//! batches' worth per writer, so the read-ahead stays bounded in both, whatever the number of
//! partitions (docs/ARCHITECTURE.md#memory).

use sluice_kafka::Record;
use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

/// A partition of one of the pipeline's topics.
pub type PartitionKey = (String, i32);

/// One partition's records polled but not yet handed to a writer.
#[derive(Debug, Default)]
struct Queue {
    records: VecDeque<Record>,
    /// The bytes ([`Record::bytes`]) it holds.
    bytes: usize,
    /// Poll time not yet charged to a batch (shared by the records of a poll).
    poll_owed: Duration,
    /// When its oldest record arrived (as far as [`Queues::stamp`] saw), if it holds any:
    /// the linger is counted from it (crate::linger), and the oldest goes first.
    since: Option<Instant>,
    /// Its batch handed over and not yet settled, if any.
    in_flight: Option<Flight>,
}

/// A partition's batch in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flight {
    /// In the writers' channel: no writer has taken it yet.
    Queued,
    /// A writer took it at this time and stores it.
    Taken(Instant),
}

/// A batch taken from the queues, for a writer.
#[derive(Debug)]
pub struct Taken {
    /// Its partition.
    pub partition: PartitionKey,
    /// Its records, in poll order.
    pub records: Vec<Record>,
    /// The poll time it is charged.
    pub poll: Duration,
}

/// Records polled but not yet handed to a writer, per partition.
#[derive(Debug)]
pub struct Queues {
    queues: BTreeMap<String, BTreeMap<i32, Queue>>,
    writers: usize,
    batch_size: usize,
    batch_bytes: usize,
}

impl Queues {
    /// Empty queues for `writers` writers taking batches of up to `batch_size` records and
    /// `batch_bytes` bytes.
    pub fn new(writers: usize, batch_size: usize, batch_bytes: usize) -> Self {
        Self {
            queues: BTreeMap::new(),
            writers: writers.max(1),
            batch_size: batch_size.max(1),
            batch_bytes: batch_bytes.max(1),
        }
    }

    #[cfg(test)]
    fn queue(&self, topic: &str, partition: i32) -> Option<&Queue> {
        self.queues.get(topic)?.get(&partition)
    }

    fn queue_mut(&mut self, topic: &str, partition: i32) -> &mut Queue {
        self.queues
            .entry(topic.to_owned())
            .or_default()
            .entry(partition)
            .or_default()
    }

    fn all(&self) -> impl Iterator<Item = ((&str, i32), &Queue)> {
        self.queues.iter().flat_map(|(topic, partitions)| {
            partitions
                .iter()
                .map(move |(partition, queue)| ((topic.as_str(), *partition), queue))
        })
    }

    /// Whether no queue holds a record.
    pub fn is_empty(&self) -> bool {
        self.all().all(|(_, q)| q.records.is_empty())
    }

    /// The most records a partition's queue holds: two batches.
    pub fn cap(&self) -> usize {
        2 * self.batch_size
    }

    /// The most bytes a partition's queue holds: two batches' worth (a poll may bring one
    /// batch's worth more before the reader sees it full).
    pub fn cap_bytes(&self) -> usize {
        self.batch_bytes.saturating_mul(2)
    }

    /// Whether a queue is at its cap in records or in bytes (no more of it may be polled).
    fn queue_full(&self, queue: &Queue) -> bool {
        queue.records.len() >= self.cap() || queue.bytes >= self.cap_bytes()
    }

    /// The partitions whose queue is at its cap.
    pub fn full(&self) -> impl Iterator<Item = PartitionKey> + '_ {
        self.all()
            .filter(|(_, q)| self.queue_full(q))
            .map(|((t, p), _)| (t.to_owned(), p))
    }

    /// Whether the queues hold two batches' worth of records or bytes per writer (the reader
    /// must wait for the writers).
    pub fn over_budget(&self) -> bool {
        let (mut records, mut bytes) = (0usize, 0usize);
        for (_, queue) in self.all() {
            records += queue.records.len();
            bytes += queue.bytes;
        }
        records >= self.cap().saturating_mul(self.writers)
            || bytes >= self.cap_bytes().saturating_mul(self.writers)
    }

    /// Whether any partition's queue is at its cap, or the queues are over budget.
    pub fn any_full(&self) -> bool {
        self.full().next().is_some() || self.over_budget()
    }

    /// A partition's batch in flight, if it has one.
    #[cfg(test)]
    pub fn in_flight(&self, topic: &str, partition: i32) -> Option<Flight> {
        self.queue(topic, partition)?.in_flight
    }

    /// Records one poll; its time is shared among the partitions by their records.
    pub fn push(&mut self, records: Vec<Record>, poll: Duration) {
        let total = records.len();
        if total == 0 {
            return;
        }
        let mut counts: BTreeMap<(String, i32), u32> = BTreeMap::new();
        let mut records = records.into_iter().peekable();
        while let Some(first) = records.next() {
            // A poll brings runs of one partition's records: one lookup per run.
            let (topic, partition) = (first.topic.clone(), first.partition);
            let queue = self.queue_mut(&topic, partition);
            let mut n = 1u32;
            queue.bytes += first.bytes();
            queue.records.push_back(first);
            while let Some(next) = records.next_if(|r| r.partition == partition && r.topic == topic)
            {
                queue.bytes += next.bytes();
                queue.records.push_back(next);
                n += 1;
            }
            *counts.entry((topic, partition)).or_default() += n;
        }
        for ((topic, partition), count) in counts {
            let queue = self.queue_mut(&topic, partition);
            queue.poll_owed += poll * count / total as u32;
        }
    }

    /// Notes `now` as the arrival of the oldest record of every queue that holds records and
    /// had none at the last stamp (called after each push).
    pub fn stamp(&mut self, now: Instant) {
        for queue in self.queues.values_mut().flat_map(BTreeMap::values_mut) {
            if queue.records.is_empty() {
                queue.since = None;
            } else if queue.since.is_none() {
                queue.since = Some(now);
            }
        }
    }

    /// Whether a queue holds a full batch: `batch_size` records or `batch_bytes` bytes.
    fn has_full_batch(&self, queue: &Queue) -> bool {
        queue.records.len() >= self.batch_size || queue.bytes >= self.batch_bytes
    }

    /// The partitions that may give a batch now (holding records, nothing in flight), the
    /// oldest first: each with when its oldest record arrived and whether it holds a full
    /// batch.
    pub fn ready(&self) -> Vec<(PartitionKey, Option<Instant>, bool)> {
        let mut ready: Vec<(PartitionKey, Option<Instant>, bool)> = self
            .all()
            .filter(|(_, q)| !q.records.is_empty() && q.in_flight.is_none())
            .map(|((t, p), q)| ((t.to_owned(), p), q.since, self.has_full_batch(q)))
            .collect();
        ready.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
        ready
    }

    /// The next batch of a partition with nothing in flight: a full one, or with `partial`
    /// whatever it holds up to a batch; it is in flight from now on. A batch closes at
    /// `batch_size` records or before the record that would take it past `batch_bytes`; a
    /// first record larger than `batch_bytes` is a batch alone. `None` when there is no such
    /// batch. The poll time owed by the partition goes with it.
    pub fn take(&mut self, topic: &str, partition: i32, partial: bool) -> Option<Taken> {
        let (batch_size, batch_bytes) = (self.batch_size, self.batch_bytes);
        let queue = self.queues.get_mut(topic)?.get_mut(&partition)?;
        let full = queue.records.len() >= batch_size || queue.bytes >= batch_bytes;
        if queue.records.is_empty() || queue.in_flight.is_some() || (!full && !partial) {
            return None;
        }
        let (mut n, mut bytes) = (0, 0usize);
        for record in queue.records.iter().take(batch_size) {
            let size = record.bytes();
            if n > 0 && bytes + size > batch_bytes {
                break;
            }
            n += 1;
            bytes += size;
        }
        queue.bytes -= bytes;
        let records: Vec<Record> = queue.records.drain(..n).collect();
        if queue.records.is_empty() {
            queue.since = None;
        }
        queue.in_flight = Some(Flight::Queued);
        Some(Taken {
            partition: (topic.to_owned(), partition),
            records,
            poll: std::mem::take(&mut queue.poll_owed),
        })
    }

    /// Puts a batch that could not be handed over back at the front of its queue: nothing of
    /// the partition is in flight.
    pub fn put_back(&mut self, taken: Taken) {
        let Taken {
            partition: (topic, partition),
            records,
            poll,
        } = taken;
        let queue = self.queue_mut(&topic, partition);
        for record in records.into_iter().rev() {
            queue.bytes += record.bytes();
            queue.records.push_front(record);
        }
        queue.poll_owed += poll;
        queue.in_flight = None;
    }

    /// A writer took the partition's batch at `now`.
    pub fn took(&mut self, topic: &str, partition: i32, now: Instant) {
        if let Some(queue) = self
            .queues
            .get_mut(topic)
            .and_then(|p| p.get_mut(&partition))
        {
            queue.in_flight = Some(Flight::Taken(now));
        }
    }

    /// The partition's batch in flight settled (stored, or abandoned): its next batch may go.
    pub fn settled(&mut self, topic: &str, partition: i32) {
        if let Some(queue) = self
            .queues
            .get_mut(topic)
            .and_then(|p| p.get_mut(&partition))
        {
            queue.in_flight = None;
        }
    }

    /// Drops the records of one partition (assigned again, or sought: it is read again from
    /// its new position); a batch of it in flight stays in flight. Returns how many.
    pub fn drop_partition(&mut self, topic: &str, partition: i32) -> usize {
        let Some(queue) = self
            .queues
            .get_mut(topic)
            .and_then(|p| p.get_mut(&partition))
        else {
            return 0;
        };
        let dropped = queue.records.len();
        queue.records.clear();
        queue.bytes = 0;
        queue.since = None;
        dropped
    }

    /// Drops the records of partitions no longer held (after a rebalance): they were never
    /// committed, so the partition's new owner reads them again. A batch of theirs in flight
    /// stays in flight. Returns how many.
    pub fn retain_partitions(&mut self, held: &[PartitionKey]) -> usize {
        let mut dropped = 0;
        for (topic, partitions) in &mut self.queues {
            partitions.retain(|partition, queue| {
                if held.iter().any(|(t, p)| p == partition && t == topic) {
                    return true;
                }
                dropped += queue.records.len();
                queue.records.clear();
                queue.bytes = 0;
                queue.since = None;
                queue.in_flight.is_some()
            });
        }
        self.queues.retain(|_, partitions| !partitions.is_empty());
        dropped
    }
}

#[cfg(test)]
mod tests;
