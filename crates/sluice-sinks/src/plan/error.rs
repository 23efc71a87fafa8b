//! Why a sink cannot run against this database: each error names the sink and the column.

/// Why a sink cannot run against this database; `Display` names the sink and the column.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// The sink's table does not exist.
    #[error("sink `{sink}`: table `{table}` does not exist")]
    UnknownTable {
        /// The sink.
        sink: String,
        /// The table.
        table: String,
    },
    /// A column named by the sink (or its lookup) does not exist.
    #[error("sink `{sink}`, column `{column}`: table `{table}` has no column `{missing}`")]
    UnknownColumn {
        /// The sink.
        sink: String,
        /// The sink's column the name belongs to.
        column: String,
        /// The table looked in.
        table: String,
        /// The name not found.
        missing: String,
    },
    /// No unique constraint or index covers exactly the key columns.
    #[error(
        "sink `{sink}`, column `{column}`: no unique constraint or index of `{table}` is \
         exactly ({column}), which ON CONFLICT needs"
    )]
    KeyNotUnique {
        /// The sink.
        sink: String,
        /// The key columns, comma-separated.
        column: String,
        /// The table.
        table: String,
    },
    /// A nullable key column that NULL can reach, under a unique index that treats NULLs as
    /// distinct: `ON CONFLICT` would never fire for it, and every redelivery would insert
    /// another row.
    #[error(
        "sink `{sink}`, column `{column}`: key column is nullable and its unique index treats \
         NULLs as distinct, so a NULL key would insert a row per delivery: make the column NOT \
         NULL, the index NULLS NOT DISTINCT, or the field `required = true`"
    )]
    NullableKey {
        /// The sink.
        sink: String,
        /// The key column.
        column: String,
    },
    /// A lookup table whose key column is not unique (a key could give several values).
    #[error(
        "sink `{sink}`, column `{column}`: lookup key `{table}.{key}` has no unique constraint"
    )]
    LookupKeyNotUnique {
        /// The sink.
        sink: String,
        /// The column written.
        column: String,
        /// The lookup table.
        table: String,
        /// Its key column.
        key: String,
    },
    /// A lookup table that does not exist.
    #[error("sink `{sink}`, column `{column}`: lookup table `{table}` does not exist")]
    UnknownLookupTable {
        /// The sink.
        sink: String,
        /// The column written.
        column: String,
        /// The lookup table.
        table: String,
    },
    /// A column type no declared sink can write.
    #[error("sink `{sink}`, column `{column}`: type {sql_type} is not supported by declared sinks")]
    UnsupportedType {
        /// The sink.
        sink: String,
        /// The column.
        column: String,
        /// Its type.
        sql_type: String,
    },
    /// A newest-wins column whose values sluice cannot order as PostgreSQL does (text by a
    /// collation, an enum by its sort order, JSON, arrays): the newest version in a batch
    /// could differ from the one the statement keeps.
    #[error(
        "sink `{sink}`, column `{column}`: a newest-wins column of type {sql_type} is not \
         supported (use a number, a timestamp, a date, a time, an interval, a boolean or a uuid)"
    )]
    GuardNotOrdered {
        /// The sink.
        sink: String,
        /// The column.
        column: String,
        /// Its type.
        sql_type: String,
    },
    /// `on_tombstone = "delete"` with a key column read from the record value, which a
    /// tombstone does not have.
    #[error(
        "sink `{sink}`, column `{column}`: a tombstone has no value to read this key column \
         from: with `on_tombstone = \"delete\"` map it from the record key (`{{ key = … }}`)"
    )]
    TombstoneKey {
        /// The sink.
        sink: String,
        /// The column.
        column: String,
    },
    /// The source's values cannot fit the column's type.
    #[error("sink `{sink}`, column `{column}`: {source_text} cannot fit {sql_type}: {reason}")]
    SourceDoesNotFit {
        /// The sink.
        sink: String,
        /// The column.
        column: String,
        /// The source as the plan shows it.
        source_text: String,
        /// The column's type.
        sql_type: String,
        /// Why not.
        reason: String,
    },
    /// A declared rule that does not apply to the column's type.
    #[error("sink `{sink}`, column `{column}`: rule `{rule}` does not apply to {sql_type}")]
    RuleDoesNotApply {
        /// The sink.
        sink: String,
        /// The column.
        column: String,
        /// The rule.
        rule: String,
        /// The column's type.
        sql_type: String,
    },
    /// A column an INSERT cannot write (generated, or an identity `GENERATED ALWAYS`).
    #[error(
        "sink `{sink}`, column `{column}`: a generated or GENERATED ALWAYS column cannot be written"
    )]
    NotWritable {
        /// The sink.
        sink: String,
        /// The column.
        column: String,
    },
    /// A generated statement that PostgreSQL refuses to prepare against the live schema (a
    /// bug of the builder if it ever happens: it is caught here, never at run time).
    #[error("sink `{sink}`{}: its {statement} does not prepare: {message}", column_part(.column))]
    StatementRefused {
        /// The sink.
        sink: String,
        /// The column whose lookup it is (`None`: the upsert).
        column: Option<String>,
        /// Which statement (`upsert`, `lookup`).
        statement: &'static str,
        /// The server's SQLSTATE and message.
        message: String,
    },
    /// A NOT NULL column without a default that the sink gives no value.
    #[error("sink `{sink}`, column `{column}`: NOT NULL without a default, and no source")]
    NotNullWithoutSource {
        /// The sink.
        sink: String,
        /// The column.
        column: String,
    },
    /// `columns = "auto"` without `key`, on a table that has no primary key.
    #[error("sink `{sink}`: table `{table}` has no primary key; name the key columns with `key`")]
    NoPrimaryKey {
        /// The sink.
        sink: String,
        /// The table.
        table: String,
    },
    /// The sink with its table's columns filled in (`columns = "auto"`) contradicts itself.
    #[error("sink `{sink}` (with the columns of `{table}`): {problem}")]
    Inconsistent {
        /// The sink.
        sink: String,
        /// The table.
        table: String,
        /// What contradicts.
        problem: crate::problems::MappingProblem,
    },
}

