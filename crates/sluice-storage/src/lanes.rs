//! The reader's records on their way to the writers: one lane per writer, each lane in poll
//! order. A partition (of any of the pipeline's topics) is given to a lane the first time
//! one of its records is pushed — the lane holding the fewest partitions, the lowest on a
//! tie, so one topic's partitions 0, 1, 2 seen in that order go to lanes 0, 1, 0 of two —
//! and stays with it for the life of the pipeline. A pure state machine (no Kafka, no
//! channels).
//!
//! Invariants: a partition has one lane for good, a lane only ever holds records of its own
//! partitions, and hands them out in
//! the order they were pushed, so one partition's batches reach its one writer in poll
//! order; a batch holds at most `batch_size` records and at most `batch_bytes` bytes (a record
//! larger than that is a batch of its own, never a stall); and a lane holds at most two
//! batches' worth of records and of bytes, so the read-ahead stays bounded in both
//! (docs/ARCHITECTURE.md#memory).

use sluice_kafka::Record;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Records polled but not yet handed to a writer.
#[derive(Debug)]
pub struct Lanes {
    lanes: Vec<VecDeque<Record>>,
    /// The bytes ([`Record::bytes`]) each lane holds.
    bytes: Vec<usize>,
    /// Poll time not yet charged to a batch, per lane (shared by the records of a poll).
    poll_owed: Vec<Duration>,
    /// When each lane's oldest record arrived (as far as [`Lanes::stamp`] saw), if it holds
    /// any: the linger is counted from it (crate::linger).
    since: Vec<Option<Instant>>,
    batch_size: usize,
    batch_bytes: usize,
    /// Each partition's lane, by topic, fixed when it is first seen.
    owners: HashMap<String, HashMap<i32, usize>>,
    /// How many partitions each lane owns.
    owned: Vec<usize>,
}

impl Lanes {
    /// `writers` empty lanes of batches of up to `batch_size` records and `batch_bytes` bytes.
    pub fn new(writers: usize, batch_size: usize, batch_bytes: usize) -> Self {
        let writers = writers.max(1);
        Self {
            lanes: (0..writers).map(|_| VecDeque::new()).collect(),
            bytes: vec![0; writers],
            poll_owed: vec![Duration::ZERO; writers],
            since: vec![None; writers],
            batch_size: batch_size.max(1),
            batch_bytes: batch_bytes.max(1),
            owners: HashMap::new(),
            owned: vec![0; writers],
        }
    }

    /// The lane of a partition: the one it was given when first seen, or now the one with
    /// the fewest partitions.
    pub fn lane_of(&mut self, topic: &str, partition: i32) -> usize {
        if let Some(lane) = self.owners.get(topic).and_then(|p| p.get(&partition)) {
            return *lane;
        }
        let lane = (0..self.owned.len())
            .min_by_key(|lane| (self.owned[*lane], *lane))
            .unwrap_or(0);
        self.owned[lane] += 1;
        self.owners
            .entry(topic.to_owned())
            .or_default()
            .insert(partition, lane);
        lane
    }

    /// Whether no lane holds a record.
    pub fn is_empty(&self) -> bool {
        self.lanes.iter().all(VecDeque::is_empty)
    }

    /// The most records a lane holds: two batches (plus the one in the writer's channel and
    /// the one it stores, four batches per writer are read ahead at most).
    pub fn cap(&self) -> usize {
        2 * self.batch_size
    }

    /// The most bytes a lane holds: two batches' worth (a poll may bring one batch's worth
    /// more before the reader sees the lane full).
    pub fn cap_bytes(&self) -> usize {
        self.batch_bytes.saturating_mul(2)
    }

    /// Whether lane `lane` is at its cap in records or in bytes (the reader must wait for
    /// its writer).
    pub fn is_full(&self, lane: usize) -> bool {
        self.lanes.get(lane).is_some_and(|l| l.len() >= self.cap())
            || self.bytes.get(lane).is_some_and(|b| *b >= self.cap_bytes())
    }

    /// The bytes lane `lane` holds.
    #[cfg(test)]
    fn bytes(&self, lane: usize) -> usize {
        self.bytes.get(lane).copied().unwrap_or(0)
    }

    /// Whether any lane is at its cap.
    pub fn any_full(&self) -> bool {
        (0..self.lanes.len()).any(|lane| self.is_full(lane))
    }

