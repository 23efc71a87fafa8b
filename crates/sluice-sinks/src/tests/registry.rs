//! Sinks reading schema registry formats: the file's `format`/`value_format`/`key_format`/
//! `subject`, and a record decoded through the writer's schema its wire header names —
//! pending until the schema is fetched, a dead letter when the registry refused it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::decode::column;
use crate::messages::DecodeError;
use crate::schemas::{Known, WriterSchemas};
use crate::wire::{SchemaKind, WriterSchema};
use crate::{
    Cell, Encoding, Format, RecordMeta, SinkDecoder, SqlType, TableShape, parse_sinks, plan_sink,
};

const SCHEMA: &str = r#"{"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "s", "type": "string"}]}"#;
const KEY_SCHEMA: &str =
    r#"{"type": "record", "name": "K", "fields": [{"name": "id", "type": "long"}]}"#;

/// The schemas a test's registry has fetched.
#[derive(Debug, Default)]
struct Fetched(HashMap<i32, Known>);

impl WriterSchemas for Fetched {
    fn known(&self, id: i32) -> Option<Known> {
        self.0.get(&id).cloned()
    }
}

impl fmt::Display for Fetched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} schemas", self.0.len())
    }
}

fn fetched() -> Arc<Fetched> {
    let compile = |text| Arc::new(WriterSchema::compile(SchemaKind::Avro, text, &[]).unwrap());
    Arc::new(Fetched(HashMap::from([
        (7, Known::Schema(compile(SCHEMA))),
        (8, Known::Schema(compile(KEY_SCHEMA))),
        (
            9,
            Known::Refused(Arc::from(
                "schema id 9 is not in the schema registry (gone)",
            )),
        ),
        (
            10,
            Known::Schema(Arc::new(
                WriterSchema::compile(SchemaKind::Json, "{}", &[]).unwrap(),
            )),
        ),
    ])))
}

/// The wire header of schema `id`, then `body`.
fn framed(id: i32, body: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0];
    bytes.extend(id.to_be_bytes());
    bytes.extend(body);
    bytes
}

/// `{"id": 5, "s": "hi"}` in Avro: zigzag varints and a length-prefixed string.
const BODY: &[u8] = &[0x0a, 0x04, b'h', b'i'];

fn decoder(extra: &str) -> SinkDecoder {
    decoder_of("avro", extra)
}

