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
//! the partition is, and moves it past the batch; `claim.rs` judges each partition.
//! Records below that offset were applied already (a crash between this commit and Kafka's,
//! another owner during a rebalance): they are left out and the rest of the batch is stored,
//! so nothing is applied twice. A partition that PostgreSQL has *behind* where its fetch
//! continued lost commits (a crash under `synchronous_commit = off`, a failover to a replica
//! that lagged): none of its records is written and it is read again from PostgreSQL's offset
//! ([`Done::behind`], a seek). Only where that position is not known does a loss start the
//! pipeline again from PostgreSQL's offsets ([`Stored::Rewound`]).

use crate::by_table::ByTable;
use crate::claim::{Claim, Verdict, claims_of, judge};
pub use crate::decoded::{DecodedBatch, Group, decode_batch};
use crate::isolate::{Isolation, write_runs};
use crate::origins::{Origin, Origins};
use crate::record::dead_letter;
use crate::sink::{Bound, Declared};
use sluice_core::{BatchReport, DeadLetter, DeadLetterKind};
use sluice_kafka::Record;
use sluice_postgres::offsets::{self, Partition};
use sluice_postgres::repo::insert_dead_letters;
use sqlx::{Connection, PgConnection};
use std::collections::HashMap;

/// What storing a batch came to.
#[derive(Debug)]
pub enum Stored {
    /// Committed (or nothing left to commit).
    Done(Done),
    /// Not written: PostgreSQL has a partition behind what this writer committed, and where
    /// its fetch continued is not known.
    Rewound(Rewind),
    /// Not written: a table of the batch was dropped or altered since it was planned.
    TableGone(TableGone),
}

/// A table whose statement the server refused for its shape (dropped, a column dropped or
/// of another type): a sink of many tables plans it again and the batch is decoded again;
/// for a fixed table it is fatal, as any such error.
#[derive(Debug)]
pub struct TableGone {
    /// The table, as the sink names it.
    pub table: String,
    /// The server's error.
    pub error: sqlx::Error,
}

/// SQLSTATEs of a statement that no longer fits its table: undefined table, undefined
/// column, a column of another type.
const TABLE_CHANGED: [&str; 3] = ["42P01", "42703", "42804"];

/// Whether `error` says a table changed under its planned statement.
fn table_changed(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db)
        if db.code().is_some_and(|code| TABLE_CHANGED.contains(&code.as_ref())))
}

/// A batch whose transaction committed.
#[derive(Debug)]
pub struct Done {
    /// What the batch did (records left out as applied before count as skipped).
    pub report: BatchReport,
    /// Its dead letters.
    pub dead: Vec<DeadLetter>,
    /// Each table's share of it.
    pub tables: ByTable,
    /// Partitions none of whose records were written: PostgreSQL's offset is behind where
    /// their fetch continued from; they are read again from there (a seek).
    pub behind: Vec<Behind>,
}

/// A partition to read again from PostgreSQL's offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Behind {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// PostgreSQL's next offset: where to read from.
    pub postgres: i64,
    /// Where the fetch had continued from.
    pub fetched_from: i64,
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
    claims_of(records, |_, _| None)
        .into_iter()
        .map(|c| (c.topic, c.partition, c.first, c.next))
        .collect()
}

