//! The upsert of a declared sink: its planned statement with one `UNNEST` array per column,
//! each bound as its planned parameter type, one statement for the whole slice (the same
//! shape as the built-in topics' upsert).

use crate::bind::bind;
pub use crate::bind::{BindError, DeclaredUpsertError};
use crate::held::{BoxedWrite, hold, release};
use crate::lookup::{LookupValue, lookup_query};
use sluice_core::{DeadLetter, WriteOutcome};
use sluice_sinks::{Cell, HELD_ROWS, Moved, RowOp, Sink, SinkError, SinkPlan, SinkRow, Source};
use sqlx::{Executor, PgConnection};

/// Writes `rows` (one per natural key, lookups resolved): the deletes first (a row that
/// deletes its key, alone or before its upsert), then one upsert of the rest, then the
/// deletes. A key change's create reads what it keeps from the old row its delete set aside
/// (or else from the old key's row) and removes what was set aside; a key change's delete
/// comes alone (the batch's runs, docs/ARCHITECTURE.md#sinks) and sets the old row aside.
/// The old key's row is deleted by its own delete only, never by the create: a re-insert of
/// the old key applied before the create stays. The counts: a
/// delete that found its row is deleted, an upsert inserted or updated as the statement
/// answers, everything else skipped.
///
/// A row of a key whose rows wait for a key change's delete, or a key change's create that
/// keeps a value (without an LSN: any) and whose delete has not come, waits (`held.rs`); it counts as skipped
/// here, and as what it writes in the batch that applies the delete.
///
/// `origin` gives the record of a row (by [`SinkRow::record`]) as a dead letter to be: a row
/// that waits keeps it, and is dead-lettered with it if it can never be applied.
pub async fn write_declared(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    rows: &[SinkRow],
    origin: &(dyn Fn(usize) -> Option<DeadLetter> + Sync),
) -> Result<WriteOutcome, DeclaredUpsertError> {
    let rows: Vec<&SinkRow> = rows.iter().collect();
    let Some(held) = &plan.held else {
        return write_rows(conn, plan, &rows).await;
    };
    let (passing, mut outcome) = hold(conn, plan, held, &rows, origin, write_rows_boxed).await?;
    outcome += write_rows(conn, plan, &passing).await?;
    Ok(outcome)
}

/// [`write_rows`] as the held rows call it back ([`crate::held`] applies the rows that waited,
/// and is itself called by `write_rows` after a key change's delete: the callback keeps the two
/// modules one-way, and the box ends the recursion's type).
fn write_rows_boxed<'a>(
    conn: &'a mut PgConnection,
    plan: &'a SinkPlan,
    rows: &'a [&'a SinkRow],
) -> BoxedWrite<'a> {
    Box::pin(write_rows(conn, plan, rows))
}

/// Writes `rows` as [`write_declared`] says, none of them waiting; after a key change's
/// delete, the rows that waited for it.
async fn write_rows(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    rows: &[&SinkRow],
) -> Result<WriteOutcome, DeclaredUpsertError> {
    // 1. A delete that an upsert of its key follows in the batch.
    let replaced: Vec<Removal<'_>> = rows
        .iter()
        .filter_map(|row| match &row.op {
            RowOp::Replace { version } => Some(Removal::own(plan, row, version.as_ref())),
            _ => None,
        })
        .collect();
    if !replaced.is_empty() {
        delete_declared(conn, plan, &replaced, None).await?;
    }
    // 2. The upserts, which read a kept value from the stored row (of the old key, for a row
    //    whose key changed) before step 3 deletes it.
    let upserting: Vec<&SinkRow> = rows.iter().copied().filter(|r| r.upserts()).collect();
    let answers = upsert_declared(conn, plan, &upserting).await?;
    consume_moved(conn, plan, &upserting).await?;
    // 3. The deletes (a key change's sets its old row aside).
    let mut removals: Vec<Removal<'_>> = Vec::new();
    let mut moving: Vec<(Removal<'_>, &Moved)> = Vec::new();
    for row in rows.iter().filter(|row| row.op == RowOp::Delete) {
        let removal = Removal::own(plan, row, row_version(plan, row));
        match (&row.moving_to, &plan.moving_delete_statement) {
            (Some(to), Some(_)) => moving.push((removal, to)),
            _ => removals.push(removal),
        }
    }
    let mut deleted = 0;
    if !removals.is_empty() {
        let found = delete_declared(conn, plan, &removals, None).await?;
        deleted += found.len() as u64;
    }
    let mut released = WriteOutcome::default();
    for (removal, to) in &moving {
        let found = delete_declared(conn, plan, std::slice::from_ref(removal), Some(to)).await?;
        deleted += found.len() as u64;
        released += release(conn, plan, &to.key, write_rows_boxed).await?;
    }
    let inserted = answers.iter().filter(|i| **i).count() as u64;
    let updated = answers.len() as u64 - inserted;
    let mut outcome = WriteOutcome {
        inserted,
        updated,
        deleted,
        skipped: rows.len() as u64 - inserted - updated - deleted,
    };
    outcome += released;
    Ok(outcome)
}

/// One key to delete: its cells in key order and the delete's version (newest-wins).
struct Removal<'r> {
    key: Vec<&'r Cell>,
    version: Option<&'r Cell>,
}

