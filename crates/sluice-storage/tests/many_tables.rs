//! A sink of many tables through the storage consumer's own batch path on the real
//! PostgreSQL, without Kafka (docs/sinks.md#many-tables): records of one batch name three
//! tables by their topics (`topic_pattern` capture `{1}`); the two that exist are planned
//! when first met and written in the batch's one transaction, the one that does not exist
//! dead-letters its records as `unknown_table` while the others go on; once it is created it
//! is looked up again after the wait, and its records land. Debezium events name their table
//! by their source block.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use std::time::Duration;

use serde_json::json;
use sluice_kafka::Record;
use sluice_sinks::parse_sinks;
use sluice_storage::batch::{DecodedBatch, Done, Stored, decode_batch, store_batch};
use sluice_storage::sink::{MISSING_FOR, Route, Tables};
use sluice_testkit::TestSchema;
use sqlx::PgConnection;

const GROUP: &str = "storage-consumer.many";

async fn migrated(stack: &sluice_testkit::Stack, ddl: &str) -> (TestSchema, PgConnection) {
    let schema = TestSchema::create(stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate(&mut conn, "apps_registry_application")
        .await
        .expect("migrate");
    sqlx::raw_sql(ddl).execute(&mut conn).await.unwrap();
    (schema, conn)
}

fn record(topic: &str, offset: i64, value: &serde_json::Value) -> Record {
    Record {
        payload: Some(value.to_string().into_bytes()),
        ..Record::at(topic, 0, offset)
    }
}

/// `records` decoded with every table they name planned, as a writer does before storing.
async fn decoded(conn: &mut PgConnection, tables: &Tables, records: &[Record]) -> DecodedBatch {
    let mut decoded = decode_batch(tables, records);
    while !decoded.pending_tables.is_empty() {
        tables.plan(conn, &decoded.pending_tables).await.unwrap();
        decoded = decode_batch(tables, records);
    }
    decoded
}

async fn store(conn: &mut PgConnection, records: &[Record], decoded: &DecodedBatch) -> Done {
    let (origins, committed) = (Vec::new(), Default::default());
    match store_batch(conn, GROUP, (records, decoded, &origins), &committed)
        .await
        .unwrap()
    {
        Stored::Done(done) => done,
        other => panic!("{other:?}"),
    }
}

fn tables_of(mapping: &str) -> Tables {
    let sinks = parse_sinks("many.toml", mapping).unwrap();
    assert!(sluice_sinks::check_sinks("many.toml", &sinks).is_empty());
    Tables::named(sinks[0].clone(), Duration::from_secs(60), None).unwrap()
}

async fn rows(conn: &mut PgConnection, sql: &str) -> Vec<String> {
    sqlx::query_scalar(sql).fetch_all(conn).await.unwrap()
}

const DDL: &str = "
CREATE TABLE raw_orders (id BIGINT PRIMARY KEY, total NUMERIC(10, 2), note TEXT);
CREATE TABLE raw_users (id BIGINT, name TEXT NOT NULL, PRIMARY KEY (id));";

const MAPPING: &str = r#"
[[sink]]
name = "raw"
topic_pattern = "src\\.(\\w+)"
table = "raw_{1}"
columns = "auto"
"#;

#[tokio::test]
async fn records_name_their_tables_and_a_missing_one_waits_as_dead_letters() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let (schema, mut conn) = migrated(&stack, DDL).await;
    let tables = tables_of(MAPPING);
    let batch = [
        record(
            "src.orders",
            0,
            &json!({"id": 1, "total": 9.5, "note": "a"}),
        ),
        record(
            "src.users",
            0,
            &json!({"id": 1, "name": "ann", "extra": true}),
        ),
        record("src.items", 0, &json!({"id": 7})),
        record("src.orders", 1, &json!({"id": 2, "total": 1.25})),
        // A bad record of a good table: its own dead letter, nothing else changes.
        record("src.users", 1, &json!({"id": 2})),
        record("src.items", 1, &json!({"id": 8})),
    ];
    let first = decoded(&mut conn, &tables, &batch).await;
    // Runs of one table in record order: orders, users, orders.
    let runs: Vec<&str> = first
        .groups
        .iter()
        .map(|g| g.sink.plan().table.as_str())
        .collect();
    assert_eq!(runs, ["raw_orders", "raw_users", "raw_orders"]);
    let done = store(&mut conn, &batch, &first).await;
    assert_eq!(done.report.write.inserted, 3, "{:?}", done.report);
    assert_eq!(done.dead.len(), 3, "{:?}", done.dead);
    assert_eq!(
        rows(
            &mut conn,
            "SELECT id || ' ' || total || ' ' || coalesce(note, '-') FROM raw_orders ORDER BY id"
        )
        .await,
        ["1 9.50 a", "2 1.25 -"]
    );
    assert_eq!(
        rows(&mut conn, "SELECT id || ' ' || name FROM raw_users").await,
        ["1 ann"]
    );
    let dead: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT topic::text, error_kind::text, reason FROM dead_letter_events ORDER BY topic, kafka_offset",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(dead.len(), 3, "{dead:?}");
    assert_eq!(
        (dead[0].0.as_str(), dead[0].1.as_str()),
        ("src.items", "unknown_table")
    );
    assert!(
        dead[0].2.contains("table `raw_items` does not exist"),
        "{dead:?}"
    );
    assert_eq!(dead[2].1, "decode_error");
    assert!(dead[2].2.contains("name"), "{dead:?}");

    // Created: within the wait its records are still dead letters (nothing asks the
    // catalog per record); after it, the table is planned and written.
    sqlx::raw_sql("CREATE TABLE raw_items (id BIGINT PRIMARY KEY)")
        .execute(&mut conn)
        .await
        .unwrap();
    let next = [record("src.items", 2, &json!({"id": 9}))];
    let still = decoded(&mut conn, &tables, &next).await;
    assert_eq!((still.groups.len(), still.rejected.len()), (0, 1));
    tokio::time::sleep(MISSING_FOR + Duration::from_millis(200)).await;
    let later = decoded(&mut conn, &tables, &next).await;
    assert_eq!(later.groups.len(), 1, "{later:?}");
    store(&mut conn, &next, &later).await;
    assert_eq!(
        rows(&mut conn, "SELECT id::text FROM raw_items").await,
        ["9"]
    );
    drop(conn);
    schema.drop_schema().await;
}

