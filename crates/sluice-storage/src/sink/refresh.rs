//! A table altered under a running sink without breaking its statement (docs/sinks.md#limits-from-the-catalog):
//! a column widened (`varchar(16)` → `varchar(32)`, `int4` → `int8`, a numeric's precision),
//! an enum given a label, a `NOT NULL` dropped. The decoder checks records against the limits
//! the catalog had when the table was planned, and PostgreSQL never refuses the statement, so
//! nothing would tell the sink: records the table now takes would be dead-lettered until a
//! restart.
//!
//! So a batch in which a table's sink refused a record (a decode error) has that table planned
//! again from the catalog — at most once a second per table, as a topic of bad records must
//! not cost a catalog read per batch. A plan that changed replaces the old one for every
//! writer, and the batch is decoded again with it; so is every batch decoded before the
//! replacement (the generation it was decoded at is older). One writer reads the catalog at a
//! time: a writer whose batch meets a read in progress waits for it, then decodes again if it
//! replaced a plan. A table that can no longer take the sink keeps its old plan: its statement
//! fails and stops the pipeline (a sink of many tables plans it again), as for any table
//! changed that way.

use super::{Declared, Tables};
use crate::decoded::DecodedBatch;
use sluice_core::DeadLetterKind;
use sluice_sinks::{plan_sink, with_table_columns};
use sqlx::PgConnection;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The shortest time between two catalog reads of one table.
const RECHECK_EVERY: Duration = Duration::from_secs(1);

/// How often a table of a `columns = "auto"` sink is read from the catalog anyway: a column
/// added to it makes no statement fail and no record refused, and would otherwise not be
/// written until a restart.
const AUTO_EVERY: Duration = Duration::from_secs(30);

/// The most tables [`AUTO_EVERY`] has a batch read from the catalog.
const AUTO_PER_BATCH: usize = 2;

/// Which plans a pipeline's tables are at, and when the catalog was last read for each.
#[derive(Debug, Default)]
pub struct Refreshed {
    /// Counts the plans replaced: a batch decoded at another count is decoded again.
    generation: AtomicU64,
    /// One catalog read at a time; the time of each table's last read.
    checked: tokio::sync::Mutex<HashMap<String, Instant>>,
}

impl Refreshed {
    /// The count of plans replaced so far.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A plan was replaced: every batch decoded before is decoded again.
    pub(super) fn replaced(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

impl Tables {
    /// How many plans of its tables were replaced so far (kept by each decoded batch).
    pub fn generation(&self) -> u64 {
        self.refreshed.generation()
    }

    /// What `decoded` needs before it is stored: nothing, decoding again (a plan was
    /// replaced since it was decoded), or the catalog read for the tables whose sink refused
    /// some of its records ([`Self::replan`]).
    pub fn refresh_of<'d>(&self, decoded: &'d DecodedBatch) -> Refresh<'d> {
        if decoded.generation != self.refreshed.generation() {
            return Refresh::DecodeAgain;
        }
        let mut tables: BTreeSet<&str> = decoded
            .rejected
            .iter()
            .filter(|letter| letter.kind == DeadLetterKind::DecodeError)
            .filter_map(|letter| letter.table.as_deref())
            .collect();
        // The tables of `columns = "auto"` sinks not read for a while, the longest unread
        // first, a few a batch (a sink of a thousand tables must not read the catalog all
        // the time); a catalog read in progress elsewhere: next batch.
        if let Ok(checked) = self.refreshed.checked.try_lock() {
            let mut due: Vec<(Option<Instant>, &str)> = decoded
                .groups
                .iter()
                .filter(|group| group.sink.unfilled().is_some())
                .map(|group| {
                    let table: &str = group.sink.table();
                    (checked.get(table).copied(), table)
                })
                .filter(|(at, _)| at.is_none_or(|at| at.elapsed() >= AUTO_EVERY))
                .collect();
            due.sort();
            tables.extend(due.into_iter().take(AUTO_PER_BATCH).map(|(_, table)| table));
        }
        if tables.is_empty() {
            return Refresh::Nothing;
        }
        Refresh::Check(tables)
    }

