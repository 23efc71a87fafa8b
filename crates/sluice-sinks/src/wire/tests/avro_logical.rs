//! Avro logical types in the forms the column checks read, Debezium's Avro change events
//! included; each written text is read back by the sink's own form readers.

use apache_avro::types::Value as Avro;
use apache_avro::{Days, Decimal, Duration, Millis, Months, Schema};
use serde_json::Value as Json;

use super::avro::{compile, encode};

pub(super) const LOGICAL: &str = r#"{"type":"record","name":"L","fields":[
  {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":3}},
  {"name":"dec0","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":0}},
  {"name":"small","type":{"type":"bytes","logicalType":"decimal","precision":4,"scale":3}},
  {"name":"huge","type":{"type":"fixed","name":"Huge","size":20,"logicalType":"decimal",
     "precision":48,"scale":2}},
  {"name":"id","type":{"type":"string","logicalType":"uuid"}},
  {"name":"raw_id","type":{"type":"fixed","name":"Id","size":16,"logicalType":"uuid"}},
  {"name":"day","type":{"type":"int","logicalType":"date"}},
  {"name":"early","type":{"type":"int","logicalType":"date"}},
  {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
  {"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
  {"name":"ts_ms","type":{"type":"long","logicalType":"timestamp-millis"}},
  {"name":"ts_us","type":{"type":"long","logicalType":"timestamp-micros"}},
  {"name":"ts_ns","type":{"type":"long","logicalType":"timestamp-nanos"}},
  {"name":"before","type":{"type":"long","logicalType":"timestamp-micros"}},
  {"name":"local_us","type":{"type":"long","logicalType":"local-timestamp-micros"}},
  {"name":"local_ms","type":{"type":"long","logicalType":"local-timestamp-millis"}},
  {"name":"span","type":{"type":"fixed","name":"Span","size":12,"logicalType":"duration"}},
  {"name":"odd","type":{"type":"long","logicalType":"no-such-type"}}
]}"#;

pub(super) fn be(n: i128) -> Vec<u8> {
    n.to_be_bytes().to_vec()
}

/// A record of [`LOGICAL`] with every logical type, edge values among them.
pub(super) fn logical_body() -> Vec<u8> {
    let parsed = Schema::parse_str(LOGICAL).unwrap();
    let mut huge = vec![0xff; 4];
    huge.extend(be(-10_i128.pow(37)));
    let id = uuid::Uuid::parse_str("67e55044-10b1-426f-9247-bb680e5fe0c8").unwrap();
    let value = Avro::Record(vec![
        ("dec".into(), Avro::Decimal(Decimal::from(be(-12345)))),
        ("dec0".into(), Avro::Decimal(Decimal::from([0x30, 0x39]))),
        ("small".into(), Avro::Decimal(Decimal::from([0x01]))),
        ("huge".into(), Avro::Decimal(Decimal::from(huge))),
        ("id".into(), Avro::Uuid(id)),
        ("raw_id".into(), Avro::Uuid(id)),
        ("day".into(), Avro::Date(20_000)),
        ("early".into(), Avro::Date(-719_162)),
        ("tm".into(), Avro::TimeMillis(45_296_789)),
        ("tu".into(), Avro::TimeMicros(45_296_789_012)),
        ("ts_ms".into(), Avro::TimestampMillis(1_700_000_000_123)),
        ("ts_us".into(), Avro::TimestampMicros(1_700_000_000_123_456)),
        (
            "ts_ns".into(),
            Avro::TimestampNanos(1_700_000_000_123_456_789),
        ),
        ("before".into(), Avro::TimestampMicros(-1)),
        (
            "local_us".into(),
            Avro::LocalTimestampMicros(1_700_000_000_000_001),
        ),
        ("local_ms".into(), Avro::LocalTimestampMillis(0)),
        (
            "span".into(),
            Avro::Duration(Duration::new(
                Months::new(14),
                Days::new(3),
                Millis::new(3_723_004),
            )),
        ),
        ("odd".into(), Avro::Long(77)),
    ]);
    encode(&parsed, value)
}

