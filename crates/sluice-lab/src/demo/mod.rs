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
//!
//! The steps' parts: [`consumer`] (the `sluice run` child and its log), [`analyzer`] (the
//! network-metrics sender), [`expected`] (the checks) and [`report`].

mod analyzer;
mod consumer;
mod expected;
mod report;

use super::produce::{bar, send_all};
use crate::Failure;
use analyzer::{Analyzer, analyzer_config, wait_for_warm_up};
use anyhow::{Context, anyhow};
use chrono::Utc;
use clap::Args;
use consumer::{spawn_consumer, stop, wait_for_members};
use expected::Expected;
use sluice_core::PipelineKind;
use sluice_kafka::{Admin, ResilientProducer};
use sluice_loadgen::{CrawlerConfig, Generated, app_names, app_stats_for_crawl, reviews_for_crawl};
use sluice_storage::StorageSettings;
use sqlx::PgConnection;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

pub use consumer::peak_rss_kb;

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
const FIXTURE: &str = include_str!("../../../../fixtures/applications.sql");

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

/// The demo's steps in order: set up, start the consumer, produce a crawl with the analyzer
/// beside it, wait until everything is stored, stop the consumer, report and check.
async fn demo(settings: &StorageSettings, args: &DemoArgs) -> Result<(), Failure> {
    let deadline = Deadline(
        Instant::now() + Duration::from_secs(args.timeout),
        args.timeout,
    );
    let mut conn = sluice_postgres::connect(&settings.database_url, "demo")
        .await
        .context("DATABASE_URL")?;
    let (apps, admin) = prepare(settings, &mut conn, args).await?;
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
    let records = crawl_records(args, crawl);
    let expected = Expected::before(&mut conn, &records).await?;
    // Measure from a consumer that is in its groups, not from its start-up.
    wait_for_members(settings, &admin, &mut child, &args.log).await?;
    let producer = ResilientProducer::new(&settings.kafka, "sluice-demo")?;
    // The analyzer runs on its own thread so the burst's producer cannot starve it.
    let analyzer = Analyzer::spawn(settings, &apps, args.metrics_interval, crawl);
    // The latency figures start from a warm path: the analyzer's warm-up message (dated
    // before the run, so the report leaves it out) has gone all the way into PostgreSQL.
    let config = analyzer_config(apps.clone(), crawl);
    wait_for_warm_up(&mut conn, &config, &mut child, &args.log).await?;
    analyzer.go();
    let produced_bar = bar(records.len() as u64, "produce", false);
    send_all(settings, &producer, &records, 0, &produced_bar).await?;
    produced_bar.finish();

    println!(
        "== 6. waiting until the crawl is stored (PostgreSQL's offsets), then the analyzer's \
         last messages"
    );
    let analyzed =
        wait_stored(settings, &admin, &mut child, analyzer, &deadline, &args.log).await?;
    let peak_rss_kb = peak_rss_kb(consumer_pid);

    println!("== 7. SIGTERM to the consumer");
    let status = stop(&mut child)?;
    if !status.success() {
        return Err(anyhow!("the consumer exited with {status} after SIGTERM").into());
    }
    report::report(&mut conn, args, crawl, started_at, peak_rss_kb).await?;
    expected
        .check(&mut conn, started_at, analyzed.unwrap_or(0), &args.log)
        .await
}

/// Steps 1 to 3: the applications fixture and the demo's apps, the migrations, the topics;
/// the apps' names and the admin client.
async fn prepare(
    settings: &StorageSettings,
    conn: &mut PgConnection,
    args: &DemoArgs,
) -> Result<(Vec<String>, Admin), Failure> {
    println!("== 1. applications table (fixture) and {} apps", args.apps);
    sqlx::raw_sql(FIXTURE).execute(&mut *conn).await?;
    let apps = app_names(APP_PREFIX, args.apps);
    sqlx::query(
        "INSERT INTO apps_registry_application (package_name) SELECT unnest($1::text[])
         ON CONFLICT (package_name) DO NOTHING",
    )
    .bind(&apps)
    .execute(&mut *conn)
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
    Ok((apps, admin))
}

/// The crawl's records: app-stats for every app, then the reviews.
fn crawl_records(args: &DemoArgs, crawl: u32) -> Vec<Generated> {
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
    records
}

/// Step 6: waits until the crawl is stored, then stops the analyzer and waits until its
/// messages are stored too; how many it delivered. Fails once the consumer exits or the
/// deadline passes.
async fn wait_stored(
    settings: &StorageSettings,
    admin: &Admin,
    child: &mut Child,
    analyzer: Analyzer,
    deadline: &Deadline,
    log: &Path,
) -> Result<Option<u64>, Failure> {
    let drain = bar(0, "consume", false);
    let mut analyzer = Some(analyzer);
    let mut analyzed = None;
    loop {
        if let Some(status) = child.try_wait()? {
            return Err(anyhow!(
                "the consumer exited early with {status}; see {}",
                log.display()
            )
            .into());
        }
        let groups = super::lag::collect_stored(settings, admin).await?;
        let (burst_left, metrics_left) = stored_lag(&groups);
        let end: i64 = groups
            .iter()
            .flat_map(|g| &g.partitions)
            .map(|p| p.end)
            .sum();
        drain.set_length(end.max(0) as u64);
        drain.set_position((end - burst_left - metrics_left).max(0) as u64);
        if let Some(running) = analyzer.take_if(|_| burst_left == 0) {
            // The burst is stored: stop the analyzer, then wait for its last messages.
            analyzed = Some(running.stop());
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
    Ok(analyzed)
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

/// The crawl this run produces: one more than the days of app-stats the demo's first app has.
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
