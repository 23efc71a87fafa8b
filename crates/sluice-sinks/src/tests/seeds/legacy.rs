//! Legacy camelCase messages fail as missing required fields, with a hint.

use serde_json::json;

use super::support::{DECODERS, app_stats, bytes, network_metrics, review, with, without};
use crate::messages::DecodeError;

fn missing(decode_index: usize, message: &serde_json::Value) -> (String, String) {
    match DECODERS[decode_index].1(Some(&bytes(message))) {
        Err(error @ DecodeError::Missing { .. }) => {
            let field = error.field().unwrap_or_default().to_string();
            (field, error.to_string())
        }
        other => panic!("expected Missing for {message}, got {other:?}"),
    }
}

#[test]
fn legacy_app_stats_message() {
    let legacy = json!({
        "packageName": "com.example.app",
        "crawledAt": "2026-01-02T03:04:05",
        "title": "Example",
        "score": 4.5,
        "ratings": 10,
        "reviews": 3,
        "installs": "100,000+",
        "minInstalls": 100000,
        "realInstalls": 123456,
        "histogram": [1, 2, 3, 4, 5]
    });
    assert_eq!(
        missing(0, &legacy),
        (
            "package_name".into(),
            "field `package_name`: required field is missing \
             (found legacy camelCase field `packageName`)"
                .into()
        )
    );
    let half = without(
        with(app_stats(), "crawledAt", json!("2026-01-02T03:04:05")),
        "crawled_at",
    );
    assert_eq!(
        missing(0, &half).1,
        "field `crawled_at`: required field is missing (found legacy camelCase field `crawledAt`)"
    );
}

#[test]
fn legacy_review_message() {
    let legacy = json!({
        "reviewId": "gp:AOqpTOE",
        "packageName": "com.example.app",
        "userName": "Ana",
        "score": 4,
        "content": "Works well",
        "thumbsUpCount": 7,
        "reviewCreatedVersion": "1.2.3",
        "at": "2026-01-01T10:00:00",
        "replyContent": null,
        "repliedAt": null
    });
    let (field, reason) = missing(1, &legacy);
    assert_eq!(field, "review_id");
    assert!(
        reason.ends_with("(found legacy camelCase field `reviewId`)"),
        "{reason}"
    );

    let thumbs = without(with(review(), "thumbsUpCount", json!(7)), "thumbs_up_count");
    let (field, reason) = missing(1, &thumbs);
    assert_eq!(field, "thumbs_up_count");
    assert!(
        reason.ends_with("(found legacy camelCase field `thumbsUpCount`)"),
        "{reason}"
    );
}

#[test]
fn legacy_network_metrics_message() {
    let legacy = json!({
        "analysisId": "67e55044-10b1-426f-9247-bb680e5fe0c8",
        "packageName": "com.example.app",
        "capturedAt": "2026-01-02T03:04:05Z",
        "durationSeconds": 60,
        "packetCount": 1,
        "totalBytes": 1
    });
    let (field, reason) = missing(2, &legacy);
    assert_eq!(field, "analysis_id");
    assert!(
        reason.ends_with("(found legacy camelCase field `analysisId`)"),
        "{reason}"
    );
}

#[test]
fn no_hint_without_a_twin_and_null_is_said() {
    assert_eq!(
        missing(1, &without(review(), "at")).1,
        "field `at`: required field is missing"
    );
    assert_eq!(
        missing(1, &with(review(), "at", serde_json::Value::Null)).1,
        "field `at`: required field is missing (it is null)"
    );
    assert_eq!(
        missing(0, &json!({})).1,
        "field `package_name`: required field is missing"
    );
}

/// The camelCase twin of every required field of every seed is hinted at, and the twin of an
/// optional field is simply ignored (the field is absent, the message valid).
#[test]
fn every_required_field_hints_at_its_camel_case_twin() {
    let required: [&[&str]; 3] = [
        &["package_name", "crawled_at"],
        &[
            "review_id",
            "package_name",
            "score",
            "thumbs_up_count",
            "at",
            "last_synced_at",
        ],
        &[
            "analysis_id",
            "package_name",
            "captured_at",
            "duration_seconds",
            "packet_count",
            "total_bytes",
        ],
    ];
    let camel = |field: &str| {
        let mut words = field.split('_');
        let first = words.next().unwrap_or_default().to_owned();
        words.fold(first, |camel, word| {
            let mut chars = word.chars();
            let head = chars.next().map(|c| c.to_ascii_uppercase().to_string());
            format!("{camel}{}{}", head.unwrap_or_default(), chars.as_str())
        })
    };
    let mut hinted = 0;
    for (index, base) in [app_stats(), review(), network_metrics()]
        .into_iter()
        .enumerate()
    {
        let serde_json::Value::Object(object) = &base else {
            panic!("an object")
        };
        for (field, value) in object {
            if camel(field) == *field {
                continue; // `score`, `at`, `title`…: no twin
            }
            let twin = with(without(base.clone(), field), &camel(field), value.clone());
            let result = DECODERS[index].1(Some(&bytes(&twin)));
            if !required[index].contains(&field.as_str()) {
                assert!(result.is_ok(), "{field}: {result:?}");
                continue;
            }
            let (at, reason) = missing(index, &twin);
            assert_eq!(at, *field);
            assert_eq!(
                reason,
                format!(
                    "field `{field}`: required field is missing \
                     (found legacy camelCase field `{}`)",
                    camel(field)
                )
            );
            hinted += 1;
        }
    }
    assert_eq!(hinted, 12, "every required field with an underscore");
}
