//! Names of named types that the Avro specification refuses but real writers register: a
//! Kafka Connect converter names a change event's types after its topic
//! (`my-app.public.items.Value`), and a topic may hold `-`. Java's converters write them;
//! apache-avro refuses the schema. Every name and namespace of a named type, and every
//! reference to one, is rewritten the same way (each character outside `[A-Za-z0-9_]` of a
//! name segment becomes `_`, a segment starting with a digit gets a leading `_`), so the
//! schema's references still meet their definitions. Field names are left alone: they are
//! what the records' fields are called.

use serde_json::Value;

/// The schema text with its named types' names made valid; `None` when nothing had to change
/// (or the text is not JSON: the parser then says why).
pub(super) fn valid_names(text: &str) -> Option<String> {
    let mut schema: Value = serde_json::from_str(text).ok()?;
    let mut changed = false;
    fix_type(&mut schema, &mut changed);
    changed.then(|| schema.to_string())
}

/// A schema in a type position: a reference, a union, or a complex type.
fn fix_type(schema: &mut Value, changed: &mut bool) {
    match schema {
        Value::String(name) => fix_name(name, changed),
        Value::Array(branches) => branches.iter_mut().for_each(|b| fix_type(b, changed)),
        Value::Object(object) => {
            let named = matches!(
                object.get("type").and_then(Value::as_str),
                Some("record" | "error" | "enum" | "fixed")
            );
            if named {
                for key in ["name", "namespace"] {
                    if let Some(Value::String(name)) = object.get_mut(key) {
                        fix_name(name, changed);
                    }
                }
            } else if let Some(inner) = object.get_mut("type") {
                fix_type(inner, changed);
            }
            for key in ["items", "values"] {
                if let Some(inner) = object.get_mut(key) {
                    fix_type(inner, changed);
                }
            }
            if let Some(Value::Array(fields)) = object.get_mut("fields") {
                for field in fields {
                    if let Some(inner) = field.get_mut("type") {
                        fix_type(inner, changed);
                    }
                }
            }
        }
        _ => {}
    }
}

/// A (full) name with each segment made valid.
fn fix_name(name: &mut String, changed: &mut bool) {
    let valid = |segment: &str| {
        segment
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && segment
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if name.split('.').all(valid) {
        return;
    }
    let fixed: Vec<String> = name
        .split('.')
        .map(|segment| {
            let mut out: String = segment
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            if !out.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
                out.insert(0, '_');
            }
            out
        })
        .collect();
    *name = fixed.join(".");
    *changed = true;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn a_topic_named_namespace_is_made_valid_with_its_references() {
        let text = r#"{"type": "record", "name": "Envelope", "namespace": "my-app.public.items",
            "fields": [
              {"name": "before", "type": ["null", {"type": "record", "name": "Value",
                "fields": [{"name": "id", "type": "long"}]}]},
              {"name": "after", "type": ["null", "my-app.public.items.Value"]},
              {"name": "tags", "type": {"type": "array", "items": {"type": "enum",
                "name": "9-tag", "symbols": ["A"]}}}
            ]}"#;
        let fixed: Value = serde_json::from_str(&valid_names(text).unwrap()).unwrap();
        assert_eq!(fixed["namespace"], "my_app.public.items");
        assert_eq!(fixed["fields"][1]["type"][1], "my_app.public.items.Value");
        assert_eq!(fixed["fields"][0]["name"], "before", "field names stay");
        assert_eq!(fixed["fields"][2]["type"]["items"]["name"], "_9_tag");
        assert!(valid_names(r#"{"type": "record", "name": "ok.Fine", "fields": []}"#).is_none());
    }
}
