//! Replication of a PostgreSQL table through Debezium and a `debezium` declared sink, on the
//! real stack: the source table lives in a database of its own (made for the test, dropped
//! at the end), a Kafka Connect standalone worker (`scripts/stack connect`) runs the
//! Debezium PostgreSQL connector on it (pgoutput, `JsonConverter` with schemas, defaults for
//! decimals and times), and `sluice run` applies the change events to a table in the test's
//! schema of the test database.
//!
//! The source: `bigint` key, `text`, `numeric(12,2)`, `jsonb`, a `text` of 2.5-4 kB that
//! PostgreSQL stores out of line (TOAST), `timestamptz`, a nullable `text`, `date`,
//! `timestamp`; `REPLICA IDENTITY DEFAULT`; 500 rows before the connector starts (its
//! snapshot). The workload: 12,000 random operations by two writers in transactions of 1-4
//! — inserts, updates that leave the TOASTed column alone (Debezium sends
//! `__debezium_unavailable_value` for it), updates that rewrite it, key updates, deletes,
//! re-inserts of deleted keys — while `sluice run` applies them and is SIGKILLed twice.
//! Then: run to the end, the target equals the source row for row; `sluice replay` of the
//! sink's group to the earliest offset, run to the end again, still equal; no dead letters.
//!
//! Half the key updates leave the TOASTed column alone: Debezium's `c` for the new key then
//! carries the placeholder (`tests/data/debezium/05-create-id3-pk-update.value.json`) and the
//! sink takes the value from the old row its `d` set aside; when the `d` comes later (the old
//! key's partition is behind), the `c` and the new key's later rows wait until it does. The
//! other half rewrite it. The sink's `batch_size` is
//! 500 for the first and third `sluice run` and 1 for the second and for the replay's, so
//! key changes meet every batch boundary.
//!
//! The same replication runs a second time with Debezium writing through Apicurio's
//! `AvroConverter` in the Confluent wire format (the common production setup), keys and
//! values in the stack's schema registry, a shorter workload of the same mix: the sink reads
//! `value_format = "avro"` and `key_format = "avro"`, the events' semantic types come from
//! the registry's schemas, and its names with the topic's `-` are read as the converter wrote
//! them.
//!
//! The replication slot, the publication (with the source database) and the topic are
//! dropped at the end, the slot and the database also when the test fails.
//!
//! sluice-test: decodes-wal (Debezium streams a slot through kills and a replay, under deadlines):
//! `scripts/test-all` never runs this binary beside a `floods-wal` one.
//! sluice-test: uses-registry (the Avro twin's converters and sink talk to the registry):
//! `scripts/test-all` never runs this binary beside a `freezes-registry` one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use serde_json::Value;
use sqlx::{Connection, Executor, PgConnection};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{Env, Running};

/// Random operations on the source, all writers together.
const OPERATIONS: usize = 12_000;
/// Concurrent writers; writer `w` owns the keys it inserted and the initial rows with
/// `id % WRITERS == w`, so no two writers touch one row.
const WRITERS: usize = 2;
const _: () = assert!(
    OPERATIONS.is_multiple_of(WRITERS),
    "an equal share per writer"
);
/// Rows in the source before the connector starts: its snapshot (`op` = `r`).
const INITIAL_ROWS: i64 = 500;
/// Partitions of the Debezium topic (the connector's producer partitions by key).
const PARTITIONS: i32 = 3;
/// Operations of the workload through the Avro converter (a shorter run of the same mix).
const AVRO_OPERATIONS: usize = 4_000;

/// How the connector writes its change events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Converter {
    /// Kafka Connect's `JsonConverter` with schemas.
    Json,
    /// Apicurio's `AvroConverter` in the Confluent wire format, schemas in the stack's
    /// registry (the common production setup).
    Avro,
}

impl Converter {
    /// The worker's converter properties.
    fn properties(self) -> String {
        match self {
            Converter::Json => "key.converter=org.apache.kafka.connect.json.JsonConverter\n\
                 key.converter.schemas.enable=true\n\
                 value.converter=org.apache.kafka.connect.json.JsonConverter\n\
                 value.converter.schemas.enable=true\n"
                .to_owned(),
            Converter::Avro => {
                let ccompat = std::env::var("SCHEMA_REGISTRY_URL")
                    .expect("SCHEMA_REGISTRY_URL (from scripts/stack env)");
                let native = ccompat.replace("/apis/ccompat/v6", "/apis/registry/v2");
                ["key", "value"]
                    .iter()
                    .map(|side| {
                        format!(
                            "{side}.converter=io.apicurio.registry.utils.converter.AvroConverter\n\
                             {side}.converter.apicurio.registry.url={native}\n\
                             {side}.converter.apicurio.registry.auto-register=true\n\
                             {side}.converter.apicurio.registry.id-handler=io.apicurio.registry.serde.Legacy4ByteIdHandler\n\
                             {side}.converter.apicurio.registry.use-id=contentId\n\
                             {side}.converter.apicurio.registry.headers.enabled=false\n"
                        )
                    })
                    .collect()
            }
        }
    }

    /// The sink's format lines beside `format = "debezium"`.
    fn formats(self) -> &'static str {
        match self {
            Converter::Json => "",
            Converter::Avro => "value_format = \"avro\"\nkey_format = \"avro\"",
        }
    }
}

