//! Avro: the transcoder agrees with apache-avro's own reader (`from_avro_datum`), writes the
//! logical types in the column checks' forms, and names the field a bad body fails at.

use std::collections::HashMap;

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;
use apache_avro::types::Value as Avro;
use apache_avro::writer::datum::GenericDatumWriter;
use base64::Engine as _;
use serde_json::{Value as Json, json};

use super::super::{SchemaKind, WireError, WriterSchema};

/// A schema with every type but the logical ones: nested and recursive records, unions,
/// arrays, maps, enums, fixed.
pub(super) const EVERYTHING: &str = r#"{
  "type": "record", "name": "Order", "namespace": "shop",
  "fields": [
    {"name": "id", "type": "long"},
    {"name": "small", "type": "int"},
    {"name": "ok", "type": "boolean"},
    {"name": "ratio", "type": "float"},
    {"name": "price", "type": "double"},
    {"name": "note", "type": ["null", "string"]},
    {"name": "blob", "type": "bytes"},
    {"name": "code", "type": {"type": "fixed", "name": "Code", "size": 3}},
    {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "PAID"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
    {"name": "lines", "type": {"type": "array", "items": {
      "type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"},
        {"name": "kind", "type": "State"},
        {"name": "next", "type": ["null", "Line"]}
      ]}}},
    {"name": "empty", "type": "null"},
    {"name": "either", "type": ["null", "double", "Code"]}
  ]}"#;

/// apache-avro's writer: the value's bytes (`others`: named types it refers to).
pub(super) fn encode_with<'s>(
    schema: &'s Schema,
    mut others: Vec<&'s Schema>,
    value: Avro,
) -> Vec<u8> {
    others.push(schema);
    GenericDatumWriter::builder(schema)
        .schemata(others)
        .and_then(|builder| builder.build())
        .and_then(|writer| writer.write_value_to_vec(value))
        .unwrap_or_else(|e| panic!("apache-avro does not write it: {e}"))
}

/// apache-avro's writer: the value's bytes.
pub(super) fn encode(schema: &Schema, value: Avro) -> Vec<u8> {
    encode_with(schema, Vec::new(), value)
}

/// apache-avro's reader: the value the bytes hold.
fn decode(schema: &Schema, body: &[u8]) -> Avro {
    GenericDatumReader::builder(schema)
        .build()
        .and_then(|reader| reader.read_value(&mut &body[..]))
        .unwrap_or_else(|e| panic!("apache-avro does not read it: {e}"))
}

pub(super) fn compile(text: &str) -> WriterSchema {
    WriterSchema::compile(SchemaKind::Avro, text, &[]).unwrap_or_else(|e| panic!("{e}"))
}

/// apache-avro's value as the JSON the transcoder is to write for it (no logical types).
fn reference(value: &Avro) -> Json {
    let b64 = |b: &[u8]| Json::String(base64::engine::general_purpose::STANDARD.encode(b));
    match value {
        Avro::Null => Json::Null,
        Avro::Boolean(b) => json!(b),
        Avro::Int(n) => json!(n),
        Avro::Long(n) => json!(n),
        Avro::Float(x) => serde_json::from_str(&x.to_string()).unwrap(),
        Avro::Double(x) => json!(x),
        Avro::Bytes(b) | Avro::Fixed(_, b) => b64(b),
        Avro::String(s) | Avro::Enum(_, s) => json!(s),
        Avro::Union(_, inner) => reference(inner),
        Avro::Array(items) => Json::Array(items.iter().map(reference).collect()),
        Avro::Map(map) => {
            Json::Object(map.iter().map(|(k, v)| (k.clone(), reference(v))).collect())
        }
        Avro::Record(fields) => Json::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), reference(v)))
                .collect(),
        ),
        other => panic!("no reference form for {other:?}"),
    }
}

fn line(sku: &str, next: Option<Avro>) -> Avro {
    Avro::Record(vec![
        ("sku".into(), Avro::String(sku.into())),
        ("kind".into(), Avro::Enum(1, "PAID".into())),
        (
            "next".into(),
            match next {
                Some(line) => Avro::Union(1, Box::new(line)),
                None => Avro::Union(0, Box::new(Avro::Null)),
            },
        ),
    ])
}

