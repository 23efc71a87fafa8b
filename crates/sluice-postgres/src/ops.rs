//! Queries behind the operations commands (docs/ARCHITECTURE.md#operations): row counts, dead-letter listing,
//! inspection and replay bookkeeping.

use chrono::{DateTime, Utc};
use sluice_core::PipelineKind;
use sqlx::PgConnection;

/// Row counts of sluice's tables: each registered topic's, then the dead letters.
pub async fn table_counts(conn: &mut PgConnection) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let tables = PipelineKind::ALL.map(|kind| kind.table().to_owned());
    row_counts(conn, &tables).await
}

/// Rows in each of `tables` (`[schema.]table`, as a mapping file names them), then in the
/// dead-letter table.
pub async fn row_counts(
    conn: &mut PgConnection,
    tables: &[String],
) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let mut counts = Vec::new();
    for table in tables
        .iter()
        .map(String::as_str)
        .chain(["dead_letter_events"])
    {
        let sql = format!(
            "SELECT count(*) FROM {}",
            crate::migrate::quote_table(table)
        );
        let n: i64 = sqlx::query_scalar(&sql).fetch_one(&mut *conn).await?;
        counts.push((table.to_owned(), n));
    }
    Ok(counts)
}

/// Dead letters per (topic, error_kind), with one example reason each.
pub async fn dead_letters_by_kind(
    conn: &mut PgConnection,
    groups: &[String],
) -> Result<Vec<(String, String, i64, String)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT topic, error_kind, count(*), min(reason)
         FROM dead_letter_events
         WHERE cardinality($1::text[]) = 0 OR consumer_group = ANY($1)
         GROUP BY topic, error_kind ORDER BY topic, error_kind",
    )
    .bind(groups)
    .fetch_all(conn)
    .await
}

/// Which dead letters to list.
#[derive(Debug, Clone, Default)]
pub struct DeadLetterFilter {
    /// Only these topics (empty: all).
    pub topics: Vec<String>,
    /// Only these consumer groups (empty: all); a pattern sink's dead letters are found by
    /// its group, since its topics come and go.
    pub groups: Vec<String>,
    /// Only this `error_kind`.
    pub kind: Option<String>,
    /// Only the dead letters of records going to this table (`target_table`).
    pub table: Option<String>,
    /// Recorded at or after.
    pub since: Option<DateTime<Utc>>,
    /// Recorded before.
    pub until: Option<DateTime<Utc>>,
    /// Only these ids (empty: all).
    pub ids: Vec<i64>,
    /// At most this many rows.
    pub limit: i64,
    /// The oldest rows first (a replay takes them so, so that `limit` never leaves an older
    /// change of a key behind a newer one); otherwise the newest first.
    pub oldest_first: bool,
    /// Only rows a replay under this `--max-replays` can take: never replayed, with a
    /// payload kept whole, replayed fewer times than this. A replay takes them so: rows it
    /// must refuse would otherwise fill its `limit`, oldest first, and keep it from the rest
    /// for good.
    pub replayable_under: Option<i32>,
    /// Only rows never replayed that such a replay must refuse (a tombstone, a truncated
    /// payload, a lineage at the limit): what it counts as left out. Rows replayed already are
    /// done, in neither set.
    pub unreplayable_under: Option<i32>,
}

/// The WHERE clause of [`DeadLetterFilter`], its parameters `$1`–`$5` and `$7`–`$10`.
const DEAD_LETTER_WHERE: &str = "
    WHERE (cardinality($1::text[]) = 0 OR topic = ANY($1))
      AND ($2::text IS NULL OR error_kind = $2)
      AND ($3::timestamptz IS NULL OR recorded_at >= $3)
      AND ($4::timestamptz IS NULL OR recorded_at < $4)
      AND (cardinality($5::bigint[]) = 0 OR id = ANY($5))
      AND (cardinality($7::text[]) = 0 OR consumer_group = ANY($7))
      AND ($8::text IS NULL OR target_table = $8)
      AND ($9::int IS NULL OR (replayed_at IS NULL AND payload IS NOT NULL
           AND octet_length(payload) >= payload_size AND replay_count < $9))
      AND ($10::int IS NULL OR (replayed_at IS NULL AND NOT (payload IS NOT NULL
           AND octet_length(payload) >= payload_size AND replay_count < $10)))";

/// `$query` with a [`DeadLetterFilter`]'s parameters `$1`–`$10` bound, in their order.
macro_rules! bind_filter {
    ($query:expr, $filter:expr) => {
        $query
            .bind(&$filter.topics)
            .bind(&$filter.kind)
            .bind($filter.since)
            .bind($filter.until)
            .bind(&$filter.ids)
            .bind($filter.limit)
            .bind(&$filter.groups)
            .bind(&$filter.table)
            .bind($filter.replayable_under)
            .bind($filter.unreplayable_under)
    };
}

