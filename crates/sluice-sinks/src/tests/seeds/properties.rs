//! Properties: no input makes a seed decoder panic, and any valid message — every field
//! anywhere within its limits, optional ones absent as `null` — decodes to exactly the cells
//! its values are (text whole, integers and floats exact, timestamps to the microsecond,
//! arrays in order, the package name as the key to look up).

use chrono::{DateTime, SecondsFormat, Utc};
use proptest::collection::{btree_map, vec};
use proptest::option::of;
use proptest::prelude::*;
use serde_json::{Number, Value};
use uuid::Uuid;

use super::support::{
    DECODERS, META, app_stats, bytes, network_metrics, review, seed_decoder, with,
};
use crate::Cell;
use crate::messages::DecodeError;
use sluice_core::pipeline::PipelineKind;

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

/// A field's JSON value and the cell it must decode to.
type Field = (Value, Cell);

fn key(text: String) -> Field {
    (Value::String(text.clone()), Cell::Lookup(text))
}

fn string(text: String) -> Field {
    (Value::String(text.clone()), Cell::Text(text))
}

fn time(at: DateTime<Utc>) -> Field {
    let text = at.to_rfc3339_opts(SecondsFormat::AutoSi, true);
    (Value::String(text), Cell::Timestamp(at))
}

fn float(value: f64) -> Field {
    (Value::from(value), Cell::Float(value))
}

fn bigint(value: i64) -> Field {
    (Value::from(value), Cell::BigInt(value))
}

fn int(value: i32) -> Field {
    (Value::from(value), Cell::Int(value))
}

fn smallint(value: i16) -> Field {
    (Value::from(value), Cell::SmallInt(value))
}

fn boolean(value: bool) -> Field {
    (Value::Bool(value), Cell::Bool(value))
}

fn uuid(value: u128) -> Field {
    let uuid = Uuid::from_u128(value);
    (Value::String(uuid.to_string()), Cell::Uuid(uuid))
}

/// An array field: carried as one JSON array, in order.
fn array<T: Into<Value>>(items: Vec<T>) -> Field {
    let json = Value::Array(items.into_iter().map(Into::into).collect());
    (json.clone(), Cell::Json(json))
}

/// An optional field: `None` is `null`, a NULL cell.
fn optional(field: Option<Field>) -> Field {
    field.unwrap_or((Value::Null, Cell::Null))
}

/// The message of `fields` named by `names` (the mapping's field order is its column order)
/// and the cells it must decode to.
fn message(names: &[&str], fields: Vec<Field>) -> (Value, Vec<Cell>) {
    assert_eq!(names.len(), fields.len());
    let object = names
        .iter()
        .zip(&fields)
        .map(|(name, (json, _))| ((*name).to_owned(), json.clone()))
        .collect();
    (
        Value::Object(object),
        fields.into_iter().map(|(_, cell)| cell).collect(),
    )
}

fn app_stats_message() -> impl Strategy<Value = (Value, Vec<Cell>)> {
    let head = (
        name(255).prop_map(key),
        timestamp().prop_map(time),
        of(text(255).prop_map(string)),
        of(cents(500).prop_map(float)),
        of(counter().prop_map(bigint)),
    );
    let tail = (
        of(counter().prop_map(bigint)),
        of(counter().prop_map(bigint)),
        of(counter().prop_map(bigint)),
        of(vec(counter(), 5).prop_map(array)),
        of(cents(1_000_000).prop_map(float)),
        of(any::<bool>().prop_map(boolean)),
        of(text(64).prop_map(string)),
        of(timestamp().prop_map(time)),
    );
    (head, tail).prop_map(|(head, tail)| {
        let names = [
            "package_name",
            "crawled_at",
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
        ];
        let fields = vec![
            head.0,
            head.1,
            optional(head.2),
            optional(head.3),
            optional(head.4),
            optional(tail.0),
            optional(tail.1),
            optional(tail.2),
            optional(tail.3),
            optional(tail.4),
            optional(tail.5),
            optional(tail.6),
            optional(tail.7),
        ];
        message(&names, fields)
    })
}

