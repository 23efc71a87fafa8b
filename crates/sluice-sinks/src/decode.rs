//! The decoder of a declared sink: a record → one typed value per planned column, each value
//! passing its column's checks (the plan's [`Check`]s, derived from the catalog). A value that
//! breaks a rule is rejected with a reason naming the field (the shared field rules of
//! `crate::messages`), so it alone is dead-lettered.
//!
//! Lookups are not resolved here: their key is decoded and checked as a [`Cell::Lookup`], and
//! the PostgreSQL adapter (`sluice_postgres::lookup`) resolves it.

use std::borrow::Cow;

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::checks::{Check, value_checks};
use super::decimal::Decimal;
use super::envelope::{self, ChangeMeta};
use super::equality::{Equality, equality};
use super::forms::{self, Interval};
use super::model::{
    Bound, CdcField, ConflictPolicy, Constant, FieldPath, Format, KafkaField, Lookup, OnTombstone,
    Sink, Source, ValueRules,
};
use super::modes::{self, Reading};
use super::scan::{FieldSlots, Scanned};
use super::table::SqlType;
use super::validate::SinkPlan;
use crate::messages::DecodeError;
use crate::messages::fields::dynamic;
use crate::messages::fields::{Count, parse_object, parse_timestamp};

/// One decoded value of a row (serialized only where a row waits in the database: a key
/// change's create held for its delete).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Cell {
    /// SQL NULL.
    Null,
    /// Text.
    Text(String),
    /// A SMALLINT.
    SmallInt(i16),
    /// An INTEGER.
    Int(i32),
    /// A BIGINT.
    BigInt(i64),
    /// A finite float.
    Float(f64),
    /// A NUMERIC, as its JSON text.
    Numeric(String),
    /// A boolean.
    Bool(bool),
    /// A UUID.
    Uuid(Uuid),
    /// A timestamp in UTC.
    Timestamp(DateTime<Utc>),
    /// A JSON value (a `json`/`jsonb` column, or an array carried as JSON).
    Json(Value),
    /// A JSON value as the record wrote it (a top-level field of a `json`/`jsonb` column:
    /// its numbers keep their digits).
    RawJson(String),
    /// A date.
    Date(NaiveDate),
    /// A time of day, in microseconds since midnight (up to `24:00:00`, which rounding to a
    /// `time(p)` can reach).
    Time(i64),
    /// An interval.
    Interval(Interval),
    /// Bytes.
    Bytes(Vec<u8>),
    /// A lookup key still to resolve.
    Lookup(String),
}

/// Cells are equal when they hold the same value: a JSON value as the record wrote it equals
/// the parsed value it reads as (the one pass keeps a JSON column's text, the whole-tree parse
/// its value).
impl PartialEq for Cell {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Cell::Null, Cell::Null) => true,
            (Cell::Text(a), Cell::Text(b))
            | (Cell::Numeric(a), Cell::Numeric(b))
            | (Cell::Lookup(a), Cell::Lookup(b))
            | (Cell::RawJson(a), Cell::RawJson(b)) => a == b,
            (Cell::SmallInt(a), Cell::SmallInt(b)) => a == b,
            (Cell::Int(a), Cell::Int(b)) => a == b,
            (Cell::BigInt(a), Cell::BigInt(b)) | (Cell::Time(a), Cell::Time(b)) => a == b,
            (Cell::Float(a), Cell::Float(b)) => a == b,
            (Cell::Bool(a), Cell::Bool(b)) => a == b,
            (Cell::Uuid(a), Cell::Uuid(b)) => a == b,
            (Cell::Timestamp(a), Cell::Timestamp(b)) => a == b,
            (Cell::Json(a), Cell::Json(b)) => a == b,
            (Cell::RawJson(text), Cell::Json(value)) | (Cell::Json(value), Cell::RawJson(text)) => {
                serde_json::from_str::<Value>(text).is_ok_and(|parsed| parsed == *value)
            }
            (Cell::Date(a), Cell::Date(b)) => a == b,
            (Cell::Interval(a), Cell::Interval(b)) => a == b,
            (Cell::Bytes(a), Cell::Bytes(b)) => a == b,
            _ => false,
        }
    }
}

/// What a record carries besides its value.
#[derive(Debug, Clone, Copy)]
pub struct RecordMeta<'a> {
    /// Its topic.
    pub topic: &'a str,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its timestamp, if it has one.
    pub timestamp: Option<DateTime<Utc>>,
    /// Its key, if it has one.
    pub key: Option<&'a [u8]>,
    /// Its headers in order: name and value (`None`: a header without a value).
    pub headers: &'a [(String, Option<Vec<u8>>)],
}

