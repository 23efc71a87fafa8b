//! Test support for sluice's integration tests: reach the real stack, make unique names and
//! per-test schemas, produce raw records.
//!
//! The stack is found through `KAFKA_BOOTSTRAP_SERVERS` and `SLUICE_TEST_DATABASE_URL`
//! (printed by `scripts/stack env`). When `CI=true` a missing service fails the test; on a
//! developer's machine without the stack, [`stack`] returns `None` and the test says it
//! skipped.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "test support: a broken fixture panics with a clear message"
)]

mod log_lines;

pub use log_lines::{LogLine, log_lines};

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use sqlx::{Connection, Executor, PgConnection};
use std::time::Duration;

/// Addresses of the running stack.
#[derive(Debug, Clone)]
pub struct Stack {
    /// Kafka bootstrap servers.
    pub bootstrap: String,
    /// The test database (no schema chosen).
    pub database_url: String,
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// The stack's schema registry (`SCHEMA_REGISTRY_URL`, from `scripts/stack env`); `None`
/// (skip) outside CI when it is not set.
///
/// # Panics
/// In CI (`CI=true`) when it is not set.
pub fn schema_registry_url() -> Option<String> {
    match std::env::var("SCHEMA_REGISTRY_URL") {
        Ok(url) => Some(url),
        Err(_) if in_ci() => panic!("CI=true but SCHEMA_REGISTRY_URL is not set: run `make test`"),
        Err(_) => {
            eprintln!("SKIPPED: no schema registry (run `make test`)");
            None
        }
    }
}

/// Sends `tracing` output to the test's captured output (`RUST_LOG`, default `info`).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rdkafka=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// The stack, or `None` (with a message) when it is not configured and we are not in CI.
///
/// # Panics
/// In CI (`CI=true`) when a variable is missing or a service does not answer.
pub fn stack() -> Option<Stack> {
    init_tracing();
    let bootstrap = std::env::var("KAFKA_BOOTSTRAP_SERVERS").ok();
    let database_url = std::env::var("SLUICE_TEST_DATABASE_URL").ok();
    match (bootstrap, database_url) {
        (Some(bootstrap), Some(database_url)) => {
            let stack = Stack {
                bootstrap,
                database_url,
            };
            if let Err(problem) = stack.reachable() {
                if in_ci() {
                    panic!("CI=true and the stack is not reachable: {problem}");
                }
                eprintln!("SKIPPED: the stack is not reachable ({problem}); run `make test`");
                return None;
            }
            Some(stack)
        }
        _ => {
            if in_ci() {
                panic!(
                    "CI=true but KAFKA_BOOTSTRAP_SERVERS / SLUICE_TEST_DATABASE_URL are not set; \
                     run the tests through `make test`"
                );
            }
            eprintln!("SKIPPED: no stack configured; run `make test` (it starts the stack)");
            None
        }
    }
}

impl Stack {
    fn reachable(&self) -> Result<(), String> {
        let first = self.bootstrap.split(',').next().unwrap_or_default();
        std::net::TcpStream::connect_timeout(
            &first
                .parse()
                .map_err(|e| format!("bad KAFKA_BOOTSTRAP_SERVERS {first}: {e}"))?,
            Duration::from_secs(3),
        )
        .map_err(|e| format!("kafka at {first}: {e}"))?;
        Ok(())
    }
}

/// A unique, readable name: `prefix-<12 hex>`.
pub fn unique(prefix: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}-{}", &id[..12])
}

/// A fresh schema in the test database holding the applications fixture.
#[derive(Debug, Clone)]
pub struct TestSchema {
    /// The schema name.
    pub name: String,
    /// A URL whose connections use this schema (`search_path`).
    pub url: String,
    admin_url: String,
}

const APPLICATIONS_FIXTURE: &str = include_str!("../../../fixtures/applications.sql");

