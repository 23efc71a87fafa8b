//! A declared sink's rows between decoding and the statement: lookups to resolve, and one
//! row per natural key by the survivor rule of the sink's conflict policy — the rule its
//! statement applies across batches, so the table does not depend on batch boundaries:
//! insert-ignore keeps the first delivery, always-update the last, newest-wins the newest
//! guard value, where NULL is the oldest and a tie keeps the earlier record (across batches:
//! the row stored first, `EXCLUDED.g > target.g` being strict).
//!
//! Keys are compared as PostgreSQL compares them: a NUMERIC by its value rounded to the
//! column's scale (`1` = `1.0`), a float with `-0.0` = `0.0` (a `real` after rounding to
//! single precision), a timestamp already rounded to the column's precision by the decoder.

use smallvec::SmallVec;
use std::cmp::Ordering;
use std::sync::Arc;

use super::decimal::Decimal;
use super::decode::{Cell, SinkDecoder};
use super::equality::Equality;
use super::keep::Keep;
use super::model::{ConflictPolicy, Format, Lookup};
use super::record::{Decoded, Moved, RowOp};
use sluice_core::dedupe::{Deduped, dedupe_by_key, later_wins};

/// One decoded record of a declared sink.
#[derive(Debug, Clone)]
pub struct SinkRow {
    /// Index of the source record in its batch.
    pub record: usize,
    /// One cell per planned column as decoded, a [`Cell::Lookup`] where a lookup fills the
    /// column: shared with the batch's decoded record, so binding a batch (again, when a
    /// transaction is retried) copies no value.
    decoded: Arc<[Cell]>,
    /// The cells lookups resolved, by column position; they stand in for the decoded ones.
    resolved: SmallVec<[(usize, Cell); 1]>,
    /// The keys its lookups were resolved from, in lookup order (`None`: the field was absent
    /// and the column NULL; empty until resolved): a write-time foreign-key violation looks
    /// them up again.
    pub keys: SmallVec<[Option<String>; 1]>,
    /// What it does to its key's row.
    pub op: RowOp,
    /// The columns it leaves as they are in the row (Debezium did not read them).
    pub keep: Keep,
    /// The old key (cells in key order) of a row whose key changed: the values it keeps are
    /// read from what that key's delete set aside, or else from that key's row.
    pub moved_from: Option<Moved>,
    /// The new key (cells in key order) of the delete of a row whose key changed: the delete
    /// sets the old row aside for the new key's create.
    pub moving_to: Option<Moved>,
}

/// Rows are equal when they are of one record and hold the same cells and lookup keys,
/// however their lookups were resolved.
impl PartialEq for SinkRow {
    fn eq(&self, other: &Self) -> bool {
        self.record == other.record
            && self.keys == other.keys
            && self.op == other.op
            && self.cells().eq(other.cells())
    }
}

impl SinkRow {
    /// A decoded upsert, lookups unresolved.
    pub fn new(record: usize, cells: impl Into<Arc<[Cell]>>) -> Self {
        Self {
            record,
            decoded: cells.into(),
            resolved: SmallVec::new(),
            keys: SmallVec::new(),
            op: RowOp::Upsert,
            keep: Keep::default(),
            moved_from: None,
            moving_to: None,
        }
    }

    /// The row of a decoded record, lookups unresolved (shares its cells).
    pub fn of(record: usize, decoded: &Decoded) -> Self {
        Self {
            op: decoded.op.clone(),
            keep: decoded.keep.clone(),
            moved_from: decoded.moved_from.clone(),
            moving_to: decoded.moving_to.clone(),
            ..Self::new(record, Arc::clone(&decoded.cells))
        }
    }

    /// Whether it deletes its key's row (alone, or before its upsert).
    pub fn deletes(&self) -> bool {
        matches!(self.op, RowOp::Delete | RowOp::Replace { .. })
    }

    /// Whether it inserts or updates a row.
    pub fn upserts(&self) -> bool {
        matches!(self.op, RowOp::Upsert | RowOp::Replace { .. })
    }

