//! Two configurations of the reviews drain compared in ABBA pairs (medians and CPU time):
//! the metrics cost (the endpoint on and scraped every second against off) and, with
//! `--baseline-sluice`, this build of `sluice run` against an earlier one.

use super::{Drained, Env, compare, drain, median, scrape};
use crate::Failure;
use anyhow::anyhow;
use sluice_kafka::Admin;
use sqlx::PgConnection;
use std::time::Duration;

/// Runs of each side: enough that one disturbed drain does not decide the median.
pub(super) const COST_ROUNDS: usize = 4;

/// One side of a comparison: the environment (which `sluice` runs) and whether its
/// metrics endpoint is on and scraped every second.
pub(super) struct Side<'a> {
    /// Its name in the output.
    pub(super) label: &'static str,
    /// Its environment; `Env::sluice` is the executable.
    pub(super) env: &'a Env,
    /// The metrics endpoint on, scraped every second.
    pub(super) scraped: bool,
}

/// What each side gave, in run order.
#[derive(Debug, Default)]
pub(super) struct SideRuns {
    /// Rows/s of each run.
    pub(super) rates: Vec<f64>,
    /// CPU seconds of `sluice run` per run: far less sensitive than the rate to other work
    /// on the machine.
    pub(super) cpu: Vec<f64>,
}

impl SideRuns {
    /// Median rows/s.
    pub(super) fn rate(&self) -> f64 {
        median(&self.rates)
    }
    /// Median CPU seconds.
    pub(super) fn cpu(&self) -> f64 {
        median(&self.cpu)
    }
}

/// The two sides' runs and the scrapes that got a body.
#[derive(Debug)]
pub(super) struct Compared {
    pub(super) a: SideRuns,
    pub(super) b: SideRuns,
    pub(super) scrapes: u64,
}

impl Compared {
    /// Median rate of A over median rate of B.
    pub(super) fn rate_ratio(&self) -> f64 {
        self.a.rate() / self.b.rate().max(1e-9)
    }
    /// Median CPU time of A over that of B.
    pub(super) fn cpu_ratio(&self) -> f64 {
        self.a.cpu() / self.b.cpu().max(1e-9)
    }
}

/// One drain of the reviews backlog (emptied table, fresh checkpoint) as `side` runs it.
/// Returns the drain and the scrapes that got a body.
async fn side_drain(
    admin: &Admin,
    conn: &mut PgConnection,
    side: &Side<'_>,
    tag: &str,
) -> Result<(Drained, u64), Failure> {
    // A baseline's schema has no `reviews` before its build's first `sluice run` migrates it.
    sqlx::raw_sql(&format!(
        "DO $$ BEGIN IF to_regclass('{0}.reviews') IS NOT NULL THEN TRUNCATE {0}.reviews; END IF; END $$",
        side.env.schema
    ))
    .execute(&mut *conn)
    .await?;
    compare::checkpoint(conn).await;
    let only_reviews = ("STORAGE_PIPELINES", "reviews");
    if !side.scraped {
        let drained = drain(side.env, admin, tag, &[only_reviews], None).await?;
        return Ok((drained, 0));
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let addr = format!("127.0.0.1:{port}");
    let scraper = scrape::Scraper::start(port, Duration::from_secs(1));
    let drained = drain(
        side.env,
        admin,
        tag,
        &[only_reviews, ("SLUICE_HTTP_ADDR", addr.as_str())],
        None,
    )
    .await;
    let scrapes = scraper.finish().await;
    Ok((drained?, scrapes))
}

/// Alternates A and B in ABBA order (A-B, B-A, …) for `rounds` pairs, so that neither drift
/// of the machine nor the position in a pair favours one side; prints each pair.
pub(super) async fn compare_sides(
    admin: &Admin,
    conn: &mut PgConnection,
    a: &Side<'_>,
    b: &Side<'_>,
    rounds: usize,
) -> Result<Compared, Failure> {
    let mut runs = [SideRuns::default(), SideRuns::default()];
    let mut scrapes = 0;
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for index in order {
            let side = if index == 0 { a } else { b };
            let tag = format!("{}{round}", side.label.chars().next().unwrap_or('x'));
            let (drained, scraped) = side_drain(admin, conn, side, &tag).await?;
            scrapes += scraped;
            runs[index].rates.push(drained.drain);
            runs[index].cpu.push(drained.cpu_s);
        }
        let first = if round % 2 == 0 { a } else { b };
        println!(
            "   pair {} ({} first): {} {:.0} rows/s ({:.2} CPU s), {} {:.0} rows/s ({:.2} CPU s)",
            round + 1,
            first.label,
            a.label,
            runs[0].rates[round],
            runs[0].cpu[round],
            b.label,
            runs[1].rates[round],
            runs[1].cpu[round],
        );
    }
    let [a, b] = runs;
    Ok(Compared { a, b, scrapes })
}

/// The metrics cost: A = endpoint on and scraped, B = off.
pub(super) async fn metrics_cost(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
) -> Result<Compared, Failure> {
    let on = Side {
        label: "metrics-on",
        env,
        scraped: true,
    };
    let off = Side {
        label: "off",
        env,
        scraped: false,
    };
    let compared = compare_sides(admin, conn, &on, &off, COST_ROUNDS).await?;
    if compared.scrapes == 0 {
        return Err(anyhow!("the metrics endpoint was never scraped").into());
    }
    Ok(compared)
}
