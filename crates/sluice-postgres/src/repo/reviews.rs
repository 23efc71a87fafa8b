use super::{column, outcome};
use sluice_core::messages::Review;
use sluice_core::{Bound, WriteOutcome};
use sqlx::PgConnection;

/// Upserts reviews with the monotonic guard (docs/ARCHITECTURE.md#tables); one statement for the whole slice.
/// The slice must hold at most one row per `review_id` (see `sluice_core::dedupe`).
pub async fn upsert_reviews(
    conn: &mut PgConnection,
    rows: &[Bound<Review>],
) -> Result<WriteOutcome, sqlx::Error> {
    if rows.is_empty() {
        return Ok(WriteOutcome::default());
    }
    let returned: Vec<bool> = sqlx::query_scalar(include_str!("../sql/upsert_reviews.sql"))
        .bind(column(rows, |r| r.message.review_id.as_str()))
        .bind(column(rows, |r| r.application_id))
        .bind(column(rows, |r| r.message.user_name.as_deref()))
        .bind(column(rows, |r| r.message.score))
        .bind(column(rows, |r| r.message.content.as_deref()))
        .bind(column(rows, |r| r.message.thumbs_up_count))
        .bind(column(rows, |r| r.message.app_version.as_deref()))
        .bind(column(rows, |r| r.message.at))
        .bind(column(rows, |r| r.message.reply_content.as_deref()))
        .bind(column(rows, |r| r.message.replied_at))
        .bind(column(rows, |r| r.message.last_synced_at))
        .fetch_all(conn)
        .await?;
    Ok(outcome(rows.len(), &returned))
}
