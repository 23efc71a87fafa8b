//! Replaying dead letters from the console: one (`POST /dead-letters/{id}/replay`) or a
//! filtered set (`GET /dead-letters/replay` previews how many and to which topics, `POST`
//! with the confirmation replays them). Every action needs the session and its CSRF token;
//! the rules are `sluice dlq replay`'s own functions ([`refusal`], [`replay_one`]), so a
//! dead letter is replayed at most once and a message at most the replay limit.

use super::dead_letters::{FilterParams, no_such};
use super::{Viewer, forbidden, message, render};
use crate::auth::Refused;
use crate::error::ConsoleError;
use crate::queries::dead_letters::{self, REPLAY_BATCH};
use crate::shown;
use crate::state::Console;
use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sluice_kafka::ResilientProducer;
use sluice_storage::dead_letter_replay::{Replayed, in_record_order, refusal, replay_one};
use std::collections::BTreeMap;
use std::sync::Arc;

/// An action form's CSRF field.
#[derive(Debug, Deserialize)]
pub struct ActionForm {
    #[serde(default)]
    csrf: String,
}

/// The confirmed filtered replay: the filters again, the CSRF token and the confirmation.
#[derive(Debug, Deserialize)]
pub struct ConfirmForm {
    #[serde(flatten)]
    filter: FilterParams,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    confirm: String,
}

/// The producer a replay may use: the session and its CSRF token checked, the console not
/// read-only.
fn replayer<'a>(
    console: &'a Console,
    headers: &HeaderMap,
    csrf: &str,
) -> Result<&'a ResilientProducer, Refused> {
    console.sessions.authorize(headers, csrf)?;
    console.producer.as_ref().ok_or(Refused::ReadOnly)
}

/// `POST /dead-letters/{id}/replay`.
pub async fn one(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Form(form): Form<ActionForm>,
) -> Result<Response, ConsoleError> {
    let viewer = Viewer::of(&console, &headers);
    let producer = match replayer(&console, &headers, &form.csrf) {
        Ok(producer) => producer,
        Err(why) => return Ok(forbidden(&console, &viewer, why)),
    };
    let back = format!("/dead-letters/{id}");
    let mut conn = console.pool.acquire().await?;
    let Some(row) = dead_letters::one(&mut conn, id).await? else {
        return no_such(&console, &viewer, id);
    };
    if let Some(why) = refusal(&row, console.sources.max_replays) {
        let text = format!("dead letter {id} was not replayed: {why}");
        return message(
            &console,
            &viewer,
            StatusCode::CONFLICT,
            "Refused",
            &text,
            &back,
        );
    }
    let replayed = replay_one(&mut conn, producer, &row, console.sources.max_replays).await?;
    let (status, title, text) = match replayed {
        Replayed::Published { partition, offset } => (
            StatusCode::OK,
            "Replayed",
            format!(
                "dead letter {id} re-published to {}[{partition}]@{offset} (replay {})",
                shown::line(row.topic.as_bytes()),
                row.replay_count + 1
            ),
        ),
        Replayed::RefusedConcurrently => (
            StatusCode::CONFLICT,
            "Refused",
            format!("dead letter {id} was not replayed: replay limit reached concurrently"),
        ),
    };
    message(&console, &viewer, status, title, &text, &back)
}

/// What a filtered replay would do, per topic.
#[derive(Debug, Default, Serialize)]
struct Plan {
    chosen: usize,
    would: BTreeMap<String, usize>,
    refused: BTreeMap<String, usize>,
}

async fn plan(
    console: &Console,
    filter: &crate::queries::dead_letters::Filter,
) -> Result<(Plan, Vec<sluice_postgres::ops::DeadLetterRow>), ConsoleError> {
    let mut conn = console.pool.acquire().await?;
    let rows = dead_letters::full_rows(&mut conn, filter, REPLAY_BATCH).await?;
    let mut plan = Plan {
        chosen: rows.len(),
        ..Plan::default()
    };
    for row in &rows {
        let topic = shown::line(row.topic.as_bytes());
        match refusal(row, console.sources.max_replays) {
            Some(why) => *plan.refused.entry(why).or_default() += 1,
            None => *plan.would.entry(topic).or_default() += 1,
        }
    }
    Ok((plan, rows))
}

