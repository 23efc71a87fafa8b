#![allow(clippy::unwrap_used, reason = "tests")]

use super::*;

fn record(partition: i32, offset: i64) -> Record {
    Record::at("t", partition, offset)
}

fn sized(partition: i32, offset: i64, bytes: usize) -> Record {
    let mut record = record(partition, offset);
    record.payload = Some(vec![b'x'; bytes]);
    record
}

fn offsets(taken: &Taken) -> Vec<i64> {
    taken.records.iter().map(|r| r.offset).collect()
}

fn keys(queues: &Queues) -> Vec<i32> {
    queues.ready().into_iter().map(|((_, p), _, _)| p).collect()
}

#[test]
fn a_batch_holds_one_partition_in_poll_order_and_waits_for_a_full_batch() {
    let mut queues = Queues::new(2, 2, usize::MAX);
    queues.push(
        vec![record(0, 1), record(1, 1), record(0, 2), record(0, 3)],
        Duration::from_millis(4),
    );
    assert!(queues.take("t", 1, false).is_none(), "one record: not full");
    let batch = queues.take("t", 0, false).unwrap();
    assert_eq!((batch.partition.1, offsets(&batch)), (0, vec![1, 2]));
    assert_eq!(
        batch.poll,
        Duration::from_millis(3),
        "3 of the poll's 4 records"
    );
    assert_eq!(offsets(&queues.take("t", 1, true).unwrap()), [1]);
}

#[test]
fn a_partition_has_one_batch_in_flight_and_the_others_go_on() {
    let mut queues = Queues::new(2, 2, usize::MAX);
    queues.push((1..=6).map(|o| record(1, o)).collect(), Duration::ZERO);
    queues.push((1..=2).map(|o| record(0, o)).collect(), Duration::ZERO);
    queues.stamp(Instant::now());
    let first = queues.take("t", 1, false).unwrap();
    assert_eq!(offsets(&first), [1, 2]);
    assert_eq!(queues.in_flight("t", 1), Some(Flight::Queued));
    assert!(
        queues.take("t", 1, false).is_none(),
        "partition 1's next batch waits for the one in flight"
    );
    assert_eq!(keys(&queues), [0], "partition 0 is ready, 1 is not");
    let now = Instant::now();
    queues.took("t", 1, now);
    assert_eq!(queues.in_flight("t", 1), Some(Flight::Taken(now)));
    assert_eq!(offsets(&queues.take("t", 0, false).unwrap()), [1, 2]);
    // Settled: the partition's next batch follows in order, by any writer.
    queues.settled("t", 1);
    assert_eq!(offsets(&queues.take("t", 1, false).unwrap()), [3, 4]);
    queues.settled("t", 1);
    assert_eq!(offsets(&queues.take("t", 1, false).unwrap()), [5, 6]);
}

#[test]
fn the_partition_whose_oldest_record_waits_longest_goes_first() {
    let mut queues = Queues::new(1, 10, usize::MAX);
    let t0 = Instant::now();
    queues.push(vec![record(2, 1)], Duration::ZERO);
    queues.stamp(t0);
    queues.push(vec![record(0, 1), record(1, 1)], Duration::ZERO);
    queues.stamp(t0 + Duration::from_millis(5));
    assert_eq!(keys(&queues), [2, 0, 1]);
    let ready = queues.ready();
    assert_eq!((ready[0].1, ready[0].2), (Some(t0), false), "partial");
}

#[test]
fn a_batch_put_back_comes_out_first_with_nothing_in_flight() {
    let mut queues = Queues::new(1, 2, usize::MAX);
    queues.push((1..=3).map(|o| record(0, o)).collect(), Duration::ZERO);
    let batch = queues.take("t", 0, false).unwrap();
    queues.put_back(batch);
    assert_eq!(queues.in_flight("t", 0), None);
    assert_eq!(offsets(&queues.take("t", 0, false).unwrap()), [1, 2]);
    queues.settled("t", 0);
    assert_eq!(offsets(&queues.take("t", 0, true).unwrap()), [3]);
    assert!(queues.is_empty());
}

#[test]
fn a_batch_closes_at_its_byte_size_and_a_record_larger_than_it_goes_alone() {
    let mut queues = Queues::new(1, 10, 100);
    queues.push(vec![sized(0, 1, 40), sized(0, 2, 40)], Duration::ZERO);
    assert!(
        queues.take("t", 0, false).is_none(),
        "80 bytes: not full yet"
    );
    queues.push(
        vec![sized(0, 3, 40), sized(0, 4, 250), sized(0, 5, 10)],
        Duration::ZERO,
    );
    assert_eq!(queues.full().collect::<Vec<_>>(), [("t".to_owned(), 0)]);
    let mut next = |partial| {
        let batch = queues.take("t", 0, partial).map(|b| offsets(&b));
        queues.settled("t", 0);
        batch
    };
    assert_eq!(next(false).unwrap(), [1, 2], "the third 40 would make 120");
    assert_eq!(next(false).unwrap(), [3]);
    assert_eq!(next(false).unwrap(), [4], "over the budget: a batch of one");
    assert!(next(false).is_none(), "10 bytes left: partial");
    assert_eq!(next(true).unwrap(), [5]);
}

#[test]
fn a_partition_is_full_at_two_batches_and_the_queues_at_two_per_writer() {
    let mut queues = Queues::new(2, 2, usize::MAX);
    queues.push((1..=4).map(|o| record(0, o)).collect(), Duration::ZERO);
    assert_eq!(queues.full().count(), 1);
    assert!(!queues.over_budget(), "4 of 8 records");
    queues.push(
        (1..=3)
            .map(|o| record(1, o))
            .chain((1..=1).map(|o| record(2, o)))
            .collect(),
        Duration::ZERO,
    );
    assert!(queues.over_budget(), "8 of 8 records");
    assert!(queues.any_full());
}

#[test]
fn records_of_revoked_partitions_are_dropped_and_a_batch_in_flight_stays_in_flight() {
    let mut queues = Queues::new(2, 10, usize::MAX);
    queues.push(
        vec![record(0, 1), record(1, 1), record(2, 1), record(3, 1)],
        Duration::ZERO,
    );
    let _ = queues.take("t", 3, true).unwrap();
    queues.push(vec![record(3, 2)], Duration::ZERO);
    assert_eq!(
        queues.retain_partitions(&[("t".into(), 1), ("t".into(), 2)]),
        2
    );
    assert_eq!(queues.in_flight("t", 3), Some(Flight::Queued));
    assert_eq!(keys(&queues), [1, 2]);
    assert_eq!(queues.drop_partition("t", 2), 1);
    assert_eq!(queues.drop_partition("u", 0), 0);
    assert_eq!(keys(&queues), [1]);
}

#[test]
fn partitions_of_different_topics_are_different_partitions() {
    let mut queues = Queues::new(2, 10, usize::MAX);
    queues.push(
        vec![
            Record::at("a", 0, 1),
            Record::at("b", 0, 1),
            Record::at("a", 0, 2),
        ],
        Duration::ZERO,
    );
    assert_eq!(offsets(&queues.take("a", 0, true).unwrap()), [1, 2]);
    assert_eq!(offsets(&queues.take("b", 0, true).unwrap()), [1]);
    assert!(queues.take("a", 0, true).is_none());
}
