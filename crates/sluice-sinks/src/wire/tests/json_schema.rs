//! JSON Schema: the body passes through after a UTF-8 check; paths follow `properties`.

use super::super::{SchemaKind, WriterSchema};

const ORDER: &str = r##"{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "id": {"type": "integer"},
    "customer": {"$ref": "#/definitions/Customer"},
    "meta": {"type": "object"},
    "payment": {"oneOf": [
      {"type": "object", "properties": {"card": {"type": "string"}}, "additionalProperties": false},
      {"$ref": "#/$defs/Cash"}
    ]}
  },
  "definitions": {"Customer": {"type": "object", "additionalProperties": false,
    "properties": {"name": {"type": "string"}, "home": {"$ref": "#/definitions/Customer"}}}},
  "$defs": {"Cash": {"type": "object", "additionalProperties": false,
    "properties": {"units": {"type": "integer"}}}}
}"##;

#[test]
fn json_schema_body_passes_through_as_text() {
    let schema = WriterSchema::compile(SchemaKind::Json, ORDER, &[]).unwrap();
    assert_eq!(schema.kind(), SchemaKind::Json);
    let body = br#"{"id": 1, "customer": {"name": "\u00e9"}}"#;
    assert_eq!(schema.to_json(&[], body).unwrap().as_bytes(), body);
    assert_eq!(
        schema
            .to_json(&[], b"{\"a\": \"\xff\"}")
            .unwrap_err()
            .to_string(),
        "bytes do not decode with the writer's schema: JSON text that is not UTF-8 (at byte 7)"
    );
    let broken = WriterSchema::compile(SchemaKind::Json, "{", &[]).unwrap_err();
    assert!(
        broken.to_string().starts_with("JSON Schema is not JSON"),
        "{broken}"
    );
}

#[test]
fn json_schema_paths_follow_properties_refs_and_combinators() {
    let schema = WriterSchema::compile(SchemaKind::Json, ORDER, &[]).unwrap();
    for (path, exists) in [
        (&["id"][..], true),
        (&["nope"], false),
        (&["id", "x"], false),
        (&["customer", "name"], true),
        (&["customer", "home", "home", "name"], true),
        (&["customer", "age"], false),
        (&["meta", "anything", "below"], true),
        (&["payment", "card"], true),
        (&["payment", "units"], true),
        (&["payment", "coins"], false),
    ] {
        assert_eq!(schema.has_path(&[], path), exists, "{path:?}");
    }
    let open = WriterSchema::compile(SchemaKind::Json, r#"{"type":"object"}"#, &[]).unwrap();
    assert!(open.has_path(&[], &["a", "b"]));
    let free = WriterSchema::compile(SchemaKind::Json, "true", &[]).unwrap();
    assert!(free.has_path(&[], &["a"]));
}
