//! `sluice bench [storage]`: sluice's reviews pipeline measured against baselines in the same run,
//! with the same generated rows, on the real stack (docs/ARCHITECTURE.md#performance). Not a test: it prints a
//! Markdown table, writes a JSON file with the ratios and an SVG chart beside it.
//!
//! - U / U_update: the same upsert statement, same batches, straight into PostgreSQL (no
//!   Kafka), first crawl (all inserts) and second crawl (all updates);
//! - L: one binary `COPY` of the same rows into an unindexed copy of the table;
//! - K: a count-and-drop rdkafka consumer over the same topic;
//! - S / S_update: `sluice run` (a child process), reviews pipeline, draining each crawl;
//!   U and S alternate in ABBA pairs ([`compare`]), each run from a fresh checkpoint;
//! - ideas on the write path, each in its own pairs ([`compare`]);
//! - latency isolation: network-metrics produce → committed (visible) while reviews drain;
//! - the consumer's peak RSS, the restart figure, the metrics cost, the outbox.
//!
//! `sluice bench outbox` measures the outbox dispatcher instead (see [`outbox`]), and
//! `sluice bench capture` `sluice capture` against Debezium (see [`capture`]).
//!
//! The run's parts: [`setup`] (its schema, topics and settings) and [`workload`] (the crawls,
//! as rows and as records) prepare it; [`baselines`] (U, L, K, U against S), [`ideas`] (S
//! against S, the metrics cost, an earlier build) and [`operations`] (latency isolation,
//! steady load, restart, outbox) are its phases; [`report`] and [`chart`] show its figures.

mod baselines;
mod capture;
mod chart;
mod compare;
mod copy;
mod cost;
mod drain;
mod formats;
mod ideas;
mod latency;
mod operations;
mod outbox;
mod report;
mod restart;
mod rows;
mod runlog;
mod scrape;
mod setup;
mod sizes;
mod steady;
mod tables;
mod workload;
mod writers;

use crate::Failure;
use clap::{Args, Subcommand};
use drain::{Drained, check_alive, drain, run_command};
use sluice_kafka::Admin;
use sluice_storage::StorageSettings;
use sqlx::PgConnection;
use std::path::PathBuf;
use std::time::Duration;
use workload::{Produced, Workload};

