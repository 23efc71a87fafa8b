//! Rows that wait for a key change's delete (docs/ARCHITECTURE.md#sinks): a create that
//! keeps a value Debezium did not send and whose delete has not been applied yet (the old
//! key's partition is behind), and every later row of its key, wait in
//! `debezium_held_rows`, in order, in the same transaction as the batch that brought them.
//! The delete, when it comes, applies them in its own transaction.

use crate::bind::{DeclaredUpsertError, Scalar, bind};
use crate::repo::insert_dead_letters;
use chrono::{DateTime, Utc};
use sluice_core::dead_letter::{RecordCoords, RecordHeader};
use sluice_core::disposition::classify_sqlstate;
use sluice_core::{DeadLetter, DeadLetterKind, Disposition, WriteOutcome};
use sluice_sinks::{
    Cell, DEFAULT_KEY_CHANGE_WAIT, EXPIRED_HELD, HeldStatements, LOCK_HELD, Moved, NEXT_HELD,
    ORPHAN_HELD, RowOp, SinkPlan, SinkRow, TAKE_HELD,
};
use sqlx::PgConnection;
use std::future::Future;
use std::pin::Pin;

/// A write of rows in progress (boxed: the writer calls back into this module).
pub(crate) type BoxedWrite<'a> =
    Pin<Box<dyn Future<Output = Result<WriteOutcome, DeclaredUpsertError>> + Send + 'a>>;

/// How the rows that waited are written when they are applied: the declared sink's writer
/// (`crate::declared`), passed in, as it calls this module after a key change's delete.
pub(crate) type WriteRows =
    for<'a> fn(&'a mut PgConnection, &'a SinkPlan, &'a [&'a SinkRow]) -> BoxedWrite<'a>;

/// A waiting row as stored: what the declared writer needs of a [`SinkRow`], and its record.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct HeldRow {
    /// The plan's columns when the row was put to wait, by name: the table may be planned
    /// again before it is applied (a column added or dropped), and its cells are then placed
    /// by name. Empty in rows held before names were kept (cells by position).
    #[serde(default)]
    columns: Vec<String>,
    cells: Vec<Cell>,
    op: RowOp,
    keep: Vec<usize>,
    moved_from: Option<Moved>,
    moving_to: Option<Moved>,
    /// The record it came from, to dead-letter if it can never be applied.
    origin: Option<HeldOrigin>,
}

/// A waiting row's record, as its dead letter keeps it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct HeldOrigin {
    topic: String,
    partition: i32,
    offset: i64,
    key: Option<Vec<u8>>,
    payload: Option<Vec<u8>>,
    payload_size: i32,
    kafka_timestamp: Option<DateTime<Utc>>,
    replay_count: i32,
    headers: Vec<RecordHeader>,
}

impl HeldOrigin {
    fn of(letter: DeadLetter) -> Self {
        Self {
            topic: letter.coords.topic,
            partition: letter.coords.partition,
            offset: letter.coords.offset,
            key: letter.key,
            payload: letter.payload,
            payload_size: letter.payload_size,
            kafka_timestamp: letter.kafka_timestamp,
            replay_count: letter.replay_count,
            headers: letter.headers,
        }
    }

    /// Its dead letter, for `reason`: a row of `table` that could not be applied.
    fn dead_letter(self, reason: String, table: &str) -> DeadLetter {
        DeadLetter {
            coords: RecordCoords {
                topic: self.topic,
                partition: self.partition,
                offset: self.offset,
            },
            key: self.key,
            payload: self.payload,
            payload_size: self.payload_size,
            kafka_timestamp: self.kafka_timestamp,
            kind: DeadLetterKind::ConstraintViolation,
            reason,
            replay_count: self.replay_count,
            headers: self.headers,
            table: Some(table.into()),
        }
    }
}

impl HeldRow {
    fn of(row: &SinkRow, origin: Option<DeadLetter>, plan: &SinkPlan) -> Self {
        Self {
            columns: plan.columns.iter().map(|c| c.column.clone()).collect(),
            cells: row.cells().cloned().collect(),
            op: row.op.clone(),
            keep: row.keep.to_vec(),
            moved_from: row.moved_from.clone(),
            moving_to: row.moving_to.clone(),
            origin: origin.map(HeldOrigin::of),
        }
    }

    /// The row in `plan`'s columns, placed by name: a column the row was not decoded for
    /// (added to the table since) is NULL.
    fn into_row(self, plan: &SinkPlan) -> (SinkRow, Option<HeldOrigin>) {
        let now: Vec<&str> = plan.columns.iter().map(|c| c.column.as_str()).collect();
        let (cells, keep) = placed(&self.columns, self.cells, self.keep, &now);
        let mut row = SinkRow::new(0, cells);
        row.op = self.op;
        row.keep = keep.into();
        row.moved_from = self.moved_from;
        row.moving_to = self.moving_to;
        (row, self.origin)
    }
}

