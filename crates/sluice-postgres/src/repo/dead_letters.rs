use super::column;
use sluice_core::DeadLetter;
use sqlx::PgConnection;

/// Inserts dead letters in the caller's transaction; returns how many rows were new (a
/// redelivered record's dead letter already exists and is not inserted twice). A dead
/// letter is identified by its record's coordinates, Kafka timestamp, key and payload, so a
/// new record at reused coordinates (a re-created topic) is a new row. Each letter's headers
/// are kept in order, a header without a value as a NULL element, and the table its record
/// was going to ([`DeadLetter::table`]) as `target_table` (NULL: none was chosen).
pub async fn insert_dead_letters(
    conn: &mut PgConnection,
    consumer_group: &str,
    letters: &[DeadLetter],
) -> Result<u64, sqlx::Error> {
    if letters.is_empty() {
        return Ok(0);
    }
    let headers = letters
        .iter()
        .zip(1_i64..)
        .flat_map(|(d, letter)| d.headers.iter().map(move |h| (letter, h)));
    let (mut header_letters, mut header_names, mut header_values) =
        (Vec::new(), Vec::new(), Vec::new());
    for (letter, (name, value)) in headers {
        header_letters.push(letter);
        header_names.push(name.as_str());
        header_values.push(value.as_deref());
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
        .bind(header_letters)
        .bind(header_names)
        .bind(header_values)
        .bind(column(letters, |d| d.table.as_deref()))
        .execute(conn)
        .await?;
    Ok(result.rows_affected())
}
