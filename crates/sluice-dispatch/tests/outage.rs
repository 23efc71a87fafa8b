//! The broker stopped for 30 s while events are written and dispatched (issue 6,
//! acceptance 4): domain writes never wait for Kafka, no event is lost, none reaches
//! FAILURE, and every event is published exactly once after the broker returns.
//!
//! Stops the shared broker with `$SLUICE_STACK kafka-stop`; a guard starts it again when
//! the test ends, panics included.
//!
//! sluice-test: alone (it stops the shared broker):
//! `scripts/test-all` runs this binary with no other test binary beside it.
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
use sluice_outbox::{NewEvent, enqueue};
use std::collections::HashSet;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn broker_down_for_thirty_seconds_loses_nothing() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let Ok(script) = std::env::var("SLUICE_STACK") else {
        eprintln!("SKIPPED: SLUICE_STACK is not set (eval \"$(scripts/stack env)\")");
        teardown(schema, conn).await;
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-outage");
    sluice_testkit::create_topic(&stack, &topic, 3).await;

    let stop = CancellationToken::new();
    let running: Vec<_> = (0..2)
        .map(|i| {
            let dispatcher =
                Dispatcher::new(settings(&stack, &schema, &format!("outage-{i}"))).unwrap();
            tokio::spawn(dispatcher.run(stop.child_token()))
        })
        .collect();

    // A writer: 40 events a second for about 45 s, across the outage.
    let writer = {
        let schema = schema.clone();
        let topic = topic.clone();
        tokio::spawn(async move {
            let mut conn = schema.connect().await;
            let mut slowest = Duration::ZERO;
            for i in 0..1800_u32 {
                let started = Instant::now();
                let event = NewEvent::new(
                    &topic,
                    "user",
                    (i % 50).to_string(),
                    "tick",
                    json!({"i": i}),
                );
                enqueue(&mut conn, &event).await.unwrap();
                slowest = slowest.max(started.elapsed());
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            slowest
        })
    };

    tokio::time::sleep(Duration::from_secs(5)).await;
    let outage = sluice_testkit::BrokerStopped::stop(&script);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let during: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox_events")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    drop(outage);
    let slowest_write = writer.await.unwrap();
    assert!(
        during > 1000,
        "writes went on during the outage: {during} rows"
    );

    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let (published, failure): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE status = 'PUBLISHED'),
                    count(*) FILTER (WHERE status = 'FAILURE') FROM outbox_events",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!(failure, 0, "no event reached FAILURE");
        if published == 1800 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{published} of 1800 PUBLISHED 240 s after the broker returned"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.cancel();
    for handle in running {
        handle.await.unwrap().unwrap();
    }
    let records = read_topic(&stack, &topic);
    let ids: HashSet<_> = records.iter().map(|r| r.event_id).collect();
    assert_eq!(records.len(), 1800, "each event once");
    assert_eq!(ids.len(), 1800);
    println!(
        "broker outage 30 s: {during} rows written meanwhile, slowest enqueue {slowest_write:?}"
    );
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}
