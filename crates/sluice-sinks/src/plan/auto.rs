//! `columns = "auto"`: a sink whose columns come from its table (docs/sinks.md#auto-columns).
//! Against the live catalog, every writable column of the table that the sink neither maps
//! nor leaves to `never_written` reads the record field of its own name, in table order; an
//! explicit `[sink.columns]` entry takes precedence (or adds a column the record has no
//! field for, `lsn = { cdc = "lsn" }`); the key is the table's primary key unless `key` names
//! one. The sink so filled in is checked as a hand-written one would be, then planned.

use std::borrow::Cow;
use std::collections::HashMap;

use super::SinkError;
use crate::checks::ValueRules;
use crate::consistency::check_sink;
use crate::model::{ColumnMapping, ConflictPolicy, FieldPath, Sink, Source};
use crate::table::TableShape;

/// `sink` with its table's columns filled in when it says `columns = "auto"` (itself
/// otherwise); `tables`: the shapes of the tables it names.
pub fn with_table_columns<'s>(
    sink: &'s Sink,
    tables: &HashMap<String, TableShape>,
) -> Result<Cow<'s, Sink>, Vec<SinkError>> {
    if !sink.auto_columns {
        return Ok(Cow::Borrowed(sink));
    }
    let Some(table) = tables.get(&sink.table) else {
        return Err(vec![SinkError::UnknownTable {
            sink: sink.name.clone(),
            table: sink.table.clone(),
        }]);
    };
    Ok(Cow::Owned(filled_in(sink, table)?))
}

/// `sink` with the columns of `table`.
fn filled_in(sink: &Sink, table: &TableShape) -> Result<Sink, Vec<SinkError>> {
    let mut filled = sink.clone();
    filled.auto_columns = false;
    filled.columns = table
        .columns
        .iter()
        .filter_map(|column| match sink.mapping(&column.name) {
            Some(explicit) => Some(explicit.clone()),
            None if column.writable && !sink.never_written.contains(&column.name) => {
                Some(field_of_its_name(&column.name))
            }
            None => None,
        })
        .collect();
    // An entry naming no column of the table stays, for the plan to name it.
    filled.columns.extend(
        sink.columns
            .iter()
            .filter(|mapping| table.column(&mapping.column).is_none())
            .cloned(),
    );
    if filled.key.is_empty() {
        filled.key = table.primary_key.clone().ok_or_else(|| {
            vec![SinkError::NoPrimaryKey {
                sink: sink.name.clone(),
                table: sink.table.clone(),
            }]
        })?;
    }
    // The default conflict of a table whose every column is a key (or insert-only): the first
    // delivery wins, as for a hand-written sink (`file.rs`).
    if filled.conflict == ConflictPolicy::AlwaysUpdate && filled.updated_columns().next().is_none()
    {
        filled.conflict = ConflictPolicy::InsertIgnore;
    }
    let problems = check_sink(&filled);
    if !problems.is_empty() {
        return Err(problems
            .into_iter()
            .map(|problem| SinkError::Inconsistent {
                sink: sink.name.clone(),
                table: sink.table.clone(),
                problem,
            })
            .collect());
    }
    Ok(filled)
}

/// A column read from the record field of its own name.
fn field_of_its_name(column: &str) -> ColumnMapping {
    ColumnMapping {
        column: column.to_owned(),
        source: Source::Field(FieldPath::field(column)),
        required: None,
        rules: ValueRules::default(),
        decimal: None,
        filled_in: true,
    }
}
