//! The common case of a plain Avro record, read straight into the values of the top-level
//! fields a sink reads (docs/registry.md#performance): no JSON text of the whole record and
//! no second parse of it. A field of a simple type (null, boolean, int, long, double, string,
//! a union of those) becomes its value directly, and a timestamp only timestamp columns read
//! becomes its instant (no text written and parsed back); any other field, and a field whose
//! text a NUMERIC or JSON column reads, is written as the JSON text [`AvroSchema::to_json`]
//! would write for it and parsed alone, so both paths give the same value. A field no column
//! reads is skipped.
//!
//! Anything unusual — a root that is not a record, bytes that do not decode, bytes left
//! over, nesting near the JSON parse's limit — returns `None`, and the caller takes the whole
//! transcode, which names the reason.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::avro::{AvroSchema, Reader};
use super::avro_logical::Logical;
use super::avro_read as read;
use super::avro_schema::Node;
use super::error::Fault;
use super::json_text as text;

/// The deepest nesting read straight: below the JSON parse's limit, whole record included.
const JSON_DEPTH: usize = 120;

/// The top-level fields a reader asks for: `names[i]`, with its JSON text too when
/// `texts[i]`, and as an instant when `instants[i]` (a slot only timestamp columns read; a
/// shorter list asks for none).
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    pub names: &'a [String],
    pub texts: &'a [bool],
    pub instants: &'a [bool],
}

/// The values (and, where asked, the JSON texts) of the top-level fields asked for, by the
/// position of their names; `None`: the record has no such field. A field asked for as an
/// instant whose value is a timestamp in the years 0001–9999 is in `instants` instead of
/// `values`: the instant its text would parse to.
#[derive(Debug, Default, PartialEq)]
pub struct TopFields {
    pub values: Vec<Option<Value>>,
    pub texts: Vec<Option<String>>,
    pub instants: Vec<Option<DateTime<Utc>>>,
}

/// A slot list as long as `names` when any of `asked` is true; empty (nothing allocated)
/// otherwise.
fn slots_for<T: Clone>(asked: &[bool], len: usize) -> Vec<Option<T>> {
    if asked.contains(&true) {
        vec![None; len]
    } else {
        Vec::new()
    }
}

impl AvroSchema {
    /// The top-level fields `wanted` of a record's `body`. `None` when the root is not a
    /// record or the body does not decode.
    pub(super) fn top_fields(&self, body: &[u8], wanted: Wanted<'_>) -> Option<TopFields> {
        let Some(Node::Record(fields)) = self.nodes.first() else {
            return None;
        };
        let Wanted {
            names,
            texts,
            instants,
        } = wanted;
        let mut reader = Reader::new(&self.nodes, body);
        // As deep as the whole record's walk is when it reads a field.
        reader.depth = 1;
        let mut found = TopFields {
            values: vec![None; names.len()],
            texts: slots_for(texts, names.len()),
            instants: slots_for(instants, names.len()),
        };
        let mut scratch = String::with_capacity(64);
        for field in fields {
            let slot = names.iter().position(|name| *name == field.name);
            let asked = |list: &[bool]| slot.is_some_and(|slot| list.get(slot) == Some(&true));
            let wants_text = asked(texts);
            match slot {
                Some(slot) if asked(instants) && stamped(&self.nodes, field.node) => {
                    match reader.stamp(field.node).ok()? {
                        Stamp::At(at) => found.instants[slot] = Some(at),
                        Stamp::Value(value) => found.values[slot] = Some(value),
                    }
                }
                Some(slot) if !wants_text && direct(&self.nodes, field.node) => {
                    found.values[slot] = Some(reader.direct(field.node).ok()?);
                }
                Some(slot) => {
                    scratch.clear();
                    reader.value(field.node, &mut scratch).ok()?;
                    found.values[slot] = Some(parsed(&scratch)?);
                    if wants_text {
                        found.texts[slot] = Some(scratch.clone());
                    }
                }
                None => {
                    scratch.clear();
                    reader.value(field.node, &mut scratch).ok()?;
                }
            }
        }
        // A record nested near the JSON parse's limit of 128 levels (each record, array and
        // map is one): the transcode decides whether it is JSON.
        (reader.input.is_empty() && reader.deepest <= JSON_DEPTH).then_some(found)
    }
}

