//! The outbox's database side on the real PostgreSQL (issue 6, acceptance 5 and 6): enqueue
//! follows the caller's transaction, `mark_published` never moves a consumed row back, the
//! trigger enforces the core's edges (all 81 pairs), release, and NOTIFY.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use OutboxStatus::*;
use common::{event, row_in, setup, status_of, teardown};
use serde_json::json;
use sluice_outbox::status::{self, EDGES, IllegalTransition, OutboxStatus};
use sluice_outbox::{
    MarkPublishedOutcome, NOTIFY_CHANNEL, OutboxError, TRANSITION_CONSTRAINT, TransitionOutcome,
    enqueue, is_rejected_transition, mark_published, release, transition,
};
use sqlx::postgres::PgListener;
use sqlx::{Connection, PgConnection, Row};
use std::time::Duration;
use uuid::Uuid;

#[tokio::test]
async fn enqueue_commits_and_rolls_back_with_the_callers_transaction() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox");

    let rolled_back = event(&topic);
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("CREATE TEMP TABLE business_write (n INT)")
        .execute(&mut *tx)
        .await
        .unwrap();
    enqueue(&mut tx, &rolled_back).await.unwrap();
    tx.rollback().await.unwrap();
    let dropped = event(&topic);
    {
        let mut tx = conn.begin().await.unwrap();
        enqueue(&mut tx, &dropped).await.unwrap();
    }
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox_events")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        count, 0,
        "a rolled-back or dropped transaction leaves no row"
    );

    let committed = event(&topic)
        .with_partition_key("user-42")
        .with_partition(2)
        .with_header("trace-id", "abc");
    let mut tx = conn.begin().await.unwrap();
    let id = enqueue(&mut tx, &committed).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(id, committed.id);
    let row = sqlx::query(
        "SELECT status, topic, aggregate_type, aggregate_id, event_type, partition_key,
                partition, payload, headers, attempts, available_at <= now() AS due,
                claimed_by, published_offset, seq
         FROM outbox_events",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(row.get::<String, _>("status"), "PENDING");
    assert_eq!(row.get::<String, _>("topic"), topic);
    assert_eq!(row.get::<String, _>("aggregate_type"), "user");
    assert_eq!(row.get::<String, _>("aggregate_id"), "42");
    assert_eq!(row.get::<String, _>("event_type"), "mailbox.command");
    assert_eq!(row.get::<String, _>("partition_key"), "user-42");
    assert_eq!(row.get::<Option<i32>, _>("partition"), Some(2));
    assert_eq!(
        row.get::<serde_json::Value, _>("payload"),
        committed.payload
    );
    assert_eq!(
        row.get::<serde_json::Value, _>("headers"),
        json!({"trace-id": "abc"})
    );
    assert_eq!(row.get::<i32, _>("attempts"), 0);
    assert!(row.get::<bool, _>("due"));
    assert_eq!(row.get::<Option<String>, _>("claimed_by"), None);
    assert_eq!(row.get::<Option<i64>, _>("published_offset"), None);

    // A second enqueue of the same id is an error, not a silent no-op.
    let error = enqueue(&mut conn, &committed).await.unwrap_err();
    assert!(
        matches!(&error, OutboxError::Database(e) if sluice_postgres::sqlstate(e).as_deref() == Some("23505")),
        "{error:?}"
    );

    // The plain INSERT documented in the migration for non-Rust services works as written.
    sqlx::query(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, topic,
                                    partition_key, payload)
         VALUES ('user', '42', 'mailbox.command', $1, '42', '{\"command\": \"...\"}')",
    )
    .bind(&topic)
    .execute(&mut conn)
    .await
    .unwrap();
    let seqs: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, seq FROM outbox_events ORDER BY created_at, seq")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(seqs.len(), 2);
    assert!(seqs.iter().all(|(status, _)| status == "PENDING"));
    assert!(seqs[0].1 < seqs[1].1, "seq follows creation order");
    teardown(schema, conn).await;
}

