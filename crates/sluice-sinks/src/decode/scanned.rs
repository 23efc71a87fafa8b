//! The common case in one pass: the record is scanned for the top-level fields the columns
//! read, and each parsed value is moved into its cell (the copies a record goes through:
//! docs/ARCHITECTURE.md#memory); a NUMERIC or JSON column reads the value's text as the record
//! wrote it.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::{Cell, ColumnDecoder, Frame, SinkDecoder, Slot};
use crate::messages::DecodeError;
use crate::messages::fields::parse_object;
use crate::model::Source;
use crate::scan::Scanned;
use crate::wire::{Wanted, WriterSchema};

impl SinkDecoder {
    /// The common case in one pass: only the fields the columns read are kept, and a value
    /// read by one column is moved into its cell, not copied. A broken rule is the reason as
    /// the whole parse gives it, except that a NUMERIC is reported with the record's digits.
    /// `None` when the record is not one object or a required field is missing (the caller
    /// then decodes it the whole way).
    pub(super) fn decode_scanned(
        &self,
        payload: Option<&[u8]>,
        frame: &Frame<'_>,
    ) -> Option<Result<Vec<Cell>, DecodeError>> {
        // UTF-8 checked with SIMD: record values are mostly text, and the scalar check cost as
        // much as the parse.
        let text = simdutf8::basic::from_utf8(payload?).ok()?;
        let scanned = self.fields.scan(text)?;
        match self.scanned_cells(scanned, frame) {
            Ok(cells) => Some(cells),
            // A required field missing: the columns before it passed on the record's own
            // digits; its reason (with the legacy-name hint, which needs every key) comes
            // from the whole tree.
            Err(Unscanned::Missing(position)) => {
                let object = parse_object(payload).ok()?;
                let column = self.columns.get(position)?;
                Some(Err(column.decode(&object, frame).err()?))
            }
            Err(Unscanned::Unslotted) => None,
        }
    }

    /// The common case of a plain Avro record in one pass: the fields the columns read come
    /// straight from the bytes (`wire/avro_fields.rs`), with no JSON text of the record.
    /// `None` when the record is not that case (another kind of schema, bytes that do not
    /// decode, a required field missing): the caller transcodes the whole record, and the
    /// JSON path names the reason.
    pub(crate) fn decode_avro_fields(
        &self,
        schema: &WriterSchema,
        body: &[u8],
        frame: &Frame<'_>,
    ) -> Option<Result<Vec<Cell>, DecodeError>> {
        let wanted = Wanted {
            names: self.fields.names(),
            texts: self.fields.texts(),
            instants: self.fields.instants(),
        };
        let fields = schema.top_fields(body, wanted)?;
        let scanned = Scanned {
            values: fields.values,
            texts: fields
                .texts
                .into_iter()
                .map(|t| t.map(Cow::Owned))
                .collect(),
            instants: fields.instants,
        };
        self.scanned_cells(scanned, frame).ok()
    }

    /// The cells of a scanned record, column by column; the first broken rule is the
    /// reason.
    fn scanned_cells(
        &self,
        mut scanned: Scanned<'_>,
        frame: &Frame<'_>,
    ) -> Result<Result<Vec<Cell>, DecodeError>, Unscanned> {
        let mut cells = Vec::with_capacity(self.columns.len());
        for (position, column) in self.columns.iter().enumerate() {
            if !frame.decodes(position) || column.unavailable(frame) {
                cells.push(Cell::Null);
                continue;
            }
            if column.json_null(frame) {
                cells.push(Cell::RawJson("null".into()));
                continue;
            }
            let cell = match (column.outside_value(frame), &column.slot) {
                (Some(cell), _) => cell,
                (None, Some(slot)) => {
                    let lookup = matches!(column.source, Source::Lookup(_));
                    column
                        .scanned(&mut scanned, slot, lookup)
                        .ok_or(Unscanned::Missing(position))?
                }
                (None, None) => return Err(Unscanned::Unslotted),
            };
            match cell {
                Ok(cell) => cells.push(column.rounded(cell)),
                Err(reason) => return Ok(Err(reason)),
            }
        }
        Ok(Ok(cells))
    }
}

/// Why a scanned record's cells need more than the scan.
enum Unscanned {
    /// The column at this position is required and its field is missing.
    Missing(usize),
    /// A column reads something the scan does not hold.
    Unslotted,
}

impl ColumnDecoder {
    /// The cell of a scanned record's field, or the rule it breaks; `None` when it is required
    /// and missing.
    fn scanned(
        &self,
        scanned: &mut Scanned<'_>,
        slot: &Slot,
        lookup: bool,
    ) -> Option<Result<Cell, DecodeError>> {
        let Scanned {
            values,
            texts,
            instants,
        } = scanned;
        // A timestamp given as its instant: the cell its text would parse to (only timestamp
        // columns read this field).
        if let Some(Some(at)) = instants.get(slot.index) {
            return Some(Ok(Cell::Timestamp(*at)));
        }
        // The value's text only for a NUMERIC or JSON column (a float column reading the same
        // field gets the f64).
        let number = if self.numeric || self.json {
            texts
                .get(slot.index)
                .and_then(|text| text.as_deref())
                .and_then(|top| text_at(top, &slot.rest))
        } else {
            None
        };
        let value = if slot.takes {
            values.get_mut(slot.index)?.take().map(Cow::Owned)
        } else {
            // An absent step is an absent field (NULL when optional), not a reason to parse
            // the whole record again.
            values.get(slot.index)?.as_ref().and_then(|top| {
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
