//! A micro measurement, not a test: the CPU per record of the Avro transcoder against parsing
//! the same record as JSON and against apache-avro's own reader
//! (`GenericDatumReader::read_value`, what `from_avro_datum` calls); then a sink's whole
//! decode of the bench's review record as JSON and as Avro. Run it in release:
//! `cargo test --release -p sluice-sinks --lib wire::tests::measure -- --ignored --nocapture`.

use std::hint::black_box;
use std::time::Instant;

use apache_avro::Schema;
use apache_avro::reader::datum::GenericDatumReader;

use super::avro;

/// ns per call of `work`, the best of five rounds of `n` calls.
fn ns_per_call(n: u32, mut work: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..n {
                work();
            }
            start.elapsed().as_secs_f64() * 1e9 / f64::from(n)
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
#[ignore = "a measurement: run in release with --ignored --nocapture"]
fn measure_avro_transcode_against_json_parse() {
    let parsed = Schema::parse_str(avro::EVERYTHING).expect("the schema parses");
    let schema = avro::compile(avro::EVERYTHING);
    let note = "a note of some length, as a description field would hold it. ".repeat(2);
    let body = avro::encode(&parsed, avro::order(Some(&note), 8));
    let reader = GenericDatumReader::builder(&parsed)
        .build()
        .expect("a reader");
    let json = schema.to_json(&[], &body).expect("it transcodes");
    let n = 20_000;
    let parse = ns_per_call(n, || {
        black_box(serde_json::from_str::<serde_json::Value>(black_box(&json)).ok());
    });
    let transcode = ns_per_call(n, || {
        black_box(schema.to_json(&[], black_box(&body)).ok());
    });
    let names: Vec<String> =
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&json)
            .expect("an object")
            .keys()
            .cloned()
            .collect();
    let wanted = super::super::Wanted {
        names: &names,
        texts: &[],
        instants: &[],
    };
    let straight = ns_per_call(n, || {
        black_box(schema.top_fields(black_box(&body), wanted));
    });
    let reference = ns_per_call(n, || {
        black_box(reader.read_value(&mut black_box(body.as_slice())).ok());
    });
    println!(
        "record: {} Avro bytes, {} JSON bytes\n\
         serde_json::from_str::<Value> of the JSON: {parse:.0} ns/record\n\
         sluice Avro transcode to JSON text:         {transcode:.0} ns/record\n\
         sluice Avro fields read straight (all):     {straight:.0} ns/record\n\
         apache-avro read_value (Value tree):        {reference:.0} ns/record",
        body.len(),
        json.len()
    );
    measure_avro_review_decode_against_json();
}

/// The bench's review record (`sluice-lab bench --formats-pairs`), as its eight columns.
const REVIEW: &str = r#"{"type": "record", "name": "Review", "namespace": "bench",
  "fields": [
    {"name": "id", "type": "long"}, {"name": "app", "type": "string"},
    {"name": "rating", "type": "int"}, {"name": "title", "type": "string"},
    {"name": "body", "type": "string"},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "helpful", "type": "long"}, {"name": "verified", "type": "boolean"}
  ]}"#;

#[derive(Debug)]
struct One(std::sync::Arc<super::super::WriterSchema>);

impl crate::schemas::WriterSchemas for One {
    fn known(&self, _: i32) -> Option<crate::schemas::Known> {
        Some(crate::schemas::Known::Schema(self.0.clone()))
    }
}

impl std::fmt::Display for One {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("one schema")
    }
}

fn review_decoder(
    format: &str,
    schema: &std::sync::Arc<super::super::WriterSchema>,
) -> crate::SinkDecoder {
    use crate::{ColumnShape, SqlType, TableShape};
    let names = [
        "id", "app", "rating", "title", "body", "at", "helpful", "verified",
    ];
    let columns: String = names
        .iter()
        .map(|n| format!("{n} = {{ field = \"{n}\" }}\n"))
        .collect();
    let file = format!(
        "[[sink]]\nname = \"r\"\ntable = \"r\"\nkey = [\"id\"]\nformat = \"{format}\"\n\
         [sink.columns]\n{columns}"
    );
    let sinks = crate::parse_sinks("m.toml", &file).expect("the file parses");
    let types = [
        SqlType::BigInt,
        SqlType::Text,
        SqlType::Integer,
        SqlType::Text,
        SqlType::Text,
        SqlType::TimestampTz,
        SqlType::BigInt,
        SqlType::Boolean,
    ];
    let table = TableShape {
        name: "r".into(),
        columns: names
            .iter()
            .zip(types)
            .map(|(name, sql_type)| ColumnShape {
                name: (*name).into(),
                sql_type,
                not_null: *name == "id",
                has_default: false,
                writable: true,
                time_precision: None,
            })
            .collect(),
        unique_keys: vec![vec!["id".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    let plan = crate::plan_sink(
        &sinks[0],
        "p",
        &std::collections::HashMap::from([("r".into(), table)]),
    )
    .expect("it plans");
    crate::SinkDecoder::new(&sinks[0], &plan).with_schemas(std::sync::Arc::new(One(schema.clone())))
}

/// The bench's review record decoded by a sink reading it as JSON and as Avro.
fn measure_avro_review_decode_against_json() {
    use apache_avro::types::Value as Avro;
    let parsed = Schema::parse_str(REVIEW).expect("the schema parses");
    let schema = std::sync::Arc::new(avro::compile(REVIEW));
    let text = "abcdefghij klmnopqrstuvwxyz ".repeat(20);
    let value = Avro::Record(vec![
        ("id".into(), Avro::Long(123_456)),
        ("app".into(), Avro::String("com.bench.app456".into())),
        ("rating".into(), Avro::Int(4)),
        ("title".into(), Avro::String(text[..40].into())),
        ("body".into(), Avro::String(text[40..440].into())),
        ("at".into(), Avro::TimestampMicros(1_764_000_000_000_000)),
        ("helpful".into(), Avro::Long(456)),
        ("verified".into(), Avro::Boolean(true)),
    ]);
    let mut framed = vec![0, 0, 0, 0, 7];
    framed.extend(avro::encode(&parsed, value));
    let json = schema.to_json(&[], &framed[5..]).expect("it transcodes");
    let (by_avro, by_json) = (
        review_decoder("avro", &schema),
        review_decoder("json", &schema),
    );
    let meta = crate::RecordMeta {
        topic: "r",
        partition: 0,
        offset: 1,
        timestamp: None,
        key: None,
        headers: &[],
    };
    let n = 50_000;
    let json_ns = ns_per_call(n, || {
        black_box(
            by_json
                .decode_record(Some(black_box(json.as_bytes())), &meta)
                .ok(),
        );
    });
    let avro_ns = ns_per_call(n, || {
        black_box(by_avro.decode_record(Some(black_box(&framed)), &meta).ok());
    });
    println!(
        "review: {} Avro bytes, {} JSON bytes\n\
         decode_record of the JSON record: {json_ns:.0} ns\n\
         decode_record of the Avro record: {avro_ns:.0} ns (avro / json = {:.3})",
        framed.len(),
        json.len(),
        avro_ns / json_ns
    );
}
