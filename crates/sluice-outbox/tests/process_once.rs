//! Idempotent processing on the real PostgreSQL (issue 7, acceptance 1 and 5): `process_once`
//! runs the work once per key and a failing work leaves nothing; the outbox-aware helper
//! skips terminal rows and adds a lost success transition without re-applying the work.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use OutboxStatus::*;
use common::{row_in, setup, status_of, teardown};
use sluice_outbox::{
    HandleError, Handled, MessageKey, OutboxStatus, ProcessError, ProcessKey, Processed,
    RecordOutcome, handle_outbox_record, hold_for_retry, process_once, process_once_by_event_id,
};
use sqlx::{Connection, PgConnection};
use std::cell::Cell;
use uuid::Uuid;

/// The work's own error, to check it comes back unchanged.
#[derive(Debug, PartialEq, Eq)]
struct Refused(&'static str);

async fn create_projection(conn: &mut PgConnection) {
    sqlx::query("CREATE TABLE projection (id BIGSERIAL PRIMARY KEY, note TEXT NOT NULL)")
        .execute(conn)
        .await
        .expect("create the projection table");
}

/// The work's effect: one projection row.
async fn project(conn: &mut PgConnection, note: &str) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO projection (note) VALUES ($1)")
        .bind(note)
        .execute(conn)
        .await
        .map(|_| ())
}

async fn count(conn: &mut PgConnection, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(conn)
        .await
        .expect("count rows")
}

fn key(group: &str, topic: &str, offset: i64) -> MessageKey {
    MessageKey {
        consumer_group: group.into(),
        topic: topic.into(),
        partition: 3,
        offset,
    }
}

#[tokio::test]
async fn process_once_runs_the_work_once_per_coordinates() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    create_projection(&mut conn).await;
    let group = sluice_testkit::unique("group");
    let topic = sluice_testkit::unique("topic");
    let runs = Cell::new(0);
    let work = async |tx: &mut PgConnection| {
        runs.set(runs.get() + 1);
        project(tx, "a").await.map(|()| runs.get())
    };

    let first = process_once(&mut conn, &key(&group, &topic, 7), work)
        .await
        .unwrap();
    assert_eq!(first, Processed::Done(1));
    let second = process_once(&mut conn, &key(&group, &topic, 7), work)
        .await
        .unwrap();
    assert_eq!(second, Processed::AlreadyProcessed);
    assert_eq!(runs.get(), 1, "the second call did not run the work");
    assert_eq!(count(&mut conn, "projection").await, 1);
    assert_eq!(count(&mut conn, "processed_kafka_messages").await, 1);

    // Another offset, partition or group is another record.
    let mut other_partition = key(&group, &topic, 7);
    other_partition.partition = 4;
    let other_group = sluice_testkit::unique("group");
    for other in [
        key(&group, &topic, 8),
        other_partition,
        key(&other_group, &topic, 7),
    ] {
        let outcome = process_once(&mut conn, &other, work).await.unwrap();
        assert!(matches!(outcome, Processed::Done(_)), "{other:?}");
    }
    assert_eq!(runs.get(), 4);
    assert_eq!(count(&mut conn, "projection").await, 4);
    assert_eq!(count(&mut conn, "processed_kafka_messages").await, 4);
    let processed_at_set: bool = sqlx::query_scalar(
        "SELECT bool_and(processed_at <= now() AND processed_at > now() - interval '1 hour')
         FROM processed_kafka_messages",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(processed_at_set);
    teardown(schema, conn).await;
}

#[tokio::test]
async fn a_failing_work_leaves_no_processed_row_and_no_effect() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    create_projection(&mut conn).await;
    let key = key(
        &sluice_testkit::unique("group"),
        &sluice_testkit::unique("topic"),
        0,
    );

    let failed = process_once(&mut conn, &key, async |tx: &mut PgConnection| {
        project(tx, "half done").await.unwrap();
        Err::<(), _>(Refused("bad command"))
    })
    .await;
    match failed {
        Err(ProcessError::Work(error)) => assert_eq!(error, Refused("bad command")),
        other => panic!("expected the work's error unchanged, got {other:?}"),
    }
    assert_eq!(
        count(&mut conn, "projection").await,
        0,
        "the effect rolled back"
    );
    assert_eq!(count(&mut conn, "processed_kafka_messages").await, 0);

    // A database error inside the work is the work's error too, and rolls back the same way.
    let failed = process_once(&mut conn, &key, async |tx: &mut PgConnection| {
        project(tx, "before").await?;
        sqlx::query("INSERT INTO no_such_table VALUES (1)")
            .execute(tx)
            .await
            .map(|_| ())
    })
    .await;
    assert!(matches!(
        failed,
        Err(ProcessError::Work(sqlx::Error::Database(_)))
    ));
    assert_eq!(count(&mut conn, "projection").await, 0);
    assert_eq!(count(&mut conn, "processed_kafka_messages").await, 0);

    // The record is processed when it comes again.
    let retried = process_once(&mut conn, &key, async |tx: &mut PgConnection| {
        project(tx, "done").await
    })
    .await
    .unwrap();
    assert_eq!(retried, Processed::Done(()));
    assert_eq!(count(&mut conn, "projection").await, 1);
    assert_eq!(count(&mut conn, "processed_kafka_messages").await, 1);
    teardown(schema, conn).await;
}

