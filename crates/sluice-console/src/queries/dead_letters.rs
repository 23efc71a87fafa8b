//! The dead-letter browser's queries, built in one place ([`Filter::push_where`]): filters
//! by pipeline (its topics, or its group for a pattern sink), table, kind, time range and a
//! text search on the reason; pages walk `(recorded_at, id)` downwards from a cursor (keyset
//! pagination on the indexes of migrations 0014 and 0018), never with OFFSET.

use crate::sources::PipelineSource;
use chrono::{DateTime, Utc};
use serde::Serialize;
use sluice_core::topics::Topics;
use sluice_postgres::ops::DeadLetterRow;
use sqlx::{PgConnection, Postgres, QueryBuilder};

/// Rows per page.
pub const PAGE: i64 = 50;
/// The most dead letters one page of a text search reads: a search whose text is rare
/// must not read a million reasons for one page. The page says when it stopped there, and
/// its "older" link goes on from the last row it read.
pub const SEARCH_WINDOW: i64 = 100_000;
/// The most dead letters one confirmed replay takes.
pub const REPLAY_BATCH: i64 = 500;

/// Which dead letters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Only these topics (a pipeline with named topics).
    pub topics: Vec<String>,
    /// Only this group (a pattern sink).
    pub group: Option<String>,
    /// Only this `error_kind`.
    pub kind: Option<String>,
    /// Only the dead letters of records going to this table (`target_table`).
    pub table: Option<String>,
    /// Recorded at or after.
    pub since: Option<DateTime<Utc>>,
    /// Recorded before.
    pub until: Option<DateTime<Utc>>,
    /// The reason contains this text (case-insensitive).
    pub search: Option<String>,
}

/// Where a page starts: strictly below this (recorded_at, id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// Recorded at.
    pub recorded_at: DateTime<Utc>,
    /// Row id.
    pub id: i64,
}

impl Cursor {
    /// As a URL parameter: `<microseconds>.<id>`.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.recorded_at.timestamp_micros(), self.id)
    }

    /// From [`Cursor::encode`]'s form; `None` if it is not one.
    pub fn decode(text: &str) -> Option<Cursor> {
        let (micros, id) = text.split_once('.')?;
        Some(Cursor {
            recorded_at: DateTime::from_timestamp_micros(micros.parse().ok()?)?,
            id: id.parse().ok()?,
        })
    }
}

/// One row of the list (no key or payload: those are in the detail view).
#[derive(Debug, Clone, sqlx::FromRow, Serialize)]
pub struct Listed {
    /// Row id.
    pub id: i64,
    /// Source topic.
    pub topic: String,
    /// Source partition.
    pub partition: i32,
    /// Source offset.
    pub kafka_offset: i64,
    /// The group that dead-lettered it.
    pub consumer_group: String,
    /// The table its record was going to (`None`: none was chosen).
    pub target_table: Option<String>,
    /// Kind.
    pub error_kind: String,
    /// The reason's first 200 characters.
    pub reason: String,
    /// When it was recorded.
    pub recorded_at: DateTime<Utc>,
    /// Replays so far.
    pub replay_count: i32,
    /// When it was replayed.
    pub replayed_at: Option<DateTime<Utc>>,
}

impl Filter {
    /// Appends `WHERE …` for this filter (and the cursor, if any).
    fn push_where(&self, q: &mut QueryBuilder<'_, Postgres>, cursor: Option<Cursor>) {
        q.push(" WHERE true");
        if !self.topics.is_empty() {
            q.push(" AND topic = ANY(")
                .push_bind(self.topics.clone())
                .push(")");
        }
        if let Some(group) = &self.group {
            q.push(" AND consumer_group = ").push_bind(group.clone());
        }
        if let Some(kind) = &self.kind {
            q.push(" AND error_kind = ").push_bind(kind.clone());
        }
        if let Some(table) = &self.table {
            q.push(" AND target_table = ").push_bind(table.clone());
        }
        if let Some(since) = self.since {
            q.push(" AND recorded_at >= ").push_bind(since);
        }
        if let Some(until) = self.until {
            q.push(" AND recorded_at < ").push_bind(until);
        }
        if let Some(search) = &self.search {
            q.push(" AND reason ILIKE ")
                .push_bind(format!("%{}%", like_escaped(search)));
        }
        if let Some(c) = cursor {
            q.push(" AND (recorded_at, id) < (")
                .push_bind(c.recorded_at)
                .push(", ")
                .push_bind(c.id)
                .push(")");
        }
    }
}