/// Runs the transactional part of a batch and commits it. On error the transaction is
/// rolled back (dropped) and nothing of the batch is durable. `origins` holds where each
/// partition's fetch continued from ([`crate::origins`]); `committed` the next offset this
/// writer committed per partition (to see a PostgreSQL that lost commits where the origin
/// is not known).
///
/// When the claim finds records applied before, a partition behind, or a partition whose
/// log went back, the transaction is rolled back and the batch stored again without what
/// it must leave out (each round leaves out at least one record or settles a partition,
/// so the loop ends; a rare path). The records kept keep the decoding they came with.
pub async fn store_batch(
    conn: &mut PgConnection,
    group: &str,
    (records, decoded, origins): (&[Record], &DecodedBatch, &Origins),
    committed: &HashMap<Partition, i64>,
) -> Result<Stored, sqlx::Error> {
    let origin_of = |topic: &str, partition: i32| {
        origins
            .iter()
            .find(|((t, p), _)| *p == partition && t == topic)
            .and_then(|(_, o)| *o)
    };
    if decoded.waits() {
        // The writer fetches a batch's schemas and plans its tables before storing it;
        // stored without them, its records would be lost. Not reached.
        return Err(sqlx::Error::Io(std::io::Error::other(
            "a batch waiting for writers' schemas or tables was given to store",
        )));
    }
    let mut claims = claims_of(records, origin_of);
    let mut kept: Option<(Vec<Record>, DecodedBatch)> = None;
    let mut discard: Vec<Partition> = Vec::new();
    let mut behind: Vec<Behind> = Vec::new();
    let mut skipped = 0u64;
    loop {
        let (now_records, now_decoded) = match &kept {
            Some((r, d)) => (r.as_slice(), d),
            None => (records, decoded),
        };
        let verdicts = if now_records.is_empty() {
            None
        } else {
            let batch = Batch {
                group,
                records: now_records,
                decoded: now_decoded,
                claims: &claims,
                discard: &discard,
                committed,
            };
            match store_claimed(conn, &batch).await? {
                Claimed::Stored(Stored::Done(done)) => Some(Ok(done)),
                Claimed::Stored(rewound) => return Ok(rewound),
                Claimed::Adjust(verdicts) => Some(Err(verdicts)),
            }
        };
        let verdicts = match verdicts {
            Some(Err(verdicts)) => verdicts,
            done => {
                // Stored, or nothing left to store (every record applied before or behind).
                let done = done.and_then(Result::ok);
                return Ok(Stored::Done(settled(done, behind, skipped, group)));
            }
        };
        let at = left_in(now_records, &verdicts, &mut skipped);
        let next: Vec<Record> = at
            .iter()
            .filter_map(|&i| now_records.get(i).cloned())
            .collect();
        set_aside(&verdicts, &mut behind, &mut discard, group);
        // The partitions whose log went back continue as if assigned without an offset.
        claims = claims_after(claims, &next, &discard);
        // The records kept keep their decoding: decoding them again would need the writers'
        // schemas in the cache once more (a refusal expires, a schema may be evicted), and
        // nothing would fetch them for this store (docs/ARCHITECTURE.md#registry-formats).
        let decoded = now_decoded.kept(now_records, &at);
        kept = Some((next, decoded));
    }
}

/// What a batch came to once stored (`done`), or once nothing was left to store (`None`):
/// with the records left out as applied before counted as skipped, and the partitions
/// behind.
fn settled(done: Option<Done>, behind: Vec<Behind>, skipped: u64, group: &str) -> Done {
    let mut done = done.unwrap_or_else(|| Done {
        report: BatchReport::default(),
        dead: Vec::new(),
        behind: Vec::new(),
        tables: ByTable::default(),
    });
    done.report.records += skipped;
    done.report.write.skipped += skipped;
    done.behind = behind;
    if skipped > 0 {
        tracing::info!(
            group,
            skipped,
            written = done.report.records - skipped,
            "records below PostgreSQL's offset left out: applied before (a crash \
             between the database and the Kafka commit, or a batch read ahead of \
             a rebalance); the rest stored"
        );
    }
    done
}

/// The indices of the records of `records` the claim's `verdicts` keep, in order; those
/// applied before are counted in `skipped`, those of a partition behind dropped.
fn left_in(records: &[Record], verdicts: &[(Claim, Verdict)], skipped: &mut u64) -> Vec<usize> {
    let mut next: Vec<usize> = Vec::with_capacity(records.len());
    for (index, r) in records.iter().enumerate() {
        let verdict = verdicts
            .iter()
            .find(|(c, _)| c.partition == r.partition && c.topic == r.topic)
            .map(|(_, v)| *v);
        match verdict {
            Some(Verdict::Skip(s)) if r.offset < s => *skipped += 1,
            Some(Verdict::Behind(_)) => {}
            _ => next.push(index),
        }
    }
    next
}

