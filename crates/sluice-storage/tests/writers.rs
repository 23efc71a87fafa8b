//! Two writers per pipeline (`STORAGE_WRITERS=2`) on the real stack: any free writer stores
//! the next batch of any partition, each writer with its own connection and transactions.
//!
//! - the same natural keys in two partitions, in opposite orders, so the two writers upsert
//!   overlapping key sets at the same time: the table ends right, no batch fails, and no
//!   deadlock (40P01) is even retried, because each writer binds its rows in key order;
//! - a poison row in one writer's partition (savepoint isolation) while the other writer's
//!   partitions are clean: every good row stored, the poison dead-lettered once, every
//!   partition's offset committed.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::{Fixture, app_names, review, stop};
use sluice_core::PipelineKind;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const REVIEWS: PipelineKind = PipelineKind::Reviews;

fn bytes(value: &serde_json::Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// Per partition: (end offset, the group's committed offset).
fn offsets_by_partition(fx: &Fixture) -> BTreeMap<i32, (i64, i64)> {
    let admin = sluice_kafka::Admin::new(
        &sluice_core::KafkaClientSettings::new(&fx.stack.bootstrap),
        Duration::from_secs(10),
    )
    .unwrap();
    let committed: BTreeMap<i32, i64> = admin
        .committed_offsets(&fx.group(REVIEWS), fx.topic(REVIEWS))
        .unwrap()
        .into_iter()
        .map(|(p, o)| (p, o.unwrap_or(0)))
        .collect();
    admin
        .watermarks(fx.topic(REVIEWS))
        .unwrap()
        .into_iter()
        .map(|m| {
            (
                m.partition,
                (m.high, committed.get(&m.partition).copied().unwrap_or(0)),
            )
        })
        .collect()
}

async fn produce_to(fx: &Fixture, partition: i32, payloads: Vec<Vec<u8>>) {
    let records: Vec<sluice_testkit::RawRecord> =
        payloads.into_iter().map(|p| (None, Some(p))).collect();
    sluice_testkit::produce_to_partition(&fx.stack, fx.topic(REVIEWS), partition, &records).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_upserting_the_same_keys_in_opposite_orders_neither_deadlock_nor_fail() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let started = Instant::now();
    let apps = app_names(&fx.prefix, 1);
    fx.schema.register_apps(&apps).await;
    let app = &apps[0];
    // 500 reviews (one batch), sent 6 times to partition 0 (writer 0) and 6 times to
    // partition 1 (writer 1), each round a newer version: ascending in partition 0 and
    // descending in partition 1. Whichever batches the two writers store at the same time
    // hold the same keys in opposite orders: bound unsorted, they deadlock. In the last round
    // partition 0 holds the newest version of the even reviews, partition 1 of the odd ones.
    let (n, rounds) = (500usize, 6usize);
    let version = |i: usize, partition: usize, round: usize| {
        let favoured = i.is_multiple_of(2) == (partition == 0);
        let minute = 10 * round + if favoured { 5 } else { 0 };
        let synced = format!("2026-11-04T08:{minute:02}:00Z");
        let thumbs = (1000 * round + 100 * partition + i) as i64;
        (
            synced.clone(),
            thumbs,
            bytes(&review(i, app, &synced, thumbs)),
        )
    };
    let mut wanted: Vec<(String, i32, String)> = (0..n)
        .map(|i| {
            let (synced, thumbs, _) = version(i, i % 2, rounds - 1);
            (format!("gp:review-{i}"), thumbs as i32, synced)
        })
        .collect();
    wanted.sort();
    for partition in [0usize, 1] {
        let mut payloads = Vec::with_capacity(n * rounds);
        for round in 0..rounds {
            let order: Vec<usize> = if partition == 0 {
                (0..n).collect()
            } else {
                (0..n).rev().collect()
            };
            payloads.extend(order.into_iter().map(|i| version(i, partition, round).2));
        }
        produce_to(&fx, partition as i32, payloads).await;
    }

    let running = fx.start(fx.settings(&[REVIEWS], &[("STORAGE_WRITERS", "2")]));
    fx.wait_caught_up(REVIEWS, Duration::from_secs(120)).await;
    let totals = stop(running); // panics unless every pipeline stopped cleanly
    let t = &totals[&REVIEWS];
    println!("totals: {:?} in {:?}", t, started.elapsed());
    assert_eq!(t.report.records, (2 * n * rounds) as u64);
    assert_eq!(
        t.report.retries, 0,
        "no batch retried: no deadlock between the writers"
    );
    assert_eq!(t.report.dead_lettered(), 0);
    assert!(t.report.balances(), "{:?}", t.report);

    let mut conn = fx.conn().await;
    let rows: Vec<(String, i32, String)> = sqlx::query_as(
        "SELECT review_id, thumbs_up_count,
                to_char(last_synced_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')
         FROM reviews ORDER BY review_id COLLATE \"C\"",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(rows.len(), n, "one row per review");
    assert!(rows == wanted, "every review holds its newest version");
    let dead: i64 = fx.count("SELECT count(*) FROM dead_letter_events").await;
    assert_eq!(dead, 0);
    for (partition, (end, committed)) in offsets_by_partition(&fx) {
        assert_eq!(committed, end, "partition {partition} committed to its end");
    }
    fx.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_row_in_one_writers_partition_leaves_the_other_writer_alone() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let started = Instant::now();
    let apps = app_names(&fx.prefix, 1);
    fx.schema.register_apps(&apps).await;
    let app = &apps[0];
    // A rule only the database knows: the row breaks it at write time, which sends its
    // batch through savepoint isolation.
    let mut conn = fx.conn().await;
    sqlx::raw_sql(
        "ALTER TABLE reviews ADD CONSTRAINT no_spam
             CHECK (content IS NULL OR content NOT LIKE '%SPAM%')",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    // Partitions 0 and 2 (writer 0) clean; partition 1 (writer 1) with one poison row in
    // the middle of its second batch.
    let per_partition = 1500usize;
    let poison_at = 700usize;
    for partition in 0..3i32 {
        let payloads: Vec<Vec<u8>> = (0..per_partition)
            .map(|j| {
                let i = partition as usize * per_partition + j;
                let mut v = review(i, app, "2026-11-03T08:00:00Z", i as i64);
                if partition == 1 && j == poison_at {
                    v["content"] = serde_json::json!("buy now SPAM");
                }
                bytes(&v)
            })
            .collect();
        produce_to(&fx, partition, payloads).await;
    }

    let running = fx.start(fx.settings(&[REVIEWS], &[("STORAGE_WRITERS", "2")]));
    fx.wait_caught_up(REVIEWS, Duration::from_secs(120)).await;
    let totals = stop(running);
    let t = &totals[&REVIEWS];
    println!("totals: {:?} in {:?}", t, started.elapsed());
    let total = 3 * per_partition;
    assert_eq!(t.report.records, total as u64);
    assert_eq!(t.report.constraint_violations, 1);
    assert_eq!(t.report.dead_letters_inserted, 1);
    assert_eq!(t.report.write.inserted, total as u64 - 1);
    assert_eq!(t.report.retries, 0);
    assert!(t.report.balances(), "{:?}", t.report);

    let stored: i64 = fx.count("SELECT count(*) FROM reviews").await;
    assert_eq!(stored, total as i64 - 1, "every good row stored");
    let missing: Vec<String> = sqlx::query_scalar(
        "SELECT 'gp:review-' || g FROM generate_series(0, $1 - 1) g
         WHERE NOT EXISTS (SELECT 1 FROM reviews WHERE review_id = 'gp:review-' || g)",
    )
    .bind(total as i64)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        missing,
        [format!("gp:review-{}", per_partition + poison_at)],
        "only the poison row is missing"
    );
    let dead: Vec<(i32, i64, String)> = sqlx::query_as(
        "SELECT partition, kafka_offset, error_kind FROM dead_letter_events ORDER BY id",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        dead,
        [(1, poison_at as i64, "constraint_violation".to_owned())],
        "the poison dead-lettered once, at its coordinates"
    );
    let offsets = offsets_by_partition(&fx);
    assert_eq!(offsets.len(), 3);
    for (partition, (end, committed)) in offsets {
        assert_eq!(
            (end, committed),
            (per_partition as i64, per_partition as i64),
            "partition {partition} committed to its end"
        );
    }
    fx.cleanup().await;
}
