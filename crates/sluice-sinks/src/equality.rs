//! How PostgreSQL compares a column's values, so that the in-batch de-duplication finds the
//! same keys (and the same newest version) as the statement's `ON CONFLICT`.

use super::table::SqlType;

/// How the values of a column compare in PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Equality {
    /// As the cells compare (integers, text, UUIDs, rounded timestamps, booleans; an
    /// interval by its span, `P1D` = `PT24H`, as PostgreSQL compares them).
    Exact,
    /// A NUMERIC by value, rounded to the column's scale if it has one.
    Numeric(Option<u32>),
    /// A `real`: the double rounded to single precision.
    Real,
    /// A `char(n)`: trailing spaces do not count.
    Padded,
    /// A `citext`: as written in a batch (sluice does not guess the server's lower-casing),
    /// while the statements compare case-insensitively, so case variants may be one row.
    CaseFolded,
}

/// How the values of a column of `kind` compare in PostgreSQL.
pub(super) fn equality(kind: &SqlType) -> Equality {
    match kind {
        // A scale only constrains a numeric with a precision (`numeric(p,s)`).
        SqlType::Numeric { precision, scale } => Equality::Numeric(precision.map(|_| *scale)),
        SqlType::Money => Equality::Numeric(Some(2)),
        SqlType::Real => Equality::Real,
        SqlType::Char(_) => Equality::Padded,
        SqlType::Citext(_) => Equality::CaseFolded,
        _ => Equality::Exact,
    }
}
