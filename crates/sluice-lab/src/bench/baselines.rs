//! The storage bench's comparison phases: U over one and two connections, L (binary `COPY`),
//! K (a count-and-drop consumer), and U against S (`sluice run`) in ABBA pairs
//! (docs/ARCHITECTURE.md#performance).

use super::compare::{self, SOptions, SRun, URun};
use super::workload::{Produced, Workload};
use super::{BATCH, Env, copy, median, rate, runlog};
use crate::Failure;
use anyhow::anyhow;
use sluice_core::KafkaClientSettings;
use sqlx::PgConnection;
use std::time::{Duration, Instant};

/// L's figures: rows/s and the seconds the `COPY` took.
#[derive(Debug, Clone, Copy)]
pub(super) struct Copied {
    /// Rows/s.
    pub(super) rate: f64,
    /// Seconds.
    pub(super) seconds: f64,
}

/// U and S over both crawls, their medians and the runs the chart draws.
#[derive(Debug, Clone)]
pub(super) struct Comparison {
    /// U's medians, first crawl and second crawl.
    pub(super) u: f64,
    pub(super) u_update: f64,
    /// S's medians, first crawl and second crawl.
    pub(super) s: f64,
    pub(super) s_update: f64,
    /// Median CPU seconds of `sluice run` per drain: first crawl, second crawl.
    pub(super) cpu: [f64; 2],
    /// S/U of each (U, S) pair, first crawl.
    pub(super) pair_ratios: Vec<f64>,
    /// S's median counting the consumer's start-up, first crawl.
    pub(super) with_startup: f64,
    /// The highest peak RSS of the S runs, KiB.
    pub(super) s_rss_kb: u64,
    /// The first S run.
    pub(super) s_main: SRun,
    /// The first U run.
    pub(super) u_main: URun,
}

/// U over 1, 2 and 4 connections at once (rows split by key), medians of `pairs` rounds:
/// (insert, update) rows/s each.
#[derive(Debug, Clone, Copy)]
pub(super) struct Connections {
    /// One connection.
    pub(super) one: (f64, f64),
    /// Two at once (U₂: what two writers could take).
    pub(super) two: (f64, f64),
    /// Four at once.
    pub(super) four: (f64, f64),
}

impl Connections {
    /// U over `n` connections (1, 2 or 4; the nearest below for others): (insert, update).
    pub(super) fn of(&self, n: usize) -> (f64, f64) {
        match n {
            0 | 1 => self.one,
            2 | 3 => self.two,
            _ => self.four,
        }
    }
}

