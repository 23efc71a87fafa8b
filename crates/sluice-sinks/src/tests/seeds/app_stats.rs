//! `app-stats` (`deploy/sinks/app-stats.toml`): every field's rule, edge values on both sides.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::support::{
    Case, DECODERS, app_stats, bytes, chars, check_optional, check_required, check_rules,
    counter_cases, err, err_at, ok, raw, string_cases, timestamp_cases, with,
};
use crate::Cell;
use crate::messages::DecodeError;

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn try_decode(message: &Value) -> Result<Vec<Cell>, DecodeError> {
    DECODERS[0].1(Some(&bytes(message)))
}

/// The cells of a valid `app-stats` message, in the plan's column order: application_id (the
/// package name to look up), crawled_at, title, score, ratings, reviews_count, installs_min,
/// installs_real, histogram (a JSON array), price, free, version, updated_at.
fn decode(message: &Value) -> Vec<Cell> {
    try_decode(message).unwrap()
}

#[test]
fn decodes_every_field() {
    let cells = decode(&app_stats());
    let expected = [
        Cell::Lookup("com.example.app".into()),
        Cell::Timestamp(utc("2026-01-02T03:04:05.123456Z")),
        Cell::Text("Example".into()),
        Cell::Float(4.5),
        Cell::BigInt(1200),
        Cell::BigInt(300),
        Cell::BigInt(100_000),
        Cell::BigInt(123_456),
        Cell::Json(json!([10, 20, 30, 40, 1100])),
        Cell::Float(0.99),
        Cell::Bool(false),
        Cell::Text("1.2.3".into()),
        Cell::Timestamp(utc("2025-12-01T00:00:00Z")),
    ];
    assert_eq!(cells, expected);
}

#[test]
fn required_and_optional_fields() {
    let decoder = DECODERS[0].1;
    check_required(decoder, &app_stats(), &["package_name", "crawled_at"]);
    check_optional(
        decoder,
        &app_stats(),
        &[
            "title",
            "score",
            "ratings",
            "reviews_count",
            "installs_min",
            "installs_real",
            "histogram",
            "price",
            "free",
            "version",
            "updated_at",
        ],
    );
    let minimal = json!({"package_name": "a", "crawled_at": "2026-01-02T03:04:05"});
    let cells = decode(&minimal);
    assert_eq!(cells[0], Cell::Lookup("a".into()));
    assert!(cells[2..].iter().all(|c| *c == Cell::Null), "{cells:?}");
    assert_eq!(cells.len(), 13);
}

#[test]
fn field_rules() {
    check_rules(DECODERS[0].1, &app_stats(), rule_cases());
}

/// Every rule case of the mapping, in field order.
pub(super) fn rule_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    cases.extend(string_cases("package_name", 1, Some(255)));
    cases.extend(timestamp_cases("crawled_at"));
    cases.extend(string_cases("title", 0, Some(255)));
    cases.extend(score_cases());
    for field in ["ratings", "reviews_count", "installs_min", "installs_real"] {
        cases.extend(counter_cases(field, "BIGINT", i64::MAX));
    }
    cases.extend(histogram_cases());
    cases.extend(price_cases());
    cases.extend([
        ("free", json!(true), ok()),
        ("free", json!(false), ok()),
        (
            "free",
            json!("true"),
            err("must be a boolean, got a string \"true\""),
        ),
        ("free", json!(1), err("must be a boolean, got 1")),
        ("free", json!(0), err("must be a boolean, got 0")),
    ]);
    cases.extend(string_cases("version", 0, Some(64)));
    cases.extend(timestamp_cases("updated_at"));
    cases
}

fn score_cases() -> Vec<Case> {
    vec![
        ("score", json!(0), ok()),
        ("score", json!(5), ok()),
        ("score", raw("0.0"), ok()),
        ("score", raw("5.0"), ok()),
        ("score", raw("4.999999"), ok()),
        ("score", raw("-0.0"), ok()),
        (
            "score",
            raw("-0.000001"),
            err("must be between 0 and 5, got -1e-6"),
        ),
        (
            "score",
            raw("5.000001"),
            err("must be between 0 and 5, got 5.000001"),
        ),
        ("score", json!(6), err("must be between 0 and 5, got 6")),
        ("score", json!(-1), err("must be between 0 and 5, got -1")),
        ("score", raw("1e308"), err("must be between 0 and 5")),
        (
            "score",
            raw("18446744073709551616"),
            err("must be between 0 and 5"),
        ),
        (
            "score",
            json!("4.5"),
            err("must be a number, got a string \"4.5\""),
        ),
        ("score", json!(true), err("must be a number, got true")),
    ]
}

