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
use sluice_dispatch::recovery::{RecoveryReport, recover_stale};
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
        Duration::from_secs(60),
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
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(
        report,
        RecoveryReport {
            stale: 3,
            published: 2,
            requeued: 1,
            raced: 0
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