/// Options of `sluice bench`; with no subcommand, the storage bench.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// What to measure (default: storage).
    #[command(subcommand)]
    target: Option<BenchTarget>,
    /// Reviews in the workload.
    #[arg(long, default_value_t = 200_000)]
    reviews: usize,
    /// Apps the reviews belong to.
    #[arg(long, default_value_t = 1000)]
    apps: usize,
    /// Network-metrics messages per second during the latency phase: fast enough for the
    /// 300 samples the quiet topic's p99 is judged over, in a drain of under 4 s (at 100 a
    /// second, drains of 50,000 rows/s gave 219–320).
    #[arg(long, default_value_t = 200.0)]
    metrics_rate: f64,
    /// Pairs of runs (ABBA order) of each write-method comparison, U and S.
    #[arg(long, default_value_t = 2)]
    pairs: usize,
    /// Skip the slow phases (metrics cost, the dynamic-membership restart, the outbox):
    /// for trying an idea.
    #[arg(long)]
    quick: bool,
    /// An earlier build of `sluice` (e.g. the release binary of the commit before a
    /// refactoring): its reviews drain is compared with this build's in ABBA pairs.
    #[arg(long, value_name = "PATH")]
    baseline_sluice: Option<PathBuf>,
    /// Only the comparison with `--baseline-sluice` (the reviews drain by each build in ABBA
    /// pairs: rows/s and CPU per drain), for trying an idea on the cost per record.
    #[arg(long, requires = "baseline_sluice")]
    baseline_only: bool,
    /// Reviews per second of the steady-load phase.
    #[arg(long, default_value_t = 5_000)]
    steady_rate: u64,
    /// Seconds of the steady-load phase.
    #[arg(long, default_value_t = 30)]
    steady_seconds: u64,
    /// Only the steady-load phase, this many times (for trying an idea on the cost per
    /// record at a moderate rate).
    #[arg(long, value_name = "RUNS")]
    steady_runs: Option<usize>,
    /// Only the latency isolation phase, this many times (each a fresh reviews drain with
    /// network-metrics probed beside it), for trying an idea on the quiet topic's latency.
    #[arg(long, value_name = "RUNS")]
    latency_runs: Option<usize>,
    /// Only the record sizes (~1 KB, ~100 KB, ~900 KB through one declared sink: rows/s and
    /// `sluice run`'s peak RSS per size), this many drains of each; with `--baseline-sluice`,
    /// as many by the baseline, in ABBA pairs. The table goes to `--out` as JSON.
    #[arg(long, value_name = "PAIRS")]
    sizes_pairs: Option<usize>,
    /// Measure record formats only: `--reviews` review-like records as JSON and as Avro
    /// through the schema registry (`SCHEMA_REGISTRY_URL`), each drained by one declared
    /// sink, this many times each in ABBA pairs: rows/s and CPU per record. The table goes to
    /// `--out` as JSON.
    #[arg(long, value_name = "PAIRS")]
    formats_pairs: Option<usize>,
    /// Measure many tables only (issue 45): `--tables-records` records over 20 topics and 20
    /// tables of one shape, drained by one sink (`topic_pattern`, `table = "<schema>.{1}"`,
    /// `columns = "auto"`) and by 20 sinks, this many times each in ABBA pairs: rows/s, CPU
    /// per record and peak RSS of `sluice run`, every table's rows checked. The table goes to
    /// `--out` as JSON.
    #[arg(long, value_name = "PAIRS")]
    tables_pairs: Option<usize>,
    /// Records of the many-tables bench, spread evenly over its 20 topics.
    #[arg(long, default_value_t = 200_000)]
    tables_records: usize,
    /// The many-tables bench's 20 sinks: their columns `listed` (each from the field of its
    /// name, `key = ["id"]`), or `auto` as the one sink has them.
    #[arg(long, value_name = "HOW", default_value = "listed", value_parser = ["listed", "auto"])]
    tables_b_columns: String,
    /// The many-tables bench's one sink: its writers (`STORAGE_WRITERS`, 1-8; default: the
    /// default, 2), against the 20 sinks' 2 each.
    #[arg(long, value_name = "N")]
    tables_a_writers: Option<usize>,
    /// The record sizes' column type: `text`, or `jsonb` (the record's value kept as its JSON
    /// text, the path of a document column).
    #[arg(long, value_name = "TYPE", default_value = "text", value_parser = ["text", "jsonb"])]
    sizes_column: String,
    /// Where the JSON results go; the SVG chart goes beside it (same name, `.svg`).
    #[arg(long, default_value = "bench-results.json")]
    out: PathBuf,
}

/// The benches.
#[derive(Debug, Subcommand)]
enum BenchTarget {
    /// The storage consumer against baselines (the default; options before `storage`).
    Storage,
    /// The outbox dispatcher: sustained events/s and commit→ack latency.
    Outbox(outbox::OutboxBenchArgs),
    /// `sluice capture` against Debezium in Kafka Connect: events/s, commit → Kafka
    /// latency, CPU and memory, on the same changes.
    Capture(capture::CaptureBenchArgs),
}

const BATCH: usize = 500;
/// The larger transaction tried as an idea.
const BIG_BATCH: usize = 1000;

/// Entry point.
pub fn run(args: &BenchArgs) -> Result<(), Failure> {
    match &args.target {
        Some(BenchTarget::Outbox(outbox)) => outbox::run(outbox),
        Some(BenchTarget::Capture(capture)) => capture::run(capture),
        Some(BenchTarget::Storage) | None => run_storage(args),
    }
}

fn run_storage(args: &BenchArgs) -> Result<(), Failure> {
    let settings = super::settings()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(bench(&settings, args))
}

#[derive(Clone)]
struct Env {
    /// The `sluice` executable the drains run.
    sluice: PathBuf,
    id: String,
    schema: String,
    url: String,
    settings: StorageSettings,
}

