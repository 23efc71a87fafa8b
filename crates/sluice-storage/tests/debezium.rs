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

use sluice_kafka::Record;
use sluice_postgres::catalog::sink_tables;
use sluice_sinks::{parse_sinks, plan_sink};
use sluice_storage::batch::{Stored, decode_batch, store_batch};
use sluice_storage::sink::{Declared, Tables};
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
async fn sink(conn: &mut PgConnection, mapping: &str) -> Tables {
    let sinks = parse_sinks("debezium.toml", mapping).unwrap();
    let tables = sink_tables(conn, &sinks).await.unwrap();
    let plan =
        plan_sink(&sinks[0], "storage-consumer", &tables).unwrap_or_else(|e| panic!("{e:?}"));
    Tables::fixed(Declared::new(&sinks[0], plan, Duration::from_secs(60)).unwrap())
}

/// `records` in batches of `batch` (the offsets are the records' own), each in its own
/// transaction.
async fn store_all(conn: &mut PgConnection, sink: &Tables, records: &[Record], batch: usize) {
    for chunk in records.chunks(batch) {
        let decoded = decode_batch(sink, chunk);
        let (origins, committed) = (Vec::new(), Default::default());
        let stored = store_batch(conn, GROUP, (chunk, &decoded, &origins), &committed)
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

/// The real connector's events (`sluice-cli/tests/data/debezium/<name>.*`) as records of
/// partition 0 of `topic`, offsets from 0.
fn captured(topic: &str, names: &[&str]) -> Vec<Record> {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sluice-cli/tests/data/debezium");
    names
        .iter()
        .enumerate()
        .map(|(offset, name)| {
            let read = |ext: &str| std::fs::read(dir.join(format!("{name}.{ext}"))).ok();
            let headers: serde_json::Value =
                serde_json::from_slice(&read("headers.json").unwrap()).unwrap();
            let headers = headers["headers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| {
                    (
                        h[0].as_str().unwrap().to_owned(),
                        h[1].as_str().map(|v| v.as_bytes().to_vec()),
                    )
                })
                .collect();
            Record {
                key: read("key.json"),
                payload: read("value.json"),
                headers,
                ..Record::at(topic, 0, offset as i64)
            }
        })
        .collect()
}

const ITEMS_DDL: &str = "CREATE TABLE items (id BIGINT PRIMARY KEY, \
                         title TEXT CHECK (title IS DISTINCT FROM 'poison'), amount NUMERIC(12,2), \
                         doc JSONB, big TEXT, nested TEXT, lsn BIGINT, ts BIGINT)";

/// The fixtures' table; `nested` reads a path into the TOASTed-able `doc`.
fn items_sink(conflict: &str) -> String {
    format!(
        r#"
[[sink]]
name = "items"
topic = "items"
table = "items"
key = ["id"]
format = "debezium"
conflict = {conflict}
[sink.columns]
id = {{ field = "id" }}
title = {{ field = "title" }}
amount = {{ field = "amount" }}
doc = {{ field = "doc" }}
big = {{ field = "big" }}
nested = {{ field = "doc.nested.k" }}
lsn = {{ cdc = "lsn" }}
ts = {{ cdc = "ts_ms" }}
"#
    )
}

/// A kept column whose stored value is NULL (a path into the document the row did not have)
/// keeps its NULL: the update that keeps it is applied, not dead-lettered.
#[tokio::test]
async fn a_kept_column_whose_stored_value_is_null_stays_null() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let (schema, mut conn, sink) = items_case(&stack, r#"{ newest-wins = "lsn" }"#).await;
    // Row 1's snapshot: its doc has no `nested.k`, so `nested` is stored NULL. Then an update
    // of row 1 whose doc is the placeholder (an unchanged TOASTed jsonb): `nested` is kept.
    let mut records = captured("items", &["00-read-id1-snapshot"]);
    let update: serde_json::Value =
        serde_json::from_slice(records[0].payload.as_deref().unwrap()).unwrap();
    let mut update = update;
    let payload = &mut update["payload"];
    payload["op"] = "u".into();
    payload["source"]["lsn"] = (payload["source"]["lsn"].as_i64().unwrap() + 100).into();
    payload["after"]["title"] = "updated, doc untouched".into();
    payload["after"]["doc"] = "__debezium_unavailable_value".into();
    records.push(Record {
        key: records[0].key.clone(),
        payload: Some(update.to_string().into_bytes()),
        ..Record::at("items", 0, 1)
    });
    store_all(&mut conn, &sink, &records, 1).await;
    assert_eq!(dead_letters(&mut conn).await, []);
    assert_eq!(
        rows(
            &mut conn,
            "SELECT concat_ws('|', id, title, doc->>'n', coalesce(nested, 'NULL')) FROM items"
        )
        .await,
        ["1|updated, doc untouched|1.50|NULL"]
    );
    drop(conn);
    schema.drop_schema().await;
}

/// The fixtures of a key change: row 1's snapshot, row 2's create and its update that leaves
/// `big` unsent, the key change 2 → 3 (`d` of 2 with `__debezium.newkey`, its tombstone, `c`
/// of 3 with `__debezium.oldkey` and `big` unsent).
const KEY_CHANGE: [&str; 6] = [
    "00-read-id1-snapshot",
    "01-create-id2",
    "02-update-id2-toast-placeholder",
    "03-delete-id2-pk-update",
    "04-tombstone-id2-pk-update",
    "05-create-id3-pk-update",
];

/// The value of a captured record, as JSON.
fn value(record: &Record) -> serde_json::Value {
    serde_json::from_slice(record.payload.as_deref().unwrap()).unwrap()
}

/// A create of `id` like `like` (a create) at `offset`, with `title`, `big`, and `ts_ms`,
/// its LSN past every fixture's.
fn create(like: &Record, offset: i64, id: i64, title: &str, big: &str, ts_ms: i64) -> Record {
    let mut event = value(like);
    let payload = &mut event["payload"];
    payload["after"]["id"] = id.into();
    payload["after"]["title"] = title.into();
    payload["after"]["big"] = big.into();
    payload["ts_ms"] = ts_ms.into();
    payload["source"]["lsn"] = (payload["source"]["lsn"].as_i64().unwrap() + 10_000).into();
    Record {
        key: Some(format!(r#"{{"schema":null,"payload":{{"id":{id}}}}}"#).into_bytes()),
        payload: Some(event.to_string().into_bytes()),
        ..Record::at(&like.topic, 0, offset)
    }
}

/// The `big` of a captured create or update.
fn big_of(record: &Record) -> String {
    value(record)["payload"]["after"]["big"]
        .as_str()
        .expect("a big")
        .to_owned()
}

/// `id | title | md5(big)` of every row.
async fn items(conn: &mut PgConnection) -> Vec<String> {
    rows(
        conn,
        "SELECT concat_ws(' | ', id, title, md5(big)) FROM items ORDER BY id",
    )
    .await
}

fn md5_of(text: &str) -> String {
    let out = std::process::Command::new("md5sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(text.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..32].to_owned()
}

/// A key change whose `c` keeps a TOASTed value takes it from the old row, wherever the
/// batches end (the `d` of the old key applied in an earlier batch than the `c`), and when a
/// poison row in the batch sends it down the savepoint isolation path.
#[tokio::test]
async fn a_key_change_keeps_its_toasted_value_wherever_the_batches_end() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let records = captured("items", &KEY_CHANGE);
    let big = big_of(&records[1]);
    let expected = [
        format!("1 | snapshot row | {}", md5_of(&big_of(&records[0]))),
        format!("3 | key changed 2 -> 3 | {}", md5_of(&big)),
    ];
    let mut poisoned = records.clone();
    poisoned.push(create(&records[1], 6, 9, "poison", "x", 0));
    for (label, records, batch) in [
        ("batch_size 1", &records, 1),
        ("batch_size 2", &records, 2),
        ("batch_size 4", &records, 4),
        ("poison, batches of 3 and 4", &poisoned, 3),
        ("poison, batches of 4 and 3", &poisoned, 4),
        ("poison, one batch", &poisoned, 7),
    ] {
        let (schema, mut conn, sink) = items_case(&stack, r#"{ newest-wins = "lsn" }"#).await;
        store_all(&mut conn, &sink, records, batch).await;
        let dead: Vec<(i64, String)> = dead_letters(&mut conn)
            .await
            .into_iter()
            .map(|(offset, kind, _)| (offset, kind))
            .collect();
        let poison = if records.len() == 7 {
            vec![(6, "constraint_violation".to_owned())]
        } else {
            Vec::new()
        };
        assert_eq!(dead, poison, "{label}");
        assert_eq!(items(&mut conn).await, expected, "{label}");
        assert_eq!(
            aside(&mut conn).await,
            (1, 0),
            "{label}: what the delete set aside was read and kept for a replay"
        );
        drop(conn);
        schema.drop_schema().await;
    }
}

/// A key change and a re-insert of the old key in one batch: the batch ends as its records
/// applied one by one — rows 1, 2 (re-inserted) and 3 (with the old row 2's TOASTed value) —
/// under every conflict policy, also when a poison row sends it down the isolation path.
#[tokio::test]
async fn a_key_change_and_a_reinsert_of_the_old_key_in_one_batch_keep_both_rows() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let mut records = captured("items", &KEY_CHANGE);
    let big = big_of(&records[1]);
    // The re-insert in the key change's source transaction: the same `ts_ms` as its `d`.
    let ts_ms = value(&records[3])["payload"]["ts_ms"].as_i64().unwrap();
    records.push(create(
        &records[1],
        6,
        2,
        "re-inserted",
        "another big",
        ts_ms,
    ));
    let expected = [
        format!("1 | snapshot row | {}", md5_of(&big_of(&records[0]))),
        format!("2 | re-inserted | {}", md5_of("another big")),
        format!("3 | key changed 2 -> 3 | {}", md5_of(&big)),
    ];
    let mut poisoned = records.clone();
    poisoned.push(create(&records[1], 7, 9, "poison", "x", 0));
    for conflict in [
        r#""always-update""#,
        r#""insert-ignore""#,
        r#"{ newest-wins = "ts" }"#,
        r#"{ newest-wins = "lsn" }"#,
    ] {
        for (records, batch) in [(&records, 7), (&poisoned, 8), (&poisoned, 4)] {
            let label = format!("{conflict}, batches of {batch}, {} records", records.len());
            let (schema, mut conn, sink) = items_case(&stack, conflict).await;
            store_all(&mut conn, &sink, records, batch).await;
            let dead: Vec<i64> = dead_letters(&mut conn)
                .await
                .into_iter()
                .map(|(offset, _, _)| offset)
                .collect();
            let poison: Vec<i64> = if records.len() == 8 {
                vec![7]
            } else {
                Vec::new()
            };
            assert_eq!(dead, poison, "{label}");
            assert_eq!(items(&mut conn).await, expected, "{label}");
            drop(conn);
            schema.drop_schema().await;
        }
    }
}

/// Key 2's partition re-sent from the key change's delete after the old key was re-inserted
/// (a capture's restart while the new key's partition lags): c(2) big A, u(2), d(2 → 3),
/// tombstone, c(2) re-insert big B, then d(2 → 3) and its tombstone again, and only then c(3,
/// oldkey 2). The replayed delete finds the re-insert (newer, so kept) and must not set it
/// aside in place of the old row its first copy set aside: row 3 gets big A, row 2 keeps B.
#[tokio::test]
async fn a_key_change_replayed_after_a_reinsert_of_the_old_key_keeps_the_first_old_row() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let big_a = big_of(&fixtures[1]);
    let mut records: Vec<Record> = fixtures[..5].to_vec();
    records.push(create(&fixtures[1], 5, 2, "re-inserted", "another big", 0));
    records.push(moved(&fixtures[3], 0, 6, 0));
    records.push(moved(&fixtures[4], 0, 7, 0));
    records.push(moved(&fixtures[5], 0, 8, 0));
    let expected = [
        format!("1 | snapshot row | {}", md5_of(&big_of(&fixtures[0]))),
        format!("2 | re-inserted | {}", md5_of("another big")),
        format!("3 | key changed 2 -> 3 | {}", md5_of(&big_a)),
    ];
    for batch in [1, 4, 9] {
        let label = format!("batches of {batch}");
        let (schema, mut conn, sink) = items_case(&stack, r#"{ newest-wins = "lsn" }"#).await;
        store_all(&mut conn, &sink, &records, batch).await;
        assert_eq!(dead_letters(&mut conn).await, [], "{label}");
        assert_eq!(items(&mut conn).await, expected, "{label}");
        assert_eq!(held(&mut conn).await, 0, "{label}");
        drop(conn);
        schema.drop_schema().await;
    }
}

/// `record` (a captured event) at `partition`/`offset` with its LSN moved by `lsn_by`.
fn moved(record: &Record, partition: i32, offset: i64, lsn_by: i64) -> Record {
    with_source(record, partition, offset, |source| {
        source["lsn"] = (source["lsn"].as_i64().unwrap() + lsn_by).into();
    })
}

/// `record` at `partition`/`offset`, its event's `source` block changed by `edit` (a
/// tombstone stays a tombstone).
fn with_source(
    record: &Record,
    partition: i32,
    offset: i64,
    edit: impl FnOnce(&mut serde_json::Value),
) -> Record {
    let payload = record.payload.as_ref().map(|_| {
        let mut event = value(record);
        edit(&mut event["payload"]["source"]);
        event.to_string().into_bytes()
    });
    Record {
        key: record.key.clone(),
        payload,
        headers: record.headers.clone(),
        ..Record::at(&record.topic, partition, offset)
    }
}

/// Key 2's records in partition 0 and key 3's in partition 1: twice the key change 2 → 3,
/// each time its `c` applied before its `d`. The `c` waits (it keeps a TOASTed value its `d`
/// has not set aside yet) and the `d` applies it: the first reads big A, the second the
/// re-inserted row 2's big B, each its own old row as its `d` found it; nothing is left
/// waiting or set aside.
#[tokio::test]
async fn a_key_change_applied_create_first_twice_reads_its_own_old_row() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let delete3 = captured("items", &["06-delete-id3"]);
    let at = |record: &Record, offset| moved(record, 0, offset, 0);
    // Partition 0: c(2) big A, u(2), d(2 → 3), tombstone, c(2) big B, d(2 → 3) again.
    let second = 20_000;
    let reinsert = create(&fixtures[1], 4, 2, "re-inserted", "big B", 0);
    let key2 = [
        at(&fixtures[1], 0),
        at(&fixtures[2], 1),
        at(&fixtures[3], 2),
        at(&fixtures[4], 3),
        reinsert,
        moved(&fixtures[3], 0, 5, second),
    ];
    // Partition 1: c(3) of the first change, d(3), c(3) of the second.
    let key3 = [
        moved(&fixtures[5], 1, 0, 0),
        moved(&delete3[0], 1, 1, 0),
        moved(&fixtures[5], 1, 2, second),
    ];
    let (schema, mut conn, sink) = items_case(&stack, r#""always-update""#).await;
    let big_a = big_of(&fixtures[1]);
    let row3_a = format!("3 | key changed 2 -> 3 | {}", md5_of(&big_a));
    let row3_b = format!("3 | key changed 2 -> 3 | {}", md5_of("big B"));
    // (the batch, row 3 after it, rows waiting after it)
    for (step, (batch, row3, waiting)) in [
        (&key2[..2], None, 0),
        (&key3[..1], None, 1),
        (&key2[2..4], Some(&row3_a), 0),
        (&key3[1..2], None, 0),
        (&key2[4..5], None, 0),
        (&key3[2..3], None, 1),
        (&key2[5..6], Some(&row3_b), 0),
    ]
    .into_iter()
    .enumerate()
    {
        store_all(&mut conn, &sink, batch, batch.len()).await;
        let found: Vec<String> = items(&mut conn)
            .await
            .into_iter()
            .filter(|row| row.starts_with("3 |"))
            .collect();
        assert_eq!(found, Vec::from_iter(row3.cloned()), "step {step}");
        assert_eq!(held(&mut conn).await, waiting, "step {step}: rows waiting");
    }
    assert_eq!(dead_letters(&mut conn).await, []);
    assert_eq!(items(&mut conn).await, [row3_b]);
    assert_eq!(
        aside(&mut conn).await,
        (2, 0),
        "each change's old row kept for a replay"
    );
    drop(conn);
    schema.drop_schema().await;
}

/// A schema with the fixtures' table and its sink under `conflict`.
async fn items_case(
    stack: &sluice_testkit::Stack,
    conflict: &str,
) -> (TestSchema, PgConnection, Tables) {
    let (schema, mut conn) = migrated(stack, ITEMS_DDL).await;
    let sink = sink(&mut conn, &items_sink(conflict)).await;
    (schema, conn, sink)
}

/// Key 3's partition (1): the key change 2 → 3's c keeping big, then an update of 3 keeping it.
fn create_3_then_update(fixtures: &[Record]) -> [Record; 2] {
    [
        moved(&fixtures[5], 1, 0, 0),
        update(&fixtures[2], (1, 1), 3, "updated after the move", 1_000),
    ]
}

/// What key changes' deletes left set aside: (rows of changes with an LSN, kept for a replay;
/// rows of changes without one, queued for creates that have not come).
async fn aside(conn: &mut PgConnection) -> (i64, i64) {
    sqlx::query_as(
        "SELECT count(*) FILTER (WHERE change_lsn >= 0), count(*) FILTER (WHERE change_lsn < 0) \
         FROM debezium_moved_rows",
    )
    .fetch_one(conn)
    .await
    .unwrap()
}

/// How many rows wait for a key change's delete (not orphaned).
async fn held(conn: &mut PgConnection) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM debezium_held_rows WHERE orphaned_at IS NULL")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// One batch, key 2's partition first: c(2) big A, u(2), d(2 → 3), tombstone, c(2) re-insert
/// big B; then key 3's partition: c(3, oldkey 2). The c takes big A (what its d set aside),
/// not the re-insert's big B (it did, when a create read its kept values from an earlier
/// record of the old key in the same run).
#[tokio::test]
async fn a_key_changes_create_reads_its_own_old_row_not_a_reinsert_of_the_old_key() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let at = |record: &Record, offset| moved(record, 0, offset, 0);
    let mut reinsert = create(&fixtures[1], 4, 2, "re-inserted", "big B", 0);
    reinsert.partition = 0;
    let batch = [
        at(&fixtures[1], 0),
        at(&fixtures[2], 1),
        at(&fixtures[3], 2),
        at(&fixtures[4], 3),
        reinsert,
        moved(&fixtures[5], 1, 0, 0),
    ];
    let big_a = big_of(&fixtures[1]);
    let (schema, mut conn, sink) = items_case(&stack, r#""always-update""#).await;
    store_all(&mut conn, &sink, &batch, batch.len()).await;
    let all = items(&mut conn).await;
    let dead = dead_letters(&mut conn).await;
    drop(conn);
    schema.drop_schema().await;
    assert_eq!(dead, [], "no dead letter");
    assert_eq!(
        all,
        [
            format!("2 | re-inserted | {}", md5_of("big B")),
            format!("3 | key changed 2 -> 3 | {}", md5_of(&big_a)),
        ]
    );
}

/// `record` at `partition`/`offset` without `source.lsn` (MySQL, SQL Server, Oracle: no
/// integer LSN; -1 in debezium_moved_rows).
fn no_lsn(record: &Record, partition: i32, offset: i64) -> Record {
    with_source(record, partition, offset, |source| {
        source.as_object_mut().expect("a source").remove("lsn");
    })
}

/// Without an LSN, the key change 2 → 3 twice: key 2's partition (0) — c(2) big A, d(2 → 3),
/// tombstone, c(2) re-insert big B, d(2 → 3), tombstone — and key 3's (1): c(3) of the first
/// change, d(3), c(3) of the second; and the fixtures they are made of.
fn twice_without_an_lsn() -> (Vec<Record>, [Record; 6], [Record; 3]) {
    let fixtures = captured("items", &KEY_CHANGE);
    let delete3 = captured("items", &["06-delete-id3"]);
    let mut reinsert = create(&fixtures[1], 4, 2, "re-inserted", "big B", 0);
    reinsert.partition = 0;
    let key2 = [
        no_lsn(&fixtures[1], 0, 0),
        no_lsn(&fixtures[3], 0, 1),
        no_lsn(&fixtures[4], 0, 2),
        no_lsn(&reinsert, 0, 3),
        no_lsn(&fixtures[3], 0, 4),
        no_lsn(&fixtures[4], 0, 5),
    ];
    let key3 = [
        no_lsn(&fixtures[5], 1, 0),
        no_lsn(&delete3[0], 1, 1),
        no_lsn(&fixtures[5], 1, 2),
    ];
    (fixtures, key2, key3)
}

/// No LSN (a set-aside queue). Key 2's partition runs ahead: the key change 2 → 3 twice (with a
/// re-insert of 2 between). Key 3's partition then applies c(3) of the first change, d(3),
/// c(3) of the second. The first c must read big A; the second big B; nothing dead-lettered.
#[tokio::test]
async fn two_key_changes_without_an_lsn_between_the_same_keys_read_their_own_old_rows() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let (fixtures, key2, key3) = twice_without_an_lsn();
    let big_a = big_of(&fixtures[1]);
    let (schema, mut conn, sink) = items_case(&stack, r#""always-update""#).await;
    store_all(&mut conn, &sink, &key2, key2.len()).await;
    store_all(&mut conn, &sink, &key3[..1], 1).await;
    let after_first = items(&mut conn).await;
    store_all(&mut conn, &sink, &key3[1..], 1).await;
    let dead = dead_letters(&mut conn).await;
    let all = items(&mut conn).await;
    drop(conn);
    schema.drop_schema().await;
    assert_eq!(
        after_first,
        [format!("3 | key changed 2 -> 3 | {}", md5_of(&big_a))],
        "the first change's c reads the first change's old row"
    );
    assert_eq!(dead, [], "no dead letter");
    assert_eq!(
        all,
        [format!("3 | key changed 2 -> 3 | {}", md5_of("big B"))]
    );
}

/// An update of `id` like the fixture `like` (an update keeping `big`) at `partition`/`offset`,
/// titled `title`, its LSN `lsn_by` past the fixture's.
fn update(like: &Record, at: (i32, i64), id: i64, title: &str, lsn_by: i64) -> Record {
    let mut event = value(like);
    let payload = &mut event["payload"];
    payload["after"]["id"] = id.into();
    payload["after"]["title"] = title.into();
    payload["source"]["lsn"] = (payload["source"]["lsn"].as_i64().unwrap() + lsn_by).into();
    let mut key: serde_json::Value = serde_json::from_slice(like.key.as_deref().unwrap()).unwrap();
    key["payload"]["id"] = id.into();
    Record {
        key: Some(key.to_string().into_bytes()),
        payload: Some(event.to_string().into_bytes()),
        headers: like.headers.clone(),
        ..Record::at(&like.topic, at.0, at.1)
    }
}

/// Key 3's partition runs ahead of key 2's: c(3, oldkey 2) keeping big, then an update of 3
/// that keeps big too, each in its own batch, before key 2's partition has stored anything.
/// Both wait (the update behind the create); when key 2's partition comes (its c, u and the
/// key change's d), the d applies them: row 3 has the update's title and row 2's big, under
/// each conflict policy, nothing dead-lettered and nothing left waiting. Before rows waited,
/// the create was dead-lettered (no old row) and the update dropped (no row to update).
#[tokio::test]
async fn a_key_changes_create_and_later_rows_wait_for_the_old_keys_partition() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let big_a = big_of(&fixtures[1]);
    let key3 = create_3_then_update(&fixtures);
    let key2 = [
        moved(&fixtures[1], 0, 0, 0),
        moved(&fixtures[2], 0, 1, 0),
        moved(&fixtures[3], 0, 2, 0),
        moved(&fixtures[4], 0, 3, 0),
    ];
    for conflict in [
        r#""always-update""#,
        r#""insert-ignore""#,
        r#"{ newest-wins = "lsn" }"#,
    ] {
        let (schema, mut conn, sink) = items_case(&stack, conflict).await;
        store_all(&mut conn, &sink, &key3, 1).await;
        assert_eq!(items(&mut conn).await, Vec::<String>::new(), "{conflict}");
        assert_eq!(
            held(&mut conn).await,
            2,
            "{conflict}: both rows of key 3 wait"
        );
        store_all(&mut conn, &sink, &key2, 4).await;
        // insert-ignore keeps the first delivery: the create's row, not the update's title.
        let title = if conflict.contains("insert-ignore") {
            "key changed 2 -> 3"
        } else {
            "updated after the move"
        };
        assert_eq!(
            items(&mut conn).await,
            [format!("3 | {title} | {}", md5_of(&big_a))],
            "{conflict}"
        );
        assert_eq!(held(&mut conn).await, 0, "{conflict}");
        assert_eq!(dead_letters(&mut conn).await, [], "{conflict}");
        drop(conn);
        schema.drop_schema().await;
    }
}

/// The key change's d comes, but key 2's row was never stored (its create was lost to the
/// source's history: the d alone): the waiting create cannot be completed. It is dead-lettered
/// with its own record (its partition, offset and headers, for `sluice dlq replay`) and the
/// reason; the update behind it goes on (no row 3 to update: nothing), and key 2's batch
/// commits (its d is not blamed).
#[tokio::test]
async fn a_create_whose_old_row_never_came_is_dead_lettered_and_the_rows_behind_it_go_on() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let key3 = create_3_then_update(&fixtures);
    let key2 = [moved(&fixtures[3], 0, 0, 0), moved(&fixtures[4], 0, 1, 0)];
    let (schema, mut conn, sink) = items_case(&stack, r#""always-update""#).await;
    store_all(&mut conn, &sink, &key3, 2).await;
    assert_eq!(held(&mut conn).await, 2);
    store_all(&mut conn, &sink, &key2, 2).await;
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM debezium_held_rows")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 0, "nothing waits or is kept");
    let dead: Vec<(i32, i64, String, String, Vec<String>)> = sqlx::query_as(
        "SELECT partition, kafka_offset, error_kind, reason, header_names \
         FROM dead_letter_events",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    let (partition, offset, kind, reason, headers) = &dead[0];
    assert_eq!(
        (*partition, *offset, kind.as_str()),
        (1, 0, "constraint_violation")
    );
    let table: Option<String> = sqlx::query_scalar("SELECT target_table FROM dead_letter_events")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        table.as_deref(),
        Some("items"),
        "a held row's dead letter names its table"
    );
    assert!(
        reason.starts_with("after waiting for its key change's delete: the value of column big")
            && reason.contains("is in no stored row")
            && !reason.contains("SQLSTATE"),
        "the reason names the wait and the missing value: {reason}"
    );
    assert_eq!(headers[0], "__debezium.oldkey", "its headers, for a replay");
    assert_eq!(items(&mut conn).await, Vec::<String>::new());
    drop(conn);
    schema.drop_schema().await;
}

/// A create whose delete never comes (the old key's records are past the topic's retention, or
/// only the create is replayed) waits `key_change_wait` and then reads the old key's row as it
/// is: here row 2, stored by hand, so row 3 takes its big. The wait is made to have passed by
/// moving `held_at` back; the next batch of the sink (a row of another key) applies it and the
/// update waiting behind it.
#[tokio::test]
async fn a_create_whose_delete_never_comes_reads_the_old_row_after_its_wait() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let key3 = create_3_then_update(&fixtures);
    let (schema, mut conn) = migrated(&stack, ITEMS_DDL).await;
    sqlx::query("INSERT INTO items (id, title, big) VALUES (2, 'by hand', 'the old big')")
        .execute(&mut conn)
        .await
        .unwrap();
    let sink = sink(&mut conn, &items_sink(r#""always-update""#)).await;
    store_all(&mut conn, &sink, &key3, 2).await;
    assert_eq!(held(&mut conn).await, 2);
    // Another batch before the wait has passed changes nothing of key 3.
    let other = [update(&fixtures[2], (2, 0), 1, "row 1", 2_000)];
    store_all(&mut conn, &sink, &other, 1).await;
    assert_eq!(held(&mut conn).await, 2, "still within the wait");
    sqlx::query("UPDATE debezium_held_rows SET held_at = held_at - interval '601 seconds'")
        .execute(&mut conn)
        .await
        .unwrap();
    let other = [update(&fixtures[2], (2, 1), 1, "row 1 again", 3_000)];
    store_all(&mut conn, &sink, &other, 1).await;
    assert_eq!(held(&mut conn).await, 0, "the wait is over");
    let row3: Vec<String> = items(&mut conn)
        .await
        .into_iter()
        .filter(|row| row.starts_with("3 |"))
        .collect();
    assert_eq!(
        row3,
        [format!(
            "3 | updated after the move | {}",
            md5_of("the old big")
        )]
    );
    assert_eq!(dead_letters(&mut conn).await, []);
    drop(conn);
    schema.drop_schema().await;
}

// ---- Held rows: cases a review of the design found (each failed before its fix) ----

/// `record` with its event's `after.big` set to `big` (a create that sends every value: it
/// keeps none).
fn with_big(record: &Record, big: &str) -> Record {
    let mut event = value(record);
    event["payload"]["after"]["big"] = big.into();
    Record {
        payload: Some(event.to_string().into_bytes()),
        ..record.clone()
    }
}

/// Review finding 1 (no LSN). The first key change 2 → 3 has a `c` that sends every value
/// (not held, it needs no old row) and is applied before its `d` (key 3's partition ahead):
/// its `d` then leaves a set-aside row no create will ever take. The second change 2 → 3 (after
/// a re-insert of 2 with big B, and a delete of 3) has a `c` that keeps big: without an LSN the
/// creates take the oldest set-aside row of (2, 3), so it reads the first change's big A.
/// One by one, row 3 ends with big B.
#[tokio::test]
async fn a_create_that_keeps_nothing_applied_before_its_delete_leaves_no_row_for_the_next_change() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let delete3 = captured("items", &["06-delete-id3"]);
    let big_a = big_of(&fixtures[1]);
    let mut reinsert = create(&fixtures[1], 4, 2, "re-inserted", "big B", 0);
    reinsert.partition = 0;
    let key2 = [
        no_lsn(&fixtures[1], 0, 0),
        no_lsn(&fixtures[3], 0, 1),
        no_lsn(&fixtures[4], 0, 2),
        no_lsn(&reinsert, 0, 3),
        no_lsn(&fixtures[3], 0, 4),
        no_lsn(&fixtures[4], 0, 5),
    ];
    let key3 = [
        no_lsn(&with_big(&fixtures[5], &big_a), 1, 0),
        no_lsn(&delete3[0], 1, 1),
        no_lsn(&fixtures[5], 1, 2),
    ];
    let (schema, mut conn, sink) = items_case(&stack, r#""always-update""#).await;
    // c(2) big A; then key 3's partition's first c (it sends big); then the rest of key 2's
    // partition (both changes' d and the re-insert); then d(3) and the second change's c.
    store_all(&mut conn, &sink, &key2[..1], 1).await;
    store_all(&mut conn, &sink, &key3[..1], 1).await;
    store_all(&mut conn, &sink, &key2[1..], 5).await;
    store_all(&mut conn, &sink, &key3[1..], 1).await;
    let all = items(&mut conn).await;
    let dead = dead_letters(&mut conn).await;
    let aside: i64 = sqlx::query_scalar("SELECT count(*) FROM debezium_moved_rows")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    drop(conn);
    schema.drop_schema().await;
    assert_eq!(dead, [], "no dead letter");
    assert_eq!(
        all,
        [format!("3 | key changed 2 -> 3 | {}", md5_of("big B"))],
        "the second change's c reads the second change's old row (big B), not the first's (big A = {})",
        md5_of(&big_a)
    );
    assert_eq!(aside, 0, "nothing left set aside");
}

/// Review finding 2. Key 3's c waits for its d (key 2's partition behind); then a batch of
/// key 3's partition with two updates of 3: "good", then "poison" (the table's CHECK refuses
/// it). One by one: the c, then "good", then "poison" is dead-lettered, and row 3 reads "good".
/// When the updates keep big, each is a run of its own (main since b47493b) and this holds.
/// When they send every value they are one run, de-duplicated before its rows are put to wait:
/// only "poison" waits ("good" is dropped as superseded, and no runner-up is revived for a
/// row that fails after waiting); when the d applies it, it fails, and "good" is lost.
#[tokio::test]
async fn a_waiting_row_that_fails_loses_the_row_it_superseded() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let big_a = big_of(&fixtures[1]);
    let key2 = [
        moved(&fixtures[1], 0, 0, 0),
        moved(&fixtures[2], 0, 1, 0),
        moved(&fixtures[3], 0, 2, 0),
        moved(&fixtures[4], 0, 3, 0),
    ];
    for (label, big) in [
        ("updates keep big", None),
        ("updates send big", Some("new big")),
    ] {
        let sent = |record: Record| match big {
            Some(big) => with_big(&record, big),
            None => record,
        };
        let key3 = [
            moved(&fixtures[5], 1, 0, 0),
            sent(update(&fixtures[2], (1, 1), 3, "good", 1_000)),
            sent(update(&fixtures[2], (1, 2), 3, "poison", 2_000)),
        ];
        let (schema, mut conn, sink) = items_case(&stack, r#""always-update""#).await;
        store_all(&mut conn, &sink, &key3[..1], 1).await;
        store_all(&mut conn, &sink, &key3[1..], 2).await;
        store_all(&mut conn, &sink, &key2, 4).await;
        let all = items(&mut conn).await;
        let dead: Vec<(i64, String)> = dead_letters(&mut conn)
            .await
            .into_iter()
            .map(|(offset, _, reason)| (offset, reason))
            .collect();
        drop(conn);
        schema.drop_schema().await;
        assert_eq!(
            all,
            [format!("3 | good | {}", md5_of(big.unwrap_or(&big_a)))],
            "{label}: the update before the poison one is applied (dead letters: {dead:?})"
        );
        let offsets: Vec<i64> = dead.iter().map(|(offset, _)| *offset).collect();
        assert_eq!(offsets, [2], "{label}: the poison update is a dead letter");
    }
}

/// Waits until `pids` (backends) all wait on an advisory lock (polls pg_locks, no fixed sleep).
async fn blocked_on_advisory(conn: &mut PgConnection, pids: &[i32]) {
    for _ in 0..2_000 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(DISTINCT pid) FROM pg_locks WHERE locktype = 'advisory' \
             AND NOT granted AND pid = ANY($1)",
        )
        .bind(pids)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        if waiting == pids.len() as i64 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("backends {pids:?} never waited on an advisory lock");
}

/// Two writers, key 3's (P1) and key 2's (P0), interleaved on key 3's advisory lock (a third
/// session holds it, so each writer stops at it; which reaches it first gets it first): the
/// waiting c (and an update behind it) and the d's release, in both orders, with the c held
/// before (a committed queue) or in the racing transaction. Row 3 ends with the update's title
/// (or the c's) and big A; nothing waits, nothing is dead-lettered.
#[tokio::test]
async fn two_writers_racing_on_a_key_neither_lose_nor_strand_a_row() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let big_a = big_of(&fixtures[1]);
    let c3 = moved(&fixtures[5], 1, 0, 0);
    let u3 = update(&fixtures[2], (1, 1), 3, "updated after the move", 1_000);
    let key2 = [
        moved(&fixtures[1], 0, 0, 0),
        moved(&fixtures[2], 0, 1, 0),
        moved(&fixtures[3], 0, 2, 0),
        moved(&fixtures[4], 0, 3, 0),
    ];
    // (label, key 3's batch held and committed before, key 3's racing batch, key 3's writer
    // reaches the lock first)
    let cases: [(&str, Vec<Record>, Vec<Record>, bool); 4] = [
        ("c races, c first", vec![], vec![c3.clone()], true),
        ("c races, d first", vec![], vec![c3.clone()], false),
        (
            "u races behind a held c, u first",
            vec![c3.clone()],
            vec![u3.clone()],
            true,
        ),
        (
            "u races behind a held c, d first",
            vec![c3.clone()],
            vec![u3.clone()],
            false,
        ),
    ];
    for (label, before, racing, key3_first) in cases {
        let (schema, mut conn, sink) = items_case(&stack, r#""always-update""#).await;
        store_all(&mut conn, &sink, &before, 1).await;
        let mut a = schema.connect().await;
        let mut b = schema.connect().await;
        let pid_a: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut a)
            .await
            .unwrap();
        let pid_b: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut b)
            .await
            .unwrap();
        sqlx::query(
            "SELECT pg_advisory_lock(hashtextextended('debezium_held_rows items ' \
             || jsonb_build_array(3::bigint)::text, 0))",
        )
        .execute(&mut conn)
        .await
        .unwrap();
        let (first, second) = if key3_first {
            (pid_a, pid_b)
        } else {
            (pid_b, pid_a)
        };
        let (go_a, wait_a) = tokio::sync::oneshot::channel::<()>();
        let (go_b, wait_b) = tokio::sync::oneshot::channel::<()>();
        let writer_a = async {
            wait_a.await.unwrap();
            store_all(&mut a, &sink, &racing, racing.len()).await;
        };
        let writer_b = async {
            wait_b.await.unwrap();
            store_all(&mut b, &sink, &key2, key2.len()).await;
        };
        let control = async {
            let (go_first, go_second) = if key3_first {
                (go_a, go_b)
            } else {
                (go_b, go_a)
            };
            go_first.send(()).unwrap();
            blocked_on_advisory(&mut conn, &[first]).await;
            go_second.send(()).unwrap();
            blocked_on_advisory(&mut conn, &[first, second]).await;
            sqlx::query("SELECT pg_advisory_unlock_all()")
                .execute(&mut conn)
                .await
                .unwrap();
        };
        tokio::join!(writer_a, writer_b, control);
        let title = if racing.len() == 1 && before.is_empty() {
            "key changed 2 -> 3"
        } else {
            "updated after the move"
        };
        assert_eq!(
            items(&mut conn).await,
            [format!("3 | {title} | {}", md5_of(&big_a))],
            "{label}"
        );
        assert_eq!(held(&mut conn).await, 0, "{label}: nothing left waiting");
        assert_eq!(dead_letters(&mut conn).await, [], "{label}");
        drop((a, b, conn));
        schema.drop_schema().await;
    }
}

