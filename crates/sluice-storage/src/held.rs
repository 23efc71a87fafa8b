//! Which partitions the reader holds back, so that a writer that cannot go on (a lock
//! another session holds, a slow statement) stalls only the partition of its batch.
//!
//! A partition whose queue is at its cap ([`Queues::cap`]) may not be polled for more. For a
//! moment that is the normal state of a backlog (its batch in flight settles within
//! milliseconds and the next one goes), and the reader simply waits for a writer to report;
//! pausing the partition then would only make the client drop and fetch again what it had
//! read ahead. A queue full for [`HOLD_AFTER`] with no batch of its partition settled
//! meanwhile is a partition whose writer is stuck: it is paused in the consumer and the
//! reader polls the others, until the queue has room again (a held partition's records still
//! count in the queues' budget). The queues together over their budget
//! ([`Queues::over_budget`]) for [`HOLD_AFTER`] with no batch stored meanwhile (every writer
//! stuck) pause every assigned partition, so the reader still polls — nothing comes — and
//! keeps its place in the group. A pure state machine (no Kafka, no clock of its own).

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
    /// Pause every assigned partition too: the queues are over budget and no writer moves.
    pub pause_all: bool,
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
        if queues.over_budget() {
            let since = *self.over_budget_since.get_or_insert(now);
            if now.saturating_duration_since(since) >= HOLD_AFTER {
                next.pause_all = true;
                next.wait = false;
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
    fn queues_over_budget_for_long_pause_everything_until_a_batch_settles() {
        // One writer, batches of 4: the budget is 8 records, a queue's cap 8 too.
        let mut queues = Queues::new(1, 4, usize::MAX);
        for partition in 0..3 {
            queues.push(records(partition, 3), Duration::ZERO);
        }
        let mut holds = Holds::new();
        let start = Instant::now();
        let waiting = holds.next(&queues, start);
        assert!(waiting.wait && !waiting.pause_all, "9 of 8: wait");
        let held = holds.next(&queues, start + HOLD_AFTER);
        assert!(
            held.pause_all && !held.wait,
            "poll (nothing comes) to stay in the group"
        );
        assert_eq!(holds.next(&queues, start + HOLD_AFTER * 2), held, "stable");
        holds.settled(&key(2));
        assert!(holds.next(&queues, start + HOLD_AFTER * 2).wait);
    }

    #[test]
    fn a_held_partition_still_counts_in_the_budget() {
        // Two writers, batches of 2: a queue's cap 4, the budget 8 records.
        let mut queues = Queues::new(2, 2, usize::MAX);
        queues.push(records(1, 4), Duration::ZERO);
        queues.push(records(0, 3), Duration::ZERO);
        let mut holds = Holds::new();
        let start = Instant::now();
        let _ = holds.next(&queues, start);
        let held = holds.next(&queues, start + HOLD_AFTER);
        assert_eq!(held.held, BTreeSet::from([key(1)]));
        assert!(!held.wait, "7 of 8: partition 0 may be polled");
        queues.push(records(0, 1), Duration::ZERO);
        assert!(
            holds.next(&queues, start + HOLD_AFTER).wait,
            "8 of 8 with partition 1 held: wait"
        );
    }

    /// One modelled poll: the next partition in turn that is not paused (`next.held`) brings
    /// `run` records from where it stands. Returns how many came.
    fn poll_one(
        queues: &mut Queues,
        next: &Next,
        offsets: &mut [i64],
        next_poll: &mut i32,
        run: i64,
    ) -> usize {
        let partitions = offsets.len() as i32;
        for _ in 0..partitions {
            let p = *next_poll;
            *next_poll = (*next_poll + 1) % partitions;
            if next.held.contains(&key(p)) {
                continue;
            }
            let from = offsets[p as usize];
            let polled: Vec<Record> = (from..from + run)
                .map(|offset| Record::at("t", p, offset))
                .collect();
            offsets[p as usize] += run;
            queues.push(polled, Duration::ZERO);
            return run as usize;
        }
        0
    }

    #[test]
    fn read_ahead_stays_within_two_batches_per_writer_while_every_writer_is_stuck() {
        // Two writers, batches of 10 records; 16 partitions with a backlog; PostgreSQL is
        // down (every writer retries): no batch ever settles. The reader's turn as in
        // reader/mod.rs: hand over (full batches, partial ones when a queue is full or the
        // queues over budget) while the channel has room, then the holds, then wait 100 ms
        // (a slice of `await_report`) or poll one batch of a partition not held.
        let (writers, batch, partitions) = (2usize, 10usize, 16i32);
        let mut queues = Queues::new(writers, batch, usize::MAX);
        let mut holds = Holds::new();
        let start = Instant::now();
        let mut now = start;
        let mut offsets = vec![0i64; partitions as usize];
        let (mut in_flight, mut pushed, mut taken, mut next_poll) = (0usize, 0usize, 0usize, 0i32);
        let mut most = 0usize;
        for _turn in 0..20_000 {
            let any_full = queues.any_full();
            for ((topic, partition), _, full) in queues.ready() {
                if in_flight >= 2 * writers {
                    break; // one per writer in the channel, one being stored
                }
                if !full && !any_full {
                    continue;
                }
                let t = queues.take(&topic, partition, true).unwrap();
                taken += t.records.len();
                in_flight += 1;
            }
            let next = holds.next(&queues, now);
            if next.wait || next.pause_all {
                now += Duration::from_millis(100);
                continue;
            }
            // Poll: the client brings one batch of a partition that is not paused.
            pushed += poll_one(
                &mut queues,
                &next,
                &mut offsets,
                &mut next_poll,
                batch as i64,
            );
            now += Duration::from_millis(10);
            most = most.max(pushed - taken);
        }
        // docs/ARCHITECTURE.md#memory: two batches per writer in the queues (a poll may bring
        // one batch more before the reader sees them full).
        let bound = 2 * batch * writers + batch;
        assert!(
            most <= bound,
            "read ahead in the queues: {most} records, bound {bound} ({} s simulated)",
            (now - start).as_secs()
        );
    }
    #[test]
    fn a_backlog_of_many_partitions_stays_within_the_budget() {
        // Two writers, batches of 10; 24 partitions with a backlog; each batch takes 300 ms
        // to store (PostgreSQL is the bottleneck, nothing is stuck); a poll brings runs of
        // half a batch of one partition. (Its batches are partial: the budget spread over
        // 24 queues leaves none a full batch — docs/ARCHITECTURE.md#batch-loop.)
        backlog(24, 300, 5, 0.4);
    }

    #[test]
    fn a_backlog_of_slow_batches_stays_within_the_budget() {
        // Two writers, batches of 10; 6 partitions with a backlog; every batch takes 1.5 s
        // (a slow trigger); a poll brings a batch of one partition.
        backlog(6, 1_500, 10, 0.9);
    }

    /// A modelled backlog of `partitions` partitions whose batches take `store_ms` to store,
    /// polls bringing runs of `run` records: the read-ahead stays within the budget and the
    /// batches hold at least `fill` of a batch on average.
    fn backlog(partitions: i32, store_ms: u64, run: i64, fill: f64) {
        let (writers, batch) = (2usize, 10usize);
        let mut queues = Queues::new(writers, batch, usize::MAX);
        let mut holds = Holds::new();
        let start = Instant::now();
        let mut now = start;
        let mut offsets = vec![0i64; partitions as usize];
        let (mut pushed, mut taken, mut next_poll) = (0usize, 0usize, 0i32);
        let mut flying: Vec<(PartitionKey, Option<Instant>)> = Vec::new();
        let (mut most, mut batches, mut held_turns) = (0usize, 0usize, 0usize);
        for _turn in 0..200_000 {
            // Writers: a batch taken from the channel is stored 300 ms later.
            let busy = flying.iter().filter(|(_, d)| d.is_some()).count();
            let mut free = writers - busy;
            for f in &mut flying {
                if f.1.is_none() && free > 0 {
                    f.1 = Some(now + Duration::from_millis(store_ms));
                    free -= 1;
                }
            }
            flying.retain(|(k, done)| {
                if done.is_some_and(|d| d <= now) {
                    queues.settled(&k.0, k.1);
                    holds.settled(k);
                    false
                } else {
                    true
                }
            });
            let any_full = queues.any_full();
            for ((topic, partition), _, full) in queues.ready() {
                if flying.iter().filter(|(_, d)| d.is_none()).count() >= writers {
                    break;
                }
                if !full && !any_full {
                    continue;
                }
                let t = queues.take(&topic, partition, true).unwrap();
                taken += t.records.len();
                batches += 1;
                flying.push((t.partition, None));
            }
            let next = holds.next(&queues, now);
            if !next.held.is_empty() {
                held_turns += 1;
            }
            if next.wait || next.pause_all {
                now += Duration::from_millis(10);
                continue;
            }
            pushed += poll_one(&mut queues, &next, &mut offsets, &mut next_poll, run);
            now += Duration::from_millis(1);
            most = most.max(pushed - taken);
        }
        let per_batch = taken as f64 / batches as f64;
        let bound = 2 * batch * writers + batch;
        eprintln!(
            "{} s simulated: {batches} batches of {per_batch:.1} records on average; most read \
             ahead {most} (bound {bound}); turns with partitions held {held_turns}",
            (now - start).as_secs()
        );
        assert!(most <= bound, "read ahead {most} records, bound {bound}");
        assert!(
            per_batch >= fill * batch as f64,
            "batches of {per_batch:.1} of {batch}"
        );
    }
}
