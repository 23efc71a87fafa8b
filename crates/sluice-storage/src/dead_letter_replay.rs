//! Replaying one dead letter of the table: the rule `sluice dlq replay` and `sluice console`
//! share, so the two cannot drift.
//!
//! A row is replayed at most once, and a message's lineage at most `max_replays` times: the
//! row is marked with a compare-and-set (`replayed_at IS NULL AND replay_count < max`)
//! inside a transaction, the original key, payload and headers (in order, repeats and
//! headers without a value kept) are published to the original topic with a
//! `sluice-replay-count` header in place of any the record had, and the mark commits only
//! after the broker has
//! acknowledged the record. A failed publish rolls the mark back (the transaction is dropped),
//! so the row can be replayed again; a record that fails again is dead-lettered with the
//! carried-over count.
//!
//! Rows are re-published in the order their records had ([`in_record_order`]): two changes
//! of one key that both became dead letters land, replayed, in that order, so the key ends
//! with the later one (a Debezium sink's `c` then `u`, a delete then a re-insert).

use sluice_core::dead_letter::replay_limit_refusal;
use sluice_kafka::producer::OutgoingCopy;
use sluice_kafka::{KafkaError, REPLAY_COUNT_HEADER, ResilientProducer};
use sluice_postgres::ops::{DeadLetterRow, mark_replayed};
use sqlx::{Connection, PgConnection};

/// The replay limit when none is given (`--max-replays`).
pub const DEFAULT_MAX_REPLAYS: i32 = 3;

/// Why a replay could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// Marking the row (or committing the mark) failed; nothing was published, or the
    /// publish is followed by a rolled-back mark.
    #[error("dead-letter table: {0}")]
    Database(#[from] sqlx::Error),
    /// The broker did not acknowledge the record; the mark was rolled back.
    #[error("publish: {0}")]
    Kafka(#[from] KafkaError),
}

/// What one replay did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replayed {
    /// Re-published and marked: where the broker stored the copy.
    Published {
        /// Partition of the copy.
        partition: i32,
        /// Offset of the copy.
        offset: i64,
    },
    /// Another replay marked the row first (or reached the limit) between reading and
    /// marking it; nothing was published.
    RefusedConcurrently,
}

/// Puts `rows` in the order their records had: by topic, then partition, then offset (a
/// key's records share a partition, so its changes keep their order; a copy that failed
/// again has a later offset than its original).
pub fn in_record_order(rows: &mut [DeadLetterRow]) {
    rows.sort_by(|a, b| {
        (&a.topic, a.partition, a.kafka_offset).cmp(&(&b.topic, b.partition, b.kafka_offset))
    });
}

/// Whether the stored payload is shorter than the original (it cannot be rebuilt).
pub fn is_truncated(row: &DeadLetterRow) -> bool {
    row.payload
        .as_ref()
        .is_some_and(|p| (p.len() as i64) < i64::from(row.payload_size))
}

/// Why `row` cannot be replayed under `max_replays`, if it cannot.
pub fn refusal(row: &DeadLetterRow, max_replays: i32) -> Option<String> {
    if row.replayed_at.is_some() {
        return Some(format!(
            "already replayed (replay {}); replay the dead letter of that copy if it failed again",
            row.replay_count
        ));
    }
    replay_limit_refusal(row.replay_count, max_replays, row.payload.is_none()).or_else(|| {
        is_truncated(row).then(|| {
            "payload was truncated when dead-lettered; the original cannot be rebuilt".to_owned()
        })
    })
}

/// The headers of `row`'s replayed copy: the record's own, in order (a name that repeats
/// and a header without a value kept), without its `sluice-replay-count` headers, then one
/// `sluice-replay-count` of `count`. The record's own count is already in `row.replay_count`
/// (an unreadable one as the highest count, so it was refused), and a second header would be
/// read as the higher of the two.
pub fn replay_headers<'r>(
    row: &'r DeadLetterRow,
    count: &'r str,
) -> Vec<(&'r str, Option<&'r [u8]>)> {
    row.headers()
        .filter(|(name, _)| *name != REPLAY_COUNT_HEADER)
        .chain([(REPLAY_COUNT_HEADER, Some(count.as_bytes()))])
        .collect()
}

