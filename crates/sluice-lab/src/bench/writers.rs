//! Writers per pipeline: the reviews drain (both crawls) with `STORAGE_WRITERS_REVIEWS` 1, 2
//! and 4, in rounds of alternating order (1 2 4, then 4 2 1), with the per-phase medians of
//! each: what `STORAGE_WRITERS`'s default is chosen from (docs/performance.md).

use super::compare::{self, SOptions, SRun};
use super::{BATCH, Env, runlog};
use crate::Failure;
use sluice_kafka::Admin;
use sqlx::PgConnection;

/// The writer counts compared.
pub(super) const COUNTS: [usize; 3] = [1, 2, 4];

/// The comparison's medians, per writer count ([`COUNTS`]).
#[derive(Debug, Clone)]
pub(super) struct Writers {
    /// Rows/s (first crawl, second crawl), per count.
    pub(super) rates: [(f64, f64); 3],
    /// Median `sluice run` CPU seconds (first crawl, second crawl), per count.
    pub(super) cpu: [(f64, f64); 3],
    /// Every run: (writers, first crawl, second crawl) rows/s, in the order run.
    pub(super) runs: Vec<(usize, f64, f64)>,
    /// Median ms per phase of a full batch, first crawl, first run of each count.
    pub(super) phases: [[f64; 5]; 3],
}

/// Runs `pairs` rounds of 1, 2 and 4 writers.
pub(super) async fn compare(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    second_topic: &str,
    pairs: usize,
) -> Result<Writers, Failure> {
    println!(
        "== writers: S with 1, 2 and 4 writers (STORAGE_WRITERS_REVIEWS), both crawls, {pairs} rounds in alternating order"
    );
    let mut by: [Vec<SRun>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let mut runs = Vec::new();
    for (pair, i) in compare::rounds_of_three(pairs) {
        let writers = COUNTS[i];
        let options = SOptions {
            writers: Some(writers),
            ..SOptions::default()
        };
        let tag = format!("w{pair}{writers}");
        let done = compare::s_run(env, admin, conn, &tag, second_topic, options).await?;
        println!(
            "   {writers} writer(s): insert {:.0} rows/s ({:.2} s CPU), update {:.0} rows/s ({:.2} s CPU)",
            done.insert.drain, done.insert.cpu_s, done.update.drain, done.update.cpu_s
        );
        runs.push((writers, done.insert.drain, done.update.drain));
        by[i].push(done);
    }
    let phases = |runs: &[SRun]| {
        runs.first().map_or([f64::NAN; 5], |r| {
            runlog::phase_medians_ms(&r.insert.batches, BATCH as u64)
        })
    };
    let rates = |runs: &[SRun]| compare::medians(runs, |r| (r.insert.drain, r.update.drain));
    let cpu = |runs: &[SRun]| compare::medians(runs, |r| (r.insert.cpu_s, r.update.cpu_s));
    let writers = Writers {
        rates: [rates(&by[0]), rates(&by[1]), rates(&by[2])],
        cpu: [cpu(&by[0]), cpu(&by[1]), cpu(&by[2])],
        runs,
        phases: [phases(&by[0]), phases(&by[1]), phases(&by[2])],
    };
    for (n, p) in COUNTS.iter().zip(writers.phases) {
        println!(
            "   per batch, {n} writer(s) (median of full batches, first run): {}",
            runlog::PHASES
                .iter()
                .zip(p)
                .map(|(name, v)| format!("{name} {v:.2} ms"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(writers)
}
