//! The runs compared: U (no Kafka) with the rows bound as `UNNEST` arrays by the pipeline's
//! own statement (the reviews seed mapping's plan); S (`sluice run`); each over the first
//! crawl (all inserts) and the second (every row again, newer: all updates). Pairs run in ABBA order so that neither the machine's drift
//! nor the position in a pair favours one side.

use super::{BATCH, Drained, Env, drain, median, rate};
use crate::Failure;
use anyhow::anyhow;
use sluice_core::PipelineKind;
use sluice_kafka::Admin;
use sluice_sinks::{Cell, SinkPlan, SinkRow};
use sqlx::{Connection, PgConnection};
use std::time::Instant;

/// One U run: both crawls.
#[derive(Debug, Clone)]
pub struct URun {
    /// Rows/s, first crawl.
    pub insert: f64,
    /// Rows/s, second crawl.
    pub update: f64,
    /// Cumulative (seconds, rows) after each batch of the first crawl.
    pub timeline: Vec<(f64, u64)>,
}

/// Starts a timed run from a fresh checkpoint, so that no run pays for a checkpoint (and
/// the full-page writes after it) that an earlier run's WAL triggered. Needs a role allowed
/// to `CHECKPOINT`; without one the runs simply share that noise.
pub async fn checkpoint(conn: &mut PgConnection) {
    if let Err(error) = sqlx::raw_sql("CHECKPOINT").execute(conn).await {
        tracing::debug!(%error, "CHECKPOINT refused; runs are not levelled");
    }
}

/// Both crawls into an emptied table, `BATCH`-row batches, one transaction each, no Kafka.
pub async fn u_run(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    first: &[SinkRow],
    second: &[SinkRow],
) -> Result<URun, Failure> {
    sqlx::raw_sql("TRUNCATE reviews")
        .execute(&mut *conn)
        .await?;
    let mut timeline = Vec::with_capacity(first.len() / BATCH + 1);
    checkpoint(conn).await;
    let started = Instant::now();
    let mut done = 0u64;
    for chunk in first.chunks(BATCH) {
        let mut tx = conn.begin().await?;
        let outcome = super::rows::upsert(&mut tx, plan, chunk).await?;
        tx.commit().await?;
        done += outcome.inserted;
        timeline.push((started.elapsed().as_secs_f64(), done));
    }
    let insert = rate(first.len(), started.elapsed());
    if done != first.len() as u64 {
        return Err(anyhow!("U inserted {done} of {} rows", first.len()).into());
    }
    checkpoint(conn).await;
    let started = Instant::now();
    let mut updated = 0u64;
    for chunk in second.chunks(BATCH) {
        let mut tx = conn.begin().await?;
        updated += super::rows::upsert(&mut tx, plan, chunk).await?.updated;
        tx.commit().await?;
    }
    let update = rate(second.len(), started.elapsed());
    if updated != second.len() as u64 {
        return Err(anyhow!("U_update updated {updated} of {} rows", second.len()).into());
    }
    Ok(URun {
        insert,
        update,
        timeline,
    })
}

/// One S run: `sluice run` drains the first crawl's topic into an emptied table, then
/// (a fresh group) the second crawl's topic.
#[derive(Debug, Clone)]
pub struct SRun {
    /// The first crawl's drain.
    pub insert: Drained,
    /// The second crawl's drain.
    pub update: Drained,
}

/// Settings of an S run that differ from the defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct SOptions {
    /// The reviews pipeline's records per transaction.
    pub batch: Option<usize>,
    /// The reviews pipeline's writers.
    pub writers: Option<usize>,
    /// `STORAGE_SYNCHRONOUS_COMMIT=off`.
    pub sync_off: bool,
}

/// One S run (see [`SRun`]); `second_topic` holds the second crawl.
pub async fn s_run(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    tag: &str,
    second_topic: &str,
    options: SOptions,
) -> Result<SRun, Failure> {
    sqlx::raw_sql("TRUNCATE reviews")
        .execute(&mut *conn)
        .await?;
    let batch = options.batch.map(|b| b.to_string());
    let writers = options.writers.map(|w| w.to_string());
    let mut extra = vec![("STORAGE_PIPELINES", "reviews")];
    if let Some(batch) = &batch {
        extra.push(("STORAGE_MAX_POLL_RECORDS_REVIEWS", batch.as_str()));
    }
    if let Some(writers) = &writers {
        extra.push(("STORAGE_WRITERS_REVIEWS", writers.as_str()));
    }
    if options.sync_off {
        extra.push(("STORAGE_SYNCHRONOUS_COMMIT", "off"));
    }
    checkpoint(conn).await;
    let insert = drain(env, admin, &format!("{tag}i"), &extra, None).await?;
    let variable = PipelineKind::Reviews.topic_variable();
    extra.push((variable.as_str(), second_topic));
    checkpoint(conn).await;
    let update = drain(env, admin, &format!("{tag}u"), &extra, None).await?;
    if update.updated != update.records {
        return Err(anyhow!(
            "S_update updated {} of {} rows",
            update.updated,
            update.records
        )
        .into());
    }
    Ok(SRun { insert, update })
}

