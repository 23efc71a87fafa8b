//! The claim's floor on the real stack (docs/ARCHITECTURE.md#claim-floor): a dispatcher's
//! claims start from a seq below which no due row is PENDING. The floor never passes a row
//! whose transaction was still open (its seq taken, its row not visible yet); a row moved
//! back to PENDING below it is claimed at once when it blocks a candidate of its key or when
//! the claim from the floor finds nothing; a later event of its key never goes out before
//! it. The full scans (a claim from seq 0 every few seconds) are turned off here, so what is
//! shown is the floor's own rules.
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
use sluice_dispatch::store::claim::{ClaimLimit, claim_batch_as};
use sluice_dispatch::store::failure::requeue_without_attempt;
use sluice_outbox::{NewEvent, enqueue};
use sqlx::{Connection, PgConnection};
use std::time::{Duration, Instant};
use uuid::Uuid;

async fn seq_of(conn: &mut PgConnection, id: Uuid) -> i64 {
    sqlx::query_scalar("SELECT seq FROM outbox_events WHERE id = $1")
        .bind(id)
        .fetch_one(conn)
        .await
        .unwrap()
}

async fn status_text(conn: &mut PgConnection, id: Uuid) -> String {
    sqlx::query_scalar("SELECT status FROM outbox_events WHERE id = $1")
        .bind(id)
        .fetch_one(conn)
        .await
        .unwrap()
}

fn event(topic: &str, key: &str, n: i64) -> NewEvent {
    NewEvent::new(topic, "user", key, "e", json!({"n": n}))
}

/// A dispatcher whose claims never start from seq 0 on a timer.
fn dispatcher(stack: &sluice_testkit::Stack, schema: &sluice_testkit::TestSchema) -> Dispatcher {
    Dispatcher::new(settings(stack, schema, "floor"))
        .unwrap()
        .with_full_scan_every(Duration::from_secs(3600))
}

/// The payloads' `n` of `key`'s records in `topic`, in offset order.
fn order_of(stack: &sluice_testkit::Stack, topic: &str, key: &str) -> Vec<i64> {
    read_topic(stack, topic)
        .iter()
        .filter(|r| r.key == key)
        .map(|r| r.payload["n"].as_i64().unwrap())
        .collect()
}