pub(super) fn order(note: Option<&str>, lines: usize) -> Avro {
    let attrs = HashMap::from([
        ("a".to_owned(), Avro::Union(1, Box::new(Avro::Long(-5)))),
        ("b\"q".to_owned(), Avro::Union(0, Box::new(Avro::Null))),
    ]);
    Avro::Record(vec![
        ("id".into(), Avro::Long(i64::MIN)),
        ("small".into(), Avro::Int(-7)),
        ("ok".into(), Avro::Boolean(true)),
        ("ratio".into(), Avro::Float(0.1)),
        ("price".into(), Avro::Double(1e300)),
        (
            "note".into(),
            match note {
                Some(text) => Avro::Union(1, Box::new(Avro::String(text.into()))),
                None => Avro::Union(0, Box::new(Avro::Null)),
            },
        ),
        ("blob".into(), Avro::Bytes(vec![0, 1, 2, 255])),
        ("code".into(), Avro::Fixed(3, vec![9, 8, 7])),
        ("state".into(), Avro::Enum(0, "NEW".into())),
        (
            "tags".into(),
            Avro::Array(vec![Avro::String("x".into()), Avro::String("ü\n".into())]),
        ),
        ("attrs".into(), Avro::Map(attrs)),
        (
            "lines".into(),
            Avro::Array(
                (0..lines)
                    .map(|i| line(&format!("sku-{i}"), Some(line("inner", None))))
                    .collect(),
            ),
        ),
        ("empty".into(), Avro::Null),
        (
            "either".into(),
            Avro::Union(1, Box::new(Avro::Double(-0.5))),
        ),
    ])
}

fn transcoded(schema: &WriterSchema, body: &[u8]) -> Json {
    let text = schema.to_json(&[], body).unwrap_or_else(|e| panic!("{e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn avro_agrees_with_apache_avro_reader() {
    let parsed = Schema::parse_str(EVERYTHING).unwrap();
    let schema = compile(EVERYTHING);
    for (note, lines) in [(None, 0), (Some("he said \"hi\"\t\u{1}"), 3)] {
        let body = encode(&parsed, order(note, lines));
        let expected = reference(&decode(&parsed, &body));
        assert_eq!(transcoded(&schema, &body), expected);
    }
    let text = schema
        .to_json(&[], &encode(&parsed, order(None, 1)))
        .unwrap();
    assert!(text.starts_with(r#"{"id":-9223372036854775808,"small":-7,"ok":true,"ratio":0.1,"#));
    assert!(text.contains(r#""price":1e300,"#), "{text}");
}

#[test]
fn avro_non_finite_floats_are_strings_the_column_check_rejects() {
    let text = r#"{"type":"record","name":"F","fields":[
        {"name":"a","type":"double"},{"name":"b","type":"float"},{"name":"c","type":"double"}]}"#;
    let parsed = Schema::parse_str(text).unwrap();
    let value = Avro::Record(vec![
        ("a".into(), Avro::Double(f64::NAN)),
        ("b".into(), Avro::Float(f32::NEG_INFINITY)),
        ("c".into(), Avro::Double(f64::INFINITY)),
    ]);
    let body = encode(&parsed, value);
    assert_eq!(
        compile(text).to_json(&[], &body).unwrap(),
        r#"{"a":"NaN","b":"-Infinity","c":"Infinity"}"#
    );
}

#[test]
fn avro_named_types_come_from_the_references() {
    let money = r#"{"type":"record","name":"Money","namespace":"common","fields":[
        {"name":"units","type":"long"},{"name":"currency","type":"common.Currency"}]}"#;
    let currency =
        r#"{"type":"enum","name":"Currency","namespace":"common","symbols":["EUR","USD"]}"#;
    let text = r#"{"type":"record","name":"Payment","fields":[
        {"name":"amount","type":"common.Money"},{"name":"fee","type":["null","common.Money"]}]}"#;
    let references = [
        ("money".to_owned(), money.to_owned()),
        ("currency".to_owned(), currency.to_owned()),
    ];
    let schema = WriterSchema::compile(SchemaKind::Avro, text, &references).unwrap();
    let (parsed, others) = Schema::parse_str_with_list(text, [money, currency]).unwrap();
    let money_value = |units| {
        Avro::Record(vec![
            ("units".into(), Avro::Long(units)),
            ("currency".into(), Avro::Enum(1, "USD".into())),
        ])
    };
    let value = Avro::Record(vec![
        ("amount".into(), money_value(1250)),
        ("fee".into(), Avro::Union(1, Box::new(money_value(3)))),
    ]);
    let resolved: Vec<&Schema> = others.iter().rev().collect();
    let body = encode_with(&parsed, resolved, value);
    assert_eq!(
        schema.to_json(&[], &body).unwrap(),
        r#"{"amount":{"units":1250,"currency":"USD"},"fee":{"units":3,"currency":"USD"}}"#
    );
    assert!(schema.has_path(&[], &["fee", "currency"]));
    assert!(!schema.has_path(&[], &["fee", "cents"]));
}

