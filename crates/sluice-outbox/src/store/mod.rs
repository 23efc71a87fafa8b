//! The outbox library's store: every statement the library runs, each `.sql` file in `sql/`
//! beside it (the partition assignment's short statements included). The other modules
//! decide (which edges are legal, what an answer means) and call these; nothing here holds a
//! connection, every function takes the caller's (a transaction dereferences to one).
//!
//! Status values are bound as text, and every status change is a compare-and-set whose
//! allowed sources the caller checked against `crate::status` first
//! ([`crate::checked_sources`]).

use crate::event::NewEvent;
use sqlx::PgConnection;
use sqlx::types::Json;
use std::collections::BTreeMap;
use uuid::Uuid;

/// Inserts `event` with the initial status `status`.
pub(crate) async fn insert_event(
    conn: &mut PgConnection,
    event: &NewEvent,
    status: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("sql/insert_event.sql"))
        .bind(event.id)
        .bind(&event.aggregate_type)
        .bind(&event.aggregate_id)
        .bind(&event.event_type)
        .bind(&event.topic)
        .bind(&event.partition_key)
        .bind(event.partition)
        .bind(&event.payload)
        .bind(Json(&event.headers))
        .bind(status)
        .bind(event.available_at)
        .execute(conn)
        .await?;
    Ok(())
}

/// Moves the rows `ids` that are in one of `sources` to `to`; returns how many moved.
pub(crate) async fn release(
    conn: &mut PgConnection,
    to: &str,
    ids: &[Uuid],
    sources: &[&str],
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query(include_str!("sql/release.sql"))
        .bind(to)
        .bind(ids)
        .bind(sources)
        .execute(conn)
        .await?
        .rows_affected())
}

/// Moves row `id` to `to` if its status is one of `sources`. `None`: no such row; else its
/// status before the statement and whether it moved.
pub(crate) async fn transition(
    conn: &mut PgConnection,
    id: Uuid,
    to: &str,
    sources: &[&str],
) -> Result<Option<(String, bool)>, sqlx::Error> {
    sqlx::query_as(include_str!("sql/transition.sql"))
        .bind(id)
        .bind(to)
        .bind(sources)
        .fetch_optional(conn)
        .await
}

/// Marks row `id` published at (`partition`, `offset`) if its status is one of `sources`.
/// `None`: no such row; else its status before the statement and whether it moved.
pub(crate) async fn mark_published(
    conn: &mut PgConnection,
    id: Uuid,
    to: &str,
    partition: i32,
    offset: i64,
    sources: &[&str],
) -> Result<Option<(String, bool)>, sqlx::Error> {
    sqlx::query_as(include_str!("sql/mark_published.sql"))
        .bind(id)
        .bind(to)
        .bind(partition)
        .bind(offset)
        .bind(sources)
        .fetch_optional(conn)
        .await
}

/// [`mark_published`] for many rows in one statement; returns the ids that moved.
pub(crate) async fn mark_published_batch(
    conn: &mut PgConnection,
    ids: &[Uuid],
    partitions: &[i32],
    offsets: &[i64],
    to: &str,
    sources: &[&str],
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar(include_str!("sql/mark_published_batch.sql"))
        .bind(ids)
        .bind(partitions)
        .bind(offsets)
        .bind(to)
        .bind(sources)
        .fetch_all(conn)
        .await
}

/// Row `id`'s status, the row locked until the transaction ends (`None`: no such row).
pub(crate) async fn lock_status(
    conn: &mut PgConnection,
    id: Uuid,
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar(include_str!("sql/lock_status.sql"))
        .bind(id)
        .fetch_optional(conn)
        .await
}

/// `text` as a `last_error` PostgreSQL stores: no NUL (which `text` refuses, failing the
/// statement and the record with it), at most 4,000 characters.
pub(crate) fn storable(text: &str) -> String {
    text.chars()
        .take(4_000)
        .map(|c| if c == '\0' { '\u{FFFD}' } else { c })
        .collect()
}

/// Row `id` in the consumer's hands after its work failed with `error` (see
/// `sql/hold_failed.sql`); whether it moved.
pub(crate) async fn hold_failed(
    conn: &mut PgConnection,
    id: Uuid,
    error: &str,
) -> Result<bool, sqlx::Error> {
    sqlx::query(include_str!("sql/hold_failed.sql"))
        .bind(id)
        .bind(error)
        .execute(conn)
        .await
        .map(|done| done.rows_affected() == 1)
}

/// Keeps `reason` on row `id` (`last_error`): why a consumer rejected its event.
pub(crate) async fn set_last_error(
    conn: &mut PgConnection,
    id: Uuid,
    reason: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(include_str!("sql/set_last_error.sql"))
        .bind(id)
        .bind(reason)
        .execute(conn)
        .await
        .map(|_| ())
}

