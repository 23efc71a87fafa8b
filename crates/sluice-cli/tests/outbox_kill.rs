//! A real `kill -9` of `sluice dispatch` (acceptance item 3 of the outbox): the
//! binary SIGKILLs itself through the test-only `SLUICE_FAILPOINT` at either side of the
//! publish, and a restarted dispatcher's stale dispatch recovery finishes the job.
//!
//! - `after-publish`: the batch is in Kafka, the rows are DISPATCHING; recovery must find
//!   the records and mark the rows PUBLISHED at their real partition/offset without
//!   publishing them again;
//! - `before-publish`: nothing is in Kafka, the rows are DISPATCHING; recovery must requeue
//!   them and the dispatcher publish each exactly once;
//! - `after-next-claim` (the pipelined loop's window): the second batch is claimed while the
//!   first is acknowledged and not marked; recovery must find the first batch's records and
//!   requeue the second's, and each event is in Kafka exactly once.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::json;
use sluice_outbox::{NewEvent, enqueue};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::*;
use uuid::Uuid;

/// Events enqueued per scenario (the pipelined scenario enqueues two batches of them).
const N: usize = 20;

/// The dispatcher's settings for these tests: short polls, a 7 s stale timeout (the
/// smallest the settings accept with a 5 s delivery timeout, which a fresh producer's first
/// publish meets on a loaded machine: a shorter one could give up on a record Kafka then
/// writes, and the requeued event would be published twice).
const DISPATCH_VARS: [(&str, &str); 5] = [
    ("OUTBOX_POLL_INTERVAL_MS", "100"),
    ("OUTBOX_BATCH_SIZE", "100"),
    ("OUTBOX_BACKOFF_BASE_MS", "100"),
    ("OUTBOX_STALE_DISPATCH_SECONDS", "7"),
    ("OUTBOX_DELIVERY_TIMEOUT_MS", "5000"),
];

/// Where each event id is in the topic: (partition, offset) of every copy.
fn read_topic(bootstrap: &str, topic: &str) -> BTreeMap<Uuid, Vec<(i32, i64)>> {
    let mut found: BTreeMap<Uuid, Vec<(i32, i64)>> = BTreeMap::new();
    for (partition, offset, _key, id) in read_outbox_topic(bootstrap, topic) {
        found.entry(id).or_default().push((partition, offset));
    }
    found
}

/// Enqueues `count` events with distinct keys in one transaction; returns their ids in
/// creation order.
async fn enqueue_events(env: &Env, topic: &str, count: usize) -> Vec<Uuid> {
    let mut conn = env.schema.connect().await;
    let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..count {
        let event = NewEvent::new(
            topic,
            "user",
            format!("kill-{i}"),
            "mailbox.command",
            json!({"n": i}),
        );
        ids.push(enqueue(&mut tx, &event).await.unwrap());
    }
    tx.commit().await.unwrap();
    ids
}

/// Status → count over the topic's rows.
async fn statuses(env: &Env, topic: &str) -> BTreeMap<String, i64> {
    let mut conn = env.schema.connect().await;
    sqlx::query_as("SELECT status, count(*) FROM outbox_events WHERE topic = $1 GROUP BY status")
        .bind(topic)
        .fetch_all(&mut conn)
        .await
        .unwrap()
        .into_iter()
        .collect()
}

