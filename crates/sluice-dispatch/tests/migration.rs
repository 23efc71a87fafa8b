//! Migration 0012 (cheaper status moves) applied to a database that already holds outbox
//! rows in every stage under 0001–0011: the rows keep their claims, the claim keeps per-key
//! order, stale recovery still lists the old claims, the trigger still refuses an illegal
//! edge and refreshes `updated_at`, and a newer unknown schema is still refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::{event, row_in, status_of};
use sluice_dispatch::store::claim::claim_batch;
use sluice_dispatch::store::settle::settle_published;
use sluice_dispatch::store::stale::list_stale;
use sluice_outbox::{NewEvent, OutboxStatus, enqueue};
use sluice_postgres::migrate::{MigrateError, migrate, migrate_up_to};
use sqlx::PgConnection;
use std::time::Duration;

const APPLICATIONS: &str = "apps_registry_application";

async fn index_names(conn: &mut PgConnection) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes
         WHERE schemaname = current_schema() AND tablename = 'outbox_events' ORDER BY 1",
    )
    .fetch_all(conn)
    .await
    .unwrap()
}

fn keyed(topic: &str, key: &str, n: usize) -> NewEvent {
    let mut new = event(topic);
    new.partition_key = key.to_owned();
    new.aggregate_id = format!("{key}-{n}");
    new
}

#[tokio::test]
async fn migration_0012_upgrades_a_running_outbox() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = sluice_testkit::TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    let topic = sluice_testkit::unique("outbox-0012");

    // The database as 0011 left it, with rows in flight.
    let report = migrate_up_to(&mut conn, APPLICATIONS, 11).await.unwrap();
    assert_eq!(report.version, 11);
    assert!(
        index_names(&mut conn)
            .await
            .contains(&"outbox_events_in_flight_key_idx".to_owned())
    );
    let mut a = vec![];
    for n in 0..3 {
        a.push(enqueue(&mut conn, &keyed(&topic, "a", n)).await.unwrap());
    }
    // a0 claimed before the upgrade: DISPATCHING with a claim token and claimed_at.
    let old_claim = claim_batch(&mut conn, "old-dispatcher", 1).await.unwrap();
    assert_eq!(old_claim.iter().map(|e| e.id).collect::<Vec<_>>(), [a[0]]);
    let b = enqueue(&mut conn, &keyed(&topic, "b", 0)).await.unwrap();
    let published = row_in(&mut conn, &topic, OutboxStatus::Published).await;
    let cdc = row_in(&mut conn, &topic, OutboxStatus::Cdc).await;
    let failed = row_in(&mut conn, &topic, OutboxStatus::Failure).await;

    // 0012 on top.
    let report = migrate_up_to(&mut conn, APPLICATIONS, 12).await.unwrap();
    assert_eq!(report.applied, ["0012_outbox_lean_status_moves.sql"]);
    let indexes = index_names(&mut conn).await;
    assert!(
        indexes.contains(&"outbox_events_pending_key_idx".to_owned()),
        "{indexes:?}"
    );
    for gone in [
        "outbox_events_in_flight_key_idx",
        "outbox_events_dispatching_claimed_idx",
    ] {
        assert!(!indexes.contains(&gone.to_owned()), "{indexes:?}");
    }
    for (id, status) in [
        (a[0], OutboxStatus::Dispatching),
        (a[1], OutboxStatus::Pending),
        (published, OutboxStatus::Published),
        (cdc, OutboxStatus::Cdc),
        (failed, OutboxStatus::Failure),
    ] {
        assert_eq!(status_of(&mut conn, id).await, status);
    }

    // Per-key order: key a is in flight under the old claim, so only b is claimable.
    let claimed = claim_batch(&mut conn, "new-dispatcher", 10).await.unwrap();
    assert_eq!(claimed.iter().map(|e| e.id).collect::<Vec<_>>(), [b]);

    // Stale recovery lists the claim made before the upgrade, with its token.
    sqlx::query("UPDATE outbox_events SET claimed_at = now() - interval '5 minutes' WHERE id = $1")
        .bind(a[0])
        .execute(&mut conn)
        .await
        .unwrap();
    let stale = list_stale(&mut conn, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert_eq!(
        (stale[0].id, stale[0].claim_id),
        (a[0], Some(old_claim[0].claim_id))
    );

    // The old claim settles under its token, and the rest of key a follows in order.
    let before: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT updated_at FROM outbox_events WHERE id = $1")
            .bind(a[0])
            .fetch_one(&mut conn)
            .await
            .unwrap();
    let settled = settle_published(&mut conn, Some(old_claim[0].claim_id), &[(a[0], 0, 7)])
        .await
        .unwrap();
    assert_eq!(settled.published, 1);
    let after: chrono::DateTime<chrono::Utc> =
        sqlx::query_scalar("SELECT updated_at FROM outbox_events WHERE id = $1")
            .bind(a[0])
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert!(after > before, "updated_at {before} -> {after}");
    let claimed = claim_batch(&mut conn, "new-dispatcher", 10).await.unwrap();
    assert_eq!(
        claimed.iter().map(|e| e.id).collect::<Vec<_>>(),
        [a[1], a[2]]
    );

    // The transition check: an illegal edge is refused as before, a legal one passes, and
    // an update that keeps the status still refreshes updated_at.
    let error = sqlx::query("UPDATE outbox_events SET status = 'SUCCESS' WHERE id = $1")
        .bind(failed)
        .execute(&mut conn)
        .await
        .unwrap_err();
    let db = error.as_database_error().expect("a database error");
    assert_eq!(db.code().as_deref(), Some("23514"));
    assert_eq!(db.constraint(), Some("outbox_events_status_transition"));
    assert!(
        db.message()
            .contains("illegal outbox status transition FAILURE -> SUCCESS"),
        "{}",
        db.message()
    );
    sqlx::query("UPDATE outbox_events SET status = 'UNDER_PROCESSING' WHERE id = $1")
        .bind(cdc)
        .execute(&mut conn)
        .await
        .unwrap();
    let touched: bool = sqlx::query_scalar(
        "WITH before AS (SELECT updated_at FROM outbox_events WHERE id = $1)
         UPDATE outbox_events AS e SET status = status, last_error = 'x'
         FROM before WHERE e.id = $1 RETURNING e.updated_at > before.updated_at",
    )
    .bind(published)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(touched, "an update keeping the status refreshes updated_at");

    // A database newer than this build is still refused.
    sqlx::query(
        "INSERT INTO storage_consumer_migrations (version, name, checksum, execution_ms)
         VALUES (9999, '9999_future.sql', '\\x00', 0)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let refused = migrate(&mut conn, APPLICATIONS).await.unwrap_err();
    assert!(
        matches!(refused, MigrateError::Unknown { version: 9999 }),
        "{refused:?}"
    );
    common::teardown(schema, conn).await;
}
