//! Properties: no input makes a decoder panic, and valid messages round-trip.

use chrono::{DateTime, Utc};
use proptest::collection::{btree_map, vec};
use proptest::option::of;
use proptest::prelude::*;
use serde_json::{Number, Value};
use uuid::Uuid;

use super::support::{DECODERS, app_stats, bytes, network_metrics, review, with};
use crate::messages::{
    AppStats, DecodeError, NetworkMetrics, Review, decode_app_stats, decode_network_metrics,
    decode_review,
};

/// Any JSON value, with the numbers and strings most likely to break a rule.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|float| Number::from_f64(float).map_or(Value::Null, Value::Number)),
        prop::sample::select(vec![
            -1_i64,
            0,
            1,
            5,
            6,
            253,
            255,
            256,
            i64::from(i16::MAX) + 1,
            i64::from(i32::MAX) + 1,
            i64::MAX,
        ])
        .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "[0-9T:. +Z\\-]{0,40}".prop_map(Value::String),
        "[a-f0-9\\-{}]{30,40}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..8).prop_map(Value::Array),
            btree_map(any::<String>(), inner, 0..8)
                .prop_map(|object| Value::Object(object.into_iter().collect())),
        ]
    })
}

/// Text that is JSON-shaped often enough to reach the decoders' field rules.
fn json_ish() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        prop::sample::select(vec![
            "{",
            "}",
            "[",
            "]",
            ":",
            ",",
            " ",
            "\n",
            "\"",
            "\\",
            "null",
            "true",
            "NaN",
            "-Infinity",
            "1e999",
            "0",
            "-1",
            "5.5",
            "5.0",
            "9223372036854775808",
            "\"package_name\"",
            "\"score\"",
            "\"crawled_at\"",
            "\"review_id\"",
            "\"histogram\"",
            "\"domains\"",
            "\"analysis_id\"",
            "\"packageName\"",
            "\"2026-01-02T03:04:05\"",
            "\"\\u0000\"",
            "\"\\ud800\"",
            "\"é\"",
        ])
        .prop_map(str::to_string),
        "[ -~]{0,8}",
    ];
    vec(token, 0..48).prop_map(|tokens| tokens.concat())
}

/// The fields of each topic's valid message, plus one the decoders do not know.
fn topics() -> [(usize, Value, Vec<String>); 3] {
    [app_stats(), review(), network_metrics()]
        .into_iter()
        .enumerate()
        .map(|(index, message)| {
            let mut fields: Vec<String> = message
                .as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            fields.push("unknown_field".into());
            (index, message, fields)
        })
        .collect::<Vec<_>>()
        .try_into()
        .unwrap()
}

fn timestamp() -> impl Strategy<Value = DateTime<Utc>> {
    // Years 0001 to 9999, the range RFC 3339 can write, to the microsecond.
    (-62_135_596_800_000_000_i64..=253_402_300_799_999_999)
        .prop_map(|micros| DateTime::from_timestamp_micros(micros).unwrap())
}

/// A finite float with at most two decimals, which serde_json parses back exactly.
fn cents(max: u32) -> impl Strategy<Value = f64> {
    (0..=max).prop_map(|cents| f64::from(cents) / 100.0)
}

fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[^\\x00]{{0,{max}}}")).unwrap()
}

fn name(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[^\\x00]{{1,{max}}}")).unwrap()
}

fn counter() -> impl Strategy<Value = i64> {
    prop_oneof![0..=i64::MAX, 0..=1_000_000_i64, Just(i64::MAX)]
}

fn app_stats_value() -> impl Strategy<Value = AppStats> {
    let head = (
        name(255),
        timestamp(),
        of(text(255)),
        of(cents(500)),
        of(counter()),
    );
    let tail = (
        of(counter()),
        of(counter()),
        of(counter()),
        of(vec(counter(), 5)),
        of(cents(1_000_000)),
        of(any::<bool>()),
        of(text(64)),
        of(timestamp()),
    );
    (head, tail).prop_map(|(head, tail)| AppStats {
        package_name: head.0,
        crawled_at: head.1,
        title: head.2,
        score: head.3,
        ratings: head.4,
        reviews_count: tail.0,
        installs_min: tail.1,
        installs_real: tail.2,
        histogram: tail.3,
        price: tail.4,
        free: tail.5,
        version: tail.6,
        updated_at: tail.7,
    })
}

fn review_value() -> impl Strategy<Value = Review> {
    let head = (
        name(255),
        name(255),
        of(text(255)),
        1..=5_i16,
        of(text(2_000)),
    );
    let tail = (
        prop_oneof![0..=i32::MAX, Just(i32::MAX)],
        of(text(64)),
        timestamp(),
        of(text(500)),
        of(timestamp()),
        timestamp(),
    );
    (head, tail).prop_map(|(head, tail)| Review {
        review_id: head.0,
        package_name: head.1,
        user_name: head.2,
        score: head.3,
        content: head.4,
        thumbs_up_count: tail.0,
        app_version: tail.1,
        at: tail.2,
        reply_content: tail.3,
        replied_at: tail.4,
        last_synced_at: tail.5,
    })
}

