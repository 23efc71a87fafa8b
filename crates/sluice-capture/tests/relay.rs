//! The relay against the Debezium 3.6.1 fixtures (crates/sluice-cli/tests/data/debezium):
//! `source.sql`'s statements run against a fresh source while the relay streams its slot
//! into Kafka, and every record it wrote equals the connector's, record for record — key,
//! value, headers, tombstones, partition — with what differs by nature masked: the `source`
//! block's version, timestamps, LSNs and transaction id, the processing time, the run id, and
//! the names the test makes unique (topic prefix, database). The first, `00`, is the initial
//! snapshot's `r` record of the row written before the slot (docs/capture.md#snapshot).
//!
//! Then the durability rule's end: once Kafka acknowledged every record, the slot's
//! confirmed position is past the last change.
//!
//! sluice-test: decodes-wal (the relay streams a slot, under deadlines):
//! `scripts/test-all` never runs this binary beside a `floods-wal` one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Headers;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use sluice_capture::debezium::{Envelope, EnvelopeSettings};
use sluice_capture::outbox::Routing;
use sluice_capture::relay::{Relay, RelayError, RelayReport};
use sluice_capture::snapshot::SnapshotCopy;
use sluice_capture::{CaptureStream, Session, SlotSnapshot, SourceConfig};
use sluice_kafka::ResilientProducer;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::Source;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sluice-cli/tests/data/debezium")
}

/// `source.sql` in two parts: what ran before the connector (without its publication,
/// which the test source makes under its own name), and the statements after, one each.
fn source_sql() -> (String, Vec<String>) {
    let sql = std::fs::read_to_string(fixtures().join("source.sql")).unwrap();
    let (before, after) = sql
        .split_once("-- The connector then started")
        .expect("the marker in source.sql");
    let before: String = before
        .lines()
        .filter(|line| !line.starts_with("CREATE PUBLICATION"))
        .collect::<Vec<_>>()
        .join("\n");
    let after = after
        .split_once('\n')
        .map_or("", |(_, rest)| rest)
        .split(";\n")
        .map(|s| {
            s.lines()
                .filter(|l| !l.trim_start().starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    (before, after)
}

/// A consumed record: partition, key, value, headers.
#[derive(Debug)]
struct Consumed {
    partition: i32,
    key: String,
    value: Option<String>,
    headers: Vec<(String, String)>,
}

fn consume(bootstrap: &str, topic: &str, count: usize) -> Vec<Consumed> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("{topic}-reader"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    // Until `count` arrived (at most 60 s), then 2 s more for any record too many.
    let mut deadline = Instant::now() + Duration::from_secs(60);
    let mut records = Vec::new();
    let mut complete = false;
    while Instant::now() < deadline {
        if !complete && records.len() >= count {
            complete = true;
            deadline = Instant::now() + Duration::from_secs(2);
        }
        let Some(message) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = message.unwrap();
        let text = |bytes: Option<&[u8]>| bytes.map(|b| String::from_utf8_lossy(b).into_owned());
        let headers = message
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_owned(), text(h.value).unwrap_or_default()))
                    .collect()
            })
            .unwrap_or_default();
        records.push(Consumed {
            partition: message.partition(),
            key: text(message.key()).unwrap_or_default(),
            value: text(message.payload()),
            headers,
        });
    }
    records
}

/// `text` with the scalar after each `"name":` of `names` replaced by `0`: the `source`
/// block's and the processing time's values, which differ by nature.
fn masked(text: &str) -> String {
    let mut out = text.to_owned();
    for name in [
        "\"version\":\"",
        "\"ts_ms\":",
        "\"ts_us\":",
        "\"ts_ns\":",
        "\"sequence\":",
        "\"txId\":",
        "\"lsn\":",
    ] {
        let mut from = 0;
        while let Some(found) = out[from..].find(name) {
            let start = from + found + name.len();
            let rest = &out[start..];
            let len = if name.ends_with('"') {
                rest.find('"').unwrap_or(0)
            } else if rest.starts_with('"') {
                string_len(rest)
            } else {
                rest.find([',', '}']).unwrap_or(0)
            };
            out.replace_range(start..start + len, "0");
            from = start + 1;
        }
    }
    out
}