/// `GET /dead-letters/replay?<filters>`: the dry run and the confirmation form.
pub async fn preview(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Query(params): Query<FilterParams>,
) -> Result<Response, ConsoleError> {
    let viewer = Viewer::of(&console, &headers);
    if viewer.csrf.is_none() {
        let why = if viewer.writable {
            Refused::NoSession
        } else {
            Refused::ReadOnly
        };
        return Ok(forbidden(&console, &viewer, why));
    }
    let filter = match params.filter(&console) {
        Ok(filter) => filter,
        Err(why) => {
            return message(
                &console,
                &viewer,
                StatusCode::BAD_REQUEST,
                "Bad filter",
                &why,
                "/dead-letters",
            );
        }
    };
    let (plan, _) = plan(&console, &filter).await?;
    render(
        &console,
        "replay.html",
        json!({
            "title": "Replay dead letters",
            "viewer": viewer,
            "params": params,
            "query": params.query(),
            "plan": plan,
            "batch": REPLAY_BATCH,
            "max_replays": console.sources.max_replays,
            "done": null,
        }),
    )
}

/// `POST /dead-letters/replay`: replays the filtered set after the explicit confirmation.
pub async fn execute(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<ConfirmForm>,
) -> Result<Response, ConsoleError> {
    let viewer = Viewer::of(&console, &headers);
    let producer = match replayer(&console, &headers, &form.csrf) {
        Ok(producer) => producer,
        Err(why) => return Ok(forbidden(&console, &viewer, why)),
    };
    let back = format!("/dead-letters?{}", form.filter.query());
    if form.confirm != "yes" {
        return message(
            &console,
            &viewer,
            StatusCode::BAD_REQUEST,
            "Not confirmed",
            "tick the confirmation to replay",
            &back,
        );
    }
    let filter = match form.filter.filter(&console) {
        Ok(filter) => filter,
        Err(why) => {
            return message(
                &console,
                &viewer,
                StatusCode::BAD_REQUEST,
                "Bad filter",
                &why,
                &back,
            );
        }
    };
    let (_, mut rows) = plan(&console, &filter).await?;
    // Re-published in their records' order, so a key's changes land in their order.
    in_record_order(&mut rows);
    let done = replay_rows(&console, producer, &rows).await?;
    tracing::info!(
        chosen = done.chosen,
        replayed = done.would.values().sum::<usize>(),
        "console replayed a filtered set of dead letters"
    );
    render(
        &console,
        "replay.html",
        json!({
            "title": "Replayed dead letters",
            "viewer": viewer,
            "params": form.filter,
            "query": form.filter.query(),
            "plan": done,
            "batch": REPLAY_BATCH,
            "max_replays": console.sources.max_replays,
            "done": true,
        }),
    )
}

/// Replays each of `rows` that the rules allow; what was replayed and what refused, per topic
/// and per reason.
async fn replay_rows(
    console: &Console,
    producer: &ResilientProducer,
    rows: &[sluice_postgres::ops::DeadLetterRow],
) -> Result<Plan, ConsoleError> {
    let mut conn = console.pool.acquire().await?;
    let mut done = Plan {
        chosen: rows.len(),
        ..Plan::default()
    };
    for row in rows {
        let max = console.sources.max_replays;
        let outcome = match refusal(row, max) {
            Some(why) => Err(why),
            None => match replay_one(&mut conn, producer, row, max).await? {
                Replayed::Published { .. } => Ok(()),
                Replayed::RefusedConcurrently => {
                    Err("replay limit reached concurrently".to_owned())
                }
            },
        };
        match outcome {
            Ok(()) => {
                *done
                    .would
                    .entry(shown::line(row.topic.as_bytes()))
                    .or_default() += 1
            }
            Err(why) => *done.refused.entry(why).or_default() += 1,
        }
    }
    Ok(done)
}