/// A held row's cells and kept columns, decoded under the columns `then` (by name), placed in
/// the columns `now`. The same columns, or `then` not known (a row held before names were
/// kept), leave them as they are. A column of `now` not in `then` is NULL, as a start would
/// have planned it — never kept: a kept value needs a stored row, which a row that kept
/// nothing before may not have.
fn placed(
    then: &[String],
    cells: Vec<Cell>,
    keep: Vec<usize>,
    now: &[&str],
) -> (Vec<Cell>, Vec<usize>) {
    if then.is_empty() || then.iter().map(String::as_str).eq(now.iter().copied()) {
        return (cells, keep);
    }
    let mut kept = Vec::new();
    let placed = now
        .iter()
        .enumerate()
        .map(|(index, name)| match then.iter().position(|n| n == name) {
            Some(was) => {
                if keep.contains(&was) {
                    kept.push(index);
                }
                cells.get(was).cloned().unwrap_or(Cell::Null)
            }
            None => Cell::Null,
        })
        .collect();
    (placed, kept)
}

/// Whether a row waits for its key change's delete while that has not come: a create that
/// keeps a value (it reads what the delete sets aside) and, without an LSN, any create of a
/// key change. Without an LSN the set-aside rows of changes between the same keys queue up and
/// a create takes the oldest: a create applied before its delete would leave that delete's row
/// in the queue, for the next change's create to read (docs/ARCHITECTURE.md#sinks).
fn waits_for_delete(row: &SinkRow) -> bool {
    row.upserts()
        && row
            .moved_from
            .as_ref()
            .is_some_and(|moved| !row.keep.is_empty() || moved.lsn.is_none())
}

/// The seconds a create of `plan` waits for its delete.
fn wait_seconds(plan: &SinkPlan) -> f64 {
    let seconds = plan
        .modes
        .map_or(DEFAULT_KEY_CHANGE_WAIT, |modes| modes.key_change_wait);
    seconds as f64
}

/// Applies the rows waiting under keys whose first row waited longer than a create may: it
/// then reads the old key's row as it is (or is orphaned when there is none). What they wrote.
async fn expire(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    write: WriteRows,
) -> Result<WriteOutcome, DeclaredUpsertError> {
    let keys: Vec<String> = sqlx::query_scalar(EXPIRED_HELD)
        .bind(&plan.table)
        .bind(wait_seconds(plan))
        .fetch_all(&mut *conn)
        .await?;
    let mut outcome = WriteOutcome::default();
    for row_key in keys {
        sqlx::query(LOCK_HELD)
            .bind(&plan.table)
            .bind(&row_key)
            .execute(&mut *conn)
            .await?;
        tracing::warn!(
            table = %plan.table,
            sink = %plan.name,
            key = %row_key,
            wait_s = wait_seconds(plan),
            "a key change's create waited longer than it may for its delete: it reads the old \
             key's row as it is"
        );
        outcome += drain(conn, plan, &row_key, write).await?;
    }
    Ok(outcome)
}

/// Puts the rows of `rows` that must wait (their key has rows waiting, or they are a create
/// whose delete has not come) to wait, first applying the queues whose create waited longer
/// than it may; the others, in order, and what was written (the rows put to wait: skipped).
pub(crate) async fn hold<'r>(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    held: &HeldStatements,
    rows: &[&'r SinkRow],
    origin: &(dyn Fn(usize) -> Option<DeadLetter> + Sync),
    write: WriteRows,
) -> Result<(Vec<&'r SinkRow>, WriteOutcome), DeclaredUpsertError> {
    let candidates: Vec<&SinkRow> = rows
        .iter()
        .copied()
        .filter(|row| row.op != RowOp::Ignore)
        .collect();
    let mut outcome = WriteOutcome::default();
    if candidates.is_empty() {
        return Ok((rows.to_vec(), outcome));
    }
    // Rows of a key wait only after the writer of the key's partition put them to wait (this
    // one): a row found not to wait stays so. One found to wait may be applied meanwhile by
    // the writer of its delete: its key is locked, and it is checked again.
    let (mut waiting, expired) = must_wait(conn, held, plan, &candidates).await?;
    if expired {
        outcome += expire(conn, plan, write).await?;
        waiting = must_wait(conn, held, plan, &candidates).await?.0;
    }
    if !waiting.is_empty() {
        let mut lock = sqlx::query_scalar::<_, String>(&held.key);
        for &index in &plan.delete_key {
            let cells = waiting.iter().map(|row| row.cell(index).unwrap_or(&NULL));
            lock = key_cells(lock, plan, index, cells)?;
        }
        lock.fetch_all(&mut *conn).await?;
        waiting = must_wait(conn, held, plan, &waiting).await?.0;
    }
    if waiting.is_empty() {
        return Ok((rows.to_vec(), outcome));
    }
    let (held_rows, passing): (Vec<&SinkRow>, Vec<&SinkRow>) = rows
        .iter()
        .copied()
        .partition(|row| waiting.iter().any(|w| std::ptr::eq(*w, *row)));
    let data: Vec<serde_json::Value> = held_rows
        .iter()
        .map(|row| serde_json::to_value(HeldRow::of(row, origin(row.record), plan)))
        .collect::<Result<_, _>>()
        .map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    let seqs: Vec<i64> = bind_waits(sqlx::query_scalar(&held.hold), plan, &held_rows)?
        .bind(data)
        .fetch_all(&mut *conn)
        .await?;
    for (row, seq) in held_rows.iter().zip(seqs) {
        tracing::info!(
            table = %plan.table,
            sink = %plan.name,
            seq,
            waits_for_delete = waits_for_delete(row),
            "a row of a key change waits for the old key's delete (its partition is behind)"
        );
    }
    outcome.skipped += held_rows.len() as u64;
    Ok((passing, outcome))
}