/// The sink's name in the mapping (its group is `<prefix>.items`).
const SINK: &str = "items";

const SOURCE_DDL: &str = r"
CREATE TABLE public.items (
    id bigint PRIMARY KEY,
    title text,
    amount numeric(12,2),
    doc jsonb,
    big text,
    at timestamptz,
    note text NULL,
    day date,
    ts timestamp
);
ALTER TABLE public.items REPLICA IDENTITY DEFAULT;
-- n md5 digests: random-looking hex that pglz does not compress, stored out of line
CREATE FUNCTION public.big_text(seed text, n int) RETURNS text LANGUAGE sql AS
    $$ SELECT string_agg(md5(seed || i), '' ORDER BY i) FROM generate_series(1, n) i $$;
";

const TARGET_DDL: &str = r"
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
    lsn bigint
);
";

/// The sink, in the `debezium` format's mapping language (`{topic}` replaced).
const MAPPING: &str = r#"
[[sink]]
name = "items"
topic = "{topic}"
table = "items_replica"
key = ["id"]
batch_size = {batch}
format = "debezium"
{formats}
on_tombstone = "ignore"
conflict = { newest-wins = "lsn" }

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

/// One row as text, every column cast to text and quoted (NULL apart from 'NULL'), the
/// instant in UTC: equal texts are equal rows.
const ROW_TEXT: &str = "concat_ws('|', id, quote_nullable(title), quote_nullable(amount), \
    quote_nullable(doc), quote_nullable(big), quote_nullable(at AT TIME ZONE 'UTC'), \
    quote_nullable(note), quote_nullable(day), quote_nullable(ts))";

// ---------------------------------------------------------------------------------------
// The source: its database, the Connect worker, and their cleanup
// ---------------------------------------------------------------------------------------

/// `url` with its database replaced by `database` (query kept).
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let (server, _) = base.rsplit_once('/').unwrap();
    match query {
        Some(query) => format!("{server}/{database}?{query}"),
        None => format!("{server}/{database}"),
    }
}

/// (host, port) of a `postgres://user@host:port/db` URL.
fn pg_host_port(url: &str) -> (String, String) {
    let rest = url.split("://").nth(1).unwrap();
    let rest = rest.rsplit('@').next().unwrap();
    let authority = rest.split(['/', '?']).next().unwrap();
    let (host, port) = authority.split_once(':').unwrap_or((authority, "5432"));
    (host.to_owned(), port.to_owned())
}

/// The source database and the Connect worker streaming it. Dropping it (also while
/// unwinding) stops the worker, drops the replication slot (a leftover slot pins WAL for
/// the whole cluster) and then the database with its publication.
struct Source {
    database: String,
    url: String,
    admin_url: String,
    stack_script: String,
    slot: String,
    publication: String,
    topic: String,
    worker: Option<Child>,
    log: PathBuf,
}

impl Source {
    /// Creates the database, the table and its initial rows.
    async fn create(env: &Env) -> Source {
        let database = format!("{}_src", env.schema.name);
        let admin_url = env.stack.database_url.clone();
        let mut admin = PgConnection::connect(&admin_url).await.unwrap();
        admin
            .execute(format!("CREATE DATABASE {database}").as_str())
            .await
            .unwrap();
        let source = Source {
            url: with_database(&admin_url, &database),
            slot: format!("{database}_slot"),
            publication: format!("{database}_pub"),
            topic: format!("{}-dbz.public.items", env.prefix),
            database,
            admin_url,
            stack_script: std::env::var("SLUICE_STACK")
                .expect("SLUICE_STACK (from scripts/stack env)"),
            worker: None,
            log: env.dir.join("connect.log"),
        };
        let mut conn = source.connect().await;
        sqlx::raw_sql(SOURCE_DDL).execute(&mut conn).await.unwrap();
        support::slots::publish(&mut conn, &source.publication, "public.items").await;
        let mut rng = StdRng::seed_from_u64(0);
        for id in 1..=INITIAL_ROWS {
            insert(&mut conn, id, &mut rng).await;
        }
        source
    }

