//! A written column's plan: its source checked against the column's type (by the kind of
//! source: a field, a change event's envelope, a constant, a Kafka coordinate, a lookup), and
//! the checks a value must pass, derived from the type and the declared rules.

use std::collections::HashMap;

use serde::Serialize;

use super::error::SinkError;
use super::fits::{assignable, cdc_fits, constant_fits, kafka_fits, lookup_cast};
use crate::checks::{Check, misplaced_rules, value_checks};
use crate::model::{
    CdcField, ColumnMapping, ConflictPolicy, Constant, Format, KafkaField, Lookup, Sink, Source,
    ValueRules,
};
use crate::modes::DecimalForm;
use crate::table::{SqlType, TableShape};

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

/// One column's plan, or why its source does not fit.
pub(super) fn column_plan(
    sink: &Sink,
    mapping: &ColumnMapping,
    sql_type: &SqlType,
    not_null: bool,
    tables: &HashMap<String, TableShape>,
) -> Result<ColumnPlan, Vec<SinkError>> {
    let column = &mapping.column;
    if sql_type.param_type().is_none() {
        return Err(vec![SinkError::UnsupportedType {
            sink: sink.name.clone(),
            column: column.clone(),
            sql_type: sql_type.to_string(),
        }]);
    }
    let planned = Planned {
        sink,
        mapping,
        sql_type,
        source_text: mapping.source.to_string(),
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
            planned.read_checks(presence, &mut errors)
        }
        Source::Cdc(field) => planned.cdc_checks(*field, presence, &mut errors),
        Source::Const(constant) => {
            errors.extend(planned.constant_problem(constant));
            Vec::new()
        }
        Source::Kafka(field) => {
            errors.extend(planned.kafka_problems(*field));
            Vec::new()
        }
        Source::Lookup(lookup) => {
            let (checks, key_type) = planned.lookup_checks(lookup, presence, tables, &mut errors);
            lookup_key = key_type;
            checks
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(ColumnPlan {
        column: column.clone(),
        sql_type: sql_type.to_string(),
        param_type: sql_type.param_type().unwrap_or("text").to_owned(),
        source: planned.source_text,
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

/// A column being planned: its sink, its mapping, its type and its source as the plan shows
/// it.
struct Planned<'a> {
    /// The sink.
    sink: &'a Sink,
    /// The column's mapping.
    mapping: &'a ColumnMapping,
    /// The column's type.
    sql_type: &'a SqlType,
    /// The source as the plan shows it.
    source_text: String,
}

impl Planned<'_> {
    /// That the source cannot fit the column, for `reason`.
    fn does_not_fit(&self, reason: String) -> SinkError {
        SinkError::SourceDoesNotFit {
            sink: self.sink.name.clone(),
            column: self.mapping.column.clone(),
            source_text: self.source_text.clone(),
            sql_type: self.sql_type.to_string(),
            reason,
        }
    }

    /// The declared rules that do not apply to a value of `value_type`.
    fn misplaced(&self, value_type: &SqlType) -> Vec<SinkError> {
        misplaced_rules(value_type, &self.mapping.rules)
            .into_iter()
            .map(|rule| SinkError::RuleDoesNotApply {
                sink: self.sink.name.clone(),
                column: self.mapping.column.clone(),
                rule: rule.to_owned(),
                sql_type: value_type.to_string(),
            })
            .collect()
    }

    /// The checks of a value read from the record (a field, the key, a header).
    fn read_checks(&self, presence: Check, errors: &mut Vec<SinkError>) -> Vec<Check> {
        errors.extend(self.misplaced(self.sql_type));
        errors.extend(decimal_problems(self.sink, self.mapping, self.sql_type));
        let mut checks = vec![presence];
        checks.extend(value_checks(self.sql_type, &self.mapping.rules));
        checks
    }

    /// The checks of a field of a change event's envelope, which only a Debezium sink has.
    fn cdc_checks(
        &self,
        field: CdcField,
        presence: Check,
        errors: &mut Vec<SinkError>,
    ) -> Vec<Check> {
        if self.sink.format != Format::Debezium {
            errors.push(
                self.does_not_fit(
                    "`cdc` reads a Debezium change event: the sink needs `format = \"debezium\"`"
                        .into(),
                ),
            );
        }
        if let Err(reason) = cdc_fits(field, self.sql_type) {
            errors.push(self.does_not_fit(reason));
        }
        let mut checks = vec![presence];
        checks.extend(value_checks(self.sql_type, &ValueRules::default()));
        checks
    }

    /// Why a constant cannot be written to the column (checked once, here).
    fn constant_problem(&self, constant: &Constant) -> Option<SinkError> {
        constant_fits(constant, self.sql_type)
            .err()
            .map(|reason| self.does_not_fit(reason))
    }

    /// Why a Kafka coordinate cannot be written to the column, or cannot be read by the
    /// sink's format.
    fn kafka_problems(&self, field: KafkaField) -> Vec<SinkError> {
        let mut errors = Vec::new();
        if let Err(reason) = kafka_fits(field, self.sql_type) {
            errors.push(self.does_not_fit(reason));
        }
        if field == KafkaField::SchemaId
            && self.sink.format != Format::SchemaRegistryJson
            && !self.sink.value_encoding.is_registry()
        {
            errors.push(self.does_not_fit(
                "a schema id is read from a wire header: the sink needs `format = \"schema-registry-json\"` or a registry format (avro, protobuf, json-schema)".into(),
            ));
        }
        errors
    }

    /// The checks of a lookup's key and the type its query casts keys to; its table, columns,
    /// key and value checked against `tables`.
    fn lookup_checks(
        &self,
        lookup: &Lookup,
        presence: Check,
        tables: &HashMap<String, TableShape>,
        errors: &mut Vec<SinkError>,
    ) -> (Vec<Check>, Option<String>) {
        let Some(other) = tables.get(&lookup.table) else {
            errors.push(SinkError::UnknownLookupTable {
                sink: self.sink.name.clone(),
                column: self.mapping.column.clone(),
                table: lookup.table.clone(),
            });
            return (Vec::new(), None);
        };
        let mut checks = vec![presence];
        let mut lookup_key = None;
        for name in [&lookup.key_column, &lookup.value_column] {
            if other.column(name).is_none() {
                errors.push(SinkError::UnknownColumn {
                    sink: self.sink.name.clone(),
                    column: self.mapping.column.clone(),
                    table: lookup.table.clone(),
                    missing: name.clone(),
                });
            }
        }
        if let Some(key) = other.column(&lookup.key_column) {
            lookup_key = self.lookup_key(lookup, other, &key.sql_type, errors);
            checks.extend(value_checks(&key.sql_type, &self.mapping.rules));
            checks.push(Check::Known {
                key: format!("{}.{}", lookup.table, lookup.key_column),
                kind: lookup.unknown_kind.clone(),
            });
        }
        if let Some(value) = other.column(&lookup.value_column)
            && !assignable(&value.sql_type, self.sql_type)
        {
            errors.push(self.does_not_fit(format!(
                "`{}.{}` is {}",
                lookup.table, lookup.value_column, value.sql_type
            )));
        }
        (checks, lookup_key)
    }

    /// The type a lookup's key (of `key_type`, in `other`) is cast to; its type, uniqueness
    /// and rules checked.
    fn lookup_key(
        &self,
        lookup: &Lookup,
        other: &TableShape,
        key_type: &SqlType,
        errors: &mut Vec<SinkError>,
    ) -> Option<String> {
        let cast = lookup_cast(key_type);
        if cast.is_none() {
            errors.push(self.does_not_fit(format!(
                "lookup key `{}.{}` is {}; a lookup key must be text, an integer or a uuid",
                lookup.table, lookup.key_column, key_type
            )));
        }
        if !other.has_unique_key(std::slice::from_ref(&lookup.key_column)) {
            errors.push(SinkError::LookupKeyNotUnique {
                sink: self.sink.name.clone(),
                column: self.mapping.column.clone(),
                table: lookup.table.clone(),
                key: lookup.key_column.clone(),
            });
        }
        errors.extend(self.misplaced(key_type));
        cast.map(str::to_owned)
    }
}

/// Why a `numeric` column cannot read its field: `decimal` on a column of another type, or
/// a schemaless Debezium stream whose `decimal.handling.mode` is `precise` (bytes whose scale
/// only the schema has; docs/sinks.md, "Schemaless Debezium streams").
fn decimal_problems(sink: &Sink, mapping: &ColumnMapping, sql_type: &SqlType) -> Vec<SinkError> {
    let element = match sql_type {
        SqlType::Array(element) => element.as_ref(),
        other => other,
    };
    let numeric = element.is_decimal();
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
