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

use crate::Failure;
use anyhow::{Context, anyhow};
use clap::Args;
use serde_json::json;
use sluice_core::KafkaClientSettings;
use sluice_dispatch::settings::OutboxSettings;
use sluice_dispatch::{DispatchTotals, Dispatcher};
use sluice_kafka::Admin;
use sluice_outbox::{NewEvent, enqueue};
use sqlx::{Connection, PgConnection};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

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

const FIXTURE: &str = include_str!("../../../../fixtures/applications.sql");

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

/// The throughput phase's numbers.
#[derive(Debug, Clone, Copy)]
struct Throughput {
    events: i64,
    enqueue_per_second: f64,
    seconds: f64,
    per_second: f64,
    wall_seconds: f64,
    first_batch_seconds: f64,
    steady_per_second: f64,
    /// The dispatchers' totals added up: batches and where their time went.
    phases: DispatchTotals,
}

impl Throughput {
    /// Mean events per batch and mean milliseconds per batch in claim, publish and mark.
    fn per_batch(&self) -> (f64, f64, f64, f64) {
        let batches = self.phases.batches.max(1) as f64;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0 / batches;
        (
            self.phases.published as f64 / batches,
            ms(self.phases.claim_time),
            ms(self.phases.publish_time),
            ms(self.phases.mark_time),
        )
    }
}

/// The dispatchers' tasks, each returning its totals.
type DispatcherTasks =
    Vec<tokio::task::JoinHandle<Result<DispatchTotals, sluice_dispatch::DispatchError>>>;

/// The throughput phase: the dispatchers start idle, the backlog commits at once, and they
/// drain it; events/s on PostgreSQL's clock.
async fn throughput(env: &Env, args: &OutboxBenchArgs) -> Result<Throughput, Failure> {
    println!(
        "== throughput: {} dispatchers start on an empty table",
        args.dispatchers
    );
    let stop = CancellationToken::new();
    let dispatchers = start_dispatchers(env, args, &stop)?;
    // Their producers connect and get their producer ids meanwhile (librdkafka asks for one
    // on a 500 ms timer): start-up is not what this phase measures. A shorter wait only
    // makes the result lower.
    tokio::time::sleep(PRODUCER_START).await;
    println!(
        "== throughput: enqueue {} events in one transaction ({} keys; not timed); the dispatchers drain them",
        args.events, args.keys
    );
    let mut conn = sluice_postgres::connect(&env.url, "bench").await?;
    let (enqueue_per_second, db_start) = enqueue_backlog(&mut conn, env, args).await?;
    let wall = Instant::now();
    println!("   enqueued at {enqueue_per_second:.0} events/s");
    let total = args.events as i64;
    wait_settled(&mut conn, total, &stop).await?;
    let wall_seconds = wall.elapsed().as_secs_f64();
    stop.cancel();
    let phases = join_dispatchers(dispatchers).await?;
    let published = published_rates(&mut conn, db_start, total).await?;
    conn.close().await?;
    Ok(Throughput {
        events: total,
        enqueue_per_second,
        seconds: published.seconds,
        per_second: published.per_second,
        wall_seconds,
        first_batch_seconds: published.first_batch_seconds,
        steady_per_second: published.steady_per_second,
        phases,
    })
}

/// Starts `--dispatchers` dispatchers in this process, each stopped by a child of `stop`.
fn start_dispatchers(
    env: &Env,
    args: &OutboxBenchArgs,
    stop: &CancellationToken,
) -> Result<DispatcherTasks, Failure> {
    let mut dispatchers = Vec::new();
    for d in 0..args.dispatchers {
        let settings = env.dispatcher_settings(&format!("bench-{d}"), args.batch_size)?;
        let dispatcher = Dispatcher::new(settings)?;
        dispatchers.push(tokio::spawn(dispatcher.run(stop.child_token())));
    }
    Ok(dispatchers)
}

