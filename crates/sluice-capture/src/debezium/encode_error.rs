//! Why a change could not become records, and the placeholder of a value Debezium did not
//! read (shared by the envelope and its cells).

use super::types::ValueError;

/// What Debezium writes for an out-of-line value an update did not change
/// (`unavailable.value.placeholder`'s default).
pub const UNAVAILABLE: &str = "__debezium_unavailable_value";

/// Why a change could not become records. Fatal: a change cannot be skipped without
/// breaking its key's order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A value did not read as its column's type.
    #[error("{topic}: {source}")]
    Value {
        /// The table's topic.
        topic: String,
        /// The value.
        #[source]
        source: ValueError,
    },
    /// A `numeric` `NaN` or infinity where Debezium's record can hold no null: a key column,
    /// or a `NOT NULL` column without a default (docs/capture.md#numeric-nan-and-infinity).
    #[error(
        "{topic}: column {column}: numeric value {text:?} has no Decimal form and the column {place}; Debezium's connector stops on it too"
    )]
    NoDecimalForm {
        /// The table's topic.
        topic: String,
        /// The column.
        column: String,
        /// The value (cut at 80 characters).
        text: String,
        /// Why it cannot be null there.
        place: &'static str,
    },
    /// A tuple does not have one cell per column of its relation.
    #[error("{topic}: a row of {found} values for {expected} columns")]
    Arity {
        /// The table's topic.
        topic: String,
        /// Cells in the row.
        found: usize,
        /// Columns of the relation.
        expected: usize,
    },
}
