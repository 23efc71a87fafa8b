//! The seed mappings (`deploy/sinks/*.toml`) decode exactly as the built-in decoders: every
//! rule case of the three topics' tables, every field absent and null, the legacy camelCase
//! hint and the payload-level poison give the same result and the same [`DecodeError`] —
//! hence the same dead-letter reason. The table shapes are written here as the migrations
//! create them (`crates/sluice-postgres/tests/sinks.rs` checks the plans on the live
//! catalog).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::support::{DECODERS, Decode, app_stats, bytes, network_metrics, review, with, without};
use super::{
    app_stats as app_stats_cases, network_metrics as metrics_cases, reviews as review_cases,
};
use crate::sinks::{
    Cell, ColumnShape, RecordMeta, SinkDecoder, SqlType, TableShape, parse_sinks, plan_sink,
};

fn column(name: &str, sql_type: SqlType, not_null: bool) -> ColumnShape {
    ColumnShape {
        name: name.into(),
        sql_type,
        not_null,
        has_default: false,
        writable: true,
        time_precision: None,
    }
}

fn defaulted(name: &str, sql_type: SqlType) -> ColumnShape {
    ColumnShape {
        has_default: true,
        ..column(name, sql_type, true)
    }
}

/// The seed tables as `migrations/0001`–`0003` and the applications fixture create them.
fn tables() -> HashMap<String, TableShape> {
    use SqlType::{BigInt, Boolean, Double, Integer, SmallInt, Text, TimestampTz, Uuid, Varchar};
    let table = |name: &str, columns: Vec<ColumnShape>, key: &[&str]| {
        let key = key.iter().map(|k| (*k).to_owned()).collect();
        let shape = TableShape {
            name: name.into(),
            columns,
            unique_keys: vec![vec!["id".into()], key],
            nulls_not_distinct_keys: Vec::new(),
        };
        (name.to_owned(), shape)
    };
    HashMap::from([
        table(
            "apps_registry_application",
            vec![
                defaulted("id", BigInt),
                column("package_name", Varchar(Some(255)), true),
                defaulted("is_active", Boolean),
            ],
            &["package_name"],
        ),
        table(
            "reviews",
            vec![
                defaulted("id", BigInt),
                column("review_id", Varchar(Some(255)), true),
                column("application_id", BigInt, true),
                column("user_name", Varchar(Some(255)), false),
                column("score", SmallInt, true),
                column("content", Text, false),
                column("thumbs_up_count", Integer, true),
                column("app_version", Varchar(Some(64)), false),
                column("reviewed_at", TimestampTz, true),
                column("reply_content", Text, false),
                column("replied_at", TimestampTz, false),
                column("last_synced_at", TimestampTz, true),
                defaulted("first_seen_at", TimestampTz),
                column("sentiment", Varchar(Some(32)), false),
            ],
            &["review_id"],
        ),
        table(
            "app_stats",
            vec![
                defaulted("id", BigInt),
                column("application_id", BigInt, true),
                column("crawled_at", TimestampTz, true),
                column("title", Varchar(Some(255)), false),
                column("score", Double, false),
                column("ratings", BigInt, false),
                column("reviews_count", BigInt, false),
                column("installs_min", BigInt, false),
                column("installs_real", BigInt, false),
                column("histogram", SqlType::Array(Box::new(BigInt)), false),
                column("price", Double, false),
                column("free", Boolean, false),
                column("version", Varchar(Some(64)), false),
                column("updated_at", TimestampTz, false),
                defaulted("inserted_at", TimestampTz),
            ],
            &["application_id", "crawled_at"],
        ),
        table(
            "network_metrics",
            vec![
                defaulted("id", BigInt),
                column("analysis_id", Uuid, true),
                column("application_id", BigInt, true),
                column("captured_at", TimestampTz, true),
                column("duration_seconds", Double, true),
                column("packet_count", BigInt, true),
                column("total_bytes", BigInt, true),
                column("bytes_sent", BigInt, false),
                column("bytes_received", BigInt, false),
                column("dns_queries", Integer, false),
                column("tls_handshakes", Integer, false),
                column("plaintext_http_requests", Integer, false),
                column("domains", SqlType::Array(Box::new(Text)), false),
                defaulted("inserted_at", TimestampTz),
            ],
            &["analysis_id"],
        ),
    ])
}

