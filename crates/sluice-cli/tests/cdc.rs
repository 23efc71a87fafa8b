//! The CDC relay of the outbox on the real stack: a Kafka Connect standalone worker
//! (`scripts/stack connect`) with the Debezium PostgreSQL connector and its Outbox Event
//! Router, configured as docs/outbox.md says, relays CDC rows from a publication of CDC inserts.
//!
//! 4 writers enqueue 5,000 CDC events (`enqueue_cdc`, 1-5 per transaction, 25 keys each, some
//! keys with an explicit partition) beside PENDING rows that the publication must leave out.
//! Then: each event id exactly once in the topic, each key's events in enqueue order, and
//! each record equal to what `sluice dispatch` publishes for a copy of the same rows (same
//! ids, another topic): key, partition, headers byte for byte, payload as the same JSON
//! value (the relay sends PostgreSQL's text of the jsonb, the dispatcher compact JSON). The
//! copy's table also holds CDC rows that the dispatcher must not touch. The replication slot
//! and the publication are dropped at the end, also when the test fails.
//!
//! sluice-test: alone (its relays must carry a burst of 5,000 events within a deadline, and
//! a logical slot decodes all the server's WAL: beside a WAL-heavy test it slowed tenfold):
//! `scripts/test-all` runs this binary with no other test binary beside it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use serde_json::{Value, json};
use sluice_outbox::{NewEvent, enqueue, enqueue_cdc};
use sluice_testkit::TestSchema;
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::*;
use uuid::Uuid;

const EVENTS: usize = 5_000;
const WRITERS: usize = 4;
const KEYS_PER_WRITER: usize = 25;
/// PENDING rows among the CDC ones in the relayed table (no dispatcher runs on it).
const PENDING_BESIDE: usize = 40;
/// CDC rows among the PENDING copies in the dispatcher's table.
const CDC_BESIDE: usize = 40;

/// One record read back: partition, offset, key, headers in order, payload.
#[derive(Debug, Clone)]
struct Record {
    partition: i32,
    offset: i64,
    key: String,
    headers: Vec<(String, Vec<u8>)>,
    payload: Vec<u8>,
}

impl Record {
    fn event_id(&self) -> Uuid {
        let (_, value) = self
            .headers
            .iter()
            .find(|(name, _)| name == sluice_outbox::EVENT_ID_HEADER)
            .unwrap_or_else(|| panic!("no event id header: {self:?}"));
        Uuid::parse_str(std::str::from_utf8(value).unwrap()).unwrap()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.payload).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }
}

/// Records at the end offsets of a topic.
fn end_total(bootstrap: &str, topic: &str) -> i64 {
    let reader: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let metadata = reader
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let partitions = metadata.topics()[0].partitions().len() as i32;
    (0..partitions)
        .map(|p| {
            let (low, high) = reader
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap();
            high - low
        })
        .sum()
}

/// Every record of a topic, in (partition, offset) order.
fn read_all(bootstrap: &str, topic: &str) -> Vec<Record> {
    let reader: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "cdc-test-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let metadata = reader
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let partitions = metadata.topics()[0].partitions().len() as i32;
    let mut list = rdkafka::TopicPartitionList::new();
    let mut open = BTreeSet::new();
    for p in 0..partitions {
        let (low, high) = reader
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .unwrap();
        if high > low {
            list.add_partition_offset(topic, p, rdkafka::Offset::Offset(low))
                .unwrap();
            open.insert(p);
        }
    }
    let mut records = vec![];
    if open.is_empty() {
        return records;
    }
    reader.assign(&list).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !open.is_empty() {
        assert!(Instant::now() < deadline, "reading {topic} took too long");
        match reader.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                open.remove(&p);
            }
            Some(Err(e)) => panic!("read {topic}: {e}"),
            Some(Ok(m)) => records.push(Record {
                partition: m.partition(),
                offset: m.offset(),
                key: String::from_utf8(m.key().unwrap_or_default().to_vec()).unwrap(),
                headers: m
                    .headers()
                    .map(|h| {
                        h.iter()
                            .map(|h| (h.key.to_owned(), h.value.unwrap_or_default().to_vec()))
                            .collect()
                    })
                    .unwrap_or_default(),
                payload: m.payload().unwrap_or_default().to_vec(),
            }),
        }
    }
    records.sort_by_key(|r| (r.partition, r.offset));
    records
}

/// (host, port, database) of a `postgres://user@host:port/db` URL.
fn pg_address(url: &str) -> (String, String, String) {
    let rest = url.split("://").nth(1).unwrap();
    let rest = rest.rsplit('@').next().unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let (host, port) = authority.split_once(':').unwrap_or((authority, "5432"));
    let database = path.split('?').next().unwrap();
    (host.to_owned(), port.to_owned(), database.to_owned())
}

