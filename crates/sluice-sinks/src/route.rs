//! One topic, several tables (docs/sinks.md#routes): a sink's `[[sink.route]]` entries, each
//! taken by the records whose value field, header or key equals a constant. The first route
//! whose condition holds takes a record, with its own table, columns, key and conflict
//! policy; every route is written in the batch's one transaction, its offsets claimed once. A
//! record no route takes is a dead letter of kind [`UNROUTED`], or skipped, as the sink's
//! `unrouted` says.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::decode::{SinkDecoder, key_object};
use super::model::{Constant, FieldPath, Sink};
use crate::messages::DecodeError;
use crate::messages::fields::echo;

/// The dead-letter kind of a record no route takes.
pub const UNROUTED: &str = "unrouted";

/// One `[[sink.route]]`: its condition, and the sink it writes by — the enclosing sink's
/// topics, group, format and batches with the route's own table, columns, key and policy.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkRoute {
    /// Which records it takes.
    pub when: When,
    /// The sink its records are written by.
    pub sink: Sink,
}

/// A route's condition: what it reads of a record, equal to a constant.
#[derive(Debug, Clone, PartialEq)]
pub struct When {
    /// What it reads.
    pub source: WhenSource,
    /// The value that takes the record.
    pub equals: Constant,
}

/// What a route's condition reads of a record.
#[derive(Debug, Clone, PartialEq)]
pub enum WhenSource {
    /// A field of the record value (of a change event's row image), as a column's `field`.
    Field(FieldPath),
    /// A header's value as text (the last header of the name, as Kafka clients read it).
    Header(String),
    /// A path into the record key's JSON; `None`: the whole key as text.
    Key(Option<FieldPath>),
}

/// What a record no route takes does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unrouted {
    /// A dead letter of kind [`UNROUTED`] (replayable once a route takes it).
    #[default]
    DeadLetter,
    /// Skipped, counted as skipped.
    Ignore,
}

/// A record as a route's condition reads it; the value and the key are read once per record,
/// and only when some condition reads them.
#[derive(Debug)]
pub struct RouteInput<'r> {
    /// The record value's row image (`None`: a tombstone, or not read).
    pub image: Option<Value>,
    /// The record key's JSON object (`None`: no key, or not read).
    pub key_fields: Option<Map<String, Value>>,
    /// The record key's bytes.
    pub key: Option<&'r [u8]>,
    /// The record's headers in order.
    pub headers: &'r [(String, Option<Vec<u8>>)],
}

impl std::fmt::Display for When {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.source {
            WhenSource::Field(path) => write!(f, "field `{path}`")?,
            WhenSource::Header(name) => write!(f, "header `{name}`")?,
            WhenSource::Key(Some(path)) => write!(f, "key field `{path}`")?,
            WhenSource::Key(None) => f.write_str("the key")?,
        }
        write!(f, " = {}", self.equals)
    }
}

impl When {
    /// Whether it reads the record value.
    pub fn reads_value(&self) -> bool {
        matches!(self.source, WhenSource::Field(_))
    }

    /// Whether it reads a path of the record key.
    pub fn reads_key_fields(&self) -> bool {
        matches!(self.source, WhenSource::Key(Some(_)))
    }

    /// Whether `record` meets it.
    pub fn holds(&self, record: &RouteInput<'_>) -> bool {
        match &self.source {
            WhenSource::Field(path) => record
                .image
                .as_ref()
                .and_then(|image| at(image, path))
                .is_some_and(|value| equal(value, &self.equals)),
            WhenSource::Key(Some(path)) => record
                .key_fields
                .as_ref()
                .and_then(|key| at_map(key, path))
                .is_some_and(|value| equal(value, &self.equals)),
            WhenSource::Key(None) => record.key.is_some_and(|key| text_equal(key, &self.equals)),
            WhenSource::Header(name) => record
                .headers
                .iter()
                .rev()
                .find(|(header, _)| header == name)
                .and_then(|(_, value)| value.as_deref())
                .is_some_and(|value| text_equal(value, &self.equals)),
        }
    }
}

impl When {
    /// What `record` holds where the condition reads, for an unrouted record's reason.
    pub fn found(&self, record: &RouteInput<'_>) -> String {
        let shown = |value: Option<&Value>| match value {
            Some(Value::String(text)) => echo(text),
            Some(Value::Array(_) | Value::Object(_)) => "not a string, number or boolean".into(),
            Some(value) => value.to_string(),
            None => "missing".to_owned(),
        };
        let text = |bytes: Option<&[u8]>| match bytes {
            Some(bytes) => echo(&String::from_utf8_lossy(bytes)),
            None => "missing".to_owned(),
        };
        match &self.source {
            WhenSource::Field(path) => format!(
                "field `{path}` is {}",
                shown(record.image.as_ref().and_then(|image| at(image, path)))
            ),
            WhenSource::Key(Some(path)) => format!(
                "key field `{path}` is {}",
                shown(record.key_fields.as_ref().and_then(|key| at_map(key, path)))
            ),
            WhenSource::Key(None) => format!("the key is {}", text(record.key)),
            WhenSource::Header(name) => format!(
                "header `{name}` is {}",
                text(
                    record
                        .headers
                        .iter()
                        .rev()
                        .find(|(header, _)| header == name)
                        .and_then(|(_, value)| value.as_deref())
                )
            ),
        }
    }
}

