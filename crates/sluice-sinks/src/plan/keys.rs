//! The checks of a sink's key, newest-wins column and tombstones against its table: the
//! named columns exist, `ON CONFLICT` has a unique constraint on exactly the key, a NULL key
//! cannot insert a row per delivery, the guard orders as PostgreSQL does, a tombstone can
//! name its key.

use std::collections::HashMap;

use super::error::SinkError;
use crate::model::{
    CdcField, ColumnMapping, ConflictPolicy, Format, KafkaField, OnTombstone, Sink, Source,
};
use crate::table::TableShape;

/// The errors of `sink`'s key, never-written columns, newest-wins column and tombstone rule
/// against `table` (`tables`: every table it names), in that order.
pub(super) fn key_problems(
    sink: &Sink,
    table: &TableShape,
    tables: &HashMap<String, TableShape>,
) -> Vec<SinkError> {
    let mut errors = Vec::new();
    for column in sink.key.iter().chain(&sink.never_written) {
        if table.column(column).is_none() && sink.mapping(column).is_none() {
            errors.push(unknown_column(sink, column, column));
        }
    }
    let key_known = sink.key.iter().all(|k| table.column(k).is_some());
    if key_known && !table.has_unique_key(&sink.key) {
        errors.push(SinkError::KeyNotUnique {
            sink: sink.name.clone(),
            column: sink.key.join(", "),
            table: sink.table.clone(),
        });
    }
    if key_known && !table.nulls_not_distinct(&sink.key) {
        errors.extend(nullable_keys(sink, table, tables));
    }
    errors.extend(unordered_guard(sink, table));
    errors.extend(tombstone_keys(sink));
    errors
}

/// That `sink`'s table has no column `missing`, named for the sink's `column`.
pub(super) fn unknown_column(sink: &Sink, column: &str, missing: &str) -> SinkError {
    SinkError::UnknownColumn {
        sink: sink.name.clone(),
        column: column.to_owned(),
        table: sink.table.clone(),
        missing: missing.to_owned(),
    }
}

/// The key columns that may hold NULL and whose source may give it, under a unique index
/// that treats NULLs as distinct.
fn nullable_keys(
    sink: &Sink,
    table: &TableShape,
    tables: &HashMap<String, TableShape>,
) -> Vec<SinkError> {
    let mut errors = Vec::new();
    for column in &sink.key {
        let nullable = table.column(column).is_some_and(|c| !c.not_null);
        if nullable && sink.mapping(column).is_some_and(|m| may_be_null(m, tables)) {
            errors.push(SinkError::NullableKey {
                sink: sink.name.clone(),
                column: column.clone(),
            });
        }
    }
    errors
}

/// A newest-wins column of a writable type that sluice cannot order as PostgreSQL does.
fn unordered_guard(sink: &Sink, table: &TableShape) -> Option<SinkError> {
    if let ConflictPolicy::NewestWins { column } = &sink.conflict
        && let Some(shape) = table.column(column)
        && shape.sql_type.param_type().is_some()
        && !shape.sql_type.ordered_as_postgres()
    {
        return Some(SinkError::GuardNotOrdered {
            sink: sink.name.clone(),
            column: column.clone(),
            sql_type: shape.sql_type.to_string(),
        });
    }
    None
}

/// The key columns read from the record value of a sink whose tombstones delete (a
/// tombstone has no value).
fn tombstone_keys(sink: &Sink) -> Vec<SinkError> {
    let mut errors = Vec::new();
    let key_in_value = matches!(sink.format, Format::Json | Format::SchemaRegistryJson);
    if sink.on_tombstone == OnTombstone::Delete && key_in_value {
        for key in &sink.key {
            if sink
                .mapping(key)
                .is_some_and(|m| matches!(m.source, Source::Field(_) | Source::Lookup(_)))
            {
                errors.push(SinkError::TombstoneKey {
                    sink: sink.name.clone(),
                    column: key.clone(),
                });
            }
        }
    }
    errors
}

/// Whether the source of a nullable column can give NULL: a field not `required`, the record
/// key or timestamp (a record may have none), a lookup not `required` or whose value column
/// is nullable. A constant, the topic, partition and offset never are NULL.
fn may_be_null(mapping: &ColumnMapping, tables: &HashMap<String, TableShape>) -> bool {
    let required = mapping.required == Some(true);
    match &mapping.source {
        Source::Field(_) | Source::Key(_) | Source::Header { .. } => !required,
        Source::Cdc(field) => *field != CdcField::Op && !required,
        Source::Const(_) => false,
        Source::Kafka(field) => matches!(field, KafkaField::Timestamp | KafkaField::Key),
        Source::Lookup(lookup) => {
            let value_not_null = tables
                .get(&lookup.table)
                .and_then(|t| t.column(&lookup.value_column))
                .is_some_and(|c| c.not_null);
            !(required && value_not_null)
        }
    }
}