impl SinkError {
    /// The sink the error is about.
    pub fn sink(&self) -> &str {
        match self {
            Self::UnknownTable { sink, .. }
            | Self::UnknownColumn { sink, .. }
            | Self::KeyNotUnique { sink, .. }
            | Self::NullableKey { sink, .. }
            | Self::LookupKeyNotUnique { sink, .. }
            | Self::UnknownLookupTable { sink, .. }
            | Self::UnsupportedType { sink, .. }
            | Self::GuardNotOrdered { sink, .. }
            | Self::TombstoneKey { sink, .. }
            | Self::SourceDoesNotFit { sink, .. }
            | Self::RuleDoesNotApply { sink, .. }
            | Self::NotWritable { sink, .. }
            | Self::StatementRefused { sink, .. }
            | Self::NotNullWithoutSource { sink, .. }
            | Self::NoPrimaryKey { sink, .. }
            | Self::Inconsistent { sink, .. } => sink,
        }
    }

    /// The column the error is about (none when the table itself is missing).
    pub fn column(&self) -> Option<&str> {
        match self {
            Self::UnknownTable { .. } | Self::NoPrimaryKey { .. } | Self::Inconsistent { .. } => {
                None
            }
            Self::StatementRefused { column, .. } => column.as_deref(),
            Self::UnknownColumn { column, .. }
            | Self::KeyNotUnique { column, .. }
            | Self::NullableKey { column, .. }
            | Self::LookupKeyNotUnique { column, .. }
            | Self::UnknownLookupTable { column, .. }
            | Self::UnsupportedType { column, .. }
            | Self::GuardNotOrdered { column, .. }
            | Self::TombstoneKey { column, .. }
            | Self::SourceDoesNotFit { column, .. }
            | Self::RuleDoesNotApply { column, .. }
            | Self::NotWritable { column, .. }
            | Self::NotNullWithoutSource { column, .. } => Some(column),
        }
    }
}

fn column_part(column: &Option<String>) -> String {
    column
        .as_ref()
        .map_or_else(String::new, |c| format!(", column `{c}`"))
}
