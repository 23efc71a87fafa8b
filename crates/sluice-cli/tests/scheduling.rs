//! Writers take partitions, not lanes (docs/ARCHITECTURE.md#batch-loop): any free writer
//! stores the next batch of any partition with no batch in flight. Through the `sluice`
//! binary on the real stack, with the `counted` table whose trigger logs every applied row:
//! partitions handed between a process's writers mid-stream, while a second process joins
//! and leaves the group (two rebalances with batches in flight), apply every record once.
//! (The lock case — one partition blocked, the others at full rate — is in `stall.rs`.)
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use support::Running;
use support::case::Case;
use support::counted::{MAPPING, records, slow_ddl};

/// Which writers stored each partition's batches, from `run`'s "batch committed" lines.
fn writers_by_partition(run: &Running) -> BTreeMap<String, BTreeSet<u64>> {
    let mut by: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for event in run.events_named("batch committed") {
        let partitions = event["partitions"].as_str().unwrap_or_default().to_owned();
        let writer = event["writer"]
            .as_u64()
            .unwrap_or_else(|| panic!("a batch line names its writer: {event}"));
        by.entry(partitions).or_default().insert(writer);
    }
    by
}

#[tokio::test]
async fn partitions_handed_between_writers_during_rebalances_apply_every_record_once() {
    const RECORDS: i64 = 9_000;
    // Every batch's transaction lasts at least 0.2 s (a statement trigger sleeps), so the
    // stream is still flowing when the second process joins and leaves.
    let ddl = slow_ddl(0.2);
    let mapping = MAPPING.replace("batch_size = 500", "batch_size = 100");
    let Some(case) = Case::with_partitions(&["counted"], &ddl, &mapping, 3).await else {
        return;
    };
    let topic = case.topic("counted");
    sluice_testkit::produce(&case.env.stack, &topic, &records(0..RECORDS)).await;
    let file = case.file.display().to_string();
    let member = |id: &str| {
        case.env.spawn_run(
            id,
            &[
                ("SLUICE_SINKS_FILE", file.as_str()),
                ("STORAGE_INSTANCE_ID", id),
                ("STORAGE_WRITERS", "2"),
            ],
        )
    };
    let timeout = Duration::from_secs(300);
    let applied = "SELECT count(*) FROM applications";
    let mut a = member("sched-a");
    case.env.wait_rows(applied, 500, &mut a, timeout).await;
    // A second process joins (a rebalance with batches in flight) and leaves (another).
    let mut b = member("sched-b");
    let deadline = Instant::now() + timeout;
    while b.events_named("batch committed").len() < 3 {
        b.assert_alive();
        a.assert_alive();
        assert!(Instant::now() < deadline, "b stored nothing\n{}", b.tail());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let at_leave = case.env.count(applied).await;
    b.signal("TERM");
    assert!(b.wait(Duration::from_secs(60)).success(), "{}", b.tail());
    assert!(at_leave < RECORDS, "b left mid-stream ({at_leave} applied)");
    case.env
        .wait_rows(
            &format!("SELECT count(*) FROM consumer_offsets HAVING sum(next_offset) = {RECORDS}"),
            1,
            &mut a,
            timeout,
        )
        .await;
    a.signal("TERM");
    assert!(a.wait(Duration::from_secs(60)).success(), "{}", a.tail());

    let handed = writers_by_partition(&a);
    eprintln!("{RECORDS} records; writers of each partition in process a: {handed:?}");
    assert!(
        handed.values().any(|writers| writers.len() > 1),
        "some partition's batches were stored by both writers: {handed:?}"
    );
    assert!(
        handed.keys().all(|p| !p.contains(',')),
        "a batch holds one partition: {handed:?}"
    );
    let total = case.env.count(applied).await;
    let odd = case
        .rows(
            "SELECT id || ':' || count(*) FROM applications GROUP BY id \
             HAVING count(*) <> 1 ORDER BY id LIMIT 20",
        )
        .await;
    assert_eq!((total, odd), (RECORDS, vec![]), "each record applied once");
    assert_eq!(
        case.env.count("SELECT count(*) FROM counted").await,
        RECORDS
    );
    case.cleanup().await;
}