/// What one record gives the columns besides its value: its coordinates, the schema id of
/// its wire header, its change event's envelope, the fields Debezium did not read, and which
/// columns to decode at all (a delete decodes only its key and version).
#[derive(Debug, Clone, Copy)]
pub(super) struct Frame<'a> {
    pub(super) meta: &'a RecordMeta<'a>,
    pub(super) format: Format,
    pub(super) schema_id: Option<i32>,
    pub(super) change: Option<&'a ChangeMeta>,
    pub(super) unavailable: &'a [String],
    pub(super) only: Option<&'a [usize]>,
}

impl<'a> Frame<'a> {
    /// A plain record: every column, nothing else known.
    pub(super) fn new(meta: &'a RecordMeta<'a>, format: Format) -> Self {
        Self {
            meta,
            format,
            schema_id: None,
            change: None,
            unavailable: &[],
            only: None,
        }
    }

    /// Whether column `position` is decoded (else it is NULL, never written).
    fn decodes(&self, position: usize) -> bool {
        self.only.is_none_or(|only| only.contains(&position))
    }
}

/// A planned sink's decoder.
#[derive(Debug, Clone)]
pub struct SinkDecoder {
    columns: Vec<ColumnDecoder>,
    /// The top-level fields the columns read.
    fields: FieldSlots,
    pub(super) key: Vec<usize>,
    pub(super) guard: Option<usize>,
    pub(super) conflict: ConflictPolicy,
    pub(super) lookups: Vec<(usize, Lookup)>,
    /// Per column: how PostgreSQL compares its values (keys and the guard).
    pub(super) equality: Vec<Equality>,
    /// The columns a conflict never updates (the key, insert-only columns): a stored row
    /// keeps the values its first record gave them.
    pub(super) fixed: Vec<usize>,
    /// How a record value is wrapped.
    pub(super) format: Format,
    /// What a tombstone does.
    pub(super) on_tombstone: OnTombstone,
}

#[derive(Debug, Clone)]
struct ColumnDecoder {
    source: Source,
    /// The field path as reasons name it (built once, not per record).
    field_name: String,
    required: bool,
    checks: Vec<Check>,
    /// A timestamp column's fractional digits (`timestamptz(0)`): values are rounded to it
    /// as the column rounds them.
    time_precision: Option<u32>,
    /// Where a field source's value is in a scanned record (see [`Slot`]).
    slot: Option<Slot>,
    /// A NUMERIC column (or an array of NUMERIC): it gets the number's text as the record
    /// wrote it.
    numeric: bool,
    /// A `json`/`jsonb` column: it gets a top-level field's JSON text as the record wrote it
    /// (numbers keep their digits; `jsonb` reads them as numerics).
    json: bool,
    /// A constant source's cell, made once.
    constant: Option<Cell>,
    /// The forms of its type it reads beside its own (a Debezium mode's, a decimal string).
    reading: Reading,
}

/// A field source's place in a scanned record: the slot of its path's first segment, the
/// rest of the path, and whether this column is the last to read a whole top-level field (so
/// it may take the value instead of copying it).
#[derive(Debug, Clone)]
struct Slot {
    index: usize,
    rest: Vec<String>,
    takes: bool,
}

