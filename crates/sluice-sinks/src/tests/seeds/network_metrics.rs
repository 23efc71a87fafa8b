//! `network-metrics` (`deploy/sinks/network-metrics.toml`): every field's rule, edge values on
//! both sides.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

use super::support::{
    Case, DECODERS, bytes, chars, check_optional, check_required, check_rules, counter_cases, err,
    err_at, network_metrics, ok, raw, string_cases, timestamp_cases, with,
};
use crate::Cell;
use crate::messages::DecodeError;

fn try_decode(message: &Value) -> Result<Vec<Cell>, DecodeError> {
    DECODERS[2].1(Some(&bytes(message)))
}

/// The cells of a valid `network-metrics` message, in the plan's column order: analysis_id,
/// application_id (the package name to look up), captured_at, duration_seconds,
/// packet_count, total_bytes, bytes_sent, bytes_received, dns_queries, tls_handshakes,
/// plaintext_http_requests, domains (a JSON array).
fn decode(message: &Value) -> Vec<Cell> {
    try_decode(message).unwrap()
}

#[test]
fn decodes_every_field() {
    let cells = decode(&network_metrics());
    let expected = [
        Cell::Uuid(Uuid::from_u128(0x67e5_5044_10b1_426f_9247_bb68_0e5f_e0c8)),
        Cell::Lookup("com.example.app".into()),
        Cell::Timestamp(
            DateTime::parse_from_rfc3339("2026-01-02T03:04:05Z")
                .unwrap()
                .with_timezone(&Utc),
        ),
        Cell::Float(60.5),
        Cell::BigInt(1000),
        Cell::BigInt(1_048_576),
        Cell::BigInt(48_576),
        Cell::BigInt(1_000_000),
        Cell::Int(12),
        Cell::Int(8),
        Cell::Int(1),
        Cell::Json(json!(["example.com", "cdn.example.com"])),
    ];
    assert_eq!(cells, expected);
}

#[test]
fn required_and_optional_fields() {
    let decoder = DECODERS[2].1;
    let required = [
        "analysis_id",
        "package_name",
        "captured_at",
        "duration_seconds",
        "packet_count",
        "total_bytes",
    ];
    check_required(decoder, &network_metrics(), &required);
    let optional = [
        "bytes_sent",
        "bytes_received",
        "dns_queries",
        "tls_handshakes",
        "plaintext_http_requests",
        "domains",
    ];
    check_optional(decoder, &network_metrics(), &optional);
}

#[test]
fn field_rules() {
    check_rules(DECODERS[2].1, &network_metrics(), rule_cases());
}

/// Every rule case of the mapping, in field order.
pub(super) fn rule_cases() -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    cases.extend(uuid_cases());
    cases.extend(string_cases("package_name", 1, Some(255)));
    cases.extend(timestamp_cases("captured_at"));
    cases.extend(duration_cases());
    for field in [
        "packet_count",
        "total_bytes",
        "bytes_sent",
        "bytes_received",
    ] {
        cases.extend(counter_cases(field, "BIGINT", i64::MAX));
    }
    for field in ["dns_queries", "tls_handshakes", "plaintext_http_requests"] {
        cases.extend(counter_cases(field, "INTEGER", i64::from(i32::MAX)));
    }
    cases.extend(domain_cases());
    cases
}

fn uuid_cases() -> Vec<Case> {
    let field = "analysis_id";
    vec![
        (field, json!("67e55044-10b1-426f-9247-bb680e5fe0c8"), ok()),
        (field, json!("67E55044-10B1-426F-9247-BB680E5FE0C8"), ok()),
        (field, json!("67e5504410b1426f9247bb680e5fe0c8"), ok()),
        (field, json!("00000000-0000-0000-0000-000000000000"), ok()),
        (
            field,
            json!("not-a-uuid"),
            err("must be a UUID, got \"not-a-uuid\""),
        ),
        (field, json!(""), err("must be a UUID, got \"\"")),
        (
            field,
            json!("67e55044-10b1-426f-9247-bb680e5fe0c"),
            err("must be a UUID"),
        ),
        (
            field,
            json!("67e55044-10b1-426f-9247-bb680e5fe0c8a"),
            err("must be a UUID"),
        ),
        (
            field,
            json!("g7e55044-10b1-426f-9247-bb680e5fe0c8"),
            err("must be a UUID"),
        ),
        (
            field,
            json!("67e55044-10b1-426f-9247-bb680e5fe0c\u{0}"),
            err("must be a UUID"),
        ),
        (
            field,
            chars('x', 100),
            err(format!("must be a UUID, got \"{}\"…", "x".repeat(40))),
        ),
        (field, json!(42), err("must be a UUID string, got 42")),
    ]
}

fn duration_cases() -> Vec<Case> {
    let field = "duration_seconds";
    vec![
        (field, json!(0), ok()),
        (field, raw("0.0"), ok()),
        (field, raw("0.001"), ok()),
        (field, json!(86400), ok()),
        (field, raw("1e300"), ok()),
        (field, raw("-0.001"), err("must be at least 0, got -0.001")),
        (field, json!(-1), err("must be at least 0, got -1")),
        (
            field,
            json!("60"),
            err("must be a number, got a string \"60\""),
        ),
        (field, json!(false), err("must be a number, got false")),
    ]
}

fn domain_cases() -> Vec<Case> {
    let field = "domains";
    let max_domain = Value::String("a".repeat(253));
    let too_long = Value::String("a".repeat(254));
    let many = |n: usize| Value::Array(vec![json!("example.com"); n]);
    vec![
        (field, json!([]), ok()),
        (field, json!(["a"]), ok()),
        (field, json!([max_domain.clone()]), ok()),
        (
            field,
            json!(["xn--bcher-kva.example", "bücher.example"]),
            ok(),
        ),
        (field, many(10_000), ok()),
        (
            field,
            many(10_001),
            err("must have at most 10000 entries, got 10001"),
        ),
        (
            field,
            json!(["a", ""]),
            err_at("domains[1]", "must not be empty"),
        ),
        (
            field,
            json!([too_long]),
            err_at("domains[0]", "must be at most 253 characters, got 254"),
        ),
        (
            field,
            json!(["a", "b\u{0}"]),
            err_at("domains[1]", "must not contain U+0000"),
        ),
        (
            field,
            json!(["a", null]),
            err_at("domains[1]", "must be a string, got null"),
        ),
        (
            field,
            json!(["a", 5]),
            err_at("domains[1]", "must be a string, got 5"),
        ),
        (
            field,
            json!("example.com"),
            err("must be an array of strings, got a string"),
        ),
        (
            field,
            json!({"example.com": 1}),
            err("must be an array of strings, got an object"),
        ),
    ]
}

#[test]
fn domain_errors_name_the_index() {
    let mut domains = vec![json!("example.com"); 20];
    domains[12] = json!("");
    let message = with(network_metrics(), "domains", Value::Array(domains));
    let error = try_decode(&message).unwrap_err();
    assert_eq!(error.to_string(), "field `domains[12]`: must not be empty");
    assert_eq!(error.field(), Some("domains[12]"));
}

#[test]
fn bigint_overflow_at_2_pow_63() {
    let message = with(network_metrics(), "total_bytes", raw("9223372036854775808"));
    let error = try_decode(&message).unwrap_err();
    assert_eq!(
        error.to_string(),
        "field `total_bytes`: out of range for BIGINT (0 … 9223372036854775807), \
         got 9223372036854775808"
    );
    let edge = decode(&with(network_metrics(), "total_bytes", json!(i64::MAX)));
    assert_eq!(edge[5], Cell::BigInt(i64::MAX));
}
