//! The outbox page's lists: FAILURE rows with their error, and stale DISPATCHING rows.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use std::time::Duration;
use uuid::Uuid;

/// Rows listed per section.
pub const LISTED: i64 = 50;

/// One outbox row as listed.
#[derive(Debug, Clone, sqlx::FromRow, Serialize)]
pub struct OutboxRow {
    /// Event id.
    pub id: Uuid,
    /// Target topic.
    pub topic: String,
    /// Record key.
    pub partition_key: String,
    /// Event type.
    pub event_type: String,
    /// Failed publish attempts.
    pub attempts: i32,
    /// The last publish error.
    pub last_error: Option<String>,
    /// The dispatcher that claimed it.
    pub claimed_by: Option<String>,
    /// When it was claimed.
    pub claimed_at: Option<DateTime<Utc>>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// The newest FAILURE rows.
pub async fn failures(conn: &mut PgConnection) -> Result<Vec<OutboxRow>, sqlx::Error> {
    sqlx::query_as(include_str!("outbox_failures.sql"))
        .bind(LISTED)
        .fetch_all(conn)
        .await
}

/// DISPATCHING rows claimed longer ago than `stale`, oldest claim first.
pub async fn stale_dispatching(
    conn: &mut PgConnection,
    stale: Duration,
) -> Result<Vec<OutboxRow>, sqlx::Error> {
    sqlx::query_as(include_str!("outbox_stale.sql"))
        .bind(stale.as_secs_f64())
        .bind(LISTED)
        .fetch_all(conn)
        .await
}
