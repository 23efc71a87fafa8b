//! The outbox bench's latency phase: one idle dispatcher, events enqueued one per
//! transaction at a paced rate; per event `published_at − created_at`, both PostgreSQL's
//! clock.

use super::{Env, LATENCY_TYPE, OutboxBenchArgs, WARM_UP, event};
use crate::Failure;
use anyhow::anyhow;
use sluice_dispatch::Dispatcher;
use sluice_outbox::enqueue;
use sqlx::{Connection, PgConnection};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The latency phase's numbers, milliseconds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Latency {
    pub(super) count: i64,
    pub(super) enqueue_per_second: f64,
    pub(super) p50: f64,
    pub(super) p99: f64,
    pub(super) max: f64,
}

/// The latency phase: after a warm-up, events enqueued at `--latency-rate` by
/// `--latency-writers` connections; the commit → ack percentiles.
pub(super) async fn latency(env: &Env, args: &OutboxBenchArgs) -> Result<Latency, Failure> {
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
