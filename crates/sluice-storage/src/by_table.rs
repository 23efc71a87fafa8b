//! What a batch did to each of its tables: the rows written and the dead letters of the
//! records that were going to it, for the metrics and the batch's log line by table
//! (docs/operations.md#observability). A pipeline of one table has one entry; a sink of many tables
//! one per table its batch wrote.

use sluice_core::{BatchReport, DeadLetter, DeadLetterKind, WriteOutcome};
use std::sync::Arc;

/// One table's share of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOutcome {
    /// The table.
    pub table: Arc<str>,
    /// Its rows' outcomes.
    pub write: WriteOutcome,
    /// Records going to it that were dead-lettered.
    pub dead_lettered: u64,
}

/// Each table's share of a batch, in the order the batch met them; and the dead letters of
/// the decoding counted in the report's `decode_errors` that are of another kind
/// (`unknown_table`, `unrouted`), by kind, so the metrics count them under their own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ByTable(Vec<TableOutcome>, Vec<(&'static str, u64)>);

impl ByTable {
    /// The share of `table`, added if new.
    pub fn of(&mut self, table: &Arc<str>) -> &mut TableOutcome {
        let at = match self.0.iter().position(|t| t.table == *table) {
            Some(at) => at,
            None => {
                self.0.push(TableOutcome {
                    table: Arc::clone(table),
                    write: WriteOutcome::default(),
                    dead_lettered: 0,
                });
                self.0.len() - 1
            }
        };
        &mut self.0[at]
    }

    /// Counts each dead letter that names its table.
    pub fn add_dead(&mut self, dead: &[DeadLetter]) {
        for letter in dead {
            if let Some(table) = &letter.table {
                self.of(table).dead_lettered += 1;
            }
        }
    }

    /// Counts the decoding's dead letters (`rejected`) that are not decode errors, by kind.
    pub fn count_decode_kinds(&mut self, rejected: &[DeadLetter]) {
        for letter in rejected {
            let DeadLetterKind::Unresolved(kind) = letter.kind else {
                continue;
            };
            match self.1.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, count)) => *count += 1,
                None => self.1.push((kind, 1)),
            }
        }
    }

    /// The decoding's dead letters of other kinds than `decode_error`, by kind.
    pub fn decode_kinds(&self) -> &[(&'static str, u64)] {
        &self.1
    }

    /// The tables' shares.
    pub fn tables(&self) -> &[TableOutcome] {
        &self.0
    }

    /// The tables' names, for the batch's log line.
    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|t| &*t.table).collect()
    }

    /// What of `report` no table's share holds (records skipped before a table was chosen,
    /// dead letters of records that named none): the batch's whole less its tables'.
    pub fn rest(&self, report: &BatchReport) -> TableOutcome {
        let mut rest = TableOutcome {
            table: Arc::from(""),
            write: report.write,
            dead_lettered: report.dead_lettered(),
        };
        for table in &self.0 {
            rest.write.inserted = rest.write.inserted.saturating_sub(table.write.inserted);
            rest.write.updated = rest.write.updated.saturating_sub(table.write.updated);
            rest.write.skipped = rest.write.skipped.saturating_sub(table.write.skipped);
            rest.write.deleted = rest.write.deleted.saturating_sub(table.write.deleted);
            rest.dead_lettered = rest.dead_lettered.saturating_sub(table.dead_lettered);
        }
        rest
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn each_tables_share_and_the_rest_add_up_to_the_batch() {
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        let mut by = ByTable::default();
        by.of(&a).write.inserted += 3;
        by.of(&b).write.updated += 2;
        by.of(&a).write.deleted += 1;
        let report = BatchReport {
            records: 9,
            write: WriteOutcome {
                inserted: 3,
                updated: 2,
                skipped: 1,
                deleted: 1,
            },
            decode_errors: 2,
            ..BatchReport::default()
        };
        by.of(&b).dead_lettered += 1;
        assert_eq!(by.names(), ["a", "b"]);
        let rest = by.rest(&report);
        assert_eq!(
            (rest.write, rest.dead_lettered),
            (
                WriteOutcome {
                    inserted: 0,
                    updated: 0,
                    skipped: 1,
                    deleted: 0
                },
                1
            ),
            "one skipped and one dead letter belong to no table"
        );
    }
}
