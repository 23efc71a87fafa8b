//! The decoder built from a sink and its plan: one column decoder per planned column (its
//! checks, its reading of Debezium's forms, its constant made once, its slot in a scanned
//! record), the key, the guard, the lookups and the columns a conflict never updates.

use serde_json::Value;

use super::numbers::narrow;
use super::value::value_cell;
use super::{Cell, ColumnDecoder, SinkDecoder, Slot};
use crate::checks::{Check, value_checks};
use crate::equality::equality;
use crate::messages::fields::parse_timestamp;
use crate::model::{
    ColumnMapping, ConflictPolicy, Constant, Format, Lookup, Sink, Source, ValueRules,
};
use crate::modes::Reading;
use crate::plan::{ColumnPlan, SinkPlan};
use crate::scan::FieldSlots;
use crate::table::SqlType;

impl SinkDecoder {
    /// The decoder of `sink` as `plan` (its validated plan) checks it.
    pub fn new(sink: &Sink, plan: &SinkPlan) -> Self {
        let mut fields = FieldSlots::default();
        let mut columns: Vec<ColumnDecoder> = sink
            .columns
            .iter()
            .zip(&plan.columns)
            .map(|(mapping, planned)| ColumnDecoder::new(sink, mapping, planned, &mut fields))
            .collect();
        mark_takers(&mut columns, &mut fields);
        let equality = plan.columns.iter().map(|c| equality(&c.kind)).collect();
        let position = |name: &str| sink.columns.iter().position(|c| c.column == name);
        let guard = match &sink.conflict {
            ConflictPolicy::NewestWins { column } => position(column),
            _ => None,
        };
        Self {
            columns,
            fields,
            key: sink.key.iter().filter_map(|k| position(k)).collect(),
            guard,
            conflict: sink.conflict.clone(),
            lookups: lookup_columns(sink),
            equality,
            fixed: fixed_columns(plan),
            format: sink.format,
            on_tombstone: sink.on_tombstone,
            value_encoding: sink.value_encoding,
            key_encoding: sink.key_encoding,
            schemas: None,
        }
    }
}

impl ColumnDecoder {
    /// The decoder of one column of `sink`: `mapping`'s source as `planned` checks it; a field
    /// or lookup source gets the slot of its top-level field in `fields`.
    fn new(
        sink: &Sink,
        mapping: &ColumnMapping,
        planned: &ColumnPlan,
        fields: &mut FieldSlots,
    ) -> Self {
        ColumnDecoder {
            source: mapping.source.clone(),
            field_name: source_name(&mapping.source),
            required: planned.checks.contains(&Check::Required),
            checks: planned
                .checks
                .iter()
                .filter(|c| !matches!(c, Check::Required | Check::NullWhenAbsent))
                .cloned()
                .collect(),
            time_precision: planned.time_precision,
            numeric: match &planned.kind {
                SqlType::Array(element) => element.is_decimal(),
                kind => kind.is_decimal(),
            },
            json: matches!(planned.kind, SqlType::Json | SqlType::Jsonb),
            reading: Reading::new(
                matches!(sink.format, Format::Debezium | Format::ConnectJson).then_some(sink.modes),
                mapping.decimal,
                &planned.kind,
                planned.time_precision,
            ),
            constant: source_constant(&mapping.source, planned),
            slot: field_slot(&mapping.source, fields),
        }
    }
}

/// A constant source's cell, made once (`None` for any other source).
fn source_constant(source: &Source, planned: &ColumnPlan) -> Option<Cell> {
    match source {
        Source::Const(constant) => Some(
            form_constant(constant, &planned.kind)
                .and_then(Result::ok)
                .unwrap_or_else(|| constant_cell(constant, &planned.sql_type)),
        ),
        _ => None,
    }
}

/// A field or lookup source's place in a scanned record, its top-level field registered in
/// `fields` (`None` for any other source); whether it takes the value is decided later
/// ([`mark_takers`]).
fn field_slot(source: &Source, fields: &mut FieldSlots) -> Option<Slot> {
    let path = match source {
        Source::Field(path) => path,
        Source::Lookup(lookup) => &lookup.field,
        _ => return None,
    };
    let (first, rest) = path.segments().split_first()?;
    Some(Slot {
        index: fields.slot(first),
        rest: rest.to_vec(),
        takes: false,
    })
}