#[tokio::test]
async fn process_once_by_event_id_runs_once_per_group_and_event() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    create_projection(&mut conn).await;
    let group = sluice_testkit::unique("group");
    let event_id = Uuid::new_v4();
    let runs = Cell::new(0);
    let work = async |tx: &mut PgConnection| {
        runs.set(runs.get() + 1);
        project(tx, "event").await
    };

    let failed = process_once_by_event_id(&mut conn, &group, event_id, async |tx| {
        project(tx, "half done").await.unwrap();
        Err::<(), _>(Refused("not yet"))
    })
    .await;
    assert!(matches!(
        failed,
        Err(ProcessError::Work(Refused("not yet")))
    ));
    assert_eq!(count(&mut conn, "projection").await, 0);
    assert_eq!(count(&mut conn, "processed_outbox_events").await, 0);

    let first = process_once_by_event_id(&mut conn, &group, event_id, work).await;
    assert_eq!(first.unwrap(), Processed::Done(()));
    // A re-published record has other coordinates but the same event id.
    let again = process_once_by_event_id(&mut conn, &group, event_id, work).await;
    assert_eq!(again.unwrap(), Processed::AlreadyProcessed);
    assert_eq!(runs.get(), 1);
    let other_group = sluice_testkit::unique("group");
    let other = process_once_by_event_id(&mut conn, &other_group, event_id, work).await;
    assert_eq!(other.unwrap(), Processed::Done(()));
    assert_eq!(runs.get(), 2);
    assert_eq!(count(&mut conn, "projection").await, 2);
    assert_eq!(count(&mut conn, "processed_outbox_events").await, 2);
    assert_eq!(count(&mut conn, "processed_kafka_messages").await, 0);
    teardown(schema, conn).await;
}

#[tokio::test]
async fn the_helper_processes_a_record_once_and_ends_its_row() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    create_projection(&mut conn).await;
    let group = sluice_testkit::unique("group");
    let topic = sluice_testkit::unique("outbox");
    let runs = Cell::new(0);
    let apply = async |tx: &mut PgConnection| {
        runs.set(runs.get() + 1);
        project(tx, "applied").await.map(|()| Handled::Applied)
    };

    // A CDC row (relayed by change data capture) is tracked like a PUBLISHED one.
    for (offset, from) in [(0, Published), (1, Dispatching), (2, Cdc)] {
        let id = row_in(&mut conn, &topic, from).await;
        let key = ProcessKey::Message(key(&group, &topic, offset));
        let outcome = handle_outbox_record(&mut conn, &key, id, apply).await;
        assert_eq!(outcome.unwrap(), RecordOutcome::Applied, "from {from}");
        assert_eq!(status_of(&mut conn, id).await, Success);
        // The redelivered record finds a terminal row and is skipped.
        let again = handle_outbox_record(&mut conn, &key, id, apply).await;
        assert_eq!(again.unwrap(), RecordOutcome::Skipped { status: Success });
    }
    assert_eq!(runs.get(), 3);
    assert_eq!(count(&mut conn, "projection").await, 3);

    // A rejection commits the work's writes and ends PUSHED_FAILURE.
    let id = row_in(&mut conn, &topic, Published).await;
    let key = ProcessKey::Event {
        consumer_group: group.clone(),
        event_id: id,
    };
    let rejected = handle_outbox_record(&mut conn, &key, id, async |tx: &mut PgConnection| {
        project(tx, "rejection logged")
            .await
            .map(|()| Handled::Rejected("mailbox full".into()))
    })
    .await;
    assert_eq!(
        rejected.unwrap(),
        RecordOutcome::Rejected("mailbox full".into())
    );
    assert_eq!(status_of(&mut conn, id).await, PushedFailure);
    let reason: Option<String> =
        sqlx::query_scalar("SELECT last_error FROM outbox_events WHERE id = $1")
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(
        reason.as_deref(),
        Some("mailbox full"),
        "the reason stays on the row"
    );
    assert_eq!(count(&mut conn, "projection").await, 4);
    teardown(schema, conn).await;
}