impl TestSchema {
    /// Creates the schema and the applications table in it.
    pub async fn create(stack: &Stack) -> TestSchema {
        let name = unique("t").replace('-', "_");
        let mut conn = PgConnection::connect(&stack.database_url)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", stack.database_url));
        conn.execute(format!("CREATE SCHEMA {name}").as_str())
            .await
            .expect("create schema");
        let separator = if stack.database_url.contains('?') {
            '&'
        } else {
            '?'
        };
        let url = format!(
            "{}{separator}options=-c%20search_path%3D{name}",
            stack.database_url
        );
        let schema = TestSchema {
            name,
            url,
            admin_url: stack.database_url.clone(),
        };
        let mut conn = schema.connect().await;
        sqlx::raw_sql(APPLICATIONS_FIXTURE)
            .execute(&mut conn)
            .await
            .expect("applications fixture");
        schema
    }

    /// A connection whose search_path is this schema.
    pub async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.url))
    }

    /// Registers applications; returns their ids in the order given.
    pub async fn register_apps(&self, names: &[String]) -> Vec<i64> {
        let mut conn = self.connect().await;
        let mut ids = Vec::with_capacity(names.len());
        for name in names {
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO apps_registry_application (package_name) VALUES ($1)
                 ON CONFLICT (package_name) DO UPDATE SET package_name = EXCLUDED.package_name
                 RETURNING id",
            )
            .bind(name)
            .fetch_one(&mut conn)
            .await
            .expect("register app");
            ids.push(id);
        }
        ids
    }

    /// Drops the schema and everything in it.
    pub async fn drop_schema(self) {
        let mut conn = PgConnection::connect(&self.admin_url)
            .await
            .expect("connect");
        conn.execute(format!("DROP SCHEMA {} CASCADE", self.name).as_str())
            .await
            .expect("drop schema");
    }
}

/// A table's rows as JSON text, sorted, without the columns the database fills (`id`,
/// `inserted_at`, `first_seen_at`): what two runs over the same records must agree on.
pub async fn table_rows(conn: &mut PgConnection, table: &str) -> Vec<String> {
    let sql = format!(
        "SELECT (to_jsonb(t) - 'id' - 'inserted_at' - 'first_seen_at')::text FROM {table} t \
         ORDER BY 1"
    );
    sqlx::query_scalar(&sql)
        .fetch_all(conn)
        .await
        .unwrap_or_else(|e| panic!("rows of {table}: {e}"))
}

/// The backends that wait for a lock `holder` (a backend's pid, see [`backend_pid`]) holds
/// right now: a statement blocked behind a row that session locked. Only that session's
/// waiters count, whatever other tests on the same server wait for.
pub async fn lock_waiters(conn: &mut PgConnection, holder: i32) -> Vec<i32> {
    sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity
         WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()
           AND $1 = ANY(pg_blocking_pids(pid))",
    )
    .bind(holder)
    .fetch_all(conn)
    .await
    .expect("pg_stat_activity")
}

/// The pid of the backend serving `conn` (for [`lock_waiters`]).
pub async fn backend_pid(conn: &mut PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .expect("pg_backend_pid()")
}

/// Creates a topic with `partitions` partitions and waits until it is usable.
pub async fn create_topic(stack: &Stack, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &stack.bootstrap)
        .create()
        .expect("admin client");
    let new = NewTopic::new(topic, partitions, TopicReplication::Fixed(1));
    let results = admin
        .create_topics([&new], &AdminOptions::new())
        .await
        .expect("create topic");
    for result in results {
        result.unwrap_or_else(|(t, e)| panic!("create topic {t}: {e}"));
    }
}

/// Deletes topics (best effort).
pub async fn delete_topics(stack: &Stack, topics: &[&str]) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &stack.bootstrap)
        .create()
        .expect("admin client");
    let _ = admin.delete_topics(topics, &AdminOptions::new()).await;
}

/// An idempotent, acks=all producer for tests.
pub fn producer(stack: &Stack) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", &stack.bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .expect("producer")
}

/// A raw record: optional key, optional value (`None` is a tombstone).
pub type RawRecord = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A record with headers: key, value, headers (name, value) in order.
pub type FullRecord = (Option<Vec<u8>>, Option<Vec<u8>>, Vec<(String, Vec<u8>)>);