#[tokio::test]
async fn change_events_name_their_table_by_their_source_block() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    // The source schema is the test's own schema (its name is unique).
    let ddl = "CREATE TABLE orders (id BIGINT PRIMARY KEY, total INT);
        CREATE TABLE \"select\" (k TEXT PRIMARY KEY, v INT);";
    let (schema, mut conn) = migrated(&stack, ddl).await;
    let shop = schema.name.clone();
    let tables = tables_of(
        r#"
[[sink]]
name = "cdc"
topic_pattern = "cdc\\..*"
table = "{source.schema}.{source.table}"
format = "debezium"
columns = "auto"
"#,
    );
    let event = |table: &str, after: serde_json::Value| {
        json!({"before": null, "after": after, "op": "c", "ts_ms": 1,
            "source": {"schema": shop, "table": table, "lsn": 10}})
    };
    let batch = [
        record(
            "cdc.shop.orders",
            0,
            &event("orders", json!({"id": 1, "total": 5})),
        ),
        record(
            "cdc.shop.select",
            0,
            &event("select", json!({"k": "x", "v": 2})),
        ),
        // A tombstone names no table: ignored, as a Debezium sink ignores tombstones.
        Record::at("cdc.shop.orders", 0, 1),
        record("cdc.shop.gone", 0, &event("gone", json!({"id": 3}))),
    ];
    let decoded = decoded(&mut conn, &tables, &batch).await;
    let done = store(&mut conn, &batch, &decoded).await;
    assert_eq!(done.report.write.inserted, 2, "{:?}", done.report);
    assert_eq!(done.report.write.skipped, 1, "{:?}", done.report);
    assert_eq!(done.dead.len(), 1, "{:?}", done.dead);
    let gone = format!("`{shop}.gone` does not exist");
    assert!(done.dead[0].reason.contains(&gone), "{:?}", done.dead);
    assert_eq!(
        rows(&mut conn, "SELECT id || ' ' || total FROM orders").await,
        ["1 5"]
    );
    assert_eq!(
        rows(&mut conn, "SELECT k || ' ' || v FROM \"select\"").await,
        ["x 2"]
    );
    drop(conn);
    schema.drop_schema().await;
}