/// Any service that enqueues could otherwise give its event the retry tiers' headers and
/// steer where `sluice dlt replay` re-publishes it once it is dead-lettered.
#[tokio::test]
async fn an_event_with_a_retry_tier_header_is_refused_and_nothing_is_written() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox");
    for name in ["sluice-retry-original-topic", "Sluice-Retry-Attempt"] {
        let forged = event(&topic).with_header(name, "payments");
        match enqueue(&mut conn, &forged).await {
            Err(OutboxError::ReservedHeader { id, name: refused }) => {
                assert_eq!((id, refused.as_str()), (forged.id, name));
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    let ok = event(&topic).with_header("trace", "abc");
    enqueue(&mut conn, &ok).await.unwrap();
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox_events WHERE topic = $1")
        .bind(&topic)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(count, 1, "only the event without a reserved header");
    teardown(schema, conn).await;
}

#[tokio::test]
async fn mark_published_moves_dispatching_and_never_moves_a_row_back() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox");

    let id = row_in(&mut conn, &topic, Dispatching).await;
    let outcome = mark_published(&mut conn, id, 3, 77).await.unwrap();
    assert_eq!(outcome, MarkPublishedOutcome::Published);
    let (status, partition, offset, at): (String, Option<i32>, Option<i64>, bool) = sqlx::query_as(
        "SELECT status, published_partition, published_offset, published_at IS NOT NULL
             FROM outbox_events WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        (status.as_str(), partition, offset, at),
        ("PUBLISHED", Some(3), Some(77), true)
    );
    // A second acknowledgement (recovery got there first) keeps the first offset.
    assert_eq!(
        mark_published(&mut conn, id, 5, 99).await.unwrap(),
        MarkPublishedOutcome::AlreadyPast { current: Published }
    );
    let offset: Option<i64> =
        sqlx::query_scalar("SELECT published_offset FROM outbox_events WHERE id = $1")
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(offset, Some(77));

    // The consumer moved the row on before the acknowledgement was recorded.
    for current in [UnderProcessing, Success, PushedFailure] {
        let id = row_in(&mut conn, &topic, current).await;
        assert_eq!(
            mark_published(&mut conn, id, 1, 10).await.unwrap(),
            MarkPublishedOutcome::AlreadyPast { current },
            "{current}"
        );
        assert_eq!(status_of(&mut conn, id).await, current, "unchanged");
        let offset: Option<i64> =
            sqlx::query_scalar("SELECT published_offset FROM outbox_events WHERE id = $1")
                .bind(id)
                .fetch_one(&mut conn)
                .await
                .unwrap();
        assert_eq!(offset, None, "{current}: no offset written");
    }

    for current in [Prequeued, Pending, Failure] {
        let id = row_in(&mut conn, &topic, current).await;
        match mark_published(&mut conn, id, 1, 10).await {
            Err(OutboxError::Illegal(e)) => assert_eq!(
                e,
                IllegalTransition {
                    from: current,
                    to: Published
                }
            ),
            other => panic!("{current}: {other:?}"),
        }
        assert_eq!(status_of(&mut conn, id).await, current, "unchanged");
    }

    let missing = Uuid::new_v4();
    assert!(matches!(
        mark_published(&mut conn, missing, 1, 10).await,
        Err(OutboxError::NotFound { id }) if id == missing
    ));
    teardown(schema, conn).await;
}

/// The race described in docs/ARCHITECTURE.md#outbox: the consumer moves the row on while the acknowledgement is being
/// recorded. `mark_published` waits for the consumer's transaction and then reports the
/// status it found, instead of overwriting it or calling it illegal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mark_published_racing_the_consumer_sees_its_committed_status() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox");
    let id = row_in(&mut conn, &topic, Dispatching).await;

    let mut consumer = schema.connect().await;
    let consumer_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut consumer)
        .await
        .unwrap();
    let mut tx = consumer.begin().await.unwrap();
    assert_eq!(
        transition(&mut tx, id, &[Dispatching, Published], UnderProcessing)
            .await
            .unwrap(),
        TransitionOutcome::Moved
    );
    let url = schema.url.clone();
    let publisher = tokio::spawn(async move {
        let mut conn = PgConnection::connect(&url).await.unwrap();
        mark_published(&mut conn, id, 0, 5).await
    });
    // Wait until the publisher is blocked on the consumer's row lock.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let blocked: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
        )
        .bind(consumer_pid)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        if blocked > 0 {
            break;
        }
        assert!(
            !publisher.is_finished(),
            "mark_published waits for the row lock"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "publisher never blocked"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tx.commit().await.unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), publisher)
        .await
        .expect("mark_published returns once the lock is released")
        .unwrap()
        .unwrap();
    assert_eq!(
        outcome,
        MarkPublishedOutcome::AlreadyPast {
            current: UnderProcessing
        }
    );
    assert_eq!(status_of(&mut conn, id).await, UnderProcessing);
    consumer.close().await.unwrap();
    teardown(schema, conn).await;
}

