//! Poison messages on the real stack: one batch mixing good records with every kind of bad
//! one, write-time constraint violations isolated to their rows, and replays that do not
//! multiply dead letters (issue acceptance items 4 and 6; docs/ARCHITECTURE.md#guarantees, docs/ARCHITECTURE.md#messages, docs/ARCHITECTURE.md#dead-letters, docs/ARCHITECTURE.md#errors).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::*;
use serde_json::{Value, json};
use sluice_core::PipelineKind;
use sluice_storage::PipelineTotals;
use sqlx::Row;
use std::time::{Duration, Instant};

/// What one produced record must become.
#[derive(Debug)]
enum Expect {
    /// A row in the topic's table.
    Row,
    /// Exactly one dead letter of `kind` whose reason contains every needle.
    Dead {
        kind: &'static str,
        needles: Vec<String>,
    },
}

/// One record of a topic's batch: its value (`None`: tombstone) and its fate.
#[derive(Debug)]
struct Rec {
    label: &'static str,
    value: Option<Vec<u8>>,
    expect: Expect,
}

fn bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap()
}

fn good(label: &'static str, value: &Value) -> Rec {
    Rec {
        label,
        value: Some(bytes(value)),
        expect: Expect::Row,
    }
}

fn dead(label: &'static str, kind: &'static str, value: Option<Vec<u8>>, needles: &[&str]) -> Rec {
    Rec {
        label,
        value,
        expect: Expect::Dead {
            kind,
            needles: needles.iter().map(|n| (*n).to_owned()).collect(),
        },
    }
}

fn decode_error(label: &'static str, value: Option<Vec<u8>>, needles: &[&str]) -> Rec {
    dead(label, "decode_error", value, needles)
}

/// Every record of one topic, produced with one key so they share a partition (one batch).
#[derive(Debug)]
struct Plan {
    kind: PipelineKind,
    key: Vec<u8>,
    recs: Vec<Rec>,
}

impl Plan {
    fn count(&self, pred: impl Fn(&Expect) -> bool) -> u64 {
        self.recs.iter().filter(|r| pred(&r.expect)).count() as u64
    }
    fn rows(&self) -> u64 {
        self.count(|e| matches!(e, Expect::Row))
    }
    fn dead_of(&self, kind: &str) -> u64 {
        self.count(|e| matches!(e, Expect::Dead { kind: k, .. } if *k == kind))
    }
    fn dead(&self) -> u64 {
        self.recs.len() as u64 - self.rows()
    }
}

async fn produce_plan(fx: &Fixture, plan: &Plan) {
    let records: Vec<sluice_testkit::RawRecord> = plan
        .recs
        .iter()
        .map(|r| (Some(plan.key.clone()), r.value.clone()))
        .collect();
    sluice_testkit::produce(&fx.stack, fx.topic(plan.kind), &records).await;
}

/// The one partition holding the topic's records; asserts the others are empty and that it
/// holds exactly `n` records (offsets 0 … n-1).
fn the_partition(fx: &Fixture, kind: PipelineKind, n: usize) -> i32 {
    let admin = sluice_kafka::Admin::new(
        &sluice_core::KafkaClientSettings::new(&fx.stack.bootstrap),
        Duration::from_secs(10),
    )
    .unwrap();
    let used: Vec<_> = admin
        .watermarks(fx.topic(kind))
        .unwrap()
        .into_iter()
        .filter(|m| m.high > 0)
        .collect();
    assert_eq!(used.len(), 1, "{kind}: one key, one partition: {used:?}");
    assert_eq!((used[0].low, used[0].high), (0, n as i64), "{kind} offsets");
    used[0].partition
}

/// One dead-letter row as stored.
#[derive(Debug)]
struct Stored {
    partition: i32,
    offset: i64,
    group: String,
    key: Option<Vec<u8>>,
    payload: Option<Vec<u8>>,
    payload_size: i32,
    has_timestamp: bool,
    kind: String,
    reason: String,
}

async fn dead_letters(fx: &Fixture, topic: &str) -> Vec<Stored> {
    let mut conn = fx.conn().await;
    sqlx::query(
        "SELECT partition, kafka_offset, consumer_group, key, payload, payload_size,
                kafka_timestamp IS NOT NULL AS has_ts, error_kind, reason, replay_count
         FROM dead_letter_events WHERE topic = $1 ORDER BY partition, kafka_offset",
    )
    .bind(topic)
    .fetch_all(&mut conn)
    .await
    .unwrap()
    .into_iter()
    .map(|row| {
        assert_eq!(row.get::<i32, _>("replay_count"), 0);
        Stored {
            partition: row.get("partition"),
            offset: row.get("kafka_offset"),
            group: row.get("consumer_group"),
            key: row.get("key"),
            payload: row.get("payload"),
            payload_size: row.get("payload_size"),
            has_timestamp: row.get("has_ts"),
            kind: row.get("error_kind"),
            reason: row.get("reason"),
        }
    })
    .collect()
}