/// Review finding 3. Key 2's row was never stored (its create is past retention): its
/// partition holds the key change's d (which now leaves its mark, image NULL), the tombstone,
/// and then a re-insert of 2 with big B. Key 3's c, keeping big, comes last: its own old row is
/// nowhere, so it is a dead letter (README: "Only when the old row is nowhere ... a dead letter
/// that says so"); it must not take big B from the unrelated re-insert of key 2.
#[tokio::test]
async fn a_create_whose_delete_found_no_row_does_not_read_a_reinsert_of_the_old_key() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let mut reinsert = create(&fixtures[1], 2, 2, "re-inserted", "big B", 0);
    reinsert.partition = 0;
    let key2 = [
        moved(&fixtures[3], 0, 0, 0),
        moved(&fixtures[4], 0, 1, 0),
        reinsert,
    ];
    let key3 = [moved(&fixtures[5], 1, 0, 0)];
    let (schema, mut conn, sink) = items_case(&stack, r#""always-update""#).await;
    store_all(&mut conn, &sink, &key2, 3).await;
    store_all(&mut conn, &sink, &key3, 1).await;
    let all = items(&mut conn).await;
    let dead: Vec<i64> = dead_letters(&mut conn)
        .await
        .into_iter()
        .map(|(offset, _, _)| offset)
        .collect();
    drop(conn);
    schema.drop_schema().await;
    assert_eq!(
        all,
        [format!("2 | re-inserted | {}", md5_of("big B"))],
        "row 3 is not written with the re-insert's big"
    );
    assert_eq!(dead, [0], "key 3's c is a dead letter");
}

