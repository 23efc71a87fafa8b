//! A sink checked against the live schema: every table and column exists, the key has a
//! unique constraint, every source fits its column, every NOT NULL column gets a value.
//! The result is the sink's plan: its statement and each column's source and checks.

use serde::Serialize;
use std::collections::HashMap;

use super::checks::{Check, MAX_TOPIC_CHARS, misplaced_rules, value_checks};
use super::forms;
use super::held::{HeldStatements, held_statements};
use super::model::{
    CdcField, ColumnMapping, ConflictPolicy, Constant, Format, KafkaField, OnTombstone, Sink,
    Source, ValueRules,
};
use super::modes::{DebeziumModes, DecimalForm};
use super::statement::{
    StatementColumn, consume_moved_statement, delete_statement, moving_delete_statement,
    upsert_statement,
};
use super::table::{SqlType, TableShape};
use crate::messages::fields::parse_timestamp;
use sluice_core::topics::Topics;

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
            | Self::NotNullWithoutSource { sink, .. } => sink,
        }
    }

    /// The column the error is about (none when the table itself is missing).
    pub fn column(&self) -> Option<&str> {
        match self {
            Self::UnknownTable { .. } => None,
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
    /// How a record value is wrapped.
    pub format: String,
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

/// One written column of a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ColumnPlan {
    /// The column.
    pub column: String,
    /// Its type in the catalog.
    pub sql_type: String,
    /// The element type of its `UNNEST($n::<type>[])` parameter (arrays travel as `jsonb`).
    pub param_type: String,
    /// Where its value comes from.
    pub source: String,
    /// What a value must pass (for a constant or Kafka source: checked once, here).
    pub checks: Vec<Check>,
    /// Whether a conflicting row gets the new value.
    pub updated: bool,
    /// A `timestamp(p)`/`timestamptz(p)` column's fractional digits: values are rounded to
    /// them as the column rounds them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_precision: Option<u32>,
    /// A lookup's key column type as its query casts the keys (`text`, `smallint`, `int`,
    /// `bigint`, `uuid`): a record's key travels as text and is compared as the key column's
    /// own type, so its index is used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lookup_key: Option<String>,
    /// Its type in the catalog (what `sql_type` names).
    #[serde(skip)]
    pub kind: SqlType,
    /// Whether a row may leave it as it is in the table (a Debezium sink's field of a type
    /// Debezium may not read: a TOASTed value an update did not change).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub keepable: bool,
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
    let mut errors = Vec::new();
    let unknown = |column: &str, missing: &str| SinkError::UnknownColumn {
        sink: sink.name.clone(),
        column: column.to_owned(),
        table: sink.table.clone(),
        missing: missing.to_owned(),
    };
    for column in sink.key.iter().chain(&sink.never_written) {
        if table.column(column).is_none() && sink.mapping(column).is_none() {
            errors.push(unknown(column, column));
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
        for column in &sink.key {
            let nullable = table.column(column).is_some_and(|c| !c.not_null);
            if nullable && sink.mapping(column).is_some_and(|m| may_be_null(m, tables)) {
                errors.push(SinkError::NullableKey {
                    sink: sink.name.clone(),
                    column: column.clone(),
                });
            }
        }
    }
    if let ConflictPolicy::NewestWins { column } = &sink.conflict
        && let Some(shape) = table.column(column)
        && shape.sql_type.param_type().is_some()
        && !shape.sql_type.ordered_as_postgres()
    {
        errors.push(SinkError::GuardNotOrdered {
            sink: sink.name.clone(),
            column: column.clone(),
            sql_type: shape.sql_type.to_string(),
        });
    }
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
    let mut columns = Vec::with_capacity(sink.columns.len());
    for mapping in &sink.columns {
        let Some(shape) = table.column(&mapping.column) else {
            errors.push(unknown(&mapping.column, &mapping.column));
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
    for shape in &table.columns {
        if shape.not_null && !shape.has_default && sink.mapping(&shape.name).is_none() {
            errors.push(SinkError::NotNullWithoutSource {
                sink: sink.name.clone(),
                column: shape.name.clone(),
            });
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
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
    let statement = upsert_statement(
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
    let delete_statement =
        deletes.then(|| delete_statement(&sink.table, &delete_columns, delete_guard.as_ref()));
    // A key change's create may keep a value only where a column may be left unsent.
    let moves = statement_columns.iter().any(|c| c.keepable);
    let moving_delete_statement =
        moves.then(|| moving_delete_statement(&sink.table, &delete_columns, delete_guard.as_ref()));
    let consume_moved_statement =
        moves.then(|| consume_moved_statement(&sink.table, &delete_columns));
    let held = moves.then(|| held_statements(&sink.table, &delete_columns));
    let position = |name: &str| columns.iter().position(|c| c.column == name);
    let delete_key = sink.key.iter().filter_map(|k| position(k)).collect();
    let guard = match &sink.conflict {
        ConflictPolicy::NewestWins { column } => position(column),
        _ => None,
    };
    Ok(SinkPlan {
        name: sink.name.clone(),
        topics: sink.topics.clone(),
        group: sink.group(group_prefix),
        table: sink.table.clone(),
        conflict: sink.conflict.to_string(),
        batch_size: sink.batch_size,
        batch_bytes: sink.batch_bytes,
        statement,
        columns,
        never_written: sink.never_written.clone(),
        format: sink.format.as_str().to_owned(),
        on_tombstone: sink.on_tombstone.as_str().to_owned(),
        modes: matches!(sink.format, Format::Debezium | Format::ConnectJson).then_some(sink.modes),
        delete_statement,
        moving_delete_statement,
        consume_moved_statement,
        held,
        delete_key,
        guard,
    })
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

/// One column's plan, or why its source does not fit.
fn column_plan(
    sink: &Sink,
    mapping: &ColumnMapping,
    sql_type: &SqlType,
    not_null: bool,
    tables: &HashMap<String, TableShape>,
) -> Result<ColumnPlan, Vec<SinkError>> {
    let column = &mapping.column;
    let source_text = mapping.source.to_string();
    if sql_type.param_type().is_none() {
        return Err(vec![SinkError::UnsupportedType {
            sink: sink.name.clone(),
            column: column.clone(),
            sql_type: sql_type.to_string(),
        }]);
    }
    let does_not_fit = |reason: String| SinkError::SourceDoesNotFit {
        sink: sink.name.clone(),
        column: column.clone(),
        source_text: source_text.clone(),
        sql_type: sql_type.to_string(),
        reason,
    };
    let misplaced = |value_type: &SqlType| -> Vec<SinkError> {
        misplaced_rules(value_type, &mapping.rules)
            .into_iter()
            .map(|rule| SinkError::RuleDoesNotApply {
                sink: sink.name.clone(),
                column: column.clone(),
                rule: rule.to_owned(),
                sql_type: value_type.to_string(),
            })
            .collect()
    };
    let mut errors: Vec<SinkError> = Vec::new();
    let mut lookup_key = None;
    let required = mapping.required.unwrap_or(not_null);
    let presence = if required {
        Check::Required
    } else {
        Check::NullWhenAbsent
    };
    let checks = match &mapping.source {
        Source::Field(_) | Source::Key(_) | Source::Header { .. } => {
            errors.extend(misplaced(sql_type));
            errors.extend(decimal_problems(sink, mapping, sql_type));
            let mut checks = vec![presence];
            checks.extend(value_checks(sql_type, &mapping.rules));
            checks
        }
        Source::Cdc(field) => {
            if sink.format != Format::Debezium {
                errors.push(does_not_fit(
                    "`cdc` reads a Debezium change event: the sink needs `format = \"debezium\"`"
                        .into(),
                ));
            }
            if let Err(reason) = cdc_fits(*field, sql_type) {
                errors.push(does_not_fit(reason));
            }
            let mut checks = vec![presence];
            checks.extend(value_checks(sql_type, &ValueRules::default()));
            checks
        }
        Source::Const(constant) => {
            if let Err(reason) = constant_fits(constant, sql_type) {
                errors.push(does_not_fit(reason));
            }
            Vec::new()
        }
        Source::Kafka(field) => {
            if let Err(reason) = kafka_fits(*field, sql_type) {
                errors.push(does_not_fit(reason));
            }
            if *field == KafkaField::SchemaId && sink.format != Format::SchemaRegistryJson {
                errors.push(does_not_fit(
                    "a schema id is read from a wire header: the sink needs `format = \"schema-registry-json\"`".into(),
                ));
            }
            Vec::new()
        }
        Source::Lookup(lookup) => {
            let lookup_error = |make: fn(String, String, String) -> SinkError| {
                make(sink.name.clone(), column.clone(), lookup.table.clone())
            };
            match tables.get(&lookup.table) {
                None => {
                    errors.push(lookup_error(|sink, column, table| {
                        SinkError::UnknownLookupTable {
                            sink,
                            column,
                            table,
                        }
                    }));
                    Vec::new()
                }
                Some(other) => {
                    let mut checks = vec![presence];
                    for name in [&lookup.key_column, &lookup.value_column] {
                        if other.column(name).is_none() {
                            errors.push(SinkError::UnknownColumn {
                                sink: sink.name.clone(),
                                column: column.clone(),
                                table: lookup.table.clone(),
                                missing: name.clone(),
                            });
                        }
                    }
                    if let Some(key) = other.column(&lookup.key_column) {
                        let key_type = match &key.sql_type {
                            SqlType::Text | SqlType::Varchar(_) => Some("text"),
                            SqlType::SmallInt => Some("smallint"),
                            SqlType::Integer => Some("int"),
                            SqlType::BigInt => Some("bigint"),
                            SqlType::Uuid => Some("uuid"),
                            _ => None,
                        };
                        match key_type {
                            Some(key_type) => lookup_key = Some(key_type.to_owned()),
                            None => errors.push(does_not_fit(format!(
                                "lookup key `{}.{}` is {}; a lookup key must be text, an integer or a uuid",
                                lookup.table, lookup.key_column, key.sql_type
                            ))),
                        }
                        if !other.has_unique_key(std::slice::from_ref(&lookup.key_column)) {
                            errors.push(SinkError::LookupKeyNotUnique {
                                sink: sink.name.clone(),
                                column: column.clone(),
                                table: lookup.table.clone(),
                                key: lookup.key_column.clone(),
                            });
                        }
                        errors.extend(misplaced(&key.sql_type));
                        checks.extend(value_checks(&key.sql_type, &mapping.rules));
                        checks.push(Check::Known {
                            key: format!("{}.{}", lookup.table, lookup.key_column),
                            kind: lookup.unknown_kind.clone(),
                        });
                    }
                    if let Some(value) = other.column(&lookup.value_column)
                        && !assignable(&value.sql_type, sql_type)
                    {
                        errors.push(does_not_fit(format!(
                            "`{}.{}` is {}",
                            lookup.table, lookup.value_column, value.sql_type
                        )));
                    }
                    checks
                }
            }
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(ColumnPlan {
        column: column.clone(),
        sql_type: sql_type.to_string(),
        param_type: sql_type.param_type().unwrap_or("text").to_owned(),
        source: source_text,
        checks,
        updated: sink.conflict != ConflictPolicy::InsertIgnore
            && sink.updated_columns().any(|c| c == column),
        time_precision: None,
        lookup_key,
        kind: sql_type.clone(),
        // Every field of a Debezium sink: a nested path under a TOASTed field is unread too.
        keepable: sink.format == Format::Debezium && matches!(mapping.source, Source::Field(_)),
    })
}

/// Why a `numeric` column cannot read its field: `decimal` on a column of another type, or
/// a schemaless Debezium stream whose `decimal.handling.mode` is `precise` (bytes whose scale
/// only the schema has; docs/sinks.md, "Schemaless Debezium streams").
fn decimal_problems(sink: &Sink, mapping: &ColumnMapping, sql_type: &SqlType) -> Vec<SinkError> {
    let element = match sql_type {
        SqlType::Array(element) => element.as_ref(),
        other => other,
    };
    let numeric = matches!(element, SqlType::Numeric { .. });
    if mapping.decimal.is_some() && !numeric {
        return vec![SinkError::RuleDoesNotApply {
            sink: sink.name.clone(),
            column: mapping.column.clone(),
            rule: "decimal".into(),
            sql_type: sql_type.to_string(),
        }];
    }
    let connect = matches!(sink.format, Format::Debezium | Format::ConnectJson);
    if numeric
        && connect
        && !sink.modes.reads_numeric()
        && mapping.decimal != Some(DecimalForm::String)
        && !matches!(mapping.source, Source::Header { .. })
    {
        return vec![SinkError::SourceDoesNotFit {
            sink: sink.name.clone(),
            column: mapping.column.clone(),
            source_text: mapping.source.to_string(),
            sql_type: sql_type.to_string(),
            reason: "without schemas (`debezium = { schemas = false }`) a numeric under \
                     decimal.handling.mode=precise is bytes whose scale only the schema has: \
                     set the connector's decimal.handling.mode to string (or double) and \
                     declare it, `debezium = { schemas = false, decimal = \"string\" }`"
                .into(),
        }];
    }
    Vec::new()
}

/// Whether a value of `from` can be stored in `to` without loss.
fn assignable(from: &SqlType, to: &SqlType) -> bool {
    if from == to {
        return true;
    }
    match (from.int_range(), to.int_range()) {
        (Some((lo, hi)), Some((to_lo, to_hi))) => lo >= to_lo && hi <= to_hi,
        _ => match (from, to) {
            (SqlType::Varchar(_) | SqlType::Text, SqlType::Text | SqlType::Varchar(None)) => true,
            (SqlType::Varchar(Some(a)), SqlType::Varchar(Some(b))) => a <= b,
            (SqlType::Uuid, SqlType::Uuid) => true,
            _ => false,
        },
    }
}

/// Whether a constant can be written to `sql_type`.
fn constant_fits(constant: &Constant, sql_type: &SqlType) -> Result<(), String> {
    let checks = value_checks(sql_type, &ValueRules::default());
    if let Some(check) = checks.first()
        && let Some(fits) = match constant {
            Constant::Text(text) => forms::constant_fits(text, check),
            _ => forms::constant_fits("", check)
                .map(|_| Err(format!("a {sql_type} is written as a string"))),
        }
    {
        return fits;
    }
    match (constant, sql_type) {
        (Constant::Text(text), SqlType::Text | SqlType::Varchar(_)) => {
            if text.contains('\0') {
                return Err("it contains U+0000".into());
            }
            match sql_type {
                SqlType::Varchar(Some(max)) if text.chars().count() > *max => Err(format!(
                    "{} characters, the column holds {max}",
                    text.chars().count()
                )),
                _ => Ok(()),
            }
        }
        (Constant::Text(text), SqlType::Uuid) => uuid::Uuid::parse_str(text)
            .map(|_| ())
            .map_err(|_| "it is not a UUID".into()),
        (Constant::Text(text), SqlType::TimestampTz | SqlType::Timestamp) => parse_timestamp(text)
            .map(|_| ())
            .ok_or_else(|| "it is not an RFC 3339 timestamp".into()),
        (Constant::Int(int), _) if sql_type.int_range().is_some() => {
            let (lo, hi) = sql_type.int_range().unwrap_or((i64::MIN, i64::MAX));
            if (lo..=hi).contains(int) {
                Ok(())
            } else {
                Err(format!("out of range {lo}..{hi}"))
            }
        }
        (Constant::Int(_) | Constant::Float(_), SqlType::Real | SqlType::Double) => Ok(()),
        (Constant::Int(_) | Constant::Float(_), SqlType::Numeric { .. }) => Ok(()),
        (Constant::Bool(_), SqlType::Boolean) => Ok(()),
        (_, SqlType::Json | SqlType::Jsonb) => Ok(()),
        (Constant::Text(_), _) => Err("a string".into()),
        (Constant::Int(_), _) => Err("an integer".into()),
        (Constant::Float(_), _) => Err("a float".into()),
        (Constant::Bool(_), _) => Err("a boolean".into()),
    }
}

/// Whether a Kafka coordinate can be written to `sql_type`.
fn kafka_fits(field: KafkaField, sql_type: &SqlType) -> Result<(), String> {
    let ok = match field {
        KafkaField::Timestamp => matches!(sql_type, SqlType::TimestampTz | SqlType::Timestamp),
        KafkaField::Topic => match sql_type {
            SqlType::Text | SqlType::Varchar(None) => true,
            SqlType::Varchar(Some(max)) => *max >= MAX_TOPIC_CHARS,
            _ => false,
        },
        KafkaField::Partition => {
            matches!(
                sql_type,
                SqlType::Integer | SqlType::BigInt | SqlType::Numeric { .. }
            )
        }
        KafkaField::Offset => match sql_type {
            SqlType::BigInt => true,
            SqlType::Numeric { precision, scale } => {
                precision.is_none_or(|p| p.saturating_sub(*scale) >= 19)
            }
            _ => false,
        },
        KafkaField::Key => sql_type.is_text(),
        KafkaField::SchemaId => matches!(sql_type, SqlType::Integer | SqlType::BigInt),
    };
    if ok {
        return Ok(());
    }
    Err(match field {
        KafkaField::Timestamp => "a timestamp".into(),
        KafkaField::Topic => format!("a topic name has up to {MAX_TOPIC_CHARS} characters"),
        KafkaField::Partition => "a partition is a 32-bit integer".into(),
        KafkaField::Offset => "an offset is a 64-bit integer".into(),
        KafkaField::Key => "a key is text".into(),
        KafkaField::SchemaId => "a schema id is a 32-bit integer".into(),
    })
}

/// Whether a field of a change event's envelope can be written to `sql_type`.
fn cdc_fits(field: CdcField, sql_type: &SqlType) -> Result<(), String> {
    let wide_integer = matches!(sql_type, SqlType::BigInt)
        || matches!(sql_type, SqlType::Numeric { precision, scale }
            if precision.is_none_or(|p| p.saturating_sub(*scale) >= 19));
    let ok = match field {
        CdcField::Op => sql_type.is_text() || matches!(sql_type, SqlType::Char(_)),
        CdcField::Lsn | CdcField::Txid => wide_integer,
        CdcField::TsMs => {
            wide_integer || matches!(sql_type, SqlType::TimestampTz | SqlType::Timestamp)
        }
    };
    if ok {
        return Ok(());
    }
    Err(match field {
        CdcField::Op => "an operation is text (`c`, `r`, `u`, `d`)".into(),
        CdcField::Lsn => "an LSN is a 64-bit integer".into(),
        CdcField::Txid => "a transaction id is a 64-bit integer".into(),
        CdcField::TsMs => "a time in milliseconds is a 64-bit integer or a timestamp".into(),
    })
}