#[test]
fn avro_schema_that_does_not_parse_says_why() {
    for (text, why) in [
        ("{not json", "does not parse"),
        (
            r#"{"type":"record","name":"R","fields":[{"name":"a","type":"Nope"}]}"#,
            "Nope",
        ),
    ] {
        let error = WriterSchema::compile(SchemaKind::Avro, text, &[]).unwrap_err();
        assert!(error.to_string().contains(why), "{error}");
    }
}

#[test]
fn avro_bad_bodies_name_the_field_being_read() {
    let parsed = Schema::parse_str(EVERYTHING).unwrap();
    let schema = compile(EVERYTHING);
    let body = encode(&parsed, order(Some("n"), 2));
    // The last 12 bytes: lines[1].next's kind and next, the end of `lines`, then `either`
    // (a branch byte and a double).
    let cut = schema.to_json(&[], &body[..body.len() - 12]).unwrap_err();
    assert_eq!(
        cut.clone().for_schema(42).to_string(),
        "bytes do not decode with schema id 42 at field `lines[1].next.kind`: the bytes end \
         inside a varint"
    );
    assert!(matches!(
        cut,
        WireError::Undecodable {
            schema_id: None,
            ..
        }
    ));
    let mut longer = body.clone();
    longer.push(0);
    assert_eq!(
        schema.to_json(&[], &longer).unwrap_err().to_string(),
        "bytes do not decode with the writer's schema: 1 bytes left after the record"
    );
    // `state` is the ninth field: after id, small, ok, ratio, price, note, blob, code.
    let enum_at = {
        let mut input = body.as_slice();
        let reader = |input: &mut &[u8]| super::super::avro_read::long(input).unwrap();
        reader(&mut input); // id
        reader(&mut input); // small
        input = &input[1 + 4 + 8..]; // ok, ratio, price
        reader(&mut input); // note's branch
        let n = reader(&mut input); // note's length
        input = &input[usize::try_from(n).unwrap()..];
        let n = reader(&mut input); // blob's length
        input = &input[usize::try_from(n).unwrap() + 3..]; // blob, code
        body.len() - input.len()
    };
    let mut bad_enum = body.clone();
    bad_enum[enum_at] = 0x08; // index 4 of 2 symbols
    assert_eq!(
        schema.to_json(&[], &bad_enum).unwrap_err().to_string(),
        "bytes do not decode with the writer's schema at field `state`: enum index 4 of 2 symbols"
    );
}

#[test]
fn avro_paths_follow_records_unions_and_maps() {
    let schema = compile(EVERYTHING);
    for (path, exists) in [
        (&["id"][..], true),
        (&["note"], true),
        (&["attrs", "anything", "deeper"], true),
        (&["lines"], true),
        (&["lines", "sku"], false),
        (&["id", "x"], false),
        (&["nope"], false),
        (&[], true),
    ] {
        assert_eq!(schema.has_path(&[], path), exists, "{path:?}");
    }
}