/// Starts `sluice dispatch` with its JSON log in `<dir>/<name>.log`.
fn spawn_dispatch(env: &Env, name: &str, extra: &[(&str, &str)]) -> Running {
    let log = env.dir.join(format!("{name}.log"));
    let mut cmd = env.sluice(&["dispatch"]);
    cmd.envs(DISPATCH_VARS)
        .envs(extra.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    Running {
        child: cmd.spawn().unwrap(),
        log,
    }
}

/// One scenario: migrate, enqueue `batches` × `N` events, dispatch in batches of `N` with the
/// failpoint (killed by signal 9), check the state left (the first `acked` events
/// published, once each), then a clean dispatcher until every row is PUBLISHED, SIGTERM,
/// check.
async fn killed_then_recovered(failpoint: &str, batches: usize, acked: usize) {
    let total = batches * N;
    let Some(env) = Env::new().await else {
        return;
    };
    let topic = format!("{}-outbox-{failpoint}", env.prefix);
    sluice_testkit::create_topic(&env.stack, &topic, 3).await;
    let migrated = env.output(&["migrate"], &[]);
    assert!(
        migrated.status.success(),
        "sluice migrate: {}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let created = enqueue_events(&env, &topic, total).await;
    let ids: BTreeSet<Uuid> = created.iter().copied().collect();
    assert_eq!(ids.len(), total);

    // The failpoint: the process SIGKILLs itself at its first batch (the pipelined one at
    // its second claim).
    let batch = N.to_string();
    let mut killed = spawn_dispatch(
        &env,
        "killed",
        &[
            ("SLUICE_FAILPOINT", failpoint),
            ("OUTBOX_BATCH_SIZE", batch.as_str()),
        ],
    );
    let status = killed.wait(Duration::from_secs(60));
    assert_eq!(
        status.signal(),
        Some(9),
        "expected death by SIGKILL, got {status}:\n{}",
        killed.tail()
    );
    let killed_at = Instant::now();
    assert_eq!(
        statuses(&env, &topic).await,
        BTreeMap::from([("DISPATCHING".to_owned(), total as i64)]),
        "rows after the kill"
    );
    let published = read_topic(&env.stack.bootstrap, &topic);
    let once: BTreeSet<Uuid> = published.keys().copied().collect();
    let acknowledged: BTreeSet<Uuid> = created[..acked].iter().copied().collect();
    assert_eq!(
        once, acknowledged,
        "the acknowledged batch is in Kafka, nothing else"
    );
    assert!(
        published.values().all(|at| at.len() == 1),
        "each event once: {published:?}"
    );

    // A clean dispatcher after the stale timeout (7 s) has passed.
    let wait = Duration::from_millis(7500).saturating_sub(killed_at.elapsed());
    tokio::time::sleep(wait).await;
    let mut clean = spawn_dispatch(&env, "clean", &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        clean.assert_alive();
        let now = statuses(&env, &topic).await;
        if now == BTreeMap::from([("PUBLISHED".to_owned(), total as i64)]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "rows {now:?} after 60 s:\n{}",
            clean.tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    clean.signal("TERM");
    let status = clean.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "SIGTERM exit:\n{}", clean.tail());

    // Exactly once in Kafka, and each row points at its record.
    let in_kafka = read_topic(&env.stack.bootstrap, &topic);
    let seen: BTreeSet<Uuid> = in_kafka.keys().copied().collect();
    assert_eq!(seen, ids, "every event, nothing else");
    for (id, at) in &in_kafka {
        assert_eq!(
            at.len(),
            1,
            "event {id} published {} times: {at:?}",
            at.len()
        );
    }
    // The clean dispatcher's recovery did the work: found in Kafka (after-publish) or
    // requeued (before-publish), every row, nothing else.
    let sum = |field: &str| -> u64 {
        clean
            .events_named("stale dispatch recovery")
            .iter()
            .map(|e| e[field].as_u64().unwrap_or(0))
            .sum()
    };
    let (found, requeued) = (acked as u64, (total - acked) as u64);
    assert_eq!(
        (sum("published"), sum("requeued")),
        (found, requeued),
        "recovery (found in Kafka, requeued):\n{}",
        clean.tail()
    );
    let mut conn = env.schema.connect().await;
    let rows: Vec<(Uuid, Option<i32>, Option<i64>)> = sqlx::query_as(
        "SELECT id, published_partition, published_offset FROM outbox_events WHERE topic = $1",
    )
    .bind(&topic)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(rows.len(), total);
    for (id, partition, offset) in rows {
        let (p, o) = in_kafka[&id][0];
        assert_eq!(
            (partition, offset),
            (Some(p), Some(o)),
            "row {id} vs its record"
        );
    }
    drop(conn);
    sluice_testkit::delete_topics(&env.stack, &[topic.as_str()]).await;
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_after_publish_is_recovered_without_republishing() {
    killed_then_recovered("after-publish", 1, N).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_before_publish_is_requeued_and_published_once() {
    killed_then_recovered("before-publish", 1, 0).await;
}

/// The window the pipelined loop opens: batch 2 claimed (nothing of it sent) while batch 1
/// is acknowledged and not marked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_the_next_claim_and_the_marks_is_recovered_exactly_once() {
    killed_then_recovered("after-next-claim", 2, N).await;
}
