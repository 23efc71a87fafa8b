//! The mailbox example service end to end on the real stack (issue 7, acceptance 3):
//! 200 users × 50 commands, every 10th rejected by the handler, two dispatchers and one
//! consumer in-process → each user's projection holds its applied commands in send order,
//! exactly once; the running state matches; every outbox row ends SUCCESS or
//! PUSHED_FAILURE as expected.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

#[path = "../../../crates/sluice-dispatch/tests/common/mod.rs"]
mod common;

use common::kafka::settings;
use common::{setup, teardown};
use serde_json::{Value, json};
use sluice_dispatch::Dispatcher;
use sluice_kafka::Admin;
use sluice_mailbox::{self as mailbox, ConsumerConfig};
use sluice_outbox::OutboxStatus;
use sqlx::{Connection, PgConnection};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

const USERS: usize = 200;
const COMMANDS: i64 = 50;
const CAP: i32 = 20;
const WRITERS: usize = 8;

fn user_id(i: usize) -> String {
    format!("mbx-user-{i:04}")
}

fn command(seq: i64) -> Value {
    if seq % 10 == 0 {
        json!({"op": "reject"})
    } else {
        json!({"op": "send", "text": format!("message {seq} ✓")})
    }
}

async fn unfinished(conn: &mut PgConnection) -> (i64, i64) {
    sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status NOT IN ('SUCCESS', 'PUSHED_FAILURE')),
                count(*) FILTER (WHERE status = 'FAILURE')
         FROM outbox_events",
    )
    .fetch_one(conn)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn two_hundred_users_fifty_commands_each_applied_in_order_exactly_once() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("mailbox-e2e");
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let admin = Admin::new(
        &sluice_core::KafkaClientSettings::new(&stack.bootstrap),
        Duration::from_secs(30),
    )
    .expect("admin");
    mailbox::setup(&mut conn).await.expect("mailbox setup");
    mailbox::setup(&mut conn)
        .await
        .expect("setup is idempotent");
    let started = Instant::now();

    // Users first: 20 per partition fills partitions 0..9, growing the topic from 1.
    let mut partitions: BTreeMap<i32, usize> = BTreeMap::new();
    for i in 0..USERS {
        let p = mailbox::create_user(&mut conn, &admin, &topic, &user_id(i), CAP)
            .await
            .expect("create user");
        *partitions.entry(p).or_default() += 1;
    }
    assert_eq!(
        mailbox::create_user(&mut conn, &admin, &topic, &user_id(0), CAP)
            .await
            .unwrap(),
        0,
        "an existing user keeps its partition"
    );
    assert_eq!(partitions, (0..10).map(|p| (p, 20)).collect());
    assert!(admin.partition_count(&topic).unwrap().unwrap() >= 10);

    // One consumer and two dispatchers, in-process.
    let stop = CancellationToken::new();
    let mut consumer_config = ConsumerConfig::new(
        sluice_core::KafkaClientSettings::new(&stack.bootstrap),
        &schema.url,
        &topic,
    );
    consumer_config.group = sluice_testkit::unique("mailbox-example");
    let consumer = {
        let (config, stop) = (consumer_config.clone(), stop.child_token());
        tokio::spawn(async move { mailbox::run_consumer(&config, stop).await })
    };
    let dispatchers: Vec<_> = (0..2)
        .map(|i| {
            let s = settings(&stack, &schema, &format!("mailbox-dispatcher-{i}"));
            tokio::spawn(
                Dispatcher::new(s)
                    .expect("dispatcher")
                    .run(stop.child_token()),
            )
        })
        .collect();

    // Commands: each writer sends its users' commands, one transaction per user, in seq order.
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (schema, topic) = (schema.clone(), topic.clone());
            tokio::spawn(async move {
                let mut conn = schema.connect().await;
                let mut ids = vec![];
                for i in (w..USERS).step_by(WRITERS) {
                    let user = user_id(i);
                    let mut tx = conn.begin().await.unwrap();
                    for seq in 1..=COMMANDS {
                        let id = mailbox::send_command(&mut tx, &topic, &user, seq, command(seq))
                            .await
                            .expect("send command");
                        ids.push((id, seq));
                    }
                    tx.commit().await.unwrap();
                }
                ids
            })
        })
        .collect();
    let mut expected: HashMap<Uuid, OutboxStatus> = HashMap::new();
    for writer in writers {
        for (id, seq) in writer.await.unwrap() {
            let status = if seq % 10 == 0 {
                OutboxStatus::PushedFailure
            } else {
                OutboxStatus::Success
            };
            expected.insert(id, status);
        }
    }
    assert_eq!(expected.len(), USERS * COMMANDS as usize);
    assert!(
        mailbox::send_command(&mut conn, &topic, "nobody", 1, command(1))
            .await
            .is_err(),
        "an unknown user cannot be sent commands"
    );

    // Run until every row is final. A stall fails (60 s without one more row final); a slow
    // machine does not (a fixed 90 s for the whole run failed once on a loaded machine while
    // rows were still finishing).
    const STALL: Duration = Duration::from_secs(60);
    let mut progress = (i64::MAX, Instant::now());
    loop {
        let (left, failed) = unfinished(&mut conn).await;
        assert_eq!(failed, 0, "outbox rows ended FAILURE");
        if left == 0 {
            break;
        }
        if left < progress.0 {
            progress = (left, Instant::now());
        }
        assert!(
            progress.1.elapsed() < STALL,
            "{left} rows not final, none finished in the last {STALL:?}"
        );
        assert!(!consumer.is_finished(), "the consumer stopped early");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = started.elapsed();
    stop.cancel();
    let totals = consumer.await.unwrap().expect("consumer run");
    for dispatcher in dispatchers {
        dispatcher.await.unwrap().expect("dispatcher run");
    }
    println!(
        "mailbox e2e: {USERS} users x {COMMANDS} commands final after {elapsed:?}; consumer {totals:?}"
    );
    assert_eq!(totals.applied, 9000);
    assert_eq!(totals.rejected, 1000);
    assert_eq!(totals.completed, 0);

    // Every outbox row ended as its command deserved.
    let rows: Vec<(Uuid, String)> = sqlx::query_as("SELECT id, status FROM outbox_events")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(rows.len(), expected.len());
    for (id, status) in rows {
        assert_eq!(
            OutboxStatus::parse(&status).unwrap(),
            expected[&id],
            "row {id}"
        );
    }
    let processed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM processed_outbox_events WHERE consumer_group = $1",
    )
    .bind(&consumer_config.group)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(processed, 10_000, "one processed row per event");

    // Each user's projection: its 45 applied commands, applied in send order, once each.
    let applied_seqs: Vec<i64> = (1..=COMMANDS).filter(|s| s % 10 != 0).collect();
    let projection: Vec<(String, i64, String, i64)> = sqlx::query_as(
        "SELECT user_id, seq, command, position FROM mailbox_projection ORDER BY user_id, position",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut per_user: BTreeMap<String, Vec<(i64, String, i64)>> = BTreeMap::new();
    for (user, seq, text, position) in projection {
        per_user
            .entry(user)
            .or_default()
            .push((seq, text, position));
    }
    assert_eq!(per_user.len(), USERS);
    for (user, log) in &per_user {
        let seqs: Vec<i64> = log.iter().map(|e| e.0).collect();
        assert_eq!(
            seqs, applied_seqs,
            "{user}: applied out of order or not once"
        );
        let positions: Vec<i64> = log.iter().map(|e| e.2).collect();
        assert_eq!(positions, (1..=45).collect::<Vec<i64>>(), "{user}");
        for (seq, text, _) in log {
            let stored: Value = serde_json::from_str(text).unwrap();
            assert_eq!(stored, command(*seq), "{user} seq {seq}");
        }
    }
    let states: Vec<(String, i64, i64, Option<i64>)> =
        sqlx::query_as("SELECT user_id, applied, rejected, last_seq FROM mailbox_state")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(states.len(), USERS);
    for (user, applied, rejected, last_seq) in states {
        assert_eq!((applied, rejected, last_seq), (45, 5, Some(50)), "{user}");
    }

    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

/// Retention vs a lagging consumer: a record whose outbox row is gone (purged) is not
/// passed over silently — the consumer counts it in `missing_row` (and logs it as an error
/// with its coordinates) and goes on with the next record.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_record_whose_outbox_row_was_purged_is_counted() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("mailbox-purged");
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let admin = Admin::new(
        &sluice_core::KafkaClientSettings::new(&stack.bootstrap),
        Duration::from_secs(30),
    )
    .expect("admin");
    mailbox::setup(&mut conn).await.expect("mailbox setup");
    mailbox::create_user(&mut conn, &admin, &topic, "purged-user", 10)
        .await
        .expect("create user");
    let first = mailbox::send_command(&mut conn, &topic, "purged-user", 1, command(1))
        .await
        .unwrap();
    let second = mailbox::send_command(&mut conn, &topic, "purged-user", 2, command(2))
        .await
        .unwrap();
    let mut dispatcher = Dispatcher::new(settings(&stack, &schema, "purge-test")).unwrap();
    let batch = dispatcher.dispatch_once().await.unwrap();
    assert_eq!(batch.published, 2);
    // Retention purged the first row before the consumer read its record.
    sqlx::query("DELETE FROM outbox_events WHERE id = $1")
        .bind(first)
        .execute(&mut conn)
        .await
        .unwrap();

    let stop = CancellationToken::new();
    let mut config = ConsumerConfig::new(
        sluice_core::KafkaClientSettings::new(&stack.bootstrap),
        &schema.url,
        &topic,
    );
    config.group = sluice_testkit::unique("mailbox-purged");
    let consumer = {
        let stop = stop.child_token();
        tokio::spawn(async move { mailbox::run_consumer(&config, stop).await })
    };
    // The second record is handled after the first (one partition, in order).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status: String = sqlx::query_scalar("SELECT status FROM outbox_events WHERE id = $1")
            .bind(second)
            .fetch_one(&mut conn)
            .await
            .unwrap();
        if status == OutboxStatus::Success.as_str() {
            break;
        }
        assert!(Instant::now() < deadline, "second command still {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    let totals = consumer.await.unwrap().expect("consumer run");
    assert_eq!(totals.missing_row, 1, "{totals:?}");
    assert_eq!(totals.applied, 1, "{totals:?}");
    assert_eq!(totals.ignored, 0, "{totals:?}");
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}