    /// The cell of column `position`: the resolved one when a lookup filled it.
    pub fn cell(&self, position: usize) -> Option<&Cell> {
        self.resolved
            .iter()
            .find_map(|(at, cell)| (*at == position).then_some(cell))
            .or_else(|| self.decoded.get(position))
    }

    /// Column `position` filled (again) by a lookup.
    pub fn resolve(&mut self, position: usize, cell: Cell) {
        match self.resolved.iter_mut().find(|(at, _)| *at == position) {
            Some((_, resolved)) => *resolved = cell,
            None => self.resolved.push((position, cell)),
        }
    }

    /// Every cell in column order, resolved ones in place.
    pub fn cells(&self) -> impl Iterator<Item = &Cell> {
        (0..self.decoded.len()).filter_map(|position| self.cell(position))
    }
}

impl SinkDecoder {
    /// The columns filled by a lookup: position and lookup.
    pub fn lookups(&self) -> impl Iterator<Item = (usize, &Lookup)> {
        self.lookups.iter().map(|(i, l)| (*i, l))
    }

    /// A batch's rows (in record order) as the runs it is written in, in order: each record
    /// of a key change alone — the delete of the old key and the create of the new one — and
    /// the rows between them. Each run is de-duplicated and written after the one before it,
    /// so the delete sets aside the old row as the records before it left it, the create
    /// reads its kept values from what is stored when its turn comes (the set-aside row of its
    /// own change, else the old key's row as the records before it left it), and no record
    /// meets one across a key change in a survivor rule (docs/ARCHITECTURE.md#sinks). In a
    /// `debezium` sink a row of a key that already has a row in the run starts a run too: each
    /// change event is written, in order (a refused one is dead-lettered, never merged into a
    /// later one or superseded unseen, and a row that waits for a key change's delete has no
    /// earlier row of its run to lose); elsewhere, a row that keeps a value (Debezium did not
    /// send it) after a row of its key does: it reads the value from what is stored, never
    /// from the earlier row, which may yet be refused. A batch without either is one run.
    pub fn runs(&self, rows: Vec<SinkRow>) -> Vec<Vec<SinkRow>> {
        // Only a change event or a row that keeps a value splits a run by its key; a batch
        // without either (the common case) builds no keys.
        let by_key = self.format == Format::Debezium || rows.iter().any(|row| !row.keep.is_empty());
        let moves = rows
            .iter()
            .any(|row| row.moving_to.is_some() || row.moved_from.is_some());
        // A citext key: case variants are keys apart here and one row to the statements,
        // which run a run's upserts before its deletes, and the isolation of a failed row
        // splits a run in key order; so each run holds upserts only or deletes only, in
        // record order.
        let folded = self
            .key
            .iter()
            .any(|i| self.equality(*i) == Equality::CaseFolded);
        if !by_key && !moves && !folded {
            return vec![rows];
        }
        // Whether the current run holds deletes (`Some(true)`) or upserts, once it holds one.
        let mut deletes: Option<bool> = None;
        let mut runs: Vec<Vec<SinkRow>> = vec![Vec::new()];
        let mut keys: std::collections::HashSet<Vec<KeyPart>, foldhash::fast::RandomState> =
            std::collections::HashSet::default();
        let key = |row: &SinkRow| -> Vec<KeyPart> {
            self.key
                .iter()
                .map(|i| KeyPart::of(row.cell(*i), self.equality(*i)))
                .collect()
        };
        for row in rows {
            if row.moving_to.is_some() || row.moved_from.is_some() {
                runs.push(vec![row]);
                runs.push(Vec::new());
                keys.clear();
                deletes = None;
                continue;
            }
            let deleting = match row.op {
                RowOp::Delete => Some(true),
                RowOp::Upsert | RowOp::Replace { .. } => Some(false),
                RowOp::Ignore => None,
            };
            if folded && deleting.is_some() {
                if deletes.is_some() && deletes != deleting {
                    runs.push(Vec::new());
                    keys.clear();
                }
                deletes = deleting;
            }
            if by_key && row.op != RowOp::Ignore {
                let key = key(&row);
                let splits = self.format == Format::Debezium || !row.keep.is_empty();
                if splits && keys.contains(&key) {
                    runs.push(Vec::new());
                    keys.clear();
                    deletes = deleting;
                }
                keys.insert(key);
            }
            if let Some(run) = runs.last_mut() {
                run.push(row);
            }
        }
        runs.retain(|run| !run.is_empty());
        if runs.is_empty() {
            runs.push(Vec::new());
        }
        runs
    }