#[tokio::test]
async fn terminal_and_unpublished_rows_are_left_alone_and_a_failing_work_undoes_all() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    create_projection(&mut conn).await;
    let group = sluice_testkit::unique("group");
    let topic = sluice_testkit::unique("outbox");
    let runs = Cell::new(0);
    let apply = async |tx: &mut PgConnection| {
        runs.set(runs.get() + 1);
        project(tx, "applied").await.map(|()| Handled::Applied)
    };

    for (offset, status) in [(0, Success), (1, PushedFailure), (2, Failure)] {
        let id = row_in(&mut conn, &topic, status).await;
        let key = ProcessKey::Message(key(&group, &topic, offset));
        let outcome = handle_outbox_record(&mut conn, &key, id, apply).await;
        assert_eq!(outcome.unwrap(), RecordOutcome::Skipped { status });
        assert_eq!(status_of(&mut conn, id).await, status);
    }
    for (offset, status) in [(3, Prequeued), (4, Pending)] {
        let id = row_in(&mut conn, &topic, status).await;
        let key = ProcessKey::Message(key(&group, &topic, offset));
        let outcome = handle_outbox_record(&mut conn, &key, id, apply).await;
        assert_eq!(outcome.unwrap(), RecordOutcome::NotReady { status });
        assert_eq!(status_of(&mut conn, id).await, status);
    }
    assert_eq!(runs.get(), 0);
    assert_eq!(count(&mut conn, "processed_kafka_messages").await, 0);

    let id = row_in(&mut conn, &topic, Published).await;
    let key = ProcessKey::Message(key(&group, &topic, 5));
    let failed = handle_outbox_record(&mut conn, &key, id, async |tx: &mut PgConnection| {
        project(tx, "half done").await.unwrap();
        Err::<Handled, _>(Refused("broken"))
    })
    .await;
    assert!(matches!(failed, Err(HandleError::Work(Refused("broken")))));
    // The row is unlocked at once, before this connection is used again: another consumer
    // of the same event (a retry tier on its own connection) does not wait for it.
    let mut other = schema.connect().await;
    let locked = sqlx::query("SELECT id FROM outbox_events WHERE id = $1 FOR UPDATE NOWAIT")
        .bind(id)
        .execute(&mut other)
        .await;
    assert!(
        locked.is_ok(),
        "the failed work left the outbox row locked: {locked:?}"
    );
    other.close().await.unwrap();
    assert_eq!(
        status_of(&mut conn, id).await,
        Published,
        "the move rolled back"
    );
    assert_eq!(count(&mut conn, "projection").await, 0);
    // The consumer sends the record to a retry tier: its row is held UNDER_PROCESSING with
    // the error (a NUL in it stored as U+FFFD), once; retention does not purge it.
    assert!(
        hold_for_retry(&mut conn, id, "broken\0 input")
            .await
            .unwrap()
    );
    assert!(!hold_for_retry(&mut conn, id, "again").await.unwrap());
    assert_eq!(status_of(&mut conn, id).await, UnderProcessing);
    let held: Option<String> =
        sqlx::query_scalar("SELECT last_error FROM outbox_events WHERE id = $1")
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(held.as_deref(), Some("broken\u{FFFD} input"));
    assert_eq!(count(&mut conn, "processed_kafka_messages").await, 0);

    let missing = handle_outbox_record(&mut conn, &key, Uuid::new_v4(), apply).await;
    assert!(matches!(
        missing,
        Err(HandleError::Outbox(
            sluice_outbox::OutboxError::NotFound { .. }
        ))
    ));
    teardown(schema, conn).await;
}

#[tokio::test]
async fn a_lost_success_transition_is_added_without_reapplying() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    create_projection(&mut conn).await;
    let group = sluice_testkit::unique("group");
    let topic = sluice_testkit::unique("outbox");
    let runs = Cell::new(0);
    let apply = async |tx: &mut PgConnection| {
        runs.set(runs.get() + 1);
        project(tx, "applied").await.map(|()| Handled::Applied)
    };

    for (offset, lost_at) in [(0, Published), (1, UnderProcessing), (2, Dispatching)] {
        let id = row_in(&mut conn, &topic, lost_at).await;
        let coordinates = key(&group, &topic, offset);
        // The projection committed with its processed row; the success transition did not.
        let committed = process_once(&mut conn, &coordinates, async |tx: &mut PgConnection| {
            project(tx, "applied").await
        })
        .await;
        assert_eq!(committed.unwrap(), Processed::Done(()));
        assert_eq!(status_of(&mut conn, id).await, lost_at);
        let projected = count(&mut conn, "projection").await;

        let key = ProcessKey::Message(coordinates);
        let outcome = handle_outbox_record(&mut conn, &key, id, apply).await;
        assert_eq!(outcome.unwrap(), RecordOutcome::Completed { from: lost_at });
        assert_eq!(status_of(&mut conn, id).await, Success);
        assert_eq!(
            count(&mut conn, "projection").await,
            projected,
            "not re-applied"
        );
        let again = handle_outbox_record(&mut conn, &key, id, apply).await;
        assert_eq!(again.unwrap(), RecordOutcome::Skipped { status: Success });
    }

    // The same with the event-id key: the re-published record comes at another offset.
    let id = row_in(&mut conn, &topic, UnderProcessing).await;
    let done = process_once_by_event_id(&mut conn, &group, id, async |tx| {
        project(tx, "applied").await
    })
    .await;
    assert_eq!(done.unwrap(), Processed::Done(()));
    let key = ProcessKey::Event {
        consumer_group: group.clone(),
        event_id: id,
    };
    let outcome = handle_outbox_record(&mut conn, &key, id, apply).await;
    assert_eq!(
        outcome.unwrap(),
        RecordOutcome::Completed {
            from: UnderProcessing
        }
    );
    assert_eq!(status_of(&mut conn, id).await, Success);

    assert_eq!(runs.get(), 0, "the helper never ran the work");
    assert_eq!(count(&mut conn, "projection").await, 4);
    teardown(schema, conn).await;
}

