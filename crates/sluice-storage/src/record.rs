//! A Kafka record as the storage consumer reports it: its coordinates, its timestamp as
//! PostgreSQL can hold it, its dead letter, and text shortened for a log line or a reason.

use chrono::{DateTime, Utc};
use sluice_core::{DeadLetter, DeadLetterKind, RecordCoords};
use sluice_kafka::Record;

/// The coordinates of a record.
pub fn coords(record: &Record) -> RecordCoords {
    RecordCoords {
        topic: record.topic.clone(),
        partition: record.partition,
        offset: record.offset,
    }
}

/// The record's Kafka timestamp if TIMESTAMPTZ can hold it. Any client may set any
/// timestamp; one outside years 1–9999 would make the dead-letter insert itself fail and
/// stop the topic, so it is dropped (and the reason says so).
pub(crate) fn kafka_timestamp(record: &Record) -> Result<Option<DateTime<Utc>>, i64> {
    let Some(ms) = record.timestamp_ms else {
        return Ok(None);
    };
    match DateTime::from_timestamp_millis(ms) {
        Some(t) if (1..=9999).contains(&chrono::Datelike::year(&t)) => Ok(Some(t)),
        _ => Err(ms),
    }
}

/// A dead letter for `record`, with its headers (a replay re-publishes them).
pub fn dead_letter(record: &Record, kind: DeadLetterKind, mut reason: String) -> DeadLetter {
    let kafka_timestamp = kafka_timestamp(record).unwrap_or_else(|ms| {
        reason.push_str(&format!(
            " [Kafka timestamp {ms} ms is out of range and not stored]"
        ));
        None
    });
    DeadLetter::new(
        coords(record),
        record.key.as_deref(),
        record.payload.as_deref(),
        kafka_timestamp,
        kind,
        reason,
    )
    .with_replay_count(record.replay_count)
    .with_headers(record.headers.clone())
}

/// Shortens a string for a log line or a reason.
pub fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}