fn decoder(seed: &str) -> SinkDecoder {
    let path = format!(
        "{}/../../deploy/sinks/{seed}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let sinks = parse_sinks(&path, &text).unwrap();
    let plan = plan_sink(&sinks[0], "storage-consumer", &tables()).unwrap();
    SinkDecoder::new(&sinks[0], &plan)
}

const META: RecordMeta<'static> = RecordMeta {
    topic: "t",
    partition: 0,
    offset: 0,
    timestamp: None,
    key: None,
};

/// Every payload the built-in tests throw at `base`'s topic, and then some.
fn payloads(base: &Value, cases: Vec<super::support::Case>) -> Vec<Option<Vec<u8>>> {
    let mut out: Vec<Option<Vec<u8>>> = vec![
        None,
        Some(b"\xc3".to_vec()),
        Some(b"{\"a\":\"\xe9\"}".to_vec()),
        Some(b"[]".to_vec()),
        Some(b"42".to_vec()),
        Some(b"null".to_vec()),
        Some(b"{".to_vec()),
        Some(b"{'a': 1}".to_vec()),
        Some(b"{\"score\": NaN}".to_vec()),
        Some(b"{}".to_vec()),
        Some(bytes(base)),
        Some(bytes(&with(base.clone(), "unknown_field", json!(1)))),
    ];
    let Value::Object(object) = base else {
        panic!("an object")
    };
    for field in object.keys() {
        out.push(Some(bytes(&without(base.clone(), field))));
        out.push(Some(bytes(&with(base.clone(), field, Value::Null))));
        // The legacy camelCase twin of a missing field is hinted at.
        let camel = field
            .replace("_n", "N")
            .replace("_a", "A")
            .replace("_s", "S");
        let twin = with(without(base.clone(), field), &camel, object[field].clone());
        out.push(Some(bytes(&twin)));
    }
    for (field, value, _) in cases {
        out.push(Some(bytes(&with(base.clone(), field, value))));
    }
    out
}

fn same_as_builtin(
    name: &str,
    builtin: Decode,
    seed: &str,
    base: &Value,
    cases: Vec<super::support::Case>,
) {
    let declared = decoder(seed);
    let payloads = payloads(base, cases);
    let mut rejected = 0;
    for payload in &payloads {
        let expected = builtin(payload.as_deref());
        let got = declared.decode(payload.as_deref(), &META).map(drop);
        assert_eq!(
            got,
            expected,
            "{name}: {}",
            String::from_utf8_lossy(payload.as_deref().unwrap_or(b"<tombstone>"))
        );
        rejected += usize::from(expected.is_err());
    }
    assert!(
        rejected > 50,
        "{name}: only {rejected} of {} rejected",
        payloads.len()
    );
    println!(
        "{name}: {} payloads, {rejected} rejected, identical",
        payloads.len()
    );
}

#[test]
fn the_reviews_mapping_decodes_with_the_built_in_reasons() {
    same_as_builtin(
        "reviews",
        DECODERS[1].1,
        "reviews",
        &review(),
        review_cases::rule_cases(),
    );
}

#[test]
fn the_app_stats_mapping_decodes_with_the_built_in_reasons() {
    same_as_builtin(
        "app-stats",
        DECODERS[0].1,
        "app-stats",
        &app_stats(),
        app_stats_cases::rule_cases(),
    );
}

#[test]
fn the_network_metrics_mapping_decodes_with_the_built_in_reasons() {
    same_as_builtin(
        "network-metrics",
        DECODERS[2].1,
        "network-metrics",
        &network_metrics(),
        metrics_cases::rule_cases(),
    );
}

#[test]
fn a_decoded_review_holds_typed_cells_and_the_lookup_key() {
    let cells = decoder("reviews")
        .decode(Some(&bytes(&review())), &META)
        .unwrap();
    assert_eq!(cells.len(), 11);
    assert_eq!(cells[0], Cell::Text("gp:AOqpTOE".into()));
    assert_eq!(cells[1], Cell::Lookup("com.example.app".into()));
    assert_eq!(cells[3], Cell::SmallInt(4));
    assert_eq!(cells[5], Cell::Int(7));
    let at = crate::messages::decode_review(Some(&bytes(&review())))
        .unwrap()
        .at;
    assert_eq!(
        cells[7],
        Cell::Timestamp(at),
        "naive = UTC, as the built-in"
    );
    let stats = decoder("app-stats")
        .decode(Some(&bytes(&app_stats())), &META)
        .unwrap();
    assert_eq!(
        stats[8],
        Cell::Json(json!([10, 20, 30, 40, 1100])),
        "histogram as JSON"
    );
}
