//! One topic, three tables (docs/sinks.md#routes), run by the `sluice` binary against the
//! real Kafka and PostgreSQL: 100,000 records of three types on one topic of three
//! partitions — orders and payments told apart by their `type` field, refunds by an
//! `event-type` header — with unrouted records (a `type` no route takes) and poison (values
//! that are not JSON, a payment whose amount is not a number). Every valid record is a row
//! of its table with its values, every bad record exactly one dead letter of its kind, and
//! each batch is one transaction over the tables its records went to (its `batch committed`
//! line names them).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use support::case::Case;

const RECORDS: usize = 100_000;

const DDL: &str = "
CREATE TABLE orders (id BIGINT PRIMARY KEY, total NUMERIC(10, 2) NOT NULL);
CREATE TABLE payments (id BIGINT PRIMARY KEY, amount BIGINT NOT NULL, method TEXT NOT NULL);
CREATE TABLE refunds (id BIGINT PRIMARY KEY, reason TEXT);";

const MAPPING: &str = r#"
[[sink]]
name = "events"
topic = "{prefix}-events"
batch_size = 500

[[sink.route]]
when = { field = "type", equals = "order.created" }
table = "orders"
columns = "auto"

[[sink.route]]
when = { field = "type", equals = "payment" }
table = "payments"
columns = "auto"

[[sink.route]]
when = { header = "event-type", equals = "refund" }
table = "refunds"
key = ["id"]
columns = { id = { field = "id" }, reason = { field = "reason" } }
"#;

/// What record `i` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Order,
    Payment,
    Refund,
    /// A `type` no route takes.
    Unrouted,
    /// Not JSON.
    NotJson,
    /// A payment whose amount is not a number.
    BadPayment,
}

fn kind(i: usize) -> Kind {
    match (i % 20, i % 40) {
        (9, _) => Kind::Unrouted,
        (19, 19) => Kind::NotJson,
        (19, _) => Kind::BadPayment,
        (r, _) if r % 10 < 4 => Kind::Order,
        (r, _) if r % 10 < 7 => Kind::Payment,
        _ => Kind::Refund,
    }
}