/// `text` with LIKE's wildcards and its escape character taken literally.
fn like_escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One page of the list.
#[derive(Debug)]
pub struct Page {
    /// The rows, newest first.
    pub rows: Vec<Listed>,
    /// Where the next page starts, if there is one.
    pub next: Option<Cursor>,
    /// A text search stopped after [`SEARCH_WINDOW`] rows with fewer matches than a page.
    pub window_exhausted: bool,
}

/// One page, newest first. A text search reads at most [`SEARCH_WINDOW`] rows.
pub async fn page(
    conn: &mut PgConnection,
    filter: &Filter,
    cursor: Option<Cursor>,
) -> Result<Page, sqlx::Error> {
    let unsearched = Filter {
        search: None,
        ..filter.clone()
    };
    let mut q = QueryBuilder::new(
        "SELECT id, topic, partition, kafka_offset, consumer_group, target_table, error_kind,
                left(reason, 200) AS reason, recorded_at, replay_count, replayed_at
         FROM ",
    );
    match &filter.search {
        None => {
            q.push("dead_letter_events");
            filter.push_where(&mut q, cursor);
        }
        Some(search) => {
            q.push("(SELECT * FROM dead_letter_events");
            unsearched.push_where(&mut q, cursor);
            q.push(" ORDER BY recorded_at DESC, id DESC LIMIT ")
                .push_bind(SEARCH_WINDOW)
                .push(") AS window_rows WHERE reason ILIKE ")
                .push_bind(format!("%{}%", like_escaped(search)));
        }
    }
    q.push(" ORDER BY recorded_at DESC, id DESC LIMIT ")
        .push_bind(PAGE + 1);
    let mut rows: Vec<Listed> = q.build_query_as().fetch_all(&mut *conn).await?;
    if rows.len() as i64 > PAGE {
        rows.truncate(PAGE as usize);
        let next = rows.last().map(|r| Cursor {
            recorded_at: r.recorded_at,
            id: r.id,
        });
        return Ok(Page {
            rows,
            next,
            window_exhausted: false,
        });
    }
    // A short page of a search: go on below the window's last row, if the window was full.
    let next = match filter.search {
        None => None,
        Some(_) => {
            let mut q = QueryBuilder::new("SELECT recorded_at, id FROM dead_letter_events");
            unsearched.push_where(&mut q, cursor);
            q.push(" ORDER BY recorded_at DESC, id DESC OFFSET ")
                .push_bind(SEARCH_WINDOW - 1)
                .push(" LIMIT 1");
            let last: Option<(DateTime<Utc>, i64)> =
                q.build_query_as().fetch_optional(&mut *conn).await?;
            last.map(|(recorded_at, id)| Cursor { recorded_at, id })
        }
    };
    Ok(Page {
        rows,
        window_exhausted: next.is_some(),
        next,
    })
}

/// The newest `limit` matching rows with their keys, payloads and headers (a replay's
/// candidates).
pub async fn full_rows(
    conn: &mut PgConnection,
    filter: &Filter,
    limit: i64,
) -> Result<Vec<DeadLetterRow>, sqlx::Error> {
    let mut q = QueryBuilder::new(format!(
        "SELECT {} FROM dead_letter_events",
        sluice_postgres::ops::DEAD_LETTER_ROW_COLUMNS
    ));
    filter.push_where(&mut q, None);
    q.push(" ORDER BY recorded_at DESC, id DESC LIMIT ")
        .push_bind(limit);
    q.build_query_as().fetch_all(conn).await
}

