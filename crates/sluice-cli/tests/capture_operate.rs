//! Operating `sluice capture` (issue 46). Its initial snapshot cut short: a table of 60,000 rows, the
//! capture SIGKILLed while its snapshot is being sent, rows deleted while it is down, then
//! started again. The state topic says the snapshot did not complete, so the new start keeps
//! the slot, takes the snapshot again and streams from the slot's start. At the end every row
//! is in the topic as an `r` record (some twice: the first copy's, re-sent as Debezium
//! re-snapshots), each row deleted meanwhile follows as a `d` (a slot made anew never sent
//! them, and replicas kept the first copy's rows), and a row written after the restart
//! follows as a streamed `c`. An idle capture: heartbeats, the
//! metrics, readiness and `sluice capture status`. A publication that does not exist: exit 1 at
//! the start, no slot made.
//!
//! sluice-test: decodes-wal (it streams slots with `sluice capture`, under deadlines):
//! `scripts/test-all` never runs this binary beside a `floods-wal` one.
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
use sqlx::Connection;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::Env;

const ROWS: i64 = 60_000;

/// Ids by the op of their records in a topic (`r`, `c`, `d`), and the records in all.
type ByOp = (BTreeSet<i64>, BTreeSet<i64>, BTreeSet<i64>, usize);

