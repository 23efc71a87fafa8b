//! The envelopes a record value comes in, taken off before the columns are decoded: the
//! schema registry's wire header, Kafka Connect's JSON envelope (`{"schema":…,"payload":…}`)
//! and Debezium's change events (`before`/`after`/`op`/`source`).
//!
//! A row inside an envelope is rebuilt as the text of a plain JSON object, each field's value
//! copied as the record wrote it (so a number keeps its digits) except where the Connect
//! schema names a logical type, which becomes the JSON form the column types read: a
//! `Decimal` (base64 of its unscaled two's-complement value) its decimal digits, a Debezium
//! `Json` the JSON it holds, dates, times and timestamps their ISO 8601 text. The columns are
//! then decoded from that text as from any JSON record.

use std::collections::HashMap;

use base64::Engine as _;
use chrono::{DateTime, NaiveDate};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::forms::time_text;
use crate::infinity;
use crate::modes::Unit;

/// What Debezium writes in place of a value it did not read (a TOASTed column an update did
/// not change): the column keeps its stored value.
pub const UNAVAILABLE_VALUE: &str = "__debezium_unavailable_value";

/// The parts of a Debezium change event a sink reads besides the row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeMeta {
    /// `op`: `c`, `r`, `u`, `d` (`t` truncate and `m` message are not row changes).
    pub op: String,
    /// `source.lsn`.
    pub lsn: Option<i64>,
    /// `ts_ms` (of the event, else of `source`).
    pub ts_ms: Option<i64>,
    /// `source.txId`.
    pub txid: Option<i64>,
}

/// What a change event does to its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChangeKind {
    /// `c`, `r`, `u`: insert or update with the `after` image.
    Upsert,
    /// `d`: delete by the `before` image's key.
    Delete,
    /// Anything else (`t` truncate, `m` message): nothing for a table sink.
    Other,
}

/// A Debezium change event taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change {
    pub(super) kind: ChangeKind,
    /// The row image the columns read (`after`, or `before` for a delete), as a JSON object.
    pub(super) image: String,
    /// Fields whose value Debezium did not have (the TOAST placeholder).
    pub(super) unavailable: Vec<String>,
    /// `io.debezium.data.Json` fields holding the JSON `null` (the text `"null"`): a value,
    /// not SQL NULL, which their `null` in the image cannot say.
    pub(super) json_nulls: Vec<String>,
    pub(super) meta: ChangeMeta,
}

/// The schema id and the JSON behind a schema registry wire header.
pub(super) fn schema_registry(payload: &[u8]) -> Result<(i32, &[u8]), String> {
    match payload {
        [0, a, b, c, d, rest @ ..] => Ok((i32::from_be_bytes([*a, *b, *c, *d]), rest)),
        [magic, _, _, _, _, ..] => Err(format!(
            "schema registry wire header: magic byte {magic}, expected 0"
        )),
        _ => Err(format!(
            "schema registry wire header: {} bytes, expected at least 5",
            payload.len()
        )),
    }
}

/// A Connect JSON envelope's row as a plain JSON object (a value that is no envelope is
/// returned as it is: a key, or a converter with `schemas.enable=false`); `None` for a null
/// payload (a delete, as Debezium's `ExtractNewRecordState` writes one), a tombstone.
pub(super) fn connect(text: &str) -> Result<Option<String>, String> {
    match envelope(text)? {
        Some((_, payload)) if payload.get() == "null" => Ok(None),
        Some((schema, payload)) => {
            rebuild(payload, schema.as_ref(), None).map(|row| Some(row.text))
        }
        None => Ok(Some(text.to_owned())),
    }
}

/// A Debezium change event, with or without the Connect envelope.
#[cfg(test)]
fn debezium(text: &str) -> Result<Change, String> {
    debezium_with(text, None)
}