/// A sink of `format` reading `id`, `s` and, in Avro, the schema id.
fn decoder_of(format: &str, extra: &str) -> SinkDecoder {
    let schema = match format {
        "avro" => "schema = { kafka = \"schema_id\" }\n",
        _ => "",
    };
    let file = format!(
        "[[sink]]\nname = \"t\"\ntable = \"t\"\nkey = [\"id\"]\nformat = \"{format}\"\n{extra}\n\
         [sink.columns]\nid = {{ key = \"id\" }}\ns = {{ field = \"s\" }}\n{schema}"
    );
    let sinks = parse_sinks("m.toml", &file).unwrap();
    let table = TableShape {
        name: "t".into(),
        columns: vec![
            column("id", SqlType::BigInt, true),
            column("s", SqlType::Text, false),
            column("schema", SqlType::Integer, false),
        ],
        unique_keys: vec![vec!["id".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    let plan = plan_sink(&sinks[0], "p", &HashMap::from([("t".into(), table)]))
        .unwrap_or_else(|e| panic!("{e:?}"));
    SinkDecoder::new(&sinks[0], &plan).with_schemas(fetched())
}

fn meta(key: Option<&[u8]>) -> RecordMeta<'_> {
    RecordMeta {
        topic: "t",
        partition: 0,
        offset: 3,
        timestamp: None,
        key,
        headers: &[],
    }
}

#[test]
fn the_file_names_the_registry_formats() {
    let sink = |extra: &str| {
        parse_sinks(
            "m.toml",
            &format!(
                "[[sink]]\nname = \"t\"\ntable = \"t\"\nkey = [\"id\"]\n{extra}\n[sink.columns]\nid = {{ field = \"id\" }}\n"
            ),
        )
    };
    let avro = &sink("format = \"avro\"\nsubject = \"orders-v\"").unwrap()[0];
    assert_eq!(
        (avro.format, avro.value_encoding, avro.key_encoding),
        (Format::Json, Encoding::Avro, Encoding::Json)
    );
    assert_eq!(avro.subject.as_deref(), Some("orders-v"));
    let cdc =
        &sink("format = \"debezium\"\nvalue_format = \"avro\"\nkey_format = \"avro\"").unwrap()[0];
    assert_eq!(
        (cdc.format, cdc.value_encoding, cdc.key_encoding),
        (Format::Debezium, Encoding::Avro, Encoding::Avro)
    );
    let protobuf = &sink("format = \"protobuf\"").unwrap()[0];
    assert_eq!(protobuf.value_encoding, Encoding::Protobuf);
    let json = &sink("format = \"json-schema\"").unwrap()[0];
    assert_eq!(json.value_encoding, Encoding::JsonSchema);
    let error = sink("value_format = \"avro\"").unwrap_err().to_string();
    assert!(
        error.contains("`value_format` goes with `format = \"debezium\"`"),
        "{error}"
    );
    let error = sink("subject = \"x\"").unwrap_err().to_string();
    assert!(
        error.contains("`subject` names a schema registry subject"),
        "{error}"
    );
    let error = sink("format = \"thrift\"").unwrap_err().to_string();
    assert!(error.contains("thrift"), "{error}");
}

#[test]
fn a_record_decodes_through_its_writers_schema() {
    let decoder = decoder("key_format = \"avro\"");
    let key = framed(8, &[0x0a]);
    let decoded = decoder
        .decode_record(Some(&framed(7, BODY)), &meta(Some(&key)))
        .unwrap();
    assert_eq!(
        decoded.cells.to_vec(),
        [Cell::BigInt(5), Cell::Text("hi".into()), Cell::Int(7)]
    );
}

#[test]
fn a_schema_not_fetched_yet_is_pending_never_a_dead_letter() {
    let decoder = decoder("");
    let error = decoder
        .decode_record(Some(&framed(11, BODY)), &meta(Some(b"{\"id\": 5}")))
        .unwrap_err();
    assert_eq!(error, DecodeError::SchemaPending { schema_id: 11 });
    // A key in a registry format waits the same way.
    let decoder = self::decoder("key_format = \"avro\"");
    let key = framed(12, &[0x0a]);
    let error = decoder
        .decode_record(Some(&framed(7, BODY)), &meta(Some(&key)))
        .unwrap_err();
    assert_eq!(error, DecodeError::SchemaPending { schema_id: 12 });
}

#[test]
fn refused_ids_wrong_magic_and_bad_bytes_are_dead_letters_naming_why() {
    let decoder = decoder("");
    let key: &[u8] = b"{\"id\": 5}";
    let reason = |payload: &[u8]| {
        decoder
            .decode_record(Some(payload), &meta(Some(key)))
            .unwrap_err()
            .to_string()
    };
    let refused = reason(&framed(9, BODY));
    assert!(
        refused.contains("schema id 9 is not in the schema registry"),
        "{refused}"
    );
    let magic = reason(&[1, 0, 0, 0, 7, 0x0a]);
    assert!(magic.contains("magic byte is 1"), "{magic}");
    let short = reason(&framed(7, &[0x0a, 0x08, b'h']));
    assert!(short.contains("schema id 7"), "{short}");
    let other_kind = reason(&framed(10, b"{}"));
    assert!(
        other_kind.contains("schema id 10 is a Json schema; the sink reads avro"),
        "{other_kind}"
    );
}

/// A record in a registry format read by a sink whose `format` says JSON: the reason says
/// so, with the schema id, instead of a UTF-8 or JSON syntax error.
#[test]
fn a_registry_record_read_as_json_names_the_missing_format() {
    let key: &[u8] = b"{\"id\": 5}";
    for (format, setting) in [
        ("json", "its `format` must name the registry format"),
        ("connect-json", "its `format` must name the registry format"),
        (
            "debezium",
            "its `value_format` must name the registry format",
        ),
    ] {
        let decoder = decoder_of(format, "");
        for body in [BODY, b"{\"id\": 5, \"s\": \"hi\"}".as_slice()] {
            let reason = decoder
                .decode_record(Some(&framed(7, body)), &meta(Some(key)))
                .unwrap_err()
                .to_string();
            assert!(
                reason.contains(
                    "starts with a schema registry wire header (magic byte 0, schema id 7)"
                ) && reason.contains(setting),
                "{format}: {reason}"
            );
        }
        // Bytes that are not JSON and not framed keep their own reason.
        let reason = decoder
            .decode_record(Some(b"{\"id\": 5,"), &meta(Some(key)))
            .unwrap_err()
            .to_string();
        assert!(!reason.contains("wire header"), "{format}: {reason}");
    }
}

/// A Debezium record key written by an Avro converter carries its semantic types only in the
/// Avro schema's `connect.name`s, as the value does: a tombstone's key (`on_tombstone =
/// "delete"`) reads as the JSON converter's key with its Connect schema reads — a
/// millisecond `io.debezium.time.Timestamp` is not taken for microseconds (the delete would
/// miss its row), a `VariableScaleDecimal` is a number.
#[test]
fn a_debezium_key_through_avro_reads_its_semantic_types_as_through_json() {
    let cases: [(SqlType, &str, &str, &str, &str); 4] = [
        (
            SqlType::Date,
            "io.debezium.time.Date",
            "int",
            "int32",
            "19000",
        ),
        (
            SqlType::Timestamp,
            "io.debezium.time.MicroTimestamp",
            "long",
            "int64",
            "1641600000123456",
        ),
        (
            SqlType::Timestamp,
            "io.debezium.time.Timestamp",
            "long",
            "int64",
            "1641600000123",
        ),
        (
            SqlType::Timestamp,
            "io.debezium.time.NanoTimestamp",
            "long",
            "int64",
            "1641600000123456789",
        ),
    ];
    for (sql, connect, avro_type, json_type, n) in cases {
        let avro_key = format!(
            r#"{{"type":"record","name":"Key","namespace":"srv.public.t","fields":[
            {{"name":"k","type":{{"type":"{avro_type}","connect.version":1,"connect.name":"{connect}"}}}}],
            "connect.name":"srv.public.t.Key"}}"#
        );
        let json_key = format!(
            r#"{{"schema":{{"type":"struct","fields":[{{"type":"{json_type}","optional":false,"name":"{connect}","version":1,"field":"k"}}],"optional":false,"name":"srv.public.t.Key"}},"payload":{{"k":{n}}}}}"#
        );
        let n: i64 = n.parse().unwrap();
        let mut body = Vec::new();
        let mut z = ((n << 1) ^ (n >> 63)) as u64;
        while z >= 0x80 {
            body.push((z as u8) | 0x80);
            z >>= 7;
        }
        body.push(z as u8);
        assert_same_tombstone(sql, &avro_key, &framed(21, &body), &json_key);
    }
    // 123.45 as Debezium's VariableScaleDecimal: {scale: 2, value: 12345 big-endian}.
    let avro_key = r#"{"type":"record","name":"Key","namespace":"srv.public.t","fields":[
        {"name":"k","type":{"type":"record","name":"VariableScaleDecimal",
         "namespace":"io.debezium.data","fields":[{"name":"scale","type":"int"},
         {"name":"value","type":"bytes"}],"connect.version":1,
         "connect.name":"io.debezium.data.VariableScaleDecimal"}}],
        "connect.name":"srv.public.t.Key"}"#;
    let json_key = r#"{"schema":{"type":"struct","fields":[{"type":"struct","fields":[
        {"type":"int32","optional":false,"field":"scale"},{"type":"bytes","optional":false,
        "field":"value"}],"optional":false,"name":"io.debezium.data.VariableScaleDecimal",
        "version":1,"field":"k"}],"optional":false,"name":"srv.public.t.Key"},
        "payload":{"k":{"scale":2,"value":"MDk="}}}"#;
    let numeric = SqlType::Numeric {
        precision: None,
        scale: 2,
    };
    assert_same_tombstone(
        numeric,
        avro_key,
        &framed(21, &[4, 4, 0x30, 0x39]),
        json_key,
    );
}

