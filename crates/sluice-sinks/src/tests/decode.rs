//! The declared decoder beyond the seed mappings: nested paths, constants, Kafka
//! coordinates, NUMERIC digits, JSON without U+0000.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::json;

use crate::{
    Cell, ColumnShape, RecordMeta, SinkDecoder, SqlType, TableShape, parse_sinks, plan_sink,
};

pub(super) fn column(name: &str, sql_type: SqlType, not_null: bool) -> ColumnShape {
    ColumnShape {
        name: name.into(),
        sql_type,
        not_null,
        has_default: false,
        writable: true,
        time_precision: None,
    }
}

const SINK: &str = r#"
[[sink]]
name = "events"
table = "events"
key = ["id"]
conflict = "always-update"

[sink.columns]
id = { field = "meta.id" }
amount = { field = "amount" }
extra = { field = "extra" }
origin = { const = "crawler" }
part = { kafka = "partition" }
at = { kafka = "timestamp" }
"#;

fn decoder() -> SinkDecoder {
    let events = decoder_table();
    let sinks = parse_sinks("m.toml", SINK).unwrap();
    let plan = plan_sink(&sinks[0], "p", &HashMap::from([("events".into(), events)]))
        .unwrap_or_else(|e| panic!("{e:?}"));
    SinkDecoder::new(&sinks[0], &plan)
}