/// A Debezium change event; without the Connect envelope, `known` is its Connect schema when
/// that is known otherwise (an Avro converter's, from the registry).
pub(super) fn debezium_with(text: &str, known: Option<&Value>) -> Result<Change, String> {
    let written;
    let (schema, payload) = match envelope(text)? {
        Some((schema, payload)) => {
            written = schema;
            (written.as_ref(), payload)
        }
        None => (known, parse_raw(text)?),
    };
    let fields: HashMap<String, &RawValue> = serde_json::from_str(payload.get())
        .map_err(|_| "a Debezium change event is a JSON object".to_owned())?;
    let op: String = fields
        .get("op")
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .ok_or_else(|| "a Debezium change event has an `op`".to_owned())?;
    let source: HashMap<String, Value> = fields
        .get("source")
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or_default();
    let number = |value: Option<&Value>| value.and_then(Value::as_i64);
    let meta = ChangeMeta {
        lsn: number(source.get("lsn")),
        ts_ms: fields
            .get("ts_ms")
            .and_then(|raw| serde_json::from_str::<i64>(raw.get()).ok())
            .or_else(|| number(source.get("ts_ms"))),
        txid: number(source.get("txId")),
        op,
    };
    let (kind, image) = match meta.op.as_str() {
        "c" | "r" | "u" => (ChangeKind::Upsert, "after"),
        "d" => (ChangeKind::Delete, "before"),
        _ => {
            return Ok(Change {
                kind: ChangeKind::Other,
                image: "{}".into(),
                unavailable: Vec::new(),
                json_nulls: Vec::new(),
                meta,
            });
        }
    };
    let row = fields
        .get(image)
        .filter(|raw| raw.get() != "null")
        .ok_or_else(|| format!("a Debezium `{}` event has no `{image}` image", meta.op))?;
    let row_schema = schema.and_then(|schema| struct_field(schema, image));
    let Rebuilt {
        text: image,
        unavailable,
        json_nulls,
    } = rebuild(row, row_schema, Some(UNAVAILABLE_VALUE))?;
    Ok(Change {
        kind,
        image,
        unavailable,
        json_nulls,
        meta,
    })
}

/// A key change's header (`__debezium.oldkey` / `__debezium.newkey`: the other key, as Kafka
/// Connect's header converter writes a struct, without its schema) as a plain JSON object,
/// its logical types read by the schema of the change event's row image (`image`: `after`
/// or `before`), which holds the key's columns: a `VariableScaleDecimal` written as
/// `{"scale", "value"}`, a `Decimal` as base64 bytes (a number stays as it is), a date as
/// its day number. Without a known schema the header is taken as it is.
pub(super) fn key_header(
    header: &str,
    value: &str,
    known: Option<&Value>,
    image: &str,
) -> Result<String, String> {
    let written;
    let schema = match envelope(value)? {
        Some((schema, _)) => {
            written = schema;
            written.as_ref()
        }
        None => known,
    };
    let header = header_json(header);
    match schema.and_then(|schema| struct_field(schema, image)) {
        Some(row_schema) => Ok(rebuild(parse_raw(&header)?, Some(row_schema), None)?.text),
        None => Ok(header),
    }
}

/// A header as Connect's `SimpleHeaderConverter` writes a struct, made JSON: it escapes only
/// `\` and `"` in strings (a tab or a newline stays raw, which JSON refuses) and writes a
/// float's `NaN` and infinities bare (quoted here: a float column reads them as text).
fn header_json(header: &str) -> String {
    let mut out = String::with_capacity(header.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = header;
    while let Some(c) = rest.chars().next() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                c if u32::from(c) < 0x20 => {
                    out.push_str(&format!("\\u{:04x}", u32::from(c)));
                    rest = &rest[c.len_utf8()..];
                    continue;
                }
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if let Some(word) = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|word| rest.starts_with(word))
        {
            out.push('"');
            out.push_str(word);
            out.push('"');
            rest = &rest[word.len()..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `{"schema": …, "payload": …}`: the schema (parsed) and the payload (as written); `None`
/// when the value is not an envelope.
fn envelope(text: &str) -> Result<Option<(Option<Value>, &RawValue)>, String> {
    #[derive(Deserialize)]
    struct Envelope<'t> {
        schema: Option<Value>,
        #[serde(borrow)]
        payload: &'t RawValue,
    }
    let fields: HashMap<String, &RawValue> = match serde_json::from_str(text) {
        Ok(fields) => fields,
        Err(_) => return Ok(None),
    };
    if fields.len() != 2 || !fields.contains_key("schema") || !fields.contains_key("payload") {
        return Ok(None);
    }
    let envelope: Envelope<'_> =
        serde_json::from_str(text).map_err(|e| format!("a Connect JSON envelope: {e}"))?;
    Ok(Some((envelope.schema, envelope.payload)))
}

fn parse_raw(text: &str) -> Result<&RawValue, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

/// The schema of field `name` of a struct schema.
fn struct_field<'s>(schema: &'s Value, name: &str) -> Option<&'s Value> {
    schema
        .get("fields")?
        .as_array()?
        .iter()
        .find(|field| field.get("field").and_then(Value::as_str) == Some(name))
}

