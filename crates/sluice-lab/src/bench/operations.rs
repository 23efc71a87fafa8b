//! The storage bench's phases on sluice in operation rather than its write rate: latency
//! isolation (network-metrics while the reviews backlog drains), steady load, restart and the
//! outbox; with `--latency-runs` and `--steady-runs`, one of them alone, repeated.

use super::drain::{Drained, drain};
use super::{BenchArgs, Env, latency, outbox, restart, steady};
use crate::Failure;
use sluice_kafka::Admin;
use sluice_loadgen::{Generated, app_names};
use sluice_storage::StorageSettings;
use sqlx::PgConnection;

/// The latency isolation phase: the reviews drain with network-metrics probed beside it;
/// the probe's percentiles and the drain.
pub(super) async fn latency(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    args: &BenchArgs,
    app_prefix: &str,
) -> Result<(latency::Summary, Drained), Failure> {
    println!(
        "== latency isolation: network-metrics every {:.0} ms while the reviews backlog drains",
        1000.0 / args.metrics_rate
    );
    sqlx::raw_sql("TRUNCATE reviews")
        .execute(&mut *conn)
        .await?;
    let probe = latency::Probe::new(
        &env.settings,
        &env.url,
        &app_names(app_prefix, args.apps),
        args.metrics_rate,
    )?;
    let lat_run = drain(
        env,
        admin,
        "lat",
        &[("STORAGE_PIPELINES", "reviews,network-metrics")],
        Some(&probe),
    )
    .await?;
    let lat = probe.finish().await?;
    println!(
        "   reviews {:.0} rows/s; network-metrics over {} messages: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        lat_run.drain, lat.count, lat.p50, lat.p99, lat.max
    );
    Ok((lat, lat_run))
}

/// The latency isolation phase alone, `runs` times: per run the reviews drain's rate and
/// CPU and the network-metrics percentiles, with the machine's load before it.
pub(super) async fn latency_only(
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

/// The records the steady-load phase sends: `--steady-rate` × `--steady-seconds`.
fn steady_count(args: &BenchArgs) -> usize {
    usize::try_from(args.steady_rate.saturating_mul(args.steady_seconds)).unwrap_or(usize::MAX)
}

/// The steady-load phase: `sluice run`'s CPU per record at a moderate rate, printed next to
/// the backlog's (`cpu_insert`, the median CPU seconds of a first-crawl drain).
pub(super) async fn steady(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    records: &[Generated],
    args: &BenchArgs,
    cpu_insert: f64,
) -> Result<steady::Steady, Failure> {
    let steady_count = steady_count(args);
    println!(
        "== steady load: {} reviews/s for {} s into a fresh topic while `sluice run` keeps up",
        args.steady_rate, args.steady_seconds
    );
    sqlx::raw_sql("TRUNCATE reviews")
        .execute(&mut *conn)
        .await?;
    let steady = steady::measure(
        env,
        admin,
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
    Ok(steady)
}

/// The steady-load phase alone, `runs` times (`--steady-runs`).
pub(super) async fn steady_only(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    records: &[Generated],
    args: &BenchArgs,
    runs: usize,
) -> Result<(), Failure> {
    let count = steady_count(args).min(records.len());
    println!(
        "== steady load, {runs} runs: {} reviews/s for {} s",
        args.steady_rate, args.steady_seconds
    );
    for run in 0..runs {
        sqlx::raw_sql("TRUNCATE reviews")
            .execute(&mut *conn)
            .await?;
        let steady = steady::measure(env, admin, &records[..count], args.steady_rate, run).await?;
        println!(
            "   run {}: {} records, {:.1} µs of `sluice run` CPU per record, {:.1} records per transaction",
            run + 1,
            steady.records,
            steady.cpu_us_per_record(),
            steady.records_per_batch()
        );
    }
    Ok(())
}

/// The restart phase ([`restart::measure`]; dynamic membership too unless `quick`), printed.
pub(super) async fn restart(
    env: &Env,
    conn: &mut PgConnection,
    quick: bool,
) -> Result<restart::Restart, Failure> {
    println!(
        "== restart: SIGKILL of `sluice run` mid-drain, restart, time to the first committed batch"
    );
    sqlx::raw_sql("TRUNCATE reviews")
        .execute(&mut *conn)
        .await?;
    let restart = restart::measure(env, !quick).await?;
    println!(
        "   static membership (default): {:.2} s; dynamic membership (STORAGE_INSTANCE_ID=off, baseline): {}",
        restart.static_s,
        restart
            .dynamic_s
            .map_or("not measured (--quick)".to_owned(), |d| format!("{d:.2} s"))
    );
    Ok(restart)
}

/// The outbox bench with its defaults ([`outbox::phase`]). `None` in a quick bench.
pub(super) async fn outbox(
    settings: &StorageSettings,
    quick: bool,
) -> Result<Option<serde_json::Value>, Failure> {
    if quick {
        return Ok(None);
    }
    println!("== outbox: `sluice-lab bench outbox` with its defaults");
    Ok(Some(
        outbox::phase(&settings.database_url, &settings.kafka).await?,
    ))
}