/// Produces records with headers, in order (the producer is idempotent), and waits for every
/// delivery report.
pub async fn produce_full(stack: &Stack, topic: &str, records: &[FullRecord]) {
    let producer = producer(stack);
    let mut pending = Vec::with_capacity(records.len().min(10_000));
    for (key, value, headers) in records {
        let mut owned = rdkafka::message::OwnedHeaders::new();
        for (name, value) in headers {
            owned = owned.insert(rdkafka::message::Header {
                key: name,
                value: Some(value.as_slice()),
            });
        }
        let mut record = FutureRecord::<[u8], [u8]>::to(topic).headers(owned);
        if let Some(key) = key {
            record = record.key(key.as_slice());
        }
        if let Some(value) = value {
            record = record.payload(value.as_slice());
        }
        pending.push(enqueue(&producer, topic, record));
        if pending.len() >= 10_000 {
            delivered(&mut pending).await;
        }
    }
    delivered(&mut pending).await;
}

/// Enqueues `record` at once (the async `send` would wait for each delivery), waiting for
/// room when the producer's queue is full.
fn enqueue(
    producer: &FutureProducer,
    topic: &str,
    mut record: FutureRecord<'_, [u8], [u8]>,
) -> rdkafka::producer::DeliveryFuture {
    loop {
        match producer.send_result(record) {
            Ok(delivery) => return delivery,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                producer.poll(Duration::from_millis(10));
            }
            Err((error, _)) => panic!("produce to {topic}: {error}"),
        }
    }
}

/// Waits for each delivery report of `pending`, emptying it.
async fn delivered(pending: &mut Vec<rdkafka::producer::DeliveryFuture>) {
    for delivery in pending.drain(..) {
        delivery
            .await
            .expect("delivery")
            .map_err(|(e, _)| e)
            .expect("delivered");
    }
}

/// Produces raw records (key, value) and waits for every delivery report.
pub async fn produce(stack: &Stack, topic: &str, records: &[RawRecord]) {
    produce_with(stack, topic, None, records).await;
}

/// Produces raw records to one partition (whatever their keys), in order, and waits for
/// every delivery report.
pub async fn produce_to_partition(
    stack: &Stack,
    topic: &str,
    partition: i32,
    records: &[RawRecord],
) {
    produce_with(stack, topic, Some(partition), records).await;
}

async fn produce_with(stack: &Stack, topic: &str, partition: Option<i32>, records: &[RawRecord]) {
    let producer = producer(stack);
    let mut pending = Vec::with_capacity(records.len().min(10_000));
    for (key, value) in records {
        let mut record = FutureRecord::<[u8], [u8]>::to(topic);
        if let Some(partition) = partition {
            record = record.partition(partition);
        }
        if let Some(key) = key {
            record = record.key(key.as_slice());
        }
        if let Some(value) = value {
            record = record.payload(value.as_slice());
        }
        pending.push(enqueue(&producer, topic, record));
        if pending.len() >= 10_000 {
            delivered(&mut pending).await;
        }
    }
    delivered(&mut pending).await;
}

/// The single broker is stopped (`$SLUICE_STACK kafka-stop`) while this lives; dropping it,
/// also while a failing test unwinds, starts it again (`kafka-start` waits until it is ready).
#[derive(Debug)]
pub struct BrokerStopped {
    script: String,
}

impl BrokerStopped {
    /// Stops the broker with the stack script `script`; panics if that fails.
    pub fn stop(script: &str) -> BrokerStopped {
        let status = std::process::Command::new(script)
            .arg("kafka-stop")
            .status()
            .unwrap_or_else(|e| panic!("{script} kafka-stop: {e}"));
        assert!(status.success(), "{script} kafka-stop failed: {status}");
        BrokerStopped {
            script: script.to_owned(),
        }
    }
}

impl Drop for BrokerStopped {
    fn drop(&mut self) {
        let status = std::process::Command::new(&self.script)
            .arg("kafka-start")
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("kafka-start after the outage failed: {status:?}");
        }
    }
}
