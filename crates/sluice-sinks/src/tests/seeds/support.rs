//! Shared helpers: the seed decoders, valid messages, field replacement and rule tables.

use std::sync::OnceLock;

use serde_json::{Value, json};

use super::tables::tables;
use crate::messages::DecodeError;
use crate::{Cell, RecordMeta, SinkDecoder, plan_sink};
use sluice_core::PipelineKind;

/// A seed decoder: a record value (`None`: a tombstone) → its cells, in the plan's column
/// order.
pub(super) type Decode = fn(Option<&[u8]>) -> Result<Vec<Cell>, DecodeError>;

/// What the seed payloads carry besides their value (no seed column reads it).
pub(super) const META: RecordMeta<'static> = RecordMeta {
    topic: "seed",
    partition: 0,
    offset: 0,
    timestamp: None,
    key: None,
    headers: &[],
};

/// The seed mapping of `kind` planned against [`tables`], built once.
pub(super) fn seed_decoder(kind: PipelineKind) -> &'static SinkDecoder {
    static DECODERS: OnceLock<Vec<(PipelineKind, SinkDecoder)>> = OnceLock::new();
    let decoders = DECODERS.get_or_init(|| {
        let tables = tables();
        PipelineKind::ALL
            .into_iter()
            .map(|kind| {
                let sink = crate::seed_sink(kind).unwrap_or_else(|e| panic!("{kind}: {e}"));
                let plan = plan_sink(&sink, "storage-consumer", &tables)
                    .unwrap_or_else(|e| panic!("{kind}: {e:?}"));
                (kind, SinkDecoder::new(&sink, &plan))
            })
            .collect()
    });
    decoders
        .iter()
        .find_map(|(k, decoder)| (*k == kind).then_some(decoder))
        .unwrap_or_else(|| panic!("{kind}: no seed decoder"))
}

/// The three seed decoders, by topic.
pub(super) const DECODERS: [(&str, Decode); 3] = [
    ("app-stats", |payload| {
        seed_decoder(PipelineKind::AppStats).decode(payload, &META)
    }),
    ("reviews", |payload| {
        seed_decoder(PipelineKind::Reviews).decode(payload, &META)
    }),
    ("network-metrics", |payload| {
        seed_decoder(PipelineKind::NetworkMetrics).decode(payload, &META)
    }),
];

/// Whether `decode` accepts `payload`, or its reason (the cells thrown away).
pub(super) fn accepts(decode: Decode, payload: &[u8]) -> Result<(), DecodeError> {
    decode(Some(payload)).map(drop)
}

/// A valid `app-stats` message with every field set.
pub(super) fn app_stats() -> Value {
    json!({
        "package_name": "com.example.app",
        "crawled_at": "2026-01-02T03:04:05.123456Z",
        "title": "Example",
        "score": 4.5,
        "ratings": 1200,
        "reviews_count": 300,
        "installs_min": 100000,
        "installs_real": 123456,
        "histogram": [10, 20, 30, 40, 1100],
        "price": 0.99,
        "free": false,
        "version": "1.2.3",
        "updated_at": "2025-12-01T00:00:00Z"
    })
}

/// A valid `reviews` message with every field set.
pub(super) fn review() -> Value {
    json!({
        "review_id": "gp:AOqpTOE",
        "package_name": "com.example.app",
        "user_name": "Ana",
        "score": 4,
        "content": "Works well",
        "thumbs_up_count": 7,
        "app_version": "1.2.3",
        "at": "2026-01-01T10:00:00",
        "reply_content": "Thanks!",
        "replied_at": "2026-01-01T12:00:00",
        "last_synced_at": "2026-01-02T03:04:05.123456"
    })
}

/// A valid `network-metrics` message with every field set.
pub(super) fn network_metrics() -> Value {
    json!({
        "analysis_id": "67e55044-10b1-426f-9247-bb680e5fe0c8",
        "package_name": "com.example.app",
        "captured_at": "2026-01-02T03:04:05Z",
        "duration_seconds": 60.5,
        "packet_count": 1000,
        "total_bytes": 1048576,
        "bytes_sent": 48576,
        "bytes_received": 1000000,
        "dns_queries": 12,
        "tls_handshakes": 8,
        "plaintext_http_requests": 1,
        "domains": ["example.com", "cdn.example.com"]
    })
}

/// `message` with `field` set to `value`.
pub(super) fn with(mut message: Value, field: &str, value: Value) -> Value {
    if let Value::Object(object) = &mut message {
        object.insert(field.to_string(), value);
    }
    message
}

