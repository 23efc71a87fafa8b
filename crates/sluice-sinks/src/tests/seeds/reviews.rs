//! `reviews` (`deploy/sinks/reviews.toml`): every field's rule, edge values on both sides.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::support::{
    Case, DECODERS, bytes, chars, check_optional, check_required, check_rules, counter_cases, err,
    ok, raw, review, string_cases, timestamp_cases, with,
};
use crate::Cell;
use crate::messages::DecodeError;

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

/// The cells of a `reviews` message, in the plan's column order: review_id, application_id
/// (the package name to look up), user_name, score, content, thumbs_up_count, app_version,
/// reviewed_at (`at`), reply_content, replied_at, last_synced_at.
fn decode(message: &Value) -> Result<Vec<Cell>, DecodeError> {
    DECODERS[1].1(Some(&bytes(message)))
}

fn text(text: &str) -> Cell {
    Cell::Text(text.into())
}

#[test]
fn decodes_every_field_with_naive_times_as_utc() {
    let cells = decode(&review()).unwrap();
    let expected = [
        text("gp:AOqpTOE"),
        Cell::Lookup("com.example.app".into()),
        text("Ana"),
        Cell::SmallInt(4),
        text("Works well"),
        Cell::Int(7),
        text("1.2.3"),
        Cell::Timestamp(utc("2026-01-01T10:00:00Z")),
        text("Thanks!"),
        Cell::Timestamp(utc("2026-01-01T12:00:00Z")),
        Cell::Timestamp(utc("2026-01-02T03:04:05.123456Z")),
    ];
    assert_eq!(cells, expected);
}

#[test]
fn absent_optional_fields_are_null_cells() {
    let minimal = json!({"review_id": "r", "package_name": "p", "score": 1,
        "thumbs_up_count": 0, "at": "2026-01-01T00:00:00", "last_synced_at": "2026-01-01T00:00:00"});
    let cells = decode(&minimal).unwrap();
    let nulls: Vec<usize> = (0..cells.len())
        .filter(|i| cells[*i] == Cell::Null)
        .collect();
    assert_eq!(
        nulls,
        [2, 4, 6, 8, 9],
        "user_name, content, app_version, reply_*"
    );
}

#[test]
fn timestamps_are_utc_microseconds() {
    let cases = [
        ("2026-01-02T03:04:05.123456", "2026-01-02T03:04:05.123456Z"),
        ("2026-01-02 03:04:05.123456", "2026-01-02T03:04:05.123456Z"),
        // Past the microsecond, rounded as PostgreSQL rounds (ties to even).
        ("2026-01-02T03:04:05.1234567", "2026-01-02T03:04:05.123457Z"),
        ("2026-01-02T03:04:05.1234564", "2026-01-02T03:04:05.123456Z"),
        (
            "2026-01-02T03:04:05.123456999Z",
            "2026-01-02T03:04:05.123457Z",
        ),
        ("2026-01-02T03:04:05.000000499Z", "2026-01-02T03:04:05Z"),
        ("2026-01-02T03:04:05.9999995Z", "2026-01-02T03:04:06Z"),
        ("2026-01-02T03:04:05+02:00", "2026-01-02T01:04:05Z"),
        ("2026-01-02T03:04:05.5-03:30", "2026-01-02T06:34:05.5Z"),
        ("2026-01-02T00:30:00+01:00", "2026-01-01T23:30:00Z"),
    ];
    for (input, expected) in cases {
        let cells = decode(&with(review(), "last_synced_at", json!(input))).unwrap();
        let Cell::Timestamp(synced) = cells[10] else {
            panic!("{input}: {:?}", cells[10])
        };
        assert_eq!(synced, utc(expected), "{input}");
        assert_eq!(synced.to_rfc3339(), utc(expected).to_rfc3339(), "{input}");
    }
}

#[test]
fn required_and_optional_fields() {
    let decoder = DECODERS[1].1;
    let required = [
        "review_id",
        "package_name",
        "score",
        "thumbs_up_count",
        "at",
        "last_synced_at",
    ];
    check_required(decoder, &review(), &required);
    let optional = [
        "user_name",
        "content",
        "app_version",
        "reply_content",
        "replied_at",
    ];
    check_optional(decoder, &review(), &optional);
}

#[test]
fn field_rules() {
    check_rules(DECODERS[1].1, &review(), rule_cases());
}

/// Every rule case of the mapping, in field order.
pub(super) fn rule_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    cases.extend(string_cases("review_id", 1, Some(255)));
    cases.extend(string_cases("package_name", 1, Some(255)));
    cases.extend(string_cases("user_name", 0, Some(255)));
    cases.extend(score_cases());
    cases.extend(string_cases("content", 0, None));
    cases.extend(counter_cases(
        "thumbs_up_count",
        "INTEGER",
        i64::from(i32::MAX),
    ));
    cases.extend(string_cases("app_version", 0, Some(64)));
    cases.extend(timestamp_cases("at"));
    cases.extend(string_cases("reply_content", 0, None));
    cases.extend(timestamp_cases("replied_at"));
    cases.extend(timestamp_cases("last_synced_at"));
    cases
}

fn score_cases() -> Vec<Case> {
    vec![
        ("score", json!(1), ok()),
        ("score", json!(5), ok()),
        ("score", json!(0), err("must be between 1 and 5, got 0")),
        ("score", json!(6), err("must be between 1 and 5, got 6")),
        ("score", json!(-1), err("must be between 1 and 5, got -1")),
        (
            "score",
            json!(32767),
            err("must be between 1 and 5, got 32767"),
        ),
        (
            "score",
            json!(32768),
            err("out of range for SMALLINT (1 … 5), got 32768"),
        ),
        (
            "score",
            json!(-32769),
            err("out of range for SMALLINT (1 … 5), got -32769"),
        ),
        ("score", raw("4.5"), err("must be an integer, got 4.5")),
        (
            "score",
            raw("4.0"),
            err("must be a JSON integer (no fraction or exponent), got 4.0"),
        ),
        ("score", raw("1e5"), err("out of range for SMALLINT")),
        (
            "score",
            json!("4"),
            err("must be an integer, got a string \"4\""),
        ),
    ]
}

#[test]
fn thumbs_up_count_2_pow_31_overflows_integer() {
    let error = decode(&with(review(), "thumbs_up_count", json!(2_147_483_648_i64))).unwrap_err();
    assert_eq!(
        error.to_string(),
        "field `thumbs_up_count`: out of range for INTEGER (0 … 2147483647), got 2147483648"
    );
    let edge = decode(&with(review(), "thumbs_up_count", json!(i32::MAX))).unwrap();
    assert_eq!(edge[5], Cell::Int(i32::MAX));
}

#[test]
fn nul_in_content_is_rejected() {
    let error = decode(&with(review(), "content", json!("great\u{0}app"))).unwrap_err();
    assert_eq!(
        error.to_string(),
        "field `content`: must not contain U+0000"
    );
    let payload = br#"{"review_id":"r","package_name":"p","score":5,"thumbs_up_count":0,
        "at":"2026-01-01T00:00:00","last_synced_at":"2026-01-01T00:00:00",
        "reply_content":"ok\u0000"}"#;
    let error = DECODERS[1].1(Some(payload)).unwrap_err();
    assert_eq!(error.field(), Some("reply_content"));
}

#[test]
fn long_text_is_kept_whole() {
    let content = chars('ü', 200_000);
    let cells = decode(&with(review(), "content", content.clone())).unwrap();
    assert_eq!(Some(&cells[4]), content.as_str().map(text).as_ref());
}
