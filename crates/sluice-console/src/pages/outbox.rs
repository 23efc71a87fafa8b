//! `/outbox`: counts by status, the oldest pending age, FAILURE rows with their error (and a
//! retry action), stale DISPATCHING rows; and the retry tiers and `.dlt` topic of a business
//! consumer, when one is configured.

use super::{Viewer, forbidden, message, render};
use crate::error::ConsoleError;
use crate::kafka_view::read_retry;
use crate::queries::outbox;
use crate::shown;
use crate::state::Console;
use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use uuid::Uuid;

#[derive(Debug, Serialize)]
struct Listed {
    id: String,
    topic: String,
    key: String,
    event_type: String,
    attempts: i32,
    error: String,
    claimed_by: String,
    claimed_at: String,
    updated_at: String,
}

fn listed(rows: Vec<outbox::OutboxRow>) -> Vec<Listed> {
    rows.into_iter()
        .map(|r| Listed {
            id: r.id.to_string(),
            topic: shown::line(r.topic.as_bytes()),
            key: shown::line(r.partition_key.as_bytes()),
            event_type: shown::line(r.event_type.as_bytes()),
            attempts: r.attempts,
            error: r
                .last_error
                .map(|e| shown::line(e.as_bytes()))
                .unwrap_or_default(),
            claimed_by: r
                .claimed_by
                .map(|c| shown::line(c.as_bytes()))
                .unwrap_or_default(),
            claimed_at: r.claimed_at.map(|t| t.to_rfc3339()).unwrap_or_default(),
            updated_at: r.updated_at.to_rfc3339(),
        })
        .collect()
}

/// `GET /outbox`.
pub async fn page(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    let viewer = Viewer::of(&console, &headers);
    let retry = match console.sources.retry.clone() {
        Some(retry) => Some(
            console
                .kafka(move |admin| read_retry(admin, &retry))
                .await?,
        ),
        None => None,
    };
    let mut conn = console.pool.acquire().await?;
    let exists = sluice_outbox::store::outbox_table_exists(&mut conn).await?;
    let (counts, oldest, stuck, failures, stale) = if exists {
        let stale_after = console.sources.stale_dispatch;
        let summary = sluice_outbox::ops::summary(&mut conn, stale_after).await?;
        let counts: Vec<(String, i64)> = summary
            .counts
            .iter()
            .map(|(s, n)| (s.as_str().to_owned(), *n))
            .collect();
        (
            counts,
            summary.oldest_pending_seconds,
            summary.stuck_dispatching,
            listed(outbox::failures(&mut conn).await?),
            listed(outbox::stale_dispatching(&mut conn, stale_after).await?),
        )
    } else {
        (Vec::new(), None, 0, Vec::new(), Vec::new())
    };
    render(
        &console,
        "outbox.html",
        json!({
            "title": "Outbox",
            "viewer": viewer,
            "exists": exists,
            "counts": counts,
            "oldest_pending": oldest.map(|s| format!("{s:.1} s")),
            "stuck": stuck,
            "stale_seconds": console.sources.stale_dispatch.as_secs(),
            "failures": failures,
            "stale": stale,
            "listed": outbox::LISTED,
            "retry": retry,
        }),
    )
}

/// The retry form's fields.
#[derive(Debug, Deserialize)]
pub struct RetryForm {
    #[serde(default)]
    csrf: String,
    id: Uuid,
}

/// `POST /outbox/retry`: re-opens one FAILURE event (FAILURE → PENDING), as
/// `sluice outbox retry-failed --id`.
pub async fn retry(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<RetryForm>,
) -> Result<Response, ConsoleError> {
    let viewer = Viewer::of(&console, &headers);
    if let Err(why) = console.sessions.authorize(&headers, &form.csrf) {
        return Ok(forbidden(&console, &viewer, why));
    }
    let mut conn = console.pool.acquire().await?;
    let moved = sluice_outbox::ops::retry_failed(&mut conn, Some(&[form.id])).await?;
    let text = if moved == 1 {
        format!("event {} re-opened: FAILURE → PENDING", form.id)
    } else {
        format!("event {} was not in FAILURE; nothing changed", form.id)
    };
    let status = if moved == 1 {
        StatusCode::OK
    } else {
        StatusCode::CONFLICT
    };
    message(&console, &viewer, status, "Outbox retry", &text, "/outbox")
}
