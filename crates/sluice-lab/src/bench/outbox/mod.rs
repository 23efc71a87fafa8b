//! `sluice bench outbox`: the outbox dispatcher (docs/ARCHITECTURE.md#outbox) measured on the real stack, in its
//! own schema and topic. Not a test: it prints a Markdown table and writes a JSON file.
//!
//! - throughput: N dispatchers in this process start on an empty table (their producers
//!   connect meanwhile), then a backlog (about 1,000 distinct partition keys) is enqueued in
//!   one transaction, so it appears at once, and they drain it until every row is PUBLISHED;
//!   events/s = count / (last `published_at` − the commit), both PostgreSQL's clock;
//! - latency: one idle dispatcher, events enqueued one per transaction at a paced rate;
//!   per event `published_at − created_at`, both PostgreSQL's clock (`created_at` is the
//!   enqueue transaction's start, `published_at` the start of the statement recording the
//!   broker's acknowledgement, acks=all).
//!
//! The phases are in [`mod@throughput`] and [`mod@latency`]; [`mod@report`] prints their table and builds
//! the JSON.

mod latency;
mod report;
mod throughput;

use crate::Failure;
use anyhow::{Context, anyhow};
use clap::Args;
use latency::latency;
use report::report;
use serde_json::json;
use sluice_core::KafkaClientSettings;
use sluice_dispatch::settings::OutboxSettings;
use sluice_kafka::Admin;
use sluice_outbox::NewEvent;
use sqlx::Connection;
use std::path::PathBuf;
use std::time::Duration;
use throughput::throughput;

/// Options of `sluice bench outbox`.
#[derive(Debug, Clone, Args)]
pub struct OutboxBenchArgs {
    /// Events in the throughput backlog.
    #[arg(long, default_value_t = 50_000)]
    events: usize,
    /// Distinct partition keys.
    #[arg(long, default_value_t = 1_000)]
    keys: usize,
    /// Dispatchers (in this process) draining the backlog.
    #[arg(long, default_value_t = 3)]
    dispatchers: usize,
    /// Events claimed per batch (OUTBOX_BATCH_SIZE of each dispatcher). With ~1,000 keys a
    /// batch of 1,000 holds every key, and the claim's per-key exclusivity then leaves the
    /// other dispatchers nothing to claim; 300 measured best of 100/200/300/500/1,000.
    #[arg(long, default_value_t = 300)]
    batch_size: u32,
    /// Topic partitions.
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    /// Enqueue rate of the latency phase, events/s (one transaction each).
    #[arg(long, default_value_t = 1_000.0)]
    latency_rate: f64,
    /// Length of the latency phase, seconds.
    #[arg(long, default_value_t = 10)]
    latency_seconds: u64,
    /// Connections enqueueing in the latency phase (each paced to its share of the rate).
    #[arg(long, default_value_t = 4)]
    latency_writers: usize,
    /// Where the JSON results go.
    #[arg(long, default_value = "bench-outbox-results.json")]
    out: PathBuf,
}

/// The sustained throughput target (three dispatchers, acks=all) on the reference machine.
const TARGET_EVENTS_PER_SECOND: f64 = 25_000.0;
/// The commit → ack p99 target at 1,000 events/s offered.
const TARGET_P99_MS: f64 = 20.0;
/// The event type of the latency phase's events.
const LATENCY_TYPE: &str = "bench.latency";
/// How long the throughput phase's dispatchers idle before the backlog commits.
const PRODUCER_START: Duration = Duration::from_millis(1500);
/// Events published before the latency phase (not measured).
const WARM_UP: usize = 10;

/// Entry point.
pub fn run(args: &OutboxBenchArgs) -> Result<(), Failure> {
    let settings = super::super::settings()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(bench(&settings.database_url, &settings.kafka, args))
}

struct Env {
    schema: String,
    url: String,
    topic: String,
    kafka: KafkaClientSettings,
}

impl Env {
    /// Dispatcher settings: the process environment's `OUTBOX_*`, with the bench's
    /// database, brokers, batch size and id.
    fn dispatcher_settings(&self, id: &str, batch: u32) -> Result<OutboxSettings, Failure> {
        let batch = batch.to_string();
        OutboxSettings::from_lookup(
            &|name| match name {
                "DATABASE_URL" => Some(self.url.clone()),
                "OUTBOX_BATCH_SIZE" => Some(batch.clone()),
                "OUTBOX_DISPATCHER_ID" => Some(id.to_owned()),
                other => std::env::var(other).ok(),
            },
            id,
        )
        .map(|settings| OutboxSettings {
            kafka: self.kafka.clone(),
            ..settings
        })
        .map_err(Failure::config)
    }
}