/// A struct row rebuilt as a plain JSON object (see [`rebuild`]).
struct Rebuilt {
    text: String,
    /// The fields that held the placeholder (left out).
    unavailable: Vec<String>,
    /// The `io.debezium.data.Json` fields holding the JSON `null` (written `null`).
    json_nulls: Vec<String>,
}

/// A struct row as a plain JSON object: each field as written, a logical type converted by
/// its schema; with `placeholder`, the fields holding it are left out and named.
fn rebuild(
    row: &RawValue,
    schema: Option<&Value>,
    placeholder: Option<&str>,
) -> Result<Rebuilt, String> {
    let fields: Vec<(String, &RawValue)> =
        serde_json::from_str::<HashMap<String, &RawValue>>(row.get())
            .map_err(|_| "the row is not a JSON object".to_owned())?
            .into_iter()
            .collect();
    let mut text = String::with_capacity(row.get().len());
    let mut unavailable = Vec::new();
    let mut json_nulls = Vec::new();
    text.push('{');
    for (name, raw) in fields {
        let field_schema = schema.and_then(|s| struct_field(s, &name));
        if let Some(placeholder) = placeholder
            && is_placeholder(raw.get(), field_schema, placeholder)
        {
            unavailable.push(name);
            continue;
        }
        let value = match field_schema {
            Some(field_schema) => {
                logical(raw, field_schema).map_err(|why| format!("field `{name}`: {why}"))?
            }
            None => raw.get().to_owned(),
        };
        if value.trim() == "null"
            && raw.get() != "null"
            && field_schema
                .and_then(|s| s.get("name"))
                .and_then(Value::as_str)
                == Some("io.debezium.data.Json")
        {
            json_nulls.push(name.clone());
        }
        if text.len() > 1 {
            text.push(',');
        }
        text.push_str(&serde_json::to_string(&name).unwrap_or_default());
        text.push(':');
        text.push_str(&value);
    }
    text.push('}');
    Ok(Rebuilt {
        text,
        unavailable,
        json_nulls,
    })
}

/// Whether a value is Debezium's placeholder for a value it did not read: the string, an
/// array of it, (a `bytes` column, or any field of a record without a schema, whose
/// `bytea` is base64 under `binary.handling.mode=bytes`) its bytes in base64 (alone, or in an
/// array: an unchanged TOASTed `bytea[]`), or (an array of numbers: an unchanged TOASTed
/// `int4[]`, `int8[]`, `date[]`) its bytes as the array's numbers, as Debezium writes it
/// (`tests/data/debezium/types/survey-toast-2`).
fn is_placeholder(raw: &str, schema: Option<&Value>, placeholder: &str) -> bool {
    let quoted = format!("\"{placeholder}\"");
    if raw == quoted || raw == format!("[{quoted}]") {
        return true;
    }
    let base64 = base64::engine::general_purpose::STANDARD.encode(placeholder);
    if raw.starts_with('[') {
        return raw == format!("[\"{base64}\"]") || numbers_are_bytes(raw, placeholder.as_bytes());
    }
    let bytes = schema.is_none_or(|s| s.get("type").and_then(Value::as_str) == Some("bytes"));
    bytes && raw.trim_matches('"') == base64
}

/// Whether a JSON array holds exactly `bytes`, one number each (a cheap length check first:
/// an array of numbers is parsed only when it has as many items as the placeholder bytes).
pub(crate) fn numbers_are_bytes(raw: &str, bytes: &[u8]) -> bool {
    if raw.bytes().filter(|b| *b == b',').count() + 1 != bytes.len() {
        return false;
    }
    serde_json::from_str::<Vec<serde_json::Number>>(raw).is_ok_and(|numbers| {
        numbers.len() == bytes.len()
            && numbers
                .iter()
                .zip(bytes)
                .all(|(n, b)| n.as_f64() == Some(f64::from(*b)))
    })
}

