//! `sluice bench [storage]`: sluice's reviews pipeline measured against baselines in the same run,
//! with the same generated rows, on the real stack (docs/ARCHITECTURE.md#performance). Not a test: it prints a
//! Markdown table and writes a JSON file with the ratios.
//!
//! - U: the same upsert statement, same batches, straight into PostgreSQL (no Kafka);
//! - L: one binary `COPY` of the same rows into an unindexed copy of the table;
//! - K: a count-and-drop rdkafka consumer over the same topic;
//! - S: `sluice run` (a child process), reviews pipeline, produce-all-first then drain;
//! - latency isolation: network-metrics produce → committed (visible) while reviews drain;
//! - the consumer's peak RSS.
//!
//! `sluice bench outbox` measures the outbox dispatcher instead (see [`outbox`]).

mod copy;
mod latency;
mod outbox;
mod restart;
mod scrape;

use super::produce::{bar, send_all};
use crate::Failure;
use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use serde_json::json;
use sluice_core::messages::{Review, decode_review};
use sluice_core::topics::reviews::ReviewsTopic;
use sluice_core::{PipelineKind, Resolved, Settings};
use sluice_kafka::Admin;
use sluice_loadgen::{CrawlerConfig, app_names, reviews_for_crawl};
use sqlx::{Connection, PgConnection};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
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
    /// Network-metrics messages per second during the latency phase.
    #[arg(long, default_value_t = 10.0)]
    metrics_rate: f64,
    /// Where the JSON results go.
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

struct Env {
    id: String,
    schema: String,
    url: String,
    settings: Settings,
}

