//! Avro records through the storage consumer's own batch path on the real PostgreSQL and the
//! stack's schema registry (docs/ARCHITECTURE.md#offsets): a batch redelivered after a crash
//! between the database commit and Kafka's holds records applied before; the claim leaves
//! them out and stores the rest. What it stores must not depend on what the schema cache
//! still holds then: the batch was decoded once, with every writer's schema it needed, and an
//! id refused by the registry is remembered only for a while (a schema may also be evicted
//! from the bounded cache). A store that needs the cache again fails the same way on every
//! retry, as nothing fetches the schemas for it, until the pipeline gives up.
//!
//! sluice-test: uses-registry (its sinks talk to the registry):
//! `scripts/test-all` never runs this binary beside a `freezes-registry` one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use std::collections::HashMap;
use std::time::Duration;

use sluice_kafka::Record;
use sluice_postgres::catalog::sink_tables;
use sluice_registry::{Registry, RegistrySettings};
use sluice_sinks::{parse_sinks, plan_sink};
use sluice_storage::batch::{DecodedBatch, Stored, decode_batch, store_batch};
use sluice_storage::sink::{Declared, Tables};
use sluice_testkit::TestSchema;
use sqlx::PgConnection;

const APPS: &str = "apps_registry_application";
const GROUP: &str = "storage-consumer.registry-claim";
const DDL: &str = "CREATE TABLE items (id BIGINT PRIMARY KEY, s TEXT NOT NULL)";
const SCHEMA: &str = r#"{"type":"record","name":"Item","fields":[{"name":"id","type":"long"},{"name":"s","type":"string"}]}"#;
/// An id no registry of the stack has: its records are dead letters.
const UNKNOWN_ID: i32 = 2_000_000_000;

/// Registers the Avro schema under `subject`; its id.
fn register(url: &str, subject: &str) -> i32 {
    let body: serde_json::Value = ureq::post(&format!("{url}/subjects/{subject}/versions"))
        .header("Content-Type", "application/vnd.schemaregistry.v1+json")
        .send_json(serde_json::json!({ "schema": SCHEMA }))
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    i32::try_from(body["id"].as_i64().expect("an id")).unwrap()
}

/// A fresh client of the registry: nothing fetched yet.
fn registry(url: &str) -> Registry {
    let vars = HashMap::from([("SCHEMA_REGISTRY_URL", url.to_owned())]);
    Registry::new(&RegistrySettings::from_lookup(&|name| vars.get(name).cloned()).unwrap()).unwrap()
}

/// An Avro long or length: zig-zag, then a base-128 varint.
fn varint(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// The record at `offset`: `{id, s}` under schema `id` in the Confluent wire format.
fn record(topic: &str, offset: i64, schema_id: i32, s: &str) -> Record {
    let mut payload = vec![0u8];
    payload.extend(schema_id.to_be_bytes());
    varint(&mut payload, offset);
    varint(&mut payload, s.len() as i64);
    payload.extend(s.as_bytes());
    Record {
        key: Some(offset.to_string().into_bytes()),
        payload: Some(payload),
        ..Record::at(topic, 0, offset)
    }
}

/// `records` decoded through `sink` with every writer's schema fetched, as a writer does
/// before storing a batch.
fn decoded_with_schemas(sink: &Tables, records: &[Record]) -> DecodedBatch {
    let mut decoded = decode_batch(sink, records);
    while !decoded.pending.is_empty() {
        sink.fetch_schemas(&decoded.pending)
            .expect("the registry answers");
        decoded = decode_batch(sink, records);
    }
    decoded
}

async fn store(
    conn: &mut PgConnection,
    records: &[Record],
    decoded: &DecodedBatch,
) -> Result<Stored, sqlx::Error> {
    let (origins, committed) = (Vec::new(), Default::default());
    store_batch(conn, GROUP, (records, decoded, &origins), &committed).await
}

/// A redelivered batch (its first records applied before) is stored from its one decoding:
/// the records left are written and the refused one dead-lettered, whatever the schema cache
/// holds by the time the claim leaves the others out.
#[tokio::test]
async fn a_batch_partly_applied_before_is_stored_without_its_schemas_cached_again() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let Some(url) = sluice_testkit::schema_registry_url() else {
        return;
    };
    let topic = format!("registry-claim-{}", uuid::Uuid::new_v4().simple());
    let id = register(&url, &format!("{topic}-value"));

    let schema = TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate(&mut conn, APPS)
        .await
        .expect("migrate");
    sqlx::raw_sql(DDL).execute(&mut conn).await.unwrap();
    let mapping = format!(
        "[[sink]]\nname = \"items\"\ntopic = \"{topic}\"\ntable = \"items\"\nkey = [\"id\"]\n\
         format = \"avro\"\n[sink.columns]\nid = {{ field = \"id\" }}\ns = {{ field = \"s\" }}\n"
    );
    let sinks = parse_sinks("registry.toml", &mapping).unwrap();
    let tables = sink_tables(&mut conn, &sinks).await.unwrap();
    let plan = plan_sink(&sinks[0], "storage-consumer", &tables).unwrap();
    let declared = Declared::new(&sinks[0], plan.clone(), Duration::from_secs(60)).unwrap();
    let registry = registry(&url);
    let sink = Tables::fixed(declared.with_registry(registry.clone()));

    let records = [
        record(&topic, 0, id, "zero"),
        record(&topic, 1, id, "one"),
        record(&topic, 2, UNKNOWN_ID, "refused"),
        record(&topic, 3, id, "three"),
    ];
    // The first two records stored; the Kafka commit did not happen (a crash).
    let first = decoded_with_schemas(&sink, &records[..2]);
    let stored = store(&mut conn, &records[..2], &first).await.unwrap();
    assert!(matches!(stored, Stored::Done(..)), "{stored:?}");

    // The batch redelivered with two more records, decoded with every schema it needs.
    let decoded = decoded_with_schemas(&sink, &records);
    assert_eq!(decoded.decoded_len(), 3, "{decoded:?}");
    assert_eq!(decoded.rejected.len(), 1, "{decoded:?}");
    // By the time it is stored the claim leaves the first two out: the others are stored
    // from this one decoding, never decoded again (the store reads no schema at all).
    let stored = store(&mut conn, &records, &decoded)
        .await
        .unwrap_or_else(|e| panic!("the batch is stored from its decoding: {e}"));
    let Stored::Done(done) = stored else {
        panic!("nothing lost here: {stored:?}");
    };
    assert_eq!(done.report.write.skipped, 2, "{:?}", done.report);
    let rows: Vec<String> =
        sqlx::query_scalar("SELECT id::text || '=' || s FROM items ORDER BY id")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(rows, ["0=zero", "1=one", "3=three"]);
    let dead: Vec<(i64, String)> =
        sqlx::query_as("SELECT kafka_offset, reason FROM dead_letter_events ORDER BY 1")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].0, 2, "{dead:?}");
    assert!(
        dead[0].1.contains(&format!("schema id {UNKNOWN_ID}")),
        "{dead:?}"
    );
    drop(conn);
    schema.drop_schema().await;
}
