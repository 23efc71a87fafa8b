//! Protobuf: messages built with prost-reflect from a .proto compiled in the test, encoded,
//! transcoded and compared with the JSON they should become.

use std::collections::HashMap;

use prost::Message as _;
use prost_reflect::{DynamicMessage, MapKey, MessageDescriptor, ReflectMessage, Value};
use serde_json::json;

use super::super::{Compiled, SchemaKind, WireError, WriterSchema};

pub(super) const MONEY: &str = r#"syntax = "proto3";
package common;
message Money { int64 units = 1; string currency = 2; }
"#;

pub(super) const ORDER: &str = r#"syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
import "google/protobuf/empty.proto";
import "google/protobuf/any.proto";
import "common/money.proto";

message Order {
  int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; uint64 u64 = 4; sint32 s32 = 5;
  sint64 s64 = 6; fixed32 f32 = 7; fixed64 f64 = 8; sfixed32 sf32 = 9; sfixed64 sf64 = 10;
  float ratio = 11; double price = 12; bool ok = 13; string name = 14; bytes blob = 15;
  Status status = 16;
  Line line = 17;
  repeated Line lines = 18;
  repeated int64 counts = 19;
  map<string, int64> stock = 20;
  map<int32, Line> by_number = 21;
  oneof pay { string card = 22; common.Money cash = 23; }
  optional int32 maybe = 24;
  google.protobuf.Timestamp at = 25;
  google.protobuf.Duration took = 26;
  google.protobuf.Int64Value wrapped = 27;
  google.protobuf.StringValue unset_wrapper = 28;
  google.protobuf.Struct extra = 29;
  google.protobuf.Empty nothing = 30;
  google.protobuf.Any any = 31;
  Status odd_status = 32;
  double nan = 33;
  message Line { string sku = 1; int32 qty = 2; }
  enum Status { NEW = 0; PAID = 1; }
}
message Other { string x = 1; message Deep { sint64 y = 1; } }
"#;

