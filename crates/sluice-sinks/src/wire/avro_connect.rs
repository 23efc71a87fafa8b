//! The Kafka Connect schema an Avro schema was made from, as Connect's JSON converter writes
//! it (`{"type": "struct", "fields": [{"field": …, "type": …, "name": …, "parameters": …}]}`),
//! for the change events Debezium writes through an Avro converter: their semantic types
//! (`io.debezium.data.Json`, `io.debezium.time.Date`, `…MicroTimestamp`, a
//! `VariableScaleDecimal`, …) live only in the Avro schema's `connect.name` and
//! `connect.parameters`, and sluice reads them as it reads the JSON converter's schema
//! (docs/ARCHITECTURE.md#registry-formats).
//!
//! A field with an Avro `logicalType` gets no Connect name: the transcoder already wrote its
//! value in the column form (a decimal's digits, a date's text).

use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// Named types deeper than this are not followed (a recursive schema).
const MAX_DEPTH: usize = 64;

/// The Connect schema of the Avro schema `text` (JSON); `None` when it is not JSON.
pub(super) fn connect_schema(text: &str) -> Option<Value> {
    let avro: Value = serde_json::from_str(text).ok()?;
    let mut names = HashMap::new();
    Some(Walk { names: &mut names }.schema(&avro, "", 0))
}

/// The named types seen so far, by full and by short name.
struct Walk<'n> {
    names: &'n mut HashMap<String, Value>,
}

impl Walk<'_> {
    fn schema(&mut self, avro: &Value, namespace: &str, depth: usize) -> Value {
        if depth > MAX_DEPTH {
            return json!({"type": "struct"});
        }
        match avro {
            Value::String(name) => self.named(name, namespace),
            // A union: its first branch that is not null, optional.
            Value::Array(branches) => {
                let branch = branches.iter().find(|b| b.as_str() != Some("null"));
                let mut schema = branch.map_or(json!({"type": "null"}), |b| {
                    self.schema(b, namespace, depth + 1)
                });
                if let Some(object) = schema.as_object_mut() {
                    object.insert("optional".into(), Value::Bool(true));
                }
                schema
            }
            Value::Object(object) => self.complex(object, namespace, depth),
            _ => json!({"type": "null"}),
        }
    }

    /// A primitive by its name, or a named type defined before.
    fn named(&mut self, name: &str, namespace: &str) -> Value {
        match primitive(name) {
            Some(kind) => json!({"type": kind}),
            None => {
                let full = full_name(name, namespace);
                self.names
                    .get(&full)
                    .or_else(|| self.names.get(name))
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "struct"}))
            }
        }
    }

    fn complex(&mut self, object: &Map<String, Value>, namespace: &str, depth: usize) -> Value {
        let kind = object.get("type");
        let mut schema = match kind.and_then(Value::as_str) {
            Some("record") => self.record(object, namespace, depth),
            Some("array") => {
                let items = object
                    .get("items")
                    .map_or(json!({"type": "null"}), |items| {
                        self.schema(items, namespace, depth + 1)
                    });
                json!({"type": "array", "items": items})
            }
            Some("map") => {
                let values = object
                    .get("values")
                    .map_or(json!({"type": "null"}), |values| {
                        self.schema(values, namespace, depth + 1)
                    });
                json!({"type": "map", "keys": {"type": "string"}, "values": values})
            }
            Some("enum") => json!({"type": "string"}),
            Some("fixed") => json!({"type": "bytes"}),
            Some(other) => self.named(other, namespace),
            // `{"type": {…}}`: the type is itself a schema.
            None => kind.map_or(json!({"type": "null"}), |inner| {
                self.schema(inner, namespace, depth + 1)
            }),
        };
        if object.contains_key("logicalType") {
            return schema;
        }
        if let (Some(target), Some(name)) = (schema.as_object_mut(), object.get("connect.name")) {
            target.insert("name".into(), name.clone());
            if let Some(parameters) = object.get("connect.parameters") {
                target.insert("parameters".into(), parameters.clone());
            }
        }
        if let Some(target) = schema.as_object_mut()
            && matches!(
                kind.and_then(Value::as_str),
                Some("record" | "enum" | "fixed")
            )
        {
            let full = full_name(
                object.get("name").and_then(Value::as_str).unwrap_or(""),
                object
                    .get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(namespace),
            );
            let defined = Value::Object(target.clone());
            if let Some(short) = full.rsplit('.').next() {
                self.names.insert(short.to_owned(), defined.clone());
            }
            self.names.insert(full, defined);
        }
        schema
    }

    fn record(&mut self, object: &Map<String, Value>, namespace: &str, depth: usize) -> Value {
        let name = object.get("name").and_then(Value::as_str).unwrap_or("");
        let inner = object
            .get("namespace")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| match name.rsplit_once('.') {
                Some((space, _)) => space.to_owned(),
                None => namespace.to_owned(),
            });
        let fields: Vec<Value> = object
            .get("fields")
            .and_then(Value::as_array)
            .map(|fields| {
                fields
                    .iter()
                    .map(|field| {
                        let mut schema = field.get("type").map_or(json!({"type": "null"}), |t| {
                            self.schema(t, &inner, depth + 1)
                        });
                        if let (Some(target), Some(name)) =
                            (schema.as_object_mut(), field.get("name"))
                        {
                            target.insert("field".into(), name.clone());
                        }
                        schema
                    })
                    .collect()
            })
            .unwrap_or_default();
        json!({"type": "struct", "fields": fields})
    }
}

