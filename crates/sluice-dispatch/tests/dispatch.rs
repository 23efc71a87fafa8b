//! The dispatcher on the real stack (issue 6, acceptance 1, 2 and 7): concurrent writers
//! and three dispatchers publish every event exactly once, at the offset the row records;
//! one key's events reach the topic in creation order; an idle dispatcher is woken by
//! NOTIFY. Also: an explicit partition the topic does not have yet.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::kafka::{read_topic, settings};
use common::{setup, teardown};
use serde_json::json;
use sluice_dispatch::Dispatcher;
use sluice_dispatch::{DispatchError, DispatchTotals};
use sluice_outbox::{NewEvent, enqueue};
use sluice_testkit::{Stack, TestSchema};
use sqlx::{Connection, PgConnection};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

type Running = Vec<JoinHandle<Result<DispatchTotals, DispatchError>>>;
/// id, status, published partition, published offset, attempts.
type PublishedRow = (Uuid, String, Option<i32>, Option<i64>, i32);

/// Starts `n` dispatchers, each with its own connection, listener and producer.
fn start_dispatchers(
    stack: &Stack,
    schema: &TestSchema,
    n: usize,
    batch: u32,
    stop: &CancellationToken,
) -> Running {
    (0..n)
        .map(|i| {
            let mut s = settings(stack, schema, &format!("dispatcher-{i}"));
            s.batch_size = batch;
            let dispatcher = Dispatcher::new(s).expect("dispatcher");
            tokio::spawn(dispatcher.run(stop.child_token()))
        })
        .collect()
}

async fn stop_all(stop: &CancellationToken, running: Running) -> Vec<DispatchTotals> {
    stop.cancel();
    let mut totals = vec![];
    for handle in running {
        totals.push(
            handle
                .await
                .expect("dispatcher task")
                .expect("dispatcher run"),
        );
    }
    totals
}

async fn count(conn: &mut PgConnection, status: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM outbox_events WHERE status = $1")
        .bind(status)
        .fetch_one(conn)
        .await
        .unwrap()
}