    /// One row per natural key (after lookups are resolved: a key may hold a looked-up
    /// value), by the survivor rule of the conflict policy.
    pub fn dedupe(&self, rows: Vec<SinkRow>) -> Deduped<SinkRow> {
        let key = |row: &SinkRow| {
            if row.op == RowOp::Ignore {
                // A record that changes no row is its own key: it never meets another.
                return vec![KeyPart::Ignored(row.record)];
            }
            self.key
                .iter()
                .map(|i| KeyPart::of(row.cell(*i), self.equality(*i)))
                .collect::<Vec<KeyPart>>()
        };
        // A delete meets the other records of its key in arrival order: it beats those before
        // it and the later ones beat it (under newest-wins, a delete with a version competes by
        // its version; one without, a tombstone, by arrival).
        let mut deduped = match (&self.conflict, self.guard) {
            (ConflictPolicy::InsertIgnore, _) => {
                dedupe_by_key(rows, key, |current: &SinkRow, candidate: &SinkRow| {
                    current.deletes() || candidate.deletes()
                })
            }
            (ConflictPolicy::NewestWins { .. }, Some(guard)) => {
                let equality = self.equality(guard);
                // As separate batches would: a later upsert always follows an earlier delete
                // (the row is gone, so it inserts — or meets a newer stored row, which the
                // delete left); a later delete beats an earlier upsert unless the upsert is
                // newer (the delete's `target.g <= version` holds for a tie); a delete without
                // a version always applies.
                dedupe_by_key(rows, key, |current: &SinkRow, candidate: &SinkRow| {
                    let (earlier, later) = if current.record < candidate.record {
                        (current, candidate)
                    } else {
                        (candidate, current)
                    };
                    let later_wins = match (earlier.deletes(), later.deletes()) {
                        (true, false) => true,
                        (_, true) => {
                            later.cell(guard).is_none_or(|c| *c == Cell::Null)
                                || !newer(earlier.cell(guard), later.cell(guard), equality)
                        }
                        (false, false) => newer(later.cell(guard), earlier.cell(guard), equality),
                    };
                    later_wins == (later.record == candidate.record)
                })
            }
            _ => dedupe_by_key(rows, key, later_wins),
        };
        self.delete_first(&mut deduped);
        self.keep_first_stored(&mut deduped);
        self.carry_over(&mut deduped);
        deduped
    }

    /// What a survivor takes from the records of its key before it in the batch (after the
    /// key's last delete), as if each had been applied in turn: a value it keeps (Debezium
    /// did not read it) from the latest one that had it, and a key change's old key, still to
    /// be deleted (also by a surviving delete).
    fn carry_over(&self, deduped: &mut Deduped<SinkRow>) {
        for (row, others) in deduped.rows.iter_mut().zip(&deduped.superseded) {
            let last_delete = others
                .iter()
                .filter(|other| other.deletes() && other.record < row.record)
                .map(|other| other.record)
                .max();
            let mut earlier: Vec<&SinkRow> = others
                .iter()
                .filter(|other| other.upserts() && other.record < row.record)
                .filter(|other| last_delete.is_none_or(|d| other.record > d))
                .collect();
            earlier.sort_by_key(|other| std::cmp::Reverse(other.record));
            if row.moved_from.is_none() {
                row.moved_from = earlier.iter().find_map(|other| other.moved_from.clone());
            }
            if !row.upserts() || row.keep.is_empty() {
                continue;
            }
            let mut keep: Vec<usize> = row.keep.to_vec();
            keep.retain(|&position| {
                let Some(source) = earlier.iter().find(|other| !other.keep.contains(&position))
                else {
                    return true;
                };
                if let Some(cell) = source.cell(position) {
                    row.resolve(position, cell.clone());
                }
                false
            });
            row.keep = keep.into();
        }
    }

