//! Untrusted bytes through the binary (issue 10, item 5): `sluice dlq list|show` print no
//! raw control character that came from a message, and a forged `sluice-replay-count`
//! header cannot stretch the replay limit.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use std::time::Duration;
use support::*;

/// A terminal title change, a colour, and a forged second line.
const HOSTILE: &str = "\u{1b}]0;pwned\u{7}\u{1b}[31m\nforged line";

/// A raw record: key, payload, and the value of its `sluice-replay-count` header, if any.
type Raw<'a> = (&'a [u8], &'a [u8], Option<&'a [u8]>);

/// Produces raw records to the reviews topic.
async fn produce_raw(env: &Env, records: &[Raw<'_>]) {
    let producer = sluice_testkit::producer(&env.stack);
    let topic = env.topic("reviews");
    for &(key, payload, replay_count) in records {
        let mut record = FutureRecord::to(&topic).key(key).payload(payload);
        if let Some(value) = replay_count {
            record = record.headers(OwnedHeaders::new().insert(Header {
                key: "sluice-replay-count",
                value: Some(value),
            }));
        }
        producer
            .send(record, Duration::from_secs(30))
            .await
            .map_err(|(e, _)| e)
            .expect("delivered");
    }
}

/// The control characters of `bytes` that a terminal would act on: every C0 control but
/// the newlines the command prints itself, DEL, and the C1 controls.
fn raw_controls(bytes: &[u8]) -> Vec<char> {
    String::from_utf8_lossy(bytes)
        .chars()
        .filter(|&c| c.is_control() && c != '\n')
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlq_list_and_show_print_no_raw_control_character_from_a_message() {
    let Some(env) = Env::new().await else { return };
    // 1. An unknown package whose name holds the escapes (valid JSON: the name is decoded
    //    into raw control characters and echoed in the reason).
    let hostile_package = format!("com.{}.{HOSTILE}\u{9b}2J", env.prefix.replace('-', "_"));
    let valid = review(1, &hostile_package, "2026-11-03T08:00:00Z").to_string();
    // 2. A payload that is not JSON at all, with raw escapes in it and in its key.
    let raw_payload = format!("{{\"review_id\": \"{HOSTILE}\"");
    let raw_key = format!("key{HOSTILE}");
    produce_raw(
        &env,
        &[
            (b"k1", valid.as_bytes(), None),
            (raw_key.as_bytes(), raw_payload.as_bytes(), None),
        ],
    )
    .await;
    let mut run = env.spawn_run("hostile", &[("STORAGE_PIPELINES", "reviews")]);
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(60))
        .await;
    run.signal("TERM");
    assert!(run.wait(Duration::from_secs(30)).success());
    assert_eq!(
        env.count("SELECT count(*) FROM dead_letter_events").await,
        2
    );
    let stored_reason = env
        .count("SELECT count(*) FROM dead_letter_events WHERE reason ~ '[[:cntrl:]]'")
        .await;
    assert_eq!(stored_reason, 0, "reasons are stored escaped");

    let mut outputs = vec![
        env.output(&["dlq", "list"], &[]),
        env.output(&["dlq", "list", "--json"], &[]),
    ];
    let mut conn = env.schema.connect().await;
    let ids: Vec<i64> = sqlx::query_scalar("SELECT id FROM dead_letter_events ORDER BY id")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    for id in &ids {
        let id = id.to_string();
        outputs.push(env.output(&["dlq", "show", &id], &[]));
        outputs.push(env.output(&["dlq", "show", &id, "--json"], &[]));
    }
    for out in &outputs {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        println!("{text}");
        assert_eq!(raw_controls(&out.stdout), Vec::<char>::new(), "{text:?}");
        assert_eq!(raw_controls(&out.stderr), Vec::<char>::new());
        assert!(
            !text.lines().any(|l| l.starts_with("forged line")),
            "a newline from the message started a line of its own: {text}"
        );
    }
    // The escapes are shown, not dropped: an operator can see what the message held.
    let shown = String::from_utf8_lossy(&outputs[2].stdout).into_owned()
        + &String::from_utf8_lossy(&outputs[4].stdout);
    assert!(shown.contains("\\u{1b}]0;pwned\\u{7}"), "{shown}");
    assert!(shown.contains("\\u{1b}[31m\\nforged line"), "{shown}");
    // JSON output stays JSON with the exact bytes.
    let listed: serde_json::Value = serde_json::from_slice(&outputs[1].stdout).unwrap();
    let reasons: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["reason"].as_str().unwrap())
        .collect();
    assert!(
        reasons.iter().any(|r| r.contains("\\u{1b}]0;pwned")),
        "{reasons:?}"
    );
    let payloads: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|row| row["payload"]["data"].as_str())
        .collect();
    assert!(payloads.contains(&raw_payload.as_str()), "{payloads:?}");
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_replay_count_header_cannot_stretch_the_replay_limit() {
    let Some(env) = Env::new().await else { return };
    let late = format!("com.{}.late", env.prefix.replace('-', "_"));
    let forged: [&[u8]; 3] = [b"-5", b"garbage", b"-2147483648"];
    let payloads: Vec<String> = (0..forged.len())
        .map(|i| review(i, &late, "2026-11-03T08:00:00Z").to_string())
        .collect();
    let records: Vec<Raw<'_>> = forged
        .iter()
        .zip(&payloads)
        .map(|(&value, payload)| (late.as_bytes(), payload.as_bytes(), Some(value)))
        .collect();
    produce_raw(&env, &records).await;
    let mut run = env.spawn_run("forged", &[("STORAGE_PIPELINES", "reviews")]);
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(60))
        .await;
    assert_eq!(
        env.count("SELECT count(*) FROM dead_letter_events WHERE replay_count = 2147483647")
            .await,
        forged.len() as i64,
        "an unreadable replay count is stored as 'no replays left'"
    );

    // The application is registered: the records would land if they were replayed.
    env.schema.register_apps(std::slice::from_ref(&late)).await;
    let out = env.output(
        &["dlq", "replay", "--pipeline", "reviews", "--execute"],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}{stderr}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "every row refused: {stdout}{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "{} dead letter(s) matching the filter, never replayed, cannot be replayed",
            forged.len()
        )),
        "{stderr}"
    );
    assert!(!stdout.contains("re-published"), "{stdout}");
    // Named one by one, each is refused with its reason.
    let ids: Vec<String> = {
        let mut conn = env.schema.connect().await;
        sqlx::query_scalar::<_, i64>("SELECT id FROM dead_letter_events ORDER BY id")
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .into_iter()
            .map(|id| id.to_string())
            .collect()
    };
    let named = env.output(&["dlq", "replay", "--id", &ids.join(","), "--execute"], &[]);
    let stdout = String::from_utf8_lossy(&named.stdout);
    assert_eq!(named.status.code(), Some(1), "{stdout}");
    assert_eq!(
        stdout.matches("refused: already replayed").count(),
        forged.len(),
        "{stdout}"
    );
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(60))
        .await;
    assert_eq!(env.count("SELECT count(*) FROM reviews").await, 0);
    run.signal("TERM");
    assert!(run.wait(Duration::from_secs(30)).success());
    env.cleanup().await;
}
