//! One batch, one transaction (docs/ARCHITECTURE.md#batch-loop):
//!
//! ```text
//! decode → claim the offsets → resolve package names → bind ids → dedupe
//!        → upsert (isolating bad rows) → dead letters, all in one transaction → COMMIT
//! ```
//! Decoding is pure and happens once per batch; everything after it runs inside the
//! transaction and is repeated as a whole if a transient database error forces a retry.
//!
//! The transaction's first statement claims the batch's offsets in PostgreSQL
//! (docs/ARCHITECTURE.md#offsets): it locks each partition's row, reads where PostgreSQL says
//! the partition is, and moves it past the batch. Records below that offset were applied
//! already (a crash between this commit and Kafka's, a batch read ahead before a rebalance):
//! they are left out, so nothing is applied twice. A partition that PostgreSQL has *behind*
//! what this writer committed lost commits (a crash under `synchronous_commit = off`, a
//! failover to a replica that lagged): the batch is not written and the pipeline restarts
//! from PostgreSQL's offsets ([`Stored::Rewound`]).

use crate::isolate::{Isolation, write_runs};
use crate::record::dead_letter;
use crate::sink::{Bound, StorageSink};
use sluice_core::{BatchReport, DeadLetter, DeadLetterKind};
use sluice_kafka::Record;
use sluice_postgres::offsets::{self, Partition};
use sluice_postgres::repo::insert_dead_letters;
use sqlx::{Connection, PgConnection};
use std::collections::HashMap;

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

/// What storing a batch came to.
#[derive(Debug)]
pub enum Stored {
    /// Committed: what the batch did, and its dead letters.
    Done(BatchReport, Vec<DeadLetter>),
    /// Not written: PostgreSQL has a partition behind what this writer committed.
    Rewound(Rewind),
}

/// A partition whose offset PostgreSQL lost: it holds `postgres` (`None`: no row) where this
/// writer had committed `committed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewind {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// PostgreSQL's next offset now.
    pub postgres: Option<i64>,
    /// The next offset this writer committed.
    pub committed: i64,
}

/// Per partition of a batch: (topic, partition, first offset, next offset after the last).
pub fn partitions_of(records: &[Record]) -> Vec<(String, i32, i64, i64)> {
    let mut out: Vec<(String, i32, i64, i64)> = Vec::new();
    for r in records {
        match out
            .iter_mut()
            .find(|p| p.1 == r.partition && p.0 == r.topic)
        {
            Some(p) => {
                p.2 = p.2.min(r.offset);
                p.3 = p.3.max(r.offset + 1);
            }
            None => out.push((r.topic.clone(), r.partition, r.offset, r.offset + 1)),
        }
    }
    out
}

/// Runs the transactional part of a batch and commits it. On error the transaction is
/// rolled back (dropped) and nothing of the batch is durable. `committed` holds the next
/// offset this writer committed per partition (to see a PostgreSQL that lost commits).
pub async fn store_batch<S: StorageSink>(
    conn: &mut PgConnection,
    sink: &S,
    group: &str,
    records: &[Record],
    decoded: &Decoded<S::Message>,
    committed: &HashMap<Partition, i64>,
) -> Result<Stored, sqlx::Error> {
    let partitions = partitions_of(records);
    let batch = Batch {
        sink,
        group,
        records,
        decoded,
        partitions: &partitions,
        committed,
    };
    let already = match store_claimed(conn, &batch).await? {
        Claimed::Stored(stored) => return Ok(stored),
        Claimed::Already(before) => before,
    };
    // Some records were applied before: store the others (a rare path: decode them again).
    let kept: Vec<Record> = records
        .iter()
        .filter(|r| {
            already
                .get(&(r.topic.clone(), r.partition))
                .copied()
                .flatten()
                .is_none_or(|before| r.offset >= before)
        })
        .cloned()
        .collect();
    let skipped = (records.len() - kept.len()) as u64;
    tracing::info!(
        group,
        skipped,
        kept = kept.len(),
        "records below PostgreSQL's offset left out: applied before (a crash between the database \
         and the Kafka commit, or a batch read ahead of a rebalance)"
    );
    let decoded = decode_batch(sink, &kept);
    let batch = Batch {
        records: &kept,
        decoded: &decoded,
        ..batch
    };
    let (mut report, dead) = match store_claimed(conn, &batch).await? {
        Claimed::Stored(Stored::Done(report, dead)) => (report, dead),
        Claimed::Stored(rewound) => return Ok(rewound),
        // Another owner stored the rest meanwhile: nothing of the batch is left to store.
        Claimed::Already(_) => {
            let mut report = BatchReport {
                records: kept.len() as u64,
                ..BatchReport::default()
            };
            report.write.skipped = kept.len() as u64;
            (report, Vec::new())
        }
    };
    report.records += skipped;
    report.write.skipped += skipped;
    Ok(Stored::Done(report, dead))
}

