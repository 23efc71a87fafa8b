//! Writing a batch so that one bad row cannot sink it (docs/ARCHITECTURE.md#errors).
//!
//! A row can pass decoding and still break a constraint at write time (SQLSTATE classes 22
//! and 23 — e.g. its application was deleted between resolve and insert — or P0, a user's
//! trigger raising for it). The batch's
//! upsert runs under a savepoint; if it fails with such an error, the savepoint is rolled
//! back and the rows are bisected, each half under its own savepoint, until the offending
//! rows stand alone. They are dead-lettered with their SQLSTATE and message; every other
//! row is written in the same transaction. A transient or fatal error is returned as is:
//! a database outage is never a dead letter.
//!
//! The bisection ([`isolate`]) only sees a [`RowStore`]: the PostgreSQL one here, and a
//! table-driven fake in the tests, which check which rows end up written, rejected or revived
//! without a database.

use crate::record::dead_letter;
use crate::sink::{Declared, Recheck, Rejection};
use sluice_core::dedupe::Deduped;
use sluice_core::disposition::sqlstate::{CARDINALITY_VIOLATION, FOREIGN_KEY_VIOLATION};
use sluice_core::{DeadLetter, DeadLetterKind, Disposition, WriteOutcome};
use sluice_kafka::Record;
use sluice_postgres::{disposition, sqlstate};
use sluice_sinks::SinkRow;
use sqlx::PgConnection;
use std::collections::{HashMap, HashSet};

/// The result of a write: what the rows did and which rows were isolated.
#[derive(Debug, Default)]
pub struct Written {
    /// Counters of the rows that were written.
    pub outcome: WriteOutcome,
    /// Dead letters for the rows that broke a constraint.
    pub rejected: Vec<DeadLetter>,
    /// Superseded rows written in place of a rejected winner (they were counted as
    /// de-duplicated; their write outcome is in `outcome` now).
    pub revived: u64,
}

/// How a batch is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// One statement, no savepoint: the fast path for a clean batch.
    Optimistic,
    /// Savepoints and bisection: isolates the rows that break a constraint.
    Savepoints,
}

/// Upserts the de-duplicated rows, isolating rows that break a constraint; a rejected row
/// is replaced by the best row it superseded, as if the two had come in separate batches.
///
/// With [`Isolation::Optimistic`] the whole batch is upserted without a savepoint, and
/// `Ok(None)` says a row broke a constraint: the transaction is aborted, and the caller
/// rolls it back and writes the batch again with [`Isolation::Savepoints`].
pub async fn write_isolating(
    conn: &mut PgConnection,
    sink: &Declared,
    deduped: Deduped<SinkRow>,
    records: &[Record],
    isolation: Isolation,
) -> Result<Option<Written>, sqlx::Error> {
    if isolation == Isolation::Optimistic && !deduped.rows.is_empty() {
        return match sink.upsert(conn, &deduped.rows, records).await {
            Ok(outcome) => Ok(Some(Written {
                outcome,
                ..Written::default()
            })),
            Err(error) if disposition(&error) == Disposition::DeadLetter => Ok(None),
            Err(error) => Err(error),
        };
    }
    let mut store = PgRows {
        conn,
        sink,
        records,
    };
    let isolated = isolate(&mut store, Declared::record, deduped).await?;
    Ok(Some(Written {
        outcome: isolated.outcome,
        rejected: isolated
            .rejected
            .into_iter()
            .map(|r| dead_letter(&records[r.record], r.kind, r.reason))
            .collect(),
        revived: isolated.revived,
    }))
}

/// Writes a batch's bound rows run by run ([`Declared::runs`]), each de-duplicated and
/// written by [`write_isolating`] after the one before it, so a batch has the effect of its
/// records applied one by one in offset order whatever its size (docs/ARCHITECTURE.md#sinks).
/// Returns the rows de-duplication dropped and what was written; `Ok(None)` as
/// [`write_isolating`] (a row broke a constraint on the optimistic path).
pub async fn write_runs(
    conn: &mut PgConnection,
    sink: &Declared,
    rows: Vec<SinkRow>,
    records: &[Record],
    isolation: Isolation,
) -> Result<Option<(u64, Written)>, sqlx::Error> {
    let mut dropped = 0;
    let mut written = Written::default();
    for run in sink.runs(rows) {
        let deduped = sink.dedupe(run);
        dropped += deduped.dropped() as u64;
        let Some(part) = write_isolating(conn, sink, deduped, records, isolation).await? else {
            return Ok(None);
        };
        written.outcome += part.outcome;
        written.rejected.extend(part.rejected);
        written.revived += part.revived;
    }
    Ok(Some((dropped, written)))
}

/// A row-level failure: the statement broke a constraint (SQLSTATE class 22, 23 or P0), its
/// savepoint was rolled back, and the transaction goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowError {
    /// The SQLSTATE.
    pub sqlstate: String,
    /// The server's message.
    pub message: String,
}

/// What the isolation needs from the database.
pub(crate) trait RowStore<R> {
    /// Upserts `rows` with one statement under a savepoint. `Ok(Err(_))`: a row broke a
    /// constraint and the savepoint was rolled back (nothing of `rows` is written).
    async fn upsert(&mut self, rows: &[R]) -> Result<Result<WriteOutcome, RowError>, sqlx::Error>;
    /// Looks the row's references up again, past any cache.
    async fn recheck(&mut self, row: &R) -> Result<Recheck<R>, sqlx::Error>;
}