/// The length of the JSON string at the start of `text`, quotes included.
fn string_len(text: &str) -> usize {
    let mut escaped = false;
    for (at, c) in text.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return at + 1,
            _ => {}
        }
    }
    text.len()
}

#[test]
fn masking_replaces_the_values_that_differ_by_nature() {
    assert_eq!(
        masked(r#"{"version":"3.6.1.Final","ts_ms":17,"sequence":"[\"1\",\"2\"]","lsn":9}"#),
        r#"{"version":"0","ts_ms":0,"sequence":0,"lsn":0}"#
    );
    assert_eq!(masked(r#"{"version":1,"x":2}"#), r#"{"version":1,"x":2}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_writes_what_debezium_wrote() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let (before, statements) = source_sql();
    let source = Source::create(&stack.database_url, &before).await;
    let prefix = format!("cap{}", &source.database["capture_".len()..]);
    let topic = format!("{prefix}.public.items");
    sluice_testkit::create_topic(&stack, &topic, 1).await;

    let (stop_tx, relay) = spawn_relay(&stack, &source, &prefix, Routing::default(), true).await;

    let mut writer = source.connect().await;
    let refs: Vec<&str> = statements.iter().map(String::as_str).collect();
    source.run(&mut writer, &refs).await;

    let stems = [
        "00-read-id1-snapshot",
        "01-create-id2",
        "02-update-id2-toast-placeholder",
        "03-delete-id2-pk-update",
        "04-tombstone-id2-pk-update",
        "05-create-id3-pk-update",
        "06-delete-id3",
        "07-tombstone-id3",
        "08-create-id3-reinsert",
        "09-update-id1-big-changed",
    ];
    let records = consume(&stack.bootstrap, &topic, stems.len());
    assert_eq!(records.len(), stems.len(), "{records:#?}");
    let ours = |text: &str| {
        masked(
            &text
                .replace("dbzsamples", &prefix)
                .replace("dbz_samples", &source.database),
        )
    };
    for (record, stem) in records.iter().zip(stems) {
        let read = |suffix: &str| {
            std::fs::read_to_string(fixtures().join(format!("{stem}.{suffix}"))).ok()
        };
        assert_eq!(
            record.key,
            read("key.json").unwrap().replace("dbzsamples", &prefix),
            "{stem}: key"
        );
        match (&record.value, read("value.json")) {
            (Some(value), Some(expected)) => {
                assert_eq!(masked(value), ours(&expected), "{stem}: value");
            }
            (None, None) => {}
            (value, expected) => panic!("{stem}: value {value:?}, expected {expected:?}"),
        }
        let expected: serde_json::Value =
            serde_json::from_str(&read("headers.json").unwrap()).unwrap();
        assert_eq!(
            i64::from(record.partition),
            expected["partition"].as_i64().unwrap()
        );
        let expected_headers: Vec<(String, String)> = expected["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                let name = h[0].as_str().unwrap().to_owned();
                let value = h[1]
                    .as_str()
                    .unwrap_or_default()
                    .replace("dbzsamples", &prefix);
                let value = if name.ends_with("runId") {
                    "test-run".to_owned()
                } else {
                    value
                };
                (name, value)
            })
            .collect();
        assert_eq!(record.headers, expected_headers, "{stem}: headers");
    }

    // Everything Kafka acknowledged is confirmed: the relay's confirmed position passes
    // the last change, and the slot gets it.
    stop_tx.send(()).unwrap();
    let (report, stream) = relay.await.unwrap().unwrap();
    assert_eq!(
        report.records,
        stems.len() as u64 - 1,
        "the relay's (00 is the snapshot's)"
    );
    assert_eq!(report.transactions, 6, "{report:?}");
    let last: serde_json::Value =
        serde_json::from_str(records.last().unwrap().value.as_deref().unwrap()).unwrap();
    let last_change = sluice_capture::Lsn(last["payload"]["source"]["lsn"].as_u64().unwrap());
    let confirmed = report.confirmed.expect("a confirmed position");
    assert!(confirmed > last_change, "{confirmed} after {last_change}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while source.confirmed_flush().await < confirmed {
        assert!(
            Instant::now() < deadline,
            "the slot stayed behind {confirmed}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stream.shutdown().await.unwrap();
}

/// `types/`'s statements (enums, arrays, intervals, bit strings, money, `timetz`, `point`,
/// infinities, TOASTed arrays) against a fresh source while the relay streams: its records
/// equal Debezium 3.6.1's, masked as above (docs/capture.md#debeziums-logical-types). One value
/// is Debezium's own accident and is written as sluice writes it: a multi-dimensional
/// `text[]`'s sub-arrays, which Debezium prints as Java object names (`[Ljava.lang.String;@…`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_writes_debeziums_types() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let types = fixtures().join("types");
    // Each file's statements before the connector started, then those after (one each).
    let (mut before, mut after) = (String::new(), Vec::new());
    for file in ["enum-array.sql", "survey.sql"] {
        let sql = std::fs::read_to_string(types.join(file)).unwrap();
        let (ddl, changes) = sql.split_once("-- then").unwrap();
        for statement in ddl.split(";\n") {
            let statement = statement.trim();
            if !(statement.is_empty()
                || statement.starts_with("DROP")
                || statement.contains("PUBLICATION"))
            {
                before.push_str(statement);
                before.push_str(";\n");
            }
        }
        let changes = changes.split_once('\n').unwrap().1;
        let statements = changes
            .split(";\n")
            .map(str::trim)
            .filter(|s| !s.is_empty());
        after.extend(statements.map(|s| {
            s.lines()
                .filter(|l| !l.starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n")
        }));
    }
    let source = Source::create(
        &stack.database_url,
        &format!("CREATE TABLE public.items (id int PRIMARY KEY);\n{before}"),
    )
    .await;
    let mut writer = source.connect().await;
    let publication = &source.publication;
    source
        .run(
            &mut writer,
            &[&format!(
                "ALTER PUBLICATION {publication} ADD TABLE dbzenum.t, dbzt2.t, dbzt2.toast"
            )],
        )
        .await;
    let prefix = format!("cap{}", &source.database["capture_".len()..]);
    let topics = [
        ("dbzenum", "dbzenum.t", 2),
        ("dbzt2", "dbzt2.t", 3),
        ("dbzt2", "dbzt2.toast", 2),
    ];
    for (_, table, _) in topics {
        sluice_testkit::create_topic(&stack, &format!("{prefix}.{table}"), 1).await;
    }
    let (stop_tx, relay) = spawn_relay(&stack, &source, &prefix, Routing::default(), false).await;
    let refs: Vec<&str> = after.iter().map(String::as_str).collect();
    source.run(&mut writer, &refs).await;

    for (recorded_prefix, table, count) in topics {
        let records = consume(&stack.bootstrap, &format!("{prefix}.{table}"), count);
        assert_eq!(records.len(), count, "{table}: {records:#?}");
        let stem = match table {
            "dbzenum.t" => "enum-array-id",
            "dbzt2.t" => "survey-t-",
            _ => "survey-toast-",
        };
        let theirs = |text: &str| {
            text.replace(
                &format!("\"{recorded_prefix}.{table}"),
                &format!("\"{prefix}.{table}"),
            )
            .replace(
                &format!("\"name\":\"{recorded_prefix}\""),
                &format!("\"name\":\"{prefix}\""),
            )
            .replace(
                "\"db\":\"sluice\"",
                &format!("\"db\":\"{}\"", source.database),
            )
        };
        for (n, record) in records.iter().enumerate() {
            let read = |suffix: &str| {
                std::fs::read_to_string(types.join(format!("{stem}{}.{suffix}", n + 1))).unwrap()
            };
            assert_eq!(
                record.key,
                theirs(&read("key.json")),
                "{table} {}: key",
                n + 1
            );
            let mut expected = theirs(&read("value.json"));
            if let Some(at) = expected.find("\"mdt\":[\"[Ljava.lang.String;@") {
                let end = at + expected[at..].find(']').unwrap() + 1;
                expected.replace_range(at..end, "\"mdt\":[null,null]");
            }
            let value = record.value.as_deref().unwrap_or_default();
            assert_eq!(masked(value), masked(&expected), "{table} {}: value", n + 1);
        }
    }
    stop_tx.send(()).unwrap();
    let (_, stream) = relay.await.unwrap().unwrap();
    stream.shutdown().await.unwrap();
}

/// What a running relay hands back when stopped: its report and its stream.
type Running = tokio::task::JoinHandle<Result<(RelayReport, CaptureStream), RelayError>>;

/// A relay of `source`'s new slot into Kafka under topic prefix `prefix`, until the sender
/// is used; with `snapshot`, the slot's initial snapshot first (its records acknowledged
/// before the stream starts).
async fn spawn_relay(
    stack: &sluice_testkit::Stack,
    source: &Source,
    prefix: &str,
    routing: Routing,
    snapshot: bool,
) -> (tokio::sync::oneshot::Sender<()>, Running) {
    let config = SourceConfig::from_url(&source.url, &source.slot, &source.publication)
        .unwrap()
        .with_status_interval(Duration::from_millis(100));
    let mut session = Session::connect(&config).await.unwrap();
    let wanted = if snapshot {
        SlotSnapshot::Export
    } else {
        SlotSnapshot::Nothing
    };
    let slot = session.create_slot(false, wanted).await.unwrap();
    let mut catalog = source.connect().await;
    let producer = ResilientProducer::new(
        &sluice_core::KafkaClientSettings::new(&stack.bootstrap),
        "capture-test",
    )
    .unwrap();
    let envelope = Envelope::new(EnvelopeSettings {
        prefix: prefix.to_owned(),
        database: source.database.clone(),
        version: format!("sluice {}", env!("CARGO_PKG_VERSION")),
        schemas: true,
        run_id: "test-run".into(),
    });
    if let Some(exported) = &slot.snapshot {
        let report = SnapshotCopy {
            conn: &mut catalog,
            exported: Some(exported),
            consistent_point: slot.consistent_point,
            publication: &source.publication,
            envelope: &envelope,
            routing: &routing,
            producer: &producer,
        }
        .run()
        .await
        .unwrap();
        assert_eq!(report.tables, 1, "{report:?}");
    }
    let mut stream = session.start().await.unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let relay = tokio::spawn(async move {
        Relay {
            stream: &mut stream,
            catalog: &mut catalog,
            producer: &producer,
            envelope: &envelope,
            routing: &routing,
            metrics: &sluice_capture::metrics::CaptureMetrics::default(),
            heartbeat: None,
        }
        .run(async {
            let _ = stop_rx.await;
        })
        .await
        .map(|report| (report, stream))
    });
    (stop_tx, relay)
}

/// Logical messages as an outbox with no table (docs/capture.md#the-outbox-over-wal): those
/// under the relay's prefix go to the topic it names, with the key after `/` (none without),
/// in a transaction or outside one, in order; another prefix's are not relayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relay_sends_logical_messages_under_its_prefix() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let source = Source::create(
        &stack.database_url,
        "CREATE TABLE public.items (id int PRIMARY KEY);",
    )
    .await;
    let topic = format!("msg{}", &source.database["capture_".len()..]);
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let routing = Routing {
        outbox_tables: Vec::new(),
        message_prefix: Some("outbox:".into()),
    };
    let (stop_tx, relay) = spawn_relay(&stack, &source, "unused", routing, false).await;
    let mut writer = source.connect().await;
    let emit = |transactional: bool, prefix: &str, content: &str| {
        format!("SELECT pg_logical_emit_message({transactional}, '{prefix}', '{content}')")
    };
    let statements = [
        format!(
            "BEGIN; {}; {}; COMMIT",
            emit(true, &format!("outbox:{topic}/k1"), r#"{"n": 1}"#),
            emit(true, &format!("other:{topic}/k1"), "not ours")
        ),
        emit(false, &format!("outbox:{topic}/k1"), "two"),
        emit(true, &format!("outbox:{topic}"), "keyless"),
    ];
    for statement in &statements {
        sqlx::raw_sql(statement).execute(&mut writer).await.unwrap();
    }
    let records = consume(&stack.bootstrap, &topic, 3);
    let seen: Vec<(&str, Option<&str>)> = records
        .iter()
        .map(|r| (r.key.as_str(), r.value.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            ("k1", Some(r#"{"n": 1}"#)),
            ("k1", Some("two")),
            ("", Some("keyless"))
        ]
    );
    assert!(records.iter().all(|r| r.headers.is_empty()), "{records:?}");
    stop_tx.send(()).unwrap();
    let (report, stream) = relay.await.unwrap().unwrap();
    assert_eq!(report.records, 3, "{report:?}");
    stream.shutdown().await.unwrap();
}

/// A domain column's records are its base type's, as Debezium's are: its schema and its value
/// equal those of a column of the base type beside it (a domain over a domain too, with the
/// type modifier the inner one gives). They were text, which sluice's own sink refused for
/// the replica's domain column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_domain_column_is_written_as_its_base_type() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let source = Source::create(
        &stack.database_url,
        "CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
         CREATE DOMAIN cents AS numeric(10,2);
         CREATE DOMAIN price AS cents CHECK (VALUE >= 0);
         CREATE DOMAIN stamp AS timestamptz;
         CREATE DOMAIN code AS text NOT NULL;
         CREATE DOMAIN short_code AS code;
         CREATE TABLE public.items (id int PRIMARY KEY,
             a posint, a_base integer, p price NOT NULL DEFAULT 0, p_base numeric(10,2),
             t stamp, t_base timestamptz, c short_code, c_base text);",
    )
    .await;
    let prefix = format!("cap{}", &source.database["capture_".len()..]);
    let topic = format!("{prefix}.public.items");
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let (stop_tx, relay) = spawn_relay(&stack, &source, &prefix, Routing::default(), false).await;
    let mut writer = source.connect().await;
    source
        .run(
            &mut writer,
            &["INSERT INTO public.items VALUES (1, 7, 7, 12.5, 12.5, \
               '2026-03-04 05:06:07.5+00', '2026-03-04 05:06:07.5+00', 'x', 'x')"],
        )
        .await;
    let records = consume(&stack.bootstrap, &topic, 1);
    let value: serde_json::Value =
        serde_json::from_str(records[0].value.as_deref().unwrap()).unwrap();
    let after_schema = value["schema"]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "after")
        .unwrap();
    let field = |name: &str| {
        let mut schema = after_schema["fields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["field"] == name)
            .unwrap()
            .clone();
        schema.as_object_mut().unwrap().remove("field");
        schema
    };
    let after = &value["payload"]["after"];
    for (domain, base) in [
        ("a", "a_base"),
        ("p", "p_base"),
        ("t", "t_base"),
        ("c", "c_base"),
    ] {
        let mut domain_schema = field(domain);
        // `p` is NOT NULL with a default, `c`'s domain (under another) NOT NULL: required.
        if domain == "p" || domain == "c" {
            let object = domain_schema.as_object_mut().unwrap();
            assert_eq!(object.remove("optional"), Some(serde_json::json!(false)));
            if domain == "p" {
                assert!(object.remove("default").is_some(), "{domain_schema}");
            }
            object.insert("optional".into(), serde_json::json!(true));
        }
        assert_eq!(domain_schema, field(base), "{domain}'s schema");
        assert_eq!(after[domain], after[base], "{domain}'s value");
    }
    assert_eq!(after["a"], serde_json::json!(7));
    stop_tx.send(()).unwrap();
    let (_, stream) = relay.await.unwrap().unwrap();
    stream.shutdown().await.unwrap();
}