async fn wait_published(conn: &mut PgConnection, expected: i64, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let published = count(conn, "PUBLISHED").await;
        if published == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{published} of {expected} events PUBLISHED after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `writers` tasks each enqueue `per_writer` events made by `make(writer, i)`, committing
/// every `per_tx` events; returns when all committed.
async fn write_concurrently(
    schema: &TestSchema,
    writers: usize,
    per_writer: usize,
    per_tx: usize,
    make: impl Fn(usize, usize) -> NewEvent + Send + Sync + Clone + 'static,
) {
    let mut tasks = vec![];
    for w in 0..writers {
        let schema = schema.clone();
        let make = make.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = schema.connect().await;
            for chunk in (0..per_writer).collect::<Vec<_>>().chunks(per_tx) {
                let mut tx = conn.begin().await.unwrap();
                for &i in chunk {
                    enqueue(&mut tx, &make(w, i)).await.unwrap();
                }
                tx.commit().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// Acceptance 1: 10,000 events from 8 concurrent writers, 3 dispatchers → each event id
/// exactly once in the topic, every row PUBLISHED with the partition and offset where its
/// record really is.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn ten_thousand_events_three_dispatchers_each_published_exactly_once() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-dispatch");
    sluice_testkit::create_topic(&stack, &topic, 6).await;

    let stop = CancellationToken::new();
    let running = start_dispatchers(&stack, &schema, 3, 500, &stop);
    let started = Instant::now();
    let t = topic.clone();
    write_concurrently(&schema, 8, 1250, 50, move |w, i| {
        NewEvent::new(
            t.clone(),
            "order",
            format!("{}", (w * 1250 + i) % 700),
            "order.placed",
            json!({"writer": w, "i": i}),
        )
    })
    .await;
    let written = started.elapsed();
    wait_published(&mut conn, 10_000, Duration::from_secs(180)).await;
    let elapsed = started.elapsed();
    let totals = stop_all(&stop, running).await;
    println!(
        "10,000 events: written in {written:?} by 8 writers, all PUBLISHED after {elapsed:?} \
         ({:.0} events/s end to end); per dispatcher published: {:?}",
        10_000.0 / elapsed.as_secs_f64(),
        totals.iter().map(|t| t.published).collect::<Vec<_>>()
    );

    let records = read_topic(&stack, &topic);
    assert_eq!(
        records.len(),
        10_000,
        "the topic holds exactly 10,000 records"
    );
    let mut at: HashMap<Uuid, (i32, i64)> = HashMap::new();
    for r in &records {
        assert!(
            at.insert(r.event_id, (r.partition, r.offset)).is_none(),
            "event {} published twice",
            r.event_id
        );
    }
    let rows: Vec<PublishedRow> = sqlx::query_as(
        "SELECT id, status, published_partition, published_offset, attempts FROM outbox_events",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(rows.len(), 10_000);
    for (id, status, partition, offset, attempts) in rows {
        assert_eq!(status, "PUBLISHED", "{id}");
        assert_eq!(attempts, 0, "{id} needed no retry");
        let (p, o) = at
            .get(&id)
            .copied()
            .unwrap_or_else(|| panic!("{id} not in the topic"));
        assert_eq!(
            (partition, offset),
            (Some(p), Some(o)),
            "{id}'s recorded position"
        );
    }
    assert!(
        totals.iter().filter(|t| t.published > 0).count() >= 2,
        "the work was shared: {totals:?}"
    );
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

/// Acceptance 2: 100 keys × 100 events, written while 3 dispatchers run → within each key
/// the topic order equals the creation (seq) order.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn per_key_order_with_three_dispatchers() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-order");
    sluice_testkit::create_topic(&stack, &topic, 4).await;

    let stop = CancellationToken::new();
    // Small batches so that the dispatchers contend for the same keys all the time.
    let running = start_dispatchers(&stack, &schema, 3, 37, &stop);
    let t = topic.clone();
    // 4 writers × 25 keys; each writer goes round its keys 100 times, one event per key per
    // round, committing 10 events at a time.
    write_concurrently(&schema, 4, 2500, 10, move |w, i| {
        let key = format!("key-{}", w * 25 + i % 25);
        NewEvent::new(
            t.clone(),
            "user",
            key,
            "mailbox.command",
            json!({"round": i / 25}),
        )
    })
    .await;
    wait_published(&mut conn, 10_000, Duration::from_secs(180)).await;
    stop_all(&stop, running).await;

    let seq: HashMap<Uuid, i64> = sqlx::query_as("SELECT id, seq FROM outbox_events")
        .fetch_all(&mut conn)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let records = read_topic(&stack, &topic);
    assert_eq!(records.len(), 10_000);
    let mut per_key: BTreeMap<String, Vec<(i32, i64, i64, i64)>> = BTreeMap::new();
    for r in &records {
        per_key.entry(r.key.clone()).or_default().push((
            r.partition,
            r.offset,
            seq[&r.event_id],
            r.payload["round"].as_i64().unwrap(),
        ));
    }
    assert_eq!(per_key.len(), 100);
    for (key, mut list) in per_key {
        assert_eq!(list.len(), 100, "{key}");
        let partitions: HashSet<i32> = list.iter().map(|x| x.0).collect();
        assert_eq!(partitions.len(), 1, "{key} is in one partition");
        list.sort_by_key(|x| x.1);
        let seqs: Vec<i64> = list.iter().map(|x| x.2).collect();
        let mut sorted = seqs.clone();
        sorted.sort_unstable();
        assert_eq!(seqs, sorted, "{key}: topic order is seq order");
        let rounds: Vec<i64> = list.iter().map(|x| x.3).collect();
        assert_eq!(
            rounds,
            (0..100).collect::<Vec<_>>(),
            "{key}: rounds in order"
        );
    }
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

/// Acceptance 7: an idle dispatcher (poll interval 60 s) publishes an inserted event at once,
/// woken by NOTIFY. Prints p50/p99 of commit → acknowledged-and-marked; asserts only that
/// the wake-up did not wait for the poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_dispatcher_is_woken_by_notify() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-latency");
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let stop = CancellationToken::new();
    let mut s = settings(&stack, &schema, "idle");
    s.poll_interval = Duration::from_secs(60);
    let running = vec![tokio::spawn(
        Dispatcher::new(s).unwrap().run(stop.child_token()),
    )];
    // Warm up: the producer connects and learns the topic.
    enqueue(
        &mut conn,
        &NewEvent::new(&topic, "user", "0", "warm.up", json!({})),
    )
    .await
    .unwrap();
    wait_published(&mut conn, 1, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut wall = vec![];
    for i in 1..=50_i64 {
        let started = Instant::now();
        let id = enqueue(
            &mut conn,
            &NewEvent::new(&topic, "user", "1", "ping", json!({"i": i})),
        )
        .await
        .unwrap();
        loop {
            let status: String =
                sqlx::query_scalar("SELECT status FROM outbox_events WHERE id = $1")
                    .bind(id)
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
            if status == "PUBLISHED" {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "event {i} not published"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        wall.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The database's own view: insert (commit) → the mark's transaction.
    let mut db: Vec<f64> = sqlx::query_scalar(
        "SELECT extract(epoch FROM published_at - created_at)::float8 * 1000
         FROM outbox_events WHERE event_type = 'ping'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    stop_all(&stop, running).await;
    wall.sort();
    db.sort_by(f64::total_cmp);
    let pct = |p: f64| ((wall.len() as f64 - 1.0) * p).round() as usize;
    println!(
        "idle dispatcher, 50 events one at a time: enqueue → PUBLISHED seen (wall) p50 {:?} \
         p99 {:?} max {:?}; created_at → published_at (db) p50 {:.1} ms p99 {:.1} ms",
        wall[pct(0.5)],
        wall[pct(0.99)],
        wall[wall.len() - 1],
        db[pct(0.5)],
        db[pct(0.99)],
    );
    assert!(
        wall[pct(0.5)] < Duration::from_secs(5),
        "woken by NOTIFY, not by the 60 s poll"
    );
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

/// An explicit partition the topic does not have: the dispatcher does not grow the topic for
/// it (one bad row must not move every key) and counts a failed attempt naming the partition;
/// once the partition registry has opened it (its own sync to the broker failed), the
/// dispatcher grows the topic to the registry's count and publishes the event there, without
/// counting an attempt for that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_partition_grows_the_topic_only_to_the_partition_registry() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-grow");
    sluice_testkit::create_topic(&stack, &topic, 2).await;
    let mut dispatcher = Dispatcher::new(settings(&stack, &schema, "grower")).unwrap();
    let admin = sluice_kafka::Admin::new(
        &sluice_core::KafkaClientSettings::new(&stack.bootstrap),
        Duration::from_secs(10),
    )
    .unwrap();
    // A first event so the producer knows the topic with 2 partitions.
    enqueue(
        &mut conn,
        &NewEvent::new(&topic, "user", "1", "e", json!({})),
    )
    .await
    .unwrap();
    let event = NewEvent::new(&topic, "user", "7", "e", json!({})).with_partition(4);
    enqueue(&mut conn, &event).await.unwrap();
    // Nothing opened partition 4: a failed attempt that says why, and the topic unchanged.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (status, error) = loop {
        dispatcher.dispatch_once().await.unwrap();
        let (status, attempts, _, error) = event_row(&mut conn, event.id).await;
        if attempts > 0 {
            break (status, error.unwrap_or_default());
        }
        assert!(
            Instant::now() < deadline,
            "no failed attempt after 60 s ({status})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, "PENDING", "{error}");
    assert!(
        error.contains(&format!(
            "partition 4 is not in topic {topic} (2 partitions)"
        )) && error.contains("registry opened 0 partitions"),
        "{error}"
    );
    assert_eq!(admin.partition_count(&topic).unwrap(), Some(2));
    let backed_off: bool =
        sqlx::query_scalar("SELECT available_at > updated_at FROM outbox_events WHERE id = $1")
            .bind(event.id)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert!(backed_off, "a failed attempt waits for its back-off");

    // The registry opened partitions 0–4; the broker never heard of 2–4.
    sqlx::query(
        "INSERT INTO topic_partition_counts (topic, partition, users) \
         SELECT $1, p, 1 FROM generate_series(0, 4) AS p",
    )
    .bind(&topic)
    .execute(&mut conn)
    .await
    .unwrap();
    loop {
        dispatcher.dispatch_once().await.unwrap();
        let (status, attempts, partition, _) = event_row(&mut conn, event.id).await;
        assert_eq!(
            attempts, 1,
            "growing to the registry's count costs no attempt"
        );
        if status == "PUBLISHED" {
            assert_eq!(partition, Some(4));
            break;
        }
        assert!(Instant::now() < deadline, "still {status} after 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(admin.partition_count(&topic).unwrap(), Some(5));
    let records = read_topic(&stack, &topic);
    assert_eq!(records.iter().filter(|r| r.event_id == event.id).count(), 1);
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

/// An event's status, failed attempts, published partition and last error.
/// A stop while a batch is in flight ends the run once that batch is settled. (It hung for
/// ever: when the last batch in flight settled in the round the stop was first seen, the loop
/// waited on an empty set of batches in flight with the stop no longer watched.) The batch
/// here is one event of a topic that does not exist, in flight until the delivery timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_with_a_batch_in_flight_ends_once_it_is_settled() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-never-made");
    let stop = CancellationToken::new();
    let mut s = settings(&stack, &schema, "stopping");
    s.delivery_timeout = Duration::from_secs(3);
    let running = tokio::spawn(Dispatcher::new(s).unwrap().run(stop.child_token()));
    let id = enqueue(
        &mut conn,
        &NewEvent::new(&topic, "user", "1", "in.flight", json!({})),
    )
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while event_row(&mut conn, id).await.0 != "DISPATCHING" {
        assert!(Instant::now() < deadline, "never claimed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stopping = Instant::now();
    stop.cancel();
    let ended = tokio::time::timeout(Duration::from_secs(30), running).await;
    let took = stopping.elapsed();
    let totals = ended
        .expect("the run ends after the batch in flight")
        .expect("dispatcher task")
        .expect("dispatcher run");
    assert_eq!(
        (totals.batches, totals.published, totals.retried),
        (1, 0, 1),
        "{totals:?}"
    );
    let (status, attempts, _, error) = event_row(&mut conn, id).await;
    assert_eq!((status.as_str(), attempts), ("PENDING", 1), "{error:?}");
    assert!(took < Duration::from_secs(15), "the stop took {took:?}");
    teardown(schema, conn).await;
}

/// An event for a topic the broker does not have: librdkafka only reports a timed-out
/// delivery, so the dispatcher asks the broker and its failed attempt says the topic does not
/// exist (and that sluice does not create it); once the topic is made, the event is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_for_a_missing_topic_fails_naming_the_topic() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-absent");
    let mut settings = settings(&stack, &schema, "absent");
    settings.delivery_timeout = Duration::from_secs(2);
    let mut dispatcher = Dispatcher::new(settings).unwrap();
    let event = NewEvent::new(&topic, "user", "1", "e", json!({"n": 1}));
    enqueue(&mut conn, &event).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let error = loop {
        dispatcher.dispatch_once().await.unwrap();
        let (_, attempts, _, error) = event_row(&mut conn, event.id).await;
        if attempts > 0 {
            break error.unwrap_or_default();
        }
        assert!(Instant::now() < deadline, "no failed attempt after 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        error.starts_with(&format!(
            "topic {topic} does not exist; sluice does not create it: "
        )),
        "{error}"
    );

    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        dispatcher.dispatch_once().await.unwrap();
        let (status, _, _, _) = event_row(&mut conn, event.id).await;
        if status == "PUBLISHED" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not published after 60 s ({status})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(read_topic(&stack, &topic).len(), 1, "published once");
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

async fn event_row(
    conn: &mut PgConnection,
    id: Uuid,
) -> (String, i32, Option<i32>, Option<String>) {
    sqlx::query_as(
        "SELECT status, attempts, published_partition, last_error FROM outbox_events \
         WHERE id = $1",
    )
    .bind(id)
    .fetch_one(conn)
    .await
    .unwrap()
}