/// One dead letter with its key, payload and headers.
pub async fn one(conn: &mut PgConnection, id: i64) -> Result<Option<DeadLetterRow>, sqlx::Error> {
    let filter = sluice_postgres::ops::DeadLetterFilter {
        ids: vec![id],
        limit: 1,
        ..Default::default()
    };
    Ok(sluice_postgres::ops::list_dead_letters(conn, &filter)
        .await?
        .into_iter()
        .next())
}

/// How many dead letters match (the pipelines page's recent counts).
pub async fn count(conn: &mut PgConnection, filter: &Filter) -> Result<i64, sqlx::Error> {
    let mut q = QueryBuilder::new("SELECT count(*) FROM dead_letter_events");
    filter.push_where(&mut q, None);
    q.build_query_scalar().fetch_one(conn).await
}

/// The dead letters of one table and kind.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TableCount {
    /// The table the records were going to (`None`: none was chosen).
    pub target_table: Option<String>,
    /// Kind.
    pub error_kind: String,
    /// How many.
    pub n: i64,
}

/// How many dead letters a pipeline has, by table and kind, most first (the pipelines page:
/// which of a sink's tables fails); only the filter's topics and group narrow it (a
/// pipeline's filter, [`pipeline_filter`]). Read from the tallies migration 0021's triggers
/// keep beside the dead letters, so its cost does not grow with them. A database without
/// them (older than the console, or a role that may not read them) is counted from the dead
/// letters themselves.
pub async fn by_table(
    conn: &mut PgConnection,
    filter: &Filter,
) -> Result<Vec<TableCount>, sqlx::Error> {
    // The tallies have the topic and the group; nothing else of the filter applies to them.
    let pipeline = Filter {
        topics: filter.topics.clone(),
        group: filter.group.clone(),
        ..Filter::default()
    };
    // A tally's table is '' for dead letters without one (NULL in dead_letter_events).
    let mut q = QueryBuilder::new(
        "SELECT NULLIF(target_table, '') AS target_table, error_kind, sum(n)::bigint AS n
         FROM dead_letter_counts",
    );
    pipeline.push_where(&mut q, None);
    q.push(
        " GROUP BY target_table, error_kind HAVING sum(n) > 0
          ORDER BY n DESC, target_table, error_kind",
    );
    match q.build_query_as().fetch_all(&mut *conn).await {
        Err(error) if without_counts(&error) => counted_by_table(conn, filter).await,
        counted => counted,
    }
}

/// The database has no kept counts, or this role may not read them.
fn without_counts(error: &sqlx::Error) -> bool {
    let code = error.as_database_error().and_then(|e| e.code());
    matches!(code.as_deref(), Some("42P01" | "42501"))
}

/// [`by_table`] counted from the dead letters (migration 0018's indexes).
async fn counted_by_table(
    conn: &mut PgConnection,
    filter: &Filter,
) -> Result<Vec<TableCount>, sqlx::Error> {
    let mut q =
        QueryBuilder::new("SELECT target_table, error_kind, count(*) AS n FROM dead_letter_events");
    filter.push_where(&mut q, None);
    q.push(" GROUP BY target_table, error_kind ORDER BY n DESC, target_table, error_kind");
    q.build_query_as().fetch_all(conn).await
}

