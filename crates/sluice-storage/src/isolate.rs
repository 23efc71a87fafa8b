//! Writing a batch so that one bad row cannot sink it (docs/ARCHITECTURE.md#errors, last paragraph).
//!
//! A row can pass decoding and still break a constraint at write time (SQLSTATE classes 22
//! and 23 — e.g. its application was deleted between resolve and insert). The batch's
//! upsert runs under a savepoint; if it fails with such an error, the savepoint is rolled
//! back and the rows are bisected, each half under its own savepoint, until the offending
//! rows stand alone. They are dead-lettered with their SQLSTATE and message; every other
//! row is written in the same transaction. A transient or fatal error is returned as is:
//! a database outage is never a dead letter.

use crate::batch::dead_letter;
use crate::kind::TopicKind;
use sluice_core::dedupe::Deduped;
use sluice_core::{Bound, DeadLetter, DeadLetterKind, Disposition, WriteOutcome};
use sluice_kafka::Record;
use sluice_postgres::ApplicationResolver;
use sluice_postgres::{disposition, sqlstate};
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

async fn exec(conn: &mut PgConnection, sql: &'static str) -> Result<(), sqlx::Error> {
    sqlx::raw_sql(sql).execute(conn).await.map(|_| ())
}

/// Upserts the de-duplicated rows, isolating rows that break a constraint; a rejected row
/// is replaced by the best row it superseded, as if the two had come in separate batches.
///
/// A foreign-key violation (23503) usually means the cached application id went stale (the
/// app was deleted, perhaps re-created with a new id, within the cache's TTL): the name is
/// resolved again inside the transaction; a new id re-binds the row, no id makes it an
/// `unknown_application` dead letter, and only the same id again is a constraint violation.
///
/// With [`Isolation::Optimistic`] the whole batch is upserted without a savepoint, and
/// `Ok(None)` says a row broke a constraint: the transaction is aborted, and the caller
/// rolls it back and writes the batch again with [`Isolation::Savepoints`].
pub async fn write_isolating<K: TopicKind>(
    conn: &mut PgConnection,
    resolver: &ApplicationResolver,
    deduped: Deduped<Bound<K::Message>>,
    records: &[Record],
    isolation: Isolation,
) -> Result<Option<Written>, sqlx::Error> {
    let mut written = Written::default();
    if isolation == Isolation::Optimistic && !deduped.rows.is_empty() {
        return match K::upsert(conn, &deduped.rows).await {
            Ok(outcome) => {
                written.outcome = outcome;
                Ok(Some(written))
            }
            Err(error) if disposition(&error) == Disposition::DeadLetter => Ok(None),
            Err(error) => Err(error),
        };
    }
    let mut re_resolved: HashSet<usize> = HashSet::new();
    let Deduped { rows, superseded } = deduped;
    let mut runners_up: HashMap<usize, Vec<Bound<K::Message>>> = rows
        .iter()
        .zip(superseded)
        .filter(|(_, losers)| !losers.is_empty())
        .map(|(row, losers)| (row.record, losers))
        .collect();
    let mut pending = vec![rows];
    while let Some(mut chunk) = pending.pop() {
        if chunk.is_empty() {
            continue;
        }
        exec(conn, "SAVEPOINT sluice_write").await?;
        match K::upsert(conn, &chunk).await {
            Ok(outcome) => {
                exec(conn, "RELEASE SAVEPOINT sluice_write").await?;
                written.outcome += outcome;
            }
            Err(error) if disposition(&error) == Disposition::DeadLetter => {
                exec(
                    conn,
                    "ROLLBACK TO SAVEPOINT sluice_write; RELEASE SAVEPOINT sluice_write",
                )
                .await?;
                if chunk.len() == 1 {
                    let code = sqlstate(&error).unwrap_or_default();
                    if code == "23503" && re_resolved.insert(chunk[0].record) {
                        let mut row = chunk.swap_remove(0);
                        let name = K::package_name(&row.message).to_owned();
                        resolver.forget(&name);
                        let (ids, _) = resolver.resolve(conn, [name.as_str()]).await?;
                        match ids.get(&name) {
                            Some(&id) if id != row.application_id => {
                                row.application_id = id;
                                pending.push(vec![row]);
                                continue;
                            }
                            Some(_) => chunk.push(row),
                            None => {
                                written.rejected.push(dead_letter(
                                    &records[row.record],
                                    DeadLetterKind::UnknownApplication,
                                    format!(
                                        "field `package_name`: unknown application `{}` \
                                         (deleted after it was resolved)",
                                        crate::batch::truncate(&name, 80)
                                    ),
                                ));
                                continue;
                            }
                        }
                    }
                    let row = &chunk[0];
                    written.rejected.push(dead_letter(
                        &records[row.record],
                        DeadLetterKind::ConstraintViolation,
                        format!("SQLSTATE {code}: {}", database_message(&error)),
                    ));
                    if let Some(mut losers) = runners_up.remove(&row.record)
                        && !losers.is_empty()
                    {
                        let next = losers.remove(0);
                        if !losers.is_empty() {
                            runners_up.insert(next.record, losers);
                        }
                        written.revived += 1;
                        pending.push(vec![next]);
                    }
                } else {
                    let second = chunk.split_off(chunk.len() / 2);
                    pending.push(second);
                    pending.push(chunk);
                }
            }
            Err(error) => return Err(error),
        }
    }
    Ok(Some(written))
}

/// How a batch is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// One statement, no savepoint: the fast path for a clean batch.
    Optimistic,
    /// Savepoints and bisection: isolates the rows that break a constraint.
    Savepoints,
}

fn database_message(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Database(db) => db.message().to_owned(),
        other => other.to_string(),
    }
}
