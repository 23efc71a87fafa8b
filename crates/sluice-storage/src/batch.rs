//! One batch, one transaction (SPEC S3.1):
//!
//! ```text
//! decode → resolve package names → bind ids → dedupe → upsert (isolating bad rows)
//!        → dead letters, all in one transaction → COMMIT
//! ```
//! Decoding is pure and happens once per batch; everything after it runs inside the
//! transaction and is repeated as a whole if a transient database error forces a retry.

use crate::kind::TopicKind;
use crate::write::write_isolating;
use chrono::{DateTime, Utc};
use sluice_core::{BatchReport, Bound, DeadLetter, DeadLetterKind, RecordCoords};
use sluice_kafka::Record;
use sluice_postgres::ApplicationResolver;
use sluice_postgres::repo::insert_dead_letters;
use sqlx::{Connection, PgConnection};

/// A batch after decoding: the valid messages (with their record index) and the rejects.
#[derive(Debug)]
pub struct Decoded<M> {
    /// Valid messages with the index of their record in the batch.
    pub messages: Vec<(usize, M)>,
    /// Records that failed decoding.
    pub rejected: Vec<DeadLetter>,
}

/// The coordinates of a record.
pub fn coords(record: &Record) -> RecordCoords {
    RecordCoords {
        topic: record.topic.clone(),
        partition: record.partition,
        offset: record.offset,
    }
}

fn timestamp(record: &Record) -> Option<DateTime<Utc>> {
    record
        .timestamp_ms
        .and_then(DateTime::from_timestamp_millis)
}

/// A dead letter for `record`.
pub fn dead_letter(record: &Record, kind: DeadLetterKind, reason: String) -> DeadLetter {
    DeadLetter::new(
        coords(record),
        record.key.as_deref(),
        record.payload.as_deref(),
        timestamp(record),
        kind,
        reason,
    )
    .with_replay_count(record.replay_count)
}

/// Decodes every record of a batch; pure.
pub fn decode_batch<K: TopicKind>(records: &[Record]) -> Decoded<K::Message> {
    let mut messages = Vec::with_capacity(records.len());
    let mut rejected = Vec::new();
    for (index, record) in records.iter().enumerate() {
        match K::decode(record.payload.as_deref()) {
            Ok(message) => messages.push((index, message)),
            Err(error) => rejected.push(dead_letter(
                record,
                DeadLetterKind::DecodeError,
                error.to_string(),
            )),
        }
    }
    Decoded { messages, rejected }
}

/// Runs the transactional part of a batch and commits it. On error the transaction is
/// rolled back (dropped) and nothing of the batch is durable.
pub async fn store_batch<K: TopicKind>(
    conn: &mut PgConnection,
    resolver: &ApplicationResolver,
    group: &str,
    applications_table: &str,
    records: &[Record],
    decoded: &Decoded<K::Message>,
) -> Result<(BatchReport, Vec<DeadLetter>), sqlx::Error> {
    let mut report = BatchReport {
        records: records.len() as u64,
        decode_errors: decoded.rejected.len() as u64,
        ..BatchReport::default()
    };
    let mut dead = decoded.rejected.clone();
    let mut tx = conn.begin().await?;

    let names = decoded.messages.iter().map(|(_, m)| K::package_name(m));
    let (ids, _stats) = resolver.resolve(&mut tx, names).await?;
    let mut bound = Vec::with_capacity(decoded.messages.len());
    for (index, message) in &decoded.messages {
        let name = K::package_name(message);
        match ids.get(name) {
            Some(&application_id) => bound.push(Bound {
                record: *index,
                application_id,
                message: message.clone(),
            }),
            None => {
                report.unknown_applications += 1;
                dead.push(dead_letter(
                    &records[*index],
                    DeadLetterKind::UnknownApplication,
                    format!(
                        "field `package_name`: unknown application `{}` (not in {applications_table})",
                        truncate(name, 80)
                    ),
                ));
            }
        }
    }

    let deduped = K::dedupe(bound);
    report.write.skipped += deduped.dropped() as u64;
    let written = write_isolating::<K>(&mut tx, deduped, records).await?;
    report.write += written.outcome;
    report.write.skipped -= written.revived;
    report.constraint_violations = written.rejected.len() as u64;
    if !written.rejected.is_empty() {
        // A foreign-key violation may mean an application was deleted: forget cached ids.
        resolver.invalidate_all();
    }
    dead.extend(written.rejected);

    report.dead_letters_inserted = insert_dead_letters(&mut tx, group, &dead).await?;
    tx.commit().await?;
    Ok((report, dead))
}

/// Shortens a string for a log line or a reason.
pub fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_owned(),
    }
}
