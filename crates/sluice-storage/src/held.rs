//! Which partitions the reader holds back, so that a writer that cannot go on (a lock
//! another session holds, a slow statement) stalls only the partition of its batch.
//!
//! A partition whose queue is at its cap ([`Queues::cap`]) may not be polled for more. For a
//! moment that is the normal state of a backlog (its batch in flight settles within
//! milliseconds and the next one goes), and the reader simply waits for a writer to report;
//! pausing the partition then would only make the client drop and fetch again what it had
//! read ahead. A queue full for [`HOLD_AFTER`] with no batch of its partition settled
//! meanwhile is a partition whose writer is stuck: it is paused in the consumer and the
//! reader polls the others, until the queue has room again. The same goes for the queues
//! together: over their budget ([`Queues::over_budget`]) for [`HOLD_AFTER`] (every writer
//! stuck), every partition holding records is paused, so the reader still polls and keeps
//! its place in the group. A pure state machine (no Kafka, no clock of its own).

use crate::queues::{PartitionKey, Queues};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// How long a queue stays full before its partition is held back.
pub const HOLD_AFTER: Duration = Duration::from_secs(1);

/// What the reader does next.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Next {
    /// The partitions to pause.
    pub held: BTreeSet<PartitionKey>,
    /// A queue is full, or the queues are over budget, and nothing is held for it yet: wait
    /// for a writer instead of polling.
    pub wait: bool,
}

/// Since when each partition's queue, and the queues together, have been full.
#[derive(Debug, Default)]
pub struct Holds {
    full_since: BTreeMap<PartitionKey, Instant>,
    over_budget_since: Option<Instant>,
}

impl Holds {
    /// Nothing full yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A batch of the partition settled: its clock starts again.
    pub fn settled(&mut self, partition: &PartitionKey) {
        self.full_since.remove(partition);
        self.over_budget_since = None;
    }

    /// The queues as they are at `now`: which partitions to hold back, and whether to wait.
    pub fn next(&mut self, queues: &Queues, now: Instant) -> Next {
        let mut next = Next::default();
        let full: BTreeSet<PartitionKey> = queues.full().collect();
        self.full_since
            .retain(|partition, _| full.contains(partition));
        for partition in full {
            let since = *self.full_since.entry(partition.clone()).or_insert(now);
            if now.saturating_duration_since(since) >= HOLD_AFTER {
                next.held.insert(partition);
            } else {
                next.wait = true;
            }
        }
        if queues.over_budget(&next.held) {
            let since = *self.over_budget_since.get_or_insert(now);
            if now.saturating_duration_since(since) >= HOLD_AFTER {
                next.held.extend(queues.holding());
            } else {
                next.wait = true;
            }
        } else {
            self.over_budget_since = None;
        }
        next
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use sluice_kafka::Record;

    fn records(partition: i32, n: i64) -> Vec<Record> {
        (0..n)
            .map(|offset| Record::at("t", partition, offset))
            .collect()
    }

    fn key(partition: i32) -> PartitionKey {
        ("t".to_owned(), partition)
    }

    #[test]
    fn a_full_queue_is_waited_for_then_held_back_and_released_when_its_batch_settles() {
        // Batches of 2 for 4 writers: partition 1 is full at 4 records.
        let mut queues = Queues::new(4, 2, usize::MAX);
        let mut holds = Holds::new();
        let start = Instant::now();
        assert_eq!(holds.next(&queues, start), Next::default(), "nothing full");

        queues.push(records(1, 5), Duration::ZERO);
        queues.push(records(0, 1), Duration::ZERO);
        let _in_flight = queues.take("t", 1, false).unwrap();
        assert!(queues.full().next().is_none(), "3 records left: room");
        queues.push(records(1, 1), Duration::ZERO);
        let waiting = holds.next(&queues, start);
        assert!(waiting.wait && waiting.held.is_empty(), "full for a moment");
        let just_before = holds.next(&queues, start + HOLD_AFTER - Duration::from_millis(1));
        assert!(just_before.wait);

        let held = holds.next(&queues, start + HOLD_AFTER);
        assert!(!held.wait, "partition 0 has room: poll for it");
        assert_eq!(held.held, BTreeSet::from([key(1)]), "only partition 1");

        // Its batch settles: the clock starts again, the partition is released.
        holds.settled(&key(1));
        queues.settled("t", 1);
        let later = start + HOLD_AFTER * 2;
        let released = holds.next(&queues, later);
        assert!(
            released.held.is_empty() && released.wait,
            "full since `later`"
        );
        let _next = queues.take("t", 1, false).unwrap();
        assert_eq!(holds.next(&queues, later), Next::default());
    }

    #[test]
    fn queues_over_budget_for_long_hold_every_partition_back_until_a_batch_settles() {
        // One writer, batches of 4: the budget is 8 records, a queue's cap 8 too.
        let mut queues = Queues::new(1, 4, usize::MAX);
        for partition in 0..3 {
            queues.push(records(partition, 3), Duration::ZERO);
        }
        let mut holds = Holds::new();
        let start = Instant::now();
        let waiting = holds.next(&queues, start);
        assert!(waiting.wait && waiting.held.is_empty(), "9 of 8: wait");
        let held = holds.next(&queues, start + HOLD_AFTER);
        assert_eq!(held.held, BTreeSet::from([key(0), key(1), key(2)]));
        assert!(!held.wait, "poll (nothing comes) to stay in the group");
        assert_eq!(holds.next(&queues, start + HOLD_AFTER * 2), held, "stable");
        holds.settled(&key(2));
        assert!(holds.next(&queues, start + HOLD_AFTER * 2).wait);
    }
}