/// Asserts one dead letter per bad record of `plan`, at the record's coordinates, with the
/// group, key, payload (byte-exact, or truncated to 64 KiB), size, kind and reason expected.
async fn assert_dead_letters(fx: &Fixture, plan: &Plan) {
    let kind = plan.kind;
    let partition = the_partition(fx, kind, plan.recs.len());
    let stored = dead_letters(fx, fx.topic(kind)).await;
    let expected: Vec<(i64, &Rec)> = plan
        .recs
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r.expect, Expect::Dead { .. }))
        .map(|(i, r)| (i as i64, r))
        .collect();
    let offsets: Vec<i64> = stored.iter().map(|s| s.offset).collect();
    let wanted: Vec<i64> = expected.iter().map(|(o, _)| *o).collect();
    assert_eq!(
        offsets, wanted,
        "{kind}: exactly one dead letter per bad record"
    );
    for (row, (_, rec)) in stored.iter().zip(&expected) {
        let Expect::Dead {
            kind: error_kind,
            needles,
        } = &rec.expect
        else {
            unreachable!()
        };
        let label = rec.label;
        assert_eq!(row.partition, partition, "{label}: partition");
        assert_eq!(row.group, fx.group(kind), "{label}: consumer group");
        assert_eq!(
            row.key.as_deref(),
            Some(plan.key.as_slice()),
            "{label}: key"
        );
        assert!(row.has_timestamp, "{label}: kafka_timestamp");
        assert_eq!(
            row.kind, *error_kind,
            "{label}: error_kind ({})",
            row.reason
        );
        for needle in needles {
            assert!(
                row.reason.contains(needle.as_str()),
                "{label}: reason {:?} lacks {needle:?}",
                row.reason
            );
        }
        match &rec.value {
            None => {
                assert_eq!(row.payload, None, "{label}: a tombstone's payload is NULL");
                assert_eq!(row.payload_size, 0, "{label}: payload_size");
            }
            Some(value) => {
                let size = value.len();
                assert_eq!(row.payload_size as usize, size, "{label}: payload_size");
                let kept = size.min(sluice_core::dead_letter::MAX_STORED_PAYLOAD);
                assert_eq!(
                    row.payload.as_deref(),
                    Some(&value[..kept]),
                    "{label}: payload bytes"
                );
                let truncation = format!("truncated to 65536 of {size} bytes");
                assert_eq!(
                    row.reason.contains(&truncation),
                    size > 65_536,
                    "{label}: the reason says whether the payload was truncated: {:?}",
                    row.reason
                );
            }
        }
    }
}

/// The first run's totals: one batch holding every record, each counted once.
fn assert_first_run(totals: &PipelineTotals, plan: &Plan) {
    let kind = plan.kind;
    let r = totals.report;
    assert_eq!(totals.batches, 1, "{kind}: every record in one poll");
    assert_eq!(r.records, plan.recs.len() as u64, "{kind} records");
    assert_eq!(
        r.decode_errors,
        plan.dead_of("decode_error"),
        "{kind} decode errors"
    );
    assert_eq!(
        r.unknown_applications,
        plan.dead_of("unknown_application"),
        "{kind} unknown applications"
    );
    assert_eq!(r.constraint_violations, 0, "{kind} constraint violations");
    assert_eq!(
        (r.write.inserted, r.write.updated, r.write.skipped),
        (plan.rows(), 0, 0),
        "{kind} writes"
    );
    assert_eq!(r.dead_letters_inserted, plan.dead(), "{kind} dead letters");
    assert_eq!(r.retries, 0, "{kind} retries");
    assert!(r.balances(), "{kind}: {r:?}");
}

/// Every row of the data tables and the dead-letter table, hashed.
async fn digest(fx: &Fixture) -> Vec<String> {
    let mut out = Vec::new();
    for table in [
        "reviews",
        "app_stats",
        "network_metrics",
        "dead_letter_events",
    ] {
        let sql = format!(
            "SELECT count(*)::text || ':' || coalesce(md5(string_agg(t::text, ',' ORDER BY t.id)), '') FROM {table} t"
        );
        out.push(fx.count_text(&sql).await);
    }
    out
}

fn raw(text: &str) -> Option<Vec<u8>> {
    Some(text.as_bytes().to_vec())
}