#[tokio::test]
async fn a_status_written_by_hand_must_follow_an_edge() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox");
    let id = row_in(&mut conn, &topic, Pending).await;

    let error = sqlx::query("UPDATE outbox_events SET status = 'SUCCESS' WHERE status = 'PENDING'")
        .execute(&mut conn)
        .await
        .unwrap_err();
    assert!(is_rejected_transition(&error), "{error:?}");
    let db = error.as_database_error().expect("a database error");
    assert_eq!(db.code().as_deref(), Some("23514"));
    assert_eq!(db.constraint(), Some(TRANSITION_CONSTRAINT));
    assert!(
        db.message()
            .contains("illegal outbox status transition PENDING -> SUCCESS"),
        "{}",
        db.message()
    );
    assert_eq!(status_of(&mut conn, id).await, Pending);

    // Inserting a row in a later status skips the state machine too.
    let error = sqlx::query(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, topic,
                                    partition_key, payload, status)
         VALUES ('user', '1', 'x', $1, '1', '{}', 'SUCCESS')",
    )
    .bind(&topic)
    .execute(&mut conn)
    .await
    .unwrap_err();
    assert!(is_rejected_transition(&error), "{error:?}");

    // An unknown status is refused by the CHECK constraint.
    let error = sqlx::query("UPDATE outbox_events SET status = 'DONE' WHERE id = $1")
        .bind(id)
        .execute(&mut conn)
        .await
        .unwrap_err();
    assert_eq!(sluice_postgres::sqlstate(&error).as_deref(), Some("23514"));

    // Keeping the status is a no-op for the trigger, and every update refreshes updated_at.
    let before: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT updated_at FROM outbox_events WHERE id = $1")
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    sqlx::query("UPDATE outbox_events SET status = status, last_error = 'x' WHERE id = $1")
        .bind(id)
        .execute(&mut conn)
        .await
        .unwrap();
    let after: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT updated_at FROM outbox_events WHERE id = $1")
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert!(after > before, "updated_at {before} -> {after}");
    teardown(schema, conn).await;
}

/// The trigger and the core agree on all 81 pairs, both by hand-written UPDATEs and through
/// `transition`; an illegal request changes nothing.
#[tokio::test]
async fn every_pair_through_the_trigger_and_through_transition() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox");
    let mut checked = 0;
    for from in OutboxStatus::ALL {
        for to in OutboxStatus::ALL {
            let legal = status::is_allowed(from, to);

            // By hand: the trigger accepts exactly the edges (and keeping the status).
            let id = row_in(&mut conn, &topic, from).await;
            let result = sqlx::query("UPDATE outbox_events SET status = $1 WHERE id = $2")
                .bind(to.as_str())
                .bind(id)
                .execute(&mut conn)
                .await;
            match result {
                Ok(_) => assert!(legal || from == to, "trigger accepted {from} -> {to}"),
                Err(error) => {
                    assert!(!legal && from != to, "trigger rejected {from} -> {to}");
                    assert!(is_rejected_transition(&error), "{from} -> {to}: {error:?}");
                    let message = error.as_database_error().unwrap().message().to_owned();
                    assert!(message.contains(&format!("{from} -> {to}")), "{message}");
                }
            }
            let expected = if legal { to } else { from };
            assert_eq!(status_of(&mut conn, id).await, expected, "{from} -> {to}");

            // Through the helper.
            let id = row_in(&mut conn, &topic, from).await;
            match transition(&mut conn, id, &[from], to).await {
                Ok(TransitionOutcome::Moved) => assert!(legal, "helper moved {from} -> {to}"),
                Err(OutboxError::Illegal(e)) => {
                    assert!(!legal, "helper refused {from} -> {to}");
                    assert_eq!(e, IllegalTransition { from, to });
                }
                other => panic!("{from} -> {to}: {other:?}"),
            }
            assert_eq!(status_of(&mut conn, id).await, expected, "{from} -> {to}");
            checked += 1;
        }
    }
    assert_eq!(checked, 81);
    assert_eq!(
        EDGES.len(),
        11,
        "ten automatic edges and the operator re-open"
    );
    teardown(schema, conn).await;
}