/// A field's value converted by its Connect logical type (its schema's `name`).
fn logical(raw: &RawValue, schema: &Value) -> Result<String, String> {
    let text = raw.get();
    if text == "null" {
        return Ok(text.to_owned());
    }
    let name = schema.get("name").and_then(Value::as_str).unwrap_or("");
    let int =
        || serde_json::from_str::<i64>(text).map_err(|_| format!("{name} must be an integer"));
    let quoted = |value: String| serde_json::to_string(&value).unwrap_or_default();
    Ok(match name {
        // A number already (a header converter's, or a JSON converter's
        // `decimal.format=NUMERIC`): its digits as they are.
        "org.apache.kafka.connect.data.Decimal"
            if text.starts_with(['-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9']) =>
        {
            text.to_owned()
        }
        "org.apache.kafka.connect.data.Decimal" => {
            let scale = schema
                .get("parameters")
                .and_then(|p| p.get("scale"))
                .and_then(|s| s.as_str().and_then(|s| s.parse().ok()).or(s.as_u64()))
                .ok_or("a Decimal schema names its scale")?;
            let encoded: String =
                serde_json::from_str(text).map_err(|_| "a Decimal is a base64 string")?;
            decimal(
                &encoded,
                u32::try_from(scale).map_err(|_| "a Decimal's scale")?,
            )?
        }
        "io.debezium.data.VariableScaleDecimal" => {
            #[derive(Deserialize)]
            struct Variable {
                scale: u32,
                value: String,
            }
            let variable: Variable = serde_json::from_str(text)
                .map_err(|_| "a VariableScaleDecimal is {\"scale\", \"value\"}")?;
            decimal(&variable.value, variable.scale)?
        }
        "io.debezium.data.Json" => {
            let json: String = serde_json::from_str(text).map_err(|_| "Json is a string")?;
            parse_raw(&json)?;
            json
        }
        "io.debezium.time.Date" | "org.apache.kafka.connect.data.Date" => {
            let days = int()?;
            if let Some(positive) = infinity::debezium_days(days) {
                return Ok(quoted(infinity::text(positive).to_owned()));
            }
            let date = NaiveDate::from_ymd_opt(1970, 1, 1)
                .and_then(|epoch| epoch.checked_add_signed(chrono::TimeDelta::days(days)))
                .ok_or("a date out of range")?;
            quoted(date.format("%Y-%m-%d").to_string())
        }
        "io.debezium.time.MicroTimestamp" => quoted(timestamp(int()?, 1)?),
        "io.debezium.time.Timestamp" | "org.apache.kafka.connect.data.Timestamp" => {
            quoted(timestamp(int()?, 1_000)?)
        }
        "io.debezium.time.NanoTimestamp" => {
            let micros = Unit::Nanos
                .micros(int()?)
                .ok_or("a timestamp out of range")?;
            quoted(timestamp(micros, 1)?)
        }
        "io.debezium.time.MicroTime" => quoted(time_text(int()?)),
        "io.debezium.time.Time" | "org.apache.kafka.connect.data.Time" => {
            quoted(time_text(int()? * 1_000))
        }
        "io.debezium.time.NanoTime" => quoted(time_text(nano_time(int()?)?)),
        _ => text.to_owned(),
    })
}

/// A time of day in nanoseconds as microseconds, rounded, but never from within the day to
/// its end (`23:59:59.9999999` stays `23:59:59.999999`: the time form reads no `24:00:00`).
fn nano_time(nanos: i64) -> Result<i64, &'static str> {
    const NANOS_PER_DAY: i64 = crate::forms::MICROS_PER_DAY * 1_000;
    let micros = Unit::Nanos.micros(nanos).ok_or("a time out of range")?;
    Ok(if nanos < NANOS_PER_DAY {
        micros.min(crate::forms::MICROS_PER_DAY - 1)
    } else {
        micros
    })
}