#[tokio::test]
async fn concurrent_deliveries_of_one_record_run_the_work_once() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    create_projection(&mut conn).await;
    let mut other = schema.connect().await;
    let group = sluice_testkit::unique("group");
    let topic = sluice_testkit::unique("outbox");
    let runs = Cell::new(0);
    // The work holds its transaction open a while, so the second insert waits on the first.
    let slow = async |tx: &mut PgConnection| {
        runs.set(runs.get() + 1);
        project(tx, "applied").await?;
        sqlx::query("SELECT pg_sleep(0.2)").execute(tx).await?;
        Ok::<_, sqlx::Error>(Handled::Applied)
    };

    let coordinates = key(&group, &topic, 0);
    let (a, b) = tokio::join!(
        process_once(&mut conn, &coordinates, slow),
        process_once(&mut other, &coordinates, slow),
    );
    let mut outcomes = [a.unwrap(), b.unwrap()];
    outcomes.sort_by_key(|o| matches!(o, Processed::AlreadyProcessed));
    assert_eq!(
        outcomes,
        [
            Processed::Done(Handled::Applied),
            Processed::AlreadyProcessed
        ]
    );
    assert_eq!(runs.get(), 1);

    let id = row_in(&mut conn, &topic, Published).await;
    let key = ProcessKey::Message(key(&group, &topic, 1));
    let (a, b) = tokio::join!(
        handle_outbox_record(&mut conn, &key, id, slow),
        handle_outbox_record(&mut other, &key, id, slow),
    );
    let mut outcomes = [a.unwrap(), b.unwrap()];
    outcomes.sort_by_key(|o| matches!(o, RecordOutcome::Skipped { .. }));
    assert_eq!(
        outcomes,
        [
            RecordOutcome::Applied,
            RecordOutcome::Skipped { status: Success }
        ]
    );
    assert_eq!(runs.get(), 2);
    assert_eq!(status_of(&mut conn, id).await, Success);
    assert_eq!(count(&mut conn, "projection").await, 2);
    other.close().await.expect("close");
    teardown(schema, conn).await;
}

/// A work that swallows a database error and returns Ok: PostgreSQL answers the COMMIT of
/// the aborted transaction with ROLLBACK (sqlx does not report that as an error), so
/// `process_once` must not say Done. It returns `Aborted`, nothing is committed, the record
/// is processed again on its next delivery, and the connection is usable.
#[tokio::test]
async fn a_work_that_swallows_a_database_error_is_not_done() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    create_projection(&mut conn).await;
    let k = key("swallow", "t", 1);
    let outcome = process_once(&mut conn, &k, async |tx: &mut PgConnection| {
        project(tx, "written before the failure").await?;
        // A failing statement; its error is dropped on purpose.
        let swallowed = sqlx::query("SELECT 1 / 0").execute(&mut *tx).await;
        assert!(swallowed.is_err());
        Ok::<_, sqlx::Error>(())
    })
    .await;
    match outcome {
        Err(ProcessError::Aborted(error)) => {
            let code = error.as_database_error().and_then(|d| d.code());
            assert_eq!(code.as_deref(), Some("25P02"), "{error:?}");
        }
        other => panic!("expected Aborted, got {other:?}"),
    }
    assert_eq!(count(&mut conn, "processed_kafka_messages").await, 0);
    assert_eq!(count(&mut conn, "projection").await, 0);
    // The next delivery processes it.
    let again = process_once(&mut conn, &k, async |tx: &mut PgConnection| {
        project(tx, "second delivery").await
    })
    .await
    .unwrap();
    assert_eq!(again, Processed::Done(()));
    assert_eq!(count(&mut conn, "projection").await, 1);
    teardown(schema, conn).await;
}