#[test]
fn avro_logical_types_in_the_column_forms() {
    let body = logical_body();
    let text = compile(LOGICAL).to_json(&[], &body).unwrap();
    assert_eq!(
        text,
        concat!(
            r#"{"dec":-12.345,"dec0":12345,"small":0.001,"#,
            r#""huge":-100000000000000000000000000000000000.00,"#,
            r#""id":"67e55044-10b1-426f-9247-bb680e5fe0c8","#,
            r#""raw_id":"67e55044-10b1-426f-9247-bb680e5fe0c8","#,
            r#""day":"2024-10-04","early":"0001-01-01","#,
            r#""tm":"12:34:56.789000","tu":"12:34:56.789012","#,
            r#""ts_ms":"2023-11-14T22:13:20.123000Z","ts_us":"2023-11-14T22:13:20.123456Z","#,
            r#""ts_ns":"2023-11-14T22:13:20.123457Z","before":"1969-12-31T23:59:59.999999Z","#,
            r#""local_us":"2023-11-14T22:13:20.000001","local_ms":"1970-01-01T00:00:00.000000","#,
            r#""span":"P14M3DT3723.004000S","odd":77}"#
        )
    );
    let json: Json = serde_json::from_str(&text).unwrap();
    let field = |name: &str| json[name].as_str().unwrap().to_owned();
    assert!(crate::forms::date(&field("early")).is_ok());
    assert_eq!(crate::forms::time(&field("tu")), Ok(45_296_789_012));
    let span = crate::forms::interval(&field("span")).unwrap();
    assert_eq!(
        (span.months, span.days, span.micros),
        (14, 3, 3_723_004_000)
    );
    for name in ["ts_ns", "before", "local_us"] {
        let parsed = crate::messages::fields::dynamic::time(name, &json[name]);
        assert!(parsed.is_ok(), "{name}: {parsed:?}");
    }
}

/// Debezium's Avro converter: `connect.*` properties, its own time types (plain longs and
/// ints), `decimal` in precise mode, and `VariableScaleDecimal` (a record left as one).
const DEBEZIUM: &str = r#"{"type":"record","name":"Envelope","namespace":"pg.public.orders",
 "fields":[
  {"name":"before","type":["null",{"type":"record","name":"Value","fields":[
    {"name":"id","type":"int"},
    {"name":"amount","type":{"type":"bytes","scale":2,"precision":10,"connect.version":1,
      "connect.parameters":{"scale":"2","connect.decimal.precision":"10"},
      "connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}},
    {"name":"created","type":{"type":"long","connect.version":1,
      "connect.name":"io.debezium.time.MicroTimestamp"}},
    {"name":"day","type":{"type":"int","connect.version":1,
      "connect.name":"io.debezium.time.Date"}},
    {"name":"loose","type":["null",{"type":"record","name":"VariableScaleDecimal",
      "namespace":"io.debezium.data","fields":[{"name":"scale","type":"int"},
      {"name":"value","type":"bytes"}],"connect.name":"io.debezium.data.VariableScaleDecimal"}],
      "default":null}
  ],"connect.name":"pg.public.orders.Value"}],"default":null},
  {"name":"after","type":["null","Value"],"default":null},
  {"name":"op","type":"string"},
  {"name":"ts_ms","type":["null","long"],"default":null}
 ],"connect.name":"pg.public.orders.Envelope"}"#;

#[test]
fn debezium_avro_change_events_transcode_their_underlying_types() {
    let parsed = Schema::parse_str(DEBEZIUM).unwrap();
    let row = Avro::Record(vec![
        ("id".into(), Avro::Int(7)),
        ("amount".into(), Avro::Decimal(Decimal::from(be(123_456)))),
        ("created".into(), Avro::Long(1_700_000_000_000_000)),
        ("day".into(), Avro::Int(19_000)),
        (
            "loose".into(),
            Avro::Union(
                1,
                Box::new(Avro::Record(vec![
                    ("scale".into(), Avro::Int(1)),
                    ("value".into(), Avro::Bytes(vec![0x7b])),
                ])),
            ),
        ),
    ]);
    let event = Avro::Record(vec![
        ("before".into(), Avro::Union(0, Box::new(Avro::Null))),
        ("after".into(), Avro::Union(1, Box::new(row))),
        ("op".into(), Avro::String("c".into())),
        ("ts_ms".into(), Avro::Union(1, Box::new(Avro::Long(5)))),
    ]);
    let body = encode(&parsed, event);
    let schema = compile(DEBEZIUM);
    assert_eq!(
        schema.to_json(&[], &body).unwrap(),
        concat!(
            r#"{"before":null,"after":{"id":7,"amount":1234.56,"created":1700000000000000,"#,
            r#""day":19000,"loose":{"scale":1,"value":"ew=="}},"op":"c","ts_ms":5}"#
        )
    );
    assert!(schema.has_path(&[], &["after", "amount"]));
    assert!(schema.has_path(&[], &["before", "loose", "scale"]));
    assert!(!schema.has_path(&[], &["after", "amount", "scale"]));
}