fn reviews_plan(app: &str, prefix: &str) -> Plan {
    let synced = "2026-11-03T08:00:00.000001Z";
    let base = |id: &str| {
        json!({
            "review_id": id,
            "package_name": app,
            "score": 4,
            "thumbs_up_count": 1,
            "at": "2026-11-01T10:00:00Z",
            "last_synced_at": synced,
        })
    };
    let with = |id: &str, field: &str, value: Value| {
        let mut v = base(id);
        v[field] = value;
        v
    };
    let without = |id: &str, field: &str| {
        let mut v = base(id);
        v.as_object_mut().unwrap().remove(field);
        v
    };
    // A good review over 64 KiB: good rows are never truncated.
    let edge = json!({
        "review_id": "gp:edge",
        "package_name": app,
        "user_name": "é".repeat(255),
        "score": 1,
        "content": "پ".repeat(50_000),
        "thumbs_up_count": i64::from(i32::MAX),
        "app_version": "v".repeat(64),
        "at": "2026-11-01 10:00:00.1234567",
        "reply_content": "thanks 🙏",
        "replied_at": "2026-11-02T12:00:00+02:00",
        "last_synced_at": "2026-11-03T08:00:00",
        "unknown_field": {"ignored": true},
    });
    let minimal = json!({
        "review_id": "gp:minimal",
        "package_name": app,
        "user_name": null,
        "score": 5,
        "thumbs_up_count": 0,
        "at": "2026-11-01T10:00:00Z",
        "last_synced_at": synced,
    });
    let legacy = json!({
        "reviewId": "gp:legacy",
        "packageName": app,
        "userName": "Old Client",
        "score": 4,
        "content": "camelCase",
        "thumbsUpCount": 3,
        "appVersion": "1.0",
        "at": "2026-11-01T10:00:00Z",
        "lastSyncedAt": synced,
    });
    let big = {
        let mut v = with("gp:big", "content", json!("x".repeat(70_000)));
        v["score"] = json!(0);
        bytes(&v)
    };
    assert!(big.len() > 70_000);
    let long_package = format!("com.{}", "p".repeat(252));
    let unknown = format!("com.{}.never_registered", prefix.replace('-', "_"));
    Plan {
        kind: PipelineKind::Reviews,
        key: app.as_bytes().to_vec(),
        recs: vec![
            good("good review", &review(1, app, synced, 42)),
            decode_error(
                "invalid JSON",
                raw(r#"{"review_id": "gp:broken", "package_name": "x", "score": 5,"#),
                &["payload is not valid JSON", "EOF"],
            ),
            decode_error(
                "invalid UTF-8",
                Some(b"{\"review_id\": \"gp:\xff\xfe\xc3\x28\", \"score\": 5}".to_vec()),
                &["not valid UTF-8", "offset 18"],
            ),
            decode_error(
                "not an object",
                raw("[1,2]"),
                &["payload is a JSON array, not an object"],
            ),
            decode_error(
                "missing required field",
                Some(bytes(&without("gp:missing", "last_synced_at"))),
                &["field `last_synced_at`: required field is missing"],
            ),
            decode_error(
                "score as a string",
                Some(bytes(&with("gp:string-score", "score", json!("5")))),
                &["field `score`", "must be an integer", "\"5\""],
            ),
            decode_error(
                "score 6",
                Some(bytes(&with("gp:score-6", "score", json!(6)))),
                &["field `score`", "between 1 and 5", "6"],
            ),
            good("edge values", &edge),
            decode_error(
                "thumbs_up_count 2^31",
                Some(bytes(&with(
                    "gp:thumbs",
                    "thumbs_up_count",
                    json!(2_147_483_648_i64),
                ))),
                &["field `thumbs_up_count`", "INTEGER", "2147483648"],
            ),
            decode_error(
                "256-char package name",
                Some(bytes(&with("gp:long", "package_name", json!(long_package)))),
                &["field `package_name`", "at most 255 characters, got 256"],
            ),
            decode_error(
                "NaN",
                raw(&format!(
                    r#"{{"review_id": "gp:nan", "package_name": "{app}", "score": NaN, "thumbs_up_count": 1}}"#
                )),
                &["payload is not valid JSON", "(near field `score`)"],
            ),
            decode_error(
                "Infinity",
                raw(&format!(
                    r#"{{"review_id": "gp:inf", "package_name": "{app}", "score": 3, "thumbs_up_count": Infinity}}"#
                )),
                &[
                    "payload is not valid JSON",
                    "(near field `thumbs_up_count`)",
                ],
            ),
            decode_error(
                "U+0000 in content",
                raw(&format!(
                    r#"{{"review_id": "gp:nul", "package_name": "{app}", "score": 3, "content": "a\u0000b", "thumbs_up_count": 1, "at": "2026-11-01T10:00:00Z", "last_synced_at": "{synced}"}}"#
                )),
                &["field `content`", "U+0000"],
            ),
            dead(
                "unknown package",
                "unknown_application",
                Some(bytes(&with("gp:unknown", "package_name", json!(unknown)))),
                &["field `package_name`", "unknown application", &unknown],
            ),
            decode_error("over 64 KiB", Some(big), &["field `score`", "got 0"]),
            decode_error(
                "legacy camelCase",
                Some(bytes(&legacy)),
                &[
                    "field `review_id`",
                    "required field is missing",
                    "legacy camelCase field `reviewId`",
                ],
            ),
            decode_error("tombstone", None, &["tombstone"]),
            good("minimal review", &minimal),
        ],
    }
}

fn app_stats_plan(app: &str, prefix: &str) -> Plan {
    let mut full = app_stats(app, "2026-11-01T00:00:00.123456Z");
    full["ratings"] = json!(i64::MAX);
    full["histogram"] = json!([0, 1, 2, 3, i64::MAX]);
    let minimal = json!({
        "package_name": app,
        "crawled_at": "2026-11-02 00:00:00",
        "title": null,
        "score": 5,
    });
    let crawl = |hour: u32| format!("2026-11-03T{hour:02}:00:00Z");
    let with = |hour: u32, field: &str, value: Value| {
        let mut v = app_stats(app, &crawl(hour));
        v[field] = value;
        v
    };
    let unknown = format!("com.{}.unknown_stats", prefix.replace('-', "_"));
    Plan {
        kind: PipelineKind::AppStats,
        key: app.as_bytes().to_vec(),
        recs: vec![
            good("full app stats", &full),
            decode_error(
                "BIGINT overflow",
                raw(&format!(
                    r#"{{"package_name": "{app}", "crawled_at": "2026-11-03T01:00:00Z", "ratings": 9223372036854775808}}"#
                )),
                &["field `ratings`", "BIGINT", "9223372036854775808"],
            ),
            decode_error(
                "-Infinity score",
                raw(&format!(
                    r#"{{"package_name": "{app}", "crawled_at": "2026-11-03T02:00:00Z", "score": -Infinity}}"#
                )),
                &["payload is not valid JSON", "(near field `score`)"],
            ),
            decode_error(
                "histogram of 4",
                Some(bytes(&with(3, "histogram", json!([1, 2, 3, 4])))),
                &["field `histogram`", "exactly 5 elements, got 4"],
            ),
            decode_error(
                "score 5.5",
                Some(bytes(&with(4, "score", json!(5.5)))),
                &["field `score`", "5.5"],
            ),
            dead(
                "unknown package",
                "unknown_application",
                Some(bytes(
                    &json!({"package_name": unknown, "crawled_at": crawl(5)}),
                )),
                &["field `package_name`", &unknown],
            ),
            decode_error("tombstone", None, &["tombstone"]),
            good("minimal app stats", &minimal),
        ],
    }
}

fn network_metrics_plan(app: &str, prefix: &str) -> Plan {
    let id = |i: u32| format!("00000000-0000-4000-8000-{i:012}");
    let with = |i: u32, field: &str, value: Value| {
        let mut v = network_metrics(&id(i), app);
        v[field] = value;
        v
    };
    let mut full = network_metrics(&id(1), app);
    full["packet_count"] = json!(i64::MAX);
    full["dns_queries"] = json!(i32::MAX);
    let minimal = json!({
        "analysis_id": "{AAAAAAAA-BBBB-4CCC-8DDD-EEEEEEEEEEEE}",
        "package_name": app,
        "captured_at": "2026-11-02T12:00:00+03:30",
        "duration_seconds": 0,
        "packet_count": 0,
        "total_bytes": 0,
        "bytes_sent": null,
        "domains": [],
    });
    let unknown = format!("com.{}.unknown_capture", prefix.replace('-', "_"));
    Plan {
        kind: PipelineKind::NetworkMetrics,
        key: app.as_bytes().to_vec(),
        recs: vec![
            good("full metrics", &full),
            decode_error(
                "bad UUID",
                Some(bytes(&with(2, "analysis_id", json!("not-a-uuid")))),
                &["field `analysis_id`", "must be a UUID", "not-a-uuid"],
            ),
            decode_error(
                "BIGINT overflow",
                raw(&format!(
                    r#"{{"analysis_id": "{}", "package_name": "{app}", "captured_at": "2026-11-02T12:00:00Z", "duration_seconds": 1.0, "packet_count": 9223372036854775808, "total_bytes": 1}}"#,
                    id(3)
                )),
                &["field `packet_count`", "BIGINT", "9223372036854775808"],
            ),
            decode_error(
                "INTEGER overflow",
                Some(bytes(&with(4, "dns_queries", json!(2_147_483_648_i64)))),
                &["field `dns_queries`", "INTEGER"],
            ),
            decode_error(
                "254-char domain",
                Some(bytes(&with(
                    5,
                    "domains",
                    json!(["ok.example", "d".repeat(254)]),
                ))),
                &["field `domains[1]`", "at most 253 characters"],
            ),
            decode_error(
                "duration beyond f64",
                raw(&format!(
                    r#"{{"analysis_id": "{}", "package_name": "{app}", "duration_seconds": 1e400}}"#,
                    id(6)
                )),
                &[
                    "payload is not valid JSON",
                    "(near field `duration_seconds`)",
                ],
            ),
            dead(
                "unknown package",
                "unknown_application",
                Some(bytes(&network_metrics(&id(7), &unknown))),
                &["field `package_name`", &unknown],
            ),
            decode_error("tombstone", None, &["tombstone"]),
            good("minimal metrics", &minimal),
        ],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_batch_of_poison_and_good_messages() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let started = Instant::now();
    let apps = app_names(&fx.prefix, 1);
    let app = &apps[0];
    let app_id = fx.schema.register_apps(&apps).await[0];
    let plans = [
        reviews_plan(app, &fx.prefix),
        app_stats_plan(app, &fx.prefix),
        network_metrics_plan(app, &fx.prefix),
    ];
    for plan in &plans {
        produce_plan(&fx, plan).await;
    }

    let settings = || fx.settings(&PipelineKind::ALL, &[("STORAGE_MAX_POLL_RECORDS", "1000")]);
    let running = fx.start(settings());
    for plan in &plans {
        fx.wait_caught_up(plan.kind, Duration::from_secs(45)).await;
    }
    let first = stop(running);

    for plan in &plans {
        let kind = plan.kind;
        assert_first_run(&first[&kind], plan);
        let (end, committed) = fx.offsets(kind);
        assert_eq!(
            (end, committed),
            (plan.recs.len() as i64, end),
            "{kind}: the offset moved past every record"
        );
        assert_dead_letters(&fx, plan).await;
    }
    assert_eq!(
        fx.count("SELECT count(*) FROM dead_letter_events").await,
        plans.iter().map(Plan::dead).sum::<u64>() as i64
    );
    assert_good_rows(&fx, app_id).await;

    // Replay every topic from the start: no dead letter is added twice, no row changes.
    let snapshot = digest(&fx).await;
    for plan in &plans {
        fx.replay_to_earliest(plan.kind).await;
    }
    let running = fx.start(settings());
    for plan in &plans {
        fx.wait_caught_up(plan.kind, Duration::from_secs(45)).await;
    }
    let second = stop(running);
    assert_eq!(digest(&fx).await, snapshot, "the replay changed no row");
    for plan in &plans {
        let kind = plan.kind;
        let r = second[&kind].report;
        assert_eq!(r.records, plan.recs.len() as u64, "{kind} replayed records");
        assert_eq!(
            r.dead_lettered(),
            plan.dead(),
            "{kind} replay: same rejects"
        );
        assert_eq!(
            r.dead_letters_inserted, 0,
            "{kind} replay: no new dead letter"
        );
        assert_eq!(
            (r.write.inserted, r.write.updated, r.write.skipped),
            (0, 0, plan.rows()),
            "{kind} replay writes"
        );
        assert!(r.balances(), "{kind}: {r:?}");
        assert_dead_letters(&fx, plan).await;
        let (end, committed) = fx.offsets(kind);
        assert_eq!(committed, end, "{kind}: replay committed");
    }
    println!(
        "one_batch_of_poison_and_good_messages: {:?}",
        started.elapsed()
    );
    fx.cleanup().await;
}

/// The good rows of [`one_batch_of_poison_and_good_messages`], field by field.
async fn assert_good_rows(fx: &Fixture, app_id: i64) {
    let mut conn = fx.conn().await;
    // A batch's rows are written in natural-key order (the writers' lock order), so the
    // ids follow the keys, not the offsets.
    let ids: Vec<String> =
        sqlx::query_scalar("SELECT review_id FROM reviews ORDER BY review_id COLLATE \"C\"")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(ids, ["gp:edge", "gp:minimal", "gp:review-1"]);
    let review_row = |id: &'static str| {
        sqlx::query(
            "SELECT application_id, user_name, score, content, thumbs_up_count, app_version,
                    reviewed_at::text AS at, reply_content, replied_at::text AS replied,
                    last_synced_at::text AS synced, sentiment
             FROM reviews WHERE review_id = $1",
        )
        .bind(id)
    };
    let row = review_row("gp:review-1")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(row.get::<i64, _>("application_id"), app_id);
    assert_eq!(row.get::<String, _>("user_name"), "User 1 Ünïcödé");
    assert_eq!(row.get::<i16, _>("score"), 2);
    assert_eq!(row.get::<String, _>("content"), "review text 1 — پیام ✓");
    assert_eq!(row.get::<i32, _>("thumbs_up_count"), 42);
    assert_eq!(row.get::<String, _>("app_version"), "1.2.3");
    assert_eq!(row.get::<String, _>("at"), "2026-11-01 10:00:00+00");
    assert_eq!(row.get::<Option<String>, _>("reply_content"), None);
    assert_eq!(row.get::<Option<String>, _>("replied"), None);
    assert_eq!(
        row.get::<String, _>("synced"),
        "2026-11-03 08:00:00.000001+00"
    );

    let row = review_row("gp:edge").fetch_one(&mut conn).await.unwrap();
    assert_eq!(row.get::<i64, _>("application_id"), app_id);
    assert_eq!(row.get::<String, _>("user_name"), "é".repeat(255));
    assert_eq!(row.get::<i16, _>("score"), 1);
    assert_eq!(
        row.get::<String, _>("content"),
        "پ".repeat(50_000),
        "a good payload over 64 KiB is stored whole"
    );
    assert_eq!(row.get::<i32, _>("thumbs_up_count"), i32::MAX);
    assert_eq!(row.get::<String, _>("app_version"), "v".repeat(64));
    assert_eq!(
        row.get::<String, _>("at"),
        "2026-11-01 10:00:00.123457+00",
        "naive time is UTC, rounded to the microsecond as PostgreSQL rounds"
    );
    assert_eq!(row.get::<String, _>("reply_content"), "thanks 🙏");
    assert_eq!(row.get::<String, _>("replied"), "2026-11-02 10:00:00+00");
    assert_eq!(row.get::<String, _>("synced"), "2026-11-03 08:00:00+00");
    assert_eq!(row.get::<Option<String>, _>("sentiment"), None);

    let row = review_row("gp:minimal").fetch_one(&mut conn).await.unwrap();
    assert_eq!(row.get::<Option<String>, _>("user_name"), None);
    assert_eq!(row.get::<Option<String>, _>("content"), None);
    assert_eq!(row.get::<Option<String>, _>("app_version"), None);
    assert_eq!(row.get::<i16, _>("score"), 5);
    assert_eq!(row.get::<i32, _>("thumbs_up_count"), 0);

    let stats = sqlx::query(
        "SELECT application_id, crawled_at::text AS c, title, score, ratings, reviews_count,
                installs_min, installs_real, histogram, price, free, version,
                updated_at::text AS u
         FROM app_stats ORDER BY crawled_at",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(stats.len(), 2);
    let row = &stats[0];
    assert_eq!(row.get::<i64, _>("application_id"), app_id);
    assert_eq!(row.get::<String, _>("c"), "2026-11-01 00:00:00.123456+00");
    assert_eq!(row.get::<String, _>("title"), "An app");
    assert_eq!(row.get::<f64, _>("score"), 4.25);
    assert_eq!(row.get::<i64, _>("ratings"), i64::MAX);
    assert_eq!(row.get::<i64, _>("reviews_count"), 678);
    assert_eq!(row.get::<i64, _>("installs_min"), 1_000_000);
    assert_eq!(row.get::<i64, _>("installs_real"), 1_234_567);
    assert_eq!(
        row.get::<Vec<i64>, _>("histogram"),
        vec![0, 1, 2, 3, i64::MAX]
    );
    assert_eq!(row.get::<f64, _>("price"), 0.0);
    assert_eq!(row.get::<Option<bool>, _>("free"), Some(true));
    assert_eq!(row.get::<String, _>("version"), "2.0");
    assert_eq!(row.get::<String, _>("u"), "2026-10-01 00:00:00+00");
    let row = &stats[1];
    assert_eq!(row.get::<String, _>("c"), "2026-11-02 00:00:00+00");
    assert_eq!(row.get::<Option<String>, _>("title"), None);
    assert_eq!(row.get::<Option<f64>, _>("score"), Some(5.0));
    assert_eq!(row.get::<Option<i64>, _>("ratings"), None);
    assert_eq!(row.get::<Option<Vec<i64>>, _>("histogram"), None);
    assert_eq!(row.get::<Option<bool>, _>("free"), None);
    assert_eq!(row.get::<Option<String>, _>("u"), None);

    let metrics = sqlx::query(
        "SELECT analysis_id::text AS a, application_id, captured_at::text AS c,
                duration_seconds, packet_count, total_bytes, bytes_sent, bytes_received,
                dns_queries, tls_handshakes, plaintext_http_requests, domains
         FROM network_metrics ORDER BY id",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(metrics.len(), 2);
    let row = &metrics[0];
    assert_eq!(
        row.get::<String, _>("a"),
        "00000000-0000-4000-8000-000000000001"
    );
    assert_eq!(row.get::<i64, _>("application_id"), app_id);
    assert_eq!(row.get::<String, _>("c"), "2026-11-02 12:00:00.123456+00");
    assert_eq!(row.get::<f64, _>("duration_seconds"), 12.5);
    assert_eq!(row.get::<i64, _>("packet_count"), i64::MAX);
    assert_eq!(row.get::<i64, _>("total_bytes"), 123_456_789);
    assert_eq!(row.get::<Option<i64>, _>("bytes_sent"), Some(1000));
    assert_eq!(row.get::<Option<i64>, _>("bytes_received"), Some(2000));
    assert_eq!(row.get::<Option<i32>, _>("dns_queries"), Some(i32::MAX));
    assert_eq!(row.get::<Option<i32>, _>("tls_handshakes"), Some(3));
    assert_eq!(
        row.get::<Option<i32>, _>("plaintext_http_requests"),
        Some(0)
    );
    assert_eq!(
        row.get::<Vec<String>, _>("domains"),
        vec!["a.example.com", "b.example.org"]
    );
    let row = &metrics[1];
    assert_eq!(
        row.get::<String, _>("a"),
        "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee",
        "a braced upper-case UUID is stored canonically"
    );
    assert_eq!(row.get::<String, _>("c"), "2026-11-02 08:30:00+00");
    assert_eq!(row.get::<f64, _>("duration_seconds"), 0.0);
    assert_eq!(row.get::<i64, _>("packet_count"), 0);
    assert_eq!(row.get::<Option<i64>, _>("bytes_sent"), None);
    assert_eq!(row.get::<Option<i32>, _>("dns_queries"), None);
    assert_eq!(
        row.get::<Option<Vec<String>>, _>("domains"),
        Some(Vec::new())
    );
}

/// `n` reviews of `app`, one key; the ones at `spam` contain "SPAM".
fn spam_batch(app: &str, n: usize, spam: &[usize]) -> Vec<(usize, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let mut v = review(i, app, "2026-11-03T08:00:00Z", i as i64);
            if spam.contains(&i) {
                v["content"] = json!(format!("buy now SPAM {i}"));
            }
            (i, bytes(&v))
        })
        .collect()
}

/// Asserts the constraint-violation dead letters of `topic`: one per `(offset, needles)`.
async fn assert_violations(
    fx: &Fixture,
    kind: PipelineKind,
    key: &[u8],
    payloads: &[Vec<u8>],
    expected: &[(i64, &[&str])],
) {
    let partition = the_partition(fx, kind, payloads.len());
    let stored = dead_letters(fx, fx.topic(kind)).await;
    let offsets: Vec<i64> = stored.iter().map(|s| s.offset).collect();
    let wanted: Vec<i64> = expected.iter().map(|(o, _)| *o).collect();
    assert_eq!(offsets, wanted, "{kind}: one dead letter per offending row");
    for (row, (offset, needles)) in stored.iter().zip(expected) {
        let payload = &payloads[*offset as usize];
        assert_eq!(row.partition, partition, "@{offset}: partition");
        assert_eq!(row.group, fx.group(kind), "@{offset}: group");
        assert_eq!(row.key.as_deref(), Some(key), "@{offset}: key");
        assert_eq!(row.payload.as_ref(), Some(payload), "@{offset}: payload");
        assert_eq!(row.payload_size as usize, payload.len(), "@{offset}: size");
        assert!(row.has_timestamp, "@{offset}: kafka_timestamp");
        for needle in *needles {
            assert!(
                row.reason.contains(needle),
                "@{offset}: reason {:?} lacks {needle:?}",
                row.reason
            );
        }
        // The kind is checked last so a wrong kind shows its reason above.
        assert_eq!(
            row.kind, "constraint_violation",
            "@{offset}: {}",
            row.reason
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_time_constraint_violation_dead_letters_only_that_row() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let started = Instant::now();
    let apps = app_names(&fx.prefix, 1);
    let app = &apps[0];
    fx.schema.register_apps(&apps).await;
    // A rule the decoder knows nothing about: only the database can reject these rows.
    let mut conn = fx.conn().await;
    sqlx::raw_sql(
        "ALTER TABLE reviews ADD CONSTRAINT no_spam
             CHECK (content IS NULL OR content NOT LIKE '%SPAM%')",
    )
    .execute(&mut conn)
    .await
    .unwrap();

    let n = 20;
    let spam = [4, 13];
    let batch = spam_batch(app, n, &spam);
    let payloads: Vec<Vec<u8>> = batch.iter().map(|(_, p)| p.clone()).collect();
    let key = app.as_bytes().to_vec();
    let records: Vec<sluice_testkit::RawRecord> = payloads
        .iter()
        .map(|p| (Some(key.clone()), Some(p.clone())))
        .collect();
    sluice_testkit::produce(&fx.stack, fx.topic(PipelineKind::Reviews), &records).await;

    let running = fx.start(fx.settings(&[PipelineKind::Reviews], &[]));
    fx.wait_caught_up(PipelineKind::Reviews, Duration::from_secs(45))
        .await;
    let totals = stop(running);
    let t = &totals[&PipelineKind::Reviews];
    assert_eq!(t.batches, 1, "all {n} reviews in one batch");
    assert_eq!(t.report.records, n as u64);
    assert_eq!(t.report.constraint_violations, 2);
    assert_eq!(t.report.decode_errors + t.report.unknown_applications, 0);
    assert_eq!(t.report.write.inserted, (n - spam.len()) as u64);
    assert_eq!(t.report.dead_letters_inserted, 2);
    assert!(t.report.balances(), "{:?}", t.report);

    let ids: Vec<String> = sqlx::query_scalar("SELECT review_id FROM reviews ORDER BY id")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let wanted: Vec<String> = (0..n)
        .filter(|i| !spam.contains(i))
        .map(|i| format!("gp:review-{i}"))
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    let mut wanted_sorted = wanted.clone();
    wanted_sorted.sort();
    assert_eq!(sorted, wanted_sorted, "every other row is written");
    let needles: &[&str] = &["SQLSTATE 23514", "no_spam", "reviews"];
    assert_violations(
        &fx,
        PipelineKind::Reviews,
        &key,
        &payloads,
        &[(4, needles), (13, needles)],
    )
    .await;
    let (end, committed) = fx.offsets(PipelineKind::Reviews);
    assert_eq!(
        (end, committed),
        (n as i64, n as i64),
        "offset moved past all"
    );
    println!(
        "a_write_time_constraint_violation_dead_letters_only_that_row: {:?}",
        started.elapsed()
    );
    fx.cleanup().await;
}

/// A real foreign-key violation, made deterministic through the resolver's cache: the app's
/// id is cached by one batch, the app is deleted, and the next batch still binds the stale
/// id — exactly "its application was deleted between resolve and insert" (docs/ARCHITECTURE.md#errors).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_key_violation_at_write_time_dead_letters_only_that_row() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let started = Instant::now();
    let apps = app_names(&fx.prefix, 2);
    let (doomed, kept) = (&apps[0], &apps[1]);
    fx.schema.register_apps(&apps).await;
    let key = kept.as_bytes().to_vec();
    let kind = PipelineKind::Reviews;
    let mut payloads: Vec<Vec<u8>> = Vec::new();
    let produce = |values: Vec<Value>, payloads: &mut Vec<Vec<u8>>| {
        let records: Vec<sluice_testkit::RawRecord> = values
            .iter()
            .map(|v| {
                let p = bytes(v);
                payloads.push(p.clone());
                (Some(key.clone()), Some(p))
            })
            .collect();
        let fx = &fx;
        async move { sluice_testkit::produce(&fx.stack, fx.topic(kind), &records).await }
    };
    let synced = "2026-11-03T08:00:00Z";

    // Batch 1 caches both ids (a long TTL keeps them cached).
    produce(
        vec![review(0, doomed, synced, 0), review(1, kept, synced, 1)],
        &mut payloads,
    )
    .await;
    let running = fx.start(fx.settings(&[kind], &[("STORAGE_APP_CACHE_TTL_SECONDS", "3600")]));
    fx.wait_caught_up(kind, Duration::from_secs(45)).await;
    assert_eq!(fx.count("SELECT count(*) FROM reviews").await, 2);

    // The App API deletes the app (and, here, the one row that referenced it).
    let mut conn = fx.conn().await;
    sqlx::query("DELETE FROM reviews WHERE review_id = 'gp:review-0'")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("DELETE FROM apps_registry_application WHERE package_name = $1")
        .bind(doomed)
        .execute(&mut conn)
        .await
        .unwrap();

    // Batch 2: the doomed app's review binds the stale cached id and breaks the foreign key.
    let mut second: Vec<Value> = (2..12).map(|i| review(i, kept, synced, 1)).collect();
    second.insert(5, review(100, doomed, synced, 1));
    produce(second, &mut payloads).await;
    fx.wait_caught_up(kind, Duration::from_secs(45)).await;
    let violation_offset = 2 + 5;

    // Batch 3: the App API registers the app again, with a new id: the next review lands
    // (the stale id was forgotten when the foreign key failed).
    fx.schema.register_apps(std::slice::from_ref(doomed)).await;
    produce(vec![review(101, doomed, synced, 1)], &mut payloads).await;
    fx.wait_caught_up(kind, Duration::from_secs(45)).await;
    let totals = stop(running);

    let t = &totals[&kind];
    assert_eq!(t.batches, 3, "three batches");
    assert_eq!(
        t.report.constraint_violations, 0,
        "a stale id is not a constraint violation"
    );
    assert_eq!(t.report.unknown_applications, 1);
    assert_eq!(t.report.write.inserted, 2 + 10 + 1);
    assert!(t.report.balances(), "{:?}", t.report);
    assert_eq!(
        fx.count("SELECT count(*) FROM reviews WHERE review_id <> 'gp:review-0'")
            .await,
        12,
        "gp:review-1, the ten good reviews of batch 2 and gp:review-101"
    );
    assert_eq!(
        fx.count("SELECT count(*) FROM reviews WHERE review_id = 'gp:review-100'")
            .await,
        0
    );

    let stored = dead_letters(&fx, fx.topic(kind)).await;
    let partition = the_partition(&fx, kind, payloads.len());
    assert_eq!(
        stored.iter().map(|s| s.offset).collect::<Vec<_>>(),
        [violation_offset]
    );
    let unknown = &stored[0];
    assert_eq!(unknown.kind, "unknown_application", "{}", unknown.reason);
    assert!(
        unknown.reason.contains("deleted after it was resolved"),
        "{}",
        unknown.reason
    );
    assert!(
        unknown.reason.contains(doomed.as_str()),
        "{}",
        unknown.reason
    );
    assert_eq!(
        unknown.payload.as_ref(),
        Some(&payloads[violation_offset as usize])
    );
    for row in &stored {
        assert_eq!(row.partition, partition);
        assert_eq!(row.group, fx.group(kind));
        assert_eq!(row.key.as_deref(), Some(key.as_slice()));
        assert_eq!(
            row.payload_size as usize,
            row.payload.as_ref().unwrap().len()
        );
    }
    let (end, committed) = fx.offsets(kind);
    assert_eq!((end, committed), (payloads.len() as i64, end));
    println!(
        "a_foreign_key_violation_at_write_time_dead_letters_only_that_row: {:?}",
        started.elapsed()
    );
    fx.cleanup().await;
}

/// Two versions of one review in one batch, the newer one breaking a write-time constraint:
/// the newer is dead-lettered and the older one is stored, exactly as when the two arrive in
/// separate batches (the outcome does not depend on batch boundaries).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_newer_version_does_not_erase_the_older_one_in_the_same_batch() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let apps = app_names(&fx.prefix, 1);
    let app = &apps[0];
    fx.schema.register_apps(&apps).await;
    let mut conn = fx.conn().await;
    sqlx::raw_sql(
        "ALTER TABLE reviews ADD CONSTRAINT no_spam
             CHECK (content IS NULL OR content NOT LIKE '%SPAM%')",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let older = review(1, app, "2026-11-03T08:00:00Z", 1);
    let mut newer = review(1, app, "2026-11-04T08:00:00Z", 2);
    newer["content"] = json!("buy now SPAM");
    fx.produce_json(
        PipelineKind::Reviews,
        &[(app.clone(), older), (app.clone(), newer)],
    )
    .await;
    let running = fx.start(fx.settings(&[PipelineKind::Reviews], &[]));
    fx.wait_caught_up(PipelineKind::Reviews, Duration::from_secs(45))
        .await;
    let totals = stop(running);
    let dead = fx.count("SELECT count(*) FROM dead_letter_events").await;
    let older_rows = fx
        .count("SELECT count(*) FROM reviews WHERE thumbs_up_count = 1")
        .await;
    fx.cleanup().await;
    assert_eq!(totals[&PipelineKind::Reviews].batches, 1);
    let report = totals[&PipelineKind::Reviews].report;
    assert!(report.balances(), "{report:?}");
    assert_eq!(
        (
            report.write.inserted,
            report.write.skipped,
            report.constraint_violations
        ),
        (1, 0, 1)
    );
    assert_eq!(dead, 1);
    assert_eq!(
        older_rows, 1,
        "the older version is stored, as it is when the two arrive in separate batches"
    );
}
