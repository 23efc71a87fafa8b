//! The operator's side of the library on the real database: retry-failed and the status
//! counts (`sluice outbox status`), and `mark_published_batch`, which never moves a row back.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::{age_claim, event, row_in, setup, status_of, teardown};
use sluice_outbox::ops::{retry_failed, summary};
use sluice_outbox::{OutboxStatus, enqueue};
use std::time::Duration;
use uuid::Uuid;

#[tokio::test]
async fn retry_failed_reopens_failures_and_status_counts() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox");
    let failed: Vec<Uuid> = {
        let mut ids = vec![];
        for _ in 0..3 {
            ids.push(row_in(&mut conn, &topic, OutboxStatus::Failure).await);
        }
        ids
    };
    sqlx::query("UPDATE outbox_events SET attempts = 10, last_error = 'broker said no'")
        .execute(&mut conn)
        .await
        .unwrap();
    let stuck = row_in(&mut conn, &topic, OutboxStatus::Dispatching).await;
    age_claim(&mut conn, stuck, 5).await;
    enqueue(&mut conn, &event(&topic)).await.unwrap();

    let s = summary(&mut conn, Duration::from_secs(60)).await.unwrap();
    assert_eq!(s.counts[&OutboxStatus::Failure], 3);
    assert_eq!(s.counts[&OutboxStatus::Dispatching], 1);
    assert_eq!(s.counts[&OutboxStatus::Pending], 1);
    assert_eq!(s.counts[&OutboxStatus::Success], 0);
    assert_eq!(s.stuck_dispatching, 1);
    assert!(s.oldest_pending_seconds.is_some());

    // One chosen, then the rest; a non-FAILURE id is ignored.
    assert_eq!(
        retry_failed(&mut conn, Some(&[failed[0], stuck]))
            .await
            .unwrap(),
        1
    );
    assert_eq!(retry_failed(&mut conn, None).await.unwrap(), 2);
    assert_eq!(retry_failed(&mut conn, None).await.unwrap(), 0);
    let rows: Vec<(String, i32, Option<String>)> =
        sqlx::query_as("SELECT status, attempts, last_error FROM outbox_events WHERE id = ANY($1)")
            .bind(&failed)
            .fetch_all(&mut conn)
            .await
            .unwrap();
    for (status, attempts, last_error) in rows {
        assert_eq!((status.as_str(), attempts), ("PENDING", 0));
        assert_eq!(
            last_error.as_deref(),
            Some("broker said no"),
            "history kept"
        );
    }
    assert_eq!(status_of(&mut conn, stuck).await, OutboxStatus::Dispatching);
    teardown(schema, conn).await;
}

#[tokio::test]
async fn mark_published_batch_moves_dispatching_rows_and_never_moves_one_back() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox");
    let a = row_in(&mut conn, &topic, OutboxStatus::Dispatching).await;
    let b = row_in(&mut conn, &topic, OutboxStatus::UnderProcessing).await;
    let c = row_in(&mut conn, &topic, OutboxStatus::Dispatching).await;
    let outcomes =
        sluice_outbox::mark_published_batch(&mut conn, &[(a, 1, 10), (b, 1, 11), (c, 2, 12)])
            .await
            .unwrap();
    assert_eq!(
        outcomes,
        vec![
            sluice_outbox::MarkPublishedOutcome::Published,
            sluice_outbox::MarkPublishedOutcome::AlreadyPast {
                current: OutboxStatus::UnderProcessing
            },
            sluice_outbox::MarkPublishedOutcome::Published,
        ]
    );
    let rows: Vec<(Uuid, String, Option<i32>, Option<i64>)> = sqlx::query_as(
        "SELECT id, status, published_partition, published_offset FROM outbox_events ORDER BY seq",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        rows,
        vec![
            (a, "PUBLISHED".into(), Some(1), Some(10)),
            (b, "UNDER_PROCESSING".into(), None, None),
            (c, "PUBLISHED".into(), Some(2), Some(12)),
        ]
    );
    let pending = row_in(&mut conn, &topic, OutboxStatus::Pending).await;
    assert!(
        sluice_outbox::mark_published_batch(&mut conn, &[(pending, 0, 1)])
            .await
            .is_err(),
        "an acknowledgement for a PENDING row is an error"
    );
    assert_eq!(status_of(&mut conn, pending).await, OutboxStatus::Pending);
    teardown(schema, conn).await;
}
