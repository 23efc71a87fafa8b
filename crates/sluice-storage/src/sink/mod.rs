//! What the storage pipeline needs from a sink, whatever declared it (docs/ARCHITECTURE.md#sinks).
//!
//! A sink is one topic landed in one table, declared in a mapping file ([`Declared`]: a seed's
//! compiled into the binary or a user's). The batch loop only sees this trait, which keeps
//! the guarantees by construction: one transaction per
//! batch, references resolved and unknown ones dead-lettered in it, one row per natural key by
//! the sink's survivor rule, one statement per batch, and savepoint isolation of a row that
//! breaks a constraint at write time.

mod declared;

pub use declared::{Declared, DeclaredError};

use sluice_core::dedupe::Deduped;
use sluice_core::messages::DecodeError;
use sluice_core::{DeadLetterKind, WriteOutcome};
use sluice_kafka::Record;
use sqlx::PgConnection;
use std::fmt::Debug;

/// A record rejected after decoding: its reference (a package name, a lookup key) is not in
/// its table, or its row broke a constraint at write time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The record's index in its batch.
    pub record: usize,
    /// The dead-letter kind.
    pub kind: DeadLetterKind,
    /// The reason, naming the field and the table.
    pub reason: String,
}

/// A batch's decoded messages with their references resolved.
#[derive(Debug)]
pub struct Bound<R> {
    /// Rows ready for the statement, in record order.
    pub rows: Vec<R>,
    /// Records whose reference is unknown.
    pub rejected: Vec<Rejection>,
}

/// A row's references looked up again, past the cache, after it alone broke a foreign key.
#[derive(Debug)]
pub enum Recheck<R> {
    /// A reference changed (deleted and created again): the row bound to the new values.
    Rebound(R),
    /// The same values: the violation is the row's own.
    Unchanged,
    /// A reference is gone.
    Gone(Rejection),
}

/// One sink, as the batch loop drives it. Every call but [`StorageSink::decode`] runs inside
/// the batch's transaction; a `sqlx::Error` is classified by the caller (transient → the batch
/// is retried; a constraint error → isolation; anything else stops the pipeline).
#[allow(
    async_fn_in_trait,
    reason = "a pipeline's writer runs on its own single-threaded runtime; no sink future crosses threads"
)]
pub trait StorageSink: Send + Sync {
    /// A decoded record, its references not yet resolved.
    type Message: Send + Sync + Clone + Debug;
    /// A row ready for the statement.
    type Row: Send + Sync + Clone + Debug;

    /// The sink's name: metric labels, logs, heartbeat files, `lag`/`replay`/`dlq`.
    fn name(&self) -> &str;
    /// Decodes and validates one record; pure. The error's text is the dead letter's reason.
    fn decode(&self, record: &Record) -> Result<Self::Message, DecodeError>;
    /// Resolves the references of a batch's messages (`(record index, message)`).
    async fn bind(
        &self,
        conn: &mut PgConnection,
        messages: &[(usize, Self::Message)],
    ) -> Result<Bound<Self::Row>, sqlx::Error>;
    /// The record index of a row.
    fn record(row: &Self::Row) -> usize;
    /// One row per natural key by the sink's survivor rule (the same rule as its statement's
    /// `ON CONFLICT` across batches), the others kept as runners-up.
    fn dedupe(&self, rows: Vec<Self::Row>) -> Deduped<Self::Row>;
    /// A batch's rows (in record order) as the runs written one after another, each
    /// de-duplicated on its own: by default one run. A Debezium sink writes the delete of a
    /// key change alone (docs/ARCHITECTURE.md#sinks).
    fn runs(&self, rows: Vec<Self::Row>) -> Vec<Vec<Self::Row>> {
        vec![rows]
    }
    /// The sink's one statement over `rows` (one per natural key); `records` are the batch's
    /// (a row that waits keeps its record, to be dead-lettered if it can never be applied).
    async fn upsert(
        &self,
        conn: &mut PgConnection,
        rows: &[Self::Row],
        records: &[Record],
    ) -> Result<WriteOutcome, sqlx::Error>;
    /// Looks a row's references up again past the cache (after it alone broke a foreign key).
    async fn recheck(
        &self,
        conn: &mut PgConnection,
        row: &Self::Row,
    ) -> Result<Recheck<Self::Row>, sqlx::Error>;
}

/// The reason of an unknown reference: `field `package_name`: unknown application `x` (not
/// in apps)` — derived from the kind's name.
pub(crate) fn unknown_reason(field: &str, kind: DeadLetterKind, key: &str, why: &str) -> String {
    let key = crate::record::truncate(key, 80);
    match kind.as_str().strip_prefix("unknown_") {
        Some(noun) => format!(
            "field `{field}`: unknown {} `{key}` ({why})",
            noun.replace('_', " ")
        ),
        None => format!("field `{field}`: `{key}` is unknown ({why}; {kind})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_reasons_use_the_kind_as_a_noun() {
        assert_eq!(
            unknown_reason(
                "package_name",
                DeadLetterKind::UnknownApplication,
                "com.x",
                "not in apps_registry_application"
            ),
            "field `package_name`: unknown application `com.x` (not in apps_registry_application)"
        );
        assert_eq!(
            unknown_reason(
                "perm.name",
                DeadLetterKind::unresolved("unknown_android_permission"),
                "CAMERA",
                "deleted after it was resolved"
            ),
            "field `perm.name`: unknown android permission `CAMERA` (deleted after it was resolved)"
        );
        assert_eq!(
            unknown_reason(
                "device",
                DeadLetterKind::unresolved("no_such_device"),
                "d1",
                "not in devices"
            ),
            "field `device`: `d1` is unknown (not in devices; no_such_device)"
        );
    }
}