const FIXTURE: &str = include_str!("../../../../../fixtures/applications.sql");

async fn setup(
    database_url: &str,
    kafka: &KafkaClientSettings,
    args: &OutboxBenchArgs,
) -> Result<Env, Failure> {
    let id = format!("benchoutbox{}", std::process::id());
    let mut admin_conn = sluice_postgres::connect(database_url, "bench")
        .await
        .context("DATABASE_URL")?;
    sqlx::raw_sql(&format!("CREATE SCHEMA {id}"))
        .execute(&mut admin_conn)
        .await?;
    admin_conn.close().await?;
    let separator = if database_url.contains('?') { '&' } else { '?' };
    let url = format!("{database_url}{separator}options=-c%20search_path%3D{id}");
    let mut conn = sluice_postgres::connect(&url, "bench").await?;
    sqlx::raw_sql(FIXTURE).execute(&mut conn).await?;
    sluice_postgres::migrate(&mut conn, "apps_registry_application").await?;
    conn.close().await?;
    let topic = format!("{id}-outbox");
    let admin = Admin::new(kafka, Duration::from_secs(30))?;
    admin.ensure_topic(&topic, args.partitions).await?;
    warm_up_topic(kafka, &topic, args.partitions).await?;
    Ok(Env {
        schema: id,
        url,
        topic,
        kafka: kafka.clone(),
    })
}

/// One record to every partition of the new topic, acknowledged, before anything is
/// measured: the first records a topic's partitions take cost the broker most of a second,
/// a one-off that is not the dispatcher's.
async fn warm_up_topic(
    kafka: &KafkaClientSettings,
    topic: &str,
    partitions: i32,
) -> Result<(), Failure> {
    let producer = sluice_kafka::ResilientProducer::new(kafka, "bench-warm-up")?;
    for partition in 0..partitions {
        producer
            .send(sluice_kafka::producer::Outgoing {
                topic,
                key: None,
                payload: b"warm-up",
                partition: Some(partition),
                headers: &[],
            })
            .await?;
    }
    Ok(())
}

async fn teardown(database_url: &str, env: &Env) -> Result<(), Failure> {
    let admin = Admin::new(&env.kafka, Duration::from_secs(30))?;
    admin.delete_topic(&env.topic).await?;
    let mut conn = sluice_postgres::connect(database_url, "bench").await?;
    sqlx::raw_sql(&format!("DROP SCHEMA {} CASCADE", env.schema))
        .execute(&mut conn)
        .await?;
    Ok(())
}

fn event(topic: &str, event_type: &str, n: usize, keys: usize) -> NewEvent {
    NewEvent::new(
        topic,
        "bench",
        format!("key-{}", n % keys.max(1)),
        event_type,
        json!({"n": n, "text": "sluice outbox bench event"}),
    )
}

async fn bench(
    database_url: &str,
    kafka: &KafkaClientSettings,
    args: &OutboxBenchArgs,
) -> Result<(), Failure> {
    let env = setup(database_url, kafka, args).await?;
    println!(
        "== outbox bench: schema {}, topic {} ({} partitions), acks=all, batch size {}",
        env.schema, env.topic, args.partitions, args.batch_size
    );
    let throughput = throughput(&env, args).await?;
    let latency = latency(&env, args).await?;
    let results = report(args, &throughput, &latency)?;
    std::fs::write(&args.out, serde_json::to_string_pretty(&results)?)?;
    println!("\nJSON: {}", args.out.display());
    teardown(database_url, &env).await
}

/// The outbox bench with its default options, as a phase of the storage bench: its figures,
/// as `sluice bench outbox` writes them to its JSON file.
pub async fn phase(
    database_url: &str,
    kafka: &KafkaClientSettings,
) -> Result<serde_json::Value, Failure> {
    #[derive(clap::Parser)]
    struct Defaults {
        #[command(flatten)]
        args: OutboxBenchArgs,
    }
    let args = <Defaults as clap::Parser>::try_parse_from(["outbox"])
        .map_err(|e| anyhow!("outbox bench defaults: {e}"))?
        .args;
    let env = setup(database_url, kafka, &args).await?;
    let throughput = throughput(&env, &args).await?;
    let latency = latency(&env, &args).await?;
    let results = report(&args, &throughput, &latency)?;
    teardown(database_url, &env).await?;
    Ok(results)
}
