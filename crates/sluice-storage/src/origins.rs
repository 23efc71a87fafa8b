//! Where each partition's fetch continued from, batch by batch (docs/ARCHITECTURE.md#offsets):
//! the offset an assignment or a seek started it at, then the offset after the last record
//! handed to its writer. A batch carries, per partition, that position from before its
//! first record, and the claim compares it with PostgreSQL's offset: offsets are not
//! contiguous (a transactional producer's commit markers, compaction, retention), so the
//! first record's offset alone cannot tell PostgreSQL going back from a hole in the log.
//! A pure state machine kept by the reader.

use sluice_kafka::Record;
use sluice_kafka::rebalance::StartAt;
use std::collections::HashMap;

/// Where a partition's fetch continued from before a batch's first record of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// From this offset: its assignment's stored offset, a seek, or the offset after the
    /// previous batch's last record of it.
    At(i64),
    /// From the reset position (`STORAGE_AUTO_OFFSET_RESET`): it had no stored offset when it
    /// was assigned.
    Reset,
}

/// A batch's partitions with their origins (`None`: not known, e.g. an assignment whose
/// start was not seen).
pub type Origins = Vec<((String, i32), Option<Origin>)>;

/// The position of every partition the reader handed records of, and when each was last
/// positioned (assigned or sought): a batch handed before that carries a stale position.
#[derive(Debug, Default)]
pub struct Positions {
    at: HashMap<(String, i32), Origin>,
    /// Counts the positionings; a batch carries the count at its hand-over.
    epoch: u64,
    /// The epoch of each partition's last positioning.
    positioned: HashMap<(String, i32), u64>,
}

impl Positions {
    /// A partition assigned at `start`.
    pub fn assigned(&mut self, topic: &str, partition: i32, start: StartAt) {
        let origin = match start {
            StartAt::Offset(o) => Origin::At(o),
            StartAt::Beginning | StartAt::End => Origin::Reset,
        };
        self.position((topic.to_owned(), partition), origin);
    }

    /// A partition sought to `offset`.
    pub fn sought(&mut self, topic: &str, partition: i32, offset: i64) {
        self.position((topic.to_owned(), partition), Origin::At(offset));
    }

    fn position(&mut self, key: (String, i32), origin: Origin) {
        self.epoch += 1;
        self.positioned.insert(key.clone(), self.epoch);
        self.at.insert(key, origin);
    }

    /// The count of positionings so far (what a batch handed now carries).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether a partition was positioned again after a batch handed at `epoch`: what that
    /// batch found about its position is out of date.
    pub fn positioned_since(&self, topic: &str, partition: i32, epoch: u64) -> bool {
        self.positioned
            .get(&(topic.to_owned(), partition))
            .is_some_and(|e| *e > epoch)
    }

    /// Puts back the positions of a batch that was not handed over after all.
    pub fn restore(&mut self, origins: &Origins) {
        for (key, origin) in origins {
            match origin {
                Some(o) => self.at.insert(key.clone(), *o),
                None => self.at.remove(key),
            };
        }
    }

    /// The origin of each partition of `records` (a batch, in poll order).
    pub fn origins(&self, records: &[Record]) -> Origins {
        let mut out: Origins = Vec::new();
        for r in records {
            if !out
                .iter()
                .any(|((t, p), _)| *p == r.partition && *t == r.topic)
            {
                let key = (r.topic.clone(), r.partition);
                let origin = self.at.get(&key).copied();
                out.push((key, origin));
            }
        }
        out
    }

    /// `records` were handed to a writer: each partition continues after its last record
    /// (in poll order).
    pub fn handed(&mut self, records: &[Record]) {
        for r in records {
            self.at
                .insert((r.topic.clone(), r.partition), Origin::At(r.offset + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(partition: i32, offsets: std::ops::Range<i64>) -> Vec<Record> {
        offsets.map(|o| Record::at("t", partition, o)).collect()
    }

    fn key(partition: i32) -> (String, i32) {
        ("t".to_owned(), partition)
    }

    #[test]
    fn a_batch_continues_from_the_assignment_then_from_the_previous_batch() {
        let mut positions = Positions::default();
        positions.assigned("t", 0, StartAt::Offset(10));
        positions.assigned("t", 1, StartAt::End);
        // A transactional producer's marker at 12: the next record is 13, the batch still
        // continues from 12, where the previous one ended.
        let first = [batch(0, 10..12), batch(1, 0..3)].concat();
        assert_eq!(
            positions.origins(&first),
            vec![
                (key(0), Some(Origin::At(10))),
                (key(1), Some(Origin::Reset))
            ]
        );
        positions.handed(&first);
        let second = batch(0, 13..15);
        assert_eq!(
            positions.origins(&second),
            vec![(key(0), Some(Origin::At(12)))]
        );
        positions.handed(&second);
        assert_eq!(
            positions.origins(&batch(1, 3..4)),
            vec![(key(1), Some(Origin::At(3)))]
        );
        assert_eq!(positions.origins(&batch(2, 0..1)), vec![(key(2), None)]);
    }

    #[test]
    fn a_batch_not_handed_over_gives_its_positions_back() {
        let mut positions = Positions::default();
        positions.assigned("t", 0, StartAt::Offset(10));
        let records = batch(0, 10..12);
        let origins = positions.origins(&records);
        positions.handed(&records);
        positions.restore(&origins);
        assert_eq!(positions.origins(&records), origins);
    }

    #[test]
    fn a_seek_or_a_new_assignment_sets_the_position_again() {
        let mut positions = Positions::default();
        positions.assigned("t", 0, StartAt::Offset(10));
        positions.handed(&batch(0, 10..20));
        positions.sought("t", 0, 5);
        assert_eq!(
            positions.origins(&batch(0, 5..9)),
            vec![(key(0), Some(Origin::At(5)))]
        );
        positions.handed(&batch(0, 5..9));
        let epoch = positions.epoch();
        assert!(!positions.positioned_since("t", 0, epoch));
        positions.assigned("t", 0, StartAt::Beginning);
        assert!(positions.positioned_since("t", 0, epoch));
        assert!(!positions.positioned_since("t", 1, epoch));
        assert_eq!(
            positions.origins(&batch(0, 0..1)),
            vec![(key(0), Some(Origin::Reset))]
        );
    }
}