/// A tombstone of a Debezium sink keyed by `k` (of type `sql`) decodes alike from the Avro
/// key `avro` (schema `avro_schema`, id 21) and from the JSON converter's key `json`.
fn assert_same_tombstone(sql: SqlType, avro_schema: &str, avro: &[u8], json: &str) {
    let file = "[[sink]]\nname = \"t\"\ntable = \"t\"\nkey = [\"k\"]\nformat = \"debezium\"\n\
        key_format = \"avro\"\nvalue_format = \"avro\"\non_tombstone = \"delete\"\n\
        [sink.columns]\nk = { field = \"k\" }\nv = { field = \"v\" }\n";
    let json_file = file.replace("key_format = \"avro\"\nvalue_format = \"avro\"\n", "");
    let table = TableShape {
        name: "t".into(),
        columns: vec![column("k", sql, true), column("v", SqlType::Text, false)],
        unique_keys: vec![vec!["k".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    let plan_of = |text: &str| {
        let sinks = parse_sinks("m.toml", text).unwrap();
        let plan = plan_sink(
            &sinks[0],
            "p",
            &HashMap::from([("t".into(), table.clone())]),
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        SinkDecoder::new(&sinks[0], &plan)
    };
    let schema = WriterSchema::compile(SchemaKind::Avro, avro_schema, &[]).unwrap();
    let schemas = Fetched(HashMap::from([(21, Known::Schema(Arc::new(schema)))]));
    let through_avro = plan_of(file)
        .with_schemas(Arc::new(schemas))
        .decode_record(None, &meta(Some(avro)));
    let through_json = plan_of(&json_file).decode_record(None, &meta(Some(json.as_bytes())));
    assert!(through_json.is_ok(), "{through_json:?}");
    assert_eq!(through_avro, through_json, "{avro_schema}");
}

/// A Debezium change event written by an Avro converter names its table by its source block
/// as a JSON event does: `{source.schema}.{source.table}` reads it through the writer's
/// schema, once that schema is fetched.
#[test]
fn an_avro_change_events_source_block_names_its_table() {
    use apache_avro::types::Value as Avro;
    const ENVELOPE: &str = r#"{"type": "record", "name": "Envelope", "fields": [
        {"name": "before", "type": ["null", {"type": "record", "name": "Row",
            "fields": [{"name": "id", "type": "long"}]}], "default": null},
        {"name": "after", "type": ["null", "Row"], "default": null},
        {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
            {"name": "schema", "type": "string"}, {"name": "table", "type": "string"},
            {"name": "lsn", "type": ["null", "long"], "default": null}]}},
        {"name": "op", "type": "string"}]}"#;
    let schema = apache_avro::Schema::parse_str(ENVELOPE).unwrap();
    let row = Avro::Record(vec![("id".into(), Avro::Long(4))]);
    let event = Avro::Record(vec![
        ("before".into(), Avro::Union(0, Box::new(Avro::Null))),
        ("after".into(), Avro::Union(1, Box::new(row))),
        (
            "source".into(),
            Avro::Record(vec![
                ("schema".into(), Avro::String("shop".into())),
                ("table".into(), Avro::String("order".into())),
                ("lsn".into(), Avro::Union(1, Box::new(Avro::Long(77)))),
            ]),
        ),
        ("op".into(), Avro::String("c".into())),
    ]);
    let body = apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
        .build()
        .and_then(|writer| writer.write_value_to_vec(event))
        .unwrap();
    let sinks = parse_sinks(
        "m.toml",
        "[[sink]]\nname = \"cdc\"\ntopic_pattern = \"db\\\\..*\"\n\
         table = \"{source.schema}.{source.table}\"\nformat = \"debezium\"\n\
         value_format = \"avro\"\ncolumns = \"auto\"\n",
    )
    .unwrap();
    assert!(
        crate::check_sinks("m.toml", &sinks).is_empty(),
        "{:?}",
        crate::check_sinks("m.toml", &sinks)
    );
    let compiled = WriterSchema::compile(SchemaKind::Avro, ENVELOPE, &[]).unwrap();
    let schemas = Arc::new(Fetched(HashMap::from([(
        11,
        Known::Schema(Arc::new(compiled)),
    )])));
    let reader = SinkDecoder::new(&sinks[0], &crate::plan_template(&sinks[0], ""));
    let payload = framed(11, &body);
    assert!(
        matches!(
            reader.clone().change_source(&payload),
            Err(DecodeError::Registry { .. })
        ),
        "no registry: the record cannot be read"
    );
    let reader = reader.with_schemas(schemas);
    assert_eq!(
        reader.change_source(&payload).unwrap(),
        Some(("shop".into(), "order".into()))
    );
    assert!(matches!(
        reader.change_source(&framed(12, &body)),
        Err(DecodeError::SchemaPending { schema_id: 12 })
    ));
}
