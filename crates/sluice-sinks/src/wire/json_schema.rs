//! JSON Schema records: the body is JSON text already, passed on after a UTF-8 check (the
//! sink's decoder parses it). The schema is kept only to answer which field paths exist.

use serde_json::Value;

use super::error::{Fault, SchemaError, WireError};

/// How many `$ref`s a path check follows before it gives up and accepts the path (a schema
/// may refer to itself).
const MAX_REFS: usize = 64;

/// A JSON Schema document.
#[derive(Debug)]
pub(super) struct JsonSchema {
    document: Value,
}

impl JsonSchema {
    /// Keeps the schema after checking that it is JSON.
    pub(super) fn compile(text: &str) -> Result<Self, SchemaError> {
        let document = serde_json::from_str(text).map_err(|e| SchemaError::Json {
            reason: e.to_string(),
        })?;
        Ok(Self { document })
    }

    /// The body as text, if it is UTF-8.
    pub(super) fn to_json(&self, body: &[u8]) -> Result<String, WireError> {
        simdutf8::compat::from_utf8(body)
            .map(str::to_owned)
            .map_err(|e| {
                let at = e.valid_up_to();
                Fault::new(format!("JSON text that is not UTF-8 (at byte {at})")).into_error()
            })
    }

    /// Whether `path` can hold a value: through `properties` (following local `$ref`s into
    /// `$defs`/`definitions`, and any branch of `allOf`/`anyOf`/`oneOf`); a path into an
    /// object whose `additionalProperties` is not `false`, or that lists no `properties`, is
    /// accepted from there on.
    pub(super) fn has_path(&self, path: &[&str]) -> bool {
        self.leads(&self.document, path, 0)
    }

    fn leads(&self, schema: &Value, path: &[&str], refs: usize) -> bool {
        let Some((first, rest)) = path.split_first() else {
            return true;
        };
        let object = match schema {
            Value::Bool(open) => return *open,
            Value::Object(object) => object,
            _ => return false,
        };
        if let Some(Value::String(reference)) = object.get("$ref") {
            return match self.target(reference) {
                Some(target) if refs < MAX_REFS => self.leads(target, path, refs + 1),
                Some(_) => true,
                // A reference sluice cannot follow (another document): accepted.
                None => true,
            };
        }
        let branches = ["allOf", "anyOf", "oneOf"]
            .iter()
            .filter_map(|key| object.get(*key).and_then(Value::as_array))
            .flatten()
            .collect::<Vec<_>>();
        if branches.iter().any(|b| self.leads(b, path, refs)) {
            return true;
        }
        if let Some(Value::String(kind)) = object.get("type")
            && kind != "object"
        {
            return false;
        }
        let closed = object.get("additionalProperties") == Some(&Value::Bool(false));
        match object.get("properties").and_then(Value::as_object) {
            Some(properties) => match properties.get(*first) {
                Some(property) => self.leads(property, rest, refs),
                None => !closed,
            },
            // Only combinators, which all refused it; or no properties at all: open.
            None => branches.is_empty() && !closed,
        }
    }

    /// The schema a local reference (`#`, `#/$defs/Name`, `#/definitions/Name`, any JSON
    /// pointer into this document) names.
    fn target(&self, reference: &str) -> Option<&Value> {
        let pointer = reference.strip_prefix('#')?;
        self.document.pointer(pointer)
    }
}