impl SinkDecoder {
    /// The decoder of `sink` as `plan` (its validated plan) checks it.
    pub fn new(sink: &Sink, plan: &SinkPlan) -> Self {
        let mut fields = FieldSlots::default();
        let mut columns: Vec<ColumnDecoder> = sink
            .columns
            .iter()
            .zip(&plan.columns)
            .map(|(mapping, planned)| {
                let path = match &mapping.source {
                    Source::Field(path) => Some(path),
                    Source::Lookup(lookup) => Some(&lookup.field),
                    _ => None,
                };
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
                        SqlType::Array(element) => matches!(**element, SqlType::Numeric { .. }),
                        kind => matches!(kind, SqlType::Numeric { .. }),
                    },
                    json: matches!(planned.kind, SqlType::Json | SqlType::Jsonb),
                    reading: Reading::new(
                        matches!(sink.format, Format::Debezium | Format::ConnectJson)
                            .then_some(sink.modes),
                        mapping.decimal,
                        &planned.kind,
                        planned.time_precision,
                    ),
                    constant: match &mapping.source {
                        Source::Const(constant) => Some(
                            form_constant(constant, &planned.kind)
                                .and_then(Result::ok)
                                .unwrap_or_else(|| constant_cell(constant, &planned.sql_type)),
                        ),
                        _ => None,
                    },
                    slot: path.and_then(|path| {
                        let (first, rest) = path.segments().split_first()?;
                        Some(Slot {
                            index: fields.slot(first),
                            rest: rest.to_vec(),
                            takes: false,
                        })
                    }),
                }
            })
            .collect();
        // The last column reading a whole top-level field takes its value; no later column
        // (and no nested path, which only borrows) reads it after that. A NUMERIC or JSON
        // column's field keeps its text (a nested path's digits are read from it).
        let mut read: Vec<bool> = Vec::new();
        for column in columns.iter_mut().rev() {
            if let Some(slot) = &mut column.slot {
                if column.numeric || column.json {
                    fields.keep_text(slot.index);
                }
                if read.len() <= slot.index {
                    read.resize(slot.index + 1, false);
                }
                slot.takes = slot.rest.is_empty() && !read[slot.index];
                read[slot.index] = true;
            }
        }
        let equality = plan.columns.iter().map(|c| equality(&c.kind)).collect();
        let fixed = plan
            .columns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| (!c.updated).then_some(i))
            .collect();
        let position = |name: &str| sink.columns.iter().position(|c| c.column == name);
        let guard = match &sink.conflict {
            ConflictPolicy::NewestWins { column } => position(column),
            _ => None,
        };
        let lookups = sink
            .columns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match &c.source {
                Source::Lookup(lookup) => Some((i, lookup.clone())),
                _ => None,
            })
            .collect();
        Self {
            columns,
            fields,
            key: sink.key.iter().filter_map(|k| position(k)).collect(),
            guard,
            conflict: sink.conflict.clone(),
            lookups,
            equality,
            fixed,
            format: sink.format,
            on_tombstone: sink.on_tombstone,
        }
    }

    /// Decodes one record value (`None`: a tombstone) of a plain JSON record into one cell
    /// per planned column, in column order; the first broken rule is the reason. (A record of
    /// any format, tombstones and deletes included: [`SinkDecoder::decode_record`].)
    pub fn decode(
        &self,
        payload: Option<&[u8]>,
        meta: &RecordMeta<'_>,
    ) -> Result<Vec<Cell>, DecodeError> {
        self.cells(payload, &Frame::new(meta, Format::Json))
    }

    /// How many columns a row has.
    pub(super) fn width(&self) -> usize {
        self.columns.len()
    }

    /// The columns whose field Debezium did not read (they keep their stored value).
    pub(super) fn unavailable_columns(&self, frame: &Frame<'_>) -> Vec<usize> {
        self.columns
            .iter()
            .enumerate()
            .filter_map(|(position, column)| column.unavailable(frame).then_some(position))
            .collect()
    }

    /// The cells of a row image (`payload`) in `frame`.
    pub(super) fn cells(
        &self,
        payload: Option<&[u8]>,
        frame: &Frame<'_>,
    ) -> Result<Vec<Cell>, DecodeError> {
        match self.decode_scanned(payload, frame) {
            Some(decoded) => decoded,
            // Not one JSON object, or a required field missing: the whole parse, which names
            // the reason (with the legacy-name hint, which needs every key).
            None => self.whole(payload, frame),
        }
    }

    /// Decodes from the record's whole JSON tree: the reference the one pass agrees with,
    /// and where every reason comes from.
    #[cfg(test)]
    pub(super) fn decode_whole(
        &self,
        payload: Option<&[u8]>,
        meta: &RecordMeta<'_>,
    ) -> Result<Vec<Cell>, DecodeError> {
        self.whole(payload, &Frame::new(meta, Format::Json))
    }

    fn whole(&self, payload: Option<&[u8]>, frame: &Frame<'_>) -> Result<Vec<Cell>, DecodeError> {
        let object = parse_object(payload)?;
        self.columns
            .iter()
            .enumerate()
            .map(|(position, column)| {
                if !frame.decodes(position) || column.unavailable(frame) {
                    return Ok(Cell::Null);
                }
                Ok(column.rounded(column.decode(&object, frame)?))
            })
            .collect()
    }

    /// The common case in one pass: only the fields the columns read are kept, and a value
    /// read by one column is moved into its cell, not copied. A broken rule is the reason as
    /// the whole parse gives it, except that a NUMERIC is reported with the record's digits.
    /// `None` when the record is not one object or a required field is missing (the caller
    /// then decodes it the whole way).
    fn decode_scanned(
        &self,
        payload: Option<&[u8]>,
        frame: &Frame<'_>,
    ) -> Option<Result<Vec<Cell>, DecodeError>> {
        // UTF-8 checked with SIMD: record values are mostly text, and the scalar check cost as
        // much as the parse.
        let text = simdutf8::basic::from_utf8(payload?).ok()?;
        let mut scanned = self.fields.scan(text)?;
        let mut cells = Vec::with_capacity(self.columns.len());
        for (position, column) in self.columns.iter().enumerate() {
            if !frame.decodes(position) || column.unavailable(frame) {
                cells.push(Cell::Null);
                continue;
            }
            let cell = match (column.outside_value(frame), &column.slot) {
                (Some(cell), _) => cell,
                (None, Some(slot)) => {
                    let lookup = matches!(column.source, Source::Lookup(_));
                    match column.scanned(&mut scanned, slot, lookup) {
                        Some(cell) => cell,
                        // A required field missing: the columns before it passed on the
                        // record's own digits; its reason (with the legacy-name hint, which
                        // needs every key) comes from the whole tree.
                        None => {
                            let object = parse_object(payload).ok()?;
                            return Some(Err(column.decode(&object, frame).err()?));
                        }
                    }
                }
                (None, None) => return None,
            };
            match cell {
                Ok(cell) => cells.push(column.rounded(cell)),
                Err(reason) => return Some(Err(reason)),
            }
        }
        Some(Ok(cells))
    }
}

/// Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch (it rounds from there).
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// `at` rounded to `precision` fractional digits as PostgreSQL rounds a `timestamp(p)`: half
/// away from zero, counted from its epoch.
pub(super) fn round_timestamp(at: DateTime<Utc>, precision: u32) -> DateTime<Utc> {
    if precision >= 6 {
        return at;
    }
    let unit = 10_i64.pow(6 - precision);
    let micros = at.timestamp_micros() - POSTGRES_EPOCH_MICROS;
    let half = unit / 2;
    let rounded = if micros >= 0 {
        (micros + half) / unit * unit
    } else {
        -((-micros + half) / unit * unit)
    };
    DateTime::from_timestamp_micros(rounded + POSTGRES_EPOCH_MICROS).unwrap_or(at)
}

impl ColumnDecoder {
    fn decode(&self, object: &Map<String, Value>, frame: &Frame<'_>) -> Result<Cell, DecodeError> {
        if let Some(cell) = self.outside_value(frame) {
            return cell;
        }
        match &self.source {
            Source::Lookup(lookup) => self.field(object, &lookup.field, true),
            Source::Field(path) => self.field(object, path, false),
            _ => Ok(Cell::Null),
        }
    }

    /// Whether the column's field is one Debezium did not read: it keeps its stored value.
    fn unavailable(&self, frame: &Frame<'_>) -> bool {
        !frame.unavailable.is_empty()
            && matches!(&self.source, Source::Field(path)
                if path.segments().first().is_some_and(|top| frame.unavailable.contains(top)))
    }

    /// The cell of a source outside the record value (a constant, the record's coordinates,
    /// key or headers, the change event's envelope); `None` for a field or a lookup.
    fn outside_value(&self, frame: &Frame<'_>) -> Option<Result<Cell, DecodeError>> {
        match &self.source {
            Source::Field(_) | Source::Lookup(_) => None,
            _ => Some(self.outside(frame)),
        }
    }

    fn outside(&self, frame: &Frame<'_>) -> Result<Cell, DecodeError> {
        let meta = frame.meta;
        match &self.source {
            Source::Field(_) | Source::Lookup(_) => Ok(Cell::Null),
            Source::Const(_) => Ok(self.constant.clone().unwrap_or(Cell::Null)),
            Source::Kafka(KafkaField::SchemaId) => {
                Ok(frame.schema_id.map_or(Cell::Null, Cell::Int))
            }
            Source::Kafka(field) => kafka_cell(*field, meta),
            Source::Key(None) => match meta.key {
                None => self.absent(None),
                Some(bytes) => self.present_outside(Value::String(utf8_key(bytes)?)),
            },
            Source::Key(Some(path)) => match meta.key {
                None => self.absent(None),
                Some(bytes) => {
                    let object = key_object(bytes, frame.format)?;
                    match find(&object, path) {
                        Some(Value::Null) | None => self.absent(Some(&object)),
                        Some(value) => self.present_outside(value.clone()),
                    }
                }
            },
            Source::Header { name, path } => {
                let value = meta
                    .headers
                    .iter()
                    .rev()
                    .find(|(header, _)| header == name)
                    .and_then(|(_, value)| value.as_deref());
                match (value, path) {
                    (None, _) => self.absent(None),
                    (Some(bytes), None) => match std::str::from_utf8(bytes) {
                        Ok(text) => self.present_outside(Value::String(text.to_owned())),
                        Err(_) => Err(dynamic::broken(
                            &self.field_name,
                            "must be UTF-8 text".into(),
                        )),
                    },
                    (Some(bytes), Some(path)) => {
                        let object: Map<String, Value> =
                            serde_json::from_slice(bytes).map_err(|_| {
                                dynamic::broken(&self.field_name, "must be a JSON object".into())
                            })?;
                        match find(&object, path) {
                            Some(Value::Null) | None => self.absent(None),
                            Some(value) => self.present_outside(value.clone()),
                        }
                    }
                }
            }
            Source::Cdc(field) => {
                let change = frame.change;
                let value = match field {
                    CdcField::Op => change.map(|c| Value::String(c.op.clone())),
                    CdcField::Lsn => change.and_then(|c| c.lsn).map(Value::from),
                    CdcField::Txid => change.and_then(|c| c.txid).map(Value::from),
                    CdcField::TsMs => change.and_then(|c| c.ts_ms).map(|ms| {
                        if matches!(self.checks.first(), Some(Check::Timestamp { .. })) {
                            DateTime::from_timestamp_millis(ms)
                                .map_or(Value::Null, |at| Value::String(at.to_rfc3339()))
                        } else {
                            Value::from(ms)
                        }
                    }),
                };
                match value {
                    None | Some(Value::Null) => self.absent(None),
                    Some(value) => self.present_outside(value),
                }
            }
        }
    }

