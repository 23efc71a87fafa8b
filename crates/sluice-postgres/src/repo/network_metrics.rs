use super::{column, outcome};
use serde_json::Value;
use sluice_core::messages::NetworkMetrics;
use sluice_core::{Bound, WriteOutcome};
use sqlx::PgConnection;

/// Inserts network metrics, `ON CONFLICT (analysis_id) DO NOTHING`; one statement.
pub async fn upsert_network_metrics(
    conn: &mut PgConnection,
    rows: &[Bound<NetworkMetrics>],
) -> Result<WriteOutcome, sqlx::Error> {
    if rows.is_empty() {
        return Ok(WriteOutcome::default());
    }
    let domains: Vec<Option<Value>> = rows
        .iter()
        .map(|r| r.message.domains.as_ref().map(|d| Value::from(d.clone())))
        .collect();
    let returned: Vec<bool> = sqlx::query_scalar(include_str!("../sql/upsert_network_metrics.sql"))
        .bind(column(rows, |r| r.message.analysis_id))
        .bind(column(rows, |r| r.application_id))
        .bind(column(rows, |r| r.message.captured_at))
        .bind(column(rows, |r| r.message.duration_seconds))
        .bind(column(rows, |r| r.message.packet_count))
        .bind(column(rows, |r| r.message.total_bytes))
        .bind(column(rows, |r| r.message.bytes_sent))
        .bind(column(rows, |r| r.message.bytes_received))
        .bind(column(rows, |r| r.message.dns_queries))
        .bind(column(rows, |r| r.message.tls_handshakes))
        .bind(column(rows, |r| r.message.plaintext_http_requests))
        .bind(domains)
        .fetch_all(conn)
        .await?;
    Ok(outcome(rows.len(), &returned))
}
