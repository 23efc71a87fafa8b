//! The reviews drain (both crawls) through the built-in pipeline and through its seed
//! mapping (`deploy/sinks/reviews.toml`, run by `sluice run` with `SLUICE_SINKS_FILE`), in ABBA
//! pairs: what declaring a topic instead of coding it costs.

use super::compare::{self, SOptions, SRun};
use super::{Env, drain};
use crate::Failure;
use anyhow::{Context, anyhow};
use sluice_core::PipelineKind;
use sluice_kafka::Admin;
use sqlx::PgConnection;

/// The seed mapping the comparison runs.
const SEED: &str = include_str!("../../../../deploy/sinks/reviews.toml");

/// The comparison's medians.
#[derive(Debug, Clone)]
pub(super) struct Mapping {
    /// The built-in pipeline: rows/s (first crawl, second crawl).
    pub(super) builtin: (f64, f64),
    /// The mapping: the same.
    pub(super) mapping: (f64, f64),
    /// Every run: (declared?, first crawl, second crawl) rows/s, in the order run.
    pub(super) runs: Vec<(bool, f64, f64)>,
}

/// The seed mapping reading `topic`, written beside the bench's logs.
fn mapping_file(tag: &str, topic: &str) -> Result<String, Failure> {
    let from = "topic = \"reviews\"";
    if !SEED.contains(from) {
        return Err(
            anyhow!("deploy/sinks/reviews.toml no longer names its topic as `{from}`").into(),
        );
    }
    let path = format!(".stack/bench-sinks-{tag}.toml");
    std::fs::write(&path, SEED.replace(from, &format!("topic = \"{topic}\"")))
        .with_context(|| format!("cannot write {path}"))?;
    Ok(path)
}

/// One run through the mapping: the first crawl's topic into an emptied table, then (a
/// fresh group) the second crawl's.
async fn mapping_run(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    tag: &str,
    second_topic: &str,
) -> Result<SRun, Failure> {
    sqlx::raw_sql("TRUNCATE reviews")
        .execute(&mut *conn)
        .await?;
    let variable = PipelineKind::Reviews.topic_variable();
    let first_topic = format!("{}-reviews", env.id);
    let first = mapping_file(&format!("{tag}i"), &first_topic)?;
    compare::checkpoint(conn).await;
    let insert = drain::drain(
        env,
        admin,
        &format!("{tag}i"),
        &[("SLUICE_SINKS_FILE", first.as_str())],
        None,
    )
    .await?;
    let second = mapping_file(&format!("{tag}u"), second_topic)?;
    compare::checkpoint(conn).await;
    // The topic variable only tells the drain which topic to watch; the mapping names it.
    let update = drain::drain(
        env,
        admin,
        &format!("{tag}u"),
        &[
            ("SLUICE_SINKS_FILE", second.as_str()),
            (variable.as_str(), second_topic),
        ],
        None,
    )
    .await?;
    if update.updated != update.records {
        return Err(anyhow!(
            "the mapping's update crawl updated {} of {} rows",
            update.updated,
            update.records
        )
        .into());
    }
    Ok(SRun { insert, update })
}

/// Runs `pairs` ABBA pairs of the built-in pipeline and the mapping.
pub(super) async fn compare(
    env: &Env,
    admin: &Admin,
    conn: &mut PgConnection,
    second_topic: &str,
    pairs: usize,
) -> Result<Mapping, Failure> {
    println!(
        "== mapping: S through the built-in reviews pipeline vs deploy/sinks/reviews.toml, both crawls, {pairs} pairs in ABBA order"
    );
    let runs = compare::s_pairs(pairs, ["built-in", "mapping "], async |declared, pair| {
        let tag = format!("m{pair}{}", u8::from(declared));
        if declared {
            mapping_run(env, admin, conn, &tag, second_topic).await
        } else {
            compare::s_run(env, admin, conn, &tag, second_topic, SOptions::default()).await
        }
    })
    .await?;
    let (builtin, mapping) = runs.medians();
    Ok(Mapping {
        builtin,
        mapping,
        runs: runs.runs,
    })
}