    /// NULL for an absent optional value; the reason for a required one.
    fn absent(&self, object: Option<&Map<String, Value>>) -> Result<Cell, DecodeError> {
        if !self.required {
            return Ok(Cell::Null);
        }
        Err(match object {
            Some(object) => dynamic::missing(object, &self.field_name, false),
            None => DecodeError::Missing {
                field: self.field_name.clone().into(),
                hint: String::new(),
            },
        })
    }

    /// A present value from outside the record value, checked as a field's.
    fn present_outside(&self, value: Value) -> Result<Cell, DecodeError> {
        if value.is_null() {
            return self.absent(None);
        }
        self.present(Cow::Owned(value), None, false)
    }

    /// A timestamp rounded to the column's precision; any other cell as it is.
    fn rounded(&self, cell: Cell) -> Cell {
        match (cell, self.time_precision) {
            (Cell::Timestamp(at), Some(precision)) => {
                Cell::Timestamp(round_timestamp(at, precision))
            }
            (Cell::Time(micros), Some(precision)) => {
                Cell::Time(forms::round_time(micros, precision))
            }
            (cell, _) => cell,
        }
    }

    fn field(
        &self,
        object: &Map<String, Value>,
        path: &FieldPath,
        lookup: bool,
    ) -> Result<Cell, DecodeError> {
        let name = self.field_name.as_str();
        match find(object, path) {
            Some(Value::Null) | None if !self.required => Ok(Cell::Null),
            Some(Value::Null) => Err(dynamic::missing(object, name, true)),
            None => Err(dynamic::missing(object, name, false)),
            Some(value) => self.present(Cow::Borrowed(value), None, lookup),
        }
    }

    /// The cell of a scanned record's field, or the rule it breaks; `None` when it is required
    /// and missing.
    fn scanned(
        &self,
        scanned: &mut Scanned<'_>,
        slot: &Slot,
        lookup: bool,
    ) -> Option<Result<Cell, DecodeError>> {
        // The value's text only for a NUMERIC or JSON column (a float column reading the same
        // field gets the f64).
        let number = if self.numeric || self.json {
            scanned
                .texts
                .get(slot.index)
                .copied()
                .flatten()
                .and_then(|top| text_at(top, &slot.rest))
        } else {
            None
        };
        let value = if slot.takes {
            scanned.values.get_mut(slot.index)?.take().map(Cow::Owned)
        } else {
            // An absent step is an absent field (NULL when optional), not a reason to parse
            // the whole record again.
            scanned.values.get(slot.index)?.as_ref().and_then(|top| {
                slot.rest
                    .iter()
                    .try_fold(top, |value, segment| value.as_object()?.get(segment))
                    .map(Cow::Borrowed)
            })
        };
        match value {
            Some(value) if !value.is_null() => Some(self.present(value, number, lookup)),
            _ if !self.required => Some(Ok(Cell::Null)),
            _ => None,
        }
    }

    /// The cell of a present, non-null value (taken when owned, so text and JSON are not
    /// copied); `number`: the value's text as the record wrote it, when kept.
    fn present(
        &self,
        value: Cow<'_, Value>,
        number: Option<&str>,
        lookup: bool,
    ) -> Result<Cell, DecodeError> {
        let name = self.field_name.as_str();
        let cell = match (value, self.checks.first()) {
            (Cow::Owned(Value::String(text)), Some(Check::Text { min, max })) => {
                Cell::Text(dynamic::owned_text(name, text, *min, *max)?)
            }
            (json, Some(Check::Json)) if !has_nul(&json) => match number {
                Some(text) if self.json => Cell::RawJson(text.to_owned()),
                _ => Cell::Json(json.into_owned()),
            },
            (value, _) => match value_cell(name, &value, number, &self.checks, &self.reading)? {
                Cell::Float(_) if !lookup && self.numeric => {
                    Cell::Numeric(number.map_or_else(|| value.to_string(), str::to_owned))
                }
                cell => cell,
            },
        };
        Ok(if lookup { lookup_key(cell) } else { cell })
    }
}

/// The text of the value at `path` inside a JSON value's text (`None` when a step is not
/// there): a nested field keeps its digits too.
fn text_at<'t>(text: &'t str, path: &[String]) -> Option<&'t str> {
    path.iter().try_fold(text, |text, segment| {
        let object: std::collections::HashMap<String, &RawValue> =
            serde_json::from_str(text).ok()?;
        object.get(segment).map(|raw| raw.get())
    })
}