#[tokio::test]
async fn one_partitions_changes_to_several_tables_apply_in_their_order() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    // A child row refers to its parent; the parent's delete sets it to NULL. Applied out of
    // order (both parent changes first), the child would break the foreign key.
    let ddl = "CREATE TABLE parent (id BIGINT PRIMARY KEY);
        CREATE TABLE child (id BIGINT PRIMARY KEY,
            parent_id BIGINT REFERENCES parent (id) ON DELETE SET NULL);";
    let (schema, mut conn) = migrated(&stack, ddl).await;
    let src = schema.name.clone();
    let tables = tables_of(
        r#"
[[sink]]
name = "cdc"
topic = "cdc.all"
table = "{source.schema}.{source.table}"
format = "debezium"
columns = "auto"
"#,
    );
    let event = |table: &str, op: &str, before: serde_json::Value, after: serde_json::Value| {
        json!({"before": before, "after": after, "op": op, "ts_ms": 1,
            "source": {"schema": src, "table": table, "lsn": 10}})
    };
    let null = serde_json::Value::Null;
    let batch = [
        record(
            "cdc.all",
            0,
            &event("parent", "c", null.clone(), json!({"id": 1})),
        ),
        record(
            "cdc.all",
            1,
            &event("child", "c", null.clone(), json!({"id": 5, "parent_id": 1})),
        ),
        record(
            "cdc.all",
            2,
            &event("parent", "d", json!({"id": 1}), null.clone()),
        ),
    ];
    let decoded = decoded(&mut conn, &tables, &batch).await;
    assert_eq!(
        decoded.groups.len(),
        3,
        "runs of one table each, in record order"
    );
    let done = store(&mut conn, &batch, &decoded).await;
    assert!(done.dead.is_empty(), "{:?}", done.dead);
    assert_eq!(
        rows(
            &mut conn,
            "SELECT id || ' ' || coalesce(parent_id::text, 'null') FROM child"
        )
        .await,
        ["5 null"]
    );
    assert!(
        rows(&mut conn, "SELECT id::text FROM parent")
            .await
            .is_empty()
    );
    drop(conn);
    schema.drop_schema().await;
}

#[tokio::test]
async fn a_table_dropped_after_it_was_planned_is_planned_again() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let (schema, mut conn) = migrated(&stack, DDL).await;
    let tables = tables_of(MAPPING);
    let batch = [
        record("src.orders", 0, &json!({"id": 1, "total": 1})),
        record("src.users", 0, &json!({"id": 1, "name": "ann"})),
    ];
    let first = decoded(&mut conn, &tables, &batch).await;
    // Dropped between planning and writing: nothing of the batch is committed.
    sqlx::raw_sql("DROP TABLE raw_users")
        .execute(&mut conn)
        .await
        .unwrap();
    let (origins, committed) = (Vec::new(), Default::default());
    let stored = store_batch(&mut conn, GROUP, (&batch, &first, &origins), &committed)
        .await
        .unwrap();
    let Stored::TableGone(gone) = stored else {
        panic!("{stored:?}");
    };
    assert_eq!(gone.table, "raw_users");
    assert!(
        rows(&mut conn, "SELECT id::text FROM raw_orders")
            .await
            .is_empty()
    );
    // Forgotten, planned again: missing now, so its record is a dead letter and the other
    // table's is written.
    assert!(tables.forget(&gone.table));
    let again = decoded(&mut conn, &tables, &batch).await;
    let done = store(&mut conn, &batch, &again).await;
    assert_eq!(done.report.write.inserted, 1, "{:?}", done.report);
    assert_eq!(done.dead.len(), 1);
    assert!(
        done.dead[0].reason.contains("`raw_users` does not exist"),
        "{:?}",
        done.dead
    );
    assert_eq!(
        rows(&mut conn, "SELECT id::text FROM raw_orders").await,
        ["1"]
    );
    drop(conn);
    schema.drop_schema().await;
}

