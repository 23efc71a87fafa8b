//! `sluice dlt replay` on the real stack: a dead-letter topic whose timestamps do not grow with
//! the offsets inside a partition (two forwarders, two clocks) is replayed in each partition's
//! offset order, so `--limit` never skips a record for good and no record is re-published
//! twice. Before the fix, `.dlt` holding p0@0 (t+2 s), p0@1 (t+1 s) and p1@0 (t+1.5 s),
//! `--execute --limit 2` then `--execute` re-published two of the three, never p0@0.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use std::time::Duration;
use support::Env;
use support::case::text;

#[tokio::test]
async fn a_limited_replay_follows_each_partitions_offsets_not_its_timestamps() {
    let Some(env) = Env::new().await else { return };
    let topic = format!("{}-commands", env.prefix);
    let dlt = sluice_retry::dlt_topic(&topic);
    sluice_testkit::create_topic(&env.stack, &topic, 1).await;
    sluice_testkit::create_topic(&env.stack, &dlt, 2).await;
    let producer = sluice_testkit::producer(&env.stack);
    let t = chrono::Utc::now().timestamp_millis() - 60_000;
    for (partition, name, at) in [
        (0, "p0-first", t + 2_000),
        (0, "p0-second", t + 1_000),
        (1, "p1-only", t + 1_500),
    ] {
        let retry = sluice_retry::headers::RetryHeaders {
            original_topic: topic.clone(),
            original_partition: 0,
            original_offset: 0,
            original_timestamp_ms: Some(at),
            error_class: "permanent".into(),
            error_message: "crafted".into(),
            attempt: 3,
            first_failure_ms: at,
            due_ms: at,
        };
        let mut headers = OwnedHeaders::new();
        for (key, value) in retry.encode() {
            headers = headers.insert(Header {
                key,
                value: Some(&value),
            });
        }
        producer
            .send(
                FutureRecord::to(&dlt)
                    .partition(partition)
                    .timestamp(at)
                    .key(name)
                    .payload(name)
                    .headers(headers),
                Duration::from_secs(10),
            )
            .await
            .map_err(|(e, _)| e)
            .unwrap();
    }
    let vars = [("MAILBOX_TOPIC", topic.as_str())];
    for args in [
        &["dlt", "replay", "--execute", "--limit", "2"][..],
        &["dlt", "replay", "--execute"][..],
        &["dlt", "replay", "--execute"][..],
    ] {
        let out = env.output(args, &vars);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    let mut republished: Vec<String> = support::read_outbox_topic(&env.stack.bootstrap, &topic)
        .into_iter()
        .map(|(_, _, key, _)| key)
        .collect();
    republished.sort();
    assert_eq!(
        republished,
        ["p0-first", "p0-second", "p1-only"],
        "each dead letter re-published exactly once"
    );
    sluice_testkit::delete_topics(&env.stack, &[topic.as_str(), dlt.as_str()]).await;
    env.cleanup().await;
}