/// Which of `rows` must wait (by the check statement), and whether a create somewhere waited
/// longer than it may.
async fn must_wait<'r>(
    conn: &mut PgConnection,
    held: &HeldStatements,
    plan: &SinkPlan,
    rows: &[&'r SinkRow],
) -> Result<(Vec<&'r SinkRow>, bool), DeclaredUpsertError> {
    let numbers: Vec<i32> = (0..rows.len())
        .map(|n| i32::try_from(n).unwrap_or(i32::MAX))
        .collect();
    let found: Vec<i32> = bind_waits(sqlx::query_scalar(&held.check), plan, rows)?
        .bind(numbers)
        .bind(wait_seconds(plan))
        .fetch_all(&mut *conn)
        .await?;
    let expired = found.contains(&-1);
    let waiting = found
        .into_iter()
        .filter_map(|n| rows.get(usize::try_from(n).ok()?).copied())
        .collect();
    Ok((waiting, expired))
}

/// Binds the arrays the check and the hold share: each row's own key, whether it reads a
/// set-aside row, its old key, its change's LSN.
fn bind_waits<'q, O>(
    mut query: Scalar<'q, O>,
    plan: &SinkPlan,
    rows: &[&'q SinkRow],
) -> Result<Scalar<'q, O>, DeclaredUpsertError> {
    for &index in &plan.delete_key {
        let cells = rows.iter().map(|row| row.cell(index).unwrap_or(&NULL));
        query = key_cells(query, plan, index, cells)?;
    }
    let waits = wait_seconds(plan) > 0.0;
    query = query.bind(
        rows.iter()
            .map(|row| waits && waits_for_delete(row))
            .collect::<Vec<bool>>(),
    );
    for (i, &index) in plan.delete_key.iter().enumerate() {
        let cells = rows.iter().map(|row| match &row.moved_from {
            Some(moved) => moved.key.get(i).unwrap_or(&NULL),
            None => &NULL,
        });
        query = key_cells(query, plan, index, cells)?;
    }
    let lsns: Vec<Option<i64>> = rows
        .iter()
        .map(|row| row.moved_from.as_ref().and_then(|m| m.lsn))
        .collect();
    Ok(query.bind(lsns))
}

/// Binds one key column's cells as its planned array.
fn key_cells<'q, O>(
    query: Scalar<'q, O>,
    plan: &SinkPlan,
    index: usize,
    cells: impl Iterator<Item = &'q Cell>,
) -> Result<Scalar<'q, O>, DeclaredUpsertError> {
    let column = &plan.columns[index];
    Ok(bind(query, &column.column, &column.param_type, cells)?)
}

static NULL: Cell = Cell::Null;

/// Applies, in order, the rows waiting under `key` (a key change's new key, whose delete was
/// just applied) until one still waits for its own delete. What they wrote.
pub(crate) async fn release(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    key: &[Cell],
    write: WriteRows,
) -> Result<WriteOutcome, DeclaredUpsertError> {
    let Some(held) = &plan.held else {
        return Ok(WriteOutcome::default());
    };
    let mut query = sqlx::query_scalar::<_, String>(&held.key);
    for (i, &index) in plan.delete_key.iter().enumerate() {
        query = key_cells(
            query,
            plan,
            index,
            std::iter::once(key.get(i).unwrap_or(&NULL)),
        )?;
    }
    let row_key = query.fetch_one(&mut *conn).await?;
    drain(conn, plan, &row_key, write).await
}