/// A TCP port free right now (the worker's REST listener).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The Connect worker and what it holds in PostgreSQL. Dropping it (also while unwinding)
/// kills the worker, then drops the replication slot (a leftover slot pins WAL forever) and
/// the publication.
struct Relay {
    worker: Child,
    log: std::path::PathBuf,
    stack_script: String,
    admin_url: String,
    slot: String,
    publication: String,
}

/// A relay's process and its log.
type Spawned = (Child, std::path::PathBuf);

impl Relay {
    /// `relayer` streaming `publication` through `slot`.
    fn start(
        relayer: Relayer,
        env: &Env,
        stack_script: &str,
        slot: &str,
        publication: &str,
    ) -> Relay {
        let (worker, log) = match relayer {
            Relayer::Connect => connect_worker(env, stack_script, slot, publication),
            Relayer::Capture => capture_worker(env, slot, publication),
        };
        Relay {
            worker,
            log,
            stack_script: stack_script.to_owned(),
            admin_url: env.stack.database_url.clone(),
            slot: slot.to_owned(),
            publication: publication.to_owned(),
        }
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn assert_alive(&mut self) {
        if let Some(status) = self.worker.try_wait().unwrap() {
            panic!("the relay exited with {status}:\n{}", self.tail());
        }
    }

    fn psql(&self, sql: &str) -> String {
        support::slots::psql(&self.stack_script, &self.admin_url, sql)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.worker.kill();
        let _ = self.worker.wait();
        support::slots::drop_slot(&self.stack_script, &self.admin_url, &self.slot);
        self.psql(&format!("DROP PUBLICATION IF EXISTS {}", self.publication));
    }
}

/// The payload of writer `w`'s `n`th event: a few JSON types, text that needs escaping.
fn payload(w: usize, n: usize, key: &str) -> Value {
    json!({
        "writer": w,
        "n": n,
        "key": key,
        "text": format!("event {n} of \"{key}\" ✓\n"),
        "amount": n as f64 * 0.25,
        "flags": [n.is_multiple_of(2), null, {"nested": n}],
    })
}

fn key_of(w: usize, n: usize) -> (String, Option<i32>) {
    let k = n % KEYS_PER_WRITER;
    // Every fifth key names its partition; the others are placed by the key's hash.
    let partition = k.is_multiple_of(5).then_some(((w + k) % 3) as i32);
    (format!("w{w}-k{k}"), partition)
}

/// Writer `w`: its share of the CDC events, 1-5 per transaction, with a PENDING row now and
/// then in the same transactions.
async fn write(schema: TestSchema, topic: String, side_topic: String, w: usize) -> usize {
    let mut conn = schema.connect().await;
    let share = EVENTS / WRITERS;
    let mut n = 0;
    let mut pending = 0;
    let mut transactions: usize = 0;
    while n < share {
        transactions += 1;
        let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
        for _ in 0..(1 + n % 5).min(share - n) {
            let (key, partition) = key_of(w, n);
            let mut event = NewEvent::new(&topic, "user", &key, "cdc.test", payload(w, n, &key));
            if let Some(p) = partition {
                event = event.with_partition(p);
            }
            enqueue_cdc(&mut tx, &event).await.unwrap();
            n += 1;
        }
        if transactions.is_multiple_of(20) && pending < PENDING_BESIDE / WRITERS {
            let event = NewEvent::new(&side_topic, "user", "side", "cdc.test", json!({"w": w}));
            enqueue(&mut tx, &event).await.unwrap();
            pending += 1;
        }
        tx.commit().await.unwrap();
    }
    pending
}

/// Who relays the CDC rows.
#[derive(Debug, Clone, Copy)]
enum Relayer {
    /// Kafka Connect with the Debezium connector and its Outbox Event Router.
    Connect,
    /// `sluice capture` with `CAPTURE_OUTBOX_TABLES`.
    Capture,
}

/// The Connect worker with the connector, configured as docs/outbox.md says, and its log.
fn connect_worker(env: &Env, stack_script: &str, slot: &str, publication: &str) -> Spawned {
    let name = env.schema.name.clone();
    // The worker and the connector, as in
    // docs/outbox.md#the-cdc-option-debezium-instead-of-sluice-dispatch.
    let (host, port, database) = pg_address(&env.stack.database_url);
    let worker_file = env.dir.join("worker.properties");
    std::fs::write(
        &worker_file,
        format!(
            "bootstrap.servers={bootstrap}\n\
             key.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n\
             offset.storage.file.filename={offsets}\n\
             offset.flush.interval.ms=1000\n\
             listeners=http://127.0.0.1:{rest}\n",
            bootstrap = env.stack.bootstrap,
            offsets = env.dir.join("offsets.dat").display(),
            rest = free_port(),
        ),
    )
    .unwrap();
    let connector_file = env.dir.join("connector.properties");
    std::fs::write(
        &connector_file,
        format!(
            "name={name}\n\
             connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
             tasks.max=1\n\
             plugin.name=pgoutput\n\
             database.hostname={host}\n\
             database.port={port}\n\
             database.user=sluice\n\
             database.password=unused\n\
             database.dbname={database}\n\
             topic.prefix={name}\n\
             slot.name={slot}\n\
             publication.name={publication}\n\
             publication.autocreate.mode=disabled\n\
             table.include.list={name}.outbox_events\n\
             snapshot.mode=no_data\n\
             extended.headers.enabled=false\n\
             message.prefix.exclude.list=.*\n\
             transforms=outbox,dropid\n\
             transforms.outbox.type=io.debezium.transforms.outbox.EventRouter\n\
             transforms.outbox.table.field.event.id=id\n\
             transforms.outbox.table.field.event.key=partition_key\n\
             transforms.outbox.table.field.event.payload=payload\n\
             transforms.outbox.route.by.field=topic\n\
             transforms.outbox.route.topic.replacement=${{routedByValue}}\n\
             transforms.outbox.table.fields.additional.placement=\
             id:header:sluice-event-id,event_type:header:sluice-event-type,\
             aggregate_type:header:sluice-aggregate-type,\
             aggregate_id:header:sluice-aggregate-id,partition:partition\n\
             transforms.dropid.type=org.apache.kafka.connect.transforms.DropHeaders\n\
             transforms.dropid.headers=id\n"
        ),
    )
    .unwrap();
    let log = env.dir.join("connect.log");
    let worker = Command::new(stack_script)
        .arg("connect")
        .args([&worker_file, &connector_file])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(env.dir.join("connect.err")).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    (worker, log)
}

/// `sluice capture` relaying the schema's outbox table (docs/capture.md#the-outbox-over-wal),
/// and its log; it makes the slot at its first start.
fn capture_worker(env: &Env, slot: &str, publication: &str) -> Spawned {
    let log = env.dir.join("capture.log");
    let worker = env
        .sluice(&["capture"])
        .envs([
            // The server's URL: a replication connection takes no `options` (search_path).
            ("DATABASE_URL", env.stack.database_url.as_str()),
            ("CAPTURE_SLOT", slot),
            ("CAPTURE_PUBLICATION", publication),
            ("CAPTURE_TOPIC_PREFIX", env.schema.name.as_str()),
            (
                "CAPTURE_OUTBOX_TABLES",
                format!("{}.outbox_events", env.schema.name).as_str(),
            ),
            ("CAPTURE_STATUS_INTERVAL_MS", "100"),
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    (worker, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debezium_relays_cdc_rows_as_the_dispatcher_publishes_them() {
    relays_cdc_rows_as_the_dispatcher_publishes_them(Relayer::Connect).await;
}

/// The same with `sluice capture` in place of Connect: no JVM (issue 46).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sluice_capture_relays_cdc_rows_as_the_dispatcher_publishes_them() {
    relays_cdc_rows_as_the_dispatcher_publishes_them(Relayer::Capture).await;
}

async fn relays_cdc_rows_as_the_dispatcher_publishes_them(relayer: Relayer) {
    let Some(env) = Env::new().await else { return };
    let started = Instant::now();
    let stack_script =
        std::env::var("SLUICE_STACK").expect("SLUICE_STACK (from scripts/stack env)");
    let migrated = env.output(&["migrate"], &[]);
    assert!(migrated.status.success(), "{migrated:?}");
    let copy = TestSchema::create(&env.stack).await;
    let migrated = env.output(&["migrate"], &[("DATABASE_URL", &copy.url)]);
    assert!(migrated.status.success(), "{migrated:?}");

    let cdc_topic = format!("{}-cdc", env.prefix);
    let dispatched_topic = format!("{}-dispatched", env.prefix);
    let side_topic = format!("{}-side", env.prefix);
    for topic in [&cdc_topic, &dispatched_topic, &side_topic] {
        sluice_testkit::create_topic(&env.stack, topic, 3).await;
    }

    // The publication: CDC inserts of this schema's outbox only.
    let name = env.schema.name.clone();
    let publication = format!("{name}_outbox_cdc");
    let slot = format!("{name}_outbox_cdc");
    let mut conn = env.schema.connect().await;
    let outbox = format!("{name}.outbox_events WHERE (status = 'CDC') WITH (publish = 'insert')");
    support::slots::publish(&mut conn, &publication, &outbox).await;

    let mut relay = Relay::start(relayer, &env, &stack_script, &slot, &publication);

    // Streaming starts once the slot exists and is active: from then on every commit is
    // in it.
    support::slots::wait_active(&mut conn, &slot, Duration::from_secs(180), || {
        relay.assert_alive();
        relay.tail()
    })
    .await;
    let streaming_at = started.elapsed();

    // 4 concurrent writers.
    let enqueue_started = Instant::now();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            tokio::spawn(write(
                env.schema.clone(),
                cdc_topic.clone(),
                side_topic.clone(),
                w,
            ))
        })
        .collect();
    let mut pending_beside = 0;
    for writer in writers {
        pending_beside += writer.await.unwrap();
    }
    let enqueued_in = enqueue_started.elapsed();

    // Relayed: wait for all of them.
    let deadline = Instant::now() + Duration::from_secs(180);
    while end_total(&env.stack.bootstrap, &cdc_topic) < EVENTS as i64 {
        relay.assert_alive();
        assert!(
            Instant::now() < deadline,
            "{} of {EVENTS} relayed after 180 s:\n{}",
            end_total(&env.stack.bootstrap, &cdc_topic),
            relay.tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let relayed_in = enqueue_started.elapsed();
    let relayed = read_all(&env.stack.bootstrap, &cdc_topic);

    // The rows as written.
    type Row = (Uuid, i64, String, Option<i32>, Value, String);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, seq, partition_key, partition, payload, status FROM outbox_events \
         WHERE topic = $1 ORDER BY seq",
    )
    .bind(&cdc_topic)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(rows.len(), EVENTS);
    assert!(rows.iter().all(|r| r.5 == "CDC"), "CDC rows stay CDC");
    let row_by_id: BTreeMap<Uuid, &Row> = rows.iter().map(|r| (r.0, r)).collect();

    // Exactly once.
    assert_eq!(relayed.len(), EVENTS, "records in {cdc_topic}");
    let ids: BTreeSet<Uuid> = relayed.iter().map(Record::event_id).collect();
    assert_eq!(ids.len(), EVENTS, "an event id twice");
    assert_eq!(
        ids,
        row_by_id.keys().copied().collect(),
        "the ids of the rows"
    );
    // Nothing else: the PENDING rows beside them are not in the publication.
    assert_eq!(pending_beside, PENDING_BESIDE);
    assert_eq!(end_total(&env.stack.bootstrap, &side_topic), 0);

    // Per-key order: within a key (one partition), offsets follow enqueue order.
    let mut last: BTreeMap<&str, (i32, u64)> = BTreeMap::new();
    for record in &relayed {
        let n = record.json()["n"].as_u64().unwrap();
        if let Some((partition, before)) = last.insert(&record.key, (record.partition, n)) {
            assert_eq!(partition, record.partition, "key {} moved", record.key);
            assert!(before < n, "key {}: {before} before {n}", record.key);
        }
        let row = row_by_id[&record.event_id()];
        assert_eq!(record.key, row.2);
        if let Some(p) = row.3 {
            assert_eq!(record.partition, p, "explicit partition");
        }
        assert_eq!(record.json(), row.4, "payload");
    }
    assert_eq!(last.len(), WRITERS * KEYS_PER_WRITER);

    // The dispatcher's output for the same rows: copies with the same ids in another
    // schema, with CDC rows of its own beside them that it must leave alone.
    let mut copy_conn = copy.connect().await;
    sqlx::query(&format!(
        "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, topic, \
         partition_key, partition, payload, headers) \
         SELECT id, aggregate_type, aggregate_id, event_type, $1, partition_key, partition, \
         payload, headers FROM {name}.outbox_events WHERE topic = $2 ORDER BY seq"
    ))
    .bind(&dispatched_topic)
    .bind(&cdc_topic)
    .execute(&mut copy_conn)
    .await
    .unwrap();
    for i in 0..CDC_BESIDE {
        let event = NewEvent::new(&side_topic, "user", "beside", "cdc.test", json!({"i": i}));
        enqueue_cdc(&mut copy_conn, &event).await.unwrap();
    }
    let dispatch_started = Instant::now();
    let dispatch_log = env.dir.join("dispatch.log");
    let mut dispatcher = Running {
        child: env
            .sluice(&["dispatch"])
            .env("DATABASE_URL", &copy.url)
            .env("OUTBOX_POLL_INTERVAL_MS", "100")
            .env("OUTBOX_BATCH_SIZE", "500")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&dispatch_log).unwrap())
            .spawn()
            .unwrap(),
        log: dispatch_log,
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let published: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM outbox_events WHERE topic = $1 AND status = 'PUBLISHED'",
        )
        .bind(&dispatched_topic)
        .fetch_one(&mut copy_conn)
        .await
        .unwrap();
        if published == EVENTS as i64 {
            break;
        }
        dispatcher.assert_alive();
        assert!(
            Instant::now() < deadline,
            "{published} dispatched after 120 s:\n{}",
            dispatcher.tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let dispatched_in = dispatch_started.elapsed();
    dispatcher.signal("TERM");
    assert!(dispatcher.wait(Duration::from_secs(30)).success());
    let untouched: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM outbox_events WHERE topic = $1 AND status = 'CDC' \
         AND claimed_by IS NULL",
    )
    .bind(&side_topic)
    .fetch_one(&mut copy_conn)
    .await
    .unwrap();
    assert_eq!(
        untouched, CDC_BESIDE as i64,
        "the dispatcher claimed CDC rows"
    );
    assert_eq!(end_total(&env.stack.bootstrap, &side_topic), 0);

    let dispatched = read_all(&env.stack.bootstrap, &dispatched_topic);
    assert_eq!(dispatched.len(), EVENTS);
    let dispatched: BTreeMap<Uuid, &Record> =
        dispatched.iter().map(|r| (r.event_id(), r)).collect();
    assert_eq!(dispatched.len(), EVENTS);
    let mut payload_bytes_equal = 0;
    for record in &relayed {
        let twin = dispatched[&record.event_id()];
        assert_eq!(record.key, twin.key);
        assert_eq!(record.partition, twin.partition, "key {}", record.key);
        assert_eq!(record.headers, twin.headers, "headers");
        assert_eq!(record.json(), twin.json(), "payload");
        if record.payload == twin.payload {
            payload_bytes_equal += 1;
        }
    }
    println!(
        "CDC relay ({relayer:?}): {EVENTS} events by {WRITERS} writers; slot streaming after {:.1?}, \
         enqueued in {:.1?}, all relayed {:.1?} after the first enqueue; the dispatcher \
         published the copies in {:.1?}; payload bytes equal for {payload_bytes_equal} \
         (the relay sends PostgreSQL's jsonb text); test wall time {:.1?}",
        streaming_at,
        enqueued_in,
        relayed_in,
        dispatched_in,
        started.elapsed()
    );
    assert_eq!(
        relayed[0].headers.len(),
        4,
        "exactly sluice's four headers: {:?}",
        relayed[0].headers
    );

    // Retiring CDC rows: `sluice outbox purge` deletes those past the retention age, and
    // the relay publishes nothing for the deletes (a marker inserted after them is the next
    // and last record).
    let backdated = sqlx::query(
        "UPDATE outbox_events SET updated_at = now() - interval '8 days' \
         WHERE id IN (SELECT id FROM outbox_events WHERE topic = $1 ORDER BY seq LIMIT 100)",
    )
    .bind(&cdc_topic)
    .execute(&mut conn)
    .await
    .unwrap();
    assert_eq!(backdated.rows_affected(), 100);
    let purge = env.output(&["outbox", "purge"], &[]);
    assert_eq!(
        String::from_utf8_lossy(&purge.stdout).trim(),
        "purged 100 rows older than 7 days",
        "{}",
        String::from_utf8_lossy(&purge.stderr)
    );
    let marker = NewEvent::new(&cdc_topic, "user", "marker", "cdc.test", json!({"n": 0}));
    enqueue_cdc(&mut conn, &marker).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while end_total(&env.stack.bootstrap, &cdc_topic) <= EVENTS as i64 {
        relay.assert_alive();
        assert!(Instant::now() < deadline, "the marker was not relayed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = read_all(&env.stack.bootstrap, &cdc_topic);
    assert_eq!(after.len(), EVENTS + 1, "the purge's deletes were relayed");
    assert_eq!(
        after.iter().filter(|r| r.event_id() == marker.id).count(),
        1
    );

    drop(relay);
    let slots: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1")
            .bind(&slot)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    let publications: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_publication WHERE pubname = $1")
            .bind(&publication)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(
        (slots, publications),
        (0, 0),
        "slot and publication dropped"
    );
    drop(conn);
    drop(copy_conn);
    sluice_testkit::delete_topics(&env.stack, &[&cdc_topic, &dispatched_topic, &side_topic]).await;
    copy.drop_schema().await;
    env.cleanup().await;
}
