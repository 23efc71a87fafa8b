use super::{column, outcome};
use serde_json::Value;
use sluice_core::messages::AppStats;
use sluice_core::{Bound, WriteOutcome};
use sqlx::PgConnection;

/// Inserts app stats, `ON CONFLICT (application_id, crawled_at) DO NOTHING`; one statement.
pub async fn upsert_app_stats(
    conn: &mut PgConnection,
    rows: &[Bound<AppStats>],
) -> Result<WriteOutcome, sqlx::Error> {
    if rows.is_empty() {
        return Ok(WriteOutcome::default());
    }
    let histograms: Vec<Option<Value>> = rows
        .iter()
        .map(|r| r.message.histogram.as_ref().map(|h| Value::from(h.clone())))
        .collect();
    let returned: Vec<bool> = sqlx::query_scalar(include_str!("../sql/upsert_app_stats.sql"))
        .bind(column(rows, |r| r.application_id))
        .bind(column(rows, |r| r.message.crawled_at))
        .bind(column(rows, |r| r.message.title.as_deref()))
        .bind(column(rows, |r| r.message.score))
        .bind(column(rows, |r| r.message.ratings))
        .bind(column(rows, |r| r.message.reviews_count))
        .bind(column(rows, |r| r.message.installs_min))
        .bind(column(rows, |r| r.message.installs_real))
        .bind(histograms)
        .bind(column(rows, |r| r.message.price))
        .bind(column(rows, |r| r.message.free))
        .bind(column(rows, |r| r.message.version.as_deref()))
        .bind(column(rows, |r| r.message.updated_at))
        .fetch_all(conn)
        .await?;
    Ok(outcome(rows.len(), &returned))
}