/// The shared parts of a full run once both crawls are produced.
#[derive(Clone, Copy)]
struct Run<'a> {
    /// The process environment's settings (the stack's database and brokers).
    settings: &'a StorageSettings,
    /// The bench's options.
    args: &'a BenchArgs,
    /// The run's schema and drain settings.
    env: &'a Env,
    /// The admin client and the crawls' topics.
    kafka: &'a Produced,
    /// Both crawls.
    work: &'a Workload,
}

/// The storage bench: the environment, the workload, then the phases in order (or only the
/// record sizes, the steady load or the latency isolation when asked), the report and the
/// chart, the teardown.
async fn bench(settings: &StorageSettings, args: &BenchArgs) -> Result<(), Failure> {
    let id = format!("bench{}", std::process::id());
    let env = setup::setup(settings, &id, args).await?;
    if let Some(pairs) = args.sizes_pairs {
        return sizes_only(settings, &env, args, pairs).await;
    }
    if let Some(pairs) = args.formats_pairs {
        return formats_only(settings, &env, args, pairs).await;
    }
    if let Some(pairs) = args.tables_pairs {
        return tables_only(settings, &env, args, pairs).await;
    }
    let (work, mut conn) = Workload::prepare(&env, args).await?;
    if let (true, Some(exe)) = (args.baseline_only, &args.baseline_sluice) {
        let kafka = work.produce(settings, &env).await?;
        let base_env = setup::baseline_env(settings, &env, args, exe).await?;
        ideas::baseline(&env, &kafka.admin, &mut conn, &base_env).await?;
        kafka.admin.delete_topic(&kafka.topic2).await?;
        return setup::teardown(settings, &env, &kafka.admin, &mut conn).await;
    }
    let lanes = baselines::u_lanes(&env, &mut conn, &work, args.pairs).await?;
    let copied = baselines::l_copy(&mut conn, &work).await?;
    let kafka = work.produce(settings, &env).await?;
    let admin = &kafka.admin;
    if let Some(runs) = args.steady_runs {
        return operations::steady_only(&env, admin, &mut conn, &work.records, args, runs).await;
    }
    if let Some(runs) = args.latency_runs {
        let prefix = &work.config.app_prefix;
        return operations::latency_only(&env, admin, &mut conn, args, prefix, runs).await;
    }
    let run = Run {
        settings,
        args,
        env: &env,
        kafka: &kafka,
        work: &work,
    };
    let results = measure(run, &mut conn, lanes, copied).await?;
    report::report(args, &results)?;
    report::chart(args, &results)?;
    for t in [&kafka.topic2] {
        admin.delete_topic(t).await?;
    }
    setup::teardown(settings, &env, admin, &mut conn).await
}

/// The record sizes alone (`--sizes-pairs`): their table to `--out`, then the teardown.
async fn formats_only(
    settings: &StorageSettings,
    env: &Env,
    args: &BenchArgs,
    pairs: usize,
) -> Result<(), Failure> {
    println!(
        "== {} reviews as JSON and as Avro (schema registry), {pairs} drain(s) of each",
        args.reviews
    );
    let admin = Admin::new(&settings.kafka, Duration::from_secs(30))?;
    let mut conn = sluice_postgres::connect(&env.url, "bench").await?;
    let table = formats::run(env, &admin, &mut conn, args.reviews, pairs).await?;
    std::fs::write(&args.out, serde_json::to_string_pretty(&table)?)?;
    println!("   written to {}", args.out.display());
    setup::teardown(settings, env, &admin, &mut conn).await
}

