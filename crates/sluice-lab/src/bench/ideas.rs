//! The storage bench's ideas on the write path, each S against S in its own ABBA pairs
//! ([`super::compare`]): 1,000 records per transaction, `synchronous_commit` off, two writers;
//! then the cost of the metrics endpoint and, with `--baseline-sluice`, this build against an
//! earlier one.

use super::baselines::Connections;
use super::compare::{self, SOptions, SRun};
use super::workload::Produced;
use super::{BATCH, BIG_BATCH, Env, cost, report, writers};
use crate::Failure;
use sluice_kafka::Admin;
use sqlx::PgConnection;

/// S medians (first crawl, second crawl) of two configurations.
type Medians = ((f64, f64), (f64, f64));

/// The batch-size idea: S at the default `BATCH` and at `BIG_BATCH` records per transaction,
/// `pairs` pairs in ABBA order; the medians (default, big). `None` in a quick bench.
pub(super) async fn batch_size(
    env: &Env,
    kafka: &Produced,
    conn: &mut PgConnection,
    pairs: usize,
    quick: bool,
) -> Result<Option<Medians>, Failure> {
    if quick {
        return Ok(None);
    }
    println!(
        "== idea: S with {BIG_BATCH} records per transaction (STORAGE_MAX_POLL_RECORDS_REVIEWS) vs the \
         default {BATCH}, both crawls, {} pairs in ABBA order",
        pairs
    );
    let (mut small, mut big) = (Vec::new(), Vec::new());
    for pair in 0..pairs {
        let order = if pair.is_multiple_of(2) {
            [true, false]
        } else {
            [false, true]
        };
        for is_big in order {
            let run = batch_run(env, kafka, conn, pair, is_big).await?;
            if is_big {
                big.push(run)
            } else {
                small.push(run)
            }
        }
    }
    let s_of = |r: &SRun| (r.insert.drain, r.update.drain);
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
    Ok(Some((small, big)))
}

/// One S run of the batch-size idea (`BIG_BATCH` records per transaction when `is_big`),
/// printed.
async fn batch_run(
    env: &Env,
    kafka: &Produced,
    conn: &mut PgConnection,
    pair: usize,
    is_big: bool,
) -> Result<SRun, Failure> {
    let tag = format!("b{pair}{}", u8::from(is_big));
    let batch = is_big.then_some(BIG_BATCH);
    let options = SOptions {
        batch,
        ..SOptions::default()
    };
    let run = compare::s_run(env, &kafka.admin, conn, &tag, &kafka.topic2, options).await?;
    println!(
        "   {:>5} rows/transaction: insert {:.0} rows/s ({:.2} s CPU), update {:.0} rows/s, peak RSS {:.1} MiB",
        batch.unwrap_or(BATCH),
        run.insert.drain,
        run.insert.cpu_s,
        run.update.drain,
        run.insert.rss_kb.max(run.update.rss_kb) as f64 / 1024.0
    );
    Ok(run)
}

/// S with `STORAGE_SYNCHRONOUS_COMMIT=off` against the default (on), `pairs` pairs in ABBA
/// order: the medians (on, off).
pub(super) async fn sync_commit(
    env: &Env,
    kafka: &Produced,
    conn: &mut PgConnection,
    pairs: usize,
) -> Result<Medians, Failure> {
    println!(
        "== S with STORAGE_SYNCHRONOUS_COMMIT=off vs the default (on), both crawls, {} pairs in ABBA order",
        pairs
    );
    let sync = compare::s_pairs(
        pairs,
        ["synchronous_commit on", "synchronous_commit off"],
        async |off, pair| {
            let options = SOptions {
                sync_off: off,
                ..SOptions::default()
            };
            let tag = format!("y{pair}{}", u8::from(off));
            compare::s_run(env, &kafka.admin, conn, &tag, &kafka.topic2, options).await
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
    Ok(sync_commit)
}

/// S with 1, 2 and 4 writers ([`writers::compare`]), each median printed against U over as
/// many connections.
pub(super) async fn writers(
    env: &Env,
    kafka: &Produced,
    conn: &mut PgConnection,
    pairs: usize,
    connections: &Connections,
) -> Result<writers::Writers, Failure> {
    let writers = writers::compare(env, &kafka.admin, conn, &kafka.topic2, pairs).await?;
    for (i, n) in writers::COUNTS.iter().enumerate() {
        let (s, s_update) = writers.rates[i];
        let (u, u_update) = connections.of(*n);
        let (cpu, cpu_update) = writers.cpu[i];
        println!(
            "   medians, {n} writer(s): {s:.0} / {s_update:.0} rows/s, CPU {cpu:.2} / {cpu_update:.2} s; \
             S/U{n} = {:.2}, S_update/U{n}_update = {:.2}",
            s / u,
            s_update / u_update
        );
    }
    Ok(writers)
}

/// The metrics cost ([`cost::metrics_cost`]), printed. `None` in a quick bench.
pub(super) async fn metrics_cost(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    quick: bool,
) -> Result<Option<cost::Compared>, Failure> {
    if quick {
        return Ok(None);
    }
    println!(
        "== metrics cost: the same drain with SLUICE_HTTP_ADDR on and /metrics scraped every second, \
         alternated with the endpoint off ({} pairs in ABBA order, medians compared)",
        cost::COST_ROUNDS
    );
    let cost = cost::metrics_cost(env, admin, conn).await?;
    println!(
        "   medians: endpoint off {:.0} rows/s, on and scraped {:.0} rows/s ({} scrapes): on/off = {:.3}, CPU on/off = {:.3}",
        cost.b.rate(),
        cost.a.rate(),
        cost.scrapes,
        cost.rate_ratio(),
        cost.cpu_ratio()
    );
    Ok(Some(cost))
}

/// This build's reviews drain against `exe`'s, in ABBA pairs (`--baseline-sluice`).
pub(super) async fn baseline(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    base_env: &Env,
) -> Result<report::Baseline, Failure> {
    let exe = &base_env.sluice;
    println!(
        "== baseline: the same drain by this build and by {} ({} pairs in ABBA order, medians compared)",
        exe.display(),
        cost::COST_ROUNDS
    );
    let this = cost::Side {
        label: "this",
        env,
        scraped: false,
    };
    let base = cost::Side {
        label: "baseline",
        env: base_env,
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