fn network_metrics_value() -> impl Strategy<Value = NetworkMetrics> {
    let int = || of(prop_oneof![0..=i32::MAX, Just(i32::MAX)]);
    let head = (
        any::<u128>(),
        name(255),
        timestamp(),
        cents(100_000_000),
        counter(),
        counter(),
    );
    let tail = (
        of(counter()),
        of(counter()),
        int(),
        int(),
        int(),
        of(vec(name(253), 0..6)),
    );
    (head, tail).prop_map(|(head, tail)| NetworkMetrics {
        analysis_id: Uuid::from_u128(head.0),
        package_name: head.1,
        captured_at: head.2,
        duration_seconds: head.3,
        packet_count: head.4,
        total_bytes: head.5,
        bytes_sent: tail.0,
        bytes_received: tail.1,
        dns_queries: tail.2,
        tls_handshakes: tail.3,
        plaintext_http_requests: tail.4,
        domains: tail.5,
    })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(payload in vec(any::<u8>(), 0..512)) {
        for (_, decode) in DECODERS {
            let _ = decode(Some(&payload));
        }
    }

    #[test]
    fn json_ish_text_never_panics(text in json_ish()) {
        for (_, decode) in DECODERS {
            let _ = decode(Some(text.as_bytes()));
        }
    }

    #[test]
    fn arbitrary_json_never_panics(value in any_json()) {
        for (_, decode) in DECODERS {
            let result = decode(Some(&bytes(&value)));
            if !value.is_object() {
                let not_an_object = matches!(result, Err(DecodeError::NotAnObject { .. }));
                prop_assert!(not_an_object, "{:?}", result);
            }
        }
    }

    /// Only the replaced field can be at fault, and an unknown field never is.
    #[test]
    fn one_replaced_field_is_the_only_reason(pick in any::<prop::sample::Index>(), value in any_json()) {
        for (index, message, fields) in topics() {
            let field = pick.get(&fields);
            let result = DECODERS[index].1(Some(&bytes(&with(message, field, value.clone()))));
            match result {
                Ok(()) => {}
                Err(error) => {
                    let at = error.field().unwrap_or_default();
                    let element = at.strip_prefix(field.as_str()).is_some_and(|rest| rest.starts_with('['));
                    prop_assert!(at == field || element, "{field}: {error}");
                    prop_assert!(field != "unknown_field");
                    let prefix = format!("field `{field}");
                    prop_assert!(error.to_string().starts_with(&prefix), "{}", error);
                }
            }
        }
    }

    #[test]
    fn truncated_messages_are_invalid_json(cut in any::<prop::sample::Index>()) {
        for (index, message, _) in topics() {
            let payload = bytes(&message);
            let payload = &payload[..cut.index(payload.len())];
            let result = DECODERS[index].1(Some(payload));
            prop_assert!(matches!(result, Err(DecodeError::InvalidJson { .. })), "{result:?}");
        }
    }

    #[test]
    fn app_stats_round_trip(stats in app_stats_value()) {
        let payload = serde_json::to_vec(&stats).unwrap();
        prop_assert_eq!(decode_app_stats(Some(&payload)), Ok(stats));
    }

    #[test]
    fn reviews_round_trip(review in review_value()) {
        let payload = serde_json::to_vec(&review).unwrap();
        prop_assert_eq!(decode_review(Some(&payload)), Ok(review));
    }

    #[test]
    fn network_metrics_round_trip(metrics in network_metrics_value()) {
        let payload = serde_json::to_vec(&metrics).unwrap();
        prop_assert_eq!(decode_network_metrics(Some(&payload)), Ok(metrics));
    }
}

#[test]
fn serialized_shape_is_the_wire_shape() {
    let payload =
        serde_json::to_value(decode_network_metrics(Some(&bytes(&network_metrics()))).unwrap())
            .unwrap();
    assert_eq!(
        payload["analysis_id"],
        "67e55044-10b1-426f-9247-bb680e5fe0c8"
    );
    assert_eq!(payload["captured_at"], "2026-01-02T03:04:05Z");
    let review = decode_review(Some(&bytes(&review()))).unwrap();
    let payload = serde_json::to_value(review).unwrap();
    assert_eq!(payload["last_synced_at"], "2026-01-02T03:04:05.123456Z");
    assert_eq!(payload["at"], "2026-01-01T10:00:00Z");
    assert_eq!(payload["user_name"], "Ana");
}