/// The JSON value of a field's text: a string with no escapes (a timestamp, a date, a UUID,
/// an enum's symbol) is its inner text, as the parse gives it, without the parse.
fn parsed(text: &str) -> Option<Value> {
    match text
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
    {
        Some(inner) if !inner.bytes().any(|b| b == b'\\' || b == b'"') => {
            Some(Value::String(inner.to_owned()))
        }
        _ => serde_json::from_str(text).ok(),
    }
}

/// A timestamp read as an instant, or the value its text parses to (null, or the number an
/// instant outside the years 0001–9999 is written as).
enum Stamp {
    At(DateTime<Utc>),
    Value(Value),
}

/// Whether a value of type `node` is a timestamp (or null, or a union of those), read as an
/// instant.
fn stamped(nodes: &[Node], node: usize) -> bool {
    match nodes.get(node) {
        Some(Node::Logical(Logical::Timestamp(..))) => true,
        Some(Node::Union(branches)) => branches.iter().all(|b| {
            matches!(
                nodes.get(*b),
                Some(Node::Null | Node::Logical(Logical::Timestamp(..)))
            )
        }),
        _ => false,
    }
}

/// Whether a value of type `node` is read straight into a JSON value.
fn direct(nodes: &[Node], node: usize) -> bool {
    match nodes.get(node) {
        Some(Node::Null | Node::Boolean | Node::Int | Node::Long | Node::Double | Node::String) => {
            true
        }
        Some(Node::Union(branches)) => branches
            .iter()
            .all(|b| !matches!(nodes.get(*b), Some(Node::Union(_))) && direct(nodes, *b)),
        _ => false,
    }
}

impl Reader<'_, '_> {
    /// A value of a [`stamped`] type.
    fn stamp(&mut self, node: usize) -> Result<Stamp, Fault> {
        let nodes = self.nodes;
        match &nodes[node] {
            Node::Logical(Logical::Timestamp(unit, _)) => {
                let raw = read::long(&mut self.input)?;
                let (seconds, nanos) = text::split_epoch(raw, unit.per_second());
                Ok(match text::instant(seconds, nanos) {
                    Some(at) => Stamp::At(at),
                    None => Stamp::Value(Value::from(raw)),
                })
            }
            Node::Null => Ok(Stamp::Value(Value::Null)),
            Node::Union(branches) => {
                let branch = self.branch(branches)?;
                self.stamp(branch)
            }
            _ => Err(Fault::new("not a timestamp")),
        }
    }

    /// A value of a [`direct`] type, as the JSON value its text parses to.
    fn direct(&mut self, node: usize) -> Result<Value, Fault> {
        let nodes = self.nodes;
        let input = &mut self.input;
        Ok(match &nodes[node] {
            Node::Null => Value::Null,
            Node::Boolean => match read::array::<1>(input)? {
                [0] => Value::Bool(false),
                [1] => Value::Bool(true),
                [other] => return Err(Fault::new(format!("a boolean byte {other}"))),
            },
            Node::Int => Value::from(read::int(input)?),
            Node::Long => Value::from(read::long(input)?),
            Node::Double => {
                let double = read::double(input)?;
                match serde_json::Number::from_f64(double) {
                    Some(number) => Value::Number(number),
                    // NaN and the infinities have no JSON number: the value their text is.
                    None => {
                        let mut out = String::new();
                        text::push_f64(&mut out, double);
                        serde_json::from_str(&out)
                            .map_err(|_| Fault::new("a double with no JSON form"))?
                    }
                }
            }
            Node::String => Value::String(read::string(input)?.to_owned()),
            Node::Union(branches) => {
                let branch = self.branch(branches)?;
                self.direct(branch)?
            }
            _ => return Err(Fault::new("not a simple type")),
        })
    }
}