/// Enqueues the backlog in one transaction and commits it: the enqueue rate, and
/// PostgreSQL's clock just before the commit.
async fn enqueue_backlog(
    conn: &mut PgConnection,
    env: &Env,
    args: &OutboxBenchArgs,
) -> Result<(f64, chrono::DateTime<chrono::Utc>), Failure> {
    let started = Instant::now();
    let mut tx = conn.begin().await?;
    for i in 0..args.events {
        enqueue(&mut tx, &event(&env.topic, "bench.backlog", i, args.keys)).await?;
    }
    // The transaction's own rows count in its ANALYZE: the claim is planned on a backlog.
    sqlx::raw_sql("ANALYZE outbox_events")
        .execute(&mut *tx)
        .await?;
    let enqueue_per_second = args.events as f64 / started.elapsed().as_secs_f64().max(1e-9);
    // Read just before the commit that makes the whole backlog visible at once.
    let db_start: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok((enqueue_per_second, db_start))
}

/// Waits (at most 600 s; then `stop`) until no event is PENDING or DISPATCHING, then checks
/// that all `total` are PUBLISHED and none in FAILURE.
async fn wait_settled(
    conn: &mut PgConnection,
    total: i64,
    stop: &CancellationToken,
) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(600);
    // Cheap while it runs (the first row of a partial index), so that the measurement does
    // not take the database's CPU from the dispatchers; the counts are checked once at the end.
    loop {
        let unsettled: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM outbox_events WHERE status IN ('PENDING', 'DISPATCHING'))",
        )
        .fetch_one(&mut *conn)
        .await?;
        if !unsettled {
            break;
        }
        if Instant::now() > deadline {
            stop.cancel();
            return Err(anyhow!("the backlog is not PUBLISHED after 600 s").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (published, failed): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE status = 'PUBLISHED'), \
                count(*) FILTER (WHERE status = 'FAILURE') FROM outbox_events",
    )
    .fetch_one(&mut *conn)
    .await?;
    if failed > 0 || published < total {
        stop.cancel();
        return Err(anyhow!("{published}/{total} PUBLISHED, {failed} in FAILURE").into());
    }
    Ok(())
}

/// Waits for the stopped dispatchers and adds their totals up.
async fn join_dispatchers(dispatchers: DispatcherTasks) -> Result<DispatchTotals, Failure> {
    let mut phases = DispatchTotals::default();
    for task in dispatchers {
        let totals = task.await.map_err(|e| anyhow!("dispatcher task: {e}"))??;
        phases.batches += totals.batches;
        phases.published += totals.published;
        phases.claim_time += totals.claim_time;
        phases.publish_time += totals.publish_time;
        phases.mark_time += totals.mark_time;
    }
    Ok(phases)
}

/// The throughput phase's figures on PostgreSQL's clock.
struct Published {
    seconds: f64,
    per_second: f64,
    first_batch_seconds: f64,
    steady_per_second: f64,
}