/// A replay (the same records again, at later offsets) after key 3's partition ran ahead of key
/// 2's: both passes, key 3's partition first, end with row 3 as the source has it, under every
/// conflict policy; nothing waits, nothing is set aside, nothing is dead-lettered.
#[tokio::test]
async fn a_replay_with_the_new_keys_partition_ahead_ends_as_the_source() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let big_a = big_of(&fixtures[1]);
    let key3 = |base: i64| {
        [
            moved(&fixtures[5], 1, base, 0),
            update(
                &fixtures[2],
                (1, base + 1),
                3,
                "updated after the move",
                1_000,
            ),
        ]
    };
    let key2 = |base: i64| {
        [
            moved(&fixtures[1], 0, base, 0),
            moved(&fixtures[2], 0, base + 1, 0),
            moved(&fixtures[3], 0, base + 2, 0),
            moved(&fixtures[4], 0, base + 3, 0),
        ]
    };
    for conflict in [
        r#""always-update""#,
        r#""insert-ignore""#,
        r#"{ newest-wins = "lsn" }"#,
    ] {
        for batch in [1, 4] {
            let label = format!("{conflict}, batches of {batch}");
            let (schema, mut conn, sink) = items_case(&stack, conflict).await;
            for base in [0, 100] {
                store_all(&mut conn, &sink, &key3(base), batch).await;
                store_all(&mut conn, &sink, &key2(base), batch).await;
            }
            let title = if conflict.contains("insert-ignore") {
                "key changed 2 -> 3"
            } else {
                "updated after the move"
            };
            assert_eq!(
                items(&mut conn).await,
                [format!("3 | {title} | {}", md5_of(&big_a))],
                "{label}"
            );
            assert_eq!(held(&mut conn).await, 0, "{label}");
            assert_eq!(dead_letters(&mut conn).await, [], "{label}");
            assert_eq!(
                aside(&mut conn).await,
                (1, 0),
                "{label}: the change's old row kept for a replay"
            );
            drop(conn);
            schema.drop_schema().await;
        }
    }
}

