//! The operator's range reader on the real broker: it returns a range's records in order,
//! and a range whose last records no longer exist ends at the partition's end instead of
//! waiting out its timeout.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use sluice_core::KafkaClientSettings;
use sluice_retry::read::{Range, read_ranges};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_range_past_the_end_of_its_partition_ends_there() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let topic = sluice_testkit::unique("retry-read");
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let records: Vec<_> = (0..3)
        .map(|i| (Some(b"k".to_vec()), Some(format!("v{i}").into_bytes())))
        .collect();
    sluice_testkit::produce(&stack, &topic, &records).await;
    let kafka = KafkaClientSettings::new(&stack.bootstrap);

    let within = Range {
        partition: 0,
        from: 1,
        to: 3,
    };
    let read = read_ranges(&kafka, &topic, &[within], 10, Duration::from_secs(20)).unwrap();
    let offsets: Vec<i64> = read.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![1, 2]);
    assert_eq!(read[0].payload.as_deref(), Some(&b"v1"[..]));

    // Offsets 3 and 4 do not exist (as when retention deleted the tail of a range).
    let past_the_end = Range {
        partition: 0,
        from: 0,
        to: 5,
    };
    let started = Instant::now();
    let read = read_ranges(&kafka, &topic, &[past_the_end], 10, Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("the reader waited for records that do not exist: {e}"));
    let offsets: Vec<i64> = read.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, vec![0, 1, 2]);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
}