/// Applies, in order, the rows waiting under `row_key` (locked) until one still waits. A row
/// that fails (a create with no old row anywhere: what it keeps cannot be had) is rolled back
/// to a savepoint and dead-lettered with its record (or, held by a caller that gave none, kept
/// and marked orphaned); the rows behind it go on.
fn drain<'a>(
    conn: &'a mut PgConnection,
    plan: &'a SinkPlan,
    row_key: &'a str,
    write: WriteRows,
) -> BoxedWrite<'a> {
    Box::pin(async move {
        let mut outcome = WriteOutcome::default();
        loop {
            let next = sqlx::query_as::<_, (i64, bool, serde_json::Value)>(NEXT_HELD)
                .bind(&plan.table)
                .bind(row_key)
                .bind(wait_seconds(plan))
                .fetch_optional(&mut *conn)
                .await?;
            let Some((seq, waits, data)) = next else {
                break;
            };
            if waits {
                break;
            }
            let (row, origin) = serde_json::from_value::<HeldRow>(data)
                .map_err(|e| sqlx::Error::Decode(Box::new(e)))?
                .into_row(plan);
            sqlx::query("SAVEPOINT sluice_release")
                .execute(&mut *conn)
                .await?;
            sqlx::query(TAKE_HELD)
                .bind(&plan.table)
                .bind(row_key)
                .bind(seq)
                .execute(&mut *conn)
                .await?;
            match write(conn, plan, &[&row]).await {
                Ok(written) => {
                    sqlx::query("RELEASE SAVEPOINT sluice_release")
                        .execute(&mut *conn)
                        .await?;
                    outcome += written;
                }
                // A row's own failure (a constraint, the kept value no row holds); anything
                // else (a deadlock, the connection) fails the transaction, to be retried.
                Err(DeclaredUpsertError::Database(sqlx::Error::Database(error)))
                    if error.code().is_some_and(|code| {
                        classify_sqlstate(&code) == Disposition::DeadLetter
                    }) =>
                {
                    set_aside(conn, plan, row_key, seq, origin, &*error).await?;
                    outcome.skipped += 1;
                }
                Err(other) => return Err(other),
            }
        }
        Ok(outcome)
    })
}

/// Rolls back a waiting row that cannot be applied (`error`, a row's own failure) to its
/// savepoint, and dead-letters it with its record (or, held by a caller that gave none,
/// keeps it marked orphaned).
async fn set_aside(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    row_key: &str,
    seq: i64,
    origin: Option<HeldOrigin>,
    error: &dyn sqlx::error::DatabaseError,
) -> Result<(), DeclaredUpsertError> {
    sqlx::query("ROLLBACK TO SAVEPOINT sluice_release")
        .execute(&mut *conn)
        .await?;
    let reason = match sluice_sinks::raised_reason(error.message()) {
        Some(raised) => format!("after waiting for its key change's delete: {raised}"),
        None => format!(
            "after waiting for its key change's delete: SQLSTATE {}: {}",
            error.code().unwrap_or_default(),
            error.message()
        ),
    };
    tracing::error!(
        table = %plan.table,
        sink = %plan.name,
        key = %row_key,
        seq,
        %reason,
        dead_lettered = origin.is_some(),
        "a row that waited for a key change's delete cannot be applied"
    );
    match origin {
        Some(origin) => {
            sqlx::query(TAKE_HELD)
                .bind(&plan.table)
                .bind(row_key)
                .bind(seq)
                .execute(&mut *conn)
                .await?;
            let letter = origin.dead_letter(reason, &plan.table);
            insert_dead_letters(conn, &plan.group, &[letter]).await?;
        }
        // Held by a caller that gave no record: kept, marked.
        None => {
            sqlx::query(ORPHAN_HELD)
                .bind(&plan.table)
                .bind(row_key)
                .bind(seq)
                .bind(reason)
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Cell, placed};

    #[test]
    fn a_held_row_is_placed_by_column_name_after_its_table_changed() {
        let then = vec!["id".to_owned(), "gone".into(), "big".into(), "title".into()];
        let cells = vec![
            Cell::BigInt(1),
            Cell::Text("g".into()),
            Cell::Null,
            Cell::Text("t".into()),
        ];
        // `gone` dropped, `extra` and `note` added.
        let now = ["id", "big", "title", "extra", "note"];
        let (cells_now, keep_now) = placed(&then, cells.clone(), vec![2], &now);
        assert_eq!(
            cells_now,
            [
                Cell::BigInt(1),
                Cell::Null,
                Cell::Text("t".into()),
                Cell::Null,
                Cell::Null
            ]
        );
        assert_eq!(
            keep_now,
            [1],
            "`big` still kept, nothing added to what it keeps"
        );
        // The same columns, or none known: as they were.
        let same: Vec<&str> = then.iter().map(String::as_str).collect();
        assert_eq!(
            placed(&then, cells.clone(), vec![2], &same),
            (cells.clone(), vec![2])
        );
        assert_eq!(placed(&[], cells.clone(), vec![2], &now), (cells, vec![2]));
    }
}
