//! One batch, one transaction (docs/ARCHITECTURE.md#batch-loop):
//!
//! ```text
//! decode → resolve package names → bind ids → dedupe → upsert (isolating bad rows)
//!        → dead letters, all in one transaction → COMMIT
//! ```
//! Decoding is pure and happens once per batch; everything after it runs inside the
//! transaction and is repeated as a whole if a transient database error forces a retry.

use crate::isolate::{Isolation, write_isolating};
use crate::record::dead_letter;
use crate::sink::{Bound, StorageSink};
use sluice_core::{BatchReport, DeadLetter, DeadLetterKind};
use sluice_kafka::Record;
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

/// Decodes every record of a batch; pure.
pub fn decode_batch<S: StorageSink>(sink: &S, records: &[Record]) -> Decoded<S::Message> {
    let mut messages = Vec::with_capacity(records.len());
    let mut rejected = Vec::new();
    for (index, record) in records.iter().enumerate() {
        match sink.decode(record) {
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
pub async fn store_batch<S: StorageSink>(
    conn: &mut PgConnection,
    sink: &S,
    group: &str,
    records: &[Record],
    decoded: &Decoded<S::Message>,
) -> Result<(BatchReport, Vec<DeadLetter>), sqlx::Error> {
    // Almost every batch is clean: write it without savepoints (two round trips fewer).
    // If a row breaks a constraint, that transaction is rolled back and the batch is
    // written again with savepoint isolation.
    let batch = Batch {
        sink,
        group,
        records,
        decoded,
    };
    match store_batch_in(conn, &batch, Isolation::Optimistic).await? {
        Some(stored) => Ok(stored),
        None => store_batch_in(conn, &batch, Isolation::Savepoints)
            .await?
            .ok_or_else(|| sqlx::Error::Protocol("savepoint isolation did not settle".into())),
    }
}

/// One batch as its transaction sees it: what it is written through and what it holds.
/// Each attempt at the transaction reads it again from the start.
struct Batch<'a, S: StorageSink> {
    /// The pipeline's sink: binds, de-duplicates and upserts the rows.
    sink: &'a S,
    /// The pipeline's consumer group, recorded with each dead letter.
    group: &'a str,
    /// The records, which the decoded messages and every rejection point into by index.
    records: &'a [Record],
    /// Their decoding: the valid messages and the records that failed it.
    decoded: &'a Decoded<S::Message>,
}

async fn store_batch_in<S: StorageSink>(
    conn: &mut PgConnection,
    batch: &Batch<'_, S>,
    isolation: Isolation,
) -> Result<Option<(BatchReport, Vec<DeadLetter>)>, sqlx::Error> {
    let &Batch {
        sink,
        group,
        records,
        decoded,
    } = batch;
    let mut report = BatchReport {
        records: records.len() as u64,
        decode_errors: decoded.rejected.len() as u64,
        ..BatchReport::default()
    };
    let mut dead = decoded.rejected.clone();
    let mut tx = conn.begin().await?;

    let Bound { rows, rejected } = sink.bind(&mut tx, &decoded.messages).await?;
    report.unknown_applications += rejected.len() as u64;
    dead.extend(
        rejected
            .into_iter()
            .map(|r| dead_letter(&records[r.record], r.kind, r.reason)),
    );

    let deduped = sink.dedupe(rows);
    report.write.skipped += deduped.dropped() as u64;
    let Some(written) = write_isolating(&mut tx, sink, deduped, records, isolation).await? else {
        return Ok(None); // dropping `tx` rolls the attempt back
    };
    report.write += written.outcome;
    report.write.skipped -= written.revived;
    for letter in &written.rejected {
        match letter.kind {
            DeadLetterKind::ConstraintViolation => report.constraint_violations += 1,
            _ => report.unknown_applications += 1,
        }
    }
    dead.extend(written.rejected);

    report.dead_letters_inserted = insert_dead_letters(&mut tx, group, &dead).await?;
    tx.commit().await?;
    Ok(Some((report, dead)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(timestamp_ms: Option<i64>) -> Record {
        Record {
            topic: "t".into(),
            partition: 0,
            offset: 1,
            key: None,
            payload: Some(b"x".to_vec()),
            timestamp_ms,
            replay_count: 2,
            headers: Vec::new(),
        }
    }

    #[test]
    fn an_unstorable_kafka_timestamp_is_dropped_and_said() {
        let dl = dead_letter(
            &record(Some(-1_000_000_000_000_000)),
            DeadLetterKind::DecodeError,
            "bad".into(),
        );
        assert_eq!(dl.kafka_timestamp, None);
        assert!(dl.reason.contains("out of range"), "{}", dl.reason);
        let dl = dead_letter(
            &record(Some(1_700_000_000_000)),
            DeadLetterKind::DecodeError,
            "bad".into(),
        );
        assert!(dl.kafka_timestamp.is_some());
        assert_eq!(dl.reason, "bad");
        assert_eq!(
            dl.replay_count, 2,
            "a re-published record keeps its replay count"
        );
        assert_eq!(
            dead_letter(&record(None), DeadLetterKind::DecodeError, "x".into()).kafka_timestamp,
            None
        );
    }
}
