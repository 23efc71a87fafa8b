//! A micro measurement, not a test: the CPU per record of the Avro transcoder against parsing
//! the same record as JSON and against apache-avro's own reader (`GenericDatumReader::read_value`, what `from_avro_datum` calls). Run it in release:
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
    let reference = ns_per_call(n, || {
        black_box(reader.read_value(&mut black_box(body.as_slice())).ok());
    });
    println!(
        "record: {} Avro bytes, {} JSON bytes\n\
         serde_json::from_str::<Value> of the JSON: {parse:.0} ns/record\n\
         sluice Avro transcode to JSON text:         {transcode:.0} ns/record\n\
         apache-avro read_value (Value tree):        {reference:.0} ns/record",
        body.len(),
        json.len()
    );
}
