//! Debezium's value-handling modes on a schemaless stream: each mode's form of each column
//! type, read by the column's SQL type and the declared mode (table-driven), and the
//! combinations validation refuses.

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::json;

use crate::{
    Cell, ColumnShape, Interval, RecordMeta, SinkDecoder, SqlType, TableShape, parse_sinks,
    plan_sink,
};

fn numeric(precision: Option<u32>, scale: u32) -> SqlType {
    SqlType::Numeric { precision, scale }
}

/// A sink of `format` with `options` (the `debezium = …` line) writing field `v` (with
/// `column_options`) to a column of `sql_type` and `precision`.
fn sink(
    format: &str,
    options: &str,
    sql_type: &SqlType,
    precision: Option<u32>,
    column_options: &str,
) -> Result<SinkDecoder, String> {
    let text = format!(
        "[[sink]]\nname = \"t\"\ntable = \"t\"\nkey = [\"id\"]\nconflict = \"always-update\"\n\
         format = \"{format}\"\n{options}\n[sink.columns]\nid = {{ field = \"id\" }}\n\
         v = {{ field = \"v\"{column_options} }}\n"
    );
    let table = TableShape {
        name: "t".into(),
        columns: vec![
            ColumnShape {
                name: "id".into(),
                sql_type: SqlType::BigInt,
                not_null: true,
                has_default: false,
                writable: true,
                time_precision: None,
            },
            ColumnShape {
                name: "v".into(),
                sql_type: sql_type.clone(),
                not_null: false,
                has_default: false,
                writable: true,
                time_precision: precision,
            },
        ],
        unique_keys: vec![vec!["id".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    let sinks = parse_sinks("m.toml", &text).map_err(|e| e.to_string())?;
    let plan = plan_sink(&sinks[0], "p", &HashMap::from([("t".into(), table)])).map_err(|e| {
        e.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    Ok(SinkDecoder::new(&sinks[0], &plan))
}

/// Field `v`'s cell of one record whose value is `value` (JSON text, as the record wrote
/// it): a schemaless Debezium `c` event, or a plain row for `connect-json` and `json`.
fn cell(decoder: &SinkDecoder, format: &str, value: &str) -> Result<Cell, String> {
    let row = format!(r#"{{"id": 1, "v": {value}}}"#);
    let record = match format {
        "debezium" => format!(r#"{{"before": null, "after": {row}, "source": {{}}, "op": "c"}}"#),
        _ => row,
    };
    let meta = RecordMeta {
        topic: "t",
        partition: 0,
        offset: 0,
        timestamp: None,
        key: None,
        headers: &[],
    };
    decoder
        .decode_record(Some(record.as_bytes()), &meta)
        .map(|decoded| decoded.cells[1].clone())
        .map_err(|e| e.to_string())
}

fn at(text: &str) -> Cell {
    Cell::Timestamp(
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc),
    )
}

fn day(text: &str) -> Cell {
    Cell::Date(NaiveDate::parse_from_str(text, "%Y-%m-%d").unwrap())
}

/// What a case expects: the cell, or the start of the dead letter's reason.
enum Want {
    Cell(Cell),
    Refused(&'static str),
}

use Want::{Cell as Is, Refused};

/// One schemaless value: the sink's modes, the column, its precision, the value's JSON.
struct Case {
    modes: &'static str,
    sql_type: SqlType,
    precision: Option<u32>,
    value: &'static str,
    want: Want,
}

fn case(
    modes: &'static str,
    sql_type: SqlType,
    precision: Option<u32>,
    value: &'static str,
    want: Want,
) -> Case {
    Case {
        modes,
        sql_type,
        precision,
        value,
        want,
    }
}

fn run(format: &str, cases: Vec<Case>) {
    for case in cases {
        let options = if case.modes.is_empty() {
            String::new()
        } else {
            format!("debezium = {{ {} }}", case.modes)
        };
        let label = format!(
            "{format} {{ {} }} {} {:?} {}",
            case.modes, case.sql_type, case.precision, case.value
        );
        let decoder = sink(format, &options, &case.sql_type, case.precision, "")
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        let got = cell(&decoder, format, case.value);
        match (&case.want, &got) {
            (Is(want), Ok(got)) => assert_eq!(got, want, "{label}"),
            (Refused(reason), Err(got)) => assert!(
                got.starts_with(reason),
                "{label}: {got:?} should start with {reason:?}"
            ),
            _ => panic!("{label}: got {got:?}"),
        }
    }
}

const STRING: &str = "schemas = false, decimal = \"string\"";
const DOUBLE: &str = "schemas = false, decimal = \"double\"";

#[test]
fn decimal_handling_modes_land_digit_for_digit() {
    let text = |digits: &str| Is(Cell::Numeric(digits.into()));
    let n20_4 = || numeric(Some(20), 4);
    let array = || SqlType::Array(Box::new(numeric(None, 0)));
    run(
        "debezium",
        vec![
            // string: the decimal's text, every digit, whatever a double would make of it.
            case(STRING, n20_4(), None, r#""9975623.66""#, text("9975623.66")),
            case(
                STRING,
                n20_4(),
                None,
                r#""12345678901234.5678""#,
                text("12345678901234.5678"),
            ),
            case(
                STRING,
                numeric(None, 0),
                None,
                r#""-0.000000000000000000000000000001""#,
                text("-0.000000000000000000000000000001"),
            ),
            case(
                STRING,
                numeric(None, 0),
                None,
                r#""123456789012345678901234567890.123""#,
                text("123456789012345678901234567890.123"),
            ),
            case(STRING, n20_4(), None, "12.5", text("12.5")),
            case(
                STRING,
                numeric(Some(6), 2),
                None,
                r#""9999.995""#,
                Refused("field `v`: must have at most 4 digits before the point, got 9999.995"),
            ),
            case(
                STRING,
                n20_4(),
                None,
                r#""9975623,66""#,
                Refused(
                    "field `v`: must be a decimal number (decimal.handling.mode=string), got \"9975623,66\"",
                ),
            ),
            case(
                STRING,
                n20_4(),
                None,
                r#""NaN""#,
                Refused("field `v`: must be a decimal"),
            ),
            case(
                STRING,
                n20_4(),
                None,
                r#""""#,
                Refused("field `v`: must be a decimal"),
            ),
            case(
                STRING,
                array(),
                None,
                r#"["1.10", "-2", 3.25]"#,
                Is(Cell::Json(json!(["1.10", "-2", "3.25"]))),
            ),
            case(
                STRING,
                array(),
                None,
                r#"["1.10", "x"]"#,
                Refused("field `v[1]`: must be a decimal"),
            ),
            // double: the number's shortest text as the converter wrote it.
            case(DOUBLE, n20_4(), None, "9975623.66", text("9975623.66")),
            case(DOUBLE, numeric(None, 0), None, "1.0E10", text("1.0E10")),
            case(DOUBLE, numeric(None, 0), None, "0.1", text("0.1")),
            // precise (the default) without the schema: base64 bytes, never read as digits.
            case(
                "",
                n20_4(),
                None,
                r#""EtaH""#,
                Refused(
                    "field `v`: must be a number, got a string \"EtaH\" (a Debezium decimal string needs",
                ),
            ),
        ],
    );
}

#[test]
fn time_precision_modes_read_by_the_column_precision() {
    let micros = |text: &str| Is(at(text));
    let time = |micros: i64| Is(Cell::Time(micros));
    run(
        "debezium",
        vec![
            // A date is days since the epoch in every numeric mode.
            case("", SqlType::Date, None, "17424", Is(day("2017-09-15"))),
            case("", SqlType::Date, None, "-719162", Is(day("0001-01-01"))),
            case(
                "",
                SqlType::Date,
                None,
                "-719163",
                Refused("field `v`: must be a day of the years 0001–9999"),
            ),
            case(
                "",
                SqlType::Date,
                None,
                "1.5",
                Refused("field `v`: must be a whole number of days"),
            ),
            case(
                "",
                SqlType::Date,
                None,
                r#""2017-09-15""#,
                Is(day("2017-09-15")),
            ),
            // adaptive: precision 0–3 in milliseconds, 4–6 (and none) in microseconds.
            case("", SqlType::Time, None, "14711789000", time(14_711_789_000)),
            case("", SqlType::Time, Some(3), "14711789", time(14_711_789_000)),
            case("", SqlType::Time, Some(0), "14711000", time(14_711_000_000)),
            case(
                "",
                SqlType::Time,
                Some(4),
                "14711789100",
                time(14_711_789_100),
            ),
            case("", SqlType::Time, None, "86400000000", time(86_400_000_000)),
            case(
                "",
                SqlType::Time,
                None,
                "86400000001",
                Refused("field `v`: must be microseconds since midnight up to 24:00:00"),
            ),
            case(
                "",
                SqlType::Time,
                None,
                "-1",
                Refused("field `v`: must be microseconds since midnight"),
            ),
            case(
                "",
                SqlType::Timestamp,
                None,
                "1562639337123456",
                micros("2019-07-09T02:28:57.123456Z"),
            ),
            case(
                "",
                SqlType::Timestamp,
                Some(3),
                "1562639337123",
                micros("2019-07-09T02:28:57.123Z"),
            ),
            case(
                "",
                SqlType::Timestamp,
                Some(6),
                "-1",
                micros("1969-12-31T23:59:59.999999Z"),
            ),
            case(
                "",
                SqlType::Timestamp,
                None,
                "9223372036854775807",
                Refused("field `v`: must be microseconds since 1970-01-01T00:00:00Z within"),
            ),
            // A timestamptz is ISO 8601 text in every mode.
            case(
                "",
                SqlType::TimestampTz,
                None,
                r#""2019-07-09T01:28:10.123456Z""#,
                micros("2019-07-09T01:28:10.123456Z"),
            ),
            // adaptive_time_microseconds: a time in microseconds whatever its precision.
            case(
                "time = \"adaptive_time_microseconds\"",
                SqlType::Time,
                Some(3),
                "14711789000",
                time(14_711_789_000),
            ),
            case(
                "time = \"adaptive_time_microseconds\"",
                SqlType::Timestamp,
                Some(2),
                "1562639337120",
                micros("2019-07-09T02:28:57.12Z"),
            ),
            // connect: milliseconds.
            case(
                "time = \"connect\"",
                SqlType::Time,
                None,
                "14711789",
                time(14_711_789_000),
            ),
            case(
                "time = \"connect\"",
                SqlType::Timestamp,
                None,
                "1562639337123",
                micros("2019-07-09T02:28:57.123Z"),
            ),
            case(
                "time = \"connect\"",
                SqlType::Date,
                None,
                "17424",
                Is(day("2017-09-15")),
            ),
            // microseconds and nanoseconds.
            case(
                "time = \"microseconds\"",
                SqlType::Timestamp,
                Some(0),
                "1562639337000000",
                micros("2019-07-09T02:28:57Z"),
            ),
            case(
                "time = \"microseconds\"",
                SqlType::Time,
                Some(3),
                "14711789000",
                time(14_711_789_000),
            ),
            case(
                "time = \"nanoseconds\"",
                SqlType::Timestamp,
                None,
                "1562639337123456000",
                micros("2019-07-09T02:28:57.123456Z"),
            ),
            case(
                "time = \"nanoseconds\"",
                SqlType::Time,
                None,
                "14711789000000",
                time(14_711_789_000),
            ),
            // isostring: ISO 8601 text, a date and a time of day with a `Z`.
            case(
                "time = \"isostring\"",
                SqlType::Date,
                None,
                r#""2017-09-15Z""#,
                Is(day("2017-09-15")),
            ),
            case(
                "time = \"isostring\"",
                SqlType::Time,
                None,
                r#""04:05:11.789Z""#,
                time(14_711_789_000),
            ),
            case(
                "time = \"isostring\"",
                SqlType::Timestamp,
                None,
                r#""2019-07-09T02:28:57.1Z""#,
                micros("2019-07-09T02:28:57.1Z"),
            ),
            case(
                "time = \"isostring\"",
                SqlType::Time,
                None,
                "14711789",
                Refused("field `v`: must be a time of day as a string"),
            ),
            // interval.handling.mode: numeric microseconds or ISO 8601 text, told apart.
            case(
                "",
                SqlType::Interval,
                None,
                "31557600000000",
                Is(Cell::Interval(Interval {
                    months: 0,
                    days: 0,
                    micros: 31_557_600_000_000,
                })),
            ),
            case(
                "",
                SqlType::Interval,
                None,
                r#""P1Y2M3DT4H5M6.78S""#,
                Is(Cell::Interval(Interval {
                    months: 14,
                    days: 3,
                    micros: 14_706_780_000,
                })),
            ),
        ],
    );
}

#[test]
fn binary_handling_modes_decode_their_text() {
    let bytes = || Is(Cell::Bytes(vec![0, 1, 2, 0xfb, 0xff]));
    run(
        "debezium",
        vec![
            case("", SqlType::Bytea, None, r#""AAEC+/8=""#, bytes()),
            case(
                "binary = \"base64\"",
                SqlType::Bytea,
                None,
                r#""AAEC+/8=""#,
                bytes(),
            ),
            case(
                "binary = \"base64-url-safe\"",
                SqlType::Bytea,
                None,
                r#""AAEC-_8=""#,
                bytes(),
            ),
            case(
                "binary = \"base64-url-safe\"",
                SqlType::Bytea,
                None,
                r#""AAEC+/8=""#,
                Refused("field `v`: must be URL-safe base64 bytes"),
            ),
            case(
                "binary = \"hex\"",
                SqlType::Bytea,
                None,
                r#""000102fbff""#,
                bytes(),
            ),
            case(
                "binary = \"hex\"",
                SqlType::Bytea,
                None,
                r#""000102FBFF""#,
                bytes(),
            ),
            case(
                "binary = \"hex\"",
                SqlType::Bytea,
                None,
                r#""0001g2""#,
                Refused("field `v`: must be hex bytes, got \"0001g2\" (not hexadecimal)"),
            ),
            case(
                "binary = \"hex\"",
                SqlType::Bytea,
                None,
                r#""001""#,
                Refused("field `v`: must be hex bytes"),
            ),
            // "AAEC" is hex too: the declared mode reads it, never a guess.
            case(
                "binary = \"hex\"",
                SqlType::Bytea,
                None,
                r#""AAEC""#,
                Is(Cell::Bytes(vec![0xaa, 0xec])),
            ),
        ],
    );
}

#[test]
fn connect_json_without_schemas_reads_the_same_modes() {
    run(
        "connect-json",
        vec![
            case(
                STRING,
                numeric(Some(20), 2),
                None,
                r#""9975623.66""#,
                Is(Cell::Numeric("9975623.66".into())),
            ),
            case(
                "time = \"connect\"",
                SqlType::Timestamp,
                None,
                "1562639337123",
                Is(at("2019-07-09T02:28:57.123Z")),
            ),
            case(
                "binary = \"hex\"",
                SqlType::Bytea,
                None,
                r#""ff""#,
                Is(Cell::Bytes(vec![255])),
            ),
        ],
    );
}

#[test]
fn a_json_sink_opts_in_to_decimal_strings_per_column() {
    let decoder = sink(
        "json",
        "",
        &numeric(Some(20), 4),
        None,
        ", decimal = \"string\"",
    )
    .unwrap();
    assert_eq!(
        cell(&decoder, "json", r#""12345678901234.5678""#),
        Ok(Cell::Numeric("12345678901234.5678".into()))
    );
    assert_eq!(
        cell(&decoder, "json", "12.5"),
        Ok(Cell::Numeric("12.5".into()))
    );
    assert_eq!(
        cell(&decoder, "json", r#""1.2.3""#),
        Err(
            "field `v`: must be a decimal number (decimal.handling.mode=string), got \"1.2.3\""
                .into()
        )
    );
    // Without the option a string is refused as before; a json sink never reads a mode's form.
    let plain = sink("json", "", &numeric(Some(20), 4), None, "").unwrap();
    assert_eq!(
        cell(&plain, "json", r#""12.5""#),
        Err("field `v`: must be a number, got a string \"12.5\"".into())
    );
    let date = sink("json", "", &SqlType::Date, None, "").unwrap();
    assert!(cell(&date, "json", "17424").is_err());
    // A column's choice overrides the sink's mode.
    let column = sink(
        "debezium",
        "",
        &numeric(None, 0),
        None,
        ", decimal = \"string\"",
    )
    .unwrap();
    assert_eq!(
        cell(&column, "debezium", r#""1.5""#),
        Ok(Cell::Numeric("1.5".into()))
    );
}

#[test]
fn combinations_that_cannot_be_read_are_refused_naming_the_column() {
    let n = numeric(Some(20), 4);
    let precise = sink("debezium", "debezium = { schemas = false }", &n, None, "").unwrap_err();
    assert!(
        precise
            .starts_with("sink `t`, column `v`: field v cannot fit numeric(20,4): without schemas")
            && precise.contains("decimal.handling.mode=precise"),
        "{precise}"
    );
    let array = SqlType::Array(Box::new(numeric(None, 0)));
    assert!(
        sink(
            "connect-json",
            "debezium = { schemas = false }",
            &array,
            None,
            ""
        )
        .is_err()
    );
    // With the schema, or a column that reads strings, precise is fine.
    assert!(sink("debezium", "debezium = { schemas = true }", &n, None, "").is_ok());
    assert!(
        sink(
            "debezium",
            "debezium = { schemas = false }",
            &n,
            None,
            ", decimal = \"string\""
        )
        .is_ok()
    );
    assert!(
        sink(
            "debezium",
            "debezium = { schemas = false }",
            &SqlType::Text,
            None,
            ""
        )
        .is_ok()
    );
    // The block needs a Connect format; `decimal` needs a numeric column and a field.
    let json = sink("json", "debezium = { decimal = \"string\" }", &n, None, "").unwrap_err();
    assert!(
        json.contains("`debezium` declares a Kafka Connect source's value-handling modes"),
        "{json}"
    );
    let text = sink("json", "", &SqlType::Text, None, ", decimal = \"string\"").unwrap_err();
    assert_eq!(
        text,
        "sink `t`, column `v`: rule `decimal` does not apply to text"
    );
    let unknown = sink(
        "debezium",
        "debezium = { decimal = \"exact\" }",
        &n,
        None,
        "",
    )
    .unwrap_err();
    assert!(
        unknown.contains("unknown variant `exact`, expected one of `precise`, `string`, `double`"),
        "{unknown}"
    );
    let typo = sink(
        "debezium",
        "debezium = { decimals = \"string\" }",
        &n,
        None,
        "",
    )
    .unwrap_err();
    assert!(typo.contains("unknown field `decimals`"), "{typo}");
}

/// A change event's array keeps its NULL elements (PostgreSQL arrays hold them, and Debezium
/// writes them as `null`); a plain JSON record's array too, unless its column sets rules on
/// its elements, which a NULL cannot meet.
#[test]
fn a_change_events_array_keeps_its_null_elements() {
    let ints = || SqlType::Array(Box::new(SqlType::Integer));
    let texts = || SqlType::Array(Box::new(SqlType::Text));
    run(
        "debezium",
        vec![
            case(
                "",
                ints(),
                None,
                "[1, null, 3]",
                Is(Cell::Json(serde_json::json!([1, null, 3]))),
            ),
            case(
                "",
                texts(),
                None,
                r#"[null, "a"]"#,
                Is(Cell::Json(serde_json::json!([null, "a"]))),
            ),
        ],
    );
    run(
        "json",
        vec![
            case(
                "",
                ints(),
                None,
                "[1, null, 3]",
                Is(Cell::Json(serde_json::json!([1, null, 3]))),
            ),
            case(
                "",
                texts(),
                None,
                r#"["x", null]"#,
                Is(Cell::Json(serde_json::json!(["x", null]))),
            ),
        ],
    );
    for (rule, reason) in [
        (", min = 0", "field `v[1]`: must be an integer, got null"),
        (
            ", max_length = 3",
            "field `v[1]`: must be a string, got null",
        ),
    ] {
        let sql_type = if rule.contains("min =") {
            ints()
        } else {
            texts()
        };
        let value = if rule.contains("min =") {
            "[1, null, 3]"
        } else {
            r#"["x", null]"#
        };
        let decoder = sink("json", "", &sql_type, None, rule).unwrap();
        let got = cell(&decoder, "json", value).unwrap_err();
        assert!(got.starts_with(reason), "{rule}: {got}");
    }
}
