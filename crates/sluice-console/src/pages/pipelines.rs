//! `/pipelines`: per pipeline its group, topics, members (with instance ids), lag per
//! partition, dead letters (in all, by table and kind, and over the last minutes) and
//! heartbeat freshness; and `/api/rates`, the live chart's data (rows/s from the sampler,
//! dead letters per minute from the table).

use super::dead_letters::FilterParams;
use super::{Viewer, render};
use crate::error::ConsoleError;
use crate::kafka_view::{PipelineKafka, heartbeat_age};
use crate::queries::dead_letters::{self, Filter, TableCount, pipeline_filter};
use crate::sampler::Point;
use crate::shown;
use crate::state::Console;
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use serde::Serialize;
use serde_json::json;
use std::sync::Arc;

/// The minutes of dead letters the chart and the "recent" column cover.
pub const RECENT_MINUTES: i64 = 10;

#[derive(Debug, Serialize)]
struct PipelineRow {
    name: String,
    group: String,
    topics: String,
    kafka: PipelineKafka,
    dead_letters: Option<i64>,
    /// The dead letters by table and kind, most first: which of a sink's tables fails.
    dead_letters_by_table: Vec<TableRow>,
    dead_letters_recent: Option<i64>,
    heartbeat: Option<String>,
    fresh: bool,
}

/// A pipeline's dead letters of one table and kind, linked to the list of them.
#[derive(Debug, Serialize)]
struct TableRow {
    /// The table (`None`: records no table was chosen for).
    table: Option<String>,
    kind: String,
    count: i64,
    /// The list's query string for these dead letters.
    query: String,
}

impl TableRow {
    fn of(pipeline: &str, counted: TableCount) -> Self {
        // Records without a table are not a filter of their own: their link lists the
        // pipeline's dead letters of that kind.
        let params = FilterParams {
            pipeline: pipeline.to_owned(),
            kind: counted.error_kind.clone(),
            table: counted.target_table.clone().unwrap_or_default(),
            ..FilterParams::default()
        };
        Self {
            table: counted.target_table.map(|t| shown::line(t.as_bytes())),
            kind: shown::line(counted.error_kind.as_bytes()),
            count: counted.n,
            query: params.query(),
        }
    }
}

/// `GET /pipelines`.
pub async fn page(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    let viewer = Viewer::of(&console, &headers);
    let (read_at, kafka) = console.pipelines_kafka().await?;
    let mut db_error = None;
    let mut rows = Vec::with_capacity(kafka.len());
    let mut conn = match console.pool.acquire().await {
        Ok(conn) => Some(conn),
        Err(error) => {
            db_error = Some(shown::line(error.to_string().as_bytes()));
            None
        }
    };
    for (source, kafka) in console.sources.pipelines.iter().zip(kafka) {
        let filter = pipeline_filter(source);
        let (mut total, mut recent, mut by_table) = (None, None, Vec::new());
        if let Some(conn) = conn.as_mut() {
            let counted = dead_letters::by_table(conn, &filter).await?;
            total = Some(counted.iter().map(|c| c.n).sum());
            by_table = counted
                .into_iter()
                .map(|c| TableRow::of(&source.name, c))
                .collect();
            let since = Filter {
                since: Some(chrono::Utc::now() - chrono::Duration::minutes(RECENT_MINUTES)),
                ..filter
            };
            recent = Some(dead_letters::count(conn, &since).await?);
        }
        let age = heartbeat_age(console.sources.heartbeat_dir.as_deref(), &source.name);
        rows.push(PipelineRow {
            name: shown::line(source.name.as_bytes()),
            group: shown::line(source.group.as_bytes()),
            topics: shown::line(source.topics.to_string().as_bytes()),
            kafka,
            dead_letters: total,
            dead_letters_by_table: by_table,
            dead_letters_recent: recent,
            heartbeat: age.map(|s| format!("{s:.1} s ago")),
            fresh: age.is_some_and(|s| s < 10.0),
        });
    }
    render(
        &console,
        "pipelines.html",
        json!({
            "title": "Pipelines",
            "viewer": viewer,
            "pipelines": rows,
            "db_error": db_error,
            "recent_minutes": RECENT_MINUTES,
            "kafka_read_at": read_at.format("%H:%M:%S UTC").to_string(),
            "heartbeat_dir": console.sources.heartbeat_dir.as_ref().map(|d| d.display().to_string()),
        }),
    )
}

/// One pipeline's chart data.
#[derive(Debug, Serialize)]
pub struct Series {
    /// The pipeline.
    pub name: String,
    /// Rows per second between the sampler's samples.
    pub rows_per_s: Vec<Point>,
    /// Dead letters per minute.
    pub dead_per_min: Vec<Point>,
}

/// `GET /api/rates`: per pipeline, rows/s and dead letters per minute.
pub async fn rates(State(console): State<Arc<Console>>) -> Result<Json<Vec<Series>>, ConsoleError> {
    let mut conn = console.pool.acquire().await?;
    let mut all = Vec::new();
    for source in &console.sources.pipelines {
        let minutes =
            dead_letters::per_minute(&mut conn, &pipeline_filter(source), RECENT_MINUTES).await?;
        all.push(Series {
            name: source.name.clone(),
            rows_per_s: console.samples().rates(&source.name),
            dead_per_min: minutes
                .into_iter()
                .map(|(t, n)| Point { t, v: n as f64 })
                .collect(),
        });
    }
    Ok(Json(all))
}
