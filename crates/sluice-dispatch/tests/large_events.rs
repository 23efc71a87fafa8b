//! An event larger than the dispatcher's producer queue (`queue.buffering.max.kbytes`, set
//! from `OUTBOX_BATCH_BYTES`, docs/ARCHITECTURE.md#memory) when the clients'
//! `message.max.bytes` is raised for large events: it must still be published, never wait
//! forever for room the queue can never have. On the real stack, with a topic that takes
//! records of up to 10 MiB. And claims cut short by their bytes, through three dispatchers
//! contending for the same keys: every event published once, each key's in creation order.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::kafka::{read_topic, settings};
use common::{setup, teardown};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use serde_json::json;
use sluice_dispatch::Dispatcher;
use sluice_dispatch::settings::OutboxSettings;
use sluice_outbox::{NewEvent, enqueue};
use sqlx::Connection;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// `n` pseudo-random lowercase letters (nothing for PostgreSQL or Kafka to compress).
fn letters(n: usize) -> String {
    let mut x: u64 = 88_172_645_463_325_252;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_larger_than_the_producer_queue_is_published() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-large");
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &stack.bootstrap)
        .create()
        .unwrap();
    let created = admin
        .create_topics(
            &[NewTopic::new(&topic, 1, TopicReplication::Fixed(1))
                .set("max.message.bytes", "10485760")],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await
        .unwrap();
    assert!(created.iter().all(Result::is_ok), "{created:?}");

    // A 256 KiB claim budget (the producer queue: 2 MiB, its floor) and clients that allow
    // records of up to 8 MiB; the event's payload is 3 MB.
    let map: BTreeMap<String, String> = [
        ("DATABASE_URL", schema.url.as_str()),
        ("KAFKA_BOOTSTRAP_SERVERS", stack.bootstrap.as_str()),
        ("KAFKA_MESSAGE_MAX_BYTES", "8388608"),
        ("OUTBOX_BATCH_BYTES", "262144"),
        ("OUTBOX_POLL_INTERVAL_MS", "200"),
        ("OUTBOX_BACKOFF_BASE_MS", "100"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let settings = OutboxSettings::from_map(&map, "large").unwrap();
    let id = enqueue(
        &mut conn,
        &NewEvent::new(
            &topic,
            "doc",
            "1",
            "doc.stored",
            json!({ "body": letters(3_000_000) }),
        ),
    )
    .await
    .unwrap();

    // On a thread and runtime of its own: a producer that waits forever for room blocks its
    // thread, which must not keep this test from reporting.
    let stop = CancellationToken::new();
    let token = stop.clone();
    let dispatcher = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(Dispatcher::new(settings).unwrap().run(token))
    });

    let deadline = Instant::now() + Duration::from_secs(60);
    let (status, attempts) = loop {
        let (status, attempts): (String, i32) =
            sqlx::query_as("SELECT status, attempts FROM outbox_events WHERE id = $1")
                .bind(id)
                .fetch_one(&mut conn)
                .await
                .unwrap();
        if status == "PUBLISHED" || Instant::now() > deadline {
            break (status, attempts);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        status, "PUBLISHED",
        "the 3 MB event after 60 s ({attempts} failed attempts)"
    );
    stop.cancel();
    let totals = dispatcher.join().unwrap().unwrap();
    assert_eq!(totals.published, 1, "{totals:?}");
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_cut_by_their_bytes_publish_each_event_once_in_key_order() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-cut");
    sluice_testkit::create_topic(&stack, &topic, 4).await;
    // 40 keys × 30 rounds, written in rounds so that every claim meets many keys; every
    // seventh event (50 KB) is over the 20 KB claim budget, the others 0.5–8 KB.
    const KEYS: usize = 40;
    const ROUNDS: usize = 30;
    for round in 0..ROUNDS {
        let mut tx = conn.begin().await.unwrap();
        for k in 0..KEYS {
            let i = round * KEYS + k;
            let size = if i.is_multiple_of(7) {
                50_000
            } else {
                500 + (i * 7_919) % 7_500
            };
            let event = NewEvent::new(
                &topic,
                "doc",
                format!("key-{k}"),
                "doc.stored",
                json!({ "round": round, "body": letters(size) }),
            );
            enqueue(&mut tx, &event).await.unwrap();
        }
        tx.commit().await.unwrap();
    }
    let stop = CancellationToken::new();
    let running: Vec<_> = (0..3)
        .map(|d| {
            let mut s = settings(&stack, &schema, &format!("cut-{d}"));
            s.batch_size = 37;
            s.batch_bytes = 20_000;
            tokio::spawn(Dispatcher::new(s).unwrap().run(stop.child_token()))
        })
        .collect();
    let total = (KEYS * ROUNDS) as i64;
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let published: i64 =
            sqlx::query_scalar("SELECT count(*) FROM outbox_events WHERE status = 'PUBLISHED'")
                .fetch_one(&mut conn)
                .await
                .unwrap();
        if published == total {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{published} of {total} PUBLISHED"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.cancel();
    let mut batches = 0;
    for handle in running {
        let totals = handle.await.unwrap().unwrap();
        batches += totals.batches;
    }
    let seq: HashMap<Uuid, i64> = sqlx::query_as("SELECT id, seq FROM outbox_events")
        .fetch_all(&mut conn)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let records = read_topic(&stack, &topic);
    assert_eq!(records.len(), KEYS * ROUNDS, "each event once");
    let mut per_key: BTreeMap<String, Vec<(i64, i64)>> = BTreeMap::new();
    for r in &records {
        per_key
            .entry(r.key.clone())
            .or_default()
            .push((r.offset, seq[&r.event_id]));
    }
    assert_eq!(per_key.len(), KEYS);
    for (key, mut list) in per_key {
        list.sort_unstable();
        let seqs: Vec<i64> = list.iter().map(|x| x.1).collect();
        let mut sorted = seqs.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            seqs, sorted,
            "{key}: topic order is seq order, no event twice"
        );
    }
    assert!(
        batches as i64 > total / 37,
        "{batches} batches: claims were cut by their bytes"
    );
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}