impl<'r> Removal<'r> {
    /// The delete of `row`'s own key.
    fn own(plan: &SinkPlan, row: &'r SinkRow, version: Option<&'r Cell>) -> Self {
        Self {
            key: plan
                .delete_key
                .iter()
                .map(|position| row.cell(*position).unwrap_or(&NULL))
                .collect(),
            version,
        }
    }
}

/// A row's own version: its newest-wins value.
fn row_version<'r>(plan: &SinkPlan, row: &'r SinkRow) -> Option<&'r Cell> {
    plan.guard.and_then(|guard| row.cell(guard))
}

/// Upserts `rows` with the plan's statement; the statement's answers: one per row written,
/// true inserted, false updated (a row not returned was skipped).
pub async fn upsert_declared(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    rows: &[&SinkRow],
) -> Result<Vec<bool>, DeclaredUpsertError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let mut query = sqlx::query_scalar::<_, bool>(&plan.statement);
    for (index, column) in plan.columns.iter().enumerate() {
        let cells = rows.iter().map(|row| row.cell(index).unwrap_or(&NULL));
        query = bind(query, &column.column, &column.param_type, cells)?;
    }
    let mut keeps = false;
    for (index, column) in plan.columns.iter().enumerate() {
        if column.keepable {
            let flags: Vec<bool> = rows.iter().map(|row| row.keep.contains(&index)).collect();
            query = query.bind(flags);
            keeps = true;
        }
    }
    if keeps {
        // Where kept values are read: the old key of a row whose key changed, else its own.
        for (i, &index) in plan.delete_key.iter().enumerate() {
            let column = &plan.columns[index];
            let cells = rows.iter().map(|row| match &row.moved_from {
                Some(moved) => moved.key.get(i).unwrap_or(&NULL),
                None => row.cell(index).unwrap_or(&NULL),
            });
            query = bind(query, &column.column, &column.param_type, cells)?;
        }
        let moved: Vec<bool> = rows.iter().map(|row| row.moved_from.is_some()).collect();
        let lsns: Vec<Option<i64>> = rows
            .iter()
            .map(|row| row.moved_from.as_ref().and_then(|m| m.lsn))
            .collect();
        query = query.bind(moved).bind(lsns);
    }
    Ok(query.fetch_all(conn).await?)
}

/// Removes what key changes' deletes set aside for the creates among `rows`, which have
/// read it.
async fn consume_moved(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    rows: &[&SinkRow],
) -> Result<(), DeclaredUpsertError> {
    let Some(statement) = &plan.consume_moved_statement else {
        return Ok(());
    };
    let moved: Vec<(&SinkRow, &Moved)> = rows
        .iter()
        .filter_map(|row| row.moved_from.as_ref().map(|m| (*row, m)))
        .collect();
    if moved.is_empty() {
        return Ok(());
    }
    let mut query = sqlx::query_scalar::<_, i32>(statement);
    for (i, &index) in plan.delete_key.iter().enumerate() {
        let column = &plan.columns[index];
        let cells = moved.iter().map(|(_, old)| old.key.get(i).unwrap_or(&NULL));
        query = bind(query, &column.column, &column.param_type, cells)?;
    }
    for &index in &plan.delete_key {
        let column = &plan.columns[index];
        let cells = moved
            .iter()
            .map(|(row, _)| row.cell(index).unwrap_or(&NULL));
        query = bind(query, &column.column, &column.param_type, cells)?;
    }
    let lsns: Vec<Option<i64>> = moved.iter().map(|(_, old)| old.lsn).collect();
    query.bind(lsns).fetch_all(conn).await?;
    Ok(())
}

