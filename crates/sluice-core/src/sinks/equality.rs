//! How PostgreSQL compares a column's values, so that the in-batch de-duplication finds the
//! same keys (and the same newest version) as the statement's `ON CONFLICT`.

use super::checks::Check;
use super::validate::ColumnPlan;

/// How the values of a column compare in PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Equality {
    /// As the cells compare (integers, text, UUIDs, rounded timestamps, booleans).
    Exact,
    /// A NUMERIC by value, rounded to the column's scale if it has one.
    Numeric(Option<u32>),
    /// A `real`: the double rounded to single precision.
    Real,
}

/// How a planned column's values compare in PostgreSQL.
pub(super) fn equality(column: &ColumnPlan) -> Equality {
    if column.param_type == "numeric" {
        let scale = column.checks.iter().find_map(|c| match c {
            Check::NumericDigits { scale, .. } => Some(*scale),
            _ => None,
        });
        Equality::Numeric(scale)
    } else if column.param_type == "float4" {
        Equality::Real
    } else {
        Equality::Exact
    }
}
