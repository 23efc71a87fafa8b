use super::column;
use sluice_core::DeadLetter;
use sqlx::PgConnection;

/// Inserts dead letters in the caller's transaction; returns how many rows were new (a
/// redelivered record's dead letter already exists and is not inserted twice). A dead
/// letter is identified by its record's coordinates, Kafka timestamp, key and payload, so a
/// new record at reused coordinates (a re-created topic) is a new row.
pub async fn insert_dead_letters(
    conn: &mut PgConnection,
    consumer_group: &str,
    letters: &[DeadLetter],
) -> Result<u64, sqlx::Error> {
    if letters.is_empty() {
        return Ok(0);
    }
    let result = sqlx::query(include_str!("../sql/insert_dead_letters.sql"))
        .bind(column(letters, |d| d.coords.topic.as_str()))
        .bind(column(letters, |d| d.coords.partition))
        .bind(column(letters, |d| d.coords.offset))
        .bind(vec![consumer_group; letters.len()])
        .bind(column(letters, |d| d.key.as_deref()))
        .bind(column(letters, |d| d.payload.as_deref()))
        .bind(column(letters, |d| d.payload_size))
        .bind(column(letters, |d| d.kafka_timestamp))
        .bind(column(letters, |d| d.kind.as_str()))
        .bind(column(letters, |d| d.reason.as_str()))
        .bind(column(letters, |d| d.replay_count))
        .execute(conn)
        .await?;
    Ok(result.rows_affected())
}
