//! Retention (docs/ARCHITECTURE.md#outbox): SUCCESS and untracked PUBLISHED and CDC rows older than the configured age
//! are deleted in batches; FAILURE and PUSHED_FAILURE rows are never purged.

use crate::DispatchError;
use sqlx::PgConnection;
use std::time::Duration;

/// Rows deleted per statement, so a large purge never holds long locks.
pub const PURGE_BATCH: i64 = 1000;

/// Deletes SUCCESS, PUBLISHED and CDC rows last changed more than `age` ago, [`PURGE_BATCH`] at a
/// time (each its own statement), and returns how many were deleted.
pub async fn purge_expired(conn: &mut PgConnection, age: Duration) -> Result<u64, DispatchError> {
    let mut total = 0;
    loop {
        let deleted = sqlx::query(include_str!("sql/purge.sql"))
            .bind(age.as_secs_f64())
            .bind(PURGE_BATCH)
            .execute(&mut *conn)
            .await?
            .rows_affected();
        total += deleted;
        if deleted < u64::try_from(PURGE_BATCH).unwrap_or(u64::MAX) {
            break;
        }
    }
    if total > 0 {
        tracing::info!(deleted = total, ?age, "outbox retention purged rows");
    }
    Ok(total)
}
