//! Debezium change events through the storage consumer's own batch path (decode → bind →
//! de-duplicate → the sink's statements with savepoint isolation → dead letters → COMMIT) on
//! the real PostgreSQL, in batches of a fixed size: what the records of one partition leave
//! in the table does not depend on where the batches end (docs/ARCHITECTURE.md#sinks).
//!
//! The events are the real connector's (`sluice-cli/tests/data/debezium`, headers included).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use std::time::Duration;

use sluice_core::sinks::{parse_sinks, plan_sink};
use sluice_kafka::Record;
use sluice_postgres::catalog::sink_tables;
use sluice_storage::batch::{Stored, decode_batch, store_batch};
use sluice_storage::sink::Declared;
use sluice_testkit::TestSchema;
use sqlx::PgConnection;

const APPS: &str = "apps_registry_application";
const GROUP: &str = "storage-consumer.debezium";

async fn migrated(stack: &sluice_testkit::Stack, ddl: &str) -> (TestSchema, PgConnection) {
    let schema = TestSchema::create(stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate(&mut conn, APPS)
        .await
        .expect("migrate");
    sqlx::raw_sql(ddl).execute(&mut conn).await.unwrap();
    (schema, conn)
}

/// The one sink of `mapping`, planned against `conn`'s schema.
async fn sink(conn: &mut PgConnection, mapping: &str) -> Declared {
    let sinks = parse_sinks("debezium.toml", mapping).unwrap();
    let tables = sink_tables(conn, &sinks).await.unwrap();
    let plan =
        plan_sink(&sinks[0], "storage-consumer", &tables).unwrap_or_else(|e| panic!("{e:?}"));
    Declared::new(&sinks[0], plan, Duration::from_secs(60)).unwrap()
}

/// `records` in batches of `batch` (the offsets are the records' own), each in its own
/// transaction.
async fn store_all(conn: &mut PgConnection, sink: &Declared, records: &[Record], batch: usize) {
    for chunk in records.chunks(batch) {
        let decoded = decode_batch(sink, chunk);
        let stored = store_batch(conn, sink, GROUP, chunk, &decoded, &Default::default())
            .await
            .expect("store the batch");
        assert!(matches!(stored, Stored::Done(..)), "{stored:?}");
    }
}

/// (offset, kind, reason) of every dead letter.
async fn dead_letters(conn: &mut PgConnection) -> Vec<(i64, String, String)> {
    sqlx::query_as(
        "SELECT kafka_offset, error_kind, reason FROM dead_letter_events ORDER BY kafka_offset",
    )
    .fetch_all(conn)
    .await
    .expect("dead letters")
}

async fn rows(conn: &mut PgConnection, sql: &str) -> Vec<String> {
    sqlx::query_scalar(sql).fetch_all(conn).await.unwrap()
}

/// A record of partition 0 at `offset`.
fn record(topic: &str, offset: i64, key: &str, value: Option<serde_json::Value>) -> Record {
    Record {
        key: Some(key.as_bytes().to_vec()),
        payload: value.map(|v| v.to_string().into_bytes()),
        ..Record::at(topic, 0, offset)
    }
}

const PAIRS_DDL: &str = "CREATE TABLE pairs (a BIGINT, b BIGINT, v TEXT NOT NULL, \
                         UNIQUE NULLS NOT DISTINCT (a, b))";

const PAIRS: &str = r#"
[[sink]]
name = "pairs"
topic = "pairs"
table = "pairs"
key = ["a", "b"]
conflict = "always-update"
on_tombstone = "delete"
[sink.columns]
a = { key = "a" }
b = { key = "b" }
v = { field = "v" }
"#;

/// A tombstone deletes the row of its key when a key part is NULL (`UNIQUE NULLS NOT
/// DISTINCT`): the key matches as the unique index matches it.
#[tokio::test]
async fn a_tombstone_deletes_a_row_whose_key_has_a_null_part() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let (schema, mut conn) = migrated(&stack, PAIRS_DDL).await;
    let sink = sink(&mut conn, PAIRS).await;
    let v = |v: &str| Some(serde_json::json!({ "v": v }));
    let records = [
        record("pairs", 0, r#"{"a":1,"b":null}"#, v("one")),
        record("pairs", 1, r#"{"a":2,"b":7}"#, v("two")),
        record("pairs", 2, r#"{"a":null,"b":null}"#, v("nulls")),
        record("pairs", 3, r#"{"a":1,"b":null}"#, None),
        record("pairs", 4, r#"{"a":2,"b":7}"#, None),
        record("pairs", 5, r#"{"a":null,"b":null}"#, None),
    ];
    store_all(&mut conn, &sink, &records, 3).await;
    let left = rows(
        &mut conn,
        "SELECT concat_ws(',', coalesce(a::text, 'NULL'), coalesce(b::text, 'NULL'), v) FROM pairs",
    )
    .await;
    assert_eq!(
        left,
        Vec::<String>::new(),
        "every tombstone deletes its row"
    );
    assert_eq!(dead_letters(&mut conn).await, []);
    drop(conn);
    schema.drop_schema().await;
}