pub(super) fn compile_order() -> WriterSchema {
    let references = [("common/money.proto".to_owned(), MONEY.to_owned())];
    WriterSchema::compile(SchemaKind::Protobuf, ORDER, &references)
        .unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn descriptor(schema: &WriterSchema, indexes: &[i32]) -> MessageDescriptor {
    match &schema.compiled {
        Compiled::Protobuf(proto) => proto.message(indexes).expect("a message at that path"),
        _ => panic!("not a Protobuf schema"),
    }
}

/// A new message of the type of `parent`'s field `field`.
fn child(parent: &MessageDescriptor, field: &str) -> DynamicMessage {
    let kind = parent.get_field_by_name(field).expect("the field").kind();
    DynamicMessage::new(kind.as_message().expect("a message field").clone())
}

fn with(mut message: DynamicMessage, fields: Vec<(&str, Value)>) -> DynamicMessage {
    for (name, value) in fields {
        message.set_field_by_name(name, value);
    }
    message
}

fn struct_value(desc: &MessageDescriptor, kind: &str, value: Value) -> Value {
    Value::Message(with(DynamicMessage::new(desc.clone()), vec![(kind, value)]))
}

pub(super) fn order(desc: &MessageDescriptor) -> DynamicMessage {
    let line = |sku: &str, qty: i32| {
        Value::Message(with(
            child(desc, "line"),
            vec![("sku", Value::String(sku.into())), ("qty", Value::I32(qty))],
        ))
    };
    let extra = child(desc, "extra");
    let json_value = extra
        .descriptor()
        .get_field_by_name("fields")
        .and_then(|f| {
            f.kind()
                .as_message()
                .map(|e| e.map_entry_value_field().kind())
        })
        .and_then(|k| k.as_message().cloned())
        .expect("google.protobuf.Value");
    let list = child(&json_value, "list_value");
    let list = with(
        list,
        vec![(
            "values",
            Value::List(vec![
                struct_value(&json_value, "string_value", Value::String("x".into())),
                struct_value(&json_value, "null_value", Value::EnumNumber(0)),
                struct_value(&json_value, "bool_value", Value::Bool(true)),
            ]),
        )],
    );
    let fields = HashMap::from([
        (
            MapKey::String("a".into()),
            struct_value(&json_value, "number_value", Value::F64(1.5)),
        ),
        (
            MapKey::String("b".into()),
            struct_value(&json_value, "list_value", Value::Message(list)),
        ),
    ]);
    let extra = with(extra, vec![("fields", Value::Map(fields))]);
    with(
        DynamicMessage::new(desc.clone()),
        vec![
            ("i32", Value::I32(-5)),
            ("i64", Value::I64(i64::MIN)),
            ("u32", Value::U32(u32::MAX)),
            ("u64", Value::U64(u64::MAX)),
            ("s64", Value::I64(-9)),
            ("f64", Value::U64(1 << 63)),
            ("sf64", Value::I64(i64::MAX)),
            ("ratio", Value::F32(0.1)),
            ("price", Value::F64(-2.5e-7)),
            ("ok", Value::Bool(true)),
            ("blob", Value::Bytes(vec![0, 1, 2, 255].into())),
            ("status", Value::EnumNumber(1)),
            ("line", line("solo", 1)),
            ("lines", Value::List(vec![line("a", 2), line("b\"", 3)])),
            ("counts", Value::List(vec![Value::I64(1), Value::I64(-1)])),
            (
                "stock",
                Value::Map(HashMap::from([
                    (MapKey::String("z".into()), Value::I64(1)),
                    (MapKey::String("y".into()), Value::I64(0)),
                ])),
            ),
            (
                "by_number",
                Value::Map(HashMap::from([(MapKey::I32(-4), line("n", 0))])),
            ),
            (
                "cash",
                Value::Message(with(
                    child(desc, "cash"),
                    vec![
                        ("units", Value::I64(12)),
                        ("currency", Value::String("EUR".into())),
                    ],
                )),
            ),
            (
                "at",
                Value::Message(with(
                    child(desc, "at"),
                    vec![
                        ("seconds", Value::I64(1_700_000_000)),
                        ("nanos", Value::I32(123_456_789)),
                    ],
                )),
            ),
            (
                "took",
                Value::Message(with(
                    child(desc, "took"),
                    vec![
                        ("seconds", Value::I64(-3)),
                        ("nanos", Value::I32(-500_000_000)),
                    ],
                )),
            ),
            ("wrapped", Value::Message(child(desc, "wrapped"))),
            ("extra", Value::Message(extra)),
            ("nothing", Value::Message(child(desc, "nothing"))),
            (
                "any",
                Value::Message(with(
                    child(desc, "any"),
                    vec![
                        ("type_url", Value::String("type.googleapis.com/x.Y".into())),
                        ("value", Value::Bytes(vec![1, 2].into())),
                    ],
                )),
            ),
            ("odd_status", Value::EnumNumber(9)),
            ("nan", Value::F64(f64::NAN)),
        ],
    )
}

#[test]
fn protobuf_every_type_in_the_column_forms() {
    let schema = compile_order();
    let desc = descriptor(&schema, &[]);
    let body = order(&desc).encode_to_vec();
    let text = schema.to_json(&[], &body).unwrap_or_else(|e| panic!("{e}"));
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let expected = json!({
        "i32": -5, "i64": i64::MIN, "u32": u32::MAX, "u64": u64::MAX, "s32": 0, "s64": -9,
        "f32": 0, "f64": 1_u64 << 63, "sf32": 0, "sf64": i64::MAX,
        "ratio": 0.1, "price": -2.5e-7, "ok": true, "name": "", "blob": "AAEC/w==",
        "status": "PAID",
        "line": {"sku": "solo", "qty": 1},
        "lines": [{"sku": "a", "qty": 2}, {"sku": "b\"", "qty": 3}],
        "counts": [1, -1],
        "stock": {"y": 0, "z": 1},
        "by_number": {"-4": {"sku": "n", "qty": 0}},
        "cash": {"units": 12, "currency": "EUR"},
        "at": "2023-11-14T22:13:20.123457Z",
        "took": "P0M0DT-3.500000S",
        "wrapped": 0,
        "extra": {"a": 1.5, "b": ["x", null, true]},
        "nothing": {},
        "any": {"type_url": "type.googleapis.com/x.Y", "value": "AQI="},
        "odd_status": 9,
        "nan": "NaN",
    });
    assert_eq!(json, expected, "{text}");
    assert!(text.starts_with(r#"{"i32":-5,"i64":-9223372036854775808,"u32":4294967295,"#));
    assert!(text.contains(r#""u64":18446744073709551615,"#), "{text}");
    assert!(text.contains(r#""ratio":0.1,"#), "{text}");
    let interval = crate::forms::interval("P0M0DT-3.500000S").unwrap();
    assert_eq!(interval.micros, -3_500_000);
}

#[test]
fn protobuf_proto3_unset_fields_defaults_or_absent() {
    let schema = compile_order();
    let text = schema.to_json(&[], &[]).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json,
        json!({
            "i32": 0, "i64": 0, "u32": 0, "u64": 0, "s32": 0, "s64": 0, "f32": 0, "f64": 0,
            "sf32": 0, "sf64": 0, "ratio": 0.0, "price": 0.0, "ok": false, "name": "",
            "blob": "", "status": "NEW", "lines": [], "counts": [], "stock": {},
            "by_number": {}, "odd_status": "NEW", "nan": 0.0,
        }),
        "{text}"
    );
}

#[test]
fn protobuf_message_index_paths_pick_the_message() {
    let schema = compile_order();
    let deep = descriptor(&schema, &[1, 0]);
    assert_eq!(deep.full_name(), "shop.Other.Deep");
    let body = with(DynamicMessage::new(deep), vec![("y", Value::I64(-2))]).encode_to_vec();
    assert_eq!(schema.to_json(&[1, 0], &body).unwrap(), r#"{"y":-2}"#);
    assert_eq!(schema.to_json(&[1], &[]).unwrap(), r#"{"x":""}"#);
    assert_eq!(
        schema.to_json(&[0], &[]).unwrap(),
        schema.to_json(&[], &[]).unwrap()
    );
    for bad in [&[2][..], &[1, 5], &[-1]] {
        assert_eq!(
            schema.to_json(bad, &[]),
            Err(WireError::NoSuchMessage {
                indexes: bad.to_vec()
            })
        );
    }
}

#[test]
fn protobuf_proto2_presence_and_defaults() {
    let text = r#"syntax = "proto2";
message P { optional int32 a = 1; optional int32 b = 2 [default = 7]; required string c = 3;
  optional string d = 4; repeated int32 e = 5; }"#;
    let schema = WriterSchema::compile(SchemaKind::Protobuf, text, &[]).unwrap();
    let desc = descriptor(&schema, &[]);
    let body = with(
        DynamicMessage::new(desc),
        vec![("c", Value::String("x".into()))],
    );
    assert_eq!(
        schema.to_json(&[], &body.encode_to_vec()).unwrap(),
        r#"{"b":7,"c":"x","e":[]}"#
    );
}

#[test]
fn protobuf_bad_bodies_and_schemas_say_why() {
    let schema = compile_order();
    let body = order(&descriptor(&schema, &[])).encode_to_vec();
    let error = schema.to_json(&[], &body[..body.len() - 4]).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("bytes do not decode with the writer's schema: "),
        "{error}"
    );
    let missing = WriterSchema::compile(SchemaKind::Protobuf, ORDER, &[]).unwrap_err();
    assert!(
        missing.to_string().contains("common/money.proto"),
        "{missing}"
    );
    let broken = WriterSchema::compile(SchemaKind::Protobuf, "message {", &[]).unwrap_err();
    assert!(
        broken
            .to_string()
            .starts_with("Protobuf schema does not compile"),
        "{broken}"
    );
    let empty = WriterSchema::compile(SchemaKind::Protobuf, "syntax = \"proto3\";", &[]);
    assert!(empty.is_err());
}

#[test]
fn protobuf_paths_follow_messages_oneofs_maps_and_structs() {
    let schema = compile_order();
    for (path, exists) in [
        (&["i64"][..], true),
        (&["line", "sku"], true),
        (&["line", "nope"], false),
        (&["cash", "currency"], true),
        (&["card"], true),
        (&["stock", "anything"], true),
        (&["extra", "a", "b"], true),
        (&["lines", "sku"], false),
        (&["at", "seconds"], false),
        (&["wrapped"], true),
        (&["i64", "x"], false),
        (&["nope"], false),
    ] {
        assert_eq!(schema.has_path(&[], path), exists, "{path:?}");
    }
    assert!(schema.has_path(&[1, 0], &["y"]));
    assert!(!schema.has_path(&[7], &["y"]));
}

#[test]
fn protobuf_timestamps_without_a_timestamp_form_stay_values_the_check_rejects() {
    let schema = compile_order();
    let desc = descriptor(&schema, &[]);
    let at = |seconds: i64, nanos: i32| {
        let stamp = with(
            child(&desc, "at"),
            vec![
                ("seconds", Value::I64(seconds)),
                ("nanos", Value::I32(nanos)),
            ],
        );
        let body = with(
            DynamicMessage::new(desc.clone()),
            vec![("at", Value::Message(stamp))],
        )
        .encode_to_vec();
        let text = schema.to_json(&[], &body).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json["at"].clone()
    };
    // Nanoseconds round to the microsecond, as PostgreSQL rounds them.
    assert_eq!(at(0, 999_999_999), json!("1970-01-01T00:00:01.000000Z"));
    assert_eq!(at(0, 999_999_499), json!("1970-01-01T00:00:00.999999Z"));
    assert_eq!(at(253_402_300_800, 0), json!(253_402_300_800_i64));
    assert_eq!(at(5, -1), json!({"seconds": 5, "nanos": -1}));
}

/// A .proto file as the Confluent serializers register it: its `FileDescriptorProto`,
/// serialized, in base64.
fn registered_form(name: &str, sources: &[(&str, &str)]) -> String {
    use base64::Engine as _;
    use prost::Message as _;
    let files: std::collections::HashMap<String, String> = sources
        .iter()
        .map(|(n, s)| ((*n).to_owned(), (*s).to_owned()))
        .collect();
    struct Files(std::collections::HashMap<String, String>);
    impl protox::file::FileResolver for Files {
        fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
            match self.0.get(name) {
                Some(source) => protox::file::File::from_source(name, source),
                None => protox::file::GoogleFileResolver::new().open_file(name),
            }
        }
    }
    let mut compiler = protox::Compiler::with_file_resolver(Files(files));
    compiler.open_file(name).unwrap();
    let set = compiler.file_descriptor_set();
    let proto = set
        .file
        .iter()
        .find(|f| f.name() == name)
        .expect("the file");
    base64::engine::general_purpose::STANDARD.encode(proto.encode_to_vec())
}

#[test]
fn protobuf_schemas_registered_as_serialized_descriptors_compile_the_same() {
    let sources = [("order.proto", ORDER), ("common/money.proto", MONEY)];
    let references = [(
        "common/money.proto".to_owned(),
        registered_form("common/money.proto", &sources),
    )];
    let schema = WriterSchema::compile(
        SchemaKind::Protobuf,
        &registered_form("order.proto", &sources),
        &references,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let text_schema = compile_order();
    let body = order(&descriptor(&text_schema, &[])).encode_to_vec();
    assert_eq!(
        schema.to_json(&[], &body).unwrap(),
        text_schema.to_json(&[], &body).unwrap()
    );
}

/// A subject check asks whether any message of the file has a path: a file may declare shared
/// messages before the one its records use (message-index list `[1]`), nested ones too.
#[test]
fn a_path_of_any_message_of_the_file_may_be_read() {
    let text = r#"syntax = "proto3";
package shop;
message Other { int32 x = 1; }
message Order {
  message Customer { string name = 1; Address addr = 2; }
  message Address { string city = 1; }
  int64 id = 1; Customer customer = 3;
}
"#;
    let schema = WriterSchema::compile(SchemaKind::Protobuf, text, &[]).unwrap();
    assert!(
        !schema.has_path(&[], &["customer", "name"]),
        "not in the first message"
    );
    assert!(schema.has_path(&[1], &["customer", "addr", "city"]));
    for path in [
        &["customer", "name"][..],
        &["customer", "addr", "city"],
        &["x"],
        &["city"],
    ] {
        assert!(schema.may_have_path(path), "{path:?}");
    }
    assert!(!schema.may_have_path(&["customer", "zip"]));
    assert!(!schema.may_have_path(&["nowhere"]));
}