async fn bench(settings: &Settings, args: &BenchArgs) -> Result<(), Failure> {
    let id = format!("bench{}", std::process::id());
    let env = setup(settings, &id, args).await?;
    println!(
        "== workload: {} reviews over {} apps (one crawl, no duplicates, no poison)",
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
    let mut conn = sluice_postgres::connect(&env.url, "bench")
        .await
        .context("bench schema")?;
    let ids: HashMap<String, i64> =
        sqlx::query_as("SELECT package_name, id FROM apps_registry_application")
            .fetch_all(&mut conn)
            .await?
            .into_iter()
            .collect();
    let rows: Vec<Resolved<Review>> = records
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let message = decode_review(r.payload.as_deref())
                .map_err(|e| anyhow!("generated row {i}: {e}"))?;
            let application_id = *ids
                .get(&message.package_name)
                .ok_or_else(|| anyhow!("unregistered app"))?;
            Ok(Resolved {
                record: i,
                application_id,
                message,
            })
        })
        .collect::<Result<_, anyhow::Error>>()?;
    let bytes: usize = records
        .iter()
        .map(|r| r.payload.as_ref().map_or(0, Vec::len))
        .sum();
    println!(
        "   {} rows, {:.1} MiB of JSON",
        rows.len(),
        bytes as f64 / 1048576.0
    );

    println!("== U: upsert, {BATCH}-row batches, one transaction each, no Kafka");
    let started = Instant::now();
    for chunk in rows.chunks(BATCH) {
        let mut tx = conn.begin().await?;
        sluice_postgres::repo::upsert::<ReviewsTopic>(&mut tx, chunk).await?;
        tx.commit().await?;
    }
    let u = rate(rows.len(), started.elapsed());
    println!("   {u:.0} rows/s");

    println!("== L: binary COPY into an unindexed copy of the table");
    sqlx::raw_sql("CREATE TABLE reviews_copy (LIKE reviews INCLUDING DEFAULTS)")
        .execute(&mut conn)
        .await?;
    let started = Instant::now();
    copy::copy_rows(&mut conn, "reviews_copy", &rows).await?;
    let l = rate(rows.len(), started.elapsed());
    println!("   {l:.0} rows/s");

    println!("== producing the topic (not timed)");
    let topic = env
        .settings
        .pipeline(sluice_core::PipelineKind::Reviews)
        .map(|p| p.topic.clone())
        .unwrap_or_default();
    let admin = Admin::new(&settings.kafka, Duration::from_secs(30))?;
    for p in &env.settings.pipelines {
        admin.ensure_topic(&p.topic, 3).await?;
    }
    let producer = sluice_kafka::ResilientProducer::new(&settings.kafka, "sluice-bench")?;
    let progress = bar(records.len() as u64, "produce", false);
    send_all(&env.settings, &producer, &records, 0, &progress).await?;
    progress.finish();

    println!("== K: count-and-drop rdkafka consumer");
    let k = count_and_drop(&settings.kafka, &topic, &format!("{id}-k"), records.len())?;
    println!("   {k:.0} records/s");

    println!("== S: sluice run (reviews pipeline), drain the backlog");
    sqlx::raw_sql("TRUNCATE reviews").execute(&mut conn).await?;
    let s_run = drain(&env, &admin, "s", &[("STORAGE_PIPELINES", "reviews")], None).await?;
    let s = s_run.drain;
    println!(
        "   {s:.0} rows/s draining ({:.0} rows/s counting the consumer's start-up), peak RSS {:.1} MiB",
        s_run.with_startup,
        s_run.rss_kb as f64 / 1024.0
    );
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM reviews")
        .fetch_one(&mut conn)
        .await?;
    if stored != rows.len() as i64 {
        return Err(anyhow!("S stored {stored} rows, expected {}", rows.len()).into());
    }

    println!(
        "== metrics cost: the same drain with SLUICE_HTTP_ADDR on and /metrics scraped every second, \
         alternated with the endpoint off ({COST_ROUNDS} pairs in ABBA order, medians compared)"
    );
    let cost = metrics_cost(&env, &admin, &mut conn).await?;
    println!(
        "   medians: endpoint off {:.0} rows/s, on and scraped {:.0} rows/s ({} scrapes): on/off = {:.3}",
        cost.off,
        cost.on,
        cost.scrapes,
        cost.on / cost.off
    );

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
    let rss_kb = s_run.rss_kb.max(lat_run.rss_kb);

    println!(
        "== restart: SIGKILL of `sluice run` mid-drain, restart, time to the first committed batch"
    );
    sqlx::raw_sql("TRUNCATE reviews").execute(&mut conn).await?;
    let restart = restart::measure(&env).await?;
    println!(
        "   static membership (default): {:.2} s; dynamic membership (STORAGE_INSTANCE_ID=off, baseline): {:.2} s",
        restart.static_s, restart.dynamic_s
    );

    report(
        args,
        &[
            ("U", u),
            ("L", l),
            ("K", k),
            ("S", s),
            ("S_startup", s_run.with_startup),
        ],
        &lat,
        rss_kb,
        s2,
        &restart,
        &cost,
    )?;
    teardown(settings, &env, &admin, &mut conn).await
}

/// The reviews drain with the metrics endpoint off and on (scraped every second).
struct MetricsCost {
    /// Rows/s of each run with the endpoint off.
    off_runs: Vec<f64>,
    /// Rows/s of each run with the endpoint on and scraped.
    on_runs: Vec<f64>,
    /// Median rows/s with the endpoint off.
    off: f64,
    /// Median rows/s with the endpoint on and scraped.
    on: f64,
    /// Scrapes that got a body, over all runs.
    scrapes: u64,
    /// CPU seconds of `sluice run` per run, off and on: far less sensitive than the rate to
    /// other work on the machine.
    off_cpu: Vec<f64>,
    on_cpu: Vec<f64>,
}

/// Runs of each side: enough that one disturbed drain does not decide the median.
const COST_ROUNDS: usize = 4;