/// Records that `consumer_group` processed the record at (`topic`, `partition`,
/// `offset`); false when it already had.
pub(crate) async fn insert_processed_message(
    conn: &mut PgConnection,
    consumer_group: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<bool, sqlx::Error> {
    let inserted = sqlx::query(include_str!("sql/insert_processed_message.sql"))
        .bind(consumer_group)
        .bind(topic)
        .bind(partition)
        .bind(offset)
        .execute(conn)
        .await?
        .rows_affected();
    Ok(inserted > 0)
}

/// Records that `consumer_group` processed outbox event `event_id`; false when it already
/// had.
pub(crate) async fn insert_processed_event(
    conn: &mut PgConnection,
    consumer_group: &str,
    event_id: Uuid,
) -> Result<bool, sqlx::Error> {
    let inserted = sqlx::query(include_str!("sql/insert_processed_event.sql"))
        .bind(consumer_group)
        .bind(event_id)
        .execute(conn)
        .await?
        .rows_affected();
    Ok(inserted > 0)
}

/// One trivial statement: fails (25P02) when the transaction is aborted.
pub(crate) async fn ping(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT 1").execute(conn).await?;
    Ok(())
}

/// Row counts per status, the age of the oldest due PENDING row (seconds) and the rows
/// DISPATCHING for longer than `stale_after_seconds`.
pub(crate) async fn status_counts(
    conn: &mut PgConnection,
    stale_after_seconds: f64,
) -> Result<(BTreeMap<String, i64>, Option<f64>, i64), sqlx::Error> {
    let (counts, oldest, stuck): (Json<BTreeMap<String, i64>>, Option<f64>, i64) =
        sqlx::query_as(include_str!("sql/status.sql"))
            .bind(stale_after_seconds)
            .fetch_one(conn)
            .await?;
    Ok((counts.0, oldest, stuck))
}

/// Moves the rows in one of `sources` (only `ids`, when given) to `to`; returns how many.
pub(crate) async fn retry_failed(
    conn: &mut PgConnection,
    to: &str,
    sources: &[&str],
    ids: Option<&[Uuid]>,
) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query(include_str!("sql/retry_failed.sql"))
        .bind(to)
        .bind(sources)
        .bind(ids)
        .execute(conn)
        .await?
        .rows_affected())
}

/// Whether the outbox table exists (the migrations ran).
///
/// # Examples
///
/// A service checks at start-up that `sluice migrate` ran before it enqueues anything:
///
/// ```no_run
/// use sluice_outbox::store::outbox_table_exists;
/// use sqlx::PgPool;
///
/// # async fn example(pool: &PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// let mut conn = pool.acquire().await?;
/// if !outbox_table_exists(&mut conn).await? {
///     return Err("no outbox_events table: run `sluice migrate` first".into());
/// }
/// # Ok(())
/// # }
/// ```
pub async fn outbox_table_exists(conn: &mut PgConnection) -> Result<bool, sqlx::Error> {
    let found: Option<String> = sqlx::query_scalar("SELECT to_regclass('outbox_events')::text")
        .fetch_one(conn)
        .await?;
    Ok(found.is_some())
}

/// Partition assignment's statements (the rules are in [`crate::partitions`]).
pub(crate) mod assignment {
    use sqlx::PgConnection;

    /// Takes the transaction-scoped allocation lock (`namespace`, `hashtext(topic)`).
    pub(crate) async fn lock_topic(
        conn: &mut PgConnection,
        namespace: i32,
        topic: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(include_str!("sql/assignment_lock_topic.sql"))
            .bind(namespace)
            .bind(topic)
            .execute(conn)
            .await?;
        Ok(())
    }

    /// The user's stored partition of `topic`.
    pub(crate) async fn find(
        conn: &mut PgConnection,
        topic: &str,
        user_id: &str,
    ) -> Result<Option<i32>, sqlx::Error> {
        sqlx::query_scalar(include_str!("sql/assignment_find.sql"))
            .bind(topic)
            .bind(user_id)
            .fetch_optional(conn)
            .await
    }

    /// The highest opened partition of `topic` and its user count.
    pub(crate) async fn last_partition(
        conn: &mut PgConnection,
        topic: &str,
    ) -> Result<Option<(i32, i32)>, sqlx::Error> {
        sqlx::query_as(include_str!("sql/assignment_last_partition.sql"))
            .bind(topic)
            .fetch_optional(conn)
            .await
    }

    /// Counts one more user in an opened partition.
    pub(crate) async fn join_partition(
        conn: &mut PgConnection,
        topic: &str,
        partition: i32,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(include_str!("sql/assignment_join_partition.sql"))
            .bind(topic)
            .bind(partition)
            .execute(conn)
            .await?;
        Ok(())
    }

    /// Opens `partition` with its first user.
    pub(crate) async fn open_partition(
        conn: &mut PgConnection,
        topic: &str,
        partition: i32,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(include_str!("sql/assignment_open_partition.sql"))
            .bind(topic)
            .bind(partition)
            .execute(conn)
            .await?;
        Ok(())
    }

    /// Records the user's partition (never updated afterwards).
    pub(crate) async fn insert(
        conn: &mut PgConnection,
        topic: &str,
        user_id: &str,
        partition: i32,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(include_str!("sql/assignment_insert.sql"))
            .bind(topic)
            .bind(user_id)
            .bind(partition)
            .execute(conn)
            .await?;
        Ok(())
    }
}
