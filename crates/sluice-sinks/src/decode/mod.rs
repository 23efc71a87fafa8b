//! The decoder of a declared sink: a record → one typed value per planned column, each value
//! passing its column's checks (the plan's [`Check`]s, derived from the catalog). A value that
//! breaks a rule is rejected with a reason naming the field (the shared field rules of
//! `crate::messages`), so it alone is dead-lettered.
//!
//! Lookups are not resolved here: their key is decoded and checked as a [`Cell::Lookup`], and
//! the PostgreSQL adapter (`sluice_postgres::lookup`) resolves it.
//!
//! This file holds the decoder's types and its whole-tree path; the rest by concern:
//! `cell.rs` the decoded value, `columns.rs` the decoder built from the plan, `scanned.rs` the
//! one-pass path that moves parsed values into cells, `value.rs` a value → its cell by the
//! column's checks, `outside.rs` the sources outside the record value (key, headers, envelope,
//! coordinates), `numbers.rs` the numeric and time rules.

pub(super) mod cell;
mod columns;
mod numbers;
mod outside;
mod scanned;
mod value;

use chrono::{DateTime, Utc};

pub use self::cell::Cell;
pub(super) use self::outside::key_object;
use super::checks::Check;
use super::envelope::ChangeMeta;
use super::equality::Equality;
use super::model::{ConflictPolicy, Encoding, Format, Lookup, OnTombstone, Source};
use super::modes::Reading;
use super::scan::FieldSlots;
use crate::messages::DecodeError;
use crate::messages::fields::parse_object;
use crate::schemas::WriterSchemas;
use std::sync::Arc;

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
    /// Fields holding the JSON `null` as a value (a Debezium `Json` field's `"null"`).
    pub(super) json_nulls: &'a [String],
    pub(super) only: Option<&'a [usize]>,
    /// A change event's Connect schema known apart from the record (an Avro converter's).
    pub(super) connect_schema: Option<&'a serde_json::Value>,
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
            json_nulls: &[],
            only: None,
            connect_schema: None,
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
    /// How values are written: JSON, or a registry format transcoded to JSON first.
    pub(super) value_encoding: Encoding,
    /// How keys are written.
    pub(super) key_encoding: Encoding,
    /// The writers' schemas of registry records (`None`: the sink reads no registry format).
    pub(super) schemas: Option<Arc<dyn WriterSchemas>>,
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

    /// The same decoder reading registry records' schemas from `schemas`.
    #[must_use]
    pub fn with_schemas(mut self, schemas: Arc<dyn WriterSchemas>) -> Self {
        self.schemas = Some(schemas);
        self
    }

    /// The top-level fields of the record (of a change event's row image) its columns read.
    pub fn fields_read(&self) -> &[String] {
        self.fields.names()
    }

    /// Whether the sink reads a schema registry format (values or keys).
    pub fn reads_registry(&self) -> bool {
        self.value_encoding.is_registry() || self.key_encoding.is_registry()
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
                if column.json_null(frame) {
                    return Ok(Cell::RawJson("null".into()));
                }
                Ok(column.rounded(column.decode(&object, frame)?))
            })
            .collect()
    }
}

impl ColumnDecoder {
    /// Whether the column is a `json`/`jsonb` one whose whole field holds the JSON `null` as
    /// a value (a Debezium `Json` field's `"null"`): stored as JSON `null`, not SQL NULL.
    fn json_null(&self, frame: &Frame<'_>) -> bool {
        self.json
            && !frame.json_nulls.is_empty()
            && matches!(&self.source, Source::Field(path)
                if path.segments().len() == 1
                    && frame.json_nulls.iter().any(|f| Some(f) == path.segments().first()))
    }

    /// Whether the column's field is one Debezium did not read: it keeps its stored value.
    fn unavailable(&self, frame: &Frame<'_>) -> bool {
        !frame.unavailable.is_empty()
            && matches!(&self.source, Source::Field(path)
                if path.segments().first().is_some_and(|top| frame.unavailable.contains(top)))
    }
}