    async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.url))
    }

    /// Starts the worker and waits until the connector streams (its slot is active).
    async fn start_connector(&mut self, env: &Env, converter: Converter) -> Duration {
        let started = Instant::now();
        let (host, port) = pg_host_port(&self.admin_url);
        let worker_file = env.dir.join("worker.properties");
        std::fs::write(
            &worker_file,
            format!(
                "bootstrap.servers={bootstrap}\n\
                 {converters}\
                 offset.storage.file.filename={offsets}\n\
                 offset.flush.interval.ms=1000\n\
                 listeners=http://127.0.0.1:{rest}\n",
                bootstrap = env.stack.bootstrap,
                converters = converter.properties(),
                offsets = env.dir.join("offsets.dat").display(),
                rest = support::http::free_port(),
            ),
        )
        .unwrap();
        let connector_file = env.dir.join("connector.properties");
        std::fs::write(
            &connector_file,
            format!(
                "name={database}\n\
                 connector.class=io.debezium.connector.postgresql.PostgresConnector\n\
                 tasks.max=1\n\
                 plugin.name=pgoutput\n\
                 database.hostname={host}\n\
                 database.port={port}\n\
                 database.user=sluice\n\
                 database.password=unused\n\
                 database.dbname={database}\n\
                 topic.prefix={prefix}-dbz\n\
                 slot.name={slot}\n\
                 publication.name={publication}\n\
                 publication.autocreate.mode=disabled\n\
                 table.include.list=public.items\n\
                 snapshot.mode=initial\n",
                database = self.database,
                prefix = env.prefix,
                slot = self.slot,
                publication = self.publication,
            ),
        )
        .unwrap();
        self.worker = Some(
            Command::new(&self.stack_script)
                .arg("connect")
                .args([&worker_file, &connector_file])
                .stdout(std::fs::File::create(&self.log).unwrap())
                .stderr(std::fs::File::create(env.dir.join("connect.err")).unwrap())
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let mut admin = PgConnection::connect(&self.admin_url).await.unwrap();
        let slot = self.slot.clone();
        support::slots::wait_active(&mut admin, &slot, Duration::from_secs(180), || {
            self.assert_alive();
            self.tail()
        })
        .await;
        // The slot is active already while the connector creates it, before its snapshot:
        // the workload starts once the snapshot's rows are in the topic, so every later
        // change is streamed as an event of its own (a change made before the snapshot would
        // be in it, one event short of what the workload counts).
        self.wait_streamed(&env.stack.bootstrap, INITIAL_ROWS, Duration::from_secs(180))
            .await;
        started.elapsed()
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn assert_alive(&mut self) {
        if let Some(worker) = &mut self.worker
            && let Some(status) = worker.try_wait().unwrap()
        {
            panic!("the Connect worker exited with {status}:\n{}", self.tail());
        }
    }

    /// Waits until the topic holds `records` records (the connector has sent every event).
    async fn wait_streamed(&mut self, bootstrap: &str, records: i64, timeout: Duration) -> i64 {
        let deadline = Instant::now() + timeout;
        loop {
            self.assert_alive();
            let total = end_total(bootstrap, &self.topic);
            if total >= records {
                return total;
            }
            assert!(
                Instant::now() < deadline,
                "{total} of {records} records in {} after {timeout:?}:\n{}",
                self.topic,
                self.tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn psql(&self, sql: &str) -> String {
        support::slots::psql(&self.stack_script, &self.admin_url, sql)
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        if let Some(mut worker) = self.worker.take() {
            let _ = worker.kill();
            let _ = worker.wait();
        }
        support::slots::drop_slot(&self.stack_script, &self.admin_url, &self.slot);
        // The publication goes with the database.
        self.psql(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.database
        ));
    }
}

/// Records at the end offsets of a topic (0 while it does not exist).
fn end_total(bootstrap: &str, topic: &str) -> i64 {
    let admin = sluice_kafka::Admin::new(
        &sluice_core::KafkaClientSettings::new(bootstrap),
        Duration::from_secs(10),
    )
    .unwrap();
    admin
        .watermarks(topic)
        .map(|marks| marks.iter().map(|m| m.high - m.low).sum())
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------
// The workload
// ---------------------------------------------------------------------------------------

/// What a writer does to one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    /// A new key.
    Insert,
    /// Every column but `big` (Debezium: `big` = `__debezium_unavailable_value`).
    UpdateKeepingBig,
    /// `big` and the title.
    UpdateBig,
    /// The key moves to a new or a deleted key (and `big` is rewritten, see the module doc).
    UpdateKey,
    Delete,
    /// A deleted key comes back.
    Reinsert,
}

impl Op {
    /// Records Debezium writes for it: a key update is `d` + tombstone + `c`, a delete
    /// `d` + tombstone.
    fn records(self) -> usize {
        match self {
            Op::UpdateKey => 3,
            Op::Delete => 2,
            _ => 1,
        }
    }
}

/// What the writers did.
#[derive(Debug, Default)]
struct Tally {
    ops: BTreeMap<Op, usize>,
    transactions: usize,
    records: usize,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        for (op, n) in other.ops {
            *self.ops.entry(op).or_default() += n;
        }
        self.transactions += other.transactions;
        self.records += other.records;
    }
}

/// Writer `w`'s keys: the live ones, the deleted ones, the next new one.
struct Keys {
    live: Vec<i64>,
    deleted: Vec<i64>,
    next: i64,
}

impl Keys {
    fn new(w: usize) -> Keys {
        Keys {
            live: (1..=INITIAL_ROWS)
                .filter(|id| *id as usize % WRITERS == w)
                .collect(),
            deleted: vec![],
            next: (w as i64 + 1) * 10_000_000,
        }
    }

    fn fresh(&mut self) -> i64 {
        self.next += 1;
        self.next
    }

    fn take_live(&mut self, rng: &mut StdRng) -> i64 {
        let i = rng.random_range(0..self.live.len());
        self.live.swap_remove(i)
    }

    fn pick_live(&self, rng: &mut StdRng) -> i64 {
        self.live[rng.random_range(0..self.live.len())]
    }

    fn take_deleted(&mut self, rng: &mut StdRng) -> i64 {
        let i = rng.random_range(0..self.deleted.len());
        self.deleted.swap_remove(i)
    }

    /// The next operation: mostly by weight, an insert while few rows are live, no
    /// re-insert without a deleted key.
    fn choose(&self, rng: &mut StdRng) -> Op {
        if self.live.len() < 20 {
            return Op::Insert;
        }
        match rng.random_range(0..100) {
            0..10 => Op::Insert,
            10..45 => Op::UpdateKeepingBig,
            45..53 => Op::UpdateBig,
            53..65 => Op::UpdateKey,
            65..83 => Op::Delete,
            _ if self.deleted.is_empty() => Op::Insert,
            _ => Op::Reinsert,
        }
    }
}

/// Random column values: text that needs quoting, NULLs, negative and large numbers, JSON
/// whose text a parse would change (`1.50`, `12345678901234567890`, `-0.0`), instants and
/// days before 1970.
fn title(rng: &mut StdRng) -> Option<String> {
    let n: u32 = rng.random();
    match rng.random_range(0..6) {
        0 => None,
        1 => Some(String::new()),
        2 => Some(format!("quote ' \" back \\ pipe | ✓ {n}\nsecond line")),
        _ => Some(format!("item {n}")),
    }
}

fn amount(rng: &mut StdRng) -> Option<String> {
    if rng.random_bool(0.1) {
        return None;
    }
    let cents: i64 = match rng.random_range(0..4) {
        0 => rng.random_range(-100..100),
        1 => 0,
        _ => rng.random_range(-999_999_999_999..=999_999_999_999),
    };
    let sign = if cents < 0 { "-" } else { "" };
    Some(format!(
        "{sign}{}.{:02}",
        cents.unsigned_abs() / 100,
        cents.unsigned_abs() % 100
    ))
}

fn doc(rng: &mut StdRng) -> Option<String> {
    let n: i32 = rng.random();
    Some(match rng.random_range(0..8) {
        0 => return None,
        1 => "{}".to_owned(),
        2 => format!(
            r#"{{"n": {n}, "price": 1.50, "big": 12345678901234567890, "small": 0.1, "neg": -0.0}}"#
        ),
        3 => format!(r#"[1, "two", null, true, {{"x": [{n}]}}]"#),
        4 => format!(
            r#"{{"text": "quote \" back \\ newline \n tab \t ✓ {n}", "emoji": "\ud83d\ude00"}}"#
        ),
        5 => n.to_string(),
        6 => r#""a string""#.to_owned(),
        _ => format!(
            r#"{{"nested": {{"deep": {{"k": "v{n}", "list": [{{"a": 1e3}}, 2.50]}}}}, "z": null, "a": false}}"#
        ),
    })
}

/// Microseconds between 1900-01-01 and 2100-01-01.
fn micros(rng: &mut StdRng) -> i64 {
    rng.random_range(-2_208_988_800_000_000..4_102_444_800_000_000)
}

fn instant(rng: &mut StdRng) -> Option<String> {
    if rng.random_bool(0.1) {
        return None;
    }
    let at = chrono::DateTime::from_timestamp_micros(micros(rng)).unwrap();
    Some(at.format("%Y-%m-%d %H:%M:%S%.6f+00").to_string())
}

fn day(rng: &mut StdRng) -> Option<String> {
    if rng.random_bool(0.1) {
        return None;
    }
    let at = chrono::DateTime::from_timestamp_micros(micros(rng)).unwrap();
    Some(at.format("%Y-%m-%d").to_string())
}

fn naive(rng: &mut StdRng) -> Option<String> {
    if rng.random_bool(0.1) {
        return None;
    }
    let at = chrono::DateTime::from_timestamp_micros(micros(rng)).unwrap();
    Some(at.format("%Y-%m-%d %H:%M:%S%.6f").to_string())
}

fn note(rng: &mut StdRng) -> Option<String> {
    rng.random_bool(0.6)
        .then(|| format!("note {}", rng.random::<u16>()))
}

/// A seed and a length for `big_text`: 2,560-4,160 bytes.
fn big(rng: &mut StdRng) -> (String, i32) {
    (
        format!("{:016x}", rng.random::<u64>()),
        rng.random_range(80..=130),
    )
}

async fn insert(conn: &mut PgConnection, id: i64, rng: &mut StdRng) {
    let (seed, n) = big(rng);
    let done = sqlx::query(
        "INSERT INTO items (id, title, amount, doc, big, at, note, day, ts) \
         VALUES ($1, $2, $3::text::numeric, $4::text::jsonb, big_text($5, $6), \
         $7::text::timestamptz, $8, $9::text::date, $10::text::timestamp)",
    )
    .bind(id)
    .bind(title(rng))
    .bind(amount(rng))
    .bind(doc(rng))
    .bind(seed)
    .bind(n)
    .bind(instant(rng))
    .bind(note(rng))
    .bind(day(rng))
    .bind(naive(rng))
    .execute(conn)
    .await
    .unwrap();
    assert_eq!(done.rows_affected(), 1);
}

/// One operation on writer `keys`' rows.
async fn apply(conn: &mut PgConnection, op: Op, keys: &mut Keys, rng: &mut StdRng) {
    let affected = match op {
        Op::Insert | Op::Reinsert => {
            let id = if op == Op::Insert {
                keys.fresh()
            } else {
                keys.take_deleted(rng)
            };
            insert(conn, id, rng).await;
            keys.live.push(id);
            1
        }
        Op::UpdateKeepingBig => sqlx::query(
            "UPDATE items SET title = $2, amount = $3::text::numeric, doc = $4::text::jsonb, \
             at = $5::text::timestamptz, note = $6, day = $7::text::date, \
             ts = $8::text::timestamp WHERE id = $1",
        )
        .bind(keys.pick_live(rng))
        .bind(title(rng))
        .bind(amount(rng))
        .bind(doc(rng))
        .bind(instant(rng))
        .bind(note(rng))
        .bind(day(rng))
        .bind(naive(rng))
        .execute(conn)
        .await
        .unwrap()
        .rows_affected(),
        Op::UpdateBig => {
            let (seed, n) = big(rng);
            sqlx::query("UPDATE items SET big = big_text($2, $3), title = $4 WHERE id = $1")
                .bind(keys.pick_live(rng))
                .bind(seed)
                .bind(n)
                .bind(title(rng))
                .execute(conn)
                .await
                .unwrap()
                .rows_affected()
        }
        Op::UpdateKey => {
            let old = keys.take_live(rng);
            let new = if !keys.deleted.is_empty() && rng.random_bool(0.5) {
                keys.take_deleted(rng)
            } else {
                keys.fresh()
            };
            // `big || ''` is the same text as a new value: PostgreSQL logs it in full; without
            // it the unchanged TOASTed value is not in the WAL and Debezium sends the
            // placeholder under the new key.
            let sql = if rng.random_bool(0.5) {
                "UPDATE items SET id = $2, big = big || '', note = $3 WHERE id = $1"
            } else {
                "UPDATE items SET id = $2, note = $3 WHERE id = $1"
            };
            let done = sqlx::query(sql)
                .bind(old)
                .bind(new)
                .bind(note(rng))
                .execute(conn)
                .await
                .unwrap();
            keys.live.push(new);
            keys.deleted.push(old);
            done.rows_affected()
        }
        Op::Delete => {
            let id = keys.take_live(rng);
            let done = sqlx::query("DELETE FROM items WHERE id = $1")
                .bind(id)
                .execute(conn)
                .await
                .unwrap();
            keys.deleted.push(id);
            done.rows_affected()
        }
    };
    assert_eq!(affected, 1, "{op:?}");
}

/// Writer `w`: `operations` operations in transactions of 1-4.
async fn write(url: String, w: usize, operations: usize, seed: u64) -> Tally {
    let mut conn = PgConnection::connect(&url).await.unwrap();
    let mut rng = StdRng::seed_from_u64(seed.wrapping_add(w as u64));
    let mut keys = Keys::new(w);
    let mut tally = Tally::default();
    let mut done = 0;
    while done < operations {
        let mut tx = conn.begin().await.unwrap();
        let n = rng.random_range(1..=4).min(operations - done);
        for _ in 0..n {
            let op = keys.choose(&mut rng);
            apply(&mut tx, op, &mut keys, &mut rng).await;
            *tally.ops.entry(op).or_default() += 1;
            tally.records += op.records();
        }
        tx.commit().await.unwrap();
        tally.transactions += 1;
        done += n;
    }
    tally
}

/// The workload's seed: `REPLICATE_SEED` to repeat a run, else a new one (printed).
fn seed() -> u64 {
    std::env::var("REPLICATE_SEED")
        .ok()
        .map(|s| s.parse().expect("REPLICATE_SEED is a u64"))
        .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0)
}

fn spawn_writers(
    source: &Source,
    seed: u64,
    operations: usize,
) -> Vec<tokio::task::JoinHandle<Tally>> {
    (0..WRITERS)
        .map(|w| tokio::spawn(write(source.url.clone(), w, operations / WRITERS, seed)))
        .collect()
}

async fn join_writers(writers: Vec<tokio::task::JoinHandle<Tally>>) -> Tally {
    let mut tally = Tally::default();
    for writer in writers {
        tally.add(writer.await.unwrap());
    }
    tally
}

/// Every kind of operation occurred many times.
fn assert_mix(tally: &Tally, operations: usize) {
    for op in [
        Op::Insert,
        Op::UpdateKeepingBig,
        Op::UpdateBig,
        Op::UpdateKey,
        Op::Delete,
        Op::Reinsert,
    ] {
        let n = tally.ops.get(&op).copied().unwrap_or(0);
        assert!(n >= operations / 20, "{op:?} only {n} times: {tally:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Comparing the tables
// ---------------------------------------------------------------------------------------

/// (rows, md5 of the rows' texts in key order) of a table.
async fn digest(conn: &mut PgConnection, table: &str) -> (i64, String) {
    sqlx::query_as(&format!(
        "SELECT count(*), coalesce(md5(string_agg({ROW_TEXT}, E'\\n' ORDER BY id)), '') \
         FROM {table}"
    ))
    .fetch_one(conn)
    .await
    .unwrap_or_else(|e| panic!("digest of {table}: {e}"))
}

/// Every row's text, in key order.
async fn row_texts(conn: &mut PgConnection, table: &str) -> BTreeMap<i64, String> {
    let rows: Vec<(i64, String)> =
        sqlx::query_as(&format!("SELECT id, {ROW_TEXT} FROM {table} ORDER BY id"))
            .fetch_all(conn)
            .await
            .unwrap_or_else(|e| panic!("rows of {table}: {e}"));
    rows.into_iter().collect()
}

/// A row's text with long values cut (the TOASTed column) for a failure message.
fn shorten(text: &str) -> String {
    text.split('|')
        .map(|part| {
            if part.chars().count() > 60 {
                let head: String = part.chars().take(40).collect();
                format!("{head}…({} chars)", part.chars().count())
            } else {
                part.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("|")
}

/// Asserts the target holds exactly the source's rows; on a difference, prints the first
/// differing keys with both rows.
async fn assert_replica(source: &mut PgConnection, target: &mut PgConnection, when: &str) {
    let (source_rows, source_digest) = digest(source, "items").await;
    let (target_rows, target_digest) = digest(target, "items_replica").await;
    if (source_rows, &source_digest) == (target_rows, &target_digest) {
        println!("{when}: {source_rows} rows, digest {source_digest} on both sides");
        return;
    }
    let want = row_texts(source, "items").await;
    let have = row_texts(target, "items_replica").await;
    let keys: BTreeSet<i64> = want.keys().chain(have.keys()).copied().collect();
    let differing: Vec<i64> = keys
        .into_iter()
        .filter(|id| want.get(id) != have.get(id))
        .collect();
    let shown: Vec<String> = differing
        .iter()
        .take(10)
        .map(|id| {
            let side = |rows: &BTreeMap<i64, String>| {
                rows.get(id)
                    .map_or_else(|| "(no row)".to_owned(), |t| shorten(t))
            };
            format!(
                "  id {id}\n    source: {}\n    target: {}",
                side(&want),
                side(&have)
            )
        })
        .collect();
    let held: Vec<(serde_json::Value, Option<serde_json::Value>, Option<String>)> =
        sqlx::query_as(
            "SELECT row_key, waits_old_key, format('lsn %s seq %s at %s; marks %s', waits_lsn, seq, held_at, \
             (SELECT array_agg(format('%s->%s @%s %s', m.old_key, m.new_key, m.change_lsn, m.image IS NULL)) \
              FROM debezium_moved_rows m WHERE m.old_key = h.waits_old_key OR m.new_key = h.row_key)) \
             FROM debezium_held_rows h ORDER BY seq",
        )
        .fetch_all(&mut *target)
        .await
        .unwrap_or_default();
    panic!(
        "{when}: the target differs from the source: source {source_rows} rows ({source_digest}), \
         target {target_rows} rows ({target_digest}), {} keys differ; rows waiting for a key \
         change's delete: {held:?}; the first:\n{}",
        differing.len(),
        shown.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Running the sink
// ---------------------------------------------------------------------------------------

/// (committed, end) of the sink's group on the Debezium topic.
fn progress(env: &Env, topic: &str) -> (i64, i64) {
    let offsets = env.admin().group_offsets(&env.group(SINK), topic).unwrap();
    (
        offsets.iter().map(|p| p.committed.unwrap_or(0)).sum(),
        offsets.iter().map(|p| p.high).sum(),
    )
}

/// Waits until the group has committed at least `records` records (`None`: every record
/// the topic holds now), `run` alive meanwhile; (committed, end).
async fn wait_committed(
    env: &Env,
    topic: &str,
    run: &mut Running,
    records: Option<i64>,
    timeout: Duration,
) -> (i64, i64) {
    let deadline = Instant::now() + timeout;
    loop {
        run.assert_alive();
        let (committed, end) = progress(env, topic);
        let reached = match records {
            Some(n) => committed >= n,
            None => end > 0 && committed == end,
        };
        if reached {
            return (committed, end);
        }
        assert!(
            Instant::now() < deadline,
            "{}: committed {committed}/{end} after {timeout:?}, waiting for {records:?}\n{}",
            env.group(SINK),
            run.tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Stops `run` with SIGTERM, asserting a clean exit.
fn stop(mut run: Running) {
    run.signal("TERM");
    let status = run.wait(Duration::from_secs(60));
    assert!(status.success(), "{status}\n{}", run.tail());
}

/// Waits until the sink's group has no members (a SIGKILLed member leaves at its session
/// timeout).
async fn wait_group_empty(env: &Env, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let members = env.admin().group_members(&env.group(SINK)).unwrap();
        if members == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} still has {members} members after {timeout:?}",
            env.group(SINK)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debezium_changes_replicate_a_table_through_kills_and_a_replay() {
    replicate(Converter::Json, OPERATIONS).await;
}

/// The same through Debezium's Avro converter (Apicurio's, Confluent wire format): the
/// change events, their keys and their semantic types read from the registry's schemas.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debezium_avro_changes_replicate_a_table_through_kills_and_a_replay() {
    if support::registry::registry().is_none() {
        return;
    }
    replicate(Converter::Avro, AVRO_OPERATIONS).await;
}

async fn replicate(converter: Converter, operations: usize) {
    let Some(mut env) = Env::new().await else {
        return;
    };
    if converter == Converter::Avro {
        support::registry::with_registry_env(&mut env);
    }
    let started = Instant::now();
    let seed = seed();
    println!("workload seed {seed} (REPLICATE_SEED={seed} repeats it)");
    let mut target = env.schema.connect().await;
    sqlx::raw_sql(TARGET_DDL)
        .execute(&mut target)
        .await
        .unwrap();
    let mut source = Source::create(&env).await;
    sluice_testkit::create_topic(&env.stack, &source.topic, PARTITIONS).await;
    let streaming_after = source.start_connector(&env, converter).await;

    let mapping = env.dir.join("sinks.toml");
    // The sink's batch size for the next `sluice run` (the file is read at its start).
    let topic = source.topic.clone();
    let batches_of = |batch: usize| {
        let text = MAPPING
            .replace("{topic}", &topic)
            .replace("{formats}", converter.formats())
            .replace("{batch}", &batch.to_string());
        std::fs::write(&mapping, text).unwrap();
    };
    batches_of(500);
    let mapping = mapping.display().to_string();
    let sinks = [("SLUICE_SINKS_FILE", mapping.as_str())];
    let validated = env.output(&["sinks", "validate", &mapping], &[]);
    assert_eq!(
        validated.status.code(),
        Some(0),
        "{}\n{}",
        text(&validated.stdout),
        text(&validated.stderr)
    );
    let format = match converter {
        Converter::Json => "  format debezium, a tombstone:",
        Converter::Avro => "  format debezium, values avro, keys avro, a tombstone:",
    };
    assert!(
        text(&validated.stdout).contains(format),
        "validate names the formats as the file says them:\n{}",
        text(&validated.stdout)
    );

    // The workload, applied as it streams; `sluice run` SIGKILLed twice meanwhile.
    let workload_started = Instant::now();
    let writers = spawn_writers(&source, seed, operations);
    let mut run = env.spawn_run("run-1", &sinks);
    let mut kills = vec![];
    for (n, at) in [(1, operations / 4), (2, operations / 2)] {
        let (committed, end) = wait_committed(
            &env,
            &source.topic,
            &mut run,
            Some(at as i64),
            Duration::from_secs(180),
        )
        .await;
        run.signal("KILL");
        run.wait(Duration::from_secs(10));
        kills.push(format!(
            "kill {n} at {committed} committed of {end} ({:.1?})",
            workload_started.elapsed()
        ));
        batches_of(if n == 1 { 1 } else { 500 });
        run = env.spawn_run(&format!("run-{}", n + 1), &sinks);
    }
    let tally = join_writers(writers).await;
    let workload_took = workload_started.elapsed();
    assert_mix(&tally, operations);
    let expected = INITIAL_ROWS + tally.records as i64;
    let streamed = source
        .wait_streamed(&env.stack.bootstrap, expected, Duration::from_secs(180))
        .await;
    let streamed_after = workload_started.elapsed();
    let (_, end) = wait_committed(
        &env,
        &source.topic,
        &mut run,
        None,
        Duration::from_secs(180),
    )
    .await;
    assert!(end >= expected, "{end} < {expected}");
    let applied_after = workload_started.elapsed();
    stop(run);
    let mut source_conn = source.connect().await;
    assert_replica(&mut source_conn, &mut target, "after the apply").await;

    // A replay of everything changes nothing.
    wait_group_empty(&env, Duration::from_secs(30)).await;
    let replay_started = Instant::now();
    let replay = env.output(&["replay", SINK, "--to", "earliest", "--execute"], &sinks);
    assert!(
        replay.status.success(),
        "{}\n{}",
        text(&replay.stdout),
        text(&replay.stderr)
    );
    let (committed, _) = progress(&env, &source.topic);
    assert_eq!(
        committed, 0,
        "the group is back at the start (one topic, from 0)"
    );
    batches_of(1);
    let mut run = env.spawn_run("run-replay", &sinks);
    // A transaction per record (~17,500 of them): about 95 s on a quiet machine, and up to
    // twice that with another test binary running beside this one (scripts/test-all). The
    // deadline only catches a stall; the replica check below is what the test asserts.
    wait_committed(
        &env,
        &source.topic,
        &mut run,
        None,
        Duration::from_secs(600),
    )
    .await;
    stop(run);
    let replayed_in = replay_started.elapsed();
    assert_replica(&mut source_conn, &mut target, "after the replay").await;
    let dead: Vec<(String, i64, String, String)> = sqlx::query_as(
        "SELECT topic, kafka_offset, error_kind, reason FROM dead_letter_events \
         ORDER BY topic, kafka_offset LIMIT 10",
    )
    .fetch_all(&mut target)
    .await
    .unwrap();
    assert!(dead.is_empty(), "dead letters: {dead:?}");
    // Every key change's create that waited for its delete was applied by it.
    let held: Vec<(serde_json::Value, Option<String>)> =
        sqlx::query_as("SELECT row_key, orphan_reason FROM debezium_held_rows LIMIT 10")
            .fetch_all(&mut target)
            .await
            .unwrap();
    assert!(held.is_empty(), "rows still waiting or orphaned: {held:?}");
    let waited = std::fs::read_dir(&env.dir)
        .unwrap()
        .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
        .map(|log| log.matches("waits for the old key's delete").count())
        .sum::<usize>();

    println!(
        "{converter:?}: replicated {operations} operations ({:?}) in {} transactions by {WRITERS} writers \
         after {INITIAL_ROWS} snapshot rows: {streamed} records; connector streaming after \
         {streaming_after:.1?}; workload {workload_took:.1?}; all streamed {streamed_after:.1?} \
         and applied {applied_after:.1?} after its start; {}; replay to earliest and re-apply \
         {replayed_in:.1?}; rows that waited for a key change's delete: {waited}; test wall \
         time {:.1?}",
        tally.ops,
        tally.transactions,
        kills.join(", "),
        started.elapsed()
    );

    drop(source_conn);
    drop(target);
    let topic = source.topic.clone();
    drop(source);
    sluice_testkit::delete_topics(&env.stack, &[&topic]).await;
    env.cleanup().await;
}

/// The source side alone — the connector streams the workload, every event in the topic
/// and of the kind expected — for checking the harness where no `debezium` sink exists yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "the source half of debezium_changes_replicate_a_table_through_kills_and_a_replay"]
async fn debezium_streams_the_replication_workload() {
    let Some(env) = Env::new().await else { return };
    let started = Instant::now();
    let seed = seed();
    println!("workload seed {seed}");
    let mut source = Source::create(&env).await;
    sluice_testkit::create_topic(&env.stack, &source.topic, PARTITIONS).await;
    let streaming_after = source.start_connector(&env, Converter::Json).await;
    let workload_started = Instant::now();
    let tally = join_writers(spawn_writers(&source, seed, OPERATIONS)).await;
    let workload_took = workload_started.elapsed();
    assert_mix(&tally, OPERATIONS);
    let expected = INITIAL_ROWS + tally.records as i64;
    let streamed = source
        .wait_streamed(&env.stack.bootstrap, expected, Duration::from_secs(180))
        .await;
    let streamed_after = workload_started.elapsed();
    assert_eq!(streamed, expected, "records in {}", source.topic);
    let mut conn = source.connect().await;
    let (rows, source_digest) = digest(&mut conn, "items").await;

    // The events by kind, against the operations.
    let mut kinds = event_kinds(&env.stack.bootstrap, &source.topic);
    let n = |op: Op| tally.ops.get(&op).copied().unwrap_or(0);
    // A key change is a delete and a create; the create carries the placeholder for the big
    // value it did not change, when the row had one.
    let created_with_placeholder = kinds.remove("c with the TOAST placeholder").unwrap_or(0);
    assert!(
        created_with_placeholder <= n(Op::UpdateKey),
        "{created_with_placeholder} creates with the TOAST placeholder, more than the {} key \
         changes",
        n(Op::UpdateKey)
    );
    let want: BTreeMap<&str, usize> = [
        ("r", INITIAL_ROWS as usize),
        ("c", n(Op::Insert) + n(Op::Reinsert) + n(Op::UpdateKey)),
        ("u", n(Op::UpdateKeepingBig) + n(Op::UpdateBig)),
        ("d", n(Op::Delete) + n(Op::UpdateKey)),
        ("tombstone", n(Op::Delete) + n(Op::UpdateKey)),
        ("u with the TOAST placeholder", n(Op::UpdateKeepingBig)),
    ]
    .into_iter()
    .collect();
    assert_eq!(kinds, want, "events by kind");
    println!(
        "{OPERATIONS} operations ({:?}) in {} transactions by {WRITERS} writers after \
         {INITIAL_ROWS} snapshot rows: {streamed} records ({kinds:?}); source {rows} rows, \
         digest {source_digest}; connector streaming after {streaming_after:.1?}; workload \
         {workload_took:.1?}; all streamed {streamed_after:.1?} after its start; test wall \
         time {:.1?}",
        tally.ops,
        tally.transactions,
        started.elapsed()
    );
    drop(conn);
    let topic = source.topic.clone();
    drop(source);
    sluice_testkit::delete_topics(&env.stack, &[&topic]).await;
    env.cleanup().await;
}

/// Counts the topic's events by `op` (and tombstones); a `u` or `c` carrying the TOAST
/// placeholder counts under its op and under its own name too; an `r` carrying it fails.
fn event_kinds(bootstrap: &str, topic: &str) -> BTreeMap<&'static str, usize> {
    let reader: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "replicate-test-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let mut list = rdkafka::TopicPartitionList::new();
    for p in 0..PARTITIONS {
        list.add_partition_offset(topic, p, rdkafka::Offset::Beginning)
            .unwrap();
    }
    reader.assign(&list).unwrap();
    let mut open: BTreeSet<i32> = (0..PARTITIONS).collect();
    let mut kinds = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !open.is_empty() {
        assert!(Instant::now() < deadline, "reading {topic} took too long");
        match reader.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                open.remove(&p);
            }
            Some(Err(e)) => panic!("read {topic}: {e}"),
            Some(Ok(m)) => {
                let kind = match m.payload() {
                    None => "tombstone",
                    Some(bytes) => {
                        let value: Value = serde_json::from_slice(bytes).unwrap();
                        let payload = &value["payload"];
                        let placeholder = payload["after"]["big"] == "__debezium_unavailable_value";
                        match (payload["op"].as_str().unwrap(), placeholder) {
                            ("r", false) => "r",
                            ("c", false) => "c",
                            ("u", false) => "u",
                            ("d", false) => "d",
                            ("u", true) => "u with the TOAST placeholder",
                            ("c", true) => "c with the TOAST placeholder",
                            (op, _) => panic!("op {op} with the placeholder: {value}"),
                        }
                    }
                };
                *kinds.entry(kind).or_default() += 1;
            }
        }
    }
    // "u" counts every update and "c" every create, with the placeholder or not.
    for (op, with) in [
        ("u", "u with the TOAST placeholder"),
        ("c", "c with the TOAST placeholder"),
    ] {
        let with_placeholder = kinds.get(with).copied().unwrap_or(0);
        *kinds.entry(op).or_default() += with_placeholder;
    }
    kinds
}