    /// An upsert that won over a delete of its key in the batch deletes the row first, as
    /// the delete would have in a batch of its own (so the new row is inserted afresh: its
    /// insert-only columns are its own). The delete keeps its version: under newest-wins the
    /// stored row goes only if it is not newer than the delete.
    fn delete_first(&self, deduped: &mut Deduped<SinkRow>) {
        for (row, others) in deduped.rows.iter_mut().zip(&deduped.superseded) {
            if row.op != RowOp::Upsert {
                continue;
            }
            // Only the deletes before it: a later one it beat changed nothing.
            let deletes: Vec<&SinkRow> = others
                .iter()
                .filter(|o| o.op == RowOp::Delete && o.record < row.record)
                .collect();
            if deletes.is_empty() {
                continue;
            }
            let version = match self.guard {
                Some(guard) => {
                    let versions: Vec<Option<&Cell>> = deletes
                        .iter()
                        .map(|d| d.cell(guard).filter(|c| **c != Cell::Null))
                        .collect();
                    if versions.iter().any(Option::is_none) {
                        None
                    } else {
                        let equality = self.equality(guard);
                        versions
                            .into_iter()
                            .flatten()
                            .fold(None, |best: Option<&Cell>, v| match best {
                                Some(b) if !newer(Some(v), Some(b), equality) => Some(b),
                                _ => Some(v),
                            })
                            .cloned()
                    }
                }
                None => None,
            };
            row.op = RowOp::Replace { version };
        }
    }

    /// The columns a conflict never updates take the values of the key's first record in
    /// the batch (the first after the key's last delete), whichever record survives: across
    /// batches the first is inserted and a later one updates only the other columns, so the
    /// row must not depend on whether the two met in one batch (an insert-only column; a key
    /// written `PT24H` after `P1D`, or `1.0` after `1` in an unconstrained NUMERIC, which
    /// PostgreSQL finds equal).
    fn keep_first_stored(&self, deduped: &mut Deduped<SinkRow>) {
        for (row, others) in deduped.rows.iter_mut().zip(&deduped.superseded) {
            if !row.upserts() {
                continue;
            }
            // After a delete of the key, the row is inserted afresh by the next upsert.
            let last_delete = others
                .iter()
                .filter(|other| other.deletes() && other.record < row.record)
                .map(|other| other.record)
                .max();
            let Some(first) = others
                .iter()
                .filter(|other| other.upserts() && other.record < row.record)
                .filter(|other| last_delete.is_none_or(|d| other.record > d))
                .min_by_key(|other| other.record)
            else {
                continue;
            };
            for &position in &self.fixed {
                // A value the first record did not carry (Debezium did not read it) is not one
                // to copy.
                if first.keep.contains(&position) {
                    continue;
                }
                if let Some(cell) = first.cell(position)
                    && first.cell(position) != row.cell(position)
                {
                    row.resolve(position, cell.clone());
                }
            }
        }
    }

    fn equality(&self, column: usize) -> Equality {
        self.equality
            .get(column)
            .copied()
            .unwrap_or(Equality::Exact)
    }
}

/// One cell of a natural key, hashed and ordered by value (the order the writers lock rows in).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum KeyPart {
    Null,
    Int(i64),
    Text(String),
    Numeric(Decimal),
    Float(u64),
    Uuid(uuid::Uuid),
    Time(chrono::DateTime<chrono::Utc>),
    Bool(bool),
    Date(chrono::NaiveDate),
    Ignored(usize),
    Span(i128),
    Bytes(Vec<u8>),
    Other(String),
}

