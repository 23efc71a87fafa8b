//! `sluice capture`'s initial snapshot cut short (issue 46): a table of 60,000 rows, the
//! capture SIGKILLed while its snapshot is being sent, then started again. The state topic
//! says the snapshot did not complete, so the new start drops the slot and takes the snapshot
//! again from a new one. At the end every row is in the topic as an `r` record (some twice:
//! the first copy's, re-sent as Debezium re-snapshots), the state says `streaming`, and a
//! row written after the restart follows as a streamed `c`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

// The source database, its publication and slot (dropped with it); not its Connect worker.
#[allow(dead_code)]
#[path = "support/debezium_source.rs"]
mod debezium_source;
mod support;

use debezium_source::{Source, records_in};
use rdkafka::Message;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::Env;

const ROWS: i64 = 60_000;

/// (ids of `r` records, ids of `c` records, records) in `topic`, read to its end.
fn ids_by_op(env: &Env, topic: &str) -> (BTreeSet<i64>, BTreeSet<i64>, usize) {
    let events = support::read_topic(&env.stack.bootstrap, topic, |m| {
        let value: Option<serde_json::Value> =
            m.payload().map(|v| serde_json::from_slice(v).unwrap());
        value.and_then(|value| {
            let event = &value["payload"]; // with its schema
            Some((
                event["op"].as_str()?.to_owned(),
                event["after"]["id"].as_i64()?,
            ))
        })
    });
    let (mut read, mut created) = (BTreeSet::new(), BTreeSet::new());
    for (op, id) in events.iter().flatten() {
        match op.as_str() {
            "r" => read.insert(*id),
            "c" => created.insert(*id),
            _ => false,
        };
    }
    (read, created, events.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_cut_short_is_taken_again() {
    let Some(env) = Env::new().await else {
        return;
    };
    let source = Source::create(
        &env,
        &format!(
            "CREATE TABLE public.items (id bigint PRIMARY KEY, title text); \
             INSERT INTO public.items SELECT g, 'row ' || g FROM generate_series(1, {ROWS}) g;"
        ),
    )
    .await;
    let mut conn = source.connect().await;
    sqlx::raw_sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE public.items",
        source.publication
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    let topic = source.topic("public", "items");
    sluice_testkit::create_topic(&env.stack, &topic, 3).await;

    // Killed once some of the snapshot is in Kafka, long before all of it.
    let mut capture = source.spawn_capture(&env, "capture-0");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        capture.assert_alive();
        let sent = records_in(&env.stack.bootstrap, std::slice::from_ref(&topic));
        if sent > 1_000 {
            assert!(
                sent < ROWS,
                "the snapshot ended before the kill: {sent} records"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no snapshot record:\n{}",
            capture.tail()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    capture.signal("KILL");
    capture.wait(Duration::from_secs(10));
    let cut_at = records_in(&env.stack.bootstrap, std::slice::from_ref(&topic));

    let mut capture = source.spawn_capture(&env, "capture-1");
    let deadline = Instant::now() + Duration::from_secs(120);
    while records_in(&env.stack.bootstrap, std::slice::from_ref(&topic)) < cut_at + ROWS {
        capture.assert_alive();
        assert!(
            Instant::now() < deadline,
            "the snapshot again:\n{}",
            capture.tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sqlx::query("INSERT INTO public.items VALUES (-1, 'after the snapshot')")
        .execute(&mut conn)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let (read, created, records) = loop {
        capture.assert_alive();
        let (read, created, records) = ids_by_op(&env, &topic);
        if created.contains(&-1) {
            break (read, created, records);
        }
        assert!(
            Instant::now() < deadline,
            "the streamed insert:\n{}",
            capture.tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!(
        "snapshot cut after {cut_at} records, taken again: {records} records in all, \
         {} distinct rows read",
        read.len()
    );
    assert_eq!(read.len() as i64, ROWS, "every row as an r record");
    assert_eq!(read.first(), Some(&1));
    assert_eq!(read.last(), Some(&ROWS));
    assert_eq!(
        created,
        BTreeSet::from([-1]),
        "only the streamed insert as c"
    );
    let log = std::fs::read_to_string(env.dir.join("capture-1.log")).unwrap();
    assert!(
        log.contains("the initial snapshot did not complete"),
        "the restart took the snapshot again:\n{log}"
    );
    capture.signal("TERM");
    assert_eq!(capture.wait(Duration::from_secs(40)).code(), Some(0));
}