fn decoder_table() -> TableShape {
    TableShape {
        name: "events".into(),
        columns: vec![
            column("id", SqlType::Uuid, true),
            column(
                "amount",
                SqlType::Numeric {
                    precision: Some(6),
                    scale: 2,
                },
                false,
            ),
            column("extra", SqlType::Jsonb, false),
            column("origin", SqlType::Text, false),
            column("part", SqlType::Integer, false),
            column("at", SqlType::TimestampTz, false),
        ],
        unique_keys: vec![vec!["id".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    }
}

fn meta(at: DateTime<Utc>) -> RecordMeta<'static> {
    RecordMeta {
        topic: "events",
        partition: 2,
        offset: 41,
        timestamp: Some(at),
        key: None,
        headers: &[],
    }
}

fn decode(value: serde_json::Value) -> Result<Vec<Cell>, String> {
    let at = DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
        .unwrap()
        .to_utc();
    decoder()
        .decode(Some(value.to_string().as_bytes()), &meta(at))
        .map_err(|e| e.to_string())
}

#[test]
fn nested_paths_constants_and_kafka_coordinates() {
    let id = "67e55044-10b1-426f-9247-bb680e5fe0c8";
    let cells = decode(json!({"meta": {"id": id}, "amount": 1234.5, "extra": {"a": [1]}})).unwrap();
    let at = DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
        .unwrap()
        .to_utc();
    assert_eq!(
        cells,
        [
            Cell::Uuid(id.parse().unwrap()),
            Cell::Numeric("1234.5".into()),
            Cell::Json(json!({"a": [1]})),
            Cell::Text("crawler".into()),
            Cell::Int(2),
            Cell::Timestamp(at),
        ]
    );
    assert_eq!(
        decode(json!({"meta": {}})).unwrap_err(),
        "field `meta.id`: required field is missing"
    );
    assert_eq!(
        decode(json!({"meta": "x"})).unwrap_err(),
        "field `meta.id`: required field is missing"
    );
    let absent = decode(json!({"meta": {"id": id}})).unwrap();
    assert_eq!((&absent[1], &absent[2]), (&Cell::Null, &Cell::Null));
}

#[test]
fn numeric_digits_and_json_nul_are_checked() {
    let id = "67e55044-10b1-426f-9247-bb680e5fe0c8";
    assert_eq!(
        decode(json!({"meta": {"id": id}, "amount": 12345.5})).unwrap_err(),
        "field `amount`: must have at most 4 digits before the point, got 12345.5"
    );
    assert_eq!(
        decode(json!({"meta": {"id": id}, "amount": 9999.996})).unwrap_err(),
        "field `amount`: must have at most 4 digits before the point, got 9999.996",
        "rounded to the scale first, as PostgreSQL does"
    );
    let fits = decode(json!({"meta": {"id": id}, "amount": -9999.994})).unwrap();
    assert_eq!(fits[1], Cell::Numeric("-9999.994".into()));
    assert_eq!(
        decode(json!({"meta": {"id": id}, "extra": {"k": ["a\u{0}"]}})).unwrap_err(),
        "field `extra`: must not contain U+0000"
    );
}

#[test]
fn dedupe_keeps_one_row_per_key_by_the_conflict_policy() {
    use crate::SinkRow;
    let at = |s: &str| Cell::Timestamp(DateTime::parse_from_rfc3339(s).unwrap().to_utc());
    let row = |record: usize, key: &str, synced: &str| {
        SinkRow::new(
            record,
            vec![
                Cell::Text(key.into()),
                Cell::Null,
                Cell::Null,
                Cell::Text("crawler".into()),
                Cell::Int(0),
                at(synced),
            ],
        )
    };
    let rows = || {
        vec![
            row(0, "a", "2026-11-03T00:00:00Z"),
            row(1, "b", "2026-11-01T00:00:00Z"),
            row(2, "a", "2026-11-02T00:00:00Z"),
            row(3, "a", "2026-11-03T00:00:00Z"),
            row(4, "a", "2026-11-01T00:00:00Z"),
        ]
    };
    let survivors = |policy: &str| {
        let text = SINK
            .replace("\"always-update\"", policy)
            .replace("{ field = \"meta.id\" }", "{ field = \"id\" }");
        let events = TableShape {
            name: "events".into(),
            columns: ["id", "amount", "extra", "origin", "part", "at"]
                .iter()
                .map(|name| column(name, SqlType::Text, *name == "id"))
                .collect(),
            unique_keys: vec![vec!["id".into()]],
            nulls_not_distinct_keys: Vec::new(),
            primary_key: None,
            partitioned: false,
        };
        let mut events = events;
        events.columns[4].sql_type = SqlType::Integer;
        events.columns[5].sql_type = SqlType::TimestampTz;
        let sinks = parse_sinks("m.toml", &text).unwrap();
        let plan = plan_sink(&sinks[0], "p", &HashMap::from([("events".into(), events)]))
            .unwrap_or_else(|e| panic!("{e:?}"));
        let out = SinkDecoder::new(&sinks[0], &plan).dedupe(rows());
        out.rows.iter().map(|r| r.record).collect::<Vec<_>>()
    };
    assert_eq!(survivors("\"insert-ignore\""), [0, 1], "the first delivery");
    assert_eq!(survivors("\"always-update\""), [4, 1], "the last delivery");
    assert_eq!(
        survivors("{ newest-wins = \"at\" }"),
        [0, 1],
        "the newest guard, ties to the earlier record (as the first stored keeps a tie)"
    );
}

#[test]
fn a_field_read_by_two_columns_and_under_a_nested_path_is_read_whole_by_each() {
    const TWICE: &str = r#"
[[sink]]
name = "twice"
table = "twice"
key = ["id"]
conflict = "always-update"

[sink.columns]
id = { field = "meta.id" }
copy = { field = "meta" }
label = { field = "label" }
label_again = { field = "label" }
"#;
    let twice = TableShape {
        name: "twice".into(),
        columns: vec![
            column("id", SqlType::Text, true),
            column("copy", SqlType::Jsonb, false),
            column("label", SqlType::Text, false),
            column("label_again", SqlType::Text, false),
        ],
        unique_keys: vec![vec!["id".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    let sinks = parse_sinks("m.toml", TWICE).unwrap();
    let plan = plan_sink(&sinks[0], "p", &HashMap::from([("twice".into(), twice)])).unwrap();
    let decoder = SinkDecoder::new(&sinks[0], &plan);
    let at = DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
        .unwrap()
        .to_utc();
    let payload = r#"{"label": "x", "meta": {"id": "k"}, "other": [1, {"a": null}], "label": "y"}"#;
    let cells = decoder.decode(Some(payload.as_bytes()), &meta(at)).unwrap();
    assert_eq!(
        cells,
        [
            Cell::Text("k".into()),
            Cell::Json(json!({"id": "k"})),
            Cell::Text("y".into()),
            Cell::Text("y".into()),
        ],
        "the last of duplicate keys wins, as in the whole parse"
    );
    assert_eq!(
        Ok(cells),
        decoder.decode_whole(Some(payload.as_bytes()), &meta(at))
    );
}

#[test]
fn a_numeric_gets_the_records_digits_not_the_nearest_f64() {
    let at = DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
        .unwrap()
        .to_utc();
    let amount = |number: &str| {
        let payload = format!(
            r#"{{"meta": {{"id": "67e55044-10b1-426f-9247-bb680e5fe0c8"}}, "amount": {number}}}"#
        );
        decoder()
            .decode(Some(payload.as_bytes()), &meta(at))
            .map(|cells| cells[1].clone())
            .map_err(|e| e.to_string())
    };
    assert_eq!(amount("1234.50"), Ok(Cell::Numeric("1234.50".into())));
    assert_eq!(
        amount("0.1000000000000000055511151231257827"),
        Ok(Cell::Numeric("0.1000000000000000055511151231257827".into()))
    );
    assert_eq!(
        amount("9999.994999999999999999"),
        Ok(Cell::Numeric("9999.994999999999999999".into())),
        "rounds to 9999.99: fits"
    );
    assert_eq!(
        amount("9999.995"),
        Err("field `amount`: must have at most 4 digits before the point, got 9999.995".into()),
        "rounds to 10000.00, as PostgreSQL rounds"
    );
    assert_eq!(amount("-0.004"), Ok(Cell::Numeric("-0.004".into())));
}

#[test]
fn a_numeric_keeps_its_digits_beside_absent_fields_and_its_rules_hold_for_them() {
    const EXACT: &str = r#"
[[sink]]
name = "exact"
table = "exact"
key = ["id"]
conflict = "always-update"

[sink.columns]
id = { field = "id" }
amount = { field = "amount" }
capped = { field = "capped", max = 100 }
note = { field = "meta.note" }
approx = { field = "amount" }
"#;
    let exact = TableShape {
        name: "exact".into(),
        columns: vec![
            column("id", SqlType::Text, true),
            column(
                "amount",
                SqlType::Numeric {
                    precision: None,
                    scale: 0,
                },
                false,
            ),
            column(
                "capped",
                SqlType::Numeric {
                    precision: None,
                    scale: 0,
                },
                false,
            ),
            column("note", SqlType::Text, false),
            column("approx", SqlType::Double, false),
        ],
        unique_keys: vec![vec!["id".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    let sinks = parse_sinks("m.toml", EXACT).unwrap();
    let plan = plan_sink(&sinks[0], "p", &HashMap::from([("exact".into(), exact)])).unwrap();
    let decoder = SinkDecoder::new(&sinks[0], &plan);
    let at = DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
        .unwrap()
        .to_utc();
    let decode = |payload: &str| {
        decoder
            .decode(Some(payload.as_bytes()), &meta(at))
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        decode(r#"{"id": "k", "amount": 12345678901234567.123, "capped": 99.5}"#),
        Ok(vec![
            Cell::Text("k".into()),
            Cell::Numeric("12345678901234567.123".into()),
            Cell::Numeric("99.5".into()),
            Cell::Null,
            Cell::Float(12_345_678_901_234_567.0),
        ]),
        "no `meta`: the note is NULL and the NUMERIC keeps its digits; the double gets the f64"
    );
    assert_eq!(
        decode(r#"{"id": "k", "capped": 100.0000000000000001}"#),
        Err(format!(
            "field `capped`: must be between {} and 100, got 100.0000000000000001",
            f64::MIN
        )),
        "the max holds for the digits stored, not for the f64 (100.0)"
    );
    assert_eq!(
        decode(r#"{"id": "k", "amount": 1e-1001}"#),
        Err("field `amount`: must be a number with an exponent within ±1000, got 1e-1001".into()),
        "not silently zero"
    );
    assert_eq!(
        decode(r#"{"id": "k", "amount": 1.5e3}"#).map(|cells| cells[1].clone()),
        Ok(Cell::Numeric("1.5e3".into()))
    );
}

#[test]
fn a_survivor_keeps_the_first_records_key_and_insert_only_values() {
    use crate::SinkRow;
    let text = SINK
        .replace(
            "conflict = \"always-update\"",
            "insert_only = [\"origin\"]\nconflict = \"always-update\"",
        )
        .replace("{ field = \"meta.id\" }", "{ field = \"id\" }");
    let sinks = parse_sinks("m.toml", &text).unwrap();
    let mut shape = decoder_table();
    shape.columns[0].sql_type = SqlType::Interval;
    let plan = plan_sink(&sinks[0], "p", &HashMap::from([("events".into(), shape)]))
        .unwrap_or_else(|e| panic!("{e:?}"));
    let decoder = SinkDecoder::new(&sinks[0], &plan);
    let span = |months, days, micros| {
        Cell::Interval(crate::Interval {
            months,
            days,
            micros,
        })
    };
    let row = |record: usize, key: Cell, origin: &str, part: i32| {
        SinkRow::new(
            record,
            vec![
                key,
                Cell::Null,
                Cell::Null,
                Cell::Text(origin.into()),
                Cell::Int(part),
                Cell::Null,
            ],
        )
    };
    // `P1D` then `PT24H` (one key to PostgreSQL), then `P1M`.
    let out = decoder.dedupe(vec![
        row(0, span(0, 1, 0), "first", 1),
        row(1, span(0, 0, 86_400_000_000), "second", 2),
        row(2, span(1, 0, 0), "third", 3),
    ]);
    let cells: Vec<Vec<Cell>> = out
        .rows
        .iter()
        .map(|r| r.cells().cloned().collect())
        .collect();
    assert_eq!(
        cells,
        [
            vec![
                span(0, 1, 0),
                Cell::Null,
                Cell::Null,
                Cell::Text("first".into()),
                Cell::Int(2),
                Cell::Null
            ],
            vec![
                span(1, 0, 0),
                Cell::Null,
                Cell::Null,
                Cell::Text("third".into()),
                Cell::Int(3),
                Cell::Null
            ],
        ],
        "the last record's updated values under the first record's key and insert-only values"
    );
}

#[test]
fn a_float_column_takes_nan_and_the_infinities_written_as_text() {
    const FLOATS: &str = r#"
[[sink]]
name = "floats"
table = "floats"
key = ["id"]

[sink.columns]
id = { field = "id" }
f8 = { field = "f8" }
f4 = { field = "f4" }
bounded = { field = "bounded", max = 10 }
"#;
    let floats = TableShape {
        name: "floats".into(),
        columns: vec![
            column("id", SqlType::BigInt, true),
            column("f8", SqlType::Double, false),
            column("f4", SqlType::Real, false),
            column("bounded", SqlType::Double, false),
        ],
        unique_keys: vec![vec!["id".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    let sinks = parse_sinks("m.toml", FLOATS).unwrap();
    let plan = plan_sink(&sinks[0], "p", &HashMap::from([("floats".into(), floats)])).unwrap();
    let decoder = SinkDecoder::new(&sinks[0], &plan);
    let at = DateTime::parse_from_rfc3339("2026-11-30T10:00:00Z")
        .unwrap()
        .to_utc();
    let decode = |payload: &str| {
        decoder
            .decode(Some(payload.as_bytes()), &meta(at))
            .map_err(|e| e.to_string())
    };
    let cells = decode(r#"{"id": 1, "f8": "Infinity", "f4": "-Infinity"}"#).unwrap();
    assert_eq!(cells[1], Cell::Float(f64::INFINITY));
    assert_eq!(cells[2], Cell::Float(f64::NEG_INFINITY));
    let cells = decode(r#"{"id": 1, "f8": "NaN", "f4": "NaN"}"#).unwrap();
    assert!(
        matches!(cells[1], Cell::Float(f) if f.is_nan()),
        "{:?}",
        cells[1]
    );
    assert!(
        matches!(cells[2], Cell::Float(f) if f.is_nan()),
        "{:?}",
        cells[2]
    );
    // Other text, and a bounded column, still refuse them.
    assert!(decode(r#"{"id": 1, "f8": "nan"}"#).is_err());
    assert!(decode(r#"{"id": 1, "f8": "1.5"}"#).is_err());
    assert!(decode(r#"{"id": 1, "bounded": "Infinity"}"#).is_err());
}