/// `message` without `field`.
pub(super) fn without(mut message: Value, field: &str) -> Value {
    if let Value::Object(object) = &mut message {
        object.remove(field);
    }
    message
}

/// The payload bytes of a message.
pub(super) fn bytes(message: &Value) -> Vec<u8> {
    serde_json::to_vec(message).unwrap()
}

/// A JSON value from its text (for numbers `json!` cannot write, such as `5.0` or `1e30`).
pub(super) fn raw(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

/// `n` copies of `c` as a JSON string.
pub(super) fn chars(c: char, n: usize) -> Value {
    Value::String(std::iter::repeat_n(c, n).collect())
}

/// What a rule case expects: the value is accepted, or rejected naming a field with a reason.
#[derive(Debug, Clone)]
pub(super) enum Expect {
    /// Decoding succeeds.
    Ok,
    /// Decoding fails with [`DecodeError::Invalid`] whose reason contains `reason`, on the
    /// field itself or, when `at` is given, on that element (`histogram[2]`).
    Err { at: Option<String>, reason: String },
}

/// The value is accepted.
pub(super) fn ok() -> Expect {
    Expect::Ok
}

/// The value is rejected on its own field with a reason containing `reason`.
pub(super) fn err(reason: impl Into<String>) -> Expect {
    Expect::Err {
        at: None,
        reason: reason.into(),
    }
}

/// The value is rejected on the element `at` with a reason containing `reason`.
pub(super) fn err_at(at: impl Into<String>, reason: impl Into<String>) -> Expect {
    Expect::Err {
        at: Some(at.into()),
        reason: reason.into(),
    }
}

/// One rule case: set `field` to `value` in a valid message and decode.
pub(super) type Case = (&'static str, Value, Expect);

/// Runs every case against `decode`, starting from the valid `base` message.
pub(super) fn check_rules(decode: Decode, base: &Value, cases: Vec<Case>) {
    assert_eq!(
        accepts(decode, &bytes(base)),
        Ok(()),
        "the base message must be valid"
    );
    for (field, value, expect) in cases {
        let shown: String = value.to_string().chars().take(60).collect();
        let result = accepts(decode, &bytes(&with(base.clone(), field, value)));
        let (at, reason) = match expect {
            Expect::Ok => {
                assert_eq!(result, Ok(()), "{field} = {shown} should be accepted");
                continue;
            }
            Expect::Err { at, reason } => (at.unwrap_or_else(|| field.to_string()), reason),
        };
        let error = match result {
            Err(error) => error,
            Ok(()) => panic!("{field} = {shown} should be rejected with {reason:?}"),
        };
        assert!(
            matches!(error, DecodeError::Invalid { .. }),
            "{field} = {shown}: expected Invalid, got {error:?}"
        );
        assert_eq!(
            error.field(),
            Some(at.as_str()),
            "{field} = {shown}: {error}"
        );
        let text = error.to_string();
        assert!(
            text.contains(&reason),
            "{field} = {shown}: {text:?} lacks {reason:?}"
        );
        assert!(text.starts_with(&format!("field `{at}`: ")), "{text}");
    }
}

/// Cases for a string of `min..=max` characters (`max = None`: TEXT, no limit).
pub(super) fn string_cases(field: &'static str, min: usize, max: Option<usize>) -> Vec<Case> {
    let mut cases: Vec<Case> = vec![
        (field, chars('a', min.max(1)), ok()),
        (field, json!("a\u{0}b"), err("must not contain U+0000")),
        (field, json!("\u{0}"), err("must not contain U+0000")),
        (field, json!(5), err("must be a string, got 5")),
        (field, json!(true), err("must be a string, got true")),
        (field, json!(["a"]), err("must be a string, got an array")),
        (
            field,
            json!({"a": 1}),
            err("must be a string, got an object"),
        ),
        (field, json!("with \"quotes\" and ünïcødé 🦀"), ok()),
    ];
    cases.push(match min {
        0 => (field, json!(""), ok()),
        _ => (field, json!(""), err("must not be empty")),
    });
    match max {
        Some(max) => {
            let too_long = format!("must be at most {max} characters, got {}", max + 1);
            cases.extend([
                (field, chars('a', max), ok()),
                (field, chars('é', max), ok()),
                (field, chars('🦀', max), ok()),
                (field, chars('a', max + 1), err(too_long.clone())),
                (field, chars('é', max + 1), err(too_long.clone())),
                (
                    field,
                    chars('a', max * 4),
                    err(format!("at most {max} characters")),
                ),
            ]);
        }
        None => cases.push((field, chars('é', 100_000), ok())),
    }
    cases
}

/// Cases for an integer in `0 ..= max` where `max` is the top of the SQL type `sql`.
pub(super) fn counter_cases(field: &'static str, sql: &str, max: i64) -> Vec<Case> {
    let out_of_range = format!("out of range for {sql} (0 … {max}), got");
    let mut cases: Vec<Case> = vec![
        (field, json!(0), ok()),
        (field, json!(1), ok()),
        (field, json!(max), ok()),
        (
            field,
            json!(-1),
            err(format!("must be between 0 and {max}, got -1")),
        ),
        (
            field,
            raw("9223372036854775808"),
            err(format!("{out_of_range} 9223372036854775808")),
        ),
        (
            field,
            raw("18446744073709551615"),
            err(out_of_range.clone()),
        ),
        (
            field,
            raw("18446744073709551616"),
            err(out_of_range.clone()),
        ),
        (field, raw("1e30"), err(format!("{out_of_range} 1e+30"))),
        (field, raw("-1e30"), err(out_of_range.clone())),
        (field, raw("5.5"), err("must be an integer, got 5.5")),
        (field, raw("0.1"), err("must be an integer, got 0.1")),
        (
            field,
            raw("5.0"),
            err("must be a JSON integer (no fraction or exponent), got 5.0"),
        ),
        (
            field,
            raw("1e3"),
            err("must be a JSON integer (no fraction or exponent), got 1000.0"),
        ),
        // serde_json reads `-0` as -0.0; it is the JSON integer zero.
        (field, raw("-0"), ok()),
        (
            field,
            json!("5"),
            err("must be an integer, got a string \"5\""),
        ),
        (field, json!(true), err("must be an integer, got true")),
        (field, json!([5]), err("must be an integer, got an array")),
    ];
    if max < i64::MAX {
        let first_out = max + 1;
        cases.push((
            field,
            json!(first_out),
            err(format!("{out_of_range} {first_out}")),
        ));
        cases.push((field, json!(i64::MAX), err(out_of_range.clone())));
        cases.push((field, json!(i64::MIN), err(out_of_range.clone())));
    } else {
        cases.push((
            field,
            json!(i64::MIN),
            err(format!("must be between 0 and {max}, got")),
        ));
    }
    cases
}

/// Cases for a timestamp.
pub(super) fn timestamp_cases(field: &'static str) -> Vec<Case> {
    let invalid = "must be an RFC 3339 timestamp, got";
    vec![
        (field, json!("2026-01-02T03:04:05Z"), ok()),
        (field, json!("2026-01-02T03:04:05.123456789+05:30"), ok()),
        (field, json!("2026-01-02T03:04:05"), ok()),
        (field, json!("2026-01-02 03:04:05.5"), ok()),
        (
            field,
            json!("2026-01-02"),
            err(format!("{invalid} \"2026-01-02\"")),
        ),
        (field, json!("2026-13-02T03:04:05Z"), err(invalid)),
        (field, json!("yesterday"), err(invalid)),
        (field, json!(""), err(invalid)),
        (field, json!("2026-01-02T03:04:05\u{0}"), err(invalid)),
        (
            field,
            chars('9', 100),
            err(format!("{invalid} \"{}\"…", "9".repeat(40))),
        ),
        (
            field,
            json!(1767323045),
            err("must be an RFC 3339 timestamp string, got 1767323045"),
        ),
        (
            field,
            json!({}),
            err("must be an RFC 3339 timestamp string, got an object"),
        ),
    ]
}

/// Every required field, absent and `null`, is [`DecodeError::Missing`] naming it.
pub(super) fn check_required(decode: Decode, base: &Value, required: &[&'static str]) {
    for &field in required {
        for message in [
            without(base.clone(), field),
            with(base.clone(), field, Value::Null),
        ] {
            match decode(Some(&bytes(&message))) {
                Err(DecodeError::Missing { field: missing, .. }) => {
                    assert_eq!(missing, field, "{message}")
                }
                other => panic!("{field} missing or null: expected Missing, got {other:?}"),
            }
        }
    }
}

/// Every optional field, absent or `null`, is accepted.
pub(super) fn check_optional(decode: Decode, base: &Value, optional: &[&str]) {
    for &field in optional {
        assert_eq!(
            accepts(decode, &bytes(&without(base.clone(), field))),
            Ok(()),
            "{field} absent"
        );
        let null = with(base.clone(), field, Value::Null);
        assert_eq!(accepts(decode, &bytes(&null)), Ok(()), "{field} null");
    }
    let mut bare = base.clone();
    for &field in optional {
        bare = without(bare, field);
    }
    assert_eq!(
        accepts(decode, &bytes(&bare)),
        Ok(()),
        "all optional fields absent"
    );
}
