//! Which partitions the reader holds back, so that one writer that cannot go on (a lock
//! another session holds, a slow statement) stalls only its own partitions.
//!
//! A lane at its cap ([`Lanes::cap`]) means its writer is behind. For a moment that is the
//! normal state of a backlog (the writer takes its next batch within milliseconds), and the
//! reader simply waits for a writer to report; pausing the partitions then would only make
//! the client drop and fetch again what it had read ahead. A lane can stay at its cap for
//! long in a backlog while its writer keeps taking batches (a poll may push a lane past its
//! cap), so the clock restarts whenever the writer has room in its channel
//! ([`Holds::writers_ready`]). A lane full for [`HOLD_AFTER`] with no batch taken by its
//! writer is a writer that is stuck: its partitions are paused in the consumer and the reader polls
//! the others, until the lane has room again. A pure state machine (no Kafka, no clock of
//! its own).

use crate::lanes::Lanes;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How long a lane stays full before its partitions are held back.
pub const HOLD_AFTER: Duration = Duration::from_secs(1);

/// What the reader does next.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Next {
    /// The partitions to pause (every partition of each lane full for [`HOLD_AFTER`]).
    pub held: BTreeSet<(String, i32)>,
    /// A lane is full but not held yet: wait for a writer instead of polling.
    pub wait: bool,
}

/// Since when each lane has been full.
#[derive(Debug)]
pub struct Holds {
    full_since: Vec<Option<Instant>>,
}

impl Holds {
    /// No lane full yet, for `lanes` lanes.
    pub fn new(lanes: usize) -> Self {
        Self {
            full_since: vec![None; lanes],
        }
    }

    /// The writers whose channel is empty (`queued[lane] == 0`) took their batch: their
    /// lanes' clocks start again.
    pub fn writers_ready(&mut self, queued: &[usize]) {
        for (since, queued) in self.full_since.iter_mut().zip(queued) {
            if *queued == 0 {
                *since = None;
            }
        }
    }

    /// The lanes as they are at `now`: which partitions to hold back, and whether to wait.
    pub fn next(&mut self, lanes: &Lanes, now: Instant) -> Next {
        let mut next = Next::default();
        for (lane, since) in self.full_since.iter_mut().enumerate() {
            if !lanes.is_full(lane) {
                *since = None;
                continue;
            }
            let since = *since.get_or_insert(now);
            if now.saturating_duration_since(since) >= HOLD_AFTER {
                next.held.extend(lanes.partitions_of(lane));
            } else {
                next.wait = true;
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_kafka::Record;

    fn records(partition: i32, n: i64) -> Vec<Record> {
        (0..n)
            .map(|offset| Record::at("t", partition, offset))
            .collect()
    }

    #[test]
    fn a_full_lane_is_waited_for_then_held_back_and_released_when_it_has_room() {
        // Two writers: partitions 0 and 2 in lane 0, partition 1 in lane 1.
        let mut lanes = Lanes::new(2, 2, usize::MAX);
        for p in 0..3 {
            lanes.lane_of("t", p);
        }
        let mut holds = Holds::new(lanes.count());
        let start = Instant::now();
        assert_eq!(holds.next(&lanes, start), Next::default(), "nothing full");

        lanes.push(records(1, 4), Duration::ZERO);
        let waiting = holds.next(&lanes, start);
        assert!(
            waiting.wait && waiting.held.is_empty(),
            "full for a moment: wait"
        );
        let just_before = holds.next(&lanes, start + HOLD_AFTER - Duration::from_millis(1));
        assert!(just_before.wait);

        let held = holds.next(&lanes, start + HOLD_AFTER);
        assert!(!held.wait, "lane 0 is free: poll for it");
        assert_eq!(held.held, BTreeSet::from([("t".to_owned(), 1)]));

        // A writer that took its batch restarts the clock even if its lane is still full.
        let mut busy = Holds::new(lanes.count());
        busy.next(&lanes, start);
        busy.writers_ready(&[0, 0]);
        assert!(
            busy.next(&lanes, start + HOLD_AFTER).wait,
            "not held: the writer moves"
        );
        // The writer takes a batch: the lane has room, its partition is released; full
        // again later, the wait starts over.
        let _ = lanes.take(1, false);
        let later = start + HOLD_AFTER * 2;
        assert_eq!(holds.next(&lanes, later), Next::default());
        lanes.push(records(1, 2), Duration::ZERO);
        assert!(holds.next(&lanes, later).wait, "full since `later`");
        assert!(holds.next(&lanes, later + HOLD_AFTER / 2).wait);
        assert_eq!(
            holds.next(&lanes, later + HOLD_AFTER).held.len(),
            1,
            "held again after a full HOLD_AFTER"
        );
    }

    #[test]
    fn every_partition_of_a_stuck_lane_is_held() {
        let mut lanes = Lanes::new(2, 1, usize::MAX);
        for p in 0..4 {
            lanes.lane_of("t", p);
        }
        lanes.push(records(2, 2), Duration::ZERO);
        let mut holds = Holds::new(lanes.count());
        let start = Instant::now();
        holds.next(&lanes, start);
        let next = holds.next(&lanes, start + HOLD_AFTER);
        assert_eq!(
            next.held,
            BTreeSet::from([("t".to_owned(), 0), ("t".to_owned(), 2)]),
            "partition 0 shares the lane of partition 2"
        );
    }
}
