//! One column's `"name":value` in a row image, the record key or a key header, including
//! what Debezium 3.6.1 writes for a value its converter fails on: a `numeric` `NaN` or
//! infinity (docs/capture.md#numeric-nan-and-infinity).

use super::encode_error::{EncodeError, UNAVAILABLE};
use super::header;
use super::json::push_string;
use super::shape::{ShapeColumn, TableShape};
use super::types::{Kind, ValueError};
use crate::model::Cell;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

/// Where a cell is written: that decides its form, and what a value without a `Decimal`
/// form becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    /// `before` or `after`: JSON; a value without a Decimal form is null (or the default).
    Row,
    /// The record key: JSON; a value without a Decimal form stops the capture.
    Key,
    /// A `__debezium.oldkey` / `__debezium.newkey` header: `SimpleHeaderConverter`'s text.
    KeyHeader,
}

/// The columns a `numeric` `NaN` or infinity was already logged for, shared by the clones of
/// one envelope (one per capture process): one WARN line per column, not one per row.
#[derive(Debug, Clone, Default)]
pub(super) struct Warned(Arc<Mutex<HashSet<(String, String)>>>);

impl Warned {
    /// Whether `column` of `table` is logged for the first time (it is then remembered).
    fn first(&self, table: &str, column: &str) -> bool {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.insert((table.to_owned(), column.to_owned()))
    }
}

/// Appends `"name":value` of column `at` of `shape` holding `cell`, as `place` writes it.
pub(super) fn push_cell(
    out: &mut String,
    shape: &TableShape,
    at: usize,
    cell: &Cell,
    place: Place,
    warned: &Warned,
) -> Result<(), EncodeError> {
    let column = &shape.columns[at];
    if place == Place::KeyHeader {
        header::push_string(out, &column.name);
    } else {
        push_string(out, &column.name);
    }
    out.push(':');
    let fail = |source: ValueError| EncodeError::Value {
        topic: shape.topic.clone(),
        source,
    };
    match cell {
        Cell::Null => out.push_str(column.required_fill.as_deref().unwrap_or("null")),
        Cell::Text(text) if column.kind.lacks_decimal_form(text) => {
            let in_key = place != Place::Row || shape.key.contains(&at);
            push_without_decimal_form(out, shape, column, text, in_key, warned)?;
        }
        Cell::Text(text) if place == Place::KeyHeader => {
            header::push_value(out, column.kind, &column.name, text).map_err(fail)?;
        }
        Cell::Text(text) => column
            .kind
            .push_value(out, &column.name, text)
            .map_err(fail)?,
        Cell::UnchangedToast => push_unavailable(out, column.kind),
        Cell::Binary(_) => {
            return Err(fail(ValueError {
                column: column.name.clone(),
                type_name: "binary",
                text: String::new(),
                why: "pgoutput's binary format is not requested by sluice capture",
            }));
        }
    }
    Ok(())
}

/// A `numeric` `NaN` or infinity (or an array of `numeric` holding one), which Debezium
/// 3.6.1 cannot convert (`SpecialValueDecimal.fromLogical` throws under
/// `decimal.handling.mode=precise`; pgjdbc's array reader throws on the element). In a row
/// image its `event.converting.failure.handling.mode=warn` leaves the field unset, so the
/// record holds `null`, or the column's default when its schema has one (the JSON
/// converter's `replace.null.with.default`); for a `NOT NULL` column without a default the
/// record fails its schema, and in the key nothing catches the failure: there Debezium's
/// connector stops, and so does the capture, naming the column. `in_key`: the column is one
/// of the record key's (Debezium builds the key of every event, so its failure comes first).
fn push_without_decimal_form(
    out: &mut String,
    shape: &TableShape,
    column: &ShapeColumn,
    text: &str,
    in_key: bool,
    warned: &Warned,
) -> Result<(), EncodeError> {
    let stop = |place: &'static str| EncodeError::NoDecimalForm {
        topic: shape.topic.clone(),
        column: column.name.clone(),
        text: text.chars().take(80).collect(),
        place,
    };
    if in_key {
        return Err(stop("is part of the record key"));
    }
    let value = match (&column.required_fill, &column.default) {
        (None, _) => "null",
        (Some(_), Some(default)) => default.as_str(),
        (Some(_), None) => return Err(stop("is NOT NULL without a default")),
    };
    let table = format!("{}.{}", shape.schema, shape.table);
    if warned.first(&table, &column.name) {
        tracing::warn!(
            table = %table,
            column = %column.name,
            value = %text.chars().take(80).collect::<String>(),
            written = value,
            "a numeric NaN or infinity has no Decimal form: written as Debezium writes it \
             (null, or the column's default), and not logged again for this column"
        );
    }
    out.push_str(value);
    Ok(())
}

/// The placeholder for an unchanged out-of-line value: the text for string columns, its
/// bytes for `bytes` columns (base64), as Debezium converts its placeholder per type.
fn push_unavailable(out: &mut String, kind: Kind) {
    use base64::Engine as _;
    let base64 = |out: &mut String| {
        out.push('"');
        base64::engine::general_purpose::STANDARD.encode_string(UNAVAILABLE, out);
        out.push('"');
    };
    // As Debezium 3.6.1 writes it per type (its UnchangedToastedReplicationMessageColumn;
    // text[] and int4[] seen here).
    match kind {
        Kind::Bytes | Kind::Decimal { .. } | Kind::Money | Kind::Bits { .. } => base64(out),
        Kind::Array(element) => match element.kind() {
            Kind::Text | Kind::Json => {
                out.push('[');
                push_string(out, UNAVAILABLE);
                out.push(']');
            }
            Kind::Bytes => {
                out.push('[');
                base64(out);
                out.push(']');
            }
            // The placeholder's bytes, one number each.
            Kind::Int32 | Kind::Int64 | Kind::Date => {
                out.push('[');
                let bytes: Vec<String> = UNAVAILABLE.bytes().map(|b| b.to_string()).collect();
                out.push_str(&bytes.join(","));
                out.push(']');
            }
            _ => push_string(out, UNAVAILABLE),
        },
        _ => push_string(out, UNAVAILABLE),
    }
}
