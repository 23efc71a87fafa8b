//! Payload-level errors, the same for every seed: tombstone, UTF-8, JSON, object shape.

use super::support::{DECODERS, app_stats, bytes, network_metrics, review};
use crate::messages::DecodeError;

#[test]
fn tombstone_is_a_null_payload() {
    for (topic, decode) in DECODERS {
        assert_eq!(decode(None), Err(DecodeError::NullPayload), "{topic}");
        assert_eq!(
            decode(None).unwrap_err().to_string(),
            "record has no value (tombstone)"
        );
    }
}

#[test]
fn invalid_utf8_reports_the_offset() {
    let mut payload = bytes(&app_stats());
    payload.splice(20..20, [0xff, 0xfe]);
    for (topic, decode) in DECODERS {
        assert_eq!(
            decode(Some(&payload)),
            Err(DecodeError::InvalidUtf8 { offset: 20 }),
            "{topic}"
        );
        assert_eq!(
            decode(Some(b"\xc3")),
            Err(DecodeError::InvalidUtf8 { offset: 0 }),
            "{topic}"
        );
    }
    let error = DECODERS[0].1(Some(b"{\"a\":\"\xe9\"}")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "payload is not valid UTF-8 (first invalid byte at offset 6)"
    );
}

#[test]
fn non_objects_are_rejected() {
    let cases = [
        ("[]", "array"),
        (r#"[{"package_name": "a"}]"#, "array"),
        (r#""{\"package_name\": \"a\"}""#, "string"),
        ("42", "number"),
        ("-1.5", "number"),
        ("true", "boolean"),
        ("null", "null"),
    ];
    for (topic, decode) in DECODERS {
        for (text, found) in cases {
            let error = decode(Some(text.as_bytes())).unwrap_err();
            assert_eq!(error, DecodeError::NotAnObject { found }, "{topic}: {text}");
            assert_eq!(
                error.to_string(),
                format!("payload is a JSON {found}, not an object")
            );
        }
    }
}

#[test]
fn invalid_json_is_rejected_with_its_position() {
    let cases = [
        "",
        " ",
        "{",
        "{\"package_name\": \"a\"",
        "{'a': 1}",
        "{} {}",
        "{\"a\": 01}",
    ];
    for (topic, decode) in DECODERS {
        for text in cases {
            match decode(Some(text.as_bytes())) {
                Err(DecodeError::InvalidJson { detail }) => {
                    assert!(detail.contains(" at line "), "{topic}: {text:?}: {detail}")
                }
                other => panic!("{topic}: {text:?}: expected InvalidJson, got {other:?}"),
            }
        }
    }
}

/// `NaN`, `Infinity` and `-Infinity` are not JSON; the reason names the field they were in.
#[test]
fn non_finite_tokens_name_the_field() {
    let messages = [
        (DECODERS[0], app_stats(), "score"),
        (DECODERS[0], app_stats(), "price"),
        (DECODERS[1], review(), "score"),
        (DECODERS[2], network_metrics(), "duration_seconds"),
    ];
    for ((topic, decode), message, field) in messages {
        for token in ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"] {
            let text = serde_json::to_string(&message).unwrap();
            let needle = format!("\"{field}\":");
            let start = text.find(&needle).unwrap() + needle.len();
            let end = start + text[start..].find([',', '}']).unwrap();
            let payload = format!("{}{token}{}", &text[..start], &text[end..]);
            let error = decode(Some(payload.as_bytes())).unwrap_err();
            let reason = error.to_string();
            assert!(
                matches!(error, DecodeError::InvalidJson { .. }),
                "{topic} {field}={token}: {reason}"
            );
            assert!(
                reason.starts_with("payload is not valid JSON: "),
                "{reason}"
            );
            assert!(reason.contains(" at line 1 column "), "{reason}");
            assert!(
                reason.ends_with(&format!("(near field `{field}`)")),
                "{reason}"
            );
        }
    }
    let error = DECODERS[0].1(Some(br#"{"package_name": "com.example", "score": NaN}"#));
    assert_eq!(
        error.unwrap_err().to_string(),
        "payload is not valid JSON: expected value at line 1 column 42 (near field `score`)"
    );
}

#[test]
fn pretty_printed_messages_decode() {
    for ((topic, decode), message) in
        DECODERS
            .into_iter()
            .zip([app_stats(), review(), network_metrics()])
    {
        let pretty = serde_json::to_vec_pretty(&message).unwrap();
        assert_eq!(decode(Some(&pretty)).map(drop), Ok(()), "{topic}");
    }
}