/// Marks which column takes each top-level field's value, and which fields keep their text.
fn mark_takers(columns: &mut [ColumnDecoder], fields: &mut FieldSlots) {
    // The last column reading a whole top-level field takes its value; no later column
    // (and no nested path, which only borrows) reads it after that. A NUMERIC or JSON
    // column's field keeps its text (a nested path's digits are read from it).
    let mut read: Vec<bool> = Vec::new();
    // A field read only as a whole by timestamp columns may come as its instant.
    let mut instant: Vec<bool> = Vec::new();
    for column in columns.iter_mut().rev() {
        let timestamp = matches!(column.checks.first(), Some(Check::Timestamp { .. }))
            && matches!(column.source, Source::Field(_));
        if let Some(slot) = &mut column.slot {
            if column.numeric || column.json {
                fields.keep_text(slot.index);
            }
            if read.len() <= slot.index {
                read.resize(slot.index + 1, false);
                instant.resize(slot.index + 1, true);
            }
            slot.takes = slot.rest.is_empty() && !read[slot.index];
            read[slot.index] = true;
            instant[slot.index] &= timestamp && slot.rest.is_empty();
        }
    }
    for (slot, only_timestamps) in instant.into_iter().enumerate() {
        if only_timestamps && read[slot] {
            fields.read_as_instant(slot);
        }
    }
}

/// The columns a conflict never updates (the key, insert-only columns), by position.
fn fixed_columns(plan: &SinkPlan) -> Vec<usize> {
    plan.columns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| (!c.updated).then_some(i))
        .collect()
}

/// The lookup columns by position, with their lookup.
fn lookup_columns(sink: &Sink) -> Vec<(usize, Lookup)> {
    sink.columns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| match &c.source {
            Source::Lookup(lookup) => Some((i, lookup.clone())),
            _ => None,
        })
        .collect()
}

/// A text constant for a type whose JSON form is a string of its own (a date, an enum
/// label, an address, …): its cell, or why it is not one; `None` for any other type (see
/// [`constant_cell`]).
fn form_constant(constant: &Constant, kind: &SqlType) -> Option<Result<Cell, String>> {
    let checks = value_checks(kind, &ValueRules::default());
    let own_form = matches!(
        checks.first(),
        Some(
            Check::Date
                | Check::Time
                | Check::Interval
                | Check::Bytes
                | Check::Padded(_)
                | Check::Address { .. }
                | Check::Label { .. }
        )
    );
    if !own_form {
        return None;
    }
    let Constant::Text(text) = constant else {
        return Some(Err(format!("a {kind} is written as a string")));
    };
    Some(
        value_cell(
            "const",
            &Value::String(text.clone()),
            None,
            &checks,
            &Reading::default(),
        )
        .map_err(|e| e.to_string()),
    )
}

/// A constant as its column's type (`sql_type`: the plan's type name); the plan checked
/// that it fits.
fn constant_cell(constant: &Constant, sql_type: &str) -> Cell {
    match (constant, sql_type) {
        (Constant::Text(text), "uuid") => {
            crate::forms::uuid(text).map_or_else(|| Cell::Text(text.clone()), Cell::Uuid)
        }
        (Constant::Text(text), "timestamptz" | "timestamp") => {
            parse_timestamp(text).map_or_else(|| Cell::Text(text.clone()), Cell::Timestamp)
        }
        (Constant::Text(text), "json" | "jsonb") => Cell::Json(Value::String(text.clone())),
        (Constant::Text(text), _) => Cell::Text(text.clone()),
        (Constant::Int(int), "smallint") => Cell::SmallInt(narrow(*int)),
        (Constant::Int(int), "integer") => Cell::Int(narrow(*int)),
        (Constant::Int(int), "bigint") => Cell::BigInt(*int),
        (Constant::Int(int), _) if sql_type.starts_with("numeric") || sql_type == "money" => {
            Cell::Numeric(int.to_string())
        }
        #[allow(
            clippy::cast_precision_loss,
            reason = "an integer constant for a float column"
        )]
        (Constant::Int(int), _) => Cell::Float(*int as f64),
        (Constant::Float(float), _) if sql_type.starts_with("numeric") || sql_type == "money" => {
            Cell::Numeric(float.to_string())
        }
        (Constant::Float(float), _) => Cell::Float(*float),
        (Constant::Bool(flag), _) => Cell::Bool(*flag),
    }
}

/// How reasons name a source's value: a field's path, `(record key)`, `(record key).a.b`,
/// `(header tenant)`, `(cdc lsn)`.
fn source_name(source: &Source) -> String {
    match source {
        Source::Field(path) => path.to_string(),
        Source::Lookup(lookup) => lookup.field.to_string(),
        Source::Key(None) => "(record key)".into(),
        Source::Key(Some(path)) => format!("(record key).{path}"),
        Source::Header { name, path: None } => format!("(header {name})"),
        Source::Header {
            name,
            path: Some(path),
        } => format!("(header {name}).{path}"),
        Source::Cdc(field) => format!("(cdc {})", field.as_str()),
        Source::Const(_) | Source::Kafka(_) => String::new(),
    }
}