/// `record` (a key change's half) rekeyed: its row's id `id` (in `before`, else `after`), the
/// header `header` naming the other key `other`, its LSN moved by `lsn_by`, at
/// `partition`/`offset`.
fn rekeyed(
    record: &Record,
    (id, header, other): (i64, &str, i64),
    lsn_by: i64,
    at: (i32, i64),
) -> Record {
    let mut event = value(record);
    let payload = &mut event["payload"];
    for image in ["before", "after"] {
        if payload[image].is_object() {
            payload[image]["id"] = id.into();
        }
    }
    payload["source"]["lsn"] = (payload["source"]["lsn"].as_i64().unwrap() + lsn_by).into();
    let headers = record
        .headers
        .iter()
        .map(|(name, value)| {
            if name == header {
                (
                    name.clone(),
                    Some(format!(r#"{{"id":{other}}}"#).into_bytes()),
                )
            } else {
                (name.clone(), value.clone())
            }
        })
        .collect();
    Record {
        key: Some(format!(r#"{{"schema":null,"payload":{{"id":{id}}}}}"#).into_bytes()),
        payload: Some(event.to_string().into_bytes()),
        headers,
        ..Record::at(&record.topic, at.0, at.1)
    }
}

/// A chain of key changes, 1 → 2 then 2 → 3, each create keeping big, the three keys' records
/// in three partitions, applied in every order of the partitions (each partition in one batch,
/// and record by record): row 3 ends with the second create's title and row 1's big; nothing
/// waits, nothing is set aside or dead-lettered.
#[tokio::test]
async fn a_chain_of_key_changes_ends_as_the_source_in_every_partition_order() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let big_a = big_of(&fixtures[1]);
    let (delete, create3) = (&fixtures[3], &fixtures[5]);
    let mut c1 = create(&fixtures[1], 0, 1, "one", &big_a, 0);
    c1.partition = 0;
    let partitions: [Vec<Record>; 3] = [
        vec![c1, rekeyed(delete, (1, "__debezium.newkey", 2), 0, (0, 1))],
        vec![
            rekeyed(create3, (2, "__debezium.oldkey", 1), 0, (1, 0)),
            rekeyed(delete, (2, "__debezium.newkey", 3), 1_000, (1, 1)),
        ],
        vec![rekeyed(create3, (3, "__debezium.oldkey", 2), 1_000, (2, 0))],
    ];
    let orders = [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ];
    for order in orders {
        for batch in [1, 2] {
            let label = format!("partitions in order {order:?}, batches of {batch}");
            let (schema, mut conn, sink) = items_case(&stack, r#""always-update""#).await;
            for p in order {
                store_all(&mut conn, &sink, &partitions[p], batch).await;
            }
            assert_eq!(
                items(&mut conn).await,
                [format!("3 | key changed 2 -> 3 | {}", md5_of(&big_a))],
                "{label}"
            );
            assert_eq!(held(&mut conn).await, 0, "{label}");
            assert_eq!(dead_letters(&mut conn).await, [], "{label}");
            assert_eq!(
                aside(&mut conn).await,
                (2, 0),
                "{label}: each change's old row kept for a replay"
            );
            drop(conn);
            schema.drop_schema().await;
        }
    }
}

/// Review finding 4 (no LSN). Key 3's partition ahead: the first change's c (keeping big)
/// waits for its d, and its wait runs out (`held_at` moved back): it reads the old key's row
/// as it is (big A), with no set-aside row to take. Then key 2's partition: the first change's
/// d (its set-aside row is never taken), a re-insert of 2 with big B, the second change's d.
/// Then d(3) and the second change's c: it takes the oldest set-aside row of (2, 3) — the
/// first change's, big A. One by one, row 3 ends with big B.
#[tokio::test]
async fn a_create_applied_after_its_wait_leaves_its_deletes_row_for_the_next_change() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let (fixtures, key2, key3) = twice_without_an_lsn();
    let (schema, mut conn, sink) = items_case(&stack, r#""always-update""#).await;
    store_all(&mut conn, &sink, &key2[..1], 1).await;
    store_all(&mut conn, &sink, &key3[..1], 1).await;
    assert_eq!(held(&mut conn).await, 1);
    sqlx::query("UPDATE debezium_held_rows SET held_at = held_at - interval '601 seconds'")
        .execute(&mut conn)
        .await
        .unwrap();
    // Any batch of the sink applies what waited too long (an update of a row 9 that is not).
    let other = [update(&fixtures[2], (2, 0), 9, "row 9", 2_000)];
    store_all(&mut conn, &sink, &other, 1).await;
    assert_eq!(held(&mut conn).await, 0, "the wait is over");
    store_all(&mut conn, &sink, &key2[1..], 5).await;
    store_all(&mut conn, &sink, &key3[1..], 1).await;
    let all = items(&mut conn).await;
    let dead = dead_letters(&mut conn).await;
    drop(conn);
    schema.drop_schema().await;
    assert_eq!(dead, [], "no dead letter");
    assert_eq!(
        all,
        [format!("3 | key changed 2 -> 3 | {}", md5_of("big B"))],
        "the second change's c reads the second change's old row"
    );
}

/// `record` (a key change's half or a create) with its row's id and the other key's id in
/// `header` as the JSON numbers `id` and `other` (digits kept as written).
fn with_numeric_ids(record: &Record, id: &str, header: &str, other: &str) -> Record {
    let mut event = value(record);
    for image in ["before", "after"] {
        if event["payload"][image].is_object() {
            event["payload"][image]["id"] = "__ID__".into();
        }
    }
    let text = event.to_string().replace("\"__ID__\"", id);
    let headers = record
        .headers
        .iter()
        .map(|(name, value)| {
            if name == header {
                (
                    name.clone(),
                    Some(format!(r#"{{"id":{other}}}"#).into_bytes()),
                )
            } else {
                (name.clone(), value.clone())
            }
        })
        .collect();
    Record {
        key: Some(format!(r#"{{"schema":null,"payload":{{"id":{id}}}}}"#).into_bytes()),
        payload: Some(text.into_bytes()),
        headers,
        ..record.clone()
    }
}

/// Review finding 5. A numeric key past a double's precision (NUMERIC(30,0), 21 digits): key
/// 100000000000000000003's c waits for the key change's d; the d comes and applies it. The key
/// of the waiting rows goes through serde_json::Value (a double) between the statements, so
/// the d finds no row waiting under it: the c waits on, and every later row of the key behind
/// it, beyond every wait (the expiry reads the key the same way).
#[tokio::test]
async fn a_numeric_key_past_a_doubles_precision_is_applied_by_its_delete() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let fixtures = captured("items", &KEY_CHANGE);
    let big_a = big_of(&fixtures[1]);
    let (k2, k3) = ("100000000000000000002", "100000000000000000003");
    let key3 = [with_numeric_ids(
        &moved(&fixtures[5], 1, 0, 0),
        k3,
        "__debezium.oldkey",
        k2,
    )];
    let key2 = [
        with_numeric_ids(&moved(&fixtures[1], 0, 0, 0), k2, "-", ""),
        with_numeric_ids(&moved(&fixtures[3], 0, 1, 0), k2, "__debezium.newkey", k3),
    ];
    let ddl = ITEMS_DDL.replace("id BIGINT PRIMARY KEY", "id NUMERIC(30,0) PRIMARY KEY");
    let (schema, mut conn) = migrated(&stack, &ddl).await;
    let sink = sink(&mut conn, &items_sink(r#""always-update""#)).await;
    store_all(&mut conn, &sink, &key3, 1).await;
    let waiting_after_c = held(&mut conn).await;
    store_all(&mut conn, &sink, &key2, 2).await;
    let all = items(&mut conn).await;
    let waiting = held(&mut conn).await;
    let dead = dead_letters(&mut conn).await;
    drop(conn);
    schema.drop_schema().await;
    assert_eq!(waiting_after_c, 1, "the c waits for its d");
    assert_eq!(dead, [], "no dead letter");
    assert_eq!(
        (all, waiting),
        (
            vec![format!("{k3} | key changed 2 -> 3 | {}", md5_of(&big_a))],
            0
        ),
        "the d applies the c that waited for it"
    );
}

/// A capture that restarts re-sends what its slot had not confirmed (at new offsets): a key
/// change and what followed come again, after the first create read the old row its delete
/// set aside. The replay changes nothing, in batches of one and whole, and nothing is
/// dead-lettered:
/// - the key change 2 → 3, then a delete and a re-insert of 3 (fixtures 00–08): the replayed
///   create finds its old row set aside still, not gone (which was a dead letter);
/// - the key change 2 → 3, then a re-insert of 2 (under the LSN guard): the replayed delete of
///   2 meets the newer row 2 and keeps it, and the replayed create, no newer than row 3, is
///   skipped.
///
/// A row a create read more than a day ago is removed when a create reads the table's; one no
/// create has read is kept.
#[tokio::test]
async fn a_replayed_key_change_reads_the_old_row_its_first_delete_set_aside() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let mut then_3 = KEY_CHANGE.to_vec();
    then_3.extend([
        "06-delete-id3",
        "07-tombstone-id3",
        "08-create-id3-reinsert",
    ]);
    let then_3 = captured("items", &then_3);
    let mut then_2 = captured("items", &KEY_CHANGE);
    then_2.push(create(&then_2[1], 6, 2, "re-inserted", "another big", 0));
    let moved_big = md5_of(&big_of(&then_2[1]));
    for (label, records) in [
        ("then 3 deleted and re-inserted", &then_3),
        ("then 2 re-inserted", &then_2),
    ] {
        // The capture's restart: everything from the key change's delete again.
        let replay: Vec<Record> = records[3..]
            .iter()
            .zip(records.len() as i64..)
            .map(|(record, offset)| with_source(record, 0, offset, |_| {}))
            .collect();
        // Without the LSN guard a replay is not safe where the old key was re-inserted since
        // (its delete takes the newer row, docs/replication.md): the guard's case only.
        let policies: &[&str] = if records.len() == 7 {
            &[r#"{ newest-wins = "lsn" }"#]
        } else {
            &[r#""always-update""#, r#"{ newest-wins = "lsn" }"#]
        };
        for &conflict in policies {
            for batch in [1, 20] {
                let label = format!("{label}, {conflict}, batches of {batch}");
                let (schema, mut conn, sink) = items_case(&stack, conflict).await;
                store_all(&mut conn, &sink, records, batch).await;
                let first = items(&mut conn).await;
                // Other changes' rows set aside two days ago: one its create read 25 hours
                // ago (expired), one no create has read yet (kept).
                sqlx::query(
                    "INSERT INTO debezium_moved_rows \
                     (target_table, old_key, new_key, change_lsn, image, moved_at, read_at) \
                     VALUES ('items', '[100]', '[101]', 5, NULL, now() - interval '2 days', \
                     now() - interval '25 hours'), ('items', '[200]', '[201]', 6, NULL, \
                     now() - interval '2 days', NULL)",
                )
                .execute(&mut conn)
                .await
                .unwrap();
                store_all(&mut conn, &sink, &replay, batch).await;
                assert_eq!(dead_letters(&mut conn).await, [], "{label}");
                assert_eq!(
                    items(&mut conn).await,
                    first,
                    "{label}: the replay changed nothing"
                );
                if records.len() == 7 {
                    assert!(
                        first.contains(&format!("3 | key changed 2 -> 3 | {moved_big}")),
                        "{label}: {first:?}"
                    );
                }
                assert_eq!(held(&mut conn).await, 0, "{label}");
                assert_eq!(
                    rows(
                        &mut conn,
                        "SELECT old_key::text FROM debezium_moved_rows ORDER BY old_key::text COLLATE \"C\""
                    )
                    .await,
                    ["[200]", "[2]"],
                    "{label}: the change's row and the unread one kept, the expired one removed"
                );
                drop(conn);
                schema.drop_schema().await;
            }
        }
    }
}