/// The runs of two S configurations in ABBA pairs.
#[derive(Debug, Clone, Default)]
pub struct Abba {
    /// The first configuration's runs.
    pub a: Vec<SRun>,
    /// The second's.
    pub b: Vec<SRun>,
    /// Every run: (second configuration?, first crawl, second crawl) rows/s, in the order run.
    pub runs: Vec<(bool, f64, f64)>,
}

impl Abba {
    /// The medians (first crawl, second crawl) of the first and the second configuration.
    pub fn medians(&self) -> ((f64, f64), (f64, f64)) {
        let of = |r: &SRun| (r.insert.drain, r.update.drain);
        (medians(&self.a, of), medians(&self.b, of))
    }
}

/// Runs `pairs` pairs of two configurations in ABBA order (`run(second?, pair)`), printing
/// each run under `labels`.
pub async fn s_pairs(
    pairs: usize,
    labels: [&str; 2],
    mut run: impl AsyncFnMut(bool, usize) -> Result<SRun, Failure>,
) -> Result<Abba, Failure> {
    let mut out = Abba::default();
    for pair in 0..pairs {
        let order = if pair.is_multiple_of(2) {
            [false, true]
        } else {
            [true, false]
        };
        for second in order {
            let done = run(second, pair).await?;
            println!(
                "   {}: insert {:.0} rows/s ({:.2} s CPU), update {:.0} rows/s ({:.2} s CPU)",
                labels[usize::from(second)],
                done.insert.drain,
                done.insert.cpu_s,
                done.update.drain,
                done.update.cpu_s
            );
            out.runs
                .push((second, done.insert.drain, done.update.drain));
            if second {
                out.b.push(done);
            } else {
                out.a.push(done);
            }
        }
    }
    Ok(out)
}

/// The configurations `0..3` in `pairs` rounds of alternating order (0 1 2, then 2 1 0), as
/// (round, configuration), so that drift over the run weighs on each alike.
pub fn rounds_of_three(pairs: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..pairs).flat_map(|pair| {
        let order = if pair.is_multiple_of(2) {
            [0, 1, 2]
        } else {
            [2, 1, 0]
        };
        order.map(|i| (pair, i))
    })
}

/// Medians of runs: (insert, update).
pub fn medians<T>(runs: &[T], of: impl Fn(&T) -> (f64, f64)) -> (f64, f64) {
    let (ins, upd): (Vec<f64>, Vec<f64>) = runs.iter().map(&of).unzip();
    (median(&ins), median(&upd))
}

/// U over `lanes` connections at once: the first crawl split by a hash of the natural key,
/// each lane its own connection writing `BATCH`-row transactions, then the second crawl
/// (all updates) the same way; rows/s of the whole, (insert, update). What partition-parallel
/// writers could give (a scaled-out group does the same).
pub async fn u_lanes(
    url: &str,
    conn: &mut PgConnection,
    plan: &SinkPlan,
    (first, second): (&[SinkRow], &[SinkRow]),
    lanes: usize,
) -> Result<(f64, f64), Failure> {
    sqlx::raw_sql("TRUNCATE reviews")
        .execute(&mut *conn)
        .await?;
    let insert = upsert_split(url, conn, plan, first, lanes).await?;
    let update = upsert_split(url, conn, plan, second, lanes).await?;
    Ok((insert, update))
}

/// `rows` split by a hash of the natural key over `lanes` connections at once, each
/// writing `BATCH`-row transactions: rows/s of the whole.
async fn upsert_split(
    url: &str,
    conn: &mut PgConnection,
    plan: &SinkPlan,
    rows: &[SinkRow],
    lanes: usize,
) -> Result<f64, Failure> {
    let mut parts: Vec<Vec<SinkRow>> = vec![Vec::new(); lanes.max(1)];
    for row in rows {
        let key = match row.cell(0) {
            Some(Cell::Text(review_id)) => review_id.as_str(),
            _ => "",
        };
        let hash = key.bytes().fold(0usize, |h, b| {
            h.wrapping_mul(31).wrapping_add(usize::from(b))
        });
        let lane = hash % parts.len();
        parts[lane].push(row.clone());
    }
    checkpoint(conn).await;
    let mut conns = Vec::new();
    for _ in &parts {
        conns.push(sluice_postgres::connect(url, "bench").await?);
    }
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (rows, mut conn) in parts.into_iter().zip(conns) {
        let plan = plan.clone();
        tasks.spawn(async move {
            for chunk in rows.chunks(BATCH) {
                let mut tx = conn.begin().await?;
                super::rows::upsert(&mut tx, &plan, chunk).await?;
                tx.commit().await?;
            }
            Ok::<(), Failure>(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| anyhow!("a lane panicked: {e}"))??;
    }
    Ok(rate(rows.len(), started.elapsed()))
}
