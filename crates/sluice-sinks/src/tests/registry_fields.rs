//! A plain Avro record's columns read straight from its bytes (no JSON text of the record)
//! are the cells, and the reasons, of the same record written as the JSON it transcodes to
//! and read by a JSON sink with the same columns: every type the straight read takes, the
//! ones it writes out as text (decimal, enum, bytes, records, arrays), the timestamps it gives
//! as instants, nested paths, a field read by two columns, and the broken rules.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::types::Value as Avro;
use apache_avro::writer::datum::GenericDatumWriter;
use apache_avro::{Decimal, Schema};

use super::decode::column;
use crate::messages::DecodeError;
use crate::schemas::{Known, WriterSchemas};
use crate::wire::{SchemaKind, WriterSchema};
use crate::{RecordMeta, SinkDecoder, SqlType, TableShape, parse_sinks, plan_sink};

const SCHEMA: &str = r#"{"type": "record", "name": "W", "fields": [
  {"name": "id", "type": "long"},
  {"name": "name", "type": "string"},
  {"name": "note", "type": ["null", "string"]},
  {"name": "score", "type": "double"},
  {"name": "small", "type": "int"},
  {"name": "ok", "type": "boolean"},
  {"name": "price", "type": {"type": "bytes", "logicalType": "decimal",
     "precision": 12, "scale": 3}},
  {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
  {"name": "state", "type": {"type": "enum", "name": "S", "symbols": ["NEW", "PAID"]}},
  {"name": "blob", "type": "bytes"},
  {"name": "addr", "type": {"type": "record", "name": "A", "fields": [
     {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "long"]}]}},
  {"name": "tags", "type": {"type": "array", "items": "string"}},
  {"name": "seen", "type": ["null", {"type": "long", "logicalType": "local-timestamp-millis"}]},
  {"name": "unread", "type": "string"}
]}"#;

const COLUMNS: &str = r#"
id = { field = "id" }
name = { field = "name" }
note = { field = "note" }
score = { field = "score" }
score_n = { field = "score" }
small = { field = "small" }
ok = { field = "ok" }
price = { field = "price" }
at = { field = "at" }
state = { field = "state" }
blob = { field = "blob" }
city = { field = "addr.city" }
zip = { field = "addr.zip" }
addr = { field = "addr" }
tags = { field = "tags" }
seen = { field = "seen" }
"#;

#[derive(Debug)]
struct One(Arc<WriterSchema>);

impl WriterSchemas for One {
    fn known(&self, _: i32) -> Option<Known> {
        Some(Known::Schema(self.0.clone()))
    }
}

impl std::fmt::Display for One {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("one schema")
    }
}