/// The ids of `topic`'s `r`, `c` and `d` records, and its records, read to its end.
fn ids_by_op(env: &Env, topic: &str) -> ByOp {
    let events = support::read_topic(&env.stack.bootstrap, topic, |m| {
        let value: Option<serde_json::Value> =
            m.payload().map(|v| serde_json::from_slice(v).unwrap());
        value.and_then(|value| {
            let event = &value["payload"]; // with its schema
            let image = if event["op"] == "d" {
                "before"
            } else {
                "after"
            };
            Some((
                event["op"].as_str()?.to_owned(),
                event[image]["id"].as_i64()?,
            ))
        })
    });
    let (mut read, mut created, mut deleted) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for (op, id) in events.iter().flatten() {
        match op.as_str() {
            "r" => read.insert(*id),
            "c" => created.insert(*id),
            "d" => deleted.insert(*id),
            _ => false,
        };
    }
    (read, created, deleted, events.len())
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
    support::slots::publish(&mut conn, &source.publication, "public.items").await;
    let topic = source.topic("public", "items");
    sluice_testkit::create_topic(&env.stack, &topic, 3).await;

    // Killed once some of the snapshot is in Kafka, long before all of it.
    let mut capture = source.spawn_capture(&env, "capture-0", &[]);
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
    // Deleted while the capture is down, after the first copy sent most of them.
    let gone: BTreeSet<i64> = (1..=100).collect();
    sqlx::query("DELETE FROM public.items WHERE id <= 100")
        .execute(&mut conn)
        .await
        .unwrap();

    let mut capture = source.spawn_capture(&env, "capture-1", &[]);
    let deadline = Instant::now() + Duration::from_secs(120);
    let again = cut_at + ROWS - 100;
    while records_in(&env.stack.bootstrap, std::slice::from_ref(&topic)) < again {
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
    let (read, created, deleted, records) = loop {
        capture.assert_alive();
        let (read, created, deleted, records) = ids_by_op(&env, &topic);
        if created.contains(&-1) {
            break (read, created, deleted, records);
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
    let first_copy: BTreeSet<i64> = gone.intersection(&read).copied().collect();
    assert!(
        !first_copy.is_empty(),
        "the first copy sent none of the deleted rows"
    );
    assert_eq!(
        deleted, first_copy,
        "each row the first copy sent and that was deleted since follows as a d"
    );
    let kept: BTreeSet<i64> = (101..=ROWS).collect();
    assert!(kept.is_subset(&read), "every row as an r record");
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

/// An idle capture, operated: heartbeats move its slot past WAL written elsewhere (another
/// database of the cluster), `/metrics` shows the slot's lag and activity, `/health/ready`
/// says ready while a session streams and not once the slot is gone, and `sluice capture
/// status` reports the slot (exit 0), or that it does not exist (exit 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_slot_moves_on_and_is_reported() {
    let Some(env) = Env::new().await else {
        return;
    };
    let source = Source::create(&env, "CREATE TABLE public.items (id bigint PRIMARY KEY);").await;
    let mut conn = source.connect().await;
    support::slots::publish(&mut conn, &source.publication, "public.items").await;
    let port = support::http::free_port();
    let addr = format!("127.0.0.1:{port}");
    let operated = [
        ("SLUICE_HTTP_ADDR", addr.as_str()),
        ("CAPTURE_HEARTBEAT_INTERVAL_MS", "200"),
    ];
    let mut capture = source.spawn_capture(&env, "capture-idle", &operated);
    let mut admin = sqlx::PgConnection::connect(&env.stack.database_url)
        .await
        .unwrap();
    support::slots::wait_active(&mut admin, &source.slot, Duration::from_secs(60), || {
        capture.assert_alive();
        capture.tail()
    })
    .await;
    let confirmed_sql = format!(
        "SELECT pg_wal_lsn_diff(confirmed_flush_lsn, '0/0')::bigint FROM pg_replication_slots \
         WHERE slot_name = '{}'",
        source.slot
    );
    // WAL of another database: nothing of it is published here.
    let mut other = env.schema.connect().await;
    sqlx::raw_sql(
        "CREATE TABLE filler (x int); INSERT INTO filler SELECT generate_series(1, 20000)",
    )
    .execute(&mut other)
    .await
    .unwrap();
    let written: i64 =
        sqlx::query_scalar("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
            .fetch_one(&mut other)
            .await
            .unwrap();
    let moving = Instant::now();
    let deadline = moving + Duration::from_secs(20);
    while sqlx::query_scalar::<_, i64>(&confirmed_sql)
        .fetch_one(&mut admin)
        .await
        .unwrap()
        < written
    {
        capture.assert_alive();
        assert!(
            Instant::now() < deadline,
            "the idle slot stayed behind:\n{}",
            capture.tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    println!(
        "the idle slot passed the other database's WAL after {:?}",
        moving.elapsed()
    );

    // The endpoint: the probe reads the slot at start and every 10 s.
    let deadline = Instant::now() + Duration::from_secs(20);
    while support::http::status_of(port, "/health/ready") != Some(200) {
        assert!(Instant::now() < deadline, "not ready:\n{}", capture.tail());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let samples = support::http::scrape(port);
    assert_eq!(
        support::http::sum(&samples, "sluice_capture_slot_active", &[]),
        1.0
    );
    assert!(
        samples
            .iter()
            .any(|s| s.metric == "sluice_capture_slot_lag_bytes"),
        "the lag is exported"
    );

    let status = env.output(
        &["capture", "status"],
        &[
            ("DATABASE_URL", source.url.as_str()),
            ("CAPTURE_SLOT", source.slot.as_str()),
            ("CAPTURE_PUBLICATION", source.publication.as_str()),
            ("CAPTURE_TOPIC_PREFIX", source.topic_prefix.as_str()),
        ],
    );
    let text = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        status.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(
        text.contains(&format!("slot {} on database", source.slot)),
        "{text}"
    );
    assert!(text.contains("active, confirmed"), "{text}");
    assert!(text.contains("initial snapshot: streaming"), "{text}");

    // The slot dropped under it: not ready, and status says so.
    capture.signal("TERM");
    assert_eq!(capture.wait(Duration::from_secs(40)).code(), Some(0));
    support::slots::drop_slot(
        &std::env::var("SLUICE_STACK").unwrap(),
        &env.stack.database_url,
        &source.slot,
    );
    let gone = env.output(
        &["capture", "status"],
        &[
            ("DATABASE_URL", source.url.as_str()),
            ("CAPTURE_SLOT", source.slot.as_str()),
        ],
    );
    assert_eq!(gone.status.code(), Some(1), "{gone:?}");
    assert!(
        String::from_utf8_lossy(&gone.stdout).contains("does not exist"),
        "{gone:?}"
    );
}

/// A publication that does not exist stops the capture at its start (exit 1, naming it),
/// before it makes a slot that would hold WAL for a stream that cannot start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_publication_stops_the_capture_before_its_slot() {
    let Some(env) = Env::new().await else {
        return;
    };
    // The table exists; its publication (`source.publication`) was never made.
    let source = Source::create(&env, "CREATE TABLE public.items (id bigint PRIMARY KEY);").await;
    let mut capture = source.spawn_capture(&env, "capture-no-publication", &[]);
    let status = capture.wait(Duration::from_secs(60));
    let log = capture.tail();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains(&format!(
            "publication {} does not exist in the source database",
            source.publication
        )),
        "{log}"
    );
    // The stop says how a slot, had one been made, would be dropped.
    assert!(
        log.contains(&format!("pg_drop_replication_slot('{}')", source.slot)),
        "{log}"
    );
    let mut admin = sqlx::PgConnection::connect(&env.stack.database_url)
        .await
        .unwrap();
    let slots: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1")
            .bind(&source.slot)
            .fetch_one(&mut admin)
            .await
            .unwrap();
    assert_eq!(slots, 0, "no slot was made:\n{log}");
}

/// A slot of the capture's name that is not a logical `pgoutput` slot of the source database
/// (a physical slot, another decoder's) stops the capture at its start (exit 1, naming what it
/// is), instead of failing every session as if the next might pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_of_another_kind_stops_the_capture_naming_it() {
    let Some(env) = Env::new().await else {
        return;
    };
    let source = Source::create(&env, "CREATE TABLE public.items (id bigint PRIMARY KEY);").await;
    let mut db = source.connect().await;
    let publication = format!(
        "CREATE PUBLICATION {} FOR TABLE public.items",
        source.publication
    );
    sqlx::query(&publication).execute(&mut db).await.unwrap();
    for (n, make, what) in [
        (
            1,
            "SELECT pg_create_physical_replication_slot($1)",
            "is a physical slot",
        ),
        (
            2,
            "SELECT pg_create_logical_replication_slot($1, 'test_decoding')",
            "decodes with test_decoding",
        ),
    ] {
        sqlx::query(make)
            .bind(&source.slot)
            .execute(&mut db)
            .await
            .unwrap();
        let mut capture = source.spawn_capture(&env, &format!("capture-foreign-slot-{n}"), &[]);
        let status = capture.wait(Duration::from_secs(60));
        let log = capture.tail();
        assert_eq!(status.code(), Some(1), "{log}");
        assert!(
            log.contains(&format!(
                "replication slot {} (CAPTURE_SLOT) exists but {what}",
                source.slot
            )),
            "{log}"
        );
        sqlx::query("SELECT pg_drop_replication_slot($1)")
            .bind(&source.slot)
            .execute(&mut db)
            .await
            .unwrap();
    }
}

/// A published table whose topic does not exist (the brokers do not create topics): the
/// capture goes on streaming, `/health/ready` says within seconds that Kafka acknowledges
/// nothing of the oldest transaction waiting, and stays not ready (no 200) through the
/// sessions after the one that failed when librdkafka gave the records up (after 10 s
/// here), which send them again and fail at once; `sluice_capture_unacknowledged_age_seconds`
/// grows across them. Once
/// the topic is made, every change arrives, readiness comes back, and SIGTERM exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_topic_makes_the_capture_not_ready_until_it_is_made() {
    let Some(env) = Env::new().await else {
        return;
    };
    let source = Source::create(&env, "CREATE TABLE public.items (id bigint PRIMARY KEY);").await;
    let mut conn = source.connect().await;
    support::slots::publish(&mut conn, &source.publication, "public.items").await;
    let topic = source.topic("public", "items");
    let port = support::http::free_port();
    let addr = format!("127.0.0.1:{port}");
    // Records of a topic the brokers do not have are given up after 10 s (librdkafka's
    // topic.metadata.propagation.max.ms, 30 s by default).
    let mut capture = source.spawn_capture(
        &env,
        "capture-no-topic",
        &[
            ("SLUICE_HTTP_ADDR", &addr),
            ("KAFKA_TOPIC_METADATA_PROPAGATION_MAX_MS", "10000"),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while support::http::status_of(port, "/health/ready") != Some(200) {
        capture.assert_alive();
        assert!(
            Instant::now() < deadline,
            "never ready:\n{}",
            capture.tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    sqlx::query("INSERT INTO public.items SELECT generate_series(1, 100)")
        .execute(&mut conn)
        .await
        .unwrap();
    let inserted = Instant::now();
    let (mut stalled, mut said, mut waited) = (None, String::new(), 0.0_f64);
    // Until 8 s after it said so: past the first session's failure (librdkafka gives the
    // records up after 10 s here) and into the next sessions, which fail at once.
    while stalled.is_none_or(|at: Duration| inserted.elapsed() < at + Duration::from_secs(8)) {
        capture.assert_alive();
        let (status, body) = support::http::get(port, "/health/ready", "text/plain");
        let stall = body.contains("Kafka has acknowledged none of the oldest waiting");
        match (status, stalled) {
            (200, Some(at)) => panic!(
                "ready again {:?} after the insert, {at:?} after it said: {said}\n{}",
                inserted.elapsed(),
                capture.tail()
            ),
            // Before the wait reaches 15 s, the first session's end says "no session".
            (_, None) if !stall => assert!(
                inserted.elapsed() < Duration::from_secs(25),
                "no stall said with the topic missing ({status}: {body}):\n{}",
                capture.tail()
            ),
            (_, None) => {
                stalled = Some(inserted.elapsed());
                said = body;
            }
            (_, Some(_)) => {}
        }
        let age = support::http::sum(
            &support::http::scrape(port),
            "sluice_capture_unacknowledged_age_seconds",
            &[],
        );
        waited = waited.max(age);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let stalled = stalled.expect("a stall said");
    assert!(
        waited >= 15.0,
        "the wait went on across sessions: at most {waited} s"
    );
    let log = std::fs::read_to_string(env.dir.join("capture-no-topic.log")).unwrap();
    assert!(log.contains(&topic), "the log names the topic:\n{log}");
    println!(
        "not ready {stalled:?} after the insert ({said}), never ready again in the 8 s \
         after; unacknowledged for up to {waited} s"
    );

    sluice_testkit::create_topic(&env.stack, &topic, 3).await;
    let made = Instant::now();
    let deadline = made + Duration::from_secs(120);
    let ids = loop {
        capture.assert_alive();
        let ids: BTreeSet<i64> = support::read_topic(&env.stack.bootstrap, &topic, |m| {
            let value: serde_json::Value = serde_json::from_slice(m.payload()?).ok()?;
            value["payload"]["after"]["id"].as_i64()
        })
        .into_iter()
        .flatten()
        .collect();
        if ids.len() == 100 {
            break ids;
        }
        assert!(
            Instant::now() < deadline,
            "{} of 100 changes after the topic was made:\n{}",
            ids.len(),
            capture.tail()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(ids, (1..=100).collect::<BTreeSet<i64>>());
    while support::http::status_of(port, "/health/ready") != Some(200) {
        capture.assert_alive();
        assert!(
            Instant::now() < deadline,
            "not ready again:\n{}",
            capture.tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "every change in the topic and ready again {:?} after it was made",
        made.elapsed()
    );
    let stopping = Instant::now();
    capture.signal("TERM");
    assert_eq!(capture.wait(Duration::from_secs(40)).code(), Some(0));
    println!("SIGTERM: exit 0 after {:?}", stopping.elapsed());
    sluice_testkit::delete_topics(&env.stack, &[&topic]).await;
}
