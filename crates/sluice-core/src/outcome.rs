//! Counters of one batch, logged as one INFO line (docs/ARCHITECTURE.md#batch-loop).

use std::ops::AddAssign;

/// What an upsert did to its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteOutcome {
    /// New rows.
    pub inserted: u64,
    /// Existing rows changed (reviews only: a newer `last_synced_at`).
    pub updated: u64,
    /// Rows that changed nothing: redeliveries, older versions, in-batch duplicates, deletes
    /// of a key not in the table, records that change no row.
    pub skipped: u64,
    /// Rows deleted (a tombstone or a Debezium delete).
    pub deleted: u64,
}

impl AddAssign for WriteOutcome {
    fn add_assign(&mut self, other: Self) {
        self.inserted += other.inserted;
        self.updated += other.updated;
        self.skipped += other.skipped;
        self.deleted += other.deleted;
    }
}

/// Everything one batch did; `records = inserted + updated + skipped + deleted +
/// dead_lettered`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchReport {
    /// Records polled.
    pub records: u64,
    /// Row outcomes.
    pub write: WriteOutcome,
    /// Records that failed decoding.
    pub decode_errors: u64,
    /// Records whose package is not registered.
    pub unknown_applications: u64,
    /// Rows isolated at write time for breaking a constraint.
    pub constraint_violations: u64,
    /// Dead-letter rows actually inserted (a redelivered dead letter is not inserted twice).
    pub dead_letters_inserted: u64,
    /// Transient failures retried before the batch committed.
    pub retries: u32,
}

impl BatchReport {
    /// All records that went to the dead-letter table.
    pub fn dead_lettered(&self) -> u64 {
        self.decode_errors + self.unknown_applications + self.constraint_violations
    }

    /// Whether every record is accounted for exactly once.
    pub fn balances(&self) -> bool {
        self.write.inserted
            + self.write.updated
            + self.write.skipped
            + self.write.deleted
            + self.dead_lettered()
            == self.records
    }
}

impl AddAssign for BatchReport {
    fn add_assign(&mut self, other: Self) {
        self.records += other.records;
        self.write += other.write;
        self.decode_errors += other.decode_errors;
        self.unknown_applications += other.unknown_applications;
        self.constraint_violations += other.constraint_violations;
        self.dead_letters_inserted += other.dead_letters_inserted;
        self.retries += other.retries;
    }
}
