//! The outbox bench's throughput phase: N dispatchers start idle on an empty table, a
//! backlog commits in one transaction, and they drain it until every row is PUBLISHED;
//! events/s = count / (last `published_at` − the commit), both PostgreSQL's clock.

use super::{Env, OutboxBenchArgs, PRODUCER_START, event};
use crate::Failure;
use anyhow::anyhow;
use sluice_dispatch::{DispatchTotals, Dispatcher};
use sluice_outbox::enqueue;
use sqlx::{Connection, PgConnection};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The throughput phase's numbers.
#[derive(Debug, Clone, Copy)]
pub(super) struct Throughput {
    pub(super) events: i64,
    pub(super) enqueue_per_second: f64,
    pub(super) seconds: f64,
    pub(super) per_second: f64,
    pub(super) wall_seconds: f64,
    pub(super) first_batch_seconds: f64,
    pub(super) steady_per_second: f64,
    /// The dispatchers' totals added up: batches and where their time went.
    pub(super) phases: DispatchTotals,
}

impl Throughput {
    /// Mean events per batch and mean milliseconds per batch in claim, publish and mark.
    pub(super) fn per_batch(&self) -> (f64, f64, f64, f64) {
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
pub(super) async fn throughput(env: &Env, args: &OutboxBenchArgs) -> Result<Throughput, Failure> {
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