/// A checked lookup key as the text its query sends (the key column's own text form: an
/// integer in decimal, a UUID lower-case with hyphens).
fn lookup_key(cell: Cell) -> Cell {
    match cell {
        Cell::Text(key) => Cell::Lookup(key),
        Cell::SmallInt(key) => Cell::Lookup(key.to_string()),
        Cell::Int(key) => Cell::Lookup(key.to_string()),
        Cell::BigInt(key) => Cell::Lookup(key.to_string()),
        Cell::Uuid(key) => Cell::Lookup(key.hyphenated().to_string()),
        // Validation admits only text, integer and uuid keys.
        other => other,
    }
}

/// The value at `path` (nested objects), if every step exists.
fn find<'v>(object: &'v Map<String, Value>, path: &FieldPath) -> Option<&'v Value> {
    let (first, rest) = path.segments().split_first()?;
    rest.iter().try_fold(object.get(first)?, |value, segment| {
        value.as_object()?.get(segment)
    })
}

/// A present value checked by `checks` (the first one says the type); `number`: its text as
/// the record wrote it, when kept.
fn value_cell(
    field: &str,
    value: &Value,
    number: Option<&str>,
    checks: &[Check],
    reading: &Reading,
) -> Result<Cell, DecodeError> {
    let Some((first, rest)) = checks.split_first() else {
        return Ok(Cell::Json(value.clone()));
    };
    let count = match first {
        Check::Items(n) => Some(Count::Exactly(*n)),
        Check::MaxItems(n) => Some(Count::AtMost(*n)),
        Check::Array => Some(Count::Any),
        _ => None,
    };
    if let Some(count) = count {
        let element: Vec<Check> = rest
            .iter()
            .filter_map(|c| match c {
                Check::Each(inner) => Some((**inner).clone()),
                _ => None,
            })
            .collect();
        let what = match element.first() {
            Some(Check::Integer { .. }) => "integers",
            Some(Check::Text { .. }) => "strings",
            Some(Check::Number { .. }) => "numbers",
            Some(Check::Timestamp { .. }) => "timestamps",
            Some(Check::Uuid) => "UUIDs",
            Some(Check::Boolean) => "booleans",
            _ => "values",
        };
        // A NUMERIC[]'s elements get their own digits, read from the array's text.
        let texts: Vec<&RawValue> = number
            .filter(|text| text.starts_with('['))
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default();
        let mut texts = texts.into_iter().map(|raw| {
            let text = raw.get();
            text.starts_with(|c: char| c == '-' || c.is_ascii_digit())
                .then_some(text)
        });
        let cells = dynamic::elements(field, value, what, count, |name, item| {
            value_cell(name, item, texts.next().flatten(), &element, reading)
        })?;
        return Ok(Cell::Json(Value::Array(
            cells.into_iter().map(cell_json).collect(),
        )));
    }
    if let (Check::Number { min, max }, Value::String(text), true) =
        (first, value, reading.decimal_strings)
    {
        // A decimal string (decimal.handling.mode=string): its own digits, as a number's.
        let text = modes::decimal_text(text).map_err(|why| dynamic::broken(field, why))?;
        exact_range(field, text, *min, *max)?;
        return match rest.first() {
            Some(Check::NumericDigits { precision, scale }) => {
                numeric(field, text.to_owned(), *precision, *scale)
            }
            _ => Ok(Cell::Numeric(text.to_owned())),
        };
    }
    if let Some(cell) = modes::debezium_cell(field, value, first, reading)? {
        return Ok(cell);
    }
    if let (Check::Number { min, max }, Some(text)) = (first, number) {
        // A NUMERIC column's own digits: the rules hold for them, not for the f64.
        dynamic::finite(field, value, f64::MIN, None)?;
        exact_range(field, text, *min, *max)?;
        return match rest.first() {
            Some(Check::NumericDigits { precision, scale }) => {
                numeric(field, text.to_owned(), *precision, *scale)
            }
            _ => Ok(Cell::Numeric(text.to_owned())),
        };
    }
    let cell = match first {
        Check::Text { min, max } => Cell::Text(dynamic::text(field, value, *min, *max)?),
        Check::Integer { sql_type, lo, hi } => match *sql_type {
            "SMALLINT" => Cell::SmallInt(dynamic::int(field, value, narrow(*lo), narrow(*hi))?),
            "INTEGER" => Cell::Int(dynamic::int(field, value, narrow(*lo), narrow(*hi))?),
            _ => Cell::BigInt(dynamic::int(field, value, *lo, *hi)?),
        },
        Check::Number { min, max } => {
            let lo = min.map_or(f64::MIN, Bound::as_f64);
            let float = dynamic::finite(field, value, lo, max.map(Bound::as_f64))?;
            match rest.first() {
                Some(Check::NumericDigits { precision, scale }) => {
                    numeric(field, value.to_string(), *precision, *scale)?
                }
                Some(Check::Single) => Cell::Float(single(field, float)?),
                _ => Cell::Float(float),
            }
        }
        Check::Uuid => Cell::Uuid(dynamic::uuid(field, value)?),
        Check::Timestamp { .. } => Cell::Timestamp(dynamic::time(field, value)?),
        Check::Boolean => Cell::Bool(dynamic::boolean(field, value)?),
        Check::Date => Cell::Date(dynamic::form(field, value, "a date", forms::date)?),
        Check::Time => Cell::Time(dynamic::form(field, value, "a time of day", forms::time)?),
        Check::Interval => {
            Cell::Interval(dynamic::form(field, value, "an interval", forms::interval)?)
        }
        Check::Bytes => Cell::Bytes(modes::bytes(field, value, reading.binary)?),
        Check::Padded(max) => Cell::Text(dynamic::form(field, value, "character text", |text| {
            let kept = forms::unpadded(text).chars().count();
            if text.contains('\0') {
                Err("it contains U+0000".to_owned())
            } else if let Some(max) = max.filter(|max| kept > *max) {
                Err(format!(
                    "{kept} characters besides trailing spaces, the column holds {max}"
                ))
            } else {
                Ok(text.to_owned())
            }
        })?),
        Check::Address { network } => {
            let what = if *network {
                "an IP network"
            } else {
                "an IP address"
            };
            Cell::Text(dynamic::form(field, value, what, |text| {
                forms::address(text, *network)
            })?)
        }
        Check::Label { type_name, labels } => {
            let what = format!("a label of enum {type_name}");
            Cell::Text(dynamic::form(field, value, &what, |text| {
                if labels.iter().any(|label| label == text) {
                    Ok(text.to_owned())
                } else {
                    Err(format!("labels: {}", shown_labels(labels)))
                }
            })?)
        }
        Check::Json if has_nul(value) => {
            return Err(dynamic::broken(field, "must not contain U+0000".into()));
        }
        Check::Json => Cell::Json(value.clone()),
        // The plan puts a type check first; anything else keeps the value as it is.
        _ => Cell::Json(value.clone()),
    };
    Ok(cell)
}