/// One drain for the metrics-cost phase: with the endpoint on (and scraped every second)
/// or off. Returns the drain and the scrapes that got a body.
async fn cost_drain(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    tag: String,
    on: bool,
) -> Result<(Drained, u64), Failure> {
    sqlx::raw_sql("TRUNCATE reviews")
        .execute(&mut *conn)
        .await?;
    if !on {
        let drained = drain(env, admin, &tag, &[("STORAGE_PIPELINES", "reviews")], None).await?;
        return Ok((drained, 0));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let addr = format!("127.0.0.1:{port}");
    let scraper = scrape::Scraper::start(port, Duration::from_secs(1));
    let drained = drain(
        env,
        admin,
        &tag,
        &[
            ("STORAGE_PIPELINES", "reviews"),
            ("SLUICE_HTTP_ADDR", addr.as_str()),
        ],
        None,
    )
    .await;
    let scrapes = scraper.finish().await;
    Ok((drained?, scrapes))
}

/// Alternates on and off in an ABBA order (on-off, off-on, …), so that neither drift of the
/// machine nor the position in a pair favours one side; compares the medians.
async fn metrics_cost(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
) -> Result<MetricsCost, Failure> {
    let (mut off_runs, mut on_runs, mut scrapes) = (vec![], vec![], 0);
    let (mut off_cpu, mut on_cpu) = (vec![], vec![]);
    for round in 0..COST_ROUNDS {
        let order = if round % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for on in order {
            let tag = format!("{}{round}", if on { "m" } else { "o" });
            let (drained, scraped) = cost_drain(env, admin, conn, tag, on).await?;
            scrapes += scraped;
            if on {
                on_runs.push(drained.drain);
                on_cpu.push(drained.cpu_s);
            } else {
                off_runs.push(drained.drain);
                off_cpu.push(drained.cpu_s);
            }
        }
        println!(
            "   pair {} ({}): on {:.0} rows/s, off {:.0} rows/s",
            round + 1,
            if round % 2 == 0 {
                "on first"
            } else {
                "off first"
            },
            on_runs[round],
            off_runs[round]
        );
    }
    if scrapes == 0 {
        return Err(anyhow!("the metrics endpoint was never scraped").into());
    }
    Ok(MetricsCost {
        off: median(&off_runs),
        on: median(&on_runs),
        off_runs,
        on_runs,
        scrapes,
        off_cpu,
        on_cpu,
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
        id: id.to_owned(),
        schema,
        url,
        settings,
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

/// One drain of the reviews backlog by `sluice run`.
#[derive(Debug, Clone, Copy)]
struct Drained {
    /// Rows/s from the first record in the pipeline's hands to lag 0.
    drain: f64,
    /// Rows/s from the group join to lag 0 (includes the consumer's start-up).
    with_startup: f64,
    /// Peak RSS, KiB.
    rss_kb: u64,
    /// CPU time (user + system) the process had used when the backlog was drained, seconds.
    cpu_s: f64,
}

/// The CPU time (user + system) process `pid` has used so far, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (in parentheses, which may contain spaces): state is the
    // 3rd field, utime the 14th and stime the 15th.
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // USER_HZ is 100 on every Linux this runs on.
    Some(ticks / 100.0)
}

/// When the reviews pipeline first had records in hand: the first batch's log time minus
/// the phases it went through after its poll returned.
fn first_data_at(log: &std::path::Path) -> Option<chrono::DateTime<chrono::Utc>> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|e| {
            if e["message"] != "batch committed" || e["pipeline"] != "reviews" {
                return None;
            }
            let at = chrono::DateTime::parse_from_rfc3339(e["timestamp"].as_str()?).ok()?;
            let spent: i64 = ["decode_us", "store_us", "commit_us"]
                .iter()
                .filter_map(|k| e[*k].as_i64())
                .sum();
            Some(at.with_timezone(&chrono::Utc) - chrono::Duration::microseconds(spent))
        })
}

/// Runs `sluice run` with the bench settings under a fresh group prefix until the reviews
/// backlog is drained.
async fn drain(
    env: &Env,
    admin: &Admin,
    tag: &str,
    extra: &[(&str, &str)],
    probe: Option<&latency::Probe>,
) -> Result<Drained, Failure> {
    let prefix = format!("{}-{tag}", env.id);
    let log = PathBuf::from(format!(".stack/bench-{tag}.log"));
    let mut cmd = run_command(env, &prefix, tag, &log)?;
    cmd.envs(extra.iter().copied());
    let mut child = cmd.spawn()?;
    let group = format!("{prefix}.reviews");
    let topic = format!("{}-reviews", env.id);
    let deadline = Instant::now() + Duration::from_secs(60);
    let pipelines = extra
        .iter()
        .find(|(k, _)| *k == "STORAGE_PIPELINES")
        .map_or("reviews", |(_, v)| *v);
    let groups: Vec<String> = pipelines
        .split(',')
        .map(|p| format!("{prefix}.{p}"))
        .collect();
    while groups
        .iter()
        .map(|g| admin.group_members(g))
        .collect::<Result<Vec<_>, _>>()?
        .contains(&0)
    {
        check_alive(&mut child, &log)?;
        if Instant::now() > deadline {
            return Err(anyhow!("sluice run did not join within 60 s").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let started = Instant::now();
    if let Some(probe) = probe {
        probe.start();
    }
    let end: i64 = admin.watermarks(&topic)?.iter().map(|m| m.high).sum();
    loop {
        check_alive(&mut child, &log)?;
        let committed: i64 = admin
            .committed_offsets(&group, &topic)?
            .iter()
            .map(|(_, o)| o.unwrap_or(0))
            .sum();
        if committed >= end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let elapsed = started.elapsed();
    let drained_at = chrono::Utc::now();
    if let Some(probe) = probe {
        probe.stop();
        probe.wait_drained().await?;
    }
    let rss = super::demo::peak_rss_kb(child.id()).unwrap_or(0);
    let cpu_s = cpu_seconds(child.id()).unwrap_or(0.0);
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    let status = child.wait()?;
    if !status.success() {
        return Err(anyhow!("sluice run exited with {status}; see {}", log.display()).into());
    }
    let n = usize::try_from(end).unwrap_or(0);
    let drain_time = first_data_at(&log)
        .and_then(|first| (drained_at - first).to_std().ok())
        .unwrap_or(elapsed);
    Ok(Drained {
        drain: rate(n, drain_time),
        with_startup: rate(n, elapsed),
        rss_kb: rss,
        cpu_s,
    })
}

/// `sluice run` (this executable) with the bench's settings, group prefix `prefix`, its JSON
/// log in `log`.
fn run_command(
    env: &Env,
    prefix: &str,
    tag: &str,
    log: &std::path::Path,
) -> Result<Command, Failure> {
    let mut cmd = Command::new(crate::sluice_exe()?);
    cmd.arg("run")
        .env(
            "KAFKA_BOOTSTRAP_SERVERS",
            &env.settings.kafka.bootstrap_servers,
        )
        .env("DATABASE_URL", &env.url)
        .env(
            PipelineKind::Reviews.topic_variable(),
            format!("{}-reviews", env.id),
        )
        .env(
            PipelineKind::NetworkMetrics.topic_variable(),
            format!("{}-network-metrics", env.id),
        )
        .env("STORAGE_GROUP_PREFIX", prefix)
        .env(
            "STORAGE_HEARTBEAT_DIR",
            format!(".stack/bench-heartbeat-{tag}"),
        )
        .env("SLUICE_LOG_FORMAT", "json")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log)?);
    Ok(cmd)
}

fn check_alive(child: &mut Child, log: &std::path::Path) -> Result<(), Failure> {
    match child.try_wait()? {
        Some(status) => Err(anyhow!(
            "sluice run exited early with {status}; see {}",
            log.display()
        )
        .into()),
        None => Ok(()),
    }
}

fn report(
    args: &BenchArgs,
    rates: &[(&str, f64)],
    lat: &latency::Summary,
    rss_kb: u64,
    s_with_metrics: f64,
    restart: &restart::Restart,
    cost: &MetricsCost,
) -> Result<(), Failure> {
    let get = |name: &str| {
        rates
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0.0, |(_, r)| *r)
    };
    let (s, u, l, k) = (get("S"), get("U"), get("L"), get("K"));
    let s_startup = get("S_startup");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let rss_mib = rss_kb as f64 / 1024.0;
    println!(
        "\n## sluice bench — {} reviews, {cores} cores\n",
        args.reviews
    );
    println!("| measure | value | ratio / target | met |");
    println!("|---|---|---|---|");
    println!("| U: upsert, no Kafka | {u:.0} rows/s | | |");
    println!("| L: binary COPY, unindexed | {l:.0} rows/s | | |");
    println!("| K: count-and-drop consumer | {k:.0} records/s | | |");
    println!(
        "| S: sluice reviews pipeline, draining | {s:.0} rows/s | S/U = {:.2} (target ≥ 0.60) | {} |",
        s / u,
        yes(s >= 0.6 * u)
    );
    println!("| | | S/L = {:.2} | |", s / l);
    println!("| | | S/K = {:.2} | |", s / k);
    println!(
        "| S counting the consumer's start-up (join, first fetch) | {s_startup:.0} rows/s | {:.2} × U | |",
        s_startup / u
    );
    println!("| reviews while network-metrics flows | {s_with_metrics:.0} rows/s | | |");
    let cost_ratio = cost.on / cost.off;
    let cpu_ratio = median(&cost.on_cpu) / median(&cost.off_cpu).max(1e-9);
    println!(
        "| `sluice run` CPU time per drain, endpoint on and scraped vs off (medians) | {:.2} s vs {:.2} s | {cpu_ratio:.3} × off | |",
        median(&cost.on_cpu),
        median(&cost.off_cpu)
    );
    println!(
        "| reviews with /metrics on and scraped every 1 s ({} scrapes; median of {COST_ROUNDS}) | {:.0} rows/s | {cost_ratio:.3} × off ({:.0} rows/s, median of {COST_ROUNDS}, ABBA order); target ≥ 0.97 | {} |",
        cost.scrapes,
        cost.on,
        cost.off,
        yes(cost_ratio >= 0.97)
    );
    println!(
        "| network-metrics p50 / p99 / max | {:.1} / {:.1} / {:.1} ms ({} msgs) | p99 ≤ 100 ms | {} |",
        lat.p50,
        lat.p99,
        lat.max,
        lat.count,
        yes(lat.p99 <= 100.0)
    );
    println!(
        "| consumer peak RSS | {rss_mib:.1} MiB | ≤ 150 MB | {} |",
        yes(rss_mib * 1.048_576 <= 150.0)
    );
    println!(
        "| restart: SIGKILL + restart → first committed batch | {:.2} s | ≤ 5 s (dynamic membership: {:.2} s) | {} |",
        restart.static_s,
        restart.dynamic_s,
        yes(restart.static_s <= 5.0)
    );
    let results = json!({
        "reviews": args.reviews,
        "cores": cores,
        "rows_per_second": {"U": u, "L": l, "K": k, "S": s, "S_including_startup": s_startup, "S_with_network_metrics": s_with_metrics},
        "ratios": {"S/U": s / u, "S/L": s / l, "S/K": s / k, "S_metrics_on/S_metrics_off": cost_ratio},
        "metrics_cost": {"off_rows_per_second": cost.off, "on_scraped_rows_per_second": cost.on, "off_runs": cost.off_runs, "on_runs": cost.on_runs, "off_cpu_seconds": cost.off_cpu, "on_cpu_seconds": cost.on_cpu, "cpu_on/off": cpu_ratio, "scrapes": cost.scrapes},
        "network_metrics_latency_ms": {"p50": lat.p50, "p99": lat.p99, "max": lat.max, "count": lat.count},
        "peak_rss_mib": rss_mib,
        "restart_to_first_batch_s": restart.static_s,
        "restart_to_first_batch_dynamic_membership_s": restart.dynamic_s,
        "targets": {"S>=0.6U": s >= 0.6 * u, "p99<=100ms": lat.p99 <= 100.0, "rss<=150MB": rss_mib * 1.048_576 <= 150.0, "metrics_on>=0.97off": cost_ratio >= 0.97},
    });
    std::fs::write(&args.out, serde_json::to_string_pretty(&results)?)?;
    println!("\nJSON: {}", args.out.display());
    Ok(())
}

fn yes(ok: bool) -> &'static str {
    if ok { "yes" } else { "NO" }
}
