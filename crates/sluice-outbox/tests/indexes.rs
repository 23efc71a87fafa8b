//! The outbox's indexes on the real PostgreSQL: the claim, stale-dispatch, per-key and
//! retention queries are index scans on a table that looks like a running system's.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::{setup, teardown};
use sqlx::PgConnection;

/// The plan of a query, as text.
async fn plan(conn: &mut PgConnection, sql: &str) -> String {
    let lines: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN {sql}"))
        .fetch_all(conn)
        .await
        .unwrap_or_else(|e| panic!("EXPLAIN {sql}: {e}"));
    lines.join("\n")
}

#[tokio::test]
async fn claim_recovery_and_retention_queries_use_their_indexes() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    // 20,000 rows, mostly finished, as in a running system; moved along legal edges.
    sqlx::raw_sql(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, topic,
                                    partition_key, payload)
         SELECT 'user', (n % 100)::text, 'e', 'mailbox', (n % 100)::text, '{}'
         FROM generate_series(1, 20000) AS n;
         UPDATE outbox_events SET status = 'DISPATCHING', claimed_at = now() - interval '1 hour'
             WHERE seq % 100 <> 0;
         UPDATE outbox_events SET status = 'UNDER_PROCESSING' WHERE seq % 100 > 1;
         UPDATE outbox_events SET status = 'SUCCESS' WHERE seq % 100 > 1;
         ANALYZE outbox_events;",
    )
    .execute(&mut conn)
    .await
    .unwrap();

    let claim = plan(
        &mut conn,
        "SELECT id FROM outbox_events
         WHERE status = 'PENDING' AND available_at <= now()
         ORDER BY seq LIMIT 100 FOR UPDATE SKIP LOCKED",
    )
    .await;
    assert!(claim.contains("outbox_events_pending_seq_idx"), "{claim}");
    assert!(
        !claim.contains("Sort"),
        "walks the index in seq order: {claim}"
    );

    let stale = plan(
        &mut conn,
        "SELECT id FROM outbox_events
         WHERE status = 'DISPATCHING' AND claimed_at < now() - interval '5 minutes'
         ORDER BY claimed_at LIMIT 100",
    )
    .await;
    // The in-flight rows' own index (migration 0012: no index on claimed_at for every
    // claim to write to).
    assert!(
        stale.contains("outbox_events_dispatching_key_idx"),
        "{stale}"
    );

    let pending_of_key = plan(
        &mut conn,
        "SELECT 1 FROM outbox_events
         WHERE topic = 'mailbox' AND partition_key = '7' AND seq < 5000
           AND status = 'PENDING'",
    )
    .await;
    assert!(
        pending_of_key.contains("outbox_events_pending_key_idx"),
        "{pending_of_key}"
    );

    // Retention: push the finished rows' age back (an explicit updated_at is kept).
    sqlx::query("UPDATE outbox_events SET updated_at = now() - interval '30 days' WHERE seq < 100")
        .execute(&mut conn)
        .await
        .unwrap();
    let old: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM outbox_events WHERE updated_at < now() - interval '7 days'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(old, 99);
    let retention = plan(
        &mut conn,
        "SELECT id FROM outbox_events
         WHERE status IN ('SUCCESS', 'PUBLISHED', 'CDC')
           AND updated_at < now() - interval '7 days'
         LIMIT 1000",
    )
    .await;
    assert!(
        retention.contains("outbox_events_retention_idx"),
        "{retention}"
    );
    teardown(schema, conn).await;
}

/// Migration 0020: an insert without an id (plain SQL, any language) gets a UUID version 7,
/// whose first 48 bits are the server's clock in milliseconds, so ids follow creation order
/// (each batch's status moves then share a few pages of the primary key index).
#[tokio::test]
async fn a_plain_insert_gets_a_time_ordered_id() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let insert = "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, topic,
                                             partition_key, payload)
                  VALUES ('user', '1', 'e', 'mailbox', '1', '{}')
                  RETURNING id, (extract(epoch FROM clock_timestamp()) * 1000)::bigint";
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (id, server_ms): (uuid::Uuid, i64) =
            sqlx::query_as(insert).fetch_one(&mut conn).await.unwrap();
        assert_eq!(id.get_version_num(), 7, "{id}");
        assert_eq!(
            id.get_variant(),
            uuid::Variant::RFC4122,
            "{id}: the variant bits are kept"
        );
        let id_ms = id.as_bytes()[..6]
            .iter()
            .fold(0i64, |ms, &byte| ms << 8 | i64::from(byte));
        assert!(
            (server_ms - id_ms).abs() <= 1_000,
            "{id}: its time {id_ms} ms is the server's {server_ms} ms"
        );
        ids.push(id);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, ids, "ids made 5 ms apart are in creation order");
    teardown(schema, conn).await;
}