/// Notes the partitions the claim's `verdicts` find behind (read again from PostgreSQL's
/// offset) and those whose log went back (their stored offset discarded).
fn set_aside(
    verdicts: &[(Claim, Verdict)],
    behind: &mut Vec<Behind>,
    discard: &mut Vec<Partition>,
    group: &str,
) {
    for (claim, verdict) in verdicts {
        let key = (claim.topic.clone(), claim.partition);
        match *verdict {
            Verdict::Behind(postgres) => behind.push(Behind {
                topic: claim.topic.clone(),
                partition: claim.partition,
                postgres,
                fetched_from: match claim.origin {
                    Some(Origin::At(from)) => from,
                    _ => claim.first,
                },
            }),
            Verdict::LogWentBack => {
                tracing::warn!(group, topic = %claim.topic, partition = claim.partition,
                    first = claim.first, origin = ?claim.origin,
                    "the partition's records start below where its fetch continued (the \
                     topic was created again, or its records removed): PostgreSQL's \
                     offset of the old log discarded, the records stored");
                discard.push(key);
            }
            _ => {}
        }
    }
}

/// The claims of the records kept, `next`: each partition's origin as before, except that a
/// partition in `discard` (its log went back) continues as if assigned without an offset.
fn claims_after(previous: Vec<Claim>, next: &[Record], discard: &[Partition]) -> Vec<Claim> {
    claims_of(next, |topic, partition| {
        previous
            .iter()
            .find(|c| c.partition == partition && c.topic == topic)
            .and_then(|c| c.origin)
            .map(|o| {
                let new_log = discard.iter().any(|(t, p)| *p == partition && t == topic);
                if new_log { Origin::Reset } else { o }
            })
    })
}

/// A batch after its claim: stored (or rewound), or the verdicts that leave part of it out.
enum Claimed {
    Stored(Stored),
    Adjust(Vec<(Claim, Verdict)>),
}

