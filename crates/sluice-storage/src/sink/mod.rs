//! What the storage pipeline needs from a sink, whatever declared it (docs/ARCHITECTURE.md#sinks).
//!
//! A sink is one topic landed in one table, declared in a mapping file ([`Declared`]: a seed's
//! compiled into the binary or a user's); it is the one kind of sink, so the batch loop calls
//! it directly, no trait between them. The loop keeps the guarantees by construction: one
//! transaction per batch, references resolved and unknown ones dead-lettered in it, one row
//! per natural key by the sink's survivor rule, one statement per batch, and savepoint
//! isolation of a row that breaks a constraint at write time.

mod declared;
mod refresh;
mod tables;

pub use declared::{Declared, DeclaredError};
pub use refresh::Refresh;
pub use tables::{MISSING_FOR, PendingTable, Route, Tables, UNKNOWN_TABLE, UNROUTED};

use sluice_core::DeadLetterKind;

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