/// A batch after its claim: stored, or records below PostgreSQL's offsets (by partition).
enum Claimed {
    Stored(Stored),
    Already(HashMap<Partition, Option<i64>>),
}

/// Writes the batch (optimistically, then with savepoint isolation if a row breaks a
/// constraint), unless its claim finds records applied before.
async fn store_claimed<S: StorageSink>(
    conn: &mut PgConnection,
    batch: &Batch<'_, S>,
) -> Result<Claimed, sqlx::Error> {
    // Almost every batch is clean: write it without savepoints (two round trips fewer).
    // If a row breaks a constraint, that transaction is rolled back and the batch is
    // written again with savepoint isolation.
    for isolation in [Isolation::Optimistic, Isolation::Savepoints] {
        match store_batch_in(conn, batch, isolation).await? {
            Attempt::Stored(stored) => return Ok(Claimed::Stored(stored)),
            Attempt::Already(before) => return Ok(Claimed::Already(before)),
            Attempt::Isolate => {}
        }
    }
    Err(sqlx::Error::Protocol(
        "savepoint isolation did not settle".into(),
    ))
}

/// One attempt at a batch's transaction.
enum Attempt {
    Stored(Stored),
    /// Records below PostgreSQL's offsets (rolled back).
    Already(HashMap<Partition, Option<i64>>),
    /// A row broke a constraint: try again with savepoint isolation (rolled back).
    Isolate,
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
    /// (topic, partition, first offset, next offset) of the batch as read: the claim moves
    /// each partition's offset past the records read, left out or not.
    partitions: &'a [(String, i32, i64, i64)],
    /// The next offset this writer committed, per partition.
    committed: &'a HashMap<Partition, i64>,
}

async fn store_batch_in<S: StorageSink>(
    conn: &mut PgConnection,
    batch: &Batch<'_, S>,
    isolation: Isolation,
) -> Result<Attempt, sqlx::Error> {
    let &Batch {
        sink,
        group,
        records,
        decoded,
        partitions,
        committed,
    } = batch;
    let mut report = BatchReport {
        records: records.len() as u64,
        decode_errors: decoded.rejected.len() as u64,
        ..BatchReport::default()
    };
    let mut dead = decoded.rejected.clone();
    let mut tx = conn.begin().await?;
    let claims: Vec<(String, i32, i64)> = partitions
        .iter()
        .map(|(t, p, _, next)| (t.clone(), *p, *next))
        .collect();
    let before = offsets::claim(&mut tx, group, &claims).await?;
    let mut already = false;
    for (topic, partition, first, _) in partitions {
        let stored = before.get(&(topic.clone(), *partition)).copied().flatten();
        if let Some(&mine) = committed.get(&(topic.clone(), *partition))
            && stored.is_none_or(|s| s < mine)
        {
            return Ok(Attempt::Stored(Stored::Rewound(Rewind {
                topic: topic.clone(),
                partition: *partition,
                postgres: stored,
                committed: mine,
            })));
        }
        already |= stored.is_some_and(|s| *first < s);
    }
    if already {
        return Ok(Attempt::Already(before));
    }

    let Bound { rows, rejected } = sink.bind(&mut tx, &decoded.messages).await?;
    report.unknown_applications += rejected.len() as u64;
    dead.extend(
        rejected
            .into_iter()
            .map(|r| dead_letter(&records[r.record], r.kind, r.reason)),
    );

    let Some((dropped, written)) = write_runs(&mut tx, sink, rows, records, isolation).await?
    else {
        return Ok(Attempt::Isolate); // dropping `tx` rolls the attempt back
    };
    report.write.skipped += dropped;
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
    Ok(Attempt::Stored(Stored::Done(report, dead)))
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
