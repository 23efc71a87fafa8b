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
//! `sluice bench outbox` measures the outbox dispatcher instead (see [`outbox`]).

mod chart;
mod compare;
mod copy;
mod cost;
mod drain;
mod latency;
mod outbox;
mod report;
mod restart;
mod rows;
mod runlog;
mod scrape;
mod sizes;
mod steady;
mod writers;

use super::produce::{bar, send_all};
use crate::Failure;
use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use compare::SOptions;
use drain::{Drained, check_alive, drain, run_command};
use sluice_core::{PipelineKind, Settings};
use sluice_kafka::Admin;
use sluice_loadgen::{CrawlerConfig, app_names, reviews_for_crawl};
use sqlx::PgConnection;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    /// Network-metrics messages per second during the latency phase (fast enough for a few
    /// hundred samples during a drain of a few seconds).
    #[arg(long, default_value_t = 100.0)]
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
}

const BATCH: usize = 500;
/// The larger transaction tried as an idea.
const BIG_BATCH: usize = 1000;

/// Entry point.
pub fn run(args: &BenchArgs) -> Result<(), Failure> {
    match &args.target {
        Some(BenchTarget::Outbox(outbox)) => outbox::run(outbox),
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
    settings: Settings,
}

async fn bench(settings: &Settings, args: &BenchArgs) -> Result<(), Failure> {
    let id = format!("bench{}", std::process::id());
    let env = setup(settings, &id, args).await?;
    if let Some(pairs) = args.sizes_pairs {
        println!(
            "== record sizes through one declared sink, {pairs} drain(s) of each by each build"
        );
        let admin = Admin::new(&settings.kafka, Duration::from_secs(30))?;
        let mut conn = sluice_postgres::connect(&env.url, "bench").await?;
        let table = sizes::run(
            &env,
            &admin,
            &mut conn,
            pairs,
            args.baseline_sluice.as_deref(),
            &args.sizes_column,
        )
        .await?;
        std::fs::write(&args.out, serde_json::to_string_pretty(&table)?)?;
        println!("   written to {}", args.out.display());
        return teardown(settings, &env, &admin, &mut conn).await;
    }
    println!(
        "== workload: {} reviews over {} apps, two crawls (the second re-reads every review, newer)",
        args.reviews, args.apps
    );
    let config = CrawlerConfig {
        apps: args.apps,
        reviews: args.reviews,
        app_prefix: format!("com.{id}"),
        duplicate_fraction: 0.0,
        out_of_order_fraction: 0.0,
        poison_fraction: 0.0,
        ..CrawlerConfig::default()
    };
    let records = reviews_for_crawl(&config);
    let records2 = reviews_for_crawl(&CrawlerConfig {
        crawl: 2,
        ..config.clone()
    });
    let mut conn = sluice_postgres::connect(&env.url, "bench")
        .await
        .context("bench schema")?;
    let ids: HashMap<String, i64> =
        sqlx::query_as("SELECT package_name, id FROM apps_registry_application")
            .fetch_all(&mut conn)
            .await?
            .into_iter()
            .collect();
    let plan = rows::reviews_plan(&mut conn, &env.settings).await?;
    let typed = rows::resolve_rows(&records, &ids)?;
    let rows = rows::sink_rows(&plan, &records, &ids)?;
    let rows2 = rows::sink_rows(&plan, &records2, &ids)?;
    let bytes: usize = records
        .iter()
        .map(|r| r.payload.as_ref().map_or(0, Vec::len))
        .sum();
    println!(
        "   {} rows per crawl, {:.1} MiB of JSON",
        rows.len(),
        bytes as f64 / 1048576.0
    );

    let u_of = |r: &compare::URun| (r.insert, r.update);

    println!(
        "== idea: U over 2 connections at once (rows split by key) vs 1, first crawl, {} pairs",
        args.pairs
    );
    let (mut one_lane, mut two_lanes) = (Vec::new(), Vec::new());
    for pair in 0..args.pairs {
        for lanes in if pair.is_multiple_of(2) {
            [2, 1]
        } else {
            [1, 2]
        } {
            let r = compare::u_lanes(&env.url, &mut conn, &plan, &rows, lanes).await?;
            println!("   {lanes} connection(s): {r:.0} rows/s");
            if lanes == 1 {
                one_lane.push(r)
            } else {
                two_lanes.push(r)
            }
        }
    }
    let (u_one, u_two) = (median(&one_lane), median(&two_lanes));
    println!(
        "   medians: 1 connection {u_one:.0}, 2 connections {u_two:.0} rows/s ({:.2}×)",
        u_two / u_one
    );

    println!("== L: binary COPY into an unindexed copy of the table");
    sqlx::raw_sql("CREATE TABLE reviews_copy (LIKE reviews INCLUDING DEFAULTS)")
        .execute(&mut conn)
        .await?;
    let started = Instant::now();
    copy::copy_rows(&mut conn, "reviews_copy", &typed).await?;
    let l_seconds = started.elapsed().as_secs_f64();
    let l = rate(rows.len(), started.elapsed());
    println!("   {l:.0} rows/s");

    println!("== producing both crawls (not timed)");
    let topic = env
        .settings
        .pipeline(sluice_core::PipelineKind::Reviews)
        .map(|p| p.topic.clone())
        .unwrap_or_default();
    let topic2 = format!("{topic}-crawl2");
    let admin = Admin::new(&settings.kafka, Duration::from_secs(30))?;
    for p in &env.settings.pipelines {
        admin.ensure_topic(&p.topic, 3).await?;
    }
    admin.ensure_topic(&topic2, 3).await?;
    let producer = sluice_kafka::ResilientProducer::new(&settings.kafka, "sluice-bench")?;
    let progress = bar(records.len() as u64 * 2, "produce", false);
    send_all(&env.settings, &producer, &records, 0, &progress).await?;
    let mut settings2 = env.settings.clone();
    for p in &mut settings2.pipelines {
        if p.kind == PipelineKind::Reviews {
            p.topic.clone_from(&topic2);
        }
    }
    send_all(&settings2, &producer, &records2, 0, &progress).await?;
    progress.finish();

    if let Some(runs) = args.steady_runs {
        let count = usize::try_from(args.steady_rate.saturating_mul(args.steady_seconds))
            .unwrap_or(usize::MAX)
            .min(records.len());
        println!(
            "== steady load, {runs} runs: {} reviews/s for {} s",
            args.steady_rate, args.steady_seconds
        );
        for run in 0..runs {
            sqlx::raw_sql("TRUNCATE reviews").execute(&mut conn).await?;
            let steady =
                steady::measure(&env, &admin, &records[..count], args.steady_rate, run).await?;
            println!(
                "   run {}: {} records, {:.1} µs of `sluice run` CPU per record, {:.1} records per transaction",
                run + 1,
                steady.records,
                steady.cpu_us_per_record(),
                steady.records_per_batch()
            );
        }
        return Ok(());
    }
    if let Some(runs) = args.latency_runs {
        return latency_only(&env, &admin, &mut conn, args, &config.app_prefix, runs).await;
    }

    println!("== K: count-and-drop rdkafka consumer");
    let k = count_and_drop(&settings.kafka, &topic, &format!("{id}-k"), records.len())?;
    println!("   {k:.0} records/s");

    println!(
        "== U and S: U (the same upsert, {BATCH}-row batches, one transaction each, no Kafka) and \
         S (`sluice run`, reviews pipeline, draining the produced backlog), crawl 1 into an empty \
         table then crawl 2 (all updates); {} pairs in ABBA order",
        args.pairs
    );
    let (mut u_pairs, mut s_runs) = (Vec::new(), Vec::new());
    for pair in 0..args.pairs {
        for s_side in [!pair.is_multiple_of(2), pair.is_multiple_of(2)] {
            if s_side {
                let tag = format!("s{pair}");
                let run =
                    compare::s_run(&env, &admin, &mut conn, &tag, &topic2, SOptions::default())
                        .await?;
                println!(
                    "   S insert {:.0} rows/s ({:.2} s CPU), update {:.0} rows/s ({:.2} s CPU), peak RSS {:.1} MiB",
                    run.insert.drain,
                    run.insert.cpu_s,
                    run.update.drain,
                    run.update.cpu_s,
                    run.insert.rss_kb.max(run.update.rss_kb) as f64 / 1024.0
                );
                s_runs.push(run);
            } else {
                let run = compare::u_run(&mut conn, &plan, &rows, &rows2).await?;
                println!(
                    "   U insert {:.0} rows/s, update {:.0} rows/s",
                    run.insert, run.update
                );
                u_pairs.push(run);
            }
        }
    }
    let (u, u_update) = compare::medians(&u_pairs, u_of);
    let s_of = |r: &compare::SRun| (r.insert.drain, r.update.drain);
    let cpu_of = |r: &compare::SRun| (r.insert.cpu_s, r.update.cpu_s);
    let (s, s_update) = compare::medians(&s_runs, s_of);
    let (cpu_insert, cpu_update) = compare::medians(&s_runs, cpu_of);
    let pair_ratios: Vec<f64> = s_runs
        .iter()
        .zip(&u_pairs)
        .map(|(s, u)| s.insert.drain / u.insert)
        .collect();
    let s_main = s_runs
        .first()
        .cloned()
        .ok_or_else(|| anyhow!("no S run (--pairs 0?)"))?;
    let with_startup = median(
        &s_runs
            .iter()
            .map(|r| r.insert.with_startup)
            .collect::<Vec<_>>(),
    );
    let s_rss_kb = s_runs
        .iter()
        .map(|r| r.insert.rss_kb.max(r.update.rss_kb))
        .max()
        .unwrap_or(0);
    println!(
        "   medians: U {u:.0} / U_update {u_update:.0}, S {s:.0} / S_update {s_update:.0} rows/s; \
         S/U per pair {}",
        pair_ratios
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let batch_idea = if args.quick {
        None
    } else {
        println!(
            "== idea: S with {BIG_BATCH} records per transaction (STORAGE_MAX_POLL_RECORDS_REVIEWS) vs the \
             default {BATCH}, both crawls, {} pairs in ABBA order",
            args.pairs
        );
        let (mut small, mut big) = (Vec::new(), Vec::new());
        for pair in 0..args.pairs {
            let order = if pair.is_multiple_of(2) {
                [true, false]
            } else {
                [false, true]
            };
            for is_big in order {
                let tag = format!("b{pair}{}", u8::from(is_big));
                let batch = is_big.then_some(BIG_BATCH);
                let options = SOptions {
                    batch,
                    ..SOptions::default()
                };
                let run = compare::s_run(&env, &admin, &mut conn, &tag, &topic2, options).await?;
                println!(
                    "   {:>5} rows/transaction: insert {:.0} rows/s ({:.2} s CPU), update {:.0} rows/s, peak RSS {:.1} MiB",
                    batch.unwrap_or(BATCH),
                    run.insert.drain,
                    run.insert.cpu_s,
                    run.update.drain,
                    run.insert.rss_kb.max(run.update.rss_kb) as f64 / 1024.0
                );
                if is_big {
                    big.push(run)
                } else {
                    small.push(run)
                }
            }
        }
        let s_of = |r: &compare::SRun| (r.insert.drain, r.update.drain);
        let small = compare::medians(&small, s_of);
        let big = compare::medians(&big, s_of);
        println!(
            "   medians: {BATCH}: {:.0} / {:.0}, {BIG_BATCH}: {:.0} / {:.0} rows/s ({:.2} / {:.2} ×)",
            small.0,
            small.1,
            big.0,
            big.1,
            big.0 / small.0,
            big.1 / small.1
        );
        Some((small, big))
    };
    println!(
        "== S with STORAGE_SYNCHRONOUS_COMMIT=off vs the default (on), both crawls, {} pairs in ABBA order",
        args.pairs
    );
    let sync = compare::s_pairs(
        args.pairs,
        ["synchronous_commit on", "synchronous_commit off"],
        async |off, pair| {
            let options = SOptions {
                sync_off: off,
                ..SOptions::default()
            };
            let tag = format!("y{pair}{}", u8::from(off));
            compare::s_run(&env, &admin, &mut conn, &tag, &topic2, options).await
        },
    )
    .await?;
    let sync_commit = sync.medians();
    println!(
        "   medians: on {:.0} / {:.0}, off {:.0} / {:.0} rows/s: off/on = {:.2} / {:.2} ×",
        sync_commit.0.0,
        sync_commit.0.1,
        sync_commit.1.0,
        sync_commit.1.1,
        sync_commit.1.0 / sync_commit.0.0,
        sync_commit.1.1 / sync_commit.0.1
    );
    let writers = writers::compare(&env, &admin, &mut conn, &topic2, args.pairs).await?;
    println!(
        "   medians: 1 writer {:.0} / {:.0}, 2 writers {:.0} / {:.0} rows/s: 2/1 = {:.2} / {:.2} ×; \
         S/U = {:.2} (1) / {:.2} (2), S_update/U_update = {:.2} (1) / {:.2} (2)",
        writers.one.0,
        writers.one.1,
        writers.two.0,
        writers.two.1,
        writers.two.0 / writers.one.0,
        writers.two.1 / writers.one.1,
        writers.one.0 / u,
        writers.two.0 / u,
        writers.one.1 / u_update,
        writers.two.1 / u_update,
    );
    let phases = runlog::phase_medians_ms(&s_main.insert.batches, BATCH as u64);
    println!(
        "   per batch (median of full batches, first S run): {}",
        runlog::PHASES
            .iter()
            .zip(phases)
            .map(|(n, v)| format!("{n} {v:.2} ms"))
            .collect::<Vec<_>>()
            .join(", ")
    );

    let cost = if args.quick {
        None
    } else {
        println!(
            "== metrics cost: the same drain with SLUICE_HTTP_ADDR on and /metrics scraped every second, \
             alternated with the endpoint off ({} pairs in ABBA order, medians compared)",
            cost::COST_ROUNDS
        );
        let cost = cost::metrics_cost(&env, &admin, &mut conn).await?;
        println!(
            "   medians: endpoint off {:.0} rows/s, on and scraped {:.0} rows/s ({} scrapes): on/off = {:.3}, CPU on/off = {:.3}",
            cost.b.rate(),
            cost.a.rate(),
            cost.scrapes,
            cost.rate_ratio(),
            cost.cpu_ratio()
        );
        Some(cost)
    };

    let baseline = match &args.baseline_sluice {
        None => None,
        Some(exe) => Some(baseline(&env, &admin, &mut conn, exe).await?),
    };

    println!(
        "== latency isolation: network-metrics every {:.0} ms while the reviews backlog drains",
        1000.0 / args.metrics_rate
    );
    sqlx::raw_sql("TRUNCATE reviews").execute(&mut conn).await?;
    let probe = latency::Probe::new(
        &env.settings,
        &env.url,
        &app_names(&config.app_prefix, args.apps),
        args.metrics_rate,
    )?;
    let lat_run = drain(
        &env,
        &admin,
        "lat",
        &[("STORAGE_PIPELINES", "reviews,network-metrics")],
        Some(&probe),
    )
    .await?;
    let lat = probe.finish().await?;
    let s2 = lat_run.drain;
    println!(
        "   reviews {s2:.0} rows/s; network-metrics over {} messages: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        lat.count, lat.p50, lat.p99, lat.max
    );
    let rss_kb = s_rss_kb.max(lat_run.rss_kb);

    let steady_count =
        usize::try_from(args.steady_rate.saturating_mul(args.steady_seconds)).unwrap_or(usize::MAX);
    println!(
        "== steady load: {} reviews/s for {} s into a fresh topic while `sluice run` keeps up",
        args.steady_rate, args.steady_seconds
    );
    sqlx::raw_sql("TRUNCATE reviews").execute(&mut conn).await?;
    let steady = steady::measure(
        &env,
        &admin,
        &records[..steady_count.min(records.len())],
        args.steady_rate,
        0,
    )
    .await?;
    let backlog_us = cpu_insert * 1e6 / records.len().max(1) as f64;
    println!(
        "   {} records: {:.1} µs of `sluice run` CPU per record ({:.1} µs draining a backlog), {:.1} records per transaction",
        steady.records,
        steady.cpu_us_per_record(),
        backlog_us,
        steady.records_per_batch()
    );

    println!(
        "== restart: SIGKILL of `sluice run` mid-drain, restart, time to the first committed batch"
    );
    sqlx::raw_sql("TRUNCATE reviews").execute(&mut conn).await?;
    let restart = restart::measure(&env, !args.quick).await?;
    println!(
        "   static membership (default): {:.2} s; dynamic membership (STORAGE_INSTANCE_ID=off, baseline): {}",
        restart.static_s,
        restart
            .dynamic_s
            .map_or("not measured (--quick)".to_owned(), |d| format!("{d:.2} s"))
    );

    let outbox = if args.quick {
        None
    } else {
        println!("== outbox: `sluice-lab bench outbox` with its defaults");
        Some(outbox::phase(&settings.database_url, &settings.kafka).await?)
    };

    let u_main = u_pairs
        .first()
        .cloned()
        .ok_or_else(|| anyhow!("no U run"))?;
    let figures = report::Figures {
        u,
        u_update,
        u_one,
        u_two,
        l,
        k,
        s,
        s_update,
        pair_ratios,
        cpu: [cpu_insert, cpu_update],
        with_startup,
        phases,
        batch_idea,
        writers,
        sync_commit,
        steady,
    };
    report::report(
        args,
        &figures,
        &lat,
        rss_kb,
        s2,
        &restart,
        cost.as_ref(),
        baseline.as_ref(),
        outbox.as_ref(),
    )?;
    let svg_path = args.out.with_extension("svg");
    let svg = chart::render(
        &format!(
            "sluice bench: {} reviews, S (sluice run) next to U (upsert, no Kafka) and L (COPY)",
            args.reviews
        ),
        &report::machine(),
        &[
            chart::Series {
                label: format!("S, sluice run ({s:.0} rows/s median)"),
                colour: "#1f77b4",
                points: chart::rate_series(&s_main.insert.timeline, 0.25),
            },
            chart::Series {
                label: format!("U, upsert ({u:.0})"),
                colour: "#ff7f0e",
                points: chart::rate_series(&u_main.timeline, 0.25),
            },
            chart::Series {
                label: format!("L, COPY ({l:.0})"),
                colour: "#2ca02c",
                points: vec![(0.0, l), (l_seconds, l)],
            },
        ],
        &lat.samples,
    );
    std::fs::write(&svg_path, svg)?;
    println!("SVG: {}", svg_path.display());
    for t in [&topic2] {
        admin.delete_topic(t).await?;
    }
    teardown(settings, &env, &admin, &mut conn).await
}

/// The latency isolation phase alone, `runs` times: per run the reviews drain's rate and
/// CPU and the network-metrics percentiles, with the machine's load before it.
async fn latency_only(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    args: &BenchArgs,
    app_prefix: &str,
    runs: usize,
) -> Result<(), Failure> {
    println!(
        "== latency isolation, {runs} runs: network-metrics every {:.0} ms while the reviews backlog drains",
        1000.0 / args.metrics_rate
    );
    println!(
        "| run | load (1 min) | reviews rows/s | sluice CPU s | messages | p50 ms | p99 ms | max ms |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for run in 0..runs {
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let load = load.split_whitespace().next().unwrap_or("?").to_owned();
        sqlx::raw_sql("TRUNCATE reviews")
            .execute(&mut *conn)
            .await?;
        sqlx::raw_sql("CHECKPOINT").execute(&mut *conn).await?;
        let probe = latency::Probe::new(
            &env.settings,
            &env.url,
            &app_names(app_prefix, args.apps),
            args.metrics_rate,
        )?;
        let drained = drain(
            env,
            admin,
            &format!("lat{run}"),
            &[("STORAGE_PIPELINES", "reviews,network-metrics")],
            Some(&probe),
        )
        .await?;
        let lat = probe.finish().await?;
        println!(
            "| {} | {load} | {:.0} | {:.2} | {} | {:.1} | {:.1} | {:.1} |",
            run + 1,
            drained.drain,
            drained.cpu_s,
            lat.count,
            lat.p50,
            lat.p99,
            lat.max
        );
    }
    Ok(())
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

const FIXTURE: &str = include_str!("../../../../fixtures/applications.sql");

async fn setup(settings: &Settings, id: &str, args: &BenchArgs) -> Result<Env, Failure> {
    let mut admin_conn = sluice_postgres::connect(&settings.database_url, "bench")
        .await
        .context("DATABASE_URL")?;
    let schema = id.to_owned();
    sqlx::raw_sql(&format!("CREATE SCHEMA {schema}"))
        .execute(&mut admin_conn)
        .await?;
    let separator = if settings.database_url.contains('?') {
        '&'
    } else {
        '?'
    };
    let url = format!(
        "{}{separator}options=-c%20search_path%3D{schema}",
        settings.database_url
    );
    let mut conn = sluice_postgres::connect(&url, "bench").await?;
    sqlx::raw_sql(FIXTURE).execute(&mut conn).await?;
    sqlx::query("INSERT INTO apps_registry_application (package_name) SELECT unnest($1::text[])")
        .bind(app_names(&format!("com.{id}"), args.apps))
        .execute(&mut conn)
        .await?;
    sluice_postgres::migrate(&mut conn, "apps_registry_application").await?;
    let vars: BTreeMap<String, String> = [
        (
            "KAFKA_BOOTSTRAP_SERVERS".to_owned(),
            settings.kafka.bootstrap_servers.clone(),
        ),
        ("DATABASE_URL".to_owned(), url.clone()),
        (
            "STORAGE_PIPELINES".to_owned(),
            "reviews,network-metrics".into(),
        ),
        (
            PipelineKind::Reviews.topic_variable(),
            format!("{id}-reviews"),
        ),
        (
            PipelineKind::NetworkMetrics.topic_variable(),
            format!("{id}-network-metrics"),
        ),
        ("STORAGE_GROUP_PREFIX".to_owned(), id.to_owned()),
    ]
    .into_iter()
    .collect();
    let settings = Settings::from_map(&vars).map_err(Failure::config)?;
    Ok(Env {
        sluice: crate::sluice_exe()?,
        id: id.to_owned(),
        schema,
        url,
        settings,
    })
}

/// This build's reviews drain against `exe`'s, in ABBA pairs (`--baseline-sluice`).
async fn baseline(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    exe: &Path,
) -> Result<report::Baseline, Failure> {
    if !exe.is_file() {
        return Err(Failure::config(anyhow!(
            "--baseline-sluice {}: no such file",
            exe.display()
        )));
    }
    println!(
        "== baseline: the same drain by this build and by {} ({} pairs in ABBA order, medians compared)",
        exe.display(),
        cost::COST_ROUNDS
    );
    let base_env = Env {
        sluice: exe.to_path_buf(),
        ..env.clone()
    };
    let this = cost::Side {
        label: "this",
        env,
        scraped: false,
    };
    let base = cost::Side {
        label: "baseline",
        env: &base_env,
        scraped: false,
    };
    let compared = cost::compare_sides(admin, conn, &this, &base, cost::COST_ROUNDS).await?;
    println!(
        "   medians: this {:.0} rows/s, baseline {:.0} rows/s: this/baseline = {:.3}, CPU this/baseline = {:.3}",
        compared.a.rate(),
        compared.b.rate(),
        compared.rate_ratio(),
        compared.cpu_ratio()
    );
    Ok(report::Baseline {
        exe: exe.display().to_string(),
        compared,
    })
}

async fn teardown(
    settings: &Settings,
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
) -> Result<(), Failure> {
    for p in &env.settings.pipelines {
        admin.delete_topic(&p.topic).await?;
    }
    let mut admin_conn = sluice_postgres::connect(&settings.database_url, "bench").await?;
    sqlx::raw_sql(&format!("DROP SCHEMA {} CASCADE", env.schema))
        .execute(&mut admin_conn)
        .await?;
    let _ = conn;
    Ok(())
}

fn count_and_drop(
    kafka: &sluice_core::KafkaClientSettings,
    topic: &str,
    group: &str,
    expected: usize,
) -> Result<f64, Failure> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = sluice_kafka::config::admin_config(kafka)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("partition.assignment.strategy", "cooperative-sticky")
        .create()?;
    consumer.subscribe(&[topic])?;
    let mut seen = 0usize;
    let mut started: Option<Instant> = None;
    let deadline = Instant::now() + Duration::from_secs(600);
    while seen < expected {
        if let Some(Ok(_message)) = consumer.poll(Duration::from_millis(100)) {
            started.get_or_insert_with(Instant::now);
            seen += 1;
        }
        if Instant::now() > deadline {
            return Err(anyhow!("K saw {seen} of {expected} records").into());
        }
    }
    Ok(rate(seen, started.map_or(Duration::ZERO, |s| s.elapsed())))
}
