//! A dead letter keeps its record's Kafka headers (migration 0015), and `sluice dlq replay`
//! re-publishes them, on the real stack through the `sluice` binary:
//!
//! 1. Debezium's `c` of a key change (`tests/data/debezium/05-create-id3-pk-update`, with its
//!    `__debezium.oldkey` header) refused by a CHECK of the target is dead-lettered; after
//!    the CHECK is dropped, `sluice dlq replay` re-publishes it with its headers and it is
//!    applied as the key change it is: the new row holds the TOASTed value it kept from the
//!    old key's row (without the header it is an update of a row 3 that does not exist,
//!    which changes nothing); the old row stays for its own `d`.
//! 2. A record with a repeated header name, a header without a value, an empty one, one that
//!    is not UTF-8 and one with HTML and a terminal escape is dead-lettered with all of them,
//!    in order; the replayed copy on the topic carries the same headers in the same order,
//!    then `sluice-replay-count: 1`; `sluice dlq show` prints them (text, `(null)`, hex) and
//!    so does `--json`; the console's detail page (a plain HTTP GET, not the browser of
//!    `tests/console.rs`) shows them escaped; a dead letter recorded before the migration
//!    (no headers kept) shows "not kept" and still replays.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use support::case::{Case, text};
use support::http::{free_port, status_of};

/// A header: name and value (`None`: no value).
type Header = (String, Option<Vec<u8>>);

/// A captured record's key, value and headers (`tests/data/debezium/<name>.*.json`; the
/// headers file holds each value as a UTF-8 string, `null` for none).
fn captured(name: &str) -> (Vec<u8>, Vec<u8>, Vec<Header>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/debezium");
    let read = |ext: &str| std::fs::read(dir.join(format!("{name}.{ext}"))).unwrap();
    let headers: serde_json::Value = serde_json::from_slice(&read("headers.json")).unwrap();
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
    (read("key.json"), read("value.json"), headers)
}

/// Produces one record with `headers` exactly (a header without a value included).
async fn produce(case: &Case, sink: &str, key: &[u8], value: &[u8], headers: &[Header]) {
    let producer: FutureProducer = sluice_testkit::producer(&case.env.stack);
    let mut owned = rdkafka::message::OwnedHeaders::new();
    for (name, value) in headers {
        owned = owned.insert(rdkafka::message::Header {
            key: name,
            value: value.as_deref(),
        });
    }
    let topic = case.topic(sink);
    let record = FutureRecord::<[u8], [u8]>::to(&topic)
        .key(key)
        .payload(value)
        .headers(owned);
    producer
        .send(record, Duration::from_secs(30))
        .await
        .unwrap_or_else(|(e, _)| panic!("produce to {topic}: {e}"));
}

/// The record at `offset` of partition 0 of `topic`: its headers.
fn headers_at(case: &Case, topic: &str, offset: i64) -> Vec<Header> {
    let reader: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &case.env.stack.bootstrap)
        .set("group.id", format!("{}-reader", case.env.prefix))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut list = rdkafka::TopicPartitionList::new();
    list.add_partition_offset(topic, 0, rdkafka::Offset::Offset(offset))
        .unwrap();
    reader.assign(&list).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "no record at {topic}[0]@{offset}"
        );
        match reader.poll(Duration::from_millis(500)) {
            Some(Ok(m)) => {
                assert_eq!(m.offset(), offset);
                return m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default();
            }
            Some(Err(e)) => panic!("read {topic}: {e}"),
            None => {}
        }
    }
}

/// The ids of the dead letters, oldest first.
async fn dead_letter_ids(case: &Case) -> Vec<i64> {
    let mut conn = case.env.schema.connect().await;
    sqlx::query_scalar("SELECT id FROM dead_letter_events ORDER BY id")
        .fetch_all(&mut conn)
        .await
        .unwrap()
}

/// `sluice dlq replay --id <id> --execute`: its stdout, asserting exit 0.
fn replay(case: &Case, id: i64) -> String {
    let out = case.env.output(
        &["dlq", "replay", "--id", &id.to_string(), "--execute"],
        &[],
    );
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    stdout
}

const ITEMS_DDL: &str = r"
CREATE TABLE items_replica (
    id bigint PRIMARY KEY,
    title text,
    amount numeric(12,2),
    doc jsonb,
    big text,
    at timestamptz,
    note text NULL,
    day date,
    ts timestamp,
    lsn bigint,
    CONSTRAINT not_yet CHECK (title <> 'key changed 2 -> 3')
);";

/// `tests/replicate.rs`'s sink, on this test's topic.
const ITEMS_MAPPING: &str = r#"
[[sink]]
name = "items"
topic = "{prefix}-items"
table = "items_replica"
key = ["id"]
format = "debezium"
on_tombstone = "ignore"
conflict = { newest-wins = "lsn" }
# The old key's delete never comes here (the old row is written by hand): the create does not
# wait for it and reads the old key's row as it is.
debezium = { key_change_wait = 0 }

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
lsn = { cdc = "lsn" }
"#;

