//! Stale dispatch recovery on the real stack (issue 6, acceptance 3), and retention. (The
//! operator's retry-failed and status counts, and `mark_published_batch`, are library
//! functions, tested in sluice-outbox's `tests/ops.rs`.)
//!
//! "Killed after the broker acknowledged, before marking" is simulated by claiming a row as
//! a dispatcher that then disappears, publishing its record by hand with the event-id
//! header, and ageing the claim; "killed before publishing" the same without the record.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::kafka::{read_topic, settings};
use common::{age_claim, row_in, setup, status_of, teardown};
use serde_json::json;
use sluice_core::KafkaClientSettings;
use sluice_dispatch::Dispatcher;
use sluice_dispatch::publish::record_headers;
use sluice_dispatch::recovery::{RecoveryLimits, RecoveryReport, recover_stale};
use sluice_dispatch::store::claim::claim_batch;
use sluice_dispatch::store::retention::purge_expired;
use sluice_kafka::ResilientProducer;
use sluice_kafka::producer::Outgoing;
use sluice_outbox::{NewEvent, OutboxStatus, enqueue};
use std::time::Duration;
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_marks_acknowledged_records_and_requeues_unpublished_ones() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-recovery");
    sluice_testkit::create_topic(&stack, &topic, 3).await;

    // Some unrelated traffic in the topic, before and after.
    let producer =
        ResilientProducer::new(&KafkaClientSettings::new(&stack.bootstrap), "test").unwrap();
    for i in 0..20 {
        producer
            .send(Outgoing {
                topic: &topic,
                key: Some(format!("noise-{i}").as_bytes()),
                payload: b"{}",
                partition: None,
                headers: &[],
            })
            .await
            .unwrap();
    }

    let acked = NewEvent::new(&topic, "user", "1", "mailbox.command", json!({"n": 1}));
    let lost = NewEvent::new(&topic, "user", "2", "mailbox.command", json!({"n": 2}));
    let explicit =
        NewEvent::new(&topic, "user", "3", "mailbox.command", json!({"n": 3})).with_partition(2);
    for e in [&acked, &lost, &explicit] {
        enqueue(&mut conn, e).await.unwrap();
    }
    // A dispatcher claims all three, publishes two, and dies before marking anything.
    let claimed = claim_batch(&mut conn, "dead-dispatcher", 10).await.unwrap();
    assert_eq!(claimed.len(), 3);
    let mut published_at = std::collections::HashMap::new();
    for c in claimed.iter().filter(|c| c.id != lost.id) {
        let headers = record_headers(c);
        let refs: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_slice()))
            .collect();
        let payload = c.payload.to_string();
        let delivered = producer
            .send(Outgoing {
                topic: &topic,
                key: Some(c.partition_key.as_bytes()),
                payload: payload.as_bytes(),
                partition: c.partition,
                headers: &refs,
            })
            .await
            .unwrap();
        published_at.insert(c.id, (delivered.partition, delivered.offset));
    }
    for i in 0..5 {
        producer
            .send(Outgoing {
                topic: &topic,
                key: Some(format!("late-{i}").as_bytes()),
                payload: b"{}",
                partition: None,
                headers: &[],
            })
            .await
            .unwrap();
    }
    let before = read_topic(&stack, &topic).len();
    assert_eq!(before, 27);

    // Not stale yet: nothing happens.
    let report = recover_stale(
        &mut conn,
        &KafkaClientSettings::new(&stack.bootstrap),
        &RecoveryLimits::new(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    assert_eq!(report, RecoveryReport::default());

    for c in &claimed {
        age_claim(&mut conn, c.id, 5).await;
    }
    let report = recover_stale(
        &mut conn,
        &KafkaClientSettings::new(&stack.bootstrap),
        &RecoveryLimits::new(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    assert_eq!(
        report,
        RecoveryReport {
            stale: 3,
            published: 2,
            requeued: 1,
            raced: 0,
            scanned: report.scanned,
            ..RecoveryReport::default()
        }
    );
    for id in [acked.id, explicit.id] {
        let (status, p, o): (String, Option<i32>, Option<i64>) = sqlx::query_as(
            "SELECT status, published_partition, published_offset FROM outbox_events WHERE id = $1",
        )
        .bind(id)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        let (wp, wo) = published_at[&id];
        assert_eq!(
            (status.as_str(), p, o),
            ("PUBLISHED", Some(wp), Some(wo)),
            "{id}"
        );
    }
    assert_eq!(status_of(&mut conn, lost.id).await, OutboxStatus::Pending);
    assert_eq!(
        read_topic(&stack, &topic).len(),
        before,
        "recovery publishes nothing"
    );

    // A live dispatcher now publishes the requeued event, once, and nothing else.
    let mut dispatcher = Dispatcher::new(settings(&stack, &schema, "alive")).unwrap();
    let batch = dispatcher.dispatch_once().await.unwrap();
    assert_eq!((batch.claimed, batch.published), (1, 1));
    assert_eq!(dispatcher.dispatch_once().await.unwrap().claimed, 0);
    let records = read_topic(&stack, &topic);
    assert_eq!(records.len(), before + 1);
    for id in [acked.id, lost.id, explicit.id] {
        assert_eq!(
            records.iter().filter(|r| r.event_id == id).count(),
            1,
            "{id} once"
        );
    }
    assert_eq!(status_of(&mut conn, lost.id).await, OutboxStatus::Published);
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

#[tokio::test]
async fn retention_purges_old_success_published_and_cdc_only() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox");
    let mut old = vec![];
    for status in [
        OutboxStatus::Success,
        OutboxStatus::Published,
        OutboxStatus::Failure,
        OutboxStatus::PushedFailure,
        OutboxStatus::Pending,
        OutboxStatus::UnderProcessing,
        OutboxStatus::Cdc,
    ] {
        for _ in 0..3 {
            old.push((status, row_in(&mut conn, &topic, status).await));
        }
    }
    let fresh_success = row_in(&mut conn, &topic, OutboxStatus::Success).await;
    sqlx::query(
        "UPDATE outbox_events SET updated_at = now() - interval '8 days' WHERE id = ANY($1)",
    )
    .bind(old.iter().map(|(_, id)| *id).collect::<Vec<_>>())
    .execute(&mut conn)
    .await
    .unwrap();
    let deleted = purge_expired(&mut conn, Duration::from_secs(7 * 86_400))
        .await
        .unwrap();
    assert_eq!(deleted, 9, "3 SUCCESS + 3 PUBLISHED + 3 CDC");
    let left: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM outbox_events")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    for (status, id) in &old {
        let purged = matches!(
            status,
            OutboxStatus::Success | OutboxStatus::Published | OutboxStatus::Cdc
        );
        assert_eq!(!left.contains(id), purged, "{status}");
    }
    assert!(
        left.contains(&fresh_success),
        "a recent SUCCESS row is kept"
    );
    teardown(schema, conn).await;
}

/// Claims every PENDING row as a dispatcher that dies at once, and ages the claims by
/// `minutes`.
async fn claimed_by_the_dead(
    conn: &mut sqlx::PgConnection,
    minutes: i32,
) -> Vec<sluice_dispatch::store::claim::ClaimedEvent> {
    let claimed = claim_batch(conn, "dead-dispatcher", 100).await.unwrap();
    for c in &claimed {
        age_claim(conn, c.id, minutes).await;
    }
    claimed
}

/// One event on each of `first` and `second`, claimed five minutes ago by a dispatcher that
/// died before publishing anything.
async fn claimed_pair_by_the_dead(
    conn: &mut sqlx::PgConnection,
    first: &str,
    second: &str,
) -> (NewEvent, NewEvent) {
    let one = NewEvent::new(first, "user", "1", "mailbox.command", json!({"n": 1}));
    let two = NewEvent::new(second, "user", "2", "mailbox.command", json!({"n": 2}));
    for e in [&one, &two] {
        enqueue(&mut *conn, e).await.unwrap();
    }
    assert_eq!(claimed_by_the_dead(conn, 5).await.len(), 2);
    (one, two)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_that_cannot_be_searched_does_not_hold_up_the_others() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let kafka = KafkaClientSettings::new(&stack.bootstrap);
    let busy = sluice_testkit::unique("outbox-busy");
    let quiet = sluice_testkit::unique("outbox-quiet");
    sluice_testkit::create_topic(&stack, &busy, 1).await;
    sluice_testkit::create_topic(&stack, &quiet, 1).await;
    // Another service writes to the busy topic all along (its first records are in before
    // anything is claimed).
    let records: Vec<sluice_testkit::RawRecord> = (0..500)
        .map(|i| (None, Some(format!("{{\"n\":{i}}}").into_bytes())))
        .collect();
    sluice_testkit::produce(&stack, &busy, &records).await;
    let load = {
        let (stack, busy) = (stack.clone(), busy.clone());
        tokio::spawn(async move {
            loop {
                sluice_testkit::produce(&stack, &busy, &records).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let (on_busy, on_quiet) = claimed_pair_by_the_dead(&mut conn, &busy, &quiet).await;
    // The busy topic's search cannot finish (no time at all for it); the quiet topic has
    // nothing in its range, so its row is settled.
    let no_time = RecoveryLimits {
        search_deadline: Duration::ZERO,
        ..RecoveryLimits::new(Duration::from_secs(60))
    };
    let report = recover_stale(&mut conn, &kafka, &no_time).await.unwrap();
    println!("{report:?}");
    assert_eq!(
        (report.stale, report.requeued, report.unsettled),
        (2, 1, 1),
        "{report:?}"
    );
    assert_eq!(report.failed_topics.len(), 1);
    assert_eq!(report.failed_topics[0].0, busy);
    assert_eq!(
        status_of(&mut conn, on_quiet.id).await,
        OutboxStatus::Pending
    );
    assert_eq!(
        status_of(&mut conn, on_busy.id).await,
        OutboxStatus::Dispatching,
        "left for the next round, never requeued unseen"
    );
    // With time to search, the next round settles the busy topic's row too.
    let report = recover_stale(
        &mut conn,
        &kafka,
        &RecoveryLimits::new(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    assert_eq!((report.stale, report.requeued), (1, 1), "{report:?}");
    assert!(report.failed_topics.is_empty());
    assert_eq!(
        status_of(&mut conn, on_busy.id).await,
        OutboxStatus::Pending
    );
    load.abort();
    sluice_testkit::delete_topics(&stack, &[&busy, &quiet]).await;
    teardown(schema, conn).await;
}

/// Creates a one-partition topic whose producers may stamp records at most a minute ahead
/// of their append, and any time back.
async fn create_stamped_topic(stack: &sluice_testkit::Stack, topic: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &stack.bootstrap)
        .create()
        .unwrap();
    let new = NewTopic::new(topic, 1, TopicReplication::Fixed(1))
        .set("message.timestamp.type", "CreateTime")
        .set("message.timestamp.after.max.ms", "60000")
        .set("message.timestamp.before.max.ms", "86400000");
    for result in admin
        .create_topics([&new], &AdminOptions::new())
        .await
        .unwrap()
    {
        result.unwrap();
    }
}

/// A record's timestamp (ms) and headers.
type Stamped = (i64, Vec<(String, Vec<u8>)>);

/// Produces `(timestamp ms, headers)` records to partition 0 of `topic`, in order.
async fn produce_stamped(stack: &sluice_testkit::Stack, topic: &str, records: &[Stamped]) {
    use rdkafka::message::{Header, OwnedHeaders};
    use rdkafka::producer::FutureRecord;
    let producer = sluice_testkit::producer(stack);
    let mut pending = Vec::with_capacity(records.len());
    for (timestamp, headers) in records {
        let mut owned = OwnedHeaders::new();
        for (key, value) in headers {
            owned = owned.insert(Header {
                key,
                value: Some(value),
            });
        }
        let record = FutureRecord::<[u8], [u8]>::to(topic)
            .partition(0)
            .payload(b"{}".as_slice())
            .timestamp(*timestamp)
            .headers(owned);
        pending.push(producer.send_result(record).unwrap());
    }
    for delivery in pending {
        delivery.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_stale_for_hours_is_searched_within_its_own_window() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let kafka = KafkaClientSettings::new(&stack.bootstrap);
    let topic = sluice_testkit::unique("outbox-window");
    create_stamped_topic(&stack, &topic).await;
    let published = NewEvent::new(&topic, "user", "1", "mailbox.command", json!({"n": 1}));
    let lost = NewEvent::new(&topic, "user", "2", "mailbox.command", json!({"n": 2}));
    for e in [&published, &lost] {
        enqueue(&mut conn, e).await.unwrap();
    }
    // Claimed 100 minutes ago by a dispatcher that published one of the two and died.
    let claimed = claimed_by_the_dead(&mut conn, 100).await;
    let minute = 60_000i64;
    let now = chrono::Utc::now().timestamp_millis();
    let claimed_at = now - 100 * minute;
    // Other producers' records all along: 2,000 over the 20 minutes before the claim,
    // 40,000 over the 100 minutes since.
    let mut records: Vec<Stamped> = (0..2_000)
        .map(|i| (claimed_at - 20 * minute + i * 10 * minute / 1_000, vec![]))
        .collect();
    let ours = claimed.iter().find(|c| c.id == published.id).unwrap();
    records.push((claimed_at + 50, record_headers(ours)));
    records.extend((0..40_000).map(|i| (claimed_at + 100 + i * 100 * minute / 40_000, vec![])));
    produce_stamped(&stack, &topic, &records).await;

    let report = recover_stale(
        &mut conn,
        &kafka,
        &RecoveryLimits::new(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    println!(
        "a claim 100 min old on a topic of {} records: {} records read",
        records.len(),
        report.scanned
    );
    assert_eq!(
        (report.stale, report.published, report.requeued),
        (2, 1, 1),
        "{report:?}"
    );
    assert_eq!(
        status_of(&mut conn, published.id).await,
        OutboxStatus::Published
    );
    assert_eq!(status_of(&mut conn, lost.id).await, OutboxStatus::Pending);
    // The range: a minute before the claim (the clock margin) to the stale timeout, the
    // margin and the topic's one-minute lead after it — about 100 + 1,200 records, not
    // the 40,000 written since.
    assert!(
        report.scanned < 3_000,
        "read {} records for a five-minute window",
        report.scanned
    );
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_kafka_refuses_does_not_hold_up_the_others() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let kafka = KafkaClientSettings::new(&stack.bootstrap);
    let quiet = sluice_testkit::unique("outbox-quiet");
    sluice_testkit::create_topic(&stack, &quiet, 1).await;
    // An outbox row is a table row: a service can write one naming a topic Kafka refuses
    // ('!' is not a legal character), and it sorts before every legal name.
    let refused = format!("!{}", sluice_testkit::unique("outbox-refused"));
    let (on_refused, on_quiet) = claimed_pair_by_the_dead(&mut conn, &refused, &quiet).await;
    let report = recover_stale(
        &mut conn,
        &kafka,
        &RecoveryLimits::new(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    println!("{report:?}");
    assert_eq!(
        status_of(&mut conn, on_quiet.id).await,
        OutboxStatus::Pending,
        "the quiet topic's row is requeued whatever the other topic's search does"
    );
    assert_eq!(
        (report.stale, report.requeued, report.unsettled),
        (2, 1, 1),
        "{report:?}"
    );
    assert_eq!(report.failed_topics.len(), 1, "{report:?}");
    assert_eq!(report.failed_topics[0].0, refused);
    assert_eq!(
        status_of(&mut conn, on_refused.id).await,
        OutboxStatus::Dispatching,
        "left for the next round, never requeued unsearched"
    );
    sluice_testkit::delete_topics(&stack, &[&quiet]).await;
    teardown(schema, conn).await;
}
