//! Shared fixture of the outbox tests: a migrated per-test schema, events, and rows put in
//! any status through legal transitions only.
#![allow(
    dead_code,
    reason = "each test file uses a different part of the fixture"
)]

use serde_json::json;
use sluice_outbox::{NewEvent, OutboxStatus, TransitionOutcome, enqueue, transition};
use sluice_testkit::TestSchema;
use sqlx::{Connection, PgConnection};
use std::collections::{BTreeMap, VecDeque};
use uuid::Uuid;

/// A fresh schema with every migration applied, and a connection to it.
pub async fn setup() -> Option<(TestSchema, PgConnection)> {
    let stack = sluice_testkit::stack()?;
    let schema = TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate(&mut conn, "apps_registry_application")
        .await
        .expect("migrate");
    Some((schema, conn))
}

pub async fn teardown(schema: TestSchema, conn: PgConnection) {
    conn.close().await.expect("close");
    schema.drop_schema().await;
}

pub fn event(topic: &str) -> NewEvent {
    NewEvent::new(
        topic,
        "user",
        "42",
        "mailbox.command",
        json!({"command": "send", "text": "szia ✓"}),
    )
}

pub async fn status_of(conn: &mut PgConnection, id: Uuid) -> OutboxStatus {
    let status: String = sqlx::query_scalar("SELECT status FROM outbox_events WHERE id = $1")
        .bind(id)
        .fetch_one(conn)
        .await
        .expect("row exists");
    OutboxStatus::parse(&status).unwrap()
}

/// The shortest legal path to `target`: the initial status to insert, then the moves.
pub fn path_to(target: OutboxStatus) -> (OutboxStatus, Vec<OutboxStatus>) {
    let mut previous: BTreeMap<OutboxStatus, Option<OutboxStatus>> = BTreeMap::new();
    let mut queue = VecDeque::new();
    for initial in OutboxStatus::INITIAL {
        previous.insert(initial, None);
        queue.push_back(initial);
    }
    while let Some(status) = queue.pop_front() {
        for &next in status.successors() {
            if let std::collections::btree_map::Entry::Vacant(slot) = previous.entry(next) {
                slot.insert(Some(status));
                queue.push_back(next);
            }
        }
    }
    let mut moves = vec![];
    let mut at = target;
    while let Some(Some(before)) = previous.get(&at) {
        moves.push(at);
        at = *before;
    }
    assert!(previous.contains_key(&target), "{target} is unreachable");
    moves.reverse();
    (at, moves)
}

/// A committed row in `status`, reached through legal transitions only.
pub async fn row_in(conn: &mut PgConnection, topic: &str, status: OutboxStatus) -> Uuid {
    let (initial, moves) = path_to(status);
    let mut new = event(topic);
    new.prequeued = initial == OutboxStatus::Prequeued;
    let id = if initial == OutboxStatus::Cdc {
        sluice_outbox::enqueue_cdc(conn, &new)
            .await
            .expect("enqueue_cdc")
    } else {
        enqueue(conn, &new).await.expect("enqueue")
    };
    let mut at = initial;
    for to in moves {
        let outcome = transition(conn, id, &[at], to).await.expect("legal move");
        assert_eq!(outcome, TransitionOutcome::Moved, "{at} -> {to}");
        at = to;
    }
    assert_eq!(status_of(conn, id).await, status);
    id
}

/// Backdates row `id`'s claim by `minutes` (a claim that went stale).
pub async fn age_claim(conn: &mut PgConnection, id: Uuid, minutes: i32) {
    sqlx::query(
        "UPDATE outbox_events SET claimed_at = now() - make_interval(mins => $2) WHERE id = $1",
    )
    .bind(id)
    .bind(minutes)
    .execute(conn)
    .await
    .unwrap();
}
