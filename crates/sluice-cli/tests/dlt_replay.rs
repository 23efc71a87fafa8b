//! `sluice dlt replay` on the real stack: a dead-letter topic whose timestamps do not grow with
//! the offsets inside a partition (two forwarders, two clocks) is replayed in each partition's
//! offset order, so `--limit` never skips a record for good and no record is re-published
//! twice. Before the fix, `.dlt` holding p0@0 (t+2 s), p0@1 (t+1 s) and p1@0 (t+1.5 s),
//! `--execute --limit 2` then `--execute` re-published two of the three, never p0@0. And a
//! dead letter whose origin header names another topic is not replayed there unless `--to`
//! names it.
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

/// Writes a record into `dlt` as the forwarder would, naming `origin` as its original topic.
async fn dead_letter(
    producer: &rdkafka::producer::FutureProducer,
    dlt: &str,
    partition: i32,
    name: &str,
    at: i64,
    origin: &str,
) {
    dead_letter_from(producer, dlt, partition, name, at, (origin, 0)).await;
}

/// [`dead_letter`] of a record that came from partition `origin.1` of topic `origin.0`.
async fn dead_letter_from(
    producer: &rdkafka::producer::FutureProducer,
    dlt: &str,
    partition: i32,
    name: &str,
    at: i64,
    origin: (&str, i32),
) {
    let (origin, original_partition) = origin;
    let retry = sluice_retry::headers::RetryHeaders {
        original_topic: origin.to_owned(),
        original_partition,
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
            FutureRecord::to(dlt)
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

/// The keys of every record of `topic`, sorted.
fn keys(env: &Env, topic: &str) -> Vec<String> {
    let mut keys: Vec<String> = support::read_outbox_topic(&env.stack.bootstrap, topic)
        .into_iter()
        .map(|(_, _, key, _)| key)
        .collect();
    keys.sort();
    keys
}

/// A dead letter whose origin header names another topic (any producer can write headers,
/// e.g. through an outbox row's `headers`) is not sent there with sluice's credentials unless
/// the operator names that topic with `--to`.
#[tokio::test]
async fn a_replay_goes_to_the_topic_the_dlt_belongs_to_unless_told_otherwise() {
    let Some(env) = Env::new().await else { return };
    let topic = format!("{}-commands", env.prefix);
    let payments = format!("{}-payments", env.prefix);
    let dlt = sluice_retry::dlt_topic(&topic);
    for t in [&topic, &payments, &dlt] {
        sluice_testkit::create_topic(&env.stack, t, 1).await;
    }
    let producer = sluice_testkit::producer(&env.stack);
    let t = chrono::Utc::now().timestamp_millis();
    dead_letter(&producer, &dlt, 0, "steered", t, &payments).await;
    dead_letter(&producer, &dlt, 0, "honest", t + 1, &topic).await;
    let vars = [("MAILBOX_TOPIC", topic.as_str())];
    // The dry run shows the refusal, so the operator decides before anything moves.
    let out = env.output(&["dlt", "replay"], &vars);
    let printed = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        printed.contains(&format!("names `{payments}`, not `{topic}`"))
            && printed.contains("headers can be written by any producer"),
        "{printed}"
    );
    let out = env.output(&["dlt", "replay", "--execute"], &vars);
    let printed = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(printed.contains("pass --to"), "{printed}");
    assert!(
        keys(&env, &payments).is_empty(),
        "nothing sent to {payments}"
    );
    assert_eq!(keys(&env, &topic), ["honest"]);

    // Named by the operator: a later one is sent there, once.
    dead_letter(&producer, &dlt, 0, "steered-named", t + 2, &payments).await;
    let out = env.output(&["dlt", "replay", "--execute", "--to", &payments], &vars);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert_eq!(keys(&env, &payments), ["steered-named"]);
    assert_eq!(keys(&env, &topic), ["honest"]);
    sluice_testkit::delete_topics(
        &env.stack,
        &[topic.as_str(), payments.as_str(), dlt.as_str()],
    )
    .await;
    env.cleanup().await;
}

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
        dead_letter(&producer, &dlt, partition, name, at, &topic).await;
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
    assert_eq!(
        keys(&env, &topic),
        ["p0-first", "p0-second", "p1-only"],
        "each dead letter re-published exactly once"
    );
    sluice_testkit::delete_topics(&env.stack, &[topic.as_str(), dlt.as_str()]).await;
    env.cleanup().await;
}

/// A replayed record goes back to the partition it came from, not to its key's hash: the
/// mailbox pins each user to a partition of its own choosing.
#[tokio::test]
async fn a_replay_goes_back_to_the_records_own_partition() {
    let Some(env) = Env::new().await else { return };
    let topic = format!("{}-pinned", env.prefix);
    let dlt = sluice_retry::dlt_topic(&topic);
    sluice_testkit::create_topic(&env.stack, &topic, 3).await;
    sluice_testkit::create_topic(&env.stack, &dlt, 1).await;
    let producer = sluice_testkit::producer(&env.stack);
    let t = chrono::Utc::now().timestamp_millis();
    let names: Vec<String> = (0..6).map(|i| format!("user-{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        dead_letter_from(&producer, &dlt, 0, name, t + i as i64, (&topic, 2)).await;
    }
    // A partition the topic does not have (another producer's header): the key chooses.
    dead_letter_from(&producer, &dlt, 0, "stray", t + 10, (&topic, 7)).await;
    let vars = [("MAILBOX_TOPIC", topic.as_str())];
    let out = env.output(&["dlt", "replay", "--execute"], &vars);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let landed = support::read_outbox_topic(&env.stack.bootstrap, &topic);
    assert_eq!(landed.len(), names.len() + 1, "{landed:?}");
    assert!(
        landed
            .iter()
            .all(|(partition, _, key, _)| *partition == 2 || key == "stray"),
        "{landed:?}"
    );
    sluice_testkit::delete_topics(&env.stack, &[topic.as_str(), dlt.as_str()]).await;
    env.cleanup().await;
}
