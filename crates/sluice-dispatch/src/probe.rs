//! The dispatcher's probe: every few seconds, on its own database connection and metadata
//! client, it counts the outbox per status (the query of `sluice outbox status`), measures
//! the oldest due PENDING row, and asks the broker for its metadata. It feeds the
//! table-wide gauges and readiness of [`DispatchMetrics`]; it never touches a row.
//!
//! Cost: one `count(*) … GROUP BY status` over the outbox table per interval per
//! dispatcher; retention keeps the table bounded.

use crate::metrics::DispatchMetrics;
use crate::settings::OutboxSettings;
use sluice_kafka::Admin;
use sluice_outbox::ops::summary;
use sqlx::PgConnection;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often the probe runs.
pub const PROBE_EVERY: Duration = Duration::from_secs(5);
/// How long one check may take before it counts as unreachable.
const CHECK_TIMEOUT: Duration = Duration::from_secs(4);

/// Probes until `stop` is cancelled.
pub async fn run_probe(
    settings: OutboxSettings,
    metrics: DispatchMetrics,
    stop: CancellationToken,
) {
    let admin = match Admin::new(&settings.kafka, CHECK_TIMEOUT) {
        Ok(admin) => Some(Arc::new(admin)),
        Err(error) => {
            metrics.set_broker(Err(format!("cannot create the metadata client: {error}")));
            None
        }
    };
    let mut conn: Option<PgConnection> = None;
    loop {
        probe_database(&settings, &metrics, &mut conn).await;
        if let Some(admin) = &admin {
            probe_broker(admin, &metrics).await;
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(PROBE_EVERY) => {}
        }
    }
}

async fn probe_database(
    settings: &OutboxSettings,
    metrics: &DispatchMetrics,
    conn: &mut Option<PgConnection>,
) {
    let checked = tokio::time::timeout(CHECK_TIMEOUT, async {
        if conn.is_none() {
            let c = sluice_postgres::connect(&settings.database_url, "dispatch-probe")
                .await
                .map_err(|e| e.to_string())?;
            *conn = Some(c);
        }
        let Some(c) = conn.as_mut() else {
            return Err("no connection".to_owned());
        };
        summary(c, settings.stale_dispatch)
            .await
            .map_err(|e| e.to_string())
    })
    .await
    .unwrap_or_else(|_| Err(format!("no answer within {} s", CHECK_TIMEOUT.as_secs())));
    match checked {
        Ok(summary) => {
            metrics.set_table(&summary.counts, summary.oldest_pending_seconds);
            metrics.set_database(Ok(()));
        }
        Err(why) => {
            *conn = None;
            tracing::debug!(%why, "outbox probe: database unreachable");
            metrics.set_database(Err(why));
        }
    }
}

async fn probe_broker(admin: &Arc<Admin>, metrics: &DispatchMetrics) {
    let admin = Arc::clone(admin);
    let reached = tokio::task::spawn_blocking(move || admin.broker_count())
        .await
        .map_err(|e| format!("probe task failed: {e}"))
        .and_then(|r| r.map_err(|e| e.to_string()));
    match reached {
        Ok(brokers) if brokers > 0 => metrics.set_broker(Ok(())),
        Ok(_) => metrics.set_broker(Err("the cluster lists no broker".to_owned())),
        Err(why) => {
            tracing::debug!(%why, "outbox probe: broker unreachable");
            metrics.set_broker(Err(why));
        }
    }
}