/// Microseconds (`unit` of them per step) since the epoch as RFC 3339 in UTC; Debezium's
/// number for an infinite timestamp as `infinity` or `-infinity`.
fn timestamp(value: i64, unit: i64) -> Result<String, String> {
    if let Some(positive) = infinity::debezium_instant(value, unit) {
        return Ok(infinity::text(positive).to_owned());
    }
    let micros = value.checked_mul(unit).ok_or("a timestamp out of range")?;
    DateTime::from_timestamp_micros(micros)
        .map(|at| at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        .ok_or_else(|| "a timestamp out of range".to_owned())
}

/// A Connect `Decimal`: the base64 of a big-endian two's-complement unscaled value, and its
/// scale → the decimal's digits.
fn decimal(encoded: &str, scale: u32) -> Result<String, String> {
    // PostgreSQL's numeric: at most 16383 digits after the point, 131072 before.
    if scale > 16_383 || encoded.len() > 80_000 {
        return Err("a Decimal beyond PostgreSQL's numeric".into());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| "a Decimal is base64")?;
    let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
    // The magnitude: two's complement undone for a negative value.
    let mut magnitude: Vec<u8> = if negative {
        let mut inverted: Vec<u8> = bytes.iter().map(|b| !b).collect();
        for byte in inverted.iter_mut().rev() {
            let (sum, carry) = byte.overflowing_add(1);
            *byte = sum;
            if !carry {
                break;
            }
        }
        inverted
    } else {
        bytes
    };
    // Base 256 → base 10, by repeated division.
    let mut digits = Vec::new();
    while magnitude.iter().any(|b| *b != 0) {
        let mut remainder: u32 = 0;
        for byte in &mut magnitude {
            let current = (remainder << 8) | u32::from(*byte);
            *byte = u8::try_from(current / 10).unwrap_or(0);
            remainder = current % 10;
        }
        digits.push(char::from(b'0' + u8::try_from(remainder).unwrap_or(0)));
    }
    let scale = usize::try_from(scale).map_err(|_| "a Decimal's scale")?;
    while digits.len() <= scale {
        digits.push('0');
    }
    digits.reverse();
    let mut text: String = if negative { "-".into() } else { String::new() };
    let point = digits.len() - scale;
    text.extend(&digits[..point]);
    if scale > 0 {
        text.push('.');
        text.extend(&digits[point..]);
    }
    Ok(text)
}

/// A Debezium change event's `source.schema` and `source.table` (JSON, with or without the
/// schema envelope): the table a sink of many tables writes it to; `None` when the value is
/// not such an event.
/// Whether a value is a Debezium record that changes no row: a change event of op `m`
/// (a logical decoding message, such as a capture's heartbeat) or `t` (truncate), or a
/// transaction metadata record (`status` `BEGIN`/`END`, no `op`) — with or without the
/// Connect envelope. Such records name no table.
pub fn changes_no_row(value: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Event {
        payload: Option<Inner>,
        op: Option<String>,
        status: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Inner {
        op: Option<String>,
        status: Option<String>,
    }
    let Ok(event) = serde_json::from_slice::<Event>(value) else {
        return false;
    };
    let (op, status) = match event.payload {
        Some(inner) => (inner.op, inner.status),
        None => (event.op, event.status),
    };
    match op.as_deref() {
        Some(op) => matches!(op, "m" | "t"),
        None => matches!(status.as_deref(), Some("BEGIN" | "END")),
    }
}

pub fn change_source(value: &[u8]) -> Option<(String, String)> {
    #[derive(serde::Deserialize)]
    struct Event {
        payload: Option<Inner>,
        source: Option<SourceBlock>,
    }
    #[derive(serde::Deserialize)]
    struct Inner {
        source: Option<SourceBlock>,
    }
    #[derive(serde::Deserialize)]
    struct SourceBlock {
        schema: Option<String>,
        table: Option<String>,
    }
    let event: Event = serde_json::from_slice(value).ok()?;
    let source = event.payload.and_then(|p| p.source).or(event.source)?;
    Some((source.schema?, source.table?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change event with a Connect schema: key `k` as `schema` says, `doc` a Debezium Json.
    fn keyed_event(k_schema: &str, k: &str, doc: &str) -> String {
        format!(
            r#"{{"schema":{{"type":"struct","fields":[
                {{"field":"before","type":"struct","optional":true,"fields":[]}},
                {{"field":"after","type":"struct","optional":true,"fields":[
                    {{"field":"k",{k_schema}}},
                    {{"field":"d","type":"int32","name":"io.debezium.time.Date"}},
                    {{"field":"doc","type":"string","optional":true,"name":"io.debezium.data.Json"}}]}},
                {{"field":"op","type":"string"}}]}},
              "payload":{{"before":null,"after":{{"k":{k},"d":1,"doc":{doc}}},"op":"c"}}}}"#
        )
    }

    #[test]
    fn a_key_change_header_is_read_by_the_row_schema() {
        let decimal = r#""type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"10"}"#;
        let value = keyed_event(decimal, r#""EjRFijiS""#, "null");
        // sluice capture's form (base64 bytes), Debezium's (a number), and a date's days.
        let header = key_header(r#"{"k":"EjRFijiS","d":2}"#, &value, None, "after").unwrap();
        assert!(header.contains(r#""k":2001.5714285714"#), "{header}");
        assert!(header.contains(r#""d":"1970-01-03""#), "{header}");
        let header = key_header(r#"{"k":2001.5714285714}"#, &value, None, "after").unwrap();
        assert!(header.contains(r#""k":2001.5714285714"#), "{header}");
        // An unconstrained numeric: Debezium's VariableScaleDecimal struct.
        let variable =
            r#""type":"struct","name":"io.debezium.data.VariableScaleDecimal","fields":[]"#;
        let value = keyed_event(variable, r#"{"scale":0,"value":"AJY="}"#, "null");
        let header = key_header(r#"{"k":{"scale":0,"value":"AJY="}}"#, &value, None, "after");
        let header = header.unwrap();
        assert!(header.contains(r#""k":150"#), "{header}");
        // Without a schema, the header as it is.
        let schemaless = r#"{"before":null,"after":{"k":1},"op":"c"}"#;
        assert_eq!(
            key_header(r#"{"k":"x"}"#, schemaless, None, "after").unwrap(),
            r#"{"k":"x"}"#
        );
    }

    #[test]
    fn a_header_converters_struct_is_made_json() {
        // A key text with a tab and a newline, a quote and a backslash (escaped by the
        // converter), a float key's NaN and infinities bare.
        let written = "{\"t\":\"a\tb\nc \\\"q\\\\\",\"f\":NaN,\"g\":-Infinity,\"h\":Infinity}";
        let json = header_json(written);
        let value: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
        assert_eq!(
            value,
            serde_json::json!({"t": "a\tb\nc \"q\\", "f": "NaN", "g": "-Infinity", "h": "Infinity"})
        );
        // JSON already stays as it is, strings holding the words included.
        let plain = r#"{"k":"NaN and Infinity","n":-1.5e3}"#;
        assert_eq!(header_json(plain), plain);
    }

    #[test]
    fn a_json_null_is_a_value_and_a_null_is_none() {
        let int = r#""type":"int64""#;
        let change = debezium_with(&keyed_event(int, "1", r#""null""#), None).unwrap();
        assert_eq!(change.json_nulls, ["doc"]);
        let change = debezium_with(&keyed_event(int, "1", r#"" null ""#), None).unwrap();
        assert_eq!(change.json_nulls, ["doc"]);
        for doc in ["null", r#""\"null\"""#, r#""{\"a\":null}""#] {
            let change = debezium_with(&keyed_event(int, "1", doc), None).unwrap();
            assert!(change.json_nulls.is_empty(), "{doc}");
        }
    }

    #[test]
    fn a_nanosecond_time_rounds_within_its_day() {
        assert_eq!(nano_time(1_500), Ok(2));
        assert_eq!(nano_time(45_296_789_012_345), Ok(45_296_789_012));
        assert_eq!(
            nano_time(86_399_999_999_999),
            Ok(86_399_999_999),
            "not 24:00:00"
        );
        assert_eq!(nano_time(86_400_000_000_000), Ok(86_400_000_000));
    }

    #[test]
    fn a_change_events_source_names_its_table_with_or_without_the_schema_envelope() {
        let bare = br#"{"op":"c","source":{"schema":"shop","table":"orders","lsn":1}}"#;
        assert_eq!(change_source(bare), Some(("shop".into(), "orders".into())));
        let wrapped = br#"{"schema":{"type":"struct"},"payload":{"op":"u","source":{"schema":"s","table":"t"}}}"#;
        assert_eq!(change_source(wrapped), Some(("s".into(), "t".into())));
        assert_eq!(change_source(br#"{"source":{"schema":"s"}}"#), None);
        assert_eq!(change_source(b"not json"), None);
        for rowless in [
            &br#"{"op":"m","source":{"schema":"","table":""},"message":{"prefix":"p"}}"#[..],
            br#"{"schema":{},"payload":{"op":"t","source":{}}}"#,
            br#"{"status":"BEGIN","id":"571:53195829","event_count":null}"#,
            br#"{"schema":{},"payload":{"status":"END","id":"1","event_count":2}}"#,
        ] {
            assert!(
                changes_no_row(rowless),
                "{}",
                String::from_utf8_lossy(rowless)
            );
        }
        for row in [
            &br#"{"op":"c","after":{"id":1}}"#[..],
            br#"{"schema":{},"payload":{"op":"d"}}"#,
            br#"{"status":"BEGIN","op":"u"}"#,
            br#"{"id":1}"#,
            b"not json",
        ] {
            assert!(!changes_no_row(row), "{}", String::from_utf8_lossy(row));
        }
    }

    #[test]
    fn a_decimal_is_its_unscaled_value_at_its_scale() {
        // 12345.67 → unscaled 1234567 = 0x12D687.
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
        assert_eq!(decimal(&b64(&[0x12, 0xD6, 0x87]), 2), Ok("12345.67".into()));
        assert_eq!(
            decimal(&b64(&[0xED, 0x29, 0x79]), 2),
            Ok("-12345.67".into())
        );
        assert_eq!(decimal(&b64(&[0x05]), 3), Ok("0.005".into()));
        assert_eq!(decimal(&b64(&[0x00]), 0), Ok("0".into()));
        assert_eq!(decimal(&b64(&[0xFF]), 1), Ok("-0.1".into()));
    }

    #[test]
    fn a_wire_header_gives_its_schema_id() {
        assert_eq!(
            schema_registry(&[0, 0, 0, 1, 2, b'{', b'}']),
            Ok((258, &b"{}"[..]))
        );
        assert!(schema_registry(&[1, 0, 0, 0, 1, b'{']).is_err());
        assert!(schema_registry(b"{}").is_err());
    }

    #[test]
    fn a_connect_row_keeps_its_digits_and_reads_logical_types() {
        let text = r#"{"schema":{"type":"struct","fields":[
            {"type":"int64","field":"id"},
            {"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"},"field":"amount"},
            {"type":"string","name":"io.debezium.data.Json","field":"doc"},
            {"type":"int32","name":"io.debezium.time.Date","field":"day"},
            {"type":"int64","name":"io.debezium.time.MicroTimestamp","field":"at"}]},
            "payload":{"id":9007199254740993,"amount":"EtaH","doc":"{\"a\": [1, 2.50]}","day":19000,"at":1700000000123456}}"#;
        let row: Value = serde_json::from_str(&connect(text).unwrap().unwrap()).unwrap();
        assert_eq!(row["id"], serde_json::json!(9_007_199_254_740_993_u64));
        assert_eq!(row["amount"].to_string(), "12345.67");
        assert_eq!(row["doc"], serde_json::json!({"a": [1, 2.5]}));
        assert_eq!(row["day"], "2022-01-08");
        assert_eq!(row["at"], "2023-11-14T22:13:20.123456Z");
        assert_eq!(connect(r#"{"id": 1}"#), Ok(Some(r#"{"id": 1}"#.into())));
        assert_eq!(
            connect(r#"{"schema": {"type": "struct"}, "payload": null}"#),
            Ok(None)
        );
    }

    #[test]
    fn a_change_event_names_its_image_and_the_values_debezium_did_not_read() {
        let update = r#"{"before":null,"after":{"id":1,"big":"__debezium_unavailable_value","n":2},
            "source":{"lsn":123,"txId":7,"ts_ms":5},"op":"u","ts_ms":6}"#;
        let change = debezium(update).unwrap();
        assert_eq!(change.kind, ChangeKind::Upsert);
        assert_eq!(change.unavailable, ["big"]);
        let row: Value = serde_json::from_str(&change.image).unwrap();
        assert_eq!(row, serde_json::json!({"id": 1, "n": 2}));
        assert_eq!(
            change.meta,
            ChangeMeta {
                op: "u".into(),
                lsn: Some(123),
                ts_ms: Some(6),
                txid: Some(7)
            }
        );
        // Without a schema, a bytea's placeholder is its bytes in base64 (binary mode bytes).
        let schemaless = r#"{"after":{"id":1,"blob":"X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="},
            "op":"u"}"#;
        assert_eq!(debezium(schemaless).unwrap().unavailable, ["blob"]);
        let delete = r#"{"before":{"id":1,"big":null},"after":null,"source":{"lsn":124},"op":"d"}"#;
        assert_eq!(debezium(delete).unwrap().kind, ChangeKind::Delete);
        let truncate = r#"{"before":null,"after":null,"source":{},"op":"t"}"#;
        assert_eq!(debezium(truncate).unwrap().kind, ChangeKind::Other);
        assert!(debezium(r#"{"after":{"id":1}}"#).is_err(), "no op");
        assert!(debezium(r#"{"op":"c","after":null}"#).is_err(), "no after");
    }
}