/// Dead letters per minute over the last `minutes` minutes, oldest first (minutes without
/// any are zero): (minute start as Unix seconds, count).
pub async fn per_minute(
    conn: &mut PgConnection,
    filter: &Filter,
    minutes: i64,
) -> Result<Vec<(i64, i64)>, sqlx::Error> {
    let mut q = QueryBuilder::new(
        "SELECT extract(epoch FROM date_trunc('minute', recorded_at))::bigint AS minute,
                count(*) AS n
         FROM dead_letter_events",
    );
    let recent = Filter {
        since: Some(Utc::now() - chrono::Duration::minutes(minutes)),
        ..filter.clone()
    };
    recent.push_where(&mut q, None);
    q.push(" GROUP BY 1");
    let counted: Vec<(i64, i64)> = q.build_query_as().fetch_all(conn).await?;
    let now = Utc::now().timestamp() / 60 * 60;
    Ok((0..minutes)
        .rev()
        .map(|ago| {
            let minute = now - ago * 60;
            let n = counted
                .iter()
                .find(|(m, _)| *m == minute)
                .map_or(0, |(_, n)| *n);
            (minute, n)
        })
        .collect())
}

/// The tables dead letters name (for the filter's choices).
pub async fn tables(conn: &mut PgConnection) -> Result<Vec<String>, sqlx::Error> {
    // A loose index scan on migration 0018's index, as for the kinds.
    sqlx::query_scalar(
        "WITH RECURSIVE t(name) AS (
             (SELECT target_table FROM dead_letter_events WHERE target_table IS NOT NULL
              ORDER BY target_table LIMIT 1)
             UNION ALL
             SELECT (SELECT target_table FROM dead_letter_events
                     WHERE target_table > t.name ORDER BY target_table LIMIT 1)
             FROM t WHERE t.name IS NOT NULL)
         SELECT name FROM t WHERE name IS NOT NULL",
    )
    .fetch_all(conn)
    .await
}

/// The error kinds present (for the filter's choices).
pub async fn kinds(conn: &mut PgConnection) -> Result<Vec<String>, sqlx::Error> {
    // A loose index scan: one index probe per distinct kind, not a scan of every row.
    sqlx::query_scalar(
        "WITH RECURSIVE k(kind) AS (
             (SELECT error_kind FROM dead_letter_events ORDER BY error_kind LIMIT 1)
             UNION ALL
             SELECT (SELECT error_kind FROM dead_letter_events
                     WHERE error_kind > k.kind ORDER BY error_kind LIMIT 1)
             FROM k WHERE k.kind IS NOT NULL)
         SELECT kind FROM k WHERE kind IS NOT NULL",
    )
    .fetch_all(conn)
    .await
}

/// The dead-letter filter of one pipeline: its named topics, or its group for a pattern.
pub fn pipeline_filter(pipeline: &PipelineSource) -> Filter {
    match &pipeline.topics {
        Topics::Named(topics) => Filter {
            topics: topics.clone(),
            ..Filter::default()
        },
        Topics::Pattern(_) => Filter {
            group: Some(pipeline.group.clone()),
            ..Filter::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips() {
        let c = Cursor {
            recorded_at: DateTime::from_timestamp_micros(1_764_000_000_123_456).unwrap(),
            id: 42,
        };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        assert_eq!(Cursor::decode("x.1"), None);
        assert_eq!(Cursor::decode("12"), None);
    }

    #[test]
    fn wildcards_in_a_search_are_literal() {
        assert_eq!(like_escaped("50%_a\\b"), "50\\%\\_a\\\\b");
    }

    #[test]
    fn every_filter_becomes_a_bound_parameter() {
        let filter = Filter {
            topics: vec!["t".into()],
            group: Some("g".into()),
            kind: Some("decode_error".into()),
            table: Some("orders".into()),
            since: Some(Utc::now()),
            until: Some(Utc::now()),
            search: Some("'; DROP TABLE x; --".into()),
        };
        let mut q = QueryBuilder::new("SELECT 1 FROM dead_letter_events");
        filter.push_where(
            &mut q,
            Some(Cursor {
                recorded_at: Utc::now(),
                id: 1,
            }),
        );
        let sql = q.sql();
        assert!(!sql.contains("DROP"), "{sql}");
        assert!(sql.contains("$9"), "{sql}");
    }
}
