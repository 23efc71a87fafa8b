//! Declared sinks on the topics users already have, run by the `sluice` binary against the
//! real Kafka and PostgreSQL:
//!
//! 1. a tombstone deletes its key's row (`on_tombstone = "delete"`), changes nothing
//!    (`"ignore"`) or is a dead letter with its coordinates (the default of a JSON topic); under
//!    newest-wins, a delete carries no version, and a redelivered older insert after it
//!    resurrects the row (the documented limit: deleted keys are not kept);
//! 2. key columns read from the record key, a header in a column (as text, and a path into a
//!    JSON header), a missing required header dead-lettered naming it;
//! 3. records written by Kafka Connect's own JsonConverter (Debezium's `ExtractNewRecordState`
//!    rows, captured from the real connector: `tests/data/debezium/connect-json-*`) land with
//!    their logical types read (a Decimal's digits, a Json string's JSON, a date, a micro
//!    timestamp), a null payload is a tombstone; a schema registry wire header is taken off
//!    (its schema id in a column), a wrong magic byte is a dead letter;
//! 4. a sink reading a list of topics and a sink reading a `topic_pattern` into one table each
//!    (the topic in a column): a topic created after `sluice run` started is read without a
//!    restart, a topic the pattern does not match is not, and `sluice lag` lists the pattern's
//!    topics as the consumer does.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::json;
use support::case::Case;

fn record(key: &str, value: Option<serde_json::Value>) -> sluice_testkit::FullRecord {
    (
        Some(key.as_bytes().to_vec()),
        value.map(|v| v.to_string().into_bytes()),
        Vec::new(),
    )
}

const TOMBSTONE_DDL: &str = r"
    CREATE TABLE kv_delete (k TEXT PRIMARY KEY, v BIGINT NOT NULL, g BIGINT NOT NULL);
    CREATE TABLE kv_ignore (k TEXT PRIMARY KEY, v BIGINT NOT NULL, g BIGINT NOT NULL);
    CREATE TABLE kv_dead (k TEXT PRIMARY KEY, v BIGINT NOT NULL, g BIGINT NOT NULL);";

fn tombstone_sink(name: &str, table: &str, rule: &str) -> String {
    format!(
        "[[sink]]\nname = \"{name}\"\ntopic = \"{{prefix}}-{name}\"\ntable = \"{table}\"\n\
         key = [\"k\"]\nconflict = {{ newest-wins = \"g\" }}\n{rule}\n[sink.columns]\n\
         k = {{ key = \"\" }}\nv = {{ field = \"v\" }}\ng = {{ field = \"g\" }}\n\n"
    )
}

#[tokio::test]
async fn a_tombstone_deletes_is_ignored_or_is_a_dead_letter() {
    let mapping = [
        tombstone_sink("deletes", "kv_delete", "on_tombstone = \"delete\""),
        tombstone_sink("ignores", "kv_ignore", "on_tombstone = \"ignore\""),
        tombstone_sink("keeps", "kv_dead", ""),
    ]
    .concat();
    let sinks = ["deletes", "ignores", "keeps"];
    let Some(case) = Case::new(&sinks, TOMBSTONE_DDL, &mapping).await else {
        return;
    };
    let plan = case.assert_valid();
    assert!(
        plan.contains("a tombstone: deletes its key's row")
            && plan.contains("a tombstone: ignored")
            && plan.contains("a tombstone: dead-lettered")
            && plan.contains("delete statement:\n    DELETE FROM \"kv_delete\" AS target"),
        "{plan}"
    );
    let records = [
        record("a", Some(json!({"v": 1, "g": 1}))),
        record("b", Some(json!({"v": 2, "g": 1}))),
        // In one batch with the tombstone before it: `c` is deleted, then written afresh.
        record("c", Some(json!({"v": 5, "g": 1}))),
        record("a", None),
        record("c", None),
        record("c", Some(json!({"v": 6, "g": 1}))),
        record("b", Some(json!({"v": 3, "g": 2}))),
    ];
    for sink in sinks {
        case.produce_full(sink, &records).await;
    }
    case.run_to_end("tombstones").await;
    let rows = |table: &str| format!("SELECT k || '=' || v FROM {table} ORDER BY k");
    assert_eq!(case.rows(&rows("kv_delete")).await, ["b=3", "c=6"]);
    // Without the delete, `c`'s two versions tie (g = 1): the first stored keeps the row.
    assert_eq!(case.rows(&rows("kv_ignore")).await, ["a=1", "b=3", "c=5"]);
    assert_eq!(case.rows(&rows("kv_dead")).await, ["a=1", "b=3", "c=5"]);
    let dead = case.dead_letters().await;
    let coordinates: Vec<(String, i64, &str)> = dead
        .iter()
        .map(|d| (d.0.clone(), d.1, d.3.as_str()))
        .collect();
    assert_eq!(
        coordinates,
        [
            (case.topic("keeps"), 3, "record has no value (tombstone)"),
            (case.topic("keeps"), 4, "record has no value (tombstone)"),
        ]
    );

    // The documented limit: a delete keeps no trace, so an older insert redelivered after it
    // (a replay that stops short of the delete) writes the row again; the tombstone, when it
    // comes again, deletes it again.
    case.produce_full("deletes", &[record("a", Some(json!({"v": 1, "g": 1})))])
        .await;
    case.run_to_end("redelivered").await;
    assert_eq!(case.rows(&rows("kv_delete")).await, ["a=1", "b=3", "c=6"]);
    case.produce_full("deletes", &[record("a", None)]).await;
    case.run_to_end("deleted-again").await;
    assert_eq!(case.rows(&rows("kv_delete")).await, ["b=3", "c=6"]);
    case.cleanup().await;
}