#[tokio::test]
async fn a_replayed_key_change_keeps_its_old_key_header() {
    let Some(case) = Case::new(&["items"], ITEMS_DDL, ITEMS_MAPPING).await else {
        return;
    };
    case.assert_valid();
    // The old key's row as the stream left it before the key change (its `big` TOASTed at
    // the source, so the `c` of the new key carries only the placeholder); an older LSN.
    {
        let mut conn = case.env.schema.connect().await;
        sqlx::query(
            "INSERT INTO items_replica (id, title, big, lsn) \
             VALUES (2, 'before the key change', 'the kept TOASTed value', 31727126000)",
        )
        .execute(&mut conn)
        .await
        .unwrap();
    }
    let (key, value, headers) = captured("05-create-id3-pk-update");
    assert_eq!(headers[0].0, "__debezium.oldkey", "{headers:?}");
    produce(&case, "items", &key, &value, &headers).await;
    case.run_to_end("refused").await;
    let dead = case.dead_letters().await;
    assert_eq!(dead.len(), 1, "{dead:#?}");
    assert_eq!(dead[0].2, "constraint_violation", "{dead:#?}");
    let rows = "SELECT concat_ws('|', id, title, big) FROM items_replica ORDER BY id";
    assert_eq!(
        case.rows(rows).await,
        ["2|before the key change|the kept TOASTed value"]
    );

    // The fix on the target, then the replay: applied as the key change it is.
    {
        let mut conn = case.env.schema.connect().await;
        sqlx::query("ALTER TABLE items_replica DROP CONSTRAINT not_yet")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let ids = dead_letter_ids(&case).await;
    let replayed = replay(&case, ids[0]);
    assert!(replayed.contains("re-published to"), "{replayed}");
    case.run_to_end("replayed").await;
    // Applied as a key change: the new row takes the TOASTed value it did not carry from the
    // old key's row (without `__debezium.oldkey` it would be an update of a row 3 that does
    // not exist, which changes nothing). The old row stays until its own `d` comes (a key
    // change's create never deletes the old key: a re-insert of it may be there).
    assert_eq!(
        case.rows(rows).await,
        [
            "2|before the key change|the kept TOASTed value",
            "3|key changed 2 -> 3|the kept TOASTed value"
        ],
        "the new row kept the old row's value; dead letters: {:#?}",
        case.dead_letters().await
    );
    assert_eq!(case.dead_letters().await.len(), 1, "no new dead letter");
    case.cleanup().await;
}

const RAW_DDL: &str = "CREATE TABLE raw (k TEXT PRIMARY KEY, v BIGINT NOT NULL);";

const RAW_MAPPING: &str = r#"
[[sink]]
name = "raw"
topic = "{prefix}-raw"
table = "raw"
key = ["k"]
conflict = "always-update"
[sink.columns]
k = { key = "" }
v = { field = "v" }
"#;

/// A header value with HTML and a terminal escape (valid UTF-8).
const HOSTILE: &str = "<script>alert(1)</script>\u{1b}[31m";

fn odd_headers() -> Vec<Header> {
    vec![
        ("trace".into(), Some(b"first".to_vec())),
        ("none".into(), None),
        ("trace".into(), Some(b"second".to_vec())),
        ("blank".into(), Some(Vec::new())),
        ("bin".into(), Some(b"\xff\x00\xfe<".to_vec())),
        ("html".into(), Some(HOSTILE.as_bytes().to_vec())),
    ]
}

/// `GET path` of the console on `port` over HTTP/1.0, for its own host (it refuses another
/// `Host`): (status, body).
fn console_get(port: u16, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAccept: text/html\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (
        head.split(' ').nth(1).unwrap().parse().unwrap(),
        body.to_owned(),
    )
}

/// A running `sluice console`, read-only (no token).
struct ConsoleProcess {
    child: Child,
    port: u16,
}

impl ConsoleProcess {
    fn start(case: &Case) -> ConsoleProcess {
        let port = free_port();
        let log = case.env.dir.join("console.log");
        let mut cmd = case.env.sluice(&["console"]);
        cmd.env("SLUICE_CONSOLE_ADDR", format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut console = ConsoleProcess {
            child: cmd.spawn().unwrap(),
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while status_of(port, "/login").is_none() {
            if let Some(status) = console.child.try_wait().unwrap() {
                panic!(
                    "sluice console exited with {status}:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "console did not listen");
            std::thread::sleep(Duration::from_millis(100));
        }
        console
    }
}

impl Drop for ConsoleProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn headers_are_kept_shown_and_replayed_in_order() {
    let Some(case) = Case::new(&["raw"], RAW_DDL, RAW_MAPPING).await else {
        return;
    };
    case.assert_valid();
    let headers = odd_headers();
    produce(&case, "raw", b"k1", b"not json", &headers).await;
    case.run_to_end("dead-lettered").await;
    let ids = dead_letter_ids(&case).await;
    assert_eq!(ids.len(), 1, "{:#?}", case.dead_letters().await);
    let id = ids[0];

    // Stored in order, bytes exact, the header without a value a NULL element.
    let mut conn = case.env.schema.connect().await;
    let (names, values): (Vec<String>, Vec<Option<Vec<u8>>>) =
        sqlx::query_as("SELECT header_names, header_values FROM dead_letter_events WHERE id = $1")
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    let stored: Vec<Header> = names.into_iter().zip(values).collect();
    assert_eq!(stored, headers);

    // `sluice dlq show`: every header in order, text escaped, (null), hex.
    let out = case.env.output(&["dlq", "show", &id.to_string()], &[]);
    let shown = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}\n{}", text(&out.stderr));
    let expected = "headers:\n  trace: first\n  none: (null)\n  trace: second\n  blank: \n  \
                    bin: (hex) ff00fe3c\n  html: <script>alert(1)</script>\\u{1b}[31m\n";
    assert!(shown.contains(expected), "{shown}");
    assert!(
        !shown.contains('\u{1b}'),
        "no raw escape reaches the terminal: {shown}"
    );
    let out = case
        .env
        .output(&["dlq", "show", &id.to_string(), "--json"], &[]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    assert_eq!(
        json["headers"],
        serde_json::json!([
            ["trace", {"encoding": "utf8", "data": "first"}],
            ["none", null],
            ["trace", {"encoding": "utf8", "data": "second"}],
            ["blank", {"encoding": "utf8", "data": ""}],
            ["bin", {"encoding": "hex", "data": "ff00fe3c"}],
            ["html", {"encoding": "utf8", "data": HOSTILE}],
        ])
    );

    // The console's detail page: the headers escaped as the payload is.
    {
        let console = ConsoleProcess::start(&case);
        let (status, page) = console_get(console.port, &format!("/dead-letters/{id}"));
        assert_eq!(status, 200, "{page}");
        let table = &page[page.find("<table id=\"headers\">").expect(&page)..];
        let table = &table[..table.find("</table>").unwrap()];
        let cells: Vec<&str> = table
            .split("<tr><td>")
            .skip(1)
            .map(|row| row.split("</tr>").next().unwrap())
            .collect();
        assert_eq!(
            cells,
            [
                "1</td><td><code>trace</code></td><td><code>first</code></td>",
                "2</td><td><code>none</code></td><td><em>(null)</em></td>",
                "3</td><td><code>trace</code></td><td><code>second</code></td>",
                "4</td><td><code>blank</code></td><td><code></code></td>",
                "5</td><td><code>bin</code></td><td><code>(hex) ff 00 fe 3c</code></td>",
                "6</td><td><code>html</code></td><td><code>&lt;script&gt;alert(1)&lt;&#x2f;\
                 script&gt;\\u{1b}[31m</code></td>",
            ],
            "{table}"
        );
        assert!(!page.contains("<script>alert(1)"), "{page}");
    }

    // The replay: the copy carries the same headers in the same order, then its count.
    let replayed = replay(&case, id);
    assert!(replayed.contains("re-published to"), "{replayed}");
    let topic = case.topic("raw");
    let mut expected = headers.clone();
    expected.push(("sluice-replay-count".into(), Some(b"1".to_vec())));
    assert_eq!(headers_at(&case, &topic, 1), expected);
    // It fails again: its dead letter has them too, with the carried count.
    case.run_to_end("again").await;
    let (names, values, count): (Vec<String>, Vec<Option<Vec<u8>>>, i32) = sqlx::query_as(
        "SELECT header_names, header_values, replay_count FROM dead_letter_events \
         WHERE id <> $1",
    )
    .bind(id)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(names.into_iter().zip(values).collect::<Vec<_>>(), expected);
    assert_eq!(count, 1);

    // A dead letter recorded before the migration (its headers not kept) is shown as such
    // and replays as before: the count is its only header.
    let old: i64 = sqlx::query_scalar(
        "INSERT INTO dead_letter_events (topic, partition, kafka_offset, consumer_group, \
         payload, payload_size, error_kind, reason) \
         VALUES ($1, 0, 99, 'g', 'old', 3, 'decode_error', 'old') RETURNING id",
    )
    .bind(&topic)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let out = case.env.output(&["dlq", "show", &old.to_string()], &[]);
    assert!(
        text(&out.stdout).contains("headers: (not kept"),
        "{}",
        text(&out.stdout)
    );
    replay(&case, old);
    assert_eq!(
        headers_at(&case, &topic, 2),
        [("sluice-replay-count".to_owned(), Some(b"1".to_vec()))]
    );
    drop(conn);
    case.cleanup().await;
}
