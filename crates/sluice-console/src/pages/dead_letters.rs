//! `/dead-letters`: the list (filters, keyset pages) and one dead letter in detail with its
//! headers, key and payload as text or hex.

use super::{Viewer, message, render};
use crate::error::ConsoleError;
use crate::queries::dead_letters::{self, Cursor, Filter, pipeline_filter};
use crate::shown;
use crate::state::Console;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chrono::{DateTime, NaiveDateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sluice_storage::dead_letter_replay::{is_truncated, refusal};
use std::sync::Arc;

/// The list's filters as the form sends them (every field may be empty).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct FilterParams {
    /// A pipeline's name.
    #[serde(default)]
    pub pipeline: String,
    /// An error kind.
    #[serde(default)]
    pub kind: String,
    /// The table the records were going to.
    #[serde(default)]
    pub table: String,
    /// Recorded at or after (RFC 3339, or `YYYY-MM-DDTHH:MM[:SS]` in UTC).
    #[serde(default)]
    pub since: String,
    /// Recorded before.
    #[serde(default)]
    pub until: String,
    /// Text in the reason.
    #[serde(default)]
    pub q: String,
}

/// The list's query: the filters and the page's cursor.
#[derive(Debug, Deserialize)]
pub struct ListParams {
    #[serde(flatten)]
    filter: FilterParams,
    #[serde(default)]
    before: String,
}

impl FilterParams {
    /// The query's filter, or why a field is not understood.
    pub fn filter(&self, console: &Console) -> Result<Filter, String> {
        let mut filter = match self.pipeline.trim() {
            "" => Filter::default(),
            name => {
                let source = console
                    .sources
                    .pipelines
                    .iter()
                    .find(|p| p.name == name)
                    .ok_or_else(|| format!("no pipeline named {name}"))?;
                pipeline_filter(source)
            }
        };
        filter.kind = Some(self.kind.trim().to_owned()).filter(|k| !k.is_empty());
        filter.table = Some(self.table.trim().to_owned()).filter(|t| !t.is_empty());
        filter.since = parse_time("since", &self.since)?;
        filter.until = parse_time("until", &self.until)?;
        filter.search = Some(self.q.trim().to_owned()).filter(|q| !q.is_empty());
        Ok(filter)
    }

    /// As a query string (for links that keep the filters).
    pub fn query(&self) -> String {
        serde_urlencoded::to_string(self).unwrap_or_default()
    }
}

/// A time field: empty, RFC 3339, or a `datetime-local` value taken as UTC.
fn parse_time(name: &str, text: &str) -> Result<Option<DateTime<Utc>>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(Some(t.with_timezone(&Utc)));
    }
    ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(text, f).ok())
        .map(|t| Some(t.and_utc()))
        .ok_or_else(|| format!("{name}: expected a time such as 2026-12-01T10:00 (UTC)"))
}

#[derive(Debug, Serialize)]
struct Row {
    id: i64,
    record: String,
    group: String,
    table: Option<String>,
    kind: String,
    reason: String,
    recorded_at: String,
    replays: i32,
    replayed: bool,
}