fn primitive(name: &str) -> Option<&'static str> {
    Some(match name {
        "null" => "null",
        "boolean" => "boolean",
        "int" => "int32",
        "long" => "int64",
        "float" => "float",
        "double" => "double",
        "bytes" => "bytes",
        "string" => "string",
        _ => return None,
    })
}

fn full_name(name: &str, namespace: &str) -> String {
    if name.contains('.') || namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}.{name}")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    /// The value schema Debezium's PostgreSQL connector registers through an Avro converter
    /// (trimmed): `after` names the row type `before` defined.
    const ENVELOPE: &str = r#"{"type": "record", "name": "Envelope", "namespace": "db.public.items",
      "fields": [
        {"name": "before", "default": null, "type": ["null", {"type": "record", "name": "Value",
          "fields": [
            {"name": "id", "type": "long"},
            {"name": "amount", "default": null, "type": ["null", {"type": "bytes", "scale": 2,
              "precision": 12, "connect.version": 1, "connect.parameters": {"scale": "2",
              "connect.decimal.precision": "12"}, "connect.name": "org.apache.kafka.connect.data.Decimal",
              "logicalType": "decimal"}]},
            {"name": "doc", "default": null, "type": ["null", {"type": "string",
              "connect.version": 1, "connect.name": "io.debezium.data.Json"}]},
            {"name": "day", "default": null, "type": ["null", {"type": "int",
              "connect.version": 1, "connect.name": "io.debezium.time.Date"}]}
          ], "connect.name": "db.public.items.Value"}]},
        {"name": "after", "default": null, "type": ["null", "Value"]},
        {"name": "op", "type": "string"}
      ], "connect.name": "db.public.items.Envelope"}"#;

    #[test]
    fn debeziums_semantic_types_come_back_from_the_avro_schema() {
        let schema = connect_schema(ENVELOPE).unwrap();
        let fields = schema["fields"].as_array().unwrap();
        let after = fields.iter().find(|f| f["field"] == "after").unwrap();
        let row = after["fields"].as_array().unwrap();
        let field = |name: &str| row.iter().find(|f| f["field"] == name).unwrap().clone();
        assert_eq!(field("doc")["name"], "io.debezium.data.Json");
        assert_eq!(field("day")["name"], "io.debezium.time.Date");
        assert_eq!(field("day")["type"], "int32");
        // Transcoded to its digits already: no Connect name to convert it again.
        assert!(field("amount").get("name").is_none());
        assert_eq!(field("id")["type"], "int64");
        assert_eq!(after["optional"], true);
    }

    #[test]
    fn a_schema_that_is_not_json_has_none() {
        assert!(connect_schema("not json").is_none());
    }
}