#[tokio::test]
async fn transition_is_a_compare_and_set() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox");
    let id = row_in(&mut conn, &topic, Pending).await;
    // A legal edge from a status the row is not in: lost race, row unchanged.
    assert_eq!(
        transition(&mut conn, id, &[Dispatching], Published)
            .await
            .unwrap(),
        TransitionOutcome::Stale { current: Pending }
    );
    assert_eq!(status_of(&mut conn, id).await, Pending);
    // Several accepted sources; the row is in one of them.
    let id = row_in(&mut conn, &topic, Published).await;
    assert_eq!(
        transition(
            &mut conn,
            id,
            status::allowed_sources(UnderProcessing),
            UnderProcessing
        )
        .await
        .unwrap(),
        TransitionOutcome::Moved
    );
    // One illegal source spoils the request before any SQL runs.
    assert!(matches!(
        transition(&mut conn, id, &[UnderProcessing, Success], Success).await,
        Err(OutboxError::Illegal(IllegalTransition {
            from: Success,
            to: Success
        }))
    ));
    assert_eq!(status_of(&mut conn, id).await, UnderProcessing);
    assert!(matches!(
        transition(&mut conn, id, &[], Success).await,
        Err(OutboxError::NoSourceStatus { to: Success })
    ));
    let missing = Uuid::new_v4();
    assert!(matches!(
        transition(&mut conn, missing, &[Pending], Dispatching).await,
        Err(OutboxError::NotFound { id }) if id == missing
    ));
    teardown(schema, conn).await;
}

#[tokio::test]
async fn release_moves_prequeued_rows_only() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox");
    let held_a = row_in(&mut conn, &topic, Prequeued).await;
    let held_b = row_in(&mut conn, &topic, Prequeued).await;
    let held_other = row_in(&mut conn, &topic, Prequeued).await;
    let pending = row_in(&mut conn, &topic, Pending).await;
    let dispatching = row_in(&mut conn, &topic, Dispatching).await;
    let success = row_in(&mut conn, &topic, Success).await;
    let ids = [
        held_a,
        held_b,
        pending,
        dispatching,
        success,
        Uuid::new_v4(),
    ];

    let mut tx = conn.begin().await.unwrap();
    assert_eq!(release(&mut tx, &ids).await.unwrap(), 2);
    tx.rollback().await.unwrap();
    assert_eq!(status_of(&mut conn, held_a).await, Prequeued, "rolled back");

    assert_eq!(release(&mut conn, &ids).await.unwrap(), 2);
    assert_eq!(
        release(&mut conn, &ids).await.unwrap(),
        0,
        "already released"
    );
    assert_eq!(release(&mut conn, &[]).await.unwrap(), 0);
    for (id, expected) in [
        (held_a, Pending),
        (held_b, Pending),
        (held_other, Prequeued),
        (pending, Pending),
        (dispatching, Dispatching),
        (success, Success),
    ] {
        assert_eq!(status_of(&mut conn, id).await, expected, "{id}");
    }
    teardown(schema, conn).await;
}

