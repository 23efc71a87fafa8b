//! The storage consumer's offsets in PostgreSQL (docs/ARCHITECTURE.md#offsets): per consumer
//! group, topic and partition, the next offset to read, written in each batch's own
//! transaction so that rows and offsets commit or roll back together.
//!
//! Invariants: a batch's [`claim`] runs first in its transaction and locks the rows of the
//! batch's partitions until COMMIT, so two processes that both believe they own a partition
//! (a rebalance in flight) apply its records one after the other, and the second sees the
//! first's offsets; an offset never moves back except through [`set_offsets`] (`sluice
//! replay`).

use sqlx::PgConnection;
use std::collections::HashMap;

/// A partition: (topic, partition).
pub type Partition = (String, i32);

/// One partition of a batch's claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimed {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset after the batch's last record of it.
    pub next: i64,
    /// The Kafka timestamp of the batch's last record of it, at `next - 1` (`None`: none).
    pub last_record_ms: Option<i64>,
}

/// In the batch's transaction, before anything else: locks each partition's row (waiting for
/// a concurrent owner's COMMIT), and returns PostgreSQL's next offset before this batch
/// (`None`: no row yet) while raising it to the batch's `next` (the offset after its highest
/// record), with the timestamp of the batch's last record of the partition when that offset is
/// the one stored. One round trip (the `claim_consumer_offsets` function of the migrations);
/// `partitions` holds one [`Claimed`] per partition.
pub async fn claim(
    tx: &mut PgConnection,
    group: &str,
    partitions: &[Claimed],
) -> Result<HashMap<Partition, Option<i64>>, sqlx::Error> {
    let topics: Vec<&str> = partitions.iter().map(|p| p.topic.as_str()).collect();
    let numbers: Vec<i32> = partitions.iter().map(|p| p.partition).collect();
    let next: Vec<i64> = partitions.iter().map(|p| p.next).collect();
    let last: Vec<Option<i64>> = partitions.iter().map(|p| p.last_record_ms).collect();
    let rows: Vec<(String, i32, Option<i64>)> =
        sqlx::query_as("SELECT * FROM claim_consumer_offsets($1, $2, $3, $4, $5)")
            .bind(group)
            .bind(&topics)
            .bind(&numbers)
            .bind(&next)
            .bind(&last)
            .fetch_all(&mut *tx)
            .await?;
    Ok(rows
        .into_iter()
        .map(|(t, p, before)| ((t, p), before))
        .collect())
}

/// In a batch's transaction, before its [`claim`]: deletes the stored offsets of
/// `partitions` of `group`, which belong to a log that is gone (the topic was created again
/// under a running consumer); the claim then stores the batch's offsets afresh.
pub async fn discard(
    tx: &mut PgConnection,
    group: &str,
    partitions: &[Partition],
) -> Result<(), sqlx::Error> {
    let topics: Vec<&str> = partitions.iter().map(|p| p.0.as_str()).collect();
    let numbers: Vec<i32> = partitions.iter().map(|p| p.1).collect();
    sqlx::query(
        "DELETE FROM consumer_offsets o
         USING unnest($2::text[], $3::int[]) AS p(topic, partition)
         WHERE o.consumer_group = $1 AND o.topic = p.topic AND o.partition = p.partition",
    )
    .bind(group)
    .bind(&topics)
    .bind(&numbers)
    .execute(tx)
    .await?;
    Ok(())
}

/// PostgreSQL's next offset of each of `partitions` of `group` that has one.
pub async fn stored(
    conn: &mut PgConnection,
    group: &str,
    partitions: &[Partition],
) -> Result<HashMap<Partition, i64>, sqlx::Error> {
    let stored = stored_since(conn, group, partitions).await?;
    Ok(stored.into_iter().map(|(p, (o, _))| (p, o)).collect())
}

/// As [`stored`], each offset with the Kafka timestamp of the record just below it, the last
/// one read (`None`: not known — adopted, set by `sluice replay`, stored before it was kept).
pub async fn stored_since(
    conn: &mut PgConnection,
    group: &str,
    partitions: &[Partition],
) -> Result<HashMap<Partition, (i64, Option<i64>)>, sqlx::Error> {
    let topics: Vec<&str> = partitions.iter().map(|p| p.0.as_str()).collect();
    let numbers: Vec<i32> = partitions.iter().map(|p| p.1).collect();
    let rows: Vec<(String, i32, i64, Option<i64>)> = sqlx::query_as(
        "SELECT o.topic::text, o.partition, o.next_offset, o.last_record_ms
         FROM consumer_offsets o
         JOIN unnest($2::text[], $3::int[]) AS p(topic, partition) USING (topic, partition)
         WHERE o.consumer_group = $1",
    )
    .bind(group)
    .bind(&topics)
    .bind(&numbers)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(t, p, o, last)| ((t, p), (o, last)))
        .collect())
}