/// Many tables alone (`--tables-pairs`): their table to `--out`, then the teardown.
async fn tables_only(
    settings: &StorageSettings,
    env: &Env,
    args: &BenchArgs,
    pairs: usize,
) -> Result<(), Failure> {
    println!(
        "== {} records over {} topics and tables: one sink (pattern, auto columns, {} writers) against {} sinks ({} columns, 2 writers each), {pairs} pair(s)",
        args.tables_records,
        tables::TABLES,
        args.tables_a_writers.unwrap_or(2),
        tables::TABLES,
        args.tables_b_columns
    );
    println!(
        "   {}",
        report::machine().replace(" at the end", " at the start")
    );
    let admin = Admin::new(&settings.kafka, Duration::from_secs(30))?;
    let mut conn = sluice_postgres::connect(&env.url, "bench").await?;
    let options = tables::Options {
        count: args.tables_records,
        pairs,
        b_columns: &args.tables_b_columns,
        a_writers: args.tables_a_writers,
    };
    let table = tables::run(env, &admin, &mut conn, &options).await;
    // The schema goes whether or not the drains succeeded (tables::run removed its topics).
    let torn_down = setup::teardown(settings, env, &admin, &mut conn).await;
    std::fs::write(&args.out, serde_json::to_string_pretty(&table?)?)?;
    println!("   written to {}", args.out.display());
    torn_down
}

async fn sizes_only(
    settings: &StorageSettings,
    env: &Env,
    args: &BenchArgs,
    pairs: usize,
) -> Result<(), Failure> {
    println!("== record sizes through one declared sink, {pairs} drain(s) of each by each build");
    let admin = Admin::new(&settings.kafka, Duration::from_secs(30))?;
    let mut conn = sluice_postgres::connect(&env.url, "bench").await?;
    let base_env = match &args.baseline_sluice {
        Some(exe) => Some(setup::baseline_env(settings, env, args, exe).await?),
        None => None,
    };
    let table = sizes::run(
        env,
        &admin,
        &mut conn,
        pairs,
        base_env.as_ref(),
        &args.sizes_column,
    )
    .await?;
    std::fs::write(&args.out, serde_json::to_string_pretty(&table)?)?;
    println!("   written to {}", args.out.display());
    setup::teardown(settings, env, &admin, &mut conn).await
}

/// The phases from K on, in order (U over two connections and L ran before the produce):
/// every figure of the report and the chart.
async fn measure(
    run: Run<'_>,
    conn: &mut PgConnection,
    connections: baselines::Connections,
    copied: baselines::Copied,
) -> Result<report::Results, Failure> {
    let Run {
        settings,
        args,
        env,
        kafka,
        work,
    } = run;
    let admin = &kafka.admin;
    let k = baselines::k(&settings.kafka, &env.id, &kafka.topic, work.records.len())?;
    let us = baselines::u_and_s(env, kafka, conn, work, args.pairs).await?;
    let batch_idea = ideas::batch_size(env, kafka, conn, args.pairs, args.quick).await?;
    let sync_commit = ideas::sync_commit(env, kafka, conn, args.pairs).await?;
    let writers = ideas::writers(env, kafka, conn, args.pairs, &connections).await?;
    let phases = us.batch_phases();
    let cost = ideas::metrics_cost(env, admin, conn, args.quick).await?;
    let baseline = match &args.baseline_sluice {
        None => None,
        Some(exe) => {
            let base_env = setup::baseline_env(settings, env, args, exe).await?;
            Some(ideas::baseline(env, admin, conn, &base_env).await?)
        }
    };
    let prefix = &work.config.app_prefix;
    let (latency, lat_run) = operations::latency(env, admin, conn, args, prefix).await?;
    let steady = operations::steady(env, admin, conn, &work.records, args, us.cpu[0]).await?;
    let restart = operations::restart(env, conn, args.quick).await?;
    let outbox = operations::outbox(settings, args.quick).await?;
    let figures = report::Figures {
        u: us.u,
        u_update: us.u_update,
        connections,
        l: copied.rate,
        k,
        s: us.s,
        s_update: us.s_update,
        pair_ratios: us.pair_ratios,
        cpu: us.cpu,
        with_startup: us.with_startup,
        phases,
        batch_idea,
        writers,
        sync_commit,
        steady,
    };
    Ok(report::Results {
        figures,
        rss_kb: us.s_rss_kb.max(lat_run.rss_kb),
        s_with_metrics: lat_run.drain,
        latency,
        restart,
        cost,
        baseline,
        outbox,
        timelines: report::Timelines {
            s: us.s_main.insert.timeline,
            u: us.u_main.timeline,
            l_seconds: copied.seconds,
        },
    })
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64().max(1e-9)
}
