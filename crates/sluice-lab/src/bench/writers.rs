//! Writers per pipeline: the reviews drain (both crawls) with `STORAGE_WRITERS_REVIEWS=1`
//! and `=2`, in ABBA pairs, with the per-phase medians of each.

use super::compare::{self, SOptions, SRun};
use super::{BATCH, Env, runlog};
use crate::Failure;
use sluice_kafka::Admin;
use sqlx::PgConnection;

/// The comparison's medians.
#[derive(Debug, Clone)]
pub(super) struct Writers {
    /// One writer: rows/s (first crawl, second crawl).
    pub(super) one: (f64, f64),
    /// Two writers: the same.
    pub(super) two: (f64, f64),
    /// Every run: (writers, first crawl, second crawl) rows/s, in the order run.
    pub(super) runs: Vec<(usize, f64, f64)>,
    /// Median ms per phase of a full batch, first crawl, first run of each.
    pub(super) phases_one: [f64; 5],
    pub(super) phases_two: [f64; 5],
}

/// Runs `pairs` ABBA pairs of 1 and 2 writers.
pub(super) async fn compare(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    second_topic: &str,
    pairs: usize,
) -> Result<Writers, Failure> {
    println!(
        "== writers: S with 1 vs 2 writers (STORAGE_WRITERS_REVIEWS), both crawls, {pairs} pairs in ABBA order"
    );
    let runs = compare::s_pairs(
        pairs,
        ["1 writer(s)", "2 writer(s)"],
        async |second, pair| {
            let writers = if second { 2 } else { 1 };
            let options = SOptions {
                writers: Some(writers),
                ..SOptions::default()
            };
            let tag = format!("w{pair}{writers}");
            compare::s_run(env, admin, conn, &tag, second_topic, options).await
        },
    )
    .await?;
    let phases = |runs: &[SRun]| {
        runs.first().map_or([f64::NAN; 5], |r| {
            runlog::phase_medians_ms(&r.insert.batches, BATCH as u64)
        })
    };
    let (phases_one, phases_two) = (phases(&runs.a), phases(&runs.b));
    for (n, p) in [(1, phases_one), (2, phases_two)] {
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
    let (one, two) = runs.medians();
    Ok(Writers {
        one,
        two,
        runs: runs
            .runs
            .iter()
            .map(|(second, i, u)| (if *second { 2 } else { 1 }, *i, *u))
            .collect(),
        phases_one,
        phases_two,
    })
}