/// Waits for the next notification on the outbox channel whose payload is one of `topics`
/// (other tests notify the same channel with their own topics).
async fn next_of(listener: &mut PgListener, topics: &[&str]) -> String {
    loop {
        let notification = tokio::time::timeout(Duration::from_secs(10), listener.recv())
            .await
            .expect("a notification within 10 s")
            .expect("listener");
        assert_eq!(notification.channel(), NOTIFY_CHANNEL);
        if topics.contains(&notification.payload()) {
            return notification.payload().to_owned();
        }
    }
}

#[tokio::test]
async fn committed_claimable_events_notify_the_dispatchers() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let mut listener = PgListener::connect(&schema.url).await.unwrap();
    listener.listen(NOTIFY_CHANNEL).await.unwrap();
    let pending_topic = sluice_testkit::unique("outbox");
    let held_topic = sluice_testkit::unique("outbox");
    let marker_topic = sluice_testkit::unique("outbox");
    let topics = [
        pending_topic.as_str(),
        held_topic.as_str(),
        marker_topic.as_str(),
    ];

    // Nothing is announced before the commit; a rolled-back enqueue is never announced.
    let mut tx = conn.begin().await.unwrap();
    enqueue(&mut tx, &event(&pending_topic)).await.unwrap();
    tx.rollback().await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    enqueue(&mut tx, &event(&held_topic).prequeued())
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    enqueue(&mut tx, &event(&marker_topic)).await.unwrap();
    enqueue(&mut tx, &event(&marker_topic)).await.unwrap();
    tx.commit().await.unwrap();
    // Notifications arrive in commit order: the rolled-back and the PREQUEUED insert sent
    // none, so the first one is the marker's (its two inserts fold into one).
    assert_eq!(next_of(&mut listener, &topics).await, marker_topic);

    let mut tx = conn.begin().await.unwrap();
    let id = enqueue(&mut tx, &event(&pending_topic)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(next_of(&mut listener, &topics).await, pending_topic);
    assert_eq!(status_of(&mut conn, id).await, Pending);

    // Releasing a PREQUEUED event announces it.
    let held: Uuid = sqlx::query_scalar("SELECT id FROM outbox_events WHERE topic = $1")
        .bind(&held_topic)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(release(&mut conn, &[held]).await.unwrap(), 1);
    assert_eq!(next_of(&mut listener, &topics).await, held_topic);

    // A dispatcher's own moves announce nothing: only the marker arrives next.
    transition(&mut conn, id, &[Pending], Dispatching)
        .await
        .unwrap();
    transition(&mut conn, id, &[Dispatching], Pending)
        .await
        .unwrap();
    enqueue(&mut conn, &event(&marker_topic)).await.unwrap();
    assert_eq!(next_of(&mut listener, &topics).await, marker_topic);
    drop(listener);
    teardown(schema, conn).await;
}

/// A CDC row: inserted as CDC, with none of what the relay cannot carry; the table's check
/// refuses row headers on a CDC row written by hand, too.
#[tokio::test]
async fn a_cdc_row_carries_only_what_the_relay_can() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox");
    let plain = event(&topic);
    let id = sluice_outbox::enqueue_cdc(&mut conn, &plain).await.unwrap();
    assert_eq!(status_of(&mut conn, id).await, OutboxStatus::Cdc);

    let refused = [
        event(&topic).with_header("trace", "abc"),
        event(&topic).prequeued(),
        event(&topic).available_at(chrono::Utc::now()),
    ];
    for event in refused {
        match sluice_outbox::enqueue_cdc(&mut conn, &event).await {
            Err(OutboxError::NotRelayable { id, .. }) => assert_eq!(id, event.id),
            other => panic!("{other:?}"),
        }
    }
    let by_hand = sqlx::query(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, topic, \
         partition_key, payload, headers, status) \
         VALUES ('user', '1', 'e', $1, '1', '{}', '{\"trace\": \"abc\"}', 'CDC')",
    )
    .bind(&topic)
    .execute(&mut conn)
    .await
    .unwrap_err();
    let db = by_hand.as_database_error().unwrap();
    assert_eq!(db.constraint(), Some("outbox_events_cdc_headers"), "{db}");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM outbox_events WHERE topic = $1")
        .bind(&topic)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(rows, 1, "only the plain CDC row");
    teardown(schema, conn).await;
}