/// What [`isolate`] did.
#[derive(Debug, Default)]
pub(crate) struct Isolated {
    /// Counters of the rows written.
    pub outcome: WriteOutcome,
    /// The rows isolated, in the order they were found.
    pub rejected: Vec<Rejection>,
    /// Runners-up written in place of a rejected winner.
    pub revived: u64,
}

/// Bisects `deduped` until every row that breaks a constraint stands alone.
///
/// Runner-up and revived logic: de-duplication kept one row per natural key and set the
/// others aside (`superseded`, best first). When a kept row is rejected, its key would
/// otherwise lose every delivery of this batch, although a later batch holding only the
/// runner-up would have written it. So the best runner-up is written in its place (it is
/// *revived*, counted in [`Isolated::revived`]), and the remaining runners-up move behind it:
/// if the revived row is rejected too, the next one takes its place, and so on. The outcome
/// is therefore the same as if each delivery had come in a batch of its own.
///
/// A chunk that meets a row twice (21000: two keys the table holds as equal) is written one
/// row per statement in record order, as separate batches would write it.
///
/// A foreign-key violation (23503) usually means a cached reference went stale (the
/// application was deleted, perhaps re-created with a new id, within the cache's TTL): the
/// row's references are looked up again inside the transaction, once per row
/// ([`Declared::recheck`]); a new value re-binds the row, a missing one makes it an
/// unknown-reference dead letter (`unknown_application`, or the kind the mapping names), and
/// only the same values again are a constraint violation.
pub(crate) async fn isolate<R, S: RowStore<R>>(
    store: &mut S,
    record_of: impl Fn(&R) -> usize,
    deduped: Deduped<R>,
) -> Result<Isolated, sqlx::Error> {
    let mut done = Isolated::default();
    let mut re_resolved: HashSet<usize> = HashSet::new();
    let Deduped { rows, superseded } = deduped;
    let mut runners_up: HashMap<usize, Vec<R>> = rows
        .iter()
        .zip(superseded)
        .filter(|(_, losers)| !losers.is_empty())
        .map(|(row, losers)| (record_of(row), losers))
        .collect();
    let mut pending = vec![rows];
    while let Some(mut chunk) = pending.pop() {
        if chunk.is_empty() {
            continue;
        }
        let error = match store.upsert(&chunk).await? {
            Ok(outcome) => {
                done.outcome += outcome;
                continue;
            }
            Err(error) => error,
        };
        if chunk.len() > 1 && error.sqlstate == CARDINALITY_VIOLATION {
            // Two rows the table holds as one key: one statement each, in record order, as
            // if each had come in a batch of its own.
            chunk.sort_by_key(|row| std::cmp::Reverse(record_of(row)));
            pending.extend(chunk.into_iter().map(|row| vec![row]));
            continue;
        }
        if chunk.len() > 1 {
            let second = chunk.split_off(chunk.len() / 2);
            pending.push(second);
            pending.push(chunk);
            continue;
        }
        let row = chunk.swap_remove(0);
        let record = record_of(&row);
        if error.sqlstate == FOREIGN_KEY_VIOLATION && re_resolved.insert(record) {
            match store.recheck(&row).await? {
                Recheck::Rebound(rebound) => {
                    pending.push(vec![rebound]);
                    continue;
                }
                Recheck::Unchanged => {}
                Recheck::Gone(rejection) => {
                    done.rejected.push(rejection);
                    continue;
                }
            }
        }
        done.rejected.push(Rejection {
            record,
            kind: DeadLetterKind::ConstraintViolation,
            reason: match sluice_sinks::raised_reason(&error.message) {
                Some(reason) => reason.to_owned(),
                None => format!("SQLSTATE {}: {}", error.sqlstate, error.message),
            },
        });
        if let Some(mut losers) = runners_up.remove(&record)
            && !losers.is_empty()
        {
            let next = losers.remove(0);
            if !losers.is_empty() {
                runners_up.insert(record_of(&next), losers);
            }
            done.revived += 1;
            pending.push(vec![next]);
        }
    }
    Ok(done)
}

/// The PostgreSQL [`RowStore`]: the sink's statement under a savepoint on the batch's
/// transaction.
struct PgRows<'a> {
    conn: &'a mut PgConnection,
    sink: &'a Declared,
    records: &'a [Record],
}

async fn exec(conn: &mut PgConnection, sql: &'static str) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(sql).execute(conn).await.map(|_| ())
}

impl RowStore<SinkRow> for PgRows<'_> {
    async fn upsert(
        &mut self,
        rows: &[SinkRow],
    ) -> Result<Result<WriteOutcome, RowError>, sqlx::Error> {
        exec(self.conn, "SAVEPOINT sluice_write").await?;
        match self.sink.upsert(self.conn, rows, self.records).await {
            Ok(outcome) => {
                exec(self.conn, "RELEASE SAVEPOINT sluice_write").await?;
                Ok(Ok(outcome))
            }
            Err(error) if disposition(&error) == Disposition::DeadLetter => {
                exec(
                    self.conn,
                    "ROLLBACK TO SAVEPOINT sluice_write; RELEASE SAVEPOINT sluice_write",
                )
                .await?;
                Ok(Err(RowError {
                    sqlstate: sqlstate(&error).unwrap_or_default(),
                    message: database_message(&error),
                }))
            }
            Err(error) => Err(error),
        }
    }

    async fn recheck(&mut self, row: &SinkRow) -> Result<Recheck<SinkRow>, sqlx::Error> {
        self.sink.recheck(self.conn, row).await
    }
}

fn database_message(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Database(db) => db.message().to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
