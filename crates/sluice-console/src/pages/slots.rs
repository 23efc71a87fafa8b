//! `/slots`: the database's logical replication slots (`sluice capture`'s, Debezium's, any
//! other's): whether a session streams from each, what it confirmed and the WAL it keeps —
//! an inactive slot keeps WAL until the disk fills, so it is marked.

use super::{Viewer, render};
use crate::error::ConsoleError;
use crate::queries::slots::{Slot, logical_slots};
use crate::shown;
use crate::state::Console;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;

/// WAL kept above this is marked (the `SluiceCaptureSlotLag` alert's threshold).
const KEPT_WARNING: i64 = 1 << 30;

#[derive(Debug, Serialize)]
struct Listed {
    name: String,
    plugin: String,
    state: String,
    confirmed: String,
    kept: String,
    wal_status: String,
    /// Inactive, or keeping more than [`KEPT_WARNING`], or its WAL lost.
    warn: bool,
}

fn listed(slot: Slot) -> Listed {
    let warn = !slot.active
        || slot.kept_bytes.is_some_and(|k| k > KEPT_WARNING)
        || slot.wal_status.as_deref() == Some("lost");
    Listed {
        name: shown::line(slot.name.as_bytes()),
        plugin: slot
            .plugin
            .map(|p| shown::line(p.as_bytes()))
            .unwrap_or_default(),
        state: match (slot.active, slot.active_pid) {
            (true, Some(pid)) => format!("active (pid {pid})"),
            (true, None) => "active".to_owned(),
            (false, _) => "inactive".to_owned(),
        },
        confirmed: slot.confirmed.unwrap_or_else(|| "none".to_owned()),
        kept: slot.kept_bytes.map_or_else(|| "?".to_owned(), bytes),
        wal_status: slot.wal_status.unwrap_or_default(),
        warn,
    }
}

/// `n` bytes as an operator reads them.
fn bytes(n: i64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// `GET /slots`.
pub async fn page(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    let viewer = Viewer::of(&console, &headers);
    let mut conn = console.pool.acquire().await?;
    let slots: Vec<Listed> = logical_slots(&mut conn)
        .await?
        .into_iter()
        .map(listed)
        .collect();
    render(
        &console,
        "slots.html",
        json!({
            "title": "Replication slots",
            "viewer": viewer,
            "slots": slots,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(active: bool, kept: Option<i64>, wal_status: &str) -> Slot {
        Slot {
            name: "sluice_capture".into(),
            plugin: Some("pgoutput".into()),
            active,
            active_pid: active.then_some(4242),
            confirmed: Some("0/16B3748".into()),
            kept_bytes: kept,
            wal_status: Some(wal_status.into()),
        }
    }

    #[test]
    fn an_inactive_slot_a_large_lag_or_lost_wal_is_marked() {
        let streaming = listed(slot(true, Some(8192), "reserved"));
        assert!(!streaming.warn);
        assert_eq!(streaming.state, "active (pid 4242)");
        assert_eq!(streaming.kept, "8.0 KiB");
        assert!(listed(slot(false, Some(0), "reserved")).warn);
        assert!(listed(slot(true, Some(KEPT_WARNING + 1), "extended")).warn);
        assert!(listed(slot(true, Some(0), "lost")).warn);
        assert_eq!(listed(slot(true, None, "reserved")).kept, "?");
    }

    #[test]
    fn bytes_read_as_units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
    }
}