/// Writes the batch (optimistically, then with savepoint isolation if a row breaks a
/// constraint), unless its claim finds something to leave out.
async fn store_claimed(conn: &mut PgConnection, batch: &Batch<'_>) -> Result<Claimed, sqlx::Error> {
    // Almost every batch is clean: write it without savepoints (two round trips fewer).
    // If a row breaks a constraint, that transaction is rolled back and the batch is
    // written again with savepoint isolation.
    for isolation in [Isolation::Optimistic, Isolation::Savepoints] {
        match store_batch_in(conn, batch, isolation).await? {
            Attempt::Stored(stored) => return Ok(Claimed::Stored(stored)),
            Attempt::Adjust(verdicts) => return Ok(Claimed::Adjust(verdicts)),
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
    /// The claim's verdicts leave part of the batch out (rolled back).
    Adjust(Vec<(Claim, Verdict)>),
    /// A row broke a constraint: try again with savepoint isolation (rolled back).
    Isolate,
}

/// One batch as its transaction sees it: what it is written through and what it holds.
/// Each attempt at the transaction reads it again from the start.
struct Batch<'a> {
    /// The pipeline's consumer group, recorded with each dead letter.
    group: &'a str,
    /// The records, which the decoded messages and every rejection point into by index.
    records: &'a [Record],
    /// Their decoding: the valid messages and the records that failed it.
    decoded: &'a DecodedBatch,
    /// The batch's partitions as read: the claim moves each partition's offset past the
    /// records read, left out or not.
    claims: &'a [Claim],
    /// Partitions whose stored offset belongs to a log that is gone: deleted first.
    discard: &'a [Partition],
    /// The next offset this writer committed, per partition.
    committed: &'a HashMap<Partition, i64>,
}

/// One attempt at a batch's transaction, its rows written as `isolation` says.
async fn store_batch_in(
    conn: &mut PgConnection,
    batch: &Batch<'_>,
    isolation: Isolation,
) -> Result<Attempt, sqlx::Error> {
    let &Batch {
        group,
        records,
        decoded,
        claims,
        discard,
        committed,
    } = batch;
    let mut report = BatchReport {
        records: records.len() as u64,
        decode_errors: decoded.rejected.len() as u64,
        ..BatchReport::default()
    };
    let mut dead = decoded.rejected.clone();
    let mut tx = conn.begin().await?;
    if !discard.is_empty() {
        offsets::discard(&mut tx, group, discard).await?;
    }
    let next: Vec<offsets::Claimed> = claims
        .iter()
        .map(|c| offsets::Claimed {
            topic: c.topic.clone(),
            partition: c.partition,
            next: c.next,
            last_record_ms: c.last_record_ms,
        })
        .collect();
    let before = offsets::claim(&mut tx, group, &next).await?;
    let verdicts = match judge_claims(claims, &before, committed) {
        Ok(verdicts) => verdicts,
        Err(rewind) => return Ok(Attempt::Stored(Stored::Rewound(rewind))),
    };
    if verdicts.iter().any(|(_, v)| *v != Verdict::Write) {
        return Ok(Attempt::Adjust(verdicts)); // dropping `tx` rolls the claim back
    }

    report.write.skipped += decoded.ignored.len() as u64;
    let mut tables = ByTable::default();
    tables.count_decode_kinds(&decoded.rejected);
    let mut written = Written {
        report: &mut report,
        dead: &mut dead,
        tables: &mut tables,
    };
    if let Some(stopped) = write_groups(&mut tx, decoded, records, isolation, &mut written).await? {
        return Ok(stopped); // dropping `tx` rolls the attempt back
    }
    tables.add_dead(&dead);

    report.dead_letters_inserted = insert_dead_letters(&mut tx, group, &dead).await?;
    tx.commit().await?;
    Ok(Attempt::Stored(Stored::Done(Done {
        report,
        dead,
        behind: Vec::new(),
        tables,
    })))
}

/// Each table's rows through its sink, one run after another, in the batch's transaction:
/// their outcomes and dead letters added to `report` and `dead`. `Some` when the attempt
/// ends here (rolled back by the caller): a row broke a constraint (isolate), or a table
/// changed under its plan.
async fn write_groups(
    tx: &mut PgConnection,
    decoded: &DecodedBatch,
    records: &[Record],
    isolation: Isolation,
    out: &mut Written<'_>,
) -> Result<Option<Attempt>, sqlx::Error> {
    for batch_group in &decoded.groups {
        let sink: &Declared = &batch_group.sink;
        let Written {
            report,
            dead,
            tables,
        } = out;
        let table = tables.of(sink.table());
        let gone = |error: sqlx::Error| {
            if table_changed(&error) {
                let table = sink.plan().table.clone();
                return Ok(Some(Attempt::Stored(Stored::TableGone(TableGone {
                    table,
                    error,
                }))));
            }
            Err(error)
        };
        let Bound { rows, rejected } = match sink.bind(tx, &batch_group.messages).await {
            Ok(bound) => bound,
            Err(error) => return gone(error),
        };
        report.unknown_applications += rejected.len() as u64;
        dead.extend(
            rejected.into_iter().map(|r| {
                dead_letter(&records[r.record], r.kind, r.reason).with_table(sink.table())
            }),
        );
        let written = match write_runs(tx, sink, rows, records, isolation).await {
            Ok(written) => written,
            Err(error) => return gone(error),
        };
        let Some((dropped, written)) = written else {
            return Ok(Some(Attempt::Isolate));
        };
        report.write.skipped += dropped;
        report.write += written.outcome;
        report.write.skipped -= written.revived;
        table.write.skipped += dropped;
        table.write += written.outcome;
        table.write.skipped -= written.revived;
        for letter in &written.rejected {
            match letter.kind {
                DeadLetterKind::ConstraintViolation => report.constraint_violations += 1,
                _ => report.unknown_applications += 1,
            }
        }
        dead.extend(
            written
                .rejected
                .into_iter()
                .map(|letter| letter.with_table(sink.table())),
        );
    }
    Ok(None)
}

/// What an attempt's writes add up to: the batch's report, its dead letters, each table's
/// share.
struct Written<'a> {
    report: &'a mut BatchReport,
    dead: &'a mut Vec<DeadLetter>,
    tables: &'a mut ByTable,
}

/// Each claim's verdict, from PostgreSQL's offsets `before` the claim and the offsets this
/// writer `committed`; the first partition whose offset PostgreSQL lost, if one did.
fn judge_claims(
    claims: &[Claim],
    before: &HashMap<Partition, Option<i64>>,
    committed: &HashMap<Partition, i64>,
) -> Result<Vec<(Claim, Verdict)>, Rewind> {
    let mut verdicts = Vec::with_capacity(claims.len());
    for claim in claims {
        let key = (claim.topic.clone(), claim.partition);
        let stored = before.get(&key).copied().flatten();
        match judge(claim, stored, committed.get(&key).copied()) {
            Verdict::Lost {
                postgres,
                committed,
            } => {
                return Err(Rewind {
                    topic: claim.topic.clone(),
                    partition: claim.partition,
                    postgres,
                    committed,
                });
            }
            verdict => verdicts.push((claim.clone(), verdict)),
        }
    }
    Ok(verdicts)
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