/// U over 1, 2 and 4 connections at once, both crawls, `pairs` rounds in alternating order
/// (1 2 4, then 4 2 1): the medians.
pub(super) async fn u_lanes(
    env: &Env,
    conn: &mut PgConnection,
    work: &Workload,
    pairs: usize,
) -> Result<Connections, Failure> {
    println!(
        "== U over 1, 2 and 4 connections at once (rows split by key), both crawls, {pairs} rounds"
    );
    let mut rates: [Vec<(f64, f64)>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for (_, i) in compare::rounds_of_three(pairs) {
        let lanes = 1usize << i;
        let crawls = (&work.rows[..], &work.rows2[..]);
        let r = compare::u_lanes(&env.url, conn, &work.plan, crawls, lanes).await?;
        println!(
            "   {lanes} connection(s): insert {:.0}, update {:.0} rows/s",
            r.0, r.1
        );
        rates[i].push(r);
    }
    let of = |i: usize| compare::medians(&rates[i], |r| *r);
    let u = Connections {
        one: of(0),
        two: of(1),
        four: of(2),
    };
    println!(
        "   medians, insert / update: 1 connection {:.0} / {:.0}, 2 connections {:.0} / {:.0} \
         ({:.2} / {:.2}×), 4 connections {:.0} / {:.0} ({:.2} / {:.2}×) rows/s",
        u.one.0,
        u.one.1,
        u.two.0,
        u.two.1,
        u.two.0 / u.one.0,
        u.two.1 / u.one.1,
        u.four.0,
        u.four.1,
        u.four.0 / u.one.0,
        u.four.1 / u.one.1
    );
    Ok(u)
}

/// L: the first crawl by one binary `COPY` into an unindexed copy of the table.
pub(super) async fn l_copy(conn: &mut PgConnection, work: &Workload) -> Result<Copied, Failure> {
    println!("== L: binary COPY into an unindexed copy of the table");
    sqlx::raw_sql("CREATE TABLE reviews_copy (LIKE reviews INCLUDING DEFAULTS)")
        .execute(&mut *conn)
        .await?;
    let started = Instant::now();
    copy::copy_rows(conn, "reviews_copy", &work.typed).await?;
    let seconds = started.elapsed().as_secs_f64();
    let l = rate(work.rows.len(), started.elapsed());
    println!("   {l:.0} rows/s");
    Ok(Copied { rate: l, seconds })
}

/// K: a count-and-drop consumer over the first crawl's topic, records/s.
pub(super) fn k(
    kafka: &KafkaClientSettings,
    id: &str,
    topic: &str,
    expected: usize,
) -> Result<f64, Failure> {
    println!("== K: count-and-drop rdkafka consumer");
    let k = count_and_drop(kafka, topic, &format!("{id}-k"), expected)?;
    println!("   {k:.0} records/s");
    Ok(k)
}

/// Reads `topic` from the start under `group` until `expected` records came, dropping each:
/// records/s from the first one.
fn count_and_drop(
    kafka: &KafkaClientSettings,
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

/// U and S over both crawls, `pairs` pairs in ABBA order, and their medians.
pub(super) async fn u_and_s(
    env: &Env,
    kafka: &Produced,
    conn: &mut PgConnection,
    work: &Workload,
    pairs: usize,
) -> Result<Comparison, Failure> {
    println!(
        "== U and S: U (the same upsert, {BATCH}-row batches, one transaction each, no Kafka) and \
         S (`sluice run`, reviews pipeline, draining the produced backlog), crawl 1 into an empty \
         table then crawl 2 (all updates); {} pairs in ABBA order",
        pairs
    );
    let (mut u_pairs, mut s_runs) = (Vec::new(), Vec::new());
    for pair in 0..pairs {
        for s_side in [!pair.is_multiple_of(2), pair.is_multiple_of(2)] {
            if s_side {
                s_runs.push(s_run(env, kafka, conn, pair).await?);
            } else {
                let run = compare::u_run(conn, &work.plan, &work.rows, &work.rows2).await?;
                println!(
                    "   U insert {:.0} rows/s, update {:.0} rows/s",
                    run.insert, run.update
                );
                u_pairs.push(run);
            }
        }
    }
    Comparison::of_runs(&u_pairs, &s_runs)
}

/// The S run of pair `pair`, printed.
async fn s_run(
    env: &Env,
    kafka: &Produced,
    conn: &mut PgConnection,
    pair: usize,
) -> Result<SRun, Failure> {
    let tag = format!("s{pair}");
    let run = compare::s_run(
        env,
        &kafka.admin,
        conn,
        &tag,
        &kafka.topic2,
        SOptions::default(),
    )
    .await?;
    println!(
        "   S insert {:.0} rows/s ({:.2} s CPU), update {:.0} rows/s ({:.2} s CPU), peak RSS {:.1} MiB",
        run.insert.drain,
        run.insert.cpu_s,
        run.update.drain,
        run.update.cpu_s,
        run.insert.rss_kb.max(run.update.rss_kb) as f64 / 1024.0
    );
    Ok(run)
}

impl Comparison {
    /// The medians of the U and S runs, printed; an error when there is none.
    fn of_runs(u_pairs: &[URun], s_runs: &[SRun]) -> Result<Comparison, Failure> {
        let u_of = |r: &URun| (r.insert, r.update);
        let (u, u_update) = compare::medians(u_pairs, u_of);
        let s_of = |r: &SRun| (r.insert.drain, r.update.drain);
        let cpu_of = |r: &SRun| (r.insert.cpu_s, r.update.cpu_s);
        let (s, s_update) = compare::medians(s_runs, s_of);
        let (cpu_insert, cpu_update) = compare::medians(s_runs, cpu_of);
        let pair_ratios: Vec<f64> = s_runs
            .iter()
            .zip(u_pairs)
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
        // Each pair runs one U and one S, so there is a U run whenever there is an S run.
        let u_main = u_pairs
            .first()
            .cloned()
            .ok_or_else(|| anyhow!("no U run"))?;
        Ok(Comparison {
            u,
            u_update,
            s,
            s_update,
            cpu: [cpu_insert, cpu_update],
            pair_ratios,
            with_startup,
            s_rss_kb,
            s_main,
            u_main,
        })
    }

    /// The median milliseconds per phase of a full batch of the first S run, printed.
    pub(super) fn batch_phases(&self) -> [f64; 5] {
        let phases = runlog::phase_medians_ms(&self.s_main.insert.batches, BATCH as u64);
        println!(
            "   per batch (median of full batches, first S run): {}",
            runlog::PHASES
                .iter()
                .zip(phases)
                .map(|(n, v)| format!("{n} {v:.2} ms"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        phases
    }
}