impl KeyPart {
    fn of(cell: Option<&Cell>, equality: Equality) -> Self {
        match cell {
            None | Some(Cell::Null) => Self::Null,
            Some(Cell::Numeric(v)) => match equality {
                Equality::Numeric(scale) => {
                    Decimal::parse(v, scale).map_or_else(|| Self::Text(v.clone()), Self::Numeric)
                }
                _ => Self::Text(v.clone()),
            },
            Some(Cell::Float(v)) => Self::Float(float_key(*v, equality).to_bits()),
            Some(Cell::SmallInt(v)) => Self::Int(i64::from(*v)),
            Some(Cell::Int(v)) => Self::Int(i64::from(*v)),
            Some(Cell::BigInt(v)) => Self::Int(*v),
            Some(Cell::Text(v)) if equality == Equality::Padded => {
                Self::Text(v.trim_end_matches(' ').to_owned())
            }
            Some(Cell::Text(v) | Cell::Lookup(v)) => Self::Text(v.clone()),
            Some(Cell::Date(v)) => Self::Date(*v),
            Some(Cell::Time(v)) => Self::Int(*v),
            Some(Cell::Interval(v)) => Self::Span(v.span()),
            Some(Cell::Bytes(v)) => Self::Bytes(v.clone()),
            Some(Cell::Uuid(v)) => Self::Uuid(*v),
            Some(Cell::Timestamp(v)) => Self::Time(*v),
            Some(Cell::Bool(v)) => Self::Bool(*v),
            Some(Cell::Json(v)) => Self::Other(v.to_string()),
            Some(Cell::RawJson(v)) => Self::Other(v.clone()),
        }
    }
}

/// A float as the column holds it: `-0.0` is `0.0`; a `real` keeps single precision (parsed
/// from the text it is bound as, as the server parses it).
fn float_key(value: f64, equality: Equality) -> f64 {
    let value = match equality {
        Equality::Real => value.to_string().parse::<f32>().map_or(value, f64::from),
        _ => value,
    };
    if value == 0.0 { 0.0 } else { value }
}

/// Whether a `candidate` guard value is newer than the `current` one: strictly greater (a tie
/// keeps the earlier record); NULL (or no value) is the oldest, so any value is newer than it
/// and it is newer than none.
fn newer(candidate: Option<&Cell>, current: Option<&Cell>, equality: Equality) -> bool {
    match (candidate, current) {
        (None | Some(Cell::Null), _) => false,
        (Some(_), None | Some(Cell::Null)) => true,
        (Some(candidate), Some(current)) => {
            compare(candidate, current, equality).is_some_and(Ordering::is_gt)
        }
    }
}

/// The order of two non-NULL guard values of one column.
fn compare(a: &Cell, b: &Cell, equality: Equality) -> Option<Ordering> {
    match (a, b) {
        (Cell::Numeric(a), Cell::Numeric(b)) => {
            let scale = match equality {
                Equality::Numeric(scale) => scale,
                _ => None,
            };
            Some(Decimal::parse(a, scale)?.cmp(&Decimal::parse(b, scale)?))
        }
        (Cell::Float(a), Cell::Float(b)) => {
            float_key(*a, equality).partial_cmp(&float_key(*b, equality))
        }
        (Cell::Timestamp(a), Cell::Timestamp(b)) => Some(a.cmp(b)),
        (Cell::SmallInt(a), Cell::SmallInt(b)) => Some(a.cmp(b)),
        (Cell::Int(a), Cell::Int(b)) => Some(a.cmp(b)),
        (Cell::BigInt(a), Cell::BigInt(b)) => Some(a.cmp(b)),
        (Cell::Text(a), Cell::Text(b)) => Some(a.cmp(b)),
        (Cell::Uuid(a), Cell::Uuid(b)) => Some(a.cmp(b)),
        (Cell::Bool(a), Cell::Bool(b)) => Some(a.cmp(b)),
        (Cell::Date(a), Cell::Date(b)) => Some(a.cmp(b)),
        (Cell::Time(a), Cell::Time(b)) => Some(a.cmp(b)),
        (Cell::Interval(a), Cell::Interval(b)) => Some(a.span().cmp(&b.span())),
        _ => None,
    }
}