/// How many dead letters `filter` matches (its `limit` and order aside).
pub async fn count_dead_letters(
    conn: &mut PgConnection,
    filter: &DeadLetterFilter,
) -> Result<i64, sqlx::Error> {
    // `$6` (the limit) is bound and unused, so both queries bind alike.
    let sql = format!(
        "SELECT count(*) FROM dead_letter_events {DEAD_LETTER_WHERE} AND $6::bigint IS NOT NULL"
    );
    bind_filter!(sqlx::query_scalar(&sql), filter)
        .fetch_one(conn)
        .await
}

/// One dead-letter row.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DeadLetterRow {
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
    /// Record key.
    pub key: Option<Vec<u8>>,
    /// Stored payload (at most 64 KiB).
    pub payload: Option<Vec<u8>>,
    /// Original payload size.
    pub payload_size: i32,
    /// Kafka timestamp.
    pub kafka_timestamp: Option<DateTime<Utc>>,
    /// `decode_error`, `unknown_application`, `constraint_violation`.
    pub error_kind: String,
    /// Why.
    pub reason: String,
    /// When it was recorded.
    pub recorded_at: DateTime<Utc>,
    /// How many times it was replayed.
    pub replay_count: i32,
    /// When it was last replayed.
    pub replayed_at: Option<DateTime<Utc>>,
    /// The record's header names, in order (names may repeat); `None` for a dead letter
    /// recorded before migration 0015, whose headers were not kept. See
    /// [`DeadLetterRow::headers`].
    pub header_names: Option<Vec<String>>,
    /// The record's header values, element for element with `header_names` (`None`
    /// element: a header without a value).
    pub header_values: Option<Vec<Option<Vec<u8>>>>,
    /// The table the record was going to; `None` when no table was chosen (a decode error
    /// before routing, an unrouted record) or recorded before migration 0018.
    pub target_table: Option<String>,
}

impl DeadLetterRow {
    /// Whether the record's headers were kept (not for a dead letter recorded before
    /// migration 0015).
    pub fn headers_kept(&self) -> bool {
        self.header_names.is_some()
    }

    /// The record's headers in order: name and value (`None`: a header without a value);
    /// none when they were not kept. The table's CHECK keeps the two arrays the same length.
    pub fn headers(&self) -> impl Iterator<Item = (&str, Option<&[u8]>)> {
        self.header_names
            .iter()
            .flatten()
            .zip(self.header_values.iter().flatten())
            .map(|(name, value)| (name.as_str(), value.as_deref()))
    }
}

/// The columns of a [`DeadLetterRow`], for every query that reads one.
pub const DEAD_LETTER_ROW_COLUMNS: &str = "id, topic, partition, kafka_offset, consumer_group, \
    key, payload, payload_size, kafka_timestamp, error_kind, reason, recorded_at, replay_count, \
    replayed_at, header_names, header_values, target_table";

/// Lists dead letters, newest first (oldest first with `oldest_first`).
pub async fn list_dead_letters(
    conn: &mut PgConnection,
    filter: &DeadLetterFilter,
) -> Result<Vec<DeadLetterRow>, sqlx::Error> {
    let order = if filter.oldest_first {
        "recorded_at, id"
    } else {
        "recorded_at DESC, id DESC"
    };
    let sql = format!(
        "SELECT {DEAD_LETTER_ROW_COLUMNS}
         FROM dead_letter_events {DEAD_LETTER_WHERE}
         ORDER BY {order}
         LIMIT $6"
    );
    bind_filter!(sqlx::query_as(&sql), filter)
        .fetch_all(conn)
        .await
}

/// Marks a dead letter replayed, if this row was never replayed and its message's lineage
/// has been re-published fewer than `max` times (a compare-and-set, so two operators cannot
/// both replay it). Each row is replayed at most once: a re-published record that fails
/// again becomes a new dead letter carrying the count (header `sluice-replay-count`), so a
/// message is re-published at most `max` times in all, never 2^max. Returns whether the
/// row was marked.
pub async fn mark_replayed(
    conn: &mut PgConnection,
    id: i64,
    max_replays: i32,
) -> Result<bool, sqlx::Error> {
    let result = sqlx::query(
        "UPDATE dead_letter_events SET replay_count = replay_count + 1, replayed_at = now()
         WHERE id = $1 AND replayed_at IS NULL AND replay_count < $2",
    )
    .bind(id)
    .bind(max_replays)
    .execute(conn)
    .await?;
    Ok(result.rows_affected() == 1)
}