/// Deletes `keys` with the plan's delete statement (a key change's, with its new key `to`:
/// the old row is set aside); the positions (in `keys`) of those that found their row.
async fn delete_declared(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    keys: &[Removal<'_>],
    to: Option<&Moved>,
) -> Result<Vec<i32>, DeclaredUpsertError> {
    let statement = match to {
        Some(_) => &plan.moving_delete_statement,
        None => &plan.delete_statement,
    };
    let Some(statement) = statement else {
        return Err(BindError::NoDelete {
            sink: plan.name.clone(),
        }
        .into());
    };
    let mut query = sqlx::query_scalar::<_, i32>(statement);
    for (i, &index) in plan.delete_key.iter().enumerate() {
        let column = &plan.columns[index];
        let cells = keys.iter().map(|k| k.key.get(i).copied().unwrap_or(&NULL));
        query = bind(query, &column.column, &column.param_type, cells)?;
    }
    if let Some(guard) = plan.guard {
        let column = &plan.columns[guard];
        let versions = keys.iter().map(|k| k.version.unwrap_or(&NULL));
        query = bind(query, &column.column, &column.param_type, versions)?;
    }
    if let Some(to) = to {
        for (i, &index) in plan.delete_key.iter().enumerate() {
            let column = &plan.columns[index];
            let cells = keys.iter().map(|_| to.key.get(i).unwrap_or(&NULL));
            query = bind(query, &column.column, &column.param_type, cells)?;
        }
        query = query.bind(keys.iter().map(|_| to.lsn).collect::<Vec<_>>());
    }
    let numbers: Vec<i32> = (0..keys.len())
        .map(|n| i32::try_from(n).unwrap_or(i32::MAX))
        .collect();
    Ok(query.bind(numbers).fetch_all(conn).await?)
}

static NULL: Cell = Cell::Null;

/// Prepares every statement `sink` runs — its upsert and each lookup's query — against the
/// live schema (parse, analysis and parameter types: what `PREPARE` checks), so that no SQL
/// error can first appear at run time. The server's refusals are the sink's errors; any other
/// failure (the connection) is returned as is.
pub async fn prepare_sink(
    conn: &mut PgConnection,
    sink: &Sink,
    plan: &SinkPlan,
) -> Result<Vec<SinkError>, sqlx::Error> {
    let mut statements = vec![(None, "upsert", plan.statement.clone())];
    if let Some(delete) = &plan.delete_statement {
        statements.push((None, "delete", delete.clone()));
    }
    if let Some(delete) = &plan.moving_delete_statement {
        statements.push((None, "key change delete", delete.clone()));
    }
    if let Some(consume) = &plan.consume_moved_statement {
        statements.push((None, "key change read", consume.clone()));
    }
    if let Some(held) = &plan.held {
        statements.push((None, "held row check", held.check.clone()));
        statements.push((None, "held row hold", held.hold.clone()));
        statements.push((None, "held row key", held.key.clone()));
    }
    for (mapping, column) in sink.columns.iter().zip(&plan.columns) {
        if let Source::Lookup(lookup) = &mapping.source {
            let value =
                LookupValue::from_param_type(&column.param_type).unwrap_or(LookupValue::Text);
            statements.push((
                Some(column.column.clone()),
                "lookup",
                lookup_query(lookup, column.lookup_key.as_deref(), value),
            ));
        }
    }
    // `sluice sinks validate` may run before `sluice migrate`: the tables where key changes
    // set rows aside and rows wait then stand in as temporary tables, for the preparing only.
    let stand_in = plan.moving_delete_statement.is_some()
        && sqlx::query_scalar::<_, bool>("SELECT to_regclass($1) IS NULL")
            .bind(HELD_ROWS)
            .fetch_one(&mut *conn)
            .await?;
    if stand_in {
        let tables =
            format!("{MOVED_ROWS_MIGRATION}\n{HELD_ROWS_MIGRATION}\n{MOVED_ROWS_KEPT_MIGRATION}")
                .replace("CREATE TABLE", "CREATE TEMP TABLE");
        sqlx::raw_sql(&format!("BEGIN; {tables}"))
            .execute(&mut *conn)
            .await?;
    }
    let prepared = prepare_each(conn, sink, statements).await;
    if stand_in {
        sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await?;
    }
    let errors = prepared?;
    // A statement prepared here has the parameter types PostgreSQL infers (`varchar[]`); the
    // writers bind theirs as the cells' own (`text[]`, cast by the statement). Left in the
    // connection's statement cache, the inferred one would be reused by a later upsert on the
    // same connection and refuse its binary arrays.
    sqlx::Connection::clear_cached_statements(&mut *conn).await?;
    Ok(errors)
}

/// The migration that makes [`sluice_sinks::MOVED_ROWS`].
const MOVED_ROWS_MIGRATION: &str = include_str!("../../../migrations/0016_debezium_moved_rows.sql");

/// The migration that keeps [`sluice_sinks::MOVED_ROWS`]' rows for replays.
const MOVED_ROWS_KEPT_MIGRATION: &str =
    include_str!("../../../migrations/0019_debezium_moved_rows_kept.sql");

/// The migration that makes [`HELD_ROWS`].
const HELD_ROWS_MIGRATION: &str = include_str!("../../../migrations/0017_debezium_held_rows.sql");

/// Prepares each of `statements` (its column, what it is, its SQL); the server's refusals.
async fn prepare_each(
    conn: &mut PgConnection,
    sink: &Sink,
    statements: Vec<(Option<String>, &'static str, String)>,
) -> Result<Vec<SinkError>, sqlx::Error> {
    let mut errors = Vec::new();
    for (column, statement, sql) in statements {
        match (&mut *conn).prepare(sql.as_str()).await {
            Ok(_) => {}
            // A lock or statement timeout, a deadlock, a server shutting down: not the
            // statement's fault; the caller retries.
            Err(error) if crate::disposition(&error) == sluice_core::Disposition::Retry => {
                return Err(error);
            }
            Err(sqlx::Error::Database(db)) => errors.push(SinkError::StatementRefused {
                sink: sink.name.clone(),
                column,
                statement,
                message: format!(
                    "SQLSTATE {}: {}",
                    db.code().unwrap_or_default(),
                    db.message()
                ),
            }),
            Err(other) => return Err(other),
        }
    }
    Ok(errors)
}
