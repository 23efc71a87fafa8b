//! A plain Avro record's top-level fields read straight from its bytes are the fields of its
//! transcoded JSON, value for value, text for text and instant for timestamp text, whichever
//! fields are asked for; and what the straight read does not take is left to the transcode.

use std::collections::HashMap;

use apache_avro::Schema;
use apache_avro::types::Value as Avro;
use serde_json::Value as Json;
use serde_json::value::RawValue;

use super::super::{Wanted, WriterSchema};
use super::avro::{EVERYTHING, compile, encode, order};
use super::avro_logical::{LOGICAL, logical_body};
use crate::messages::fields::parse_timestamp;

/// The top-level field names of a record schema's text.
fn names_of(schema: &str) -> Vec<String> {
    let parsed: Json = serde_json::from_str(schema).expect("the schema is JSON");
    parsed["fields"]
        .as_array()
        .map(|fields| {
            fields
                .iter()
                .filter_map(|field| field["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Fields `names` asked for with texts `texts` and instants `instants`.
fn wanted<'a>(names: &'a [String], texts: &'a [bool], instants: &'a [bool]) -> Wanted<'a> {
    Wanted {
        names,
        texts,
        instants,
    }
}

/// Checks that, when the straight read takes `body`, every field it reads is the transcoded
/// record's, under five choices of fields: all fields with no texts, all with texts, all as
/// instants, every other field, and every other field with texts and a name the record lacks.
/// A field given as an instant is one whose text parses to it. Returns whether the straight
/// read took it (every choice agrees on that).
pub(super) fn agrees_with_transcode(schema: &WriterSchema, body: &[u8]) -> bool {
    let Ok(text) = schema.to_json(&[], body) else {
        // Bytes the transcode refuses are never read straight.
        let all = ["value", "id", "next"].map(str::to_owned);
        assert_eq!(schema.top_fields(body, wanted(&all, &[], &[true; 3])), None);
        return false;
    };
    let Ok(record) = serde_json::from_str::<HashMap<String, &RawValue>>(&text) else {
        // Not an object (a root that is not a record) or nested beyond the parse.
        let a = ["a".to_owned()];
        assert_eq!(schema.top_fields(body, wanted(&a, &[true], &[])), None);
        return false;
    };
    let all: Vec<String> = record.keys().cloned().collect();
    let mut some: Vec<String> = all.iter().step_by(2).cloned().collect();
    some.push("no_such_field".to_owned());
    let choices = [
        (all.clone(), vec![false; all.len()], Vec::new()),
        (all.clone(), vec![true; all.len()], Vec::new()),
        (all.clone(), Vec::new(), vec![true; all.len()]),
        (some.clone(), vec![false; some.len()], Vec::new()),
        (
            some.clone(),
            (0..some.len()).map(|i| i % 2 == 0).collect(),
            Vec::new(),
        ),
    ];
    let mut taken = Vec::new();
    for (names, texts, instants) in choices {
        let Some(fields) = schema.top_fields(body, wanted(&names, &texts, &instants)) else {
            taken.push(false);
            continue;
        };
        taken.push(true);
        for (i, name) in names.iter().enumerate() {
            let raw = record.get(name).map(|raw| raw.get());
            let expected: Option<Json> = raw.map(|raw| serde_json::from_str(raw).expect("JSON"));
            match fields.instants.get(i).copied().flatten() {
                Some(at) => {
                    assert_eq!(fields.values[i], None, "field {name} of {text}");
                    let written = expected.as_ref().and_then(Json::as_str);
                    assert_eq!(
                        written.and_then(parse_timestamp),
                        Some(at),
                        "{name} of {text}"
                    );
                }
                None => assert_eq!(fields.values[i], expected, "field {name} of {text}"),
            }
            let expected_text = raw
                .filter(|_| texts.get(i) == Some(&true))
                .map(str::to_owned);
            assert_eq!(
                fields.texts.get(i).cloned().flatten(),
                expected_text,
                "text of {name}"
            );
        }
    }
    assert!(
        taken.iter().all(|t| *t == taken[0]),
        "the choices of fields disagree on {text}: {taken:?}"
    );
    taken[0]
}

#[test]
fn every_type_read_straight_is_its_transcoded_field() {
    let parsed = Schema::parse_str(EVERYTHING).unwrap();
    let schema = compile(EVERYTHING);
    for (note, lines) in [(None, 0), (Some("he said \"hi\"\t\u{1}ü"), 3)] {
        let body = encode(&parsed, order(note, lines));
        assert!(agrees_with_transcode(&schema, &body));
    }
    assert!(agrees_with_transcode(&compile(LOGICAL), &logical_body()));
}

#[test]
fn non_finite_doubles_read_straight_are_the_strings_the_transcode_writes() {
    let text = r#"{"type":"record","name":"F","fields":[
        {"name":"a","type":"double"},{"name":"b","type":["null","double"]},
        {"name":"c","type":"double"},{"name":"d","type":"double"}]}"#;
    let parsed = Schema::parse_str(text).unwrap();
    let value = Avro::Record(vec![
        ("a".into(), Avro::Double(f64::NAN)),
        (
            "b".into(),
            Avro::Union(1, Box::new(Avro::Double(f64::INFINITY))),
        ),
        ("c".into(), Avro::Double(-0.0)),
        ("d".into(), Avro::Double(0.1 + 0.2)),
    ]);
    let schema = compile(text);
    let body = encode(&parsed, value);
    assert!(agrees_with_transcode(&schema, &body));
    let names = names_of(text);
    let fields = schema.top_fields(&body, wanted(&names, &[], &[])).unwrap();
    assert_eq!(fields.values[0], Some(Json::from("NaN")));
    assert_eq!(fields.values[1], Some(Json::from("Infinity")));
}

#[test]
fn what_the_straight_read_does_not_take_is_left_to_the_transcode() {
    let parsed = Schema::parse_str(EVERYTHING).unwrap();
    let schema = compile(EVERYTHING);
    let body = encode(&parsed, order(Some("x"), 1));
    let names = names_of(EVERYTHING);
    let all = wanted(&names, &[], &[]);
    assert!(schema.top_fields(&body, all).is_some());
    // Cut short, or with a byte left over: not read straight (the transcode names why).
    assert_eq!(schema.top_fields(&body[..body.len() - 1], all), None);
    let mut longer = body.clone();
    longer.push(0);
    assert_eq!(schema.top_fields(&longer, all), None);
    assert!(schema.to_json(&[], &longer).is_err());
    // A root that is not a record.
    let string = compile(r#""string""#);
    assert_eq!(string.top_fields(&[2, b'a'], all), None);
}

#[test]
fn timestamps_asked_for_as_instants_are_the_instants_their_text_parses_to() {
    let logical = compile(LOGICAL);
    let body = logical_body();
    assert!(agrees_with_transcode(&logical, &body));
    let names = names_of(LOGICAL);
    let instants = vec![true; names.len()];
    let fields = logical
        .top_fields(&body, wanted(&names, &[], &instants))
        .unwrap();
    let given: Vec<&str> = names
        .iter()
        .zip(&fields.instants)
        .filter(|(_, at)| at.is_some())
        .map(|(name, _)| name.as_str())
        .collect();
    // Every timestamp kind, UTC and local; the nanosecond one to the microsecond.
    assert_eq!(
        given,
        ["ts_ms", "ts_us", "ts_ns", "before", "local_us", "local_ms"]
    );
    // Out of the years 0001–9999 and null: the values their text is.
    let text = r#"{"type":"record","name":"T","fields":[
        {"name":"far","type":{"type":"long","logicalType":"timestamp-micros"}},
        {"name":"none","type":["null",{"type":"long","logicalType":"timestamp-millis"}]},
        {"name":"some","type":["null",{"type":"long","logicalType":"timestamp-millis"}]}]}"#;
    let parsed = Schema::parse_str(text).unwrap();
    let value = Avro::Record(vec![
        ("far".into(), Avro::TimestampMicros(i64::MAX)),
        ("none".into(), Avro::Union(0, Box::new(Avro::Null))),
        (
            "some".into(),
            Avro::Union(1, Box::new(Avro::TimestampMillis(-62_135_596_800_000))),
        ),
    ]);
    let schema = compile(text);
    let body = encode(&parsed, value);
    assert!(agrees_with_transcode(&schema, &body));
    let names = names_of(text);
    let fields = schema
        .top_fields(&body, wanted(&names, &[], &[true; 3]))
        .unwrap();
    assert_eq!(fields.values[0], Some(Json::from(i64::MAX)));
    assert_eq!(fields.values[1], Some(Json::Null));
    assert_eq!(
        fields.instants[2].map(|at| at.to_rfc3339()),
        Some("0001-01-01T00:00:00+00:00".to_owned())
    );
}
