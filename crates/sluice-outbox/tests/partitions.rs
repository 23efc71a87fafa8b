//! Sequential partition assignment (docs/ARCHITECTURE.md#partition-assignment) against the real database and broker (issue 7,
//! acceptance 2).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use sluice_kafka::Admin;
use sluice_outbox::assign_partition;
use sqlx::postgres::PgPoolOptions;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const USERS: usize = 500;
const CAP: i32 = 10;

async fn counts(conn: &mut sqlx::PgConnection, topic: &str) -> Vec<(i32, i32)> {
    sqlx::query_as(
        "SELECT partition, users FROM topic_partition_counts WHERE topic = $1 ORDER BY partition",
    )
    .bind(topic)
    .fetch_all(conn)
    .await
    .expect("counts")
}

/// Acceptance item 2 of issue 7: 500 concurrent assignments with a cap of 10 fill exactly
/// partitions 0..49, grow the broker topic from 1 partition to at least 50, and a repeat
/// for a known user returns its partition without changing any count.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn concurrent_assignments_fill_partitions_in_order_and_grow_the_topic() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let Some((schema, mut conn)) = common::setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("mailbox");
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let admin = Arc::new(
        Admin::new(
            &sluice_core::KafkaClientSettings::new(&stack.bootstrap),
            Duration::from_secs(30),
        )
        .expect("admin"),
    );
    let pool = PgPoolOptions::new()
        .max_connections(16)
        .acquire_slow_threshold(Duration::from_secs(60))
        .connect(&schema.url)
        .await
        .expect("pool");

    let started = Instant::now();
    let tasks: Vec<_> = (0..USERS)
        .map(|i| {
            let (pool, admin, topic) = (pool.clone(), Arc::clone(&admin), topic.clone());
            let user = format!("user-{i:04}");
            tokio::spawn(async move {
                let mut conn = pool.acquire().await.expect("acquire");
                let partition = assign_partition(&mut conn, &admin, &topic, &user, CAP)
                    .await
                    .unwrap_or_else(|e| panic!("assign {user}: {e}"));
                (user, partition)
            })
        })
        .collect();
    let mut assigned = BTreeMap::new();
    for task in tasks {
        let (user, partition) = task.await.expect("task");
        assert!(assigned.insert(user, partition).is_none());
    }
    let elapsed = started.elapsed();
    println!(
        "{USERS} concurrent assign_partition calls (cap {CAP}, 16 connections) took {elapsed:?}"
    );

    // What the callers were told: partitions 0..49, ten users each.
    let mut per_partition: BTreeMap<i32, i32> = BTreeMap::new();
    for &partition in assigned.values() {
        *per_partition.entry(partition).or_default() += 1;
    }
    let expected: BTreeMap<i32, i32> = (0..50).map(|p| (p, CAP)).collect();
    assert_eq!(per_partition, expected);

    // What the database holds agrees: one row per user, the counts match the rows.
    let rows: Vec<(String, i32)> = sqlx::query_as(
        "SELECT user_id, partition FROM user_partition_assignments WHERE topic = $1",
    )
    .bind(&topic)
    .fetch_all(&mut conn)
    .await
    .expect("assignments");
    assert_eq!(rows.len(), USERS);
    assert_eq!(rows.into_iter().collect::<BTreeMap<_, _>>(), assigned);
    let stored = counts(&mut conn, &topic).await;
    assert_eq!(stored, expected.clone().into_iter().collect::<Vec<_>>());

    // The broker has every assigned partition.
    let broker = admin.partition_count(&topic).expect("metadata");
    assert!(
        broker.is_some_and(|n| n >= 50),
        "broker partitions: {broker:?}"
    );

    // A known user keeps its partition, and nothing is counted twice.
    for user in ["user-0000", "user-0123", "user-0499"] {
        let again = assign_partition(&mut conn, &admin, &topic, user, CAP)
            .await
            .expect("repeat");
        assert_eq!(again, assigned[user], "{user}");
    }
    assert_eq!(counts(&mut conn, &topic).await, stored);

    // The next new user opens partition 50 and the broker grows with it.
    let next = assign_partition(&mut conn, &admin, &topic, "user-0500", CAP)
        .await
        .expect("next");
    assert_eq!(next, 50);
    let broker = admin.partition_count(&topic).expect("metadata");
    assert!(
        broker.is_some_and(|n| n >= 51),
        "broker partitions: {broker:?}"
    );

    pool.close().await;
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    common::teardown(schema, conn).await;
}

/// Concurrent calls for one and the same new user agree on one partition and count it once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_for_the_same_user_assign_it_once() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let Some((schema, mut conn)) = common::setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("mailbox");
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let admin = Arc::new(
        Admin::new(
            &sluice_core::KafkaClientSettings::new(&stack.bootstrap),
            Duration::from_secs(30),
        )
        .expect("admin"),
    );
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .acquire_slow_threshold(Duration::from_secs(60))
        .connect(&schema.url)
        .await
        .expect("pool");
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let (pool, admin, topic) = (pool.clone(), Arc::clone(&admin), topic.clone());
            tokio::spawn(async move {
                let mut conn = pool.acquire().await.expect("acquire");
                assign_partition(&mut conn, &admin, &topic, "same-user", CAP)
                    .await
                    .expect("assign")
            })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.expect("task"), 0);
    }
    assert_eq!(counts(&mut conn, &topic).await, vec![(0, 1)]);

    pool.close().await;
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    common::teardown(schema, conn).await;
}

/// A topic the broker does not have is an error, and nothing is assigned.
#[tokio::test]
async fn an_unknown_topic_assigns_nothing() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let Some((schema, mut conn)) = common::setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("missing");
    let admin = Admin::new(
        &sluice_core::KafkaClientSettings::new(&stack.bootstrap),
        Duration::from_secs(10),
    )
    .expect("admin");
    let error = assign_partition(&mut conn, &admin, &topic, "user-1", CAP)
        .await
        .expect_err("unknown topic");
    assert!(
        matches!(error, sluice_outbox::AssignError::UnknownTopic(ref t) if *t == topic),
        "{error}"
    );
    assert!(counts(&mut conn, &topic).await.is_empty());
    let rows: i64 =
        sqlx::query_scalar("SELECT count(*) FROM user_partition_assignments WHERE topic = $1")
            .bind(&topic)
            .fetch_one(&mut conn)
            .await
            .expect("count");
    assert_eq!(rows, 0);
    // In case the broker auto-creates topics on a metadata request.
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    common::teardown(schema, conn).await;
}