fn record(i: usize) -> sluice_testkit::FullRecord {
    let (value, headers) = match kind(i) {
        Kind::Order => (
            format!(
                r#"{{"type":"order.created","id":{i},"total":{}.25}}"#,
                i % 1000
            ),
            vec![],
        ),
        Kind::Payment => (
            format!(
                r#"{{"type":"payment","id":{i},"amount":{},"method":"card"}}"#,
                i % 500
            ),
            vec![],
        ),
        Kind::Refund => (
            format!(r#"{{"id":{i},"reason":"r{i}"}}"#),
            vec![("event-type".to_owned(), b"refund".to_vec())],
        ),
        Kind::Unrouted => (format!(r#"{{"type":"order.deleted","id":{i}}}"#), vec![]),
        Kind::NotJson => (format!("{{broken {i}"), vec![]),
        Kind::BadPayment => (
            format!(r#"{{"type":"payment","id":{i},"amount":"x","method":"card"}}"#),
            vec![],
        ),
    };
    (
        Some(i.to_string().into_bytes()),
        Some(value.into_bytes()),
        headers,
    )
}

#[tokio::test]
async fn one_topic_lands_in_three_tables_by_field_and_header_with_one_dead_letter_per_bad_record() {
    let Some(case) = Case::with_partitions(&["events"], DDL, MAPPING, 3).await else {
        return;
    };
    let plan = case.assert_valid();
    for line in [
        "route #1 when field `type` = \"order.created\" -> table orders, always-update",
        "route #2 when field `type` = \"payment\" -> table payments",
        "route #3 when header `event-type` = \"refund\" -> table refunds",
        "a record no route takes: a dead letter of kind unrouted",
    ] {
        assert!(plan.contains(line), "{line:?} missing from\n{plan}");
    }
    let records: Vec<_> = (0..RECORDS).map(record).collect();
    case.produce_full("events", &records).await;
    // The sample routes and decodes as the sink would, table by table, before anything runs.
    let file = case.file.display().to_string();
    let sampled = case
        .env
        .output(&["sinks", "validate", "--sample", "2000", &file], &[]);
    let out = support::case::text(&sampled.stdout);
    assert!(
        sampled.status.success(),
        "{out}{}",
        support::case::text(&sampled.stderr)
    );
    for table in ["orders", "payments", "refunds"] {
        assert!(
            out.contains(&format!(" row(s) → table {table}\n")),
            "{table}: {out}"
        );
    }
    assert!(
        out.contains("no route takes the record: field `type` is \"order.deleted\""),
        "{out}"
    );
    let run = case.run_to_end("routes").await;
    // `sluice verify` counts the routes' tables (it failed on the sink's own empty `table`).
    let verified = case
        .env
        .output(&["verify", "--json", "--sinks", &file], &[]);
    let report: serde_json::Value = serde_json::from_slice(&verified.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            support::case::text(&verified.stdout),
            support::case::text(&verified.stderr)
        )
    });
    let written = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|step| step["step"] == "rows written")
        .unwrap_or_else(|| panic!("no rows-written step: {report}"));
    assert_eq!(written["ok"], true, "{report}");
    for table in ["orders", "payments", "refunds"] {
        assert!(
            written["data"][table].as_i64().unwrap_or(0) > 0,
            "{table}: {report}"
        );
    }

    let expected =
        |wanted: Kind| -> Vec<usize> { (0..RECORDS).filter(|i| kind(*i) == wanted).collect() };
    let same =
        |table: &str, stored: Vec<String>, ids: Vec<usize>, row: &dyn Fn(usize) -> String| {
            let wanted: Vec<String> = ids.into_iter().map(row).collect();
            let first_difference = stored.iter().zip(&wanted).find(|(a, b)| a != b);
            assert!(
                stored.len() == wanted.len() && first_difference.is_none(),
                "{table}: {} rows stored, {} expected; first difference (stored, expected): \
             {first_difference:?}",
                stored.len(),
                wanted.len()
            );
        };
    same(
        "orders",
        case.rows("SELECT id || ' ' || total FROM orders ORDER BY id")
            .await,
        expected(Kind::Order),
        &|i| format!("{i} {}.25", i % 1000),
    );
    same(
        "payments",
        case.rows("SELECT id || ' ' || amount || ' ' || method FROM payments ORDER BY id")
            .await,
        expected(Kind::Payment),
        &|i| format!("{i} {} card", i % 500),
    );
    same(
        "refunds",
        case.rows("SELECT id || ' ' || reason FROM refunds ORDER BY id")
            .await,
        expected(Kind::Refund),
        &|i| format!("{i} r{i}"),
    );

    // One dead letter per bad record, of its kind, and none of any other record.
    let dead = case.dead_letters().await;
    let mut by_kind: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for (_, _, kind, _) in &dead {
        by_kind.entry(kind.clone()).or_default();
    }
    let mut conn = case.env.schema.connect().await;
    let letters: Vec<(String, Vec<u8>, String)> = sqlx::query_as(
        "SELECT error_kind, key, reason FROM dead_letter_events ORDER BY error_kind, kafka_offset",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(letters.len(), dead.len());
    for (kind, key, _) in &letters {
        let i: usize = String::from_utf8_lossy(key).parse().unwrap();
        assert!(
            by_kind.get_mut(kind).unwrap().insert(i),
            "record {i} dead-lettered twice"
        );
    }
    let unrouted: Vec<usize> = expected(Kind::Unrouted);
    let mut poison: Vec<usize> = expected(Kind::NotJson);
    poison.extend(expected(Kind::BadPayment));
    poison.sort_unstable();
    assert_eq!(
        by_kind.keys().collect::<Vec<_>>(),
        ["decode_error", "unrouted"],
        "{letters:?}"
    );
    assert_eq!(
        by_kind["unrouted"].iter().copied().collect::<Vec<_>>(),
        unrouted
    );
    assert_eq!(
        by_kind["decode_error"].iter().copied().collect::<Vec<_>>(),
        poison
    );
    let reason_of = |i: usize| {
        letters
            .iter()
            .find(|(_, key, _)| key == i.to_string().as_bytes())
            .map(|(_, _, reason)| reason.clone())
            .unwrap()
    };
    assert!(
        reason_of(9).contains(
            r#"no route takes the record: field `type` is "order.deleted"; header `event-type` is missing"#
        ),
        "{}",
        reason_of(9)
    );
    assert!(reason_of(39).contains("amount"), "{}", reason_of(39));

    // Each batch one transaction, its line naming the tables it wrote; every record in
    // exactly one committed batch.
    let batches = run.events_named("batch committed");
    let records_in: u64 = batches.iter().filter_map(|b| b["records"].as_u64()).sum();
    assert_eq!(records_in, RECORDS as u64, "every record in one batch");
    let all_three = batches
        .iter()
        .filter(|b| {
            let tables = b["tables"].as_str().unwrap_or("");
            ["orders", "payments", "refunds"]
                .iter()
                .all(|t| tables.contains(&format!("\"{t}\"")))
        })
        .count();
    assert!(
        all_three > 0,
        "no batch wrote all three tables in its transaction: {:?}",
        batches
            .iter()
            .map(|b| &b["tables"])
            .take(5)
            .collect::<Vec<_>>()
    );
    let inserted: u64 = batches.iter().filter_map(|b| b["inserted"].as_u64()).sum();
    let dead_lettered: u64 = batches
        .iter()
        .filter_map(|b| b["dead_lettered"].as_u64())
        .sum();
    assert_eq!(
        (inserted, dead_lettered),
        (
            (expected(Kind::Order).len()
                + expected(Kind::Payment).len()
                + expected(Kind::Refund).len()) as u64,
            (unrouted.len() + poison.len()) as u64
        )
    );
    case.cleanup().await;
}