    /// Plans again, from the catalog on `conn`, each of `tables` not read within the last
    /// second; whether the batch decoded at `generation` must be decoded again (a plan was
    /// replaced, by this call or by another writer's meanwhile). Only a database error is an
    /// error (the tables it did not read are read again next time).
    pub async fn replan(
        &self,
        conn: &mut PgConnection,
        tables: &BTreeSet<&str>,
        generation: u64,
    ) -> Result<bool, sqlx::Error> {
        let mut checked = self.refreshed.checked.lock().await;
        if self.refreshed.generation() != generation {
            return Ok(true);
        }
        let mut replaced = false;
        for &table in tables {
            if checked
                .get(table)
                .is_some_and(|at| at.elapsed() < RECHECK_EVERY)
            {
                continue;
            }
            for (at, sink) in self.planned_for(table) {
                let Some(new) = replanned(conn, &sink).await? else {
                    continue;
                };
                if self.replace(at, &sink, new) {
                    tracing::info!(pipeline = %self.name(), %table,
                        "table changed under its plan (a column added, or a column's type or \
                         limits): planned again; the batch is decoded again with it");
                    replaced = true;
                }
            }
            checked.insert(table.to_owned(), Instant::now());
        }
        Ok(replaced)
    }
}

/// What a decoded batch needs before it is stored ([`Tables::refresh_of`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Refresh<'d> {
    /// Nothing.
    Nothing,
    /// Decoding again: a plan it was decoded with was replaced since.
    DecodeAgain,
    /// The catalog read for these tables: their sink refused records of it, or they are
    /// a `columns = "auto"` sink's, not read for a while.
    Check(BTreeSet<&'d str>),
}

/// `sink` planned again against the catalog on `conn`, if its plan changed; `None` when it
/// did not, or when the table can no longer take it (kept: its statement decides).
async fn replanned(
    conn: &mut PgConnection,
    sink: &Declared,
) -> Result<Option<Declared>, sqlx::Error> {
    // A `columns = "auto"` sink's columns are filled in again: the table may have more.
    let declared = sink.unfilled().unwrap_or(sink.sink());
    let shapes =
        sluice_postgres::catalog::sink_tables(conn, std::slice::from_ref(declared)).await?;
    let mapping = match with_table_columns(declared, &shapes) {
        Ok(mapping) => mapping,
        Err(errors) => {
            let reasons: Vec<String> = errors.iter().map(ToString::to_string).collect();
            tracing::warn!(sink = %declared.name, table = %sink.table(), reasons = ?reasons,
                "table changed so that it cannot take the sink: its plan is kept");
            return Ok(None);
        }
    };
    let mapping: &sluice_sinks::Sink = &mapping;
    let mut plan = match plan_sink(mapping, "", &shapes) {
        Ok(plan) => plan,
        Err(errors) => {
            let reasons: Vec<String> = errors.iter().map(ToString::to_string).collect();
            tracing::warn!(sink = %mapping.name, table = %sink.table(), reasons = ?reasons,
                "table changed so that it cannot take the sink: its plan is kept");
            return Ok(None);
        }
    };
    // The group comes from the process's group prefix, which a plan made here does not know.
    plan.group.clone_from(&sink.plan().group);
    if &plan == sink.plan() {
        return Ok(None);
    }
    let refused = sluice_postgres::declared::prepare_sink(conn, mapping, &plan).await?;
    if !refused.is_empty() {
        let reasons: Vec<String> = refused.iter().map(ToString::to_string).collect();
        tracing::warn!(sink = %mapping.name, table = %sink.table(), reasons = ?reasons,
            "table changed so that its new statement is refused: its plan is kept");
        return Ok(None);
    }
    let new = match Declared::new(mapping, plan, sink.cache_ttl()) {
        Ok(new) => new.filled_in_from(declared),
        Err(error) => {
            tracing::warn!(sink = %mapping.name, table = %sink.table(), %error,
                "table changed so that its sink cannot run: its plan is kept");
            return Ok(None);
        }
    };
    Ok(Some(match sink.registry() {
        Some(registry) => new.with_registry(registry.clone()),
        None => new,
    }))
}