/// The rates from the `published_at` of the `total` events against `db_start` (the
/// backlog's commit), printed.
async fn published_rates(
    conn: &mut PgConnection,
    db_start: chrono::DateTime<chrono::Utc>,
    total: i64,
) -> Result<Published, Failure> {
    let (first, last): (chrono::DateTime<chrono::Utc>, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("SELECT min(published_at), max(published_at) FROM outbox_events")
            .fetch_one(&mut *conn)
            .await?;
    let secs = |d: chrono::TimeDelta| (d.num_microseconds().unwrap_or(0) as f64 / 1e6).max(1e-9);
    let seconds = secs(last - db_start);
    let per_second = total as f64 / seconds;
    let first_batch_seconds = secs(first - db_start);
    let first_batch: i64 =
        sqlx::query_scalar("SELECT count(*) FROM outbox_events WHERE published_at = $1")
            .bind(first)
            .fetch_one(&mut *conn)
            .await?;
    let steady_per_second = (total - first_batch) as f64 / secs(last - first);
    println!(
        "   {total} events PUBLISHED in {seconds:.2} s (PostgreSQL clock): {per_second:.0} events/s; \
         first batch marked after {first_batch_seconds:.2} s, {steady_per_second:.0} events/s after it"
    );
    Ok(Published {
        seconds,
        per_second,
        first_batch_seconds,
        steady_per_second,
    })
}

/// The latency phase's numbers, milliseconds.
#[derive(Debug, Clone, Copy)]
struct Latency {
    count: i64,
    enqueue_per_second: f64,
    p50: f64,
    p99: f64,
    max: f64,
}

async fn latency(env: &Env, args: &OutboxBenchArgs) -> Result<Latency, Failure> {
    let total = (args.latency_rate * args.latency_seconds as f64).round() as usize;
    println!(
        "== latency: 1 idle dispatcher (after a {WARM_UP}-event warm-up); {total} events at {:.0}/s, one per transaction, {} writers",
        args.latency_rate, args.latency_writers
    );
    let stop = CancellationToken::new();
    let settings = env.dispatcher_settings("bench-latency", args.batch_size)?;
    let task = tokio::spawn(Dispatcher::new(settings)?.run(stop.child_token()));
    // Warm-up: a few events through the dispatcher first, so that its producer has its
    // connection, metadata and producer id (the first publish of a new producer takes up to
    // a second, which would otherwise dominate the tail); then it idles.
    let mut conn = sluice_postgres::connect(&env.url, "bench").await?;
    for k in 0..WARM_UP {
        let mut tx = conn.begin().await?;
        enqueue(&mut tx, &event(&env.topic, "bench.warm-up", k, args.keys)).await?;
        tx.commit().await?;
    }
    wait_published(&mut conn, "bench.warm-up", &stop).await?;
    println!("   warm-up: {WARM_UP} events published; dispatcher idle");
    tokio::time::sleep(Duration::from_secs(1)).await;

    let writers = args.latency_writers.max(1);
    let interval = Duration::from_secs_f64(1.0 / args.latency_rate.max(1e-3));
    let start = tokio::time::Instant::now() + Duration::from_millis(100);
    let mut handles = Vec::new();
    for w in 0..writers {
        let url = env.url.clone();
        let topic = env.topic.clone();
        let keys = args.keys;
        handles.push(tokio::spawn(async move {
            let mut conn = sluice_postgres::connect(&url, "bench").await?;
            for k in (w..total).step_by(writers) {
                tokio::time::sleep_until(start + interval * k as u32).await;
                let mut tx = conn.begin().await?;
                enqueue(&mut tx, &event(&topic, LATENCY_TYPE, k, keys)).await?;
                tx.commit().await?;
            }
            conn.close().await?;
            Ok::<(), anyhow::Error>(())
        }));
    }
    for handle in handles {
        handle.await.map_err(|e| anyhow!("writer task: {e}"))??;
    }
    let enqueue_seconds = start.elapsed().as_secs_f64();
    let enqueue_per_second = total as f64 / enqueue_seconds.max(1e-9);
    println!("   enqueued {total} in {enqueue_seconds:.2} s ({enqueue_per_second:.0}/s achieved)");

    wait_published(&mut conn, LATENCY_TYPE, &stop).await?;
    stop.cancel();
    task.await.map_err(|e| anyhow!("dispatcher task: {e}"))??;
    let (count, p50, p99, max): (i64, f64, f64, f64) = sqlx::query_as(
        "WITH l AS (SELECT EXTRACT(EPOCH FROM published_at - created_at)::float8 * 1000 AS ms \
                    FROM outbox_events WHERE event_type = $1) \
         SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), \
                percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), max(ms) FROM l",
    )
    .bind(LATENCY_TYPE)
    .fetch_one(&mut conn)
    .await?;
    conn.close().await?;
    println!(
        "   commit→ack over {count} events: p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms"
    );
    Ok(Latency {
        count,
        enqueue_per_second,
        p50,
        p99,
        max,
    })
}

/// Waits until every event of `event_type` is PUBLISHED (at most 120 s; then `stop`).
async fn wait_published(
    conn: &mut PgConnection,
    event_type: &str,
    stop: &CancellationToken,
) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let pending: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM outbox_events WHERE event_type = $1 AND status <> 'PUBLISHED'",
        )
        .bind(event_type)
        .fetch_one(&mut *conn)
        .await?;
        if pending == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            stop.cancel();
            return Err(anyhow!("{pending} {event_type} events not PUBLISHED after 120 s").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Prints the Markdown table; the figures as the JSON file holds them.
fn report(
    args: &OutboxBenchArgs,
    t: &Throughput,
    l: &Latency,
) -> Result<serde_json::Value, Failure> {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    print_table(args, t, l, cores);
    Ok(results_json(args, t, l, cores))
}

/// The Markdown table and how its figures are measured.
fn print_table(args: &OutboxBenchArgs, t: &Throughput, l: &Latency, cores: usize) {
    let met = t.per_second >= TARGET_EVENTS_PER_SECOND;
    println!(
        "\n## sluice bench outbox — {cores} cores, acks=all, {} partitions, batch size {}\n",
        args.partitions, args.batch_size
    );
    println!("| measure | value | target | met |");
    println!("|---|---|---|---|");
    println!(
        "| enqueue (backlog, one transaction) | {:.0} events/s | | |",
        t.enqueue_per_second
    );
    println!(
        "| sustained dispatch, {} dispatchers, {} events | {:.0} events/s ({:.2} s; {:.2} s wall incl. polling for the end) | ≥ {TARGET_EVENTS_PER_SECOND:.0} events/s | {} |",
        args.dispatchers,
        t.events,
        t.per_second,
        t.seconds,
        t.wall_seconds,
        if met { "yes" } else { "NO" }
    );
    println!(
        "| (the same run after the first batch was marked at {:.2} s) | {:.0} events/s | | |",
        t.first_batch_seconds, t.steady_per_second
    );
    let (mean_batch, claim_ms, publish_ms, mark_ms) = t.per_batch();
    println!(
        "| per batch ({} batches, {mean_batch:.0} events each on average) | claim {claim_ms:.1} / publish {publish_ms:.1} / mark {mark_ms:.1} ms | | |",
        t.phases.batches
    );
    println!(
        "| commit→ack latency at {:.0} events/s offered ({:.0}/s achieved), 1 dispatcher | p50 {:.1} / p99 {:.1} / max {:.1} ms ({} events) | p99 ≤ {TARGET_P99_MS:.0} ms | {} |",
        args.latency_rate,
        l.enqueue_per_second,
        l.p50,
        l.p99,
        l.max,
        l.count,
        if l.p99 <= TARGET_P99_MS { "yes" } else { "NO" }
    );
    println!(
        "\nLatency = published_at − created_at, both PostgreSQL's clock: created_at is the \
         enqueue transaction's start (now()), published_at is set by the statement that \
         records the broker's acknowledgement (acks=all). Throughput = events / (last \
         published_at − the commit of the backlog, clock_timestamp() just before it; the dispatchers \
         were started and idle before)."
    );
}

/// The figures as the JSON file holds them.
fn results_json(
    args: &OutboxBenchArgs,
    t: &Throughput,
    l: &Latency,
    cores: usize,
) -> serde_json::Value {
    let met = t.per_second >= TARGET_EVENTS_PER_SECOND;
    let (mean_batch, claim_ms, publish_ms, mark_ms) = t.per_batch();
    json!({
        "cores": cores,
        "partitions": args.partitions,
        "batch_size": args.batch_size,
        "throughput": {
            "events": t.events,
            "dispatchers": args.dispatchers,
            "keys": args.keys,
            "enqueue_events_per_second": t.enqueue_per_second,
            "seconds": t.seconds,
            "wall_seconds": t.wall_seconds,
            "events_per_second": t.per_second,
            "first_batch_marked_after_seconds": t.first_batch_seconds,
            "events_per_second_after_first_batch": t.steady_per_second,
            "target_events_per_second": TARGET_EVENTS_PER_SECOND,
            "met": met,
            "batches": t.phases.batches,
            "mean_events_per_batch": mean_batch,
            "per_batch_ms": {"claim": claim_ms, "publish": publish_ms, "mark": mark_ms},
        },
        "latency_ms": {
            "offered_rate": args.latency_rate,
            "achieved_rate": l.enqueue_per_second,
            "count": l.count,
            "p50": l.p50,
            "p99": l.p99,
            "max": l.max,
            "target_p99": TARGET_P99_MS,
            "met": l.p99 <= TARGET_P99_MS,
            "definition": "published_at - created_at (PostgreSQL clock; created_at = enqueue transaction start, published_at = ack recorded)",
        },
    })
}