/// Marks `row` replayed and re-publishes it (see the module doc). The caller has checked
/// [`refusal`]; the compare-and-set still refuses a row another replay took meanwhile.
pub async fn replay_one(
    conn: &mut PgConnection,
    producer: &ResilientProducer,
    row: &DeadLetterRow,
    max_replays: i32,
) -> Result<Replayed, ReplayError> {
    let mut tx = conn.begin().await?;
    if !mark_replayed(&mut tx, row.id, max_replays).await? {
        return Ok(Replayed::RefusedConcurrently);
    }
    let count = (row.replay_count + 1).to_string();
    let headers = replay_headers(row, &count);
    let delivered = producer
        .send_copy(OutgoingCopy {
            topic: &row.topic,
            key: row.key.as_deref(),
            payload: row.payload.as_deref().unwrap_or_default(),
            partition: None,
            headers: &headers,
        })
        .await?;
    tx.commit().await?;
    tracing::info!(id = row.id, topic = %row.topic, partition = delivered.partition,
        offset = delivered.offset, replay = row.replay_count + 1, "dead letter replayed");
    Ok(Replayed::Published {
        partition: delivered.partition,
        offset: delivered.offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    #[test]
    fn rows_go_in_the_order_their_records_had() {
        let at = |id: i64, topic: &str, partition: i32, offset: i64| DeadLetterRow {
            id,
            topic: topic.into(),
            partition,
            kafka_offset: offset,
            ..row(None, 0, 0, false)
        };
        // Newest first, as `dlq list` shows them.
        let mut rows = vec![
            at(5, "b", 0, 1),
            at(4, "a", 1, 0),
            at(3, "a", 0, 9),
            at(2, "a", 0, 2),
            at(1, "a", 0, 10),
        ];
        in_record_order(&mut rows);
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        assert_eq!(ids, [2, 3, 1, 4, 5]);
    }

    fn row(payload: Option<&[u8]>, size: i32, replays: i32, replayed: bool) -> DeadLetterRow {
        DeadLetterRow {
            id: 1,
            topic: "t".into(),
            partition: 0,
            kafka_offset: 0,
            consumer_group: "g".into(),
            key: None,
            payload: payload.map(<[u8]>::to_vec),
            payload_size: size,
            kafka_timestamp: None,
            error_kind: "decode_error".into(),
            reason: "r".into(),
            recorded_at: Utc::now(),
            replay_count: replays,
            replayed_at: replayed.then(Utc::now),
            header_names: Some(Vec::new()),
            header_values: Some(Vec::new()),
            target_table: None,
        }
    }

    #[test]
    fn a_replay_keeps_the_headers_in_order_with_a_new_count() {
        let mut r = row(Some(b"x"), 1, 1, false);
        r.header_names = Some(
            ["a", REPLAY_COUNT_HEADER, "a", "empty", "bytes"]
                .map(String::from)
                .into(),
        );
        r.header_values = Some(vec![
            Some(b"1".to_vec()),
            Some(b"1".to_vec()),
            Some(b"2".to_vec()),
            None,
            Some(b"\xff\x00".to_vec()),
        ]);
        let headers = replay_headers(&r, "2");
        assert_eq!(
            headers,
            [
                ("a", Some(&b"1"[..])),
                ("a", Some(b"2")),
                ("empty", None),
                ("bytes", Some(b"\xff\x00")),
                (REPLAY_COUNT_HEADER, Some(b"2")),
            ]
        );
        let mut unkept = row(Some(b"x"), 1, 0, false);
        (unkept.header_names, unkept.header_values) = (None, None);
        assert_eq!(
            replay_headers(&unkept, "1"),
            [(REPLAY_COUNT_HEADER, Some(&b"1"[..]))],
            "a dead letter recorded before its headers were kept replays as before"
        );
    }

    #[test]
    fn a_row_is_replayed_once_under_the_limit_and_only_whole() {
        assert_eq!(refusal(&row(Some(b"x"), 1, 0, false), 3), None);
        let once = refusal(&row(Some(b"x"), 1, 1, true), 3).unwrap();
        assert!(once.starts_with("already replayed (replay 1)"), "{once}");
        let limit = refusal(&row(Some(b"x"), 1, 3, false), 3).unwrap();
        assert_eq!(limit, "already replayed 3 time(s) (limit 3)");
        let tombstone = refusal(&row(None, 0, 0, false), 3).unwrap();
        assert!(tombstone.starts_with("tombstone"), "{tombstone}");
        let cut = row(Some(b"xy"), 70_000, 0, false);
        assert!(is_truncated(&cut));
        assert!(refusal(&cut, 3).unwrap().contains("truncated"));
    }
}