fn decoder(format: &str, schema: &Arc<WriterSchema>) -> SinkDecoder {
    let file = format!(
        "[[sink]]\nname = \"w\"\ntable = \"w\"\nkey = [\"id\"]\nformat = \"{format}\"\n\
         [sink.columns]\n{COLUMNS}"
    );
    let sinks = parse_sinks("m.toml", &file).unwrap();
    let numeric = |precision, scale| SqlType::Numeric {
        precision: Some(precision),
        scale,
    };
    let table = TableShape {
        name: "w".into(),
        columns: vec![
            column("id", SqlType::BigInt, true),
            column("name", SqlType::Varchar(Some(8)), true),
            column("note", SqlType::Text, false),
            column("score", SqlType::Double, false),
            column("score_n", numeric(30, 10), false),
            column("small", SqlType::SmallInt, false),
            column("ok", SqlType::Boolean, false),
            column("price", numeric(12, 3), false),
            column("at", SqlType::TimestampTz, false),
            column("state", SqlType::Text, false),
            column("blob", SqlType::Bytea, false),
            column("city", SqlType::Text, true),
            column("zip", SqlType::BigInt, false),
            column("addr", SqlType::Jsonb, false),
            column("tags", SqlType::Jsonb, false),
            column("seen", SqlType::Timestamp, false),
        ],
        unique_keys: vec![vec!["id".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    let plan = plan_sink(&sinks[0], "p", &HashMap::from([("w".into(), table)]))
        .unwrap_or_else(|e| panic!("{e:?}"));
    SinkDecoder::new(&sinks[0], &plan).with_schemas(Arc::new(One(schema.clone())))
}

struct Record<'a> {
    id: i64,
    name: &'a str,
    note: Option<&'a str>,
    score: f64,
    small: i32,
    price: i128,
    zip: Option<i64>,
    at: i64,
    seen: Option<i64>,
}

impl Record<'_> {
    fn avro(&self) -> Avro {
        let union = |index, value| Avro::Union(index, Box::new(value));
        Avro::Record(vec![
            ("id".into(), Avro::Long(self.id)),
            ("name".into(), Avro::String(self.name.into())),
            (
                "note".into(),
                match self.note {
                    Some(note) => union(1, Avro::String(note.into())),
                    None => union(0, Avro::Null),
                },
            ),
            ("score".into(), Avro::Double(self.score)),
            ("small".into(), Avro::Int(self.small)),
            ("ok".into(), Avro::Boolean(self.id % 2 == 0)),
            (
                "price".into(),
                Avro::Decimal(Decimal::from(self.price.to_be_bytes().to_vec())),
            ),
            ("at".into(), Avro::TimestampMicros(self.at)),
            ("state".into(), Avro::Enum(1, "PAID".into())),
            ("blob".into(), Avro::Bytes(vec![0, 1, 255])),
            (
                "addr".into(),
                Avro::Record(vec![
                    ("city".into(), Avro::String("Győr \"ü\"".into())),
                    (
                        "zip".into(),
                        match self.zip {
                            Some(zip) => union(1, Avro::Long(zip)),
                            None => union(0, Avro::Null),
                        },
                    ),
                ]),
            ),
            (
                "tags".into(),
                Avro::Array(vec![Avro::String("a".into()), Avro::String("\n".into())]),
            ),
            (
                "seen".into(),
                match self.seen {
                    Some(millis) => union(1, Avro::LocalTimestampMillis(millis)),
                    None => union(0, Avro::Null),
                },
            ),
            ("unread".into(), Avro::String("x".repeat(50))),
        ])
    }
}

/// The record's bytes behind a wire header.
fn framed(schema: &Schema, value: Avro) -> Vec<u8> {
    let body = GenericDatumWriter::builder(schema)
        .build()
        .and_then(|writer| writer.write_value_to_vec(value))
        .unwrap();
    let mut bytes = vec![0, 0, 0, 0, 7];
    bytes.extend(body);
    bytes
}

#[test]
fn avro_columns_read_straight_are_the_json_records_cells_and_reasons() {
    let parsed = Schema::parse_str(SCHEMA).unwrap();
    let schema = Arc::new(WriterSchema::compile(SchemaKind::Avro, SCHEMA, &[]).unwrap());
    let avro = decoder("avro", &schema);
    let json = decoder("json", &schema);
    let meta = RecordMeta {
        topic: "w",
        partition: 0,
        offset: 3,
        timestamp: None,
        key: None,
        headers: &[],
    };
    let base = Record {
        id: 1,
        name: "ann",
        note: Some("hi \"there\""),
        score: 0.1 + 0.2,
        small: -7,
        price: 123_456,
        zip: Some(9021),
        at: 1_700_000_000_123_456,
        seen: Some(1_600_000_000_789),
    };
    let records = [
        Record { ..base },
        Record {
            id: -2,
            note: None,
            zip: None,
            at: -62_135_596_800_000_000,
            seen: None,
            score: -12_345.678_9,
            ..base
        },
        // Broken rules: too long for varchar(8), beyond smallint, beyond numeric(12, 3),
        // a double with no numeric form.
        Record {
            name: "far too long a name",
            ..base
        },
        Record {
            small: 70_000,
            ..base
        },
        Record {
            price: 10_i128.pow(13),
            ..base
        },
        Record {
            score: f64::NAN,
            ..base
        },
        // A timestamp past the year 9999.
        Record {
            at: 253_402_300_800_000_000,
            ..base
        },
    ];
    let mut reasons = 0;
    for record in &records {
        let bytes = framed(&parsed, record.avro());
        let text = schema.to_json(&[], &bytes[5..]).unwrap();
        // Every one of them takes the straight path (a broken rule is its reason there).
        assert!(avro.reads_straight(&bytes, &meta), "{text}");
        let straight = avro.decode_record(Some(&bytes), &meta);
        let through_json = json.decode_record(Some(text.as_bytes()), &meta);
        match (straight, through_json) {
            (Ok(straight), Ok(through_json)) => {
                assert_eq!(straight.cells, through_json.cells, "{text}");
            }
            (Err(straight), Err(through_json)) => {
                reasons += 1;
                assert_eq!(straight.to_string(), through_json.to_string(), "{text}");
            }
            (straight, through_json) => {
                panic!("{text}: straight {straight:?}, through JSON {through_json:?}")
            }
        }
    }
    assert_eq!(reasons, 5);
    // A required field that is null: the reason the JSON record gets.
    let schema_null = SCHEMA.replace(
        r#"{"name": "city", "type": "string"}"#,
        r#"{"name": "city", "type": ["null", "string"]}"#,
    );
    let parsed = Schema::parse_str(&schema_null).unwrap();
    let schema = Arc::new(WriterSchema::compile(SchemaKind::Avro, &schema_null, &[]).unwrap());
    let avro = decoder("avro", &schema);
    let mut value = base.avro();
    if let Avro::Record(fields) = &mut value {
        fields[10].1 = Avro::Record(vec![
            ("city".into(), Avro::Union(0, Box::new(Avro::Null))),
            ("zip".into(), Avro::Union(0, Box::new(Avro::Null))),
        ]);
    }
    let bytes = framed(&parsed, value);
    let text = schema.to_json(&[], &bytes[5..]).unwrap();
    assert!(
        !avro.reads_straight(&bytes, &meta),
        "a required field missing is transcoded"
    );
    let straight = avro.decode_record(Some(&bytes), &meta).unwrap_err();
    let through_json = json
        .decode_record(Some(text.as_bytes()), &meta)
        .unwrap_err();
    assert_eq!(straight.to_string(), through_json.to_string());
    assert!(straight.to_string().contains("city"), "{straight}");
    // Bytes cut short: the transcode's reason, naming the schema id.
    let error = avro
        .decode_record(Some(&bytes[..bytes.len() - 3]), &meta)
        .unwrap_err();
    assert!(matches!(error, DecodeError::Registry { .. }), "{error:?}");
    assert!(error.to_string().contains("schema id 7"), "{error}");
}

/// One sink over `schema` with `columns` (TOML lines) into a table of `shape`'s columns.
fn small_decoder(
    format: &str,
    schema: &Arc<WriterSchema>,
    columns: &str,
    shape: Vec<crate::ColumnShape>,
) -> SinkDecoder {
    let file = format!(
        "[[sink]]\nname = \"s\"\ntable = \"s\"\nkey = [\"id\"]\nformat = \"{format}\"\n\
         [sink.columns]\n{columns}"
    );
    let sinks = parse_sinks("m.toml", &file).unwrap();
    let table = TableShape {
        name: "s".into(),
        columns: shape,
        unique_keys: vec![vec!["id".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    let plan = plan_sink(&sinks[0], "p", &HashMap::from([("s".into(), table)]))
        .unwrap_or_else(|e| panic!("{e:?}"));
    SinkDecoder::new(&sinks[0], &plan).with_schemas(Arc::new(One(schema.clone())))
}

const META: RecordMeta<'static> = RecordMeta {
    topic: "s",
    partition: 0,
    offset: 0,
    timestamp: None,
    key: None,
    headers: &[],
};

#[test]
fn a_timestamp_read_by_text_and_json_columns_too_is_its_text_for_them() {
    let text = r#"{"type": "record", "name": "T", "fields": [
        {"name": "id", "type": "long"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-nanos"}}]}"#;
    let parsed = Schema::parse_str(text).unwrap();
    let schema = Arc::new(WriterSchema::compile(SchemaKind::Avro, text, &[]).unwrap());
    let columns = "id = { field = \"id\" }\nat = { field = \"at\" }\n\
                   at_text = { field = \"at\" }\nat_json = { field = \"at\" }\n";
    let shape = vec![
        column("id", SqlType::BigInt, true),
        column("at", SqlType::TimestampTz, false),
        column("at_text", SqlType::Text, false),
        column("at_json", SqlType::Jsonb, false),
    ];
    let avro = small_decoder("avro", &schema, columns, shape.clone());
    let json = small_decoder("json", &schema, columns, shape);
    for nanos in [1_700_000_000_123_456_789, -5, i64::MAX] {
        let value = Avro::Record(vec![
            ("id".into(), Avro::Long(1)),
            ("at".into(), Avro::TimestampNanos(nanos)),
        ]);
        let bytes = framed(&parsed, value);
        let written = schema.to_json(&[], &bytes[5..]).unwrap();
        assert!(avro.reads_straight(&bytes, &META), "{written}");
        let straight = avro.decode_record(Some(&bytes), &META).map(|d| d.cells);
        let through_json = json
            .decode_record(Some(written.as_bytes()), &META)
            .map(|d| d.cells);
        assert_eq!(
            format!("{straight:?}"),
            format!("{through_json:?}"),
            "{written}"
        );
    }
}

#[test]
fn a_field_no_column_reads_is_not_parsed_even_past_what_json_numbers_hold() {
    // A big-decimal of 1 × 10^400 that no column reads: its JSON text is a number beyond
    // f64, which the JSON path refuses as a whole record; read straight, it is skipped and
    // the row lands (a field the sink does not read is no reason for a dead letter).
    let text = r#"{"type": "record", "name": "B", "fields": [
        {"name": "id", "type": "long"},
        {"name": "big", "type": {"type": "bytes", "logicalType": "big-decimal"}}]}"#;
    let schema = Arc::new(WriterSchema::compile(SchemaKind::Avro, text, &[]).unwrap());
    // id 1 (zigzag 2); big: 4 bytes = the unscaled 1 (length 1, byte 1), scale -400
    // (zigzag 799 = 0x9f 0x06).
    let body = [0x02, 0x08, 0x02, 0x01, 0x9f, 0x06];
    let written = schema.to_json(&[], &body).unwrap();
    assert_eq!(written.len(), r#"{"id":1,"big":}"#.len() + 401, "{written}");
    let mut bytes = vec![0, 0, 0, 0, 7];
    bytes.extend(body);
    let columns = "id = { field = \"id\" }\n";
    let avro = small_decoder(
        "avro",
        &schema,
        columns,
        vec![column("id", SqlType::BigInt, true)],
    );
    assert!(avro.reads_straight(&bytes, &META));
    let cells = avro.decode_record(Some(&bytes), &META).unwrap().cells;
    assert_eq!(cells.to_vec(), [crate::Cell::BigInt(1)]);
    let json = small_decoder(
        "json",
        &schema,
        columns,
        vec![column("id", SqlType::BigInt, true)],
    );
    let refused = json
        .decode_record(Some(written.as_bytes()), &META)
        .unwrap_err();
    assert!(refused.to_string().contains("out of range"), "{refused}");
}