/// A NUMERIC with at most `precision - scale` digits before the point once rounded to
/// `scale` digits after it (as PostgreSQL rounds, then checks), counted on the number's text:
/// the record's own digits when the one pass kept them, else the f64 serde_json read.
fn numeric(field: &str, text: String, precision: u32, scale: u32) -> Result<Cell, DecodeError> {
    let allowed = precision.saturating_sub(scale);
    let fits = Decimal::parse(&text, Some(scale))
        .is_some_and(|decimal| decimal.whole_digits() <= i64::from(allowed));
    if !fits {
        return Err(dynamic::broken(
            field,
            format!("must have at most {allowed} digits before the point, got {text}"),
        ));
    }
    Ok(Cell::Numeric(text))
}

/// A float a `real` holds as PostgreSQL reads it: rounded to single precision, neither
/// infinite nor zero from a value that is not.
fn single(field: &str, float: f64) -> Result<f64, DecodeError> {
    #[allow(
        clippy::cast_possible_truncation,
        reason = "the rounding a real column does, checked below"
    )]
    let rounded = float as f32;
    if rounded.is_infinite() || (rounded == 0.0 && float != 0.0) {
        return Err(dynamic::broken(
            field,
            format!("must be within the range of a real (single precision), got {float}"),
        ));
    }
    Ok(float)
}

/// The largest exponent PostgreSQL's numeric input reads (`1e1000`).
const MAX_NUMERIC_EXPONENT: i64 = 1000;

/// A number's text as a NUMERIC reads it: a decimal whose exponent PostgreSQL accepts.
fn exact_number(field: &str, text: &str) -> Result<Decimal, DecodeError> {
    let exponent = match text.find(['e', 'E']) {
        Some(at) => text[at + 1..].parse::<i64>().ok(),
        None => Some(0),
    };
    exponent
        .filter(|e| e.abs() <= MAX_NUMERIC_EXPONENT)
        .and_then(|_| Decimal::parse(text, None))
        .ok_or_else(|| {
            dynamic::broken(
                field,
                format!(
                    "must be a number with an exponent within ±{MAX_NUMERIC_EXPONENT}, got {text}"
                ),
            )
        })
}

/// The `min`/`max` rules on a NUMERIC's own digits, with the reasons the f64 rules give.
fn exact_range(
    field: &str,
    text: &str,
    min: Option<Bound>,
    max: Option<Bound>,
) -> Result<(), DecodeError> {
    let value = exact_number(field, text)?;
    let decimal = |bound: Bound| match bound {
        Bound::Int(int) => Decimal::parse(&int.to_string(), None),
        Bound::Float(float) => Decimal::parse(&float.to_string(), None),
    };
    let below = min.and_then(decimal).is_some_and(|lo| value < lo);
    let above = max.and_then(decimal).is_some_and(|hi| value > hi);
    let lo = min.map_or(f64::MIN, Bound::as_f64);
    let rule = match max {
        Some(hi) if below || above => {
            format!("must be between {lo} and {}, got {text}", hi.as_f64())
        }
        None if below => format!("must be at least {lo}, got {text}"),
        _ => return Ok(()),
    };
    Err(dynamic::broken(field, rule))
}

