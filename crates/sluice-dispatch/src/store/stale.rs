//! Listing stale claims: rows DISPATCHING for longer than the stale timeout, each with the
//! claim token it is held by (what [`crate::recovery`] settles).

use crate::DispatchError;
use sqlx::{FromRow, PgConnection};
use std::time::Duration;
use uuid::Uuid;

/// Stale rows checked per round.
const STALE_LIMIT: i64 = 1000;

/// A stale DISPATCHING row as recovery listed it.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct StaleRow {
    /// The event id.
    pub id: Uuid,
    /// Its topic.
    pub topic: String,
    /// Its explicit partition, if any.
    pub partition: Option<i32>,
    /// The token of the claim found stale (`None`: claimed before tokens existed).
    pub claim_id: Option<Uuid>,
    /// The claim time, milliseconds since the epoch (database clock).
    pub claimed_at_ms: i64,
}

/// The rows DISPATCHING for longer than `stale_after` (at most 1,000, oldest claim first),
/// each with the claim token it is held by.
pub async fn list_stale(
    conn: &mut PgConnection,
    stale_after: Duration,
) -> Result<Vec<StaleRow>, DispatchError> {
    Ok(sqlx::query_as(include_str!("sql/stale.sql"))
        .bind(stale_after.as_secs_f64())
        .bind(STALE_LIMIT)
        .fetch_all(&mut *conn)
        .await?)
}
