//! The sink's plan: its table, key and columns checked (`keys.rs`, `column.rs`), then the
//! statements it runs, built from its written columns (`crate::statement`).

use std::collections::HashMap;

use serde::Serialize;

use super::column::{ColumnPlan, column_plan};
use super::error::SinkError;
use super::keys::{key_problems, unknown_column};
use crate::held::{HeldStatements, held_statements};
use crate::model::{ConflictPolicy, Encoding, Format, OnTombstone, Sink};
use crate::modes::DebeziumModes;
use crate::statement::{
    StatementColumn, consume_moved_statement, delete_statement, moving_delete_statement,
    upsert_statement,
};
use crate::table::{SqlType, TableShape};
use sluice_core::topics::Topics;

/// What a valid sink will do.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SinkPlan {
    /// The sink's name.
    pub name: String,
    /// The topics it reads.
    pub topics: Topics,
    /// Its consumer group.
    pub group: String,
    /// The table it writes.
    pub table: String,
    /// The conflict policy.
    pub conflict: String,
    /// Records per transaction.
    pub batch_size: usize,
    /// Bytes of records per transaction.
    pub batch_bytes: usize,
    /// The one statement per batch.
    pub statement: String,
    /// Each written column, in parameter order.
    pub columns: Vec<ColumnPlan>,
    /// Table columns the statement never names.
    pub never_written: Vec<String>,
    /// The sink's `format` as the file says it: `avro`, `protobuf` and `json-schema` for a
    /// plain record in a registry format.
    pub format: String,
    /// A `debezium` sink's `value_format`, when its values are not JSON text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_format: Option<String>,
    /// The records' `key_format`, when their keys are not JSON text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_format: Option<String>,
    /// What a tombstone does.
    pub on_tombstone: String,
    /// The source connector's value-handling modes (a `debezium` or `connect-json` sink).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modes: Option<DebeziumModes>,
    /// The delete of a batch's deleted keys (a sink that deletes: tombstones as deletes, or
    /// Debezium change events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete_statement: Option<String>,
    /// The delete of a key change's old key that sets the old row aside for its new key's
    /// create (a Debezium sink with a column an update may leave unsent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moving_delete_statement: Option<String>,
    /// The removal of what key changes' deletes set aside, once read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_moved_statement: Option<String>,
    /// The statements of rows that wait for a key change's delete (with the two above).
    #[serde(skip)]
    pub held: Option<HeldStatements>,
    /// The positions (in `columns`) of the delete's key columns, in its parameter order.
    #[serde(skip)]
    pub delete_key: Vec<usize>,
    /// The position of the newest-wins column, whose value is a delete's version.
    #[serde(skip)]
    pub guard: Option<usize>,
}

/// Validates `sink` against the catalog (`tables`: the shapes of the tables it names, keyed
/// as the sink wrote them; an absent one does not exist). `group_prefix` derives the default
/// consumer group. All errors are returned, not only the first.
pub fn plan_sink(
    sink: &Sink,
    group_prefix: &str,
    tables: &HashMap<String, TableShape>,
) -> Result<SinkPlan, Vec<SinkError>> {
    let Some(table) = tables.get(&sink.table) else {
        return Err(vec![SinkError::UnknownTable {
            sink: sink.name.clone(),
            table: sink.table.clone(),
        }]);
    };
    let mut errors = key_problems(sink, table, tables);
    let columns = column_plans(sink, table, tables, &mut errors);
    errors.extend(unsourced_columns(sink, table));
    if !errors.is_empty() {
        return Err(errors);
    }
    let statements = Statements::new(sink, table, &columns);
    let position = |name: &str| columns.iter().position(|c| c.column == name);
    let delete_key = sink.key.iter().filter_map(|k| position(k)).collect();
    let guard = match &sink.conflict {
        ConflictPolicy::NewestWins { column } => position(column),
        _ => None,
    };
    Ok(SinkPlan {
        statement: statements.upsert,
        columns,
        delete_statement: statements.delete,
        moving_delete_statement: statements.moving_delete,
        consume_moved_statement: statements.consume_moved,
        held: statements.held,
        delete_key,
        guard,
        ..plan_template(sink, group_prefix)
    })
}

/// What is known of a sink of many tables (`table` with placeholders) before any record
/// names a table: its identity and settings; each table's columns and statements are planned
/// when a record first names it (docs/sinks.md#many-tables), so `statement` is empty and
/// `columns` holds none.
pub fn plan_template(sink: &Sink, group_prefix: &str) -> SinkPlan {
    SinkPlan {
        name: sink.name.clone(),
        topics: sink.topics.clone(),
        group: sink.group(group_prefix),
        table: if sink.routes.is_empty() {
            sink.table.clone()
        } else {
            let tables: Vec<&str> = sink.routes.iter().map(|r| r.sink.table.as_str()).collect();
            tables.join(", ")
        },
        conflict: if sink.routes.is_empty() {
            sink.conflict.to_string()
        } else {
            "conflict policy per route".to_owned()
        },
        batch_size: sink.batch_size,
        batch_bytes: sink.batch_bytes,
        statement: String::new(),
        columns: Vec::new(),
        never_written: sink.never_written.clone(),
        format: file_format(sink).to_owned(),
        value_format: (sink.format != Format::Json && sink.value_encoding != Encoding::Json)
            .then(|| sink.value_encoding.as_str().to_owned()),
        key_format: (sink.key_encoding != Encoding::Json)
            .then(|| sink.key_encoding.as_str().to_owned()),
        on_tombstone: sink.on_tombstone.as_str().to_owned(),
        modes: matches!(sink.format, Format::Debezium | Format::ConnectJson).then_some(sink.modes),
        delete_statement: None,
        moving_delete_statement: None,
        consume_moved_statement: None,
        held: None,
        delete_key: Vec::new(),
        guard: None,
    }
}