const KEYED_DDL: &str = r"
    CREATE TABLE events (
        tenant TEXT NOT NULL,
        id BIGINT NOT NULL,
        body TEXT,
        trace TEXT NOT NULL,
        origin TEXT,
        whole_key TEXT NOT NULL,
        PRIMARY KEY (tenant, id)
    );";

const KEYED_MAPPING: &str = r#"
[[sink]]
name = "events"
topic = "{prefix}-events"
table = "events"
key = ["tenant", "id"]
conflict = "always-update"
[sink.columns]
tenant = { key = "tenant" }
id = { key = "id" }
body = { field = "body" }
trace = { header = "trace-id" }
origin = { header = "meta", path = "origin.host" }
whole_key = { key = "" }
"#;

#[tokio::test]
async fn key_columns_from_the_record_key_and_headers_in_columns() {
    let Some(case) = Case::new(&["events"], KEYED_DDL, KEYED_MAPPING).await else {
        return;
    };
    case.assert_valid();
    let key = |tenant: &str, id: i64| json!({"tenant": tenant, "id": id}).to_string();
    let headers = |trace: &str| {
        vec![
            ("trace-id".to_owned(), trace.as_bytes().to_vec()),
            (
                "meta".to_owned(),
                br#"{"origin": {"host": "crawler-7"}}"#.to_vec(),
            ),
        ]
    };
    let records: Vec<sluice_testkit::FullRecord> = vec![
        (
            Some(key("acme", 1).into_bytes()),
            Some(br#"{"body": "first"}"#.to_vec()),
            headers("t-1"),
        ),
        (
            Some(key("acme", 2).into_bytes()),
            Some(br#"{"body": "second"}"#.to_vec()),
            headers("t-2"),
        ),
        // No trace header: the column is NOT NULL, so the header is required.
        (
            Some(key("acme", 3).into_bytes()),
            Some(br#"{"body": "untraced"}"#.to_vec()),
            Vec::new(),
        ),
        // The key is not JSON: its key columns cannot be read.
        (
            Some(b"not json".to_vec()),
            Some(br#"{"body": "x"}"#.to_vec()),
            headers("t-4"),
        ),
    ];
    case.produce_full("events", &records).await;
    case.run_to_end("keyed").await;
    assert_eq!(
        case.rows(
            "SELECT concat_ws(' ', tenant, id, body, trace, origin, whole_key) FROM events \
             ORDER BY id"
        )
        .await,
        [
            r#"acme 1 first t-1 crawler-7 {"id":1,"tenant":"acme"}"#,
            r#"acme 2 second t-2 crawler-7 {"id":2,"tenant":"acme"}"#,
        ]
    );
    let dead = case.dead_letters().await;
    let reasons: Vec<(i64, &str)> = dead.iter().map(|d| (d.1, d.3.as_str())).collect();
    assert_eq!(
        reasons,
        [
            (2, "field `(header trace-id)`: required field is missing"),
            (3, "field `(record key)`: must be a JSON object"),
        ]
    );
    case.cleanup().await;
}

const TEXTS_DDL: &str = r"
    CREATE TABLE counted (id BIGINT PRIMARY KEY, n NUMERIC, ok BOOLEAN, u UUID, note TEXT,
                          r DOUBLE PRECISION, f REAL);";

const TEXTS_MAPPING: &str = r#"
[[sink]]
name = "counted"
topic = "{prefix}-counted"
table = "counted"
key = ["id"]
[sink.columns]
id = { key = "" }
n = { header = "n" }
ok = { header = "ok" }
u = { header = "u" }
note = { header = "note" }
r = { header = "r" }
f = { header = "f" }
"#;

/// The text sources — the whole record key, a header's bytes — land in number and boolean
/// columns read as their type (a string-converted key `5` into a `bigint` key, as Kafka
/// Connect's `StringConverter` writes it), with a number's own digits; text that is no such
/// value is a dead letter naming the source.
#[tokio::test]
async fn a_text_key_and_text_headers_land_in_number_and_boolean_columns() {
    let Some(case) = Case::new(&["counted"], TEXTS_DDL, TEXTS_MAPPING).await else {
        return;
    };
    case.assert_valid();
    let record = |key: &str, n: &str, ok: &str| -> sluice_testkit::FullRecord {
        (
            Some(key.as_bytes().to_vec()),
            Some(b"{}".to_vec()),
            vec![
                ("n".to_owned(), n.as_bytes().to_vec()),
                ("ok".to_owned(), ok.as_bytes().to_vec()),
                (
                    "u".to_owned(),
                    b"{a0eebc999c0b4ef8bb6d6bb9bd380a11}".to_vec(),
                ),
                ("note".to_owned(), b"42".to_vec()),
                ("r".to_owned(), b"2.25".to_vec()),
                ("f".to_owned(), b"-1.5".to_vec()),
            ],
        )
    };
    let records = vec![
        record("5", "12.5", "true"),
        record("6", "123456789012345678901234567890.000000001", "false"),
        record("x", "1", "true"),
        record("7", "twelve", "true"),
        record("8", "1", "yes"),
        record("9", " 7 ", "true"),
    ];
    case.produce_full("counted", &records).await;
    case.run_to_end("texts").await;
    assert_eq!(
        case.rows("SELECT concat_ws(' ', id, n, ok, u, note, r, f) FROM counted ORDER BY id")
            .await,
        [
            "5 12.5 t a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 42 2.25 -1.5",
            "6 123456789012345678901234567890.000000001 f \
             a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 42 2.25 -1.5",
        ]
    );
    let dead = case.dead_letters().await;
    let reasons: Vec<(i64, &str)> = dead.iter().map(|d| (d.1, d.3.as_str())).collect();
    assert_eq!(
        reasons,
        [
            (
                2,
                "field `(record key)`: must be an integer, got a string \"x\""
            ),
            (
                3,
                "field `(header n)`: must be a number, got a string \"twelve\""
            ),
            (
                4,
                "field `(header ok)`: must be a boolean, got a string \"yes\""
            ),
            (
                5,
                "field `(header n)`: must be a number, got a string \" 7 \""
            ),
        ]
    );
    case.cleanup().await;
}

const ITEMS_DDL: &str = r"
    CREATE TABLE items (
        id BIGINT PRIMARY KEY,
        title TEXT,
        amount NUMERIC(12,2),
        doc JSONB,
        big TEXT,
        at TIMESTAMPTZ,
        note TEXT,
        day DATE,
        ts TIMESTAMP
    );
    CREATE TABLE registered (id BIGINT PRIMARY KEY, title TEXT NOT NULL, schema_id INT NOT NULL);";

const ITEMS_MAPPING: &str = r#"
[[sink]]
name = "items"
topic = "{prefix}-items"
table = "items"
key = ["id"]
format = "connect-json"
on_tombstone = "delete"
conflict = "always-update"
[sink.columns]
id = { field = "id" }
title = { field = "title" }
amount = { field = "amount" }
doc = { field = "doc" }
big = { field = "big" }
at = { field = "at" }
note = { field = "note" }
day = { field = "day" }
ts = { field = "ts" }

[[sink]]
name = "registered"
topic = "{prefix}-registered"
table = "registered"
key = ["id"]
format = "schema-registry-json"
conflict = "always-update"
[sink.columns]
id = { field = "id" }
title = { field = "title" }
schema_id = { kafka = "schema_id" }
"#;

/// A record captured from the real connector (`tests/data/debezium/<name>.{key,value}.json`).
fn captured(name: &str) -> sluice_testkit::FullRecord {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/debezium");
    let read = |ext: &str| std::fs::read(dir.join(format!("{name}.{ext}.json"))).ok();
    (read("key"), read("value"), Vec::new())
}

#[tokio::test]
async fn connect_json_and_schema_registry_records_land_like_plain_json() {
    let Some(case) = Case::new(&["items", "registered"], ITEMS_DDL, ITEMS_MAPPING).await else {
        return;
    };
    case.assert_valid();
    let names = [
        "connect-json-00-read-id1",
        "connect-json-01-insert-id2",
        "connect-json-05-delete-id3",
        "connect-json-06-reinsert-id3",
        "connect-json-07-update-id1-big",
    ];
    let records: Vec<_> = names.iter().map(|name| captured(name)).collect();
    case.produce_full("items", &records).await;
    let wire = |magic: u8, id: u32, body: &str| {
        let mut bytes = vec![magic];
        bytes.extend(id.to_be_bytes());
        bytes.extend(body.as_bytes());
        (Some(b"r".to_vec()), Some(bytes), Vec::new())
    };
    case.produce_full(
        "registered",
        &[
            wire(0, 42, r#"{"id": 1, "title": "registered"}"#),
            wire(1, 42, r#"{"id": 2, "title": "wrong magic"}"#),
        ],
    )
    .await;
    case.run_to_end("connect").await;
    // What PostgreSQL holds for the same rows in the source (`source.sql`): the Decimal's
    // digits, the Json string's JSON, the Date's day, the MicroTimestamp's wall time.
    let items = case
        .rows(
            "SELECT concat_ws(' | ', id, title, amount, doc, length(big), at AT TIME ZONE 'UTC', \
             note, day, ts) FROM items ORDER BY id",
        )
        .await;
    assert_eq!(items.len(), 3, "{items:#?}");
    assert!(
        items[1].starts_with(
            "2 | inserted | -42.50 | {\"big\": 12345678901234567890, \"list\": [1, 2.5, \"três\"], \
             \"nested\": {\"k\": \"v\"}}"
        ),
        "{items:#?}"
    );
    for (row, expected) in items.iter().zip(["1 |", "2 |", "3 |"]) {
        assert!(row.starts_with(expected), "{items:#?}");
    }
    let mut conn = case.env.schema.connect().await;
    let source_day: String = sqlx::query_scalar("SELECT day::text FROM items WHERE id = 2")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(source_day.len(), 10, "a date: {source_day}");
    assert_eq!(
        case.rows("SELECT concat_ws(' ', id, title, schema_id) FROM registered")
            .await,
        ["1 registered 42"]
    );
    let dead = case.dead_letters().await;
    let reasons: Vec<(String, i64, &str)> = dead
        .iter()
        .map(|d| (d.0.clone(), d.1, d.3.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [(
            case.topic("registered"),
            1,
            "payload envelope: schema registry wire header: magic byte 1, expected 0"
        )]
    );
    case.cleanup().await;
}

/// A captured record with its headers (`<name>.headers.json`: each `[name, value]`).
fn captured_with_headers(name: &str) -> sluice_testkit::FullRecord {
    let (key, value, _) = captured(name);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/debezium");
    let headers: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{name}.headers.json"))).unwrap())
            .unwrap();
    let headers = headers["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let value = h[1].as_str().unwrap_or_default();
            (h[0].as_str().unwrap().to_owned(), value.as_bytes().to_vec())
        })
        .collect();
    (key, value, headers)
}

const ENVELOPE_DDL: &str = r"
    CREATE TABLE items (id BIGINT PRIMARY KEY, title TEXT, amount NUMERIC(12,2), doc JSONB,
                        big TEXT, lsn BIGINT);";

const ENVELOPE_MAPPING: &str = r#"
[[sink]]
name = "items"
topic = "{prefix}-items"
table = "items"
key = ["id"]
format = "debezium"
conflict = { newest-wins = "lsn" }
batch_size = 1
[sink.columns]
id = { field = "id" }
title = { field = "title" }
amount = { field = "amount" }
doc = { field = "doc" }
big = { field = "big" }
lsn = { cdc = "lsn" }
"#;

/// The real connector's key change (fixtures 00-05: row 2 created, updated with `big` left
/// unsent, its key changed to 3 with `big` unsent again) through a one-partition topic, one
/// record per batch: the `d` of key 2 and the `c` of key 3 meet in no batch, and row 3 still
/// gets row 2's `big`; no dead letter.
#[tokio::test]
async fn a_key_change_through_a_one_partition_topic_keeps_its_toasted_value() {
    let Some(case) = Case::new(&["items"], ENVELOPE_DDL, ENVELOPE_MAPPING).await else {
        return;
    };
    case.assert_valid();
    let names = [
        "00-read-id1-snapshot",
        "01-create-id2",
        "02-update-id2-toast-placeholder",
        "03-delete-id2-pk-update",
        "04-tombstone-id2-pk-update",
        "05-create-id3-pk-update",
    ];
    let records: Vec<_> = names
        .iter()
        .map(|name| captured_with_headers(name))
        .collect();
    let big_of = |record: &sluice_testkit::FullRecord| {
        let value: serde_json::Value =
            serde_json::from_slice(record.1.as_deref().unwrap()).unwrap();
        value["payload"]["after"]["big"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let mut conn = case.env.schema.connect().await;
    let mut md5 = async |text: String| -> String {
        sqlx::query_scalar("SELECT md5($1)")
            .bind(text)
            .fetch_one(&mut conn)
            .await
            .unwrap()
    };
    let big1 = md5(big_of(&records[0])).await;
    let big2 = md5(big_of(&records[1])).await;
    drop(conn);
    case.produce_full("items", &records).await;
    case.run_to_end("key-change").await;
    let rows = case
        .rows("SELECT concat_ws(' | ', id, title, md5(big)) FROM items ORDER BY id")
        .await;
    assert_eq!(
        rows,
        [
            format!("1 | snapshot row | {big1}"),
            format!("3 | key changed 2 -> 3 | {big2}"),
        ]
    );
    assert_eq!(case.dead_letters().await, []);
    case.cleanup().await;
}

const FEED_DDL: &str = r"
    CREATE TABLE feed (topic TEXT NOT NULL, part INT NOT NULL, off BIGINT NOT NULL, v BIGINT NOT NULL,
                       PRIMARY KEY (topic, part, off));
    CREATE TABLE listed (topic TEXT NOT NULL, off BIGINT NOT NULL, v BIGINT NOT NULL,
                         PRIMARY KEY (topic, off));";

const FEED_MAPPING: &str = r#"
[[sink]]
name = "feed"
topic_pattern = '{prefix}-feed\.[a-z]+'
table = "feed"
key = ["topic", "part", "off"]
conflict = "insert-ignore"
[sink.columns]
topic = { kafka = "topic" }
part = { kafka = "partition" }
off = { kafka = "offset" }
v = { field = "v" }

[[sink]]
name = "listed"
topics = ["{prefix}-list-a", "{prefix}-list-b"]
table = "listed"
key = ["topic", "off"]
conflict = "insert-ignore"
[sink.columns]
topic = { kafka = "topic" }
off = { kafka = "offset" }
v = { field = "v" }
"#;

/// Waits until `table` holds `want` rows; how long that took.
async fn wait_for(
    case: &Case,
    table: &str,
    want: &str,
    run: &mut support::Running,
) -> std::time::Duration {
    use std::time::{Duration, Instant};
    let started = Instant::now();
    let sql = format!("SELECT count(*)::text FROM {table}");
    loop {
        run.assert_alive();
        let count = case.rows(&sql).await.remove(0);
        if count == want {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "{table}: {count} rows, want {want}\n{}",
            run.tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_topic_pattern_picks_up_a_topic_created_after_start() {
    use std::time::{Duration, Instant};
    let Some(case) = Case::new(&[], FEED_DDL, FEED_MAPPING).await else {
        return;
    };
    let plan = case.assert_valid();
    assert!(
        plan.contains(&format!(
            "topics matching /{}-feed\\.[a-z]+/",
            case.env.prefix
        )) && plan.contains(&format!("{0}-list-a, {0}-list-b", case.env.prefix)),
        "{plan}"
    );
    let topic = |name: &str| format!("{}-{name}", case.env.prefix);
    let stack = &case.env.stack;
    for (name, partitions) in [("feed.a", 2), ("list-a", 1), ("list-b", 1), ("feedx", 1)] {
        sluice_testkit::create_topic(stack, &topic(name), partitions).await;
    }
    let values = |from: i64, n: i64| -> Vec<sluice_testkit::RawRecord> {
        (from..from + n)
            .map(|v| {
                (
                    Some(v.to_string().into_bytes()),
                    Some(json!({ "v": v }).to_string().into_bytes()),
                )
            })
            .collect()
    };
    sluice_testkit::produce(stack, &topic("feed.a"), &values(0, 10)).await;
    sluice_testkit::produce(stack, &topic("list-a"), &values(100, 3)).await;
    sluice_testkit::produce(stack, &topic("list-b"), &values(200, 4)).await;
    sluice_testkit::produce(stack, &topic("feedx"), &values(300, 5)).await;

    let file = case.file.display().to_string();
    let mut run = case
        .env
        .spawn_run("pattern", &[("SLUICE_SINKS_FILE", file.as_str())]);
    wait_for(&case, "feed", "10", &mut run).await;
    wait_for(&case, "listed", "7", &mut run).await;

    // A topic created while running: read within the check interval plus a rebalance.
    sluice_testkit::create_topic(stack, &topic("feed.b"), 3).await;
    sluice_testkit::produce(stack, &topic("feed.b"), &values(400, 12)).await;
    let picked_up = wait_for(&case, "feed", "22", &mut run).await;
    eprintln!("a topic created after start was read within {picked_up:?}");
    assert!(
        picked_up < Duration::from_secs(60),
        "bounded: {} s check + a rebalance, took {picked_up:?}",
        sluice_kafka::TOPIC_CHECK_INTERVAL.as_secs()
    );
    let by_topic = case
        .rows("SELECT topic || ' ' || count(*) FROM feed GROUP BY topic ORDER BY topic")
        .await;
    assert_eq!(
        by_topic,
        [
            format!("{} 10", topic("feed.a")),
            format!("{} 12", topic("feed.b"))
        ],
        "the non-matching `feedx` is not read"
    );
    assert_eq!(
        case.rows("SELECT string_agg(topic || ':' || v, ',' ORDER BY v) FROM listed")
            .await,
        [format!(
            "{0}:100,{0}:101,{0}:102,{1}:200,{1}:201,{1}:202,{1}:203",
            topic("list-a"),
            topic("list-b")
        )]
    );

    // `sluice lag` lists what the consumer reads: both matching topics, every offset committed.
    let deadline = Instant::now() + Duration::from_secs(30);
    let lags = loop {
        let out = case.env.output(&["lag", "--json", "--sinks", &file], &[]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            support::case::text(&out.stderr)
        );
        let groups: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let feed: Vec<(String, i64)> = groups
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["pipeline"] == "feed")
            .map(|g| {
                (
                    g["topic"].as_str().unwrap().to_owned(),
                    g["total_lag"].as_i64().unwrap(),
                )
            })
            .collect();
        if feed.iter().all(|(_, lag)| *lag == 0) || Instant::now() > deadline {
            break feed;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(lags, [(topic("feed.a"), 0), (topic("feed.b"), 0)]);
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(60)).success(),
        "{}",
        run.tail()
    );
    assert!(
        run.tail()
            .contains("the topics matching the pattern changed"),
        "the new topic is logged"
    );
    let names: Vec<String> = ["feed.a", "feed.b", "list-a", "list-b", "feedx"]
        .iter()
        .map(|n| topic(n))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    sluice_testkit::delete_topics(stack, &names).await;
    case.cleanup().await;
}