impl SinkDecoder {
    /// A record value's row image as a JSON value, for a route's field: the format's
    /// envelope off (a change event's `after`, or `before` for a delete), a registry record
    /// transcoded by its writer's schema ([`DecodeError::SchemaPending`] when it is not
    /// fetched yet). `None`: a Connect tombstone (`"payload": null`).
    pub fn row_image(&self, payload: &[u8]) -> Result<Option<Value>, DecodeError> {
        let transcoded = match self.value_writer(payload)? {
            Some(writer) => Some(self.transcoded(writer, "value")?),
            None => None,
        };
        let text = transcoded.as_ref().map_or(payload, |v| v.json.as_bytes());
        let connect_schema = transcoded.as_ref().and_then(|v| v.schema.connect_schema());
        let image = match self.unwrapped(text, connect_schema)? {
            Some(image) => image,
            None => return Ok(None),
        };
        serde_json::from_slice(&image)
            .map(Some)
            .map_err(|error| DecodeError::Envelope {
                detail: format!("the record value is not JSON: {error}"),
            })
    }

    /// A change event's `source.schema` and `source.table`, for a table template's
    /// `{source.*}`: a registry record transcoded by its writer's schema first
    /// ([`DecodeError::SchemaPending`] when it is not fetched yet); `None` when the value is
    /// not such an event.
    pub fn change_source(&self, payload: &[u8]) -> Result<Option<(String, String)>, DecodeError> {
        Ok(match self.value_writer(payload)? {
            Some(writer) => {
                crate::envelope::change_source(self.transcoded(writer, "value")?.json.as_bytes())
            }
            None => crate::envelope::change_source(payload),
        })
    }

    /// Whether a `debezium` sink's record changes no row (`op` `m` or `t`, a transaction
    /// metadata record): it names no table, and is passed over rather than a dead letter. A
    /// registry record is read by its writer's schema when it is fetched (else `false`).
    pub fn changes_no_row(&self, payload: &[u8]) -> bool {
        if self.format != super::model::Format::Debezium {
            return false;
        }
        match self.value_writer(payload) {
            Ok(Some(writer)) => self
                .transcoded(writer, "value")
                .is_ok_and(|value| crate::envelope::changes_no_row(value.json.as_bytes())),
            Ok(None) => crate::envelope::changes_no_row(payload),
            Err(_) => false,
        }
    }

    /// A record key's JSON object, for a route's key path: transcoded when keys are in a
    /// registry format, the Connect envelope off for a `debezium` or `connect-json` sink.
    pub fn key_fields(&self, key: &[u8]) -> Result<Map<String, Value>, DecodeError> {
        match self.transcoded_key(key)? {
            Some(transcoded) => key_object(transcoded.json.as_bytes(), super::model::Format::Json),
            None => key_object(key, self.format),
        }
    }
}

/// The value at `path` in `value`.
fn at<'v>(value: &'v Value, path: &FieldPath) -> Option<&'v Value> {
    path.segments()
        .iter()
        .try_fold(value, |value, segment| value.get(segment))
}

/// The value at `path` in an object.
fn at_map<'v>(object: &'v Map<String, Value>, path: &FieldPath) -> Option<&'v Value> {
    let (first, rest) = path.segments().split_first()?;
    rest.iter()
        .try_fold(object.get(first)?, |value, segment| value.get(segment))
}

/// Whether a JSON value is the constant: a string of its text, a number of its value, a
/// boolean; never across types (`"1"` is not `1`).
fn equal(value: &Value, expected: &Constant) -> bool {
    match (value, expected) {
        (Value::String(text), Constant::Text(wanted)) => text == wanted,
        (Value::Number(number), Constant::Int(wanted)) => number.as_i64() == Some(*wanted),
        (Value::Number(number), Constant::Float(wanted)) => number.as_f64() == Some(*wanted),
        (Value::Bool(flag), Constant::Bool(wanted)) => flag == wanted,
        _ => false,
    }
}

/// Whether bytes (a header's value, a key) are the constant written as text.
fn text_equal(bytes: &[u8], expected: &Constant) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    match expected {
        Constant::Text(wanted) => text == wanted,
        Constant::Int(wanted) => text.parse::<i64>() == Ok(*wanted),
        Constant::Float(wanted) => text.parse::<f64>() == Ok(*wanted),
        Constant::Bool(wanted) => text.parse::<bool>() == Ok(*wanted),
    }
}