/// Routes never skip what they cannot read: a key a condition cannot read is a dead letter
/// (not "no route", which `unrouted = "ignore"` skips), a Connect tombstone follows the
/// sink's tombstone rule, a Kafka tombstone of a deleting sink that no route takes is an
/// `unrouted` dead letter even with `unrouted = "ignore"`.
#[test]
fn routes_skip_only_what_the_sink_says_to_skip() {
    let tables = |extra: &str| {
        tables_of(&format!(
            "[[sink]]\nname = \"r\"\ntopic = \"t\"\nunrouted = \"ignore\"\n{extra}\n\
             [[sink.route]]\nwhen = {{ field = \"type\", equals = \"a\" }}\ntable = \"a\"\n\
             columns = \"auto\"\n\
             [[sink.route]]\nwhen = {{ key = \"region\", equals = \"eu\" }}\ntable = \"b\"\n\
             columns = \"auto\"\n"
        ))
    };
    let at = |key: &[u8], payload: Option<&[u8]>| Record {
        key: Some(key.to_vec()),
        payload: payload.map(<[u8]>::to_vec),
        ..Record::at("t", 0, 0)
    };
    let json = tables("");
    // Not JSON: the key condition cannot read it.
    let route = json.route(&at(b"plain", Some(br#"{"type": "b"}"#)));
    assert!(
        matches!(&route, Route::Undecodable(reason) if reason.starts_with("record key:")),
        "{route:?}"
    );
    // A key that reads but lacks the path: no route, skipped as the sink says.
    let route = json.route(&at(br#"{"id": 1}"#, Some(br#"{"type": "b"}"#)));
    assert!(matches!(route, Route::Ignore), "{route:?}");
    let route = json.route(&at(br#"{"region": "eu"}"#, Some(br#"{"type": "b"}"#)));
    assert!(
        matches!(route, Route::Plan(ref p) if p.set == 1 && p.table == "b"),
        "{route:?}"
    );
    // A Kafka tombstone of a sink that dead-letters tombstones and ignores the unrouted:
    // skipped; of a sink that deletes: a dead letter naming why.
    let route = json.route(&at(br#"{"id": 1}"#, None));
    assert!(matches!(route, Route::Ignore), "{route:?}");
    let deleting = tables("on_tombstone = \"delete\"");
    let route = deleting.route(&at(br#"{"id": 1}"#, None));
    assert!(
        matches!(&route, Route::Unrouted(reason)
            if reason.starts_with("no route takes the tombstone (its delete has no table)")),
        "{route:?}"
    );
    // A Connect tombstone is a tombstone: ignored by a sink that ignores tombstones.
    let connect = tables("format = \"connect-json\"\non_tombstone = \"ignore\"");
    let route = connect.route(&at(
        br#"{"id": 1}"#,
        Some(br#"{"schema": null, "payload": null}"#),
    ));
    assert!(matches!(route, Route::Ignore), "{route:?}");
    let connect = tables("format = \"connect-json\"\non_tombstone = \"delete\"");
    let route = connect.route(&at(
        br#"{"id": 1}"#,
        Some(br#"{"schema": null, "payload": null}"#),
    ));
    assert!(matches!(route, Route::Unrouted(_)), "{route:?}");
}