/// The plan of each mapped column of `table`, in the sink's order; a column the table lacks,
/// cannot write, or whose source does not fit adds its errors to `errors` instead.
/// The sink's `format` as the file says it: a plain record in a registry format is named by
/// its encoding (`format = "avro"`), not by the JSON object it is read as.
fn file_format(sink: &Sink) -> &'static str {
    match (sink.format, sink.value_encoding) {
        (Format::Json, encoding) => encoding.as_str(),
        (format, _) => format.as_str(),
    }
}

fn column_plans(
    sink: &Sink,
    table: &TableShape,
    tables: &HashMap<String, TableShape>,
    errors: &mut Vec<SinkError>,
) -> Vec<ColumnPlan> {
    let mut columns = Vec::with_capacity(sink.columns.len());
    for mapping in &sink.columns {
        let Some(shape) = table.column(&mapping.column) else {
            errors.push(unknown_column(sink, &mapping.column, &mapping.column));
            continue;
        };
        if !shape.writable {
            errors.push(SinkError::NotWritable {
                sink: sink.name.clone(),
                column: mapping.column.clone(),
            });
            continue;
        }
        match column_plan(sink, mapping, &shape.sql_type, shape.not_null, tables) {
            Ok(plan) => columns.push(ColumnPlan {
                time_precision: shape.time_precision,
                ..plan
            }),
            Err(mut more) => errors.append(&mut more),
        }
    }
    columns
}

/// The NOT NULL columns of `table` without a default that `sink` gives no value.
fn unsourced_columns(sink: &Sink, table: &TableShape) -> Vec<SinkError> {
    table
        .columns
        .iter()
        .filter(|shape| shape.not_null && !shape.has_default && sink.mapping(&shape.name).is_none())
        .map(|shape| SinkError::NotNullWithoutSource {
            sink: sink.name.clone(),
            column: shape.name.clone(),
        })
        .collect()
}

/// The statements a valid sink runs (docs/ARCHITECTURE.md#sinks).
struct Statements {
    /// The upsert of a batch.
    upsert: String,
    /// The delete of a batch's deleted keys (a sink that deletes).
    delete: Option<String>,
    /// The delete of a key change's old key that sets the old row aside.
    moving_delete: Option<String>,
    /// The removal of what key changes' deletes set aside, once read.
    consume_moved: Option<String>,
    /// The statements of rows that wait for a key change's delete.
    held: Option<HeldStatements>,
}

impl Statements {
    /// The statements of `sink` into `table`, from its written `columns` (in parameter order).
    fn new(sink: &Sink, table: &TableShape, columns: &[ColumnPlan]) -> Self {
        let types: Vec<(SqlType, bool)> = sink
            .columns
            .iter()
            .filter_map(|m| {
                table
                    .column(&m.column)
                    .map(|c| (c.sql_type.clone(), !c.not_null))
            })
            .collect();
        let statement_columns: Vec<StatementColumn<'_>> = columns
            .iter()
            .zip(&types)
            .map(|(plan, (sql_type, nullable))| StatementColumn {
                name: &plan.column,
                sql_type,
                updated: plan.updated,
                nullable: *nullable,
                keepable: plan.keepable,
            })
            .collect();
        let upsert = upsert_statement(
            &sink.table,
            &statement_columns,
            &sink.key,
            &sink.conflict,
            table.partitioned,
        );
        let deletes = sink.on_tombstone == OnTombstone::Delete || sink.format == Format::Debezium;
        let named = |name: &str| statement_columns.iter().find(|c| c.name == name).copied();
        let delete_columns: Vec<StatementColumn<'_>> =
            sink.key.iter().filter_map(|k| named(k)).collect();
        let delete_guard = match &sink.conflict {
            ConflictPolicy::NewestWins { column } => named(column),
            _ => None,
        };
        let delete =
            deletes.then(|| delete_statement(&sink.table, &delete_columns, delete_guard.as_ref()));
        // A key change's create may keep a value only where a column may be left unsent.
        let moves = statement_columns.iter().any(|c| c.keepable);
        Self {
            upsert,
            delete,
            moving_delete: moves.then(|| {
                moving_delete_statement(&sink.table, &delete_columns, delete_guard.as_ref())
            }),
            consume_moved: moves.then(|| consume_moved_statement(&sink.table, &delete_columns)),
            held: moves.then(|| held_statements(&sink.table, &delete_columns)),
        }
    }
}