/// Whether a JSON value holds U+0000 in a string or key (`jsonb` refuses it).
fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// A bound known to fit the narrower type (the plan intersected it with the type's range).
fn narrow<T: TryFrom<i64> + Default>(bound: i64) -> T {
    T::try_from(bound).unwrap_or_default()
}

/// A cell as a JSON array element.
fn cell_json(cell: Cell) -> Value {
    match cell {
        Cell::Null => Value::Null,
        Cell::Text(text) | Cell::Lookup(text) | Cell::Numeric(text) => Value::String(text),
        Cell::SmallInt(int) => int.into(),
        Cell::Int(int) => int.into(),
        Cell::BigInt(int) => int.into(),
        // -0 as text: a JSON number would pass through jsonb's numeric, which has no -0.
        Cell::Float(float) if float == 0.0 && float.is_sign_negative() => {
            Value::String("-0".into())
        }
        Cell::Float(float) => float.into(),
        Cell::Bool(flag) => flag.into(),
        Cell::Uuid(uuid) => Value::String(uuid.to_string()),
        Cell::Timestamp(at) => Value::String(at.to_rfc3339()),
        Cell::Json(json) => json,
        Cell::RawJson(text) => serde_json::from_str(&text).unwrap_or(Value::Null),
        Cell::Date(date) => Value::String(forms::date_text(date)),
        Cell::Time(micros) => Value::String(forms::time_text(micros)),
        Cell::Interval(interval) => Value::String(interval.text()),
        Cell::Bytes(bytes) => Value::String(forms::bytes_text(&bytes)),
    }
}

/// An enum's labels for a reason: the first ten, then how many more.
fn shown_labels(labels: &[String]) -> String {
    let mut shown = labels
        .iter()
        .take(10)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if labels.len() > 10 {
        shown.push_str(&format!(" and {} more", labels.len() - 10));
    }
    shown
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
            uuid::Uuid::parse_str(text).map_or_else(|_| Cell::Text(text.clone()), Cell::Uuid)
        }
        (Constant::Text(text), "timestamptz" | "timestamp") => {
            parse_timestamp(text).map_or_else(|| Cell::Text(text.clone()), Cell::Timestamp)
        }
        (Constant::Text(text), "json" | "jsonb") => Cell::Json(Value::String(text.clone())),
        (Constant::Text(text), _) => Cell::Text(text.clone()),
        (Constant::Int(int), "smallint") => Cell::SmallInt(narrow(*int)),
        (Constant::Int(int), "integer") => Cell::Int(narrow(*int)),
        (Constant::Int(int), "bigint") => Cell::BigInt(*int),
        (Constant::Int(int), _) if sql_type.starts_with("numeric") => {
            Cell::Numeric(int.to_string())
        }
        #[allow(
            clippy::cast_precision_loss,
            reason = "an integer constant for a float column"
        )]
        (Constant::Int(int), _) => Cell::Float(*int as f64),
        (Constant::Float(float), _) if sql_type.starts_with("numeric") => {
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

/// The record key as UTF-8 text without U+0000.
fn utf8_key(bytes: &[u8]) -> Result<String, DecodeError> {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => Ok(text.to_owned()),
        _ => Err(dynamic::broken(
            "(record key)",
            "must be UTF-8 text without U+0000".into(),
        )),
    }
}

/// The record key as a JSON object (inside its Connect envelope for a Connect or Debezium
/// topic).
pub(super) fn key_object(bytes: &[u8], format: Format) -> Result<Map<String, Value>, DecodeError> {
    let text = utf8_key(bytes)?;
    let text = match format {
        Format::ConnectJson | Format::Debezium => envelope::connect(&text)
            .map_err(|why| dynamic::broken("(record key)", why))?
            .unwrap_or_default(),
        Format::Json | Format::SchemaRegistryJson => text,
    };
    serde_json::from_str(&text)
        .map_err(|_| dynamic::broken("(record key)", "must be a JSON object".into()))
}

/// A coordinate of the record.
fn kafka_cell(field: KafkaField, meta: &RecordMeta<'_>) -> Result<Cell, DecodeError> {
    Ok(match field {
        KafkaField::Timestamp => meta.timestamp.map_or(Cell::Null, Cell::Timestamp),
        KafkaField::Topic => Cell::Text(meta.topic.to_owned()),
        KafkaField::Partition => Cell::Int(meta.partition),
        KafkaField::Offset => Cell::BigInt(meta.offset),
        // Read from the wire header by the frame, never here.
        KafkaField::SchemaId => Cell::Null,
        KafkaField::Key => match meta.key {
            None => Cell::Null,
            Some(bytes) => Cell::Text(utf8_key(bytes)?),
        },
    })
}
