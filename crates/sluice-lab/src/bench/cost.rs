//! The metrics cost: the reviews drain with the metrics endpoint on (and scraped every
//! second) against off, in ABBA pairs, medians and CPU time compared.

use super::{Drained, Env, compare, drain, median, scrape};
use crate::Failure;
use anyhow::anyhow;
use sluice_kafka::Admin;
use sqlx::PgConnection;
use std::time::Duration;

/// The reviews drain with the metrics endpoint off and on (scraped every second).
pub(super) struct MetricsCost {
    /// Rows/s of each run with the endpoint off.
    pub(super) off_runs: Vec<f64>,
    /// Rows/s of each run with the endpoint on and scraped.
    pub(super) on_runs: Vec<f64>,
    /// Median rows/s with the endpoint off.
    pub(super) off: f64,
    /// Median rows/s with the endpoint on and scraped.
    pub(super) on: f64,
    /// Scrapes that got a body, over all runs.
    pub(super) scrapes: u64,
    /// CPU seconds of `sluice run` per run, off and on: far less sensitive than the rate to
    /// other work on the machine.
    pub(super) off_cpu: Vec<f64>,
    pub(super) on_cpu: Vec<f64>,
}

/// Runs of each side: enough that one disturbed drain does not decide the median.
pub(super) const COST_ROUNDS: usize = 4;

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
    compare::checkpoint(conn).await;
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
pub(super) async fn metrics_cost(
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
