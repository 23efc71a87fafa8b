//! `sluice demo`: the main job on the local stack, start to finish.
//!
//! Registers the simulated apps, migrates, ensures topics, starts `sluice run` as a child
//! process, produces one crawl (app-stats for every app, a burst of reviews) while the
//! analyzer sends 50 network-metrics messages a second, waits until the crawl is stored,
//! stops the analyzer, waits for its last messages, stops the consumer with SIGTERM, prints
//! a report and checks it: every expected row present, no row more, one dead letter per
//! poison message. Running it again produces the next crawl: the same reviews with more
//! thumbs-up, so the second report shows updates and skips, not duplicates.
//!
//! "Stored" is read from PostgreSQL's offsets (the stored lag of `sluice lag`), not from
//! Kafka's committed offsets: Kafka's commit follows each batch's transaction, so on the
//! analyzer's live topic Kafka's lag trails by the batch in flight and may never read 0.
//! The whole demo has a deadline (`--timeout`): a demo that cannot finish fails, naming what
//! was left.

use super::produce::{bar, send_all};
use crate::Failure;
use anyhow::{Context, anyhow};
use chrono::{DateTime, Utc};
use clap::Args;
use serde_json::Value;
use sluice_core::PipelineKind;
use sluice_core::Settings;
use sluice_kafka::{Admin, ResilientProducer};
use sluice_loadgen::{
    AnalyzerConfig, CrawlerConfig, Expect, Generated, analysis, app_names, app_stats_for_crawl,
    reviews_for_crawl,
};
use sqlx::PgConnection;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Options of `sluice demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Number of apps.
    #[arg(long, default_value_t = 3000)]
    apps: usize,
    /// Reviews per crawl.
    #[arg(long, default_value_t = 200_000)]
    reviews: usize,
    /// Seconds between two network-metrics messages during the burst (50 a second: a
    /// burst of a few seconds gives the latency's p99 a few hundred samples).
    #[arg(long, default_value_t = 0.02)]
    metrics_interval: f64,
    /// Fraction of poison messages among the reviews.
    #[arg(long, default_value_t = 0.0005)]
    poison: f64,
    /// Where the consumer's JSON log goes.
    #[arg(long, default_value = ".stack/demo-run.log")]
    log: PathBuf,
    /// Run even though DATABASE_URL is not the local stack's: the demo writes fixture apps
    /// and test data into whatever database it is given.
    #[arg(long)]
    yes_this_database: bool,
    /// Seconds the whole demo may take (from its start to the report) before it stops the
    /// consumer and fails.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
}

/// The fewest latency samples whose 99th percentile the report prints.
const MIN_P99_SAMPLES: i64 = 100;

/// The local stack's PostgreSQL port when `SLUICE_PG_PORT` is not set (`scripts/stack`).
const LOCAL_STACK_PORT: u16 = 54329;

/// Whether `url` points at the local stack: a loopback host on the stack's port.
fn is_local_stack(url: &str, port: u16) -> bool {
    sluice_core::settings::database_host_port(url).is_some_and(|(host, url_port)| {
        matches!(host, "127.0.0.1" | "localhost" | "[::1]") && url_port.parse::<u16>() == Ok(port)
    })
}

const APP_PREFIX: &str = "com.sluice.demo";
const FIXTURE: &str = include_str!("../../../fixtures/applications.sql");

/// Entry point.
pub fn run(args: &DemoArgs) -> Result<(), Failure> {
    let settings = super::settings()?;
    let port = std::env::var("SLUICE_PG_PORT")
        .ok()
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or(LOCAL_STACK_PORT);
    if !args.yes_this_database && !is_local_stack(&settings.database_url, port) {
        return Err(Failure::config(anyhow!(
            "DATABASE_URL ({}) is not the local stack's (127.0.0.1:{port}); the demo writes \
             fixture apps and test data into it. Pass --yes-this-database to run it there \
             anyway",
            sluice_core::untrusted::redact_url(&settings.database_url)
        )));
    }
    super::runtime()?.block_on(demo(&settings, args))
}

async fn demo(settings: &Settings, args: &DemoArgs) -> Result<(), Failure> {
    let deadline = Deadline(
        Instant::now() + Duration::from_secs(args.timeout),
        args.timeout,
    );
    let mut conn = sluice_postgres::connect(&settings.database_url, "demo")
        .await
        .context("DATABASE_URL")?;
    println!("== 1. applications table (fixture) and {} apps", args.apps);
    sqlx::raw_sql(FIXTURE).execute(&mut conn).await?;
    let apps = app_names(APP_PREFIX, args.apps);
    sqlx::query(
        "INSERT INTO apps_registry_application (package_name) SELECT unnest($1::text[])
         ON CONFLICT (package_name) DO NOTHING",
    )
    .bind(&apps)
    .execute(&mut conn)
    .await?;
    println!("== 2. migrations");
    super::migrate::apply(settings, true).await?;
    println!("== 3. topics");
    let admin = Admin::new(&settings.kafka, Duration::from_secs(30))?;
    for p in &settings.pipelines {
        admin
            .ensure_topic(&p.topic, super::topics::PARTITIONS)
            .await?;
    }
    let crawl = next_crawl(&mut conn).await?;
    let started_at = Utc::now();

    println!(
        "== 4. storage consumer (sluice run), log in {}",
        args.log.display()
    );
    let mut child = spawn_consumer(&args.log)?;
    let consumer_pid = child.id();

    println!(
        "== 5. crawl {crawl}: app-stats for {} apps, {} reviews, network-metrics every {} s",
        args.apps, args.reviews, args.metrics_interval
    );
    let config = CrawlerConfig {
        apps: args.apps,
        reviews: args.reviews,
        crawl,
        app_prefix: APP_PREFIX.into(),
        poison_fraction: args.poison,
        ..CrawlerConfig::default()
    };
    let mut records = app_stats_for_crawl(&config);
    records.extend(reviews_for_crawl(&config));
    let expected = Expected::before(&mut conn, &records).await?;
    // Measure from a consumer that is in its groups, not from its start-up.
    wait_for_members(settings, &admin, &mut child, &args.log).await?;
    let producer = ResilientProducer::new(&settings.kafka, "sluice-demo")?;
    // The analyzer runs on its own thread so the burst's producer cannot starve it.
    let analyzer_stop = Arc::new(AtomicBool::new(false));
    let analyzer_go = Arc::new(AtomicBool::new(false));
    let analyzer = {
        let (settings, apps) = (settings.clone(), apps.clone());
        let (stop, go) = (Arc::clone(&analyzer_stop), Arc::clone(&analyzer_go));
        let interval = args.metrics_interval;
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            match runtime {
                Ok(rt) => rt.block_on(analyzer_loop(settings, apps, interval, crawl, stop, go)),
                Err(error) => {
                    eprintln!("analyzer: {error}");
                    0
                }
            }
        })
    };
    // The latency figures start from a warm path: the analyzer's warm-up message (dated
    // before the run, so the report leaves it out) has gone all the way into PostgreSQL.
    wait_for_warm_up(
        &mut conn,
        &analyzer_config(apps.clone(), crawl),
        &mut child,
        &args.log,
    )
    .await?;
    analyzer_go.store(true, Ordering::Relaxed);
    let produced_bar = bar(records.len() as u64, "produce", false);
    send_all(settings, &producer, &records, 0, &produced_bar).await?;
    produced_bar.finish();

    println!(
        "== 6. waiting until the crawl is stored (PostgreSQL's offsets), then the analyzer's \
         last messages"
    );
    let drain = bar(0, "consume", false);
    let mut analyzer = Some(analyzer);
    let mut analyzed = None;
    loop {
        if let Some(status) = child.try_wait()? {
            return Err(anyhow!(
                "the consumer exited early with {status}; see {}",
                args.log.display()
            )
            .into());
        }
        let groups = super::lag::collect_stored(settings, &admin).await?;
        let (burst_left, metrics_left) = stored_lag(&groups);
        let end: i64 = groups
            .iter()
            .flat_map(|g| &g.partitions)
            .map(|p| p.end)
            .sum();
        drain.set_length(end.max(0) as u64);
        drain.set_position((end - burst_left - metrics_left).max(0) as u64);
        if let Some(thread) = analyzer.take_if(|_| burst_left == 0) {
            // The burst is stored: stop the analyzer, then wait for its last messages.
            analyzer_stop.store(true, Ordering::Relaxed);
            analyzed = Some(thread.join().unwrap_or(0));
        } else if analyzer.is_none() && metrics_left == 0 {
            break;
        }
        // On an error, dropping `child` ends the consumer the demo gives up on.
        deadline.check(&format!(
            "{burst_left} records of the crawl and {metrics_left} of the analyzer not stored"
        ))?;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drain.finish();
    let peak_rss_kb = peak_rss_kb(consumer_pid);

    println!("== 7. SIGTERM to the consumer");
    let status = stop(&mut child)?;
    if !status.success() {
        return Err(anyhow!("the consumer exited with {status} after SIGTERM").into());
    }
    report(&mut conn, args, crawl, started_at, peak_rss_kb).await?;
    expected
        .check(&mut conn, started_at, analyzed.unwrap_or(0), &args.log)
        .await
}

/// The consumer's "pipeline totals" line for `pipeline` in its JSON log: (inserted, updated).
fn pipeline_totals(log: &std::path::Path, pipeline: &str) -> Option<(i64, i64)> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|e| e["message"] == "pipeline totals" && e["pipeline"] == pipeline)
        .and_then(|e| Some((e["inserted"].as_i64()?, e["updated"].as_i64()?)))
}

/// The demo's deadline: the instant, and the seconds it was set from (for the message).
struct Deadline(Instant, u64);

impl Deadline {
    /// An error naming `left` once the deadline has passed.
    fn check(&self, left: &str) -> Result<(), Failure> {
        if Instant::now() > self.0 {
            return Err(anyhow!(
                "the demo did not finish within {} s (--timeout): {left}",
                self.1
            )
            .into());
        }
        Ok(())
    }
}

/// (records of the crawl's topics, records of the analyzer's topic) not yet stored.
fn stored_lag(groups: &[super::lag::GroupLag]) -> (i64, i64) {
    let metrics = PipelineKind::NetworkMetrics.name();
    groups.iter().fold((0, 0), |(burst, live), g| {
        if g.pipeline == metrics {
            (burst, live + g.total_stored_lag)
        } else {
            (burst + g.total_stored_lag, live)
        }
    })
}

/// What one crawl must leave in PostgreSQL, and what was there before it.
struct Expected {
    /// The review ids the crawl sends as rows.
    review_ids: Vec<String>,
    /// How many of them were stored before (an earlier crawl).
    reviews_present: i64,
    /// Rows of `reviews`, `app_stats` and dead letters before the crawl.
    reviews: i64,
    app_stats: i64,
    dead_letters: i64,
    /// App-stats rows the crawl sends (each a new crawl time) and its poison messages.
    new_app_stats: i64,
    poison: i64,
}

impl Expected {
    async fn before(conn: &mut PgConnection, records: &[Generated]) -> Result<Self, Failure> {
        let mut review_ids: Vec<String> = records
            .iter()
            .filter(|r| r.pipeline == PipelineKind::Reviews && r.expect == Expect::Row)
            .filter_map(|r| serde_json::from_slice::<Value>(r.payload.as_deref()?).ok())
            .filter_map(|v| v.get("review_id")?.as_str().map(str::to_owned))
            .collect();
        review_ids.sort_unstable();
        review_ids.dedup();
        let count = |pipeline: PipelineKind, pick: fn(&Expect) -> bool| {
            records
                .iter()
                .filter(|r| r.pipeline == pipeline && pick(&r.expect))
                .count() as i64
        };
        let new_app_stats = count(PipelineKind::AppStats, |e| *e == Expect::Row);
        let poison = count(PipelineKind::AppStats, |e| {
            matches!(e, Expect::DeadLetter(_))
        }) + count(PipelineKind::Reviews, |e| {
            matches!(e, Expect::DeadLetter(_))
        });
        let reviews_present = Self::reviews_present(conn, &review_ids).await?;
        let (reviews, app_stats, dead_letters) = Self::counts(conn).await?;
        Ok(Self {
            review_ids,
            reviews_present,
            reviews,
            app_stats,
            dead_letters,
            new_app_stats,
            poison,
        })
    }

    async fn reviews_present(conn: &mut PgConnection, ids: &[String]) -> Result<i64, Failure> {
        Ok(
            sqlx::query_scalar("SELECT count(*) FROM reviews WHERE review_id = ANY($1::text[])")
                .bind(ids)
                .fetch_one(conn)
                .await?,
        )
    }

    async fn counts(conn: &mut PgConnection) -> Result<(i64, i64, i64), Failure> {
        Ok(sqlx::query_as(
            "SELECT (SELECT count(*) FROM reviews), (SELECT count(*) FROM app_stats),
                    (SELECT count(*) FROM dead_letter_events)",
        )
        .fetch_one(conn)
        .await?)
    }

    /// Prints the checks and fails naming every one that does not hold: a missing or an
    /// extra row, a review inserted or updated more or less than once, a dead letter too many
    /// or too few, an analyzer message not stored.
    async fn check(
        &self,
        conn: &mut PgConnection,
        started_at: DateTime<Utc>,
        analyzed: u64,
        log: &std::path::Path,
    ) -> Result<(), Failure> {
        let present = Self::reviews_present(conn, &self.review_ids).await?;
        let (reviews, app_stats, dead_letters) = Self::counts(conn).await?;
        let metrics: i64 =
            sqlx::query_scalar("SELECT count(*) FROM network_metrics WHERE captured_at >= $1")
                .bind(started_at)
                .fetch_one(&mut *conn)
                .await?;
        let expected_ids = self.review_ids.len() as i64;
        // Each review of the crawl is written once: inserted if new, updated if an earlier
        // crawl stored it; copies and older versions are skipped.
        let (inserted, updated) =
            pipeline_totals(log, PipelineKind::Reviews.name()).unwrap_or((-1, -1));
        let checks = [
            ("reviews of this crawl stored", present, expected_ids),
            (
                "new review rows",
                reviews - self.reviews,
                expected_ids - self.reviews_present,
            ),
            (
                "reviews inserted (consumer)",
                inserted,
                expected_ids - self.reviews_present,
            ),
            ("reviews updated (consumer)", updated, self.reviews_present),
            (
                "new app-stats rows",
                app_stats - self.app_stats,
                self.new_app_stats,
            ),
            (
                "new dead letters",
                dead_letters - self.dead_letters,
                self.poison,
            ),
            (
                "analyzer messages stored",
                metrics,
                i64::try_from(analyzed).unwrap_or(i64::MAX),
            ),
        ];
        println!("\nchecks:");
        let mut failed = Vec::new();
        for (what, got, want) in checks {
            let verdict = if got == want { "ok" } else { "FAILED" };
            println!("  {what:<30} {got:>8} (expected {want:>8})  {verdict}");
            if got != want {
                failed.push(format!("{what}: {got}, expected {want}"));
            }
        }
        if failed.is_empty() {
            return Ok(());
        }
        Err(anyhow!("the demo's checks failed: {}", failed.join("; ")).into())
    }
}

async fn next_crawl(conn: &mut PgConnection) -> Result<u32, Failure> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('app_stats') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await?;
    if !exists {
        return Ok(1);
    }
    let crawls: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT date_trunc('day', crawled_at)) FROM app_stats s
         JOIN apps_registry_application a ON a.id = s.application_id WHERE a.package_name = $1",
    )
    .bind(format!("{APP_PREFIX}.app0"))
    .fetch_one(conn)
    .await?;
    Ok(u32::try_from(crawls).unwrap_or(0) + 1)
}

/// The demo's `sluice run`: a demo that leaves early (an error, its deadline) ends it on drop
/// — SIGTERM, and SIGKILL if it has not exited 10 s later — so no consumer outlives a failed
/// demo and fences the next one's static members.
struct Consumer(Child);

impl std::ops::Deref for Consumer {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Consumer {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        if !matches!(self.0.try_wait(), Ok(None)) {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let grace = Instant::now() + Duration::from_secs(10);
        while Instant::now() < grace {
            if !matches!(self.0.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("sluice run did not stop within 10 s of SIGTERM: killed");
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_consumer(log: &PathBuf) -> Result<Consumer, Failure> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::File::create(log).with_context(|| format!("create {}", log.display()))?;
    let exe = crate::sluice_exe()?;
    Ok(Consumer(
        Command::new(exe)
            .arg("run")
            .env("SLUICE_LOG_FORMAT", "json")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .context("start sluice run")?,
    ))
}

async fn wait_for_members(
    settings: &Settings,
    admin: &Admin,
    child: &mut Child,
    log: &std::path::Path,
) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait()? {
            return Err(anyhow!("the consumer exited with {status}; see {}", log.display()).into());
        }
        let mut joined = true;
        for p in &settings.pipelines {
            joined &= admin.group_members(&p.group)? > 0;
        }
        if joined {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(anyhow!("the consumer did not join its groups within 60 s").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn analyzer_config(apps: Vec<String>, crawl: u32) -> AnalyzerConfig {
    AnalyzerConfig {
        apps,
        seed: u64::from(crawl),
    }
}

/// The analyzer's unmeasured first message.
fn warm_up(config: &AnalyzerConfig) -> sluice_loadgen::Generated {
    analysis(config, u64::MAX, Utc::now() - chrono::Duration::days(1))
}

async fn wait_for_warm_up(
    conn: &mut PgConnection,
    config: &AnalyzerConfig,
    child: &mut Child,
    log: &std::path::Path,
) -> Result<(), Failure> {
    let id = String::from_utf8_lossy(&warm_up(config).key).into_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait()? {
            return Err(anyhow!("the consumer exited with {status}; see {}", log.display()).into());
        }
        let seen: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM network_metrics WHERE analysis_id = $1::uuid)",
        )
        .bind(&id)
        .fetch_one(&mut *conn)
        .await?;
        if seen {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(anyhow!("the analyzer's warm-up message did not land within 60 s").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends the warm-up message, then one analysis every `interval` seconds from `go` to
/// `stop`; returns how many of those were delivered.
async fn analyzer_loop(
    settings: Settings,
    apps: Vec<String>,
    interval: f64,
    crawl: u32,
    stop: Arc<AtomicBool>,
    go: Arc<AtomicBool>,
) -> u64 {
    let Ok(producer) = ResilientProducer::new(&settings.kafka, "sluice-demo-analyzer") else {
        return 0;
    };
    let config = analyzer_config(apps, crawl);
    let hidden = indicatif::ProgressBar::hidden();
    let warm = warm_up(&config);
    if let Err(error) = send_all(
        &settings,
        &producer,
        std::slice::from_ref(&warm),
        0,
        &hidden,
    )
    .await
    {
        eprintln!("analyzer: {:#}", error.error());
    }
    while !go.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut delivered = 0;
    for n in 0.. {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let record = analysis(&config, n, Utc::now());
        match send_all(
            &settings,
            &producer,
            std::slice::from_ref(&record),
            0,
            &hidden,
        )
        .await
        {
            Ok(n) => delivered += n,
            Err(error) => eprintln!("analyzer: {:#}", error.error()),
        }
        tokio::time::sleep(Duration::from_secs_f64(interval.max(0.05))).await;
    }
    delivered
}

/// The consumer's peak resident set (VmHWM), from /proc.
pub fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn stop(child: &mut Child) -> Result<std::process::ExitStatus, Failure> {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    Ok(child.wait()?)
}

async fn report(
    conn: &mut PgConnection,
    args: &DemoArgs,
    crawl: u32,
    started_at: DateTime<Utc>,
    peak_rss_kb: Option<u64>,
) -> Result<(), Failure> {
    println!("\n================ sluice demo report (crawl {crawl}) ================");
    println!("\nrows per table:");
    for (table, n) in sluice_postgres::ops::table_counts(conn).await? {
        println!("  {table:<20} {n:>10}");
    }
    println!("\nthis run, per pipeline (from the consumer's totals):");
    let log = std::fs::read_to_string(&args.log).unwrap_or_default();
    let mut first_review_batch: Option<DateTime<Utc>> = None;
    let mut last_review_batch: Option<DateTime<Utc>> = None;
    let mut review_records = 0u64;
    for line in log.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let field = |k: &str| event.get(k).cloned().unwrap_or(Value::Null);
        match field("message").as_str() {
            Some("pipeline totals") => println!(
                "  {:<16} records {:>7}  inserted {:>7}  updated {:>7}  skipped {:>6}  dead-lettered {:>4}",
                field("pipeline").as_str().unwrap_or("?"),
                field("records"),
                field("inserted"),
                field("updated"),
                field("skipped"),
                field("dead_lettered")
            ),
            Some("batch committed") if field("pipeline").as_str() == Some("reviews") => {
                let at = field("timestamp")
                    .as_str()
                    .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
                    .map(|t| t.with_timezone(&Utc));
                first_review_batch = first_review_batch.or(at);
                last_review_batch = at.or(last_review_batch);
                review_records += field("records").as_u64().unwrap_or(0);
            }
            _ => {}
        }
    }
    println!("\ndead letters by kind (all runs):");
    let kinds = sluice_postgres::ops::dead_letters_by_kind(conn).await?;
    if kinds.is_empty() {
        println!("  none");
    }
    for (topic, kind, n, example) in kinds {
        let example: String = example.chars().take(110).collect();
        println!("  {topic:<16} {kind:<20} {n:>5}  e.g. {example}");
    }
    if let (Some(first), Some(last)) = (first_review_batch, last_review_batch) {
        let secs = (last - first).num_milliseconds().max(1) as f64 / 1000.0;
        println!(
            "\nreviews pipeline: {review_records} records in {secs:.1} s = {:.0} records/s",
            review_records as f64 / secs
        );
    }
    let latency: Option<(f64, f64, f64, i64)> = sqlx::query_as(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), percentile_cont(0.99) WITHIN GROUP (ORDER BY ms),
                max(ms)::float8, count(*)
         FROM (SELECT extract(epoch FROM inserted_at - captured_at)::float8 * 1000 AS ms
               FROM network_metrics WHERE captured_at >= $1) t HAVING count(*) > 0",
    )
    .bind(started_at)
    .fetch_optional(&mut *conn)
    .await?;
    match latency {
        Some((p50, p99, max, n)) if n >= MIN_P99_SAMPLES => println!(
            "network-metrics produce→insert latency over {n} messages during the burst: p50 {p50:.0} ms, p99 {p99:.0} ms, max {max:.0} ms"
        ),
        // Below 100 samples a 99th percentile is only the maximum under another name.
        Some((p50, _, max, n)) => println!(
            "network-metrics produce→insert latency over {n} messages during the burst: p50 {p50:.0} ms, max {max:.0} ms (too few messages for a p99)"
        ),
        None => println!("network-metrics latency: no messages this run"),
    }
    match peak_rss_kb {
        Some(kb) => println!(
            "consumer peak memory (VmHWM): {:.1} MiB",
            kb as f64 / 1024.0
        ),
        None => println!("consumer peak memory: unavailable"),
    }
    println!(
        "\nHow to read it: 'inserted' are new rows; 'updated' are reviews whose newer crawl changed them;"
    );
    println!(
        "'skipped' are re-sent duplicates and older versions (no change); dead letters are poison messages,"
    );
    println!(
        "kept with a reason naming the field. A second `make demo` runs the next crawl: updates, no duplicates."
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_local_stack_is_accepted_without_asking() {
        for (url, local) in [
            ("postgres://sluice@127.0.0.1:54329/sluice", true),
            (
                "postgres://u:p@localhost:54329/sluice?sslmode=disable",
                true,
            ),
            ("postgresql://u@[::1]:54329/db", true),
            ("postgres://u@127.0.0.1:5432/sluice", false),
            ("postgres://u@db.prod.example:54329/sluice", false),
            ("postgres://u@127.0.0.1/sluice", false),
            ("postgres:///sluice?host=/run/postgresql", false),
            ("mysql://u@127.0.0.1:54329/x", false),
        ] {
            assert_eq!(is_local_stack(url, 54329), local, "{url}");
        }
    }
}