/// Moves each of `stored` — (topic, partition, offset, the partition's first offset now) —
/// of `group` whose offset still is that one to the partition's first offset (the topic was
/// created again: nothing of the new log is applied yet), its last record's timestamp not
/// known; deletes it where that first offset is not known. One transaction, durable.
pub async fn restart_at_start(
    conn: &mut PgConnection,
    group: &str,
    stored: &[(String, i32, i64, Option<i64>)],
) -> Result<(), sqlx::Error> {
    use sqlx::Connection;
    let topics: Vec<&str> = stored.iter().map(|s| s.0.as_str()).collect();
    let partitions: Vec<i32> = stored.iter().map(|s| s.1).collect();
    let offsets: Vec<i64> = stored.iter().map(|s| s.2).collect();
    let starts: Vec<Option<i64>> = stored.iter().map(|s| s.3).collect();
    let mut tx = conn.begin().await?;
    sqlx::query("SET LOCAL synchronous_commit = on")
        .execute(&mut *tx)
        .await?;
    // One statement: a partition appears once in `stored`, so the update (a new start is
    // known) and the delete (none is) never touch the same row.
    sqlx::query(
        "WITH s AS (
             SELECT * FROM unnest($2::text[], $3::int[], $4::bigint[], $5::bigint[])
                 AS s(topic, partition, next_offset, start)
         ), moved AS (
             UPDATE consumer_offsets o
             SET next_offset = s.start, last_record_ms = NULL, updated_at = now()
             FROM s
             WHERE o.consumer_group = $1 AND o.topic = s.topic AND o.partition = s.partition
               AND o.next_offset = s.next_offset AND s.start IS NOT NULL
         )
         DELETE FROM consumer_offsets o
         USING s
         WHERE o.consumer_group = $1 AND o.topic = s.topic AND o.partition = s.partition
           AND o.next_offset = s.next_offset AND s.start IS NULL",
    )
    .bind(group)
    .bind(&topics)
    .bind(&partitions)
    .bind(&offsets)
    .bind(&starts)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
}

/// Every stored offset of `group`, as (topic, partition, next offset), in order.
pub async fn of_group(
    conn: &mut PgConnection,
    group: &str,
) -> Result<Vec<(String, i32, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT topic::text, partition, next_offset FROM consumer_offsets
         WHERE consumer_group = $1 ORDER BY topic, partition",
    )
    .bind(group)
    .fetch_all(conn)
    .await
}

/// Whether `group`'s offsets live in PostgreSQL already.
pub async fn adopted(conn: &mut PgConnection, group: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM consumer_offset_groups WHERE consumer_group = $1)",
    )
    .bind(group)
    .fetch_one(conn)
    .await
}

/// Adopts `group` if it is not yet: records it, with Kafka's committed offsets `kafka` (topic,
/// partition, next offset) as its starting point, in one durable transaction (synchronous
/// commit whatever the session's setting: the adoption must survive a crash). Returns whether
/// this call adopted it (false: it was already, `kafka` is ignored).
pub async fn adopt(
    conn: &mut PgConnection,
    group: &str,
    kafka: &[(String, i32, i64)],
) -> Result<bool, sqlx::Error> {
    use sqlx::Connection;
    let mut tx = conn.begin().await?;
    sqlx::query("SET LOCAL synchronous_commit = on")
        .execute(&mut *tx)
        .await?;
    let adopted_now = sqlx::query(
        "INSERT INTO consumer_offset_groups (consumer_group) VALUES ($1) ON CONFLICT DO NOTHING",
    )
    .bind(group)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if adopted_now {
        upsert(&mut tx, group, kafka, "DO NOTHING").await?;
    }
    tx.commit().await?;
    Ok(adopted_now)
}

/// Sets `group`'s offsets to `offsets` (topic, partition, next offset), moving them back if
/// need be, and adopts the group: what `sluice replay` does to PostgreSQL's copy. Durable.
pub async fn set_offsets(
    conn: &mut PgConnection,
    group: &str,
    offsets: &[(String, i32, i64)],
) -> Result<(), sqlx::Error> {
    use sqlx::Connection;
    let mut tx = conn.begin().await?;
    sqlx::query("SET LOCAL synchronous_commit = on")
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO consumer_offset_groups (consumer_group) VALUES ($1) ON CONFLICT DO NOTHING",
    )
    .bind(group)
    .execute(&mut *tx)
    .await?;
    upsert(
        &mut tx,
        group,
        offsets,
        // The record below an offset set by hand was not read: its timestamp is not known.
        "DO UPDATE SET next_offset = EXCLUDED.next_offset, updated_at = now(), \
         last_record_ms = NULL",
    )
    .await?;
    tx.commit().await
}

async fn upsert(
    tx: &mut PgConnection,
    group: &str,
    offsets: &[(String, i32, i64)],
    on_conflict: &str,
) -> Result<(), sqlx::Error> {
    let topics: Vec<&str> = offsets.iter().map(|p| p.0.as_str()).collect();
    let numbers: Vec<i32> = offsets.iter().map(|p| p.1).collect();
    let next: Vec<i64> = offsets.iter().map(|p| p.2.max(0)).collect();
    let sql = format!(
        "INSERT INTO consumer_offsets (consumer_group, topic, partition, next_offset)
         SELECT $1, topic, partition, next_offset
         FROM unnest($2::text[], $3::int[], $4::bigint[]) AS b(topic, partition, next_offset)
         ON CONFLICT (consumer_group, topic, partition) {on_conflict}"
    );
    sqlx::query(&sql)
        .bind(group)
        .bind(&topics)
        .bind(&numbers)
        .bind(&next)
        .execute(tx)
        .await?;
    Ok(())
}
