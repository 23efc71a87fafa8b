//! An event larger than the dispatcher's producer queue (`queue.buffering.max.kbytes`, set
//! from `OUTBOX_BATCH_BYTES`, docs/ARCHITECTURE.md#memory) when the clients'
//! `message.max.bytes` is raised for large events: it must still be published, never wait
//! forever for room the queue can never have. On the real stack, with a topic that takes
//! records of up to 10 MiB.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::{setup, teardown};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use serde_json::json;
use sluice_dispatch::Dispatcher;
use sluice_dispatch::settings::OutboxSettings;
use sluice_outbox::{NewEvent, enqueue};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

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