fn price_cases() -> Vec<Case> {
    vec![
        ("price", json!(0), ok()),
        ("price", raw("0.0"), ok()),
        ("price", raw("0.01"), ok()),
        ("price", raw("1e300"), ok()),
        ("price", raw("18446744073709551616"), ok()),
        ("price", raw("-0.01"), err("must be at least 0, got -0.01")),
        ("price", json!(-1), err("must be at least 0, got -1")),
        (
            "price",
            json!("0.99"),
            err("must be a number, got a string \"0.99\""),
        ),
        ("price", json!([]), err("must be a number, got an array")),
    ]
}

fn histogram_cases() -> Vec<Case> {
    let max = i64::MAX;
    vec![
        ("histogram", json!([0, 0, 0, 0, 0]), ok()),
        ("histogram", json!([max, max, max, max, max]), ok()),
        (
            "histogram",
            json!([]),
            err("must have exactly 5 elements, got 0"),
        ),
        (
            "histogram",
            json!([1, 2, 3, 4]),
            err("must have exactly 5 elements, got 4"),
        ),
        (
            "histogram",
            json!([1, 2, 3, 4, 5, 6]),
            err("must have exactly 5 elements, got 6"),
        ),
        (
            "histogram",
            json!([1, 2, -1, 4, 5]),
            err_at("histogram[2]", "between 0 and"),
        ),
        (
            "histogram",
            json!([-1, -1, 3, 4, 5]),
            err_at("histogram[0]", "got -1"),
        ),
        (
            "histogram",
            raw("[1, 2, 3, 4, 9223372036854775808]"),
            err_at(
                "histogram[4]",
                "out of range for BIGINT (0 … 9223372036854775807)",
            ),
        ),
        (
            "histogram",
            raw("[1, 2, 3.5, 4, 5]"),
            err_at("histogram[2]", "must be an integer"),
        ),
        (
            "histogram",
            raw("[1, 2, 3, 4.0, 5]"),
            err_at("histogram[3]", "JSON integer"),
        ),
        (
            "histogram",
            json!([1, null, 3, 4, 5]),
            err_at("histogram[1]", "got null"),
        ),
        (
            "histogram",
            json!([1, 2, 3, 4, "5"]),
            err_at("histogram[4]", "got a string \"5\""),
        ),
        (
            "histogram",
            json!("1,2,3,4,5"),
            err("must be an array of integers, got a string"),
        ),
        (
            "histogram",
            json!({"1": 10}),
            err("must be an array of integers, got an object"),
        ),
        (
            "histogram",
            json!(5),
            err("must be an array of integers, got 5"),
        ),
    ]
}

#[test]
fn multi_byte_characters_count_as_one() {
    let name = chars('é', 255);
    let cells = decode(&with(app_stats(), "package_name", name.clone()));
    let Cell::Lookup(package_name) = &cells[0] else {
        panic!("{:?}", cells[0])
    };
    assert_eq!(Some(package_name.as_str()), name.as_str());
    assert_eq!(package_name.len(), 510);
    let error = try_decode(&with(app_stats(), "package_name", chars('a', 256))).unwrap_err();
    assert_eq!(
        error.to_string(),
        "field `package_name`: must be at most 255 characters, got 256"
    );
}

#[test]
fn first_broken_rule_wins_in_field_order() {
    let message = with(
        with(app_stats(), "price", json!(-1)),
        "title",
        chars('x', 300),
    );
    let error = try_decode(&message).unwrap_err();
    assert_eq!(error.field(), Some("title"));
}

#[test]
fn unknown_fields_are_ignored() {
    let message = with(
        with(
            app_stats(),
            "developer",
            json!({"name": "x", "nested": [1, "NaN", null, {"crawled_at": 5}]}),
        ),
        "score_text",
        json!("4.5 stars"),
    );
    assert_eq!(decode(&message), decode(&app_stats()));
}