/// Enqueues one event of a fresh key and dispatches once, until the floor is above `seq`.
/// The floor rises only once every transaction open at a claim has ended, anywhere on the
/// server: another test's long transaction holds it back (`stall.rs` holds a row lock for
/// 40 s), hence the generous deadline.
async fn raise_floor_past(
    dispatcher: &mut Dispatcher,
    conn: &mut PgConnection,
    topic: &str,
    seq: i64,
) {
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut n = 1_000;
    while dispatcher.claim_floor() <= seq {
        assert!(
            Instant::now() < deadline,
            "the floor stayed at {} (not past {seq}) for 300 s",
            dispatcher.claim_floor()
        );
        n += 1;
        enqueue(conn, &event(topic, &format!("filler-{n}"), n))
            .await
            .unwrap();
        dispatcher.dispatch_once().await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A row inserted by a transaction still open at a claim (its seq below rows that claim
/// took) is not passed by the floor: once its transaction commits, the next claim takes it.
#[tokio::test]
async fn the_floor_never_passes_a_row_of_a_transaction_open_at_the_claim() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-floor-open");
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let mut dispatcher = dispatcher(&stack, &schema);
    let first = enqueue(&mut conn, &event(&topic, "a", 1)).await.unwrap();
    let first_seq = seq_of(&mut conn, first).await;
    raise_floor_past(&mut dispatcher, &mut conn, &topic, first_seq).await;

    // A transaction takes its seq and stays open; later events commit around it.
    let mut open = schema.connect().await;
    let mut tx = open.begin().await.unwrap();
    let late = enqueue(&mut tx, &event(&topic, "late", 2)).await.unwrap();
    let late_seq = seq_of(&mut tx, late).await;
    for n in 3..8 {
        enqueue(&mut conn, &event(&topic, &format!("k{n}"), n))
            .await
            .unwrap();
        dispatcher.dispatch_once().await.unwrap();
        assert!(
            dispatcher.claim_floor() <= late_seq,
            "the floor {} passed seq {late_seq} of a transaction still open",
            dispatcher.claim_floor()
        );
    }
    tx.commit().await.unwrap();
    enqueue(&mut conn, &event(&topic, "k8", 8)).await.unwrap();
    let report = dispatcher.dispatch_once().await.unwrap();
    assert_eq!(report.published, 2, "the late row and k8: {report:?}");
    assert_eq!(status_text(&mut conn, late).await, "PUBLISHED");
    // And the floor goes on rising past it.
    raise_floor_past(&mut dispatcher, &mut conn, &topic, late_seq).await;
    let pending: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox_events WHERE status <> 'PUBLISHED'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(pending, 0, "every event published");
    open.close().await.unwrap();
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

/// A row another dispatcher requeues below this dispatcher's floor blocks the later event
/// of its key enqueued meanwhile above the floor; the claim that leaves that event out for it
/// lowers the floor to it, and the next claim takes both, in order.
#[tokio::test]
async fn a_row_requeued_below_the_floor_lowers_it_when_it_blocks_its_key() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-floor-requeue");
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let early = enqueue(&mut conn, &event(&topic, "shared", 1))
        .await
        .unwrap();
    let early_seq = seq_of(&mut conn, early).await;
    // Another dispatcher claims it and will requeue it.
    let other = Uuid::new_v4();
    let claimed = claim_batch_as(&mut conn, "other", other, ClaimLimit::events(1))
        .await
        .unwrap();
    assert_eq!(claimed.events.len(), 1);
    let mut dispatcher = dispatcher(&stack, &schema);
    raise_floor_past(&mut dispatcher, &mut conn, &topic, early_seq).await;
    // Requeued (as after a failed publish), below the floor; the key's next event, and an
    // event of another key, after it.
    assert!(
        requeue_without_attempt(&mut conn, other, early, 0, Duration::ZERO, "test")
            .await
            .unwrap()
    );
    let next = enqueue(&mut conn, &event(&topic, "shared", 2))
        .await
        .unwrap();
    let free = enqueue(&mut conn, &event(&topic, "free", 3)).await.unwrap();
    let report = dispatcher.dispatch_once().await.unwrap();
    assert_eq!(report.published, 1, "only the free key's event: {report:?}");
    assert_eq!(status_text(&mut conn, free).await, "PUBLISHED");
    assert_eq!(status_text(&mut conn, next).await, "PENDING");
    assert!(
        dispatcher.claim_floor() <= early_seq,
        "the floor {} stayed above the blocking row {early_seq}",
        dispatcher.claim_floor()
    );
    let report = dispatcher.dispatch_once().await.unwrap();
    assert_eq!(
        report.published, 2,
        "the requeued row and its key's next: {report:?}"
    );
    assert_eq!(order_of(&stack, &topic, "shared"), vec![1, 2]);
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

/// A PREQUEUED row released after the floor passed it: the claim its NOTIFY wakes finds
/// nothing from the floor (the key's later event, above the floor, waits for it), so it
/// looks again from seq 0 and takes both at once, in order.
#[tokio::test]
async fn a_row_released_below_the_floor_is_claimed_by_the_next_claim() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-floor-release");
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let held = enqueue(&mut conn, &event(&topic, "held", 1).prequeued())
        .await
        .unwrap();
    let held_seq = seq_of(&mut conn, held).await;
    let mut dispatcher = dispatcher(&stack, &schema);
    raise_floor_past(&mut dispatcher, &mut conn, &topic, held_seq).await;
    assert_eq!(sluice_outbox::release(&mut conn, &[held]).await.unwrap(), 1);
    let later = enqueue(&mut conn, &event(&topic, "held", 2)).await.unwrap();
    let report = dispatcher.dispatch_once().await.unwrap();
    assert_eq!(
        report.published, 2,
        "the released row and its key's next: {report:?}"
    );
    assert_eq!(status_text(&mut conn, later).await, "PUBLISHED");
    assert_eq!(order_of(&stack, &topic, "held"), vec![1, 2]);
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}
