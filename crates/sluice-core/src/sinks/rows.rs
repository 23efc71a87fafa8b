//! A declared sink's rows between decoding and the statement: lookups to resolve, and one
//! row per natural key by the survivor rule of the sink's conflict policy — the same rule as
//! the built-ins (`crate::dedupe`): insert-ignore keeps the first delivery, newest-wins the
//! newest guard value (ties: the later record), always-update the last delivery.

use std::cmp::Ordering;

use super::decode::{Cell, SinkDecoder};
use super::model::{ConflictPolicy, Lookup};
use crate::dedupe::{Deduped, dedupe_by_key, earlier_wins, later_wins};

/// One decoded record of a declared sink.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkRow {
    /// Index of the source record in its batch.
    pub record: usize,
    /// One cell per planned column; a [`Cell::Lookup`] until resolved.
    pub cells: Vec<Cell>,
    /// The keys its lookups were resolved from, in lookup order (`None`: the field was absent
    /// and the column NULL; empty until resolved): a write-time foreign-key violation looks
    /// them up again.
    pub keys: Vec<Option<String>>,
}

impl SinkRow {
    /// A decoded row, lookups unresolved.
    pub fn new(record: usize, cells: Vec<Cell>) -> Self {
        Self {
            record,
            cells,
            keys: Vec::new(),
        }
    }
}

impl SinkDecoder {
    /// The columns filled by a lookup: position and lookup.
    pub fn lookups(&self) -> impl Iterator<Item = (usize, &Lookup)> {
        self.lookups.iter().map(|(i, l)| (*i, l))
    }

    /// One row per natural key (after lookups are resolved: a key may hold a looked-up
    /// value), by the survivor rule of the conflict policy.
    pub fn dedupe(&self, rows: Vec<SinkRow>) -> Deduped<SinkRow> {
        let key = |row: &SinkRow| {
            self.key
                .iter()
                .map(|i| KeyPart::of(row.cells.get(*i)))
                .collect::<Vec<KeyPart>>()
        };
        match (&self.conflict, self.guard) {
            (ConflictPolicy::InsertIgnore, _) => dedupe_by_key(rows, key, earlier_wins),
            (ConflictPolicy::NewestWins { .. }, Some(guard)) => {
                dedupe_by_key(rows, key, |current: &SinkRow, candidate: &SinkRow| {
                    match (current.cells.get(guard), candidate.cells.get(guard)) {
                        (Some(current), Some(candidate)) => {
                            compare(candidate, current).is_some_and(Ordering::is_ge)
                        }
                        _ => false,
                    }
                })
            }
            _ => dedupe_by_key(rows, key, later_wins),
        }
    }
}

/// One cell of a natural key, hashed and ordered by value (the order the writers lock rows in).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum KeyPart {
    Null,
    Int(i64),
    Text(String),
    Float(u64),
    Uuid(uuid::Uuid),
    Time(chrono::DateTime<chrono::Utc>),
    Bool(bool),
    Other(String),
}

impl KeyPart {
    fn of(cell: Option<&Cell>) -> Self {
        match cell {
            None | Some(Cell::Null) => Self::Null,
            Some(Cell::SmallInt(v)) => Self::Int(i64::from(*v)),
            Some(Cell::Int(v)) => Self::Int(i64::from(*v)),
            Some(Cell::BigInt(v)) => Self::Int(*v),
            Some(Cell::Text(v) | Cell::Numeric(v) | Cell::Lookup(v)) => Self::Text(v.clone()),
            Some(Cell::Float(v)) => Self::Float(v.to_bits()),
            Some(Cell::Uuid(v)) => Self::Uuid(*v),
            Some(Cell::Timestamp(v)) => Self::Time(*v),
            Some(Cell::Bool(v)) => Self::Bool(*v),
            Some(Cell::Json(v)) => Self::Other(v.to_string()),
        }
    }
}

/// The order of two guard values of one column (NULL is never newer nor older).
fn compare(a: &Cell, b: &Cell) -> Option<Ordering> {
    match (a, b) {
        (Cell::Timestamp(a), Cell::Timestamp(b)) => Some(a.cmp(b)),
        (Cell::SmallInt(a), Cell::SmallInt(b)) => Some(a.cmp(b)),
        (Cell::Int(a), Cell::Int(b)) => Some(a.cmp(b)),
        (Cell::BigInt(a), Cell::BigInt(b)) => Some(a.cmp(b)),
        (Cell::Float(a), Cell::Float(b)) => a.partial_cmp(b),
        (Cell::Text(a), Cell::Text(b)) => Some(a.cmp(b)),
        (Cell::Uuid(a), Cell::Uuid(b)) => Some(a.cmp(b)),
        (Cell::Bool(a), Cell::Bool(b)) => Some(a.cmp(b)),
        _ => None,
    }
}