/// `GET /dead-letters`.
pub async fn list(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Query(params): Query<ListParams>,
) -> Result<Response, ConsoleError> {
    let viewer = Viewer::of(&console, &headers);
    let filter = match params.filter.filter(&console) {
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
    let cursor = Cursor::decode(&params.before);
    let mut conn = console.pool.acquire().await?;
    let page = dead_letters::page(&mut conn, &filter, cursor).await?;
    let (listed, next) = (page.rows, page.next);
    let kinds = dead_letters::kinds(&mut conn).await?;
    let tables = dead_letters::tables(&mut conn).await?;
    let rows: Vec<Row> = listed
        .iter()
        .map(|r| Row {
            id: r.id,
            record: shown::line(
                format!("{}[{}]@{}", r.topic, r.partition, r.kafka_offset).as_bytes(),
            ),
            group: shown::line(r.consumer_group.as_bytes()),
            table: r.target_table.as_deref().map(|t| shown::line(t.as_bytes())),
            kind: shown::line(r.error_kind.as_bytes()),
            reason: shown::line(r.reason.as_bytes()),
            recorded_at: r.recorded_at.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
            replays: r.replay_count,
            replayed: r.replayed_at.is_some(),
        })
        .collect();
    let query = params.filter.query();
    let next = next.map(|c| format!("/dead-letters?{query}&before={}", c.encode()));
    let pipelines: Vec<&str> = console
        .sources
        .pipelines
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    render(
        &console,
        "dead_letters.html",
        json!({
            "title": "Dead letters",
            "viewer": viewer,
            "rows": rows,
            "params": params.filter,
            "query": query,
            "first_page": cursor.is_none(),
            "next": next,
            "window_exhausted": page.window_exhausted,
            "search_window": dead_letters::SEARCH_WINDOW,
            "pipelines": pipelines,
            "kinds": kinds.iter().map(|k| shown::line(k.as_bytes())).collect::<Vec<_>>(),
            "tables": tables.iter().map(|t| shown::line(t.as_bytes())).collect::<Vec<_>>(),
        }),
    )
}

/// The detail view's query: `view=hex` shows the bytes as hex.
#[derive(Debug, Deserialize)]
pub struct DetailParams {
    #[serde(default)]
    view: String,
}

/// The page for a dead-letter id that is not in the table (404).
pub fn no_such(console: &Console, viewer: &Viewer, id: i64) -> Result<Response, ConsoleError> {
    message(
        console,
        viewer,
        StatusCode::NOT_FOUND,
        "Not found",
        &format!("no dead letter with id {id}"),
        "/dead-letters",
    )
}

/// `GET /dead-letters/{id}`.
pub async fn detail(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    Query(params): Query<DetailParams>,
) -> Result<Response, ConsoleError> {
    let viewer = Viewer::of(&console, &headers);
    let mut conn = console.pool.acquire().await?;
    let Some(row) = dead_letters::one(&mut conn, id).await? else {
        return no_such(&console, &viewer, id);
    };
    let hex = params.view == "hex";
    let bytes = |b: &Option<Vec<u8>>| {
        b.as_deref()
            .map(|b| if hex { shown::hex(b) } else { shown::text(b) })
    };
    // Names and values are the producer's bytes: escaped like the payload (values that are
    // not UTF-8, or all of them in the hex view, as hex).
    let record_headers: Vec<serde_json::Value> = row
        .headers()
        .map(|(name, value)| {
            let (value, value_hex) = value.map_or((None, false), |v| {
                let (text, is_hex) = shown::header_value(v, hex);
                (Some(text), is_hex)
            });
            json!({ "name": shown::line(name.as_bytes()), "value": value, "hex": value_hex })
        })
        .collect();
    let refused = refusal(&row, console.sources.max_replays);
    render(
        &console,
        "dead_letter.html",
        json!({
            "title": format!("Dead letter {id}"),
            "viewer": viewer,
            "id": row.id,
            "topic": shown::line(row.topic.as_bytes()),
            "partition": row.partition,
            "offset": row.kafka_offset,
            "group": shown::line(row.consumer_group.as_bytes()),
            "table": row.target_table.as_deref().map(|t| shown::line(t.as_bytes())),
            "kind": shown::line(row.error_kind.as_bytes()),
            "reason": shown::text(row.reason.as_bytes()),
            "recorded_at": row.recorded_at.to_rfc3339(),
            "kafka_timestamp": row.kafka_timestamp.map(|t| t.to_rfc3339()),
            "replay_count": row.replay_count,
            "replayed_at": row.replayed_at.map(|t| t.to_rfc3339()),
            "payload_size": row.payload_size,
            "truncated": is_truncated(&row),
            "headers": record_headers,
            "headers_kept": row.headers_kept(),
            "key": bytes(&row.key),
            "payload": bytes(&row.payload),
            "hex": hex,
            "refusal": refused,
            "max_replays": console.sources.max_replays,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_or_a_form_value_in_utc() {
        assert_eq!(parse_time("since", " "), Ok(None));
        let t = parse_time("since", "2026-12-01T10:00").unwrap().unwrap();
        assert_eq!(t.to_rfc3339(), "2026-12-01T10:00:00+00:00");
        let t = parse_time("since", "2026-12-01T11:00:00+01:00")
            .unwrap()
            .unwrap();
        assert_eq!(t.to_rfc3339(), "2026-12-01T10:00:00+00:00");
        assert!(
            parse_time("until", "yesterday")
                .unwrap_err()
                .starts_with("until")
        );
    }
}