    /// The partitions lane `lane` owns, as (topic, partition).
    pub fn partitions_of(&self, lane: usize) -> impl Iterator<Item = (String, i32)> + '_ {
        self.owners.iter().flat_map(move |(topic, partitions)| {
            partitions
                .iter()
                .filter(move |(_, owner)| **owner == lane)
                .map(move |(partition, _)| (topic.clone(), *partition))
        })
    }

    /// How many lanes there are (one per writer).
    pub fn count(&self) -> usize {
        self.lanes.len()
    }

    /// Records one poll; its time is shared among the lanes by their records.
    pub fn push(&mut self, records: Vec<Record>, poll: Duration) {
        let total = records.len();
        let n = self.lanes.len();
        let mut counts = vec![0u32; n];
        for record in records {
            let lane = self.lane_of(&record.topic, record.partition);
            counts[lane] += 1;
            self.bytes[lane] += record.bytes();
            self.lanes[lane].push_back(record);
        }
        if total > 0 {
            for (owed, count) in self.poll_owed.iter_mut().zip(counts) {
                *owed += poll * count / total as u32;
            }
        }
    }

    /// Notes `now` as the arrival of the oldest record of every lane that holds records and
    /// had none at the last stamp (called after each push).
    pub fn stamp(&mut self, now: Instant) {
        for (queue, since) in self.lanes.iter().zip(&mut self.since) {
            if queue.is_empty() {
                *since = None;
            } else if since.is_none() {
                *since = Some(now);
            }
        }
    }

    /// When lane `lane`'s oldest record arrived, if it holds any (see [`Lanes::stamp`]).
    pub fn since(&self, lane: usize) -> Option<Instant> {
        self.since.get(lane).copied().flatten()
    }

    /// The next batch of lane `lane`: a full one, or with `partial` whatever the lane holds
    /// up to a batch. A batch closes at `batch_size` records or before the record that would
    /// take it past `batch_bytes`, so it is full when the lane holds `batch_size` records or
    /// `batch_bytes` bytes; a first record larger than `batch_bytes` is a batch alone. `None`
    /// when there is no such batch. The poll time owed by the lane goes with it.
    pub fn take(&mut self, lane: usize, partial: bool) -> Option<(Vec<Record>, Duration)> {
        let queue = self.lanes.get_mut(lane)?;
        let held = self.bytes[lane];
        let full = queue.len() >= self.batch_size || held >= self.batch_bytes;
        if queue.is_empty() || (!full && !partial) {
            return None;
        }
        let (mut n, mut bytes) = (0, 0usize);
        for record in queue.iter().take(self.batch_size) {
            let size = record.bytes();
            if n > 0 && bytes + size > self.batch_bytes {
                break;
            }
            n += 1;
            bytes += size;
        }
        self.bytes[lane] = held - bytes;
        let batch: Vec<Record> = queue.drain(..n).collect();
        if queue.is_empty() {
            self.since[lane] = None;
        }
        let owed = std::mem::take(&mut self.poll_owed[lane]);
        Some((batch, owed))
    }

    /// Puts a batch that could not be handed over back at the front of its lane.
    pub fn put_back(&mut self, lane: usize, batch: Vec<Record>, poll: Duration) {
        if let Some(queue) = self.lanes.get_mut(lane) {
            for record in batch.into_iter().rev() {
                self.bytes[lane] += record.bytes();
                queue.push_front(record);
            }
            self.poll_owed[lane] += poll;
        }
    }

    /// Drops the records of one partition (assigned again, or sought: it is read again from
    /// its new position). Returns how many.
    pub fn drop_partition(&mut self, topic: &str, partition: i32) -> usize {
        self.drop_where(|r| r.partition == partition && r.topic == topic)
    }

    /// Drops the records of partitions no longer held (after a rebalance): they were never
    /// committed, so the partition's new owner reads them again. Returns how many.
    pub fn retain_partitions(&mut self, held: &[(String, i32)]) -> usize {
        self.drop_where(|r| !held.iter().any(|(t, p)| *p == r.partition && *t == r.topic))
    }

    /// Drops the records `drop` picks from every lane. Returns how many.
    fn drop_where(&mut self, gone_if: impl Fn(&Record) -> bool) -> usize {
        let mut dropped = 0;
        for (queue, bytes) in self.lanes.iter_mut().zip(&mut self.bytes) {
            let before = queue.len();
            queue.retain(|r| {
                let gone = gone_if(r);
                if gone {
                    *bytes -= r.bytes();
                }
                !gone
            });
            dropped += before - queue.len();
        }
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(partition: i32, offset: i64) -> Record {
        record_of("t", partition, offset)
    }

    fn record_of(topic: &str, partition: i32, offset: i64) -> Record {
        Record::at(topic, partition, offset)
    }

    fn coords(batch: &[Record]) -> Vec<(i32, i64)> {
        batch.iter().map(|r| (r.partition, r.offset)).collect()
    }

    #[test]
    fn a_partition_goes_to_the_lane_with_fewest_partitions_and_stays_there() {
        let mut lanes = Lanes::new(2, 10, usize::MAX);
        assert_eq!(
            (0..6).map(|p| lanes.lane_of("t", p)).collect::<Vec<_>>(),
            [0, 1, 0, 1, 0, 1]
        );
        // A second topic's partitions are spread the same way, by the count so far.
        assert_eq!(lanes.lane_of("u", 0), 0);
        assert_eq!(lanes.lane_of("u", 1), 1);
        assert_eq!(lanes.lane_of("t", 1), 1, "fixed for good");
        let mut one = Lanes::new(1, 10, usize::MAX);
        assert_eq!(one.lane_of("t", 5), 0);
        assert_eq!(one.lane_of("t", -1), 0);
    }

    #[test]
    fn a_lane_remembers_when_its_oldest_record_arrived_until_it_is_emptied() {
        let mut lanes = Lanes::new(2, 2, usize::MAX);
        let t0 = Instant::now();
        lanes.push(vec![record(0, 1)], Duration::ZERO);
        lanes.stamp(t0);
        assert_eq!((lanes.since(0), lanes.since(1)), (Some(t0), None));
        // Later records do not move the lane's first arrival; the other lane gets its own.
        let t1 = t0 + Duration::from_millis(5);
        lanes.push(
            vec![record(0, 2), record(0, 3), record(1, 1)],
            Duration::ZERO,
        );
        lanes.stamp(t1);
        assert_eq!((lanes.since(0), lanes.since(1)), (Some(t0), Some(t1)));
        // A full batch taken leaves one record: the lane keeps its (older) time.
        assert_eq!(coords(&lanes.take(0, false).unwrap().0), [(0, 1), (0, 2)]);
        assert_eq!(lanes.since(0), Some(t0));
        assert_eq!(coords(&lanes.take(0, true).unwrap().0), [(0, 3)]);
        assert_eq!(lanes.since(0), None, "emptied");
        assert!(lanes.take(1, true).is_some());
        assert_eq!(lanes.since(1), None);
    }

    #[test]
    fn partitions_of_different_topics_are_different_partitions() {
        let mut lanes = Lanes::new(2, 10, usize::MAX);
        lanes.push(
            vec![
                record_of("a", 0, 1),
                record_of("b", 0, 1),
                record_of("a", 0, 2),
            ],
            Duration::ZERO,
        );
        let lane_a: Vec<(String, i64)> = lanes
            .take(0, true)
            .unwrap()
            .0
            .into_iter()
            .map(|r| (r.topic, r.offset))
            .collect();
        assert_eq!(lane_a, [("a".into(), 1), ("a".into(), 2)]);
        assert_eq!(lanes.take(1, true).unwrap().0[0].topic, "b");
        lanes.push(
            vec![record_of("a", 0, 3), record_of("b", 0, 2)],
            Duration::ZERO,
        );
        assert_eq!(lanes.retain_partitions(&[("b".into(), 0)]), 1);
        assert!(lanes.take(0, true).is_none());
    }

    #[test]
    fn each_lane_keeps_poll_order_and_full_batches_wait_for_batch_size() {
        let mut lanes = Lanes::new(2, 2, usize::MAX);
        lanes.push(
            vec![record(0, 1), record(1, 1), record(2, 1), record(0, 2)],
            Duration::from_millis(4),
        );
        // lane 1 holds one record: no full batch yet, but a partial one on demand
        assert!(lanes.take(1, false).is_none());
        let (b0, owed) = lanes.take(0, false).unwrap();
        assert_eq!(coords(&b0), [(0, 1), (2, 1)]);
        assert_eq!(owed, Duration::from_millis(3), "3 of the poll's 4 records");
        let (rest, _) = lanes.take(0, true).unwrap();
        assert_eq!(coords(&rest), [(0, 2)]);
        assert_eq!(coords(&lanes.take(1, true).unwrap().0), [(1, 1)]);
        assert!(lanes.is_empty());
    }

    #[test]
    fn a_batch_put_back_comes_out_first_and_a_lane_is_full_at_two_batches() {
        let mut lanes = Lanes::new(2, 2, usize::MAX);
        assert_eq!(lanes.lane_of("t", 0), 0, "partition 1 is seen second");
        lanes.push(
            (1..=4).map(|o| record(1, o)).collect(),
            Duration::from_millis(1),
        );
        assert!(lanes.is_full(1) && lanes.any_full() && !lanes.is_full(0));
        let (batch, owed) = lanes.take(1, false).unwrap();
        assert!(!lanes.is_full(1));
        lanes.put_back(1, batch, owed);
        let order: Vec<i64> = std::iter::from_fn(|| lanes.take(1, true))
            .flat_map(|(b, _)| b)
            .map(|r| r.offset)
            .collect();
        assert_eq!(order, [1, 2, 3, 4]);
    }

    fn sized(partition: i32, offset: i64, bytes: usize) -> Record {
        let mut record = record(partition, offset);
        record.payload = Some(vec![b'x'; bytes]);
        record
    }

    #[test]
    fn a_batch_closes_at_its_byte_size_and_a_record_larger_than_it_goes_alone() {
        // Batches of up to 10 records or 100 bytes; one lane.
        let mut lanes = Lanes::new(1, 10, 100);
        lanes.push(vec![sized(0, 1, 40), sized(0, 2, 40)], Duration::ZERO);
        assert!(lanes.take(0, false).is_none(), "80 bytes: not full yet");
        lanes.push(
            vec![sized(0, 3, 40), sized(0, 4, 250), sized(0, 5, 10)],
            Duration::ZERO,
        );
        assert_eq!(lanes.bytes(0), 380);
        assert!(lanes.is_full(0), "over two batches' worth of bytes");
        // 40 + 40 fit, the third 40 would make 120: the batch closes before it.
        assert_eq!(coords(&lanes.take(0, false).unwrap().0), [(0, 1), (0, 2)]);
        assert_eq!(coords(&lanes.take(0, false).unwrap().0), [(0, 3)]);
        assert!(lanes.is_full(0), "260 bytes left");
        // A record over the budget is a batch of one, never a stall.
        assert_eq!(coords(&lanes.take(0, false).unwrap().0), [(0, 4)]);
        assert!(!lanes.is_full(0));
        assert!(lanes.take(0, false).is_none(), "10 bytes left: partial");
        assert_eq!(coords(&lanes.take(0, true).unwrap().0), [(0, 5)]);
        assert_eq!(lanes.bytes(0), 0);
        // The count still closes a batch of small records; dropping keeps the bytes right.
        let mut lanes = Lanes::new(2, 2, 1_000);
        lanes.push(
            vec![
                sized(0, 1, 1),
                sized(0, 2, 1),
                sized(0, 3, 1),
                sized(1, 1, 7),
            ],
            Duration::ZERO,
        );
        assert_eq!(coords(&lanes.take(0, false).unwrap().0), [(0, 1), (0, 2)]);
        assert_eq!((lanes.bytes(0), lanes.bytes(1)), (1, 7));
        let (batch, owed) = lanes.take(0, true).unwrap();
        lanes.put_back(0, batch, owed);
        assert_eq!(lanes.bytes(0), 1);
        assert_eq!(lanes.drop_partition("t", 1), 1);
        assert_eq!(lanes.retain_partitions(&[]), 1);
        assert_eq!((lanes.bytes(0), lanes.bytes(1)), (0, 0));
    }

    #[test]
    fn a_lane_names_the_partitions_it_owns() {
        let mut lanes = Lanes::new(2, 10, usize::MAX);
        for (topic, partition) in [("t", 0), ("t", 1), ("t", 2), ("u", 0)] {
            lanes.lane_of(topic, partition);
        }
        let of = |lane| {
            let mut p: Vec<(String, i32)> = lanes.partitions_of(lane).collect();
            p.sort();
            p
        };
        assert_eq!(of(0), [("t".into(), 0), ("t".into(), 2)]);
        assert_eq!(of(1), [("t".into(), 1), ("u".into(), 0)]);
        assert_eq!(lanes.count(), 2);
    }

    #[test]
    fn records_of_revoked_partitions_are_dropped() {
        let mut lanes = Lanes::new(2, 10, usize::MAX);
        lanes.push(
            vec![record(0, 1), record(1, 1), record(2, 1), record(3, 1)],
            Duration::ZERO,
        );
        assert_eq!(
            lanes.retain_partitions(&[("t".into(), 1), ("t".into(), 2)]),
            2
        );
        assert_eq!(coords(&lanes.take(0, true).unwrap().0), [(2, 1)]);
        assert_eq!(coords(&lanes.take(1, true).unwrap().0), [(1, 1)]);
    }
}