fn review_message() -> impl Strategy<Value = (Value, Vec<Cell>)> {
    let head = (
        name(255).prop_map(string),
        name(255).prop_map(key),
        of(text(255).prop_map(string)),
        (1..=5_i16).prop_map(smallint),
        of(text(2_000).prop_map(string)),
    );
    let tail = (
        prop_oneof![0..=i32::MAX, Just(i32::MAX)].prop_map(int),
        of(text(64).prop_map(string)),
        timestamp().prop_map(time),
        of(text(500).prop_map(string)),
        of(timestamp().prop_map(time)),
        timestamp().prop_map(time),
    );
    (head, tail).prop_map(|(head, tail)| {
        let names = [
            "review_id",
            "package_name",
            "user_name",
            "score",
            "content",
            "thumbs_up_count",
            "app_version",
            "at",
            "reply_content",
            "replied_at",
            "last_synced_at",
        ];
        let fields = vec![
            head.0,
            head.1,
            optional(head.2),
            head.3,
            optional(head.4),
            tail.0,
            optional(tail.1),
            tail.2,
            optional(tail.3),
            optional(tail.4),
            tail.5,
        ];
        message(&names, fields)
    })
}

fn network_metrics_message() -> impl Strategy<Value = (Value, Vec<Cell>)> {
    let counter_int = || of(prop_oneof![0..=i32::MAX, Just(i32::MAX)].prop_map(int));
    let head = (
        any::<u128>().prop_map(uuid),
        name(255).prop_map(key),
        timestamp().prop_map(time),
        cents(100_000_000).prop_map(float),
        counter().prop_map(bigint),
        counter().prop_map(bigint),
    );
    let tail = (
        of(counter().prop_map(bigint)),
        of(counter().prop_map(bigint)),
        counter_int(),
        counter_int(),
        counter_int(),
        of(vec(name(253), 0..6).prop_map(array)),
    );
    (head, tail).prop_map(|(head, tail)| {
        let names = [
            "analysis_id",
            "package_name",
            "captured_at",
            "duration_seconds",
            "packet_count",
            "total_bytes",
            "bytes_sent",
            "bytes_received",
            "dns_queries",
            "tls_handshakes",
            "plaintext_http_requests",
            "domains",
        ];
        let fields = vec![
            head.0,
            head.1,
            head.2,
            head.3,
            head.4,
            head.5,
            optional(tail.0),
            optional(tail.1),
            optional(tail.2),
            optional(tail.3),
            optional(tail.4),
            optional(tail.5),
        ];
        message(&names, fields)
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

    /// Only the replaced field can be at fault, and an unknown field never is; when the new
    /// value is accepted, at most its own cell changes (none for an unknown field).
    #[test]
    fn one_replaced_field_is_the_only_reason(pick in any::<prop::sample::Index>(), value in any_json()) {
        for (index, message, fields) in topics() {
            let field = pick.get(&fields);
            let base = DECODERS[index].1(Some(&bytes(&message))).unwrap();
            let result = DECODERS[index].1(Some(&bytes(&with(message, field, value.clone()))));
            match result {
                Ok(cells) => {
                    prop_assert_eq!(cells.len(), base.len());
                    let changed = cells.iter().zip(&base).filter(|(new, old)| new != old).count();
                    let most = usize::from(field != "unknown_field");
                    prop_assert!(changed <= most, "{field}: {changed} cells changed");
                }
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

    /// The one-pass decoder (only the fields read, values moved) gives exactly what decoding
    /// the whole JSON tree gives, whatever one field holds and whatever unknown fields ride
    /// along.
    #[test]
    fn the_one_pass_agrees_with_the_whole_tree(
        pick in any::<prop::sample::Index>(),
        value in any_json(),
        extra in any_json(),
    ) {
        for (index, message, fields) in topics() {
            let kind = PipelineKind::ALL[index];
            let field = pick.get(&fields);
            let mut message = with(message, field, value.clone());
            if let Value::Object(object) = &mut message {
                object.insert("zz_extra".into(), extra.clone());
            }
            let payload = bytes(&message);
            let decoder = seed_decoder(kind);
            prop_assert_eq!(
                decoder.decode(Some(&payload), &META),
                decoder.decode_whole(Some(&payload), &META),
                "{}: {}", kind, message
            );
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
    fn app_stats_decode_to_their_values((message, cells) in app_stats_message()) {
        prop_assert_eq!(DECODERS[0].1(Some(&bytes(&message))), Ok(cells));
    }

    #[test]
    fn reviews_decode_to_their_values((message, cells) in review_message()) {
        prop_assert_eq!(DECODERS[1].1(Some(&bytes(&message))), Ok(cells));
    }

    #[test]
    fn network_metrics_decode_to_their_values((message, cells) in network_metrics_message()) {
        prop_assert_eq!(DECODERS[2].1(Some(&bytes(&message))), Ok(cells));
    }
}
