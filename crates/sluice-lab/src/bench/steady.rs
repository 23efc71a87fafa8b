//! Steady load: reviews produced at a fixed rate into a fresh topic while `sluice run`
//! keeps up, then what a record cost — `sluice run`'s CPU per record and the records per
//! transaction. A backlog fills every batch; a steady rate below the pipeline's limit
//! makes small batches, each paying a transaction's fixed costs.

use super::drain::{Stored, cpu_seconds, run_command, stop_run, wait_joined, wait_stored};
use super::{Env, runlog};
use crate::Failure;
use crate::produce::send_all;
use sluice_core::PipelineKind;
use sluice_kafka::Admin;
use sluice_loadgen::Generated;
use std::path::PathBuf;
use std::time::Duration;

/// One steady-rate run.
#[derive(Debug, Clone)]
pub(super) struct Steady {
    /// Records offered per second.
    pub(super) rate: f64,
    /// Records produced (and stored).
    pub(super) records: u64,
    /// CPU seconds `sluice run` used from its join to the end of the run.
    pub(super) cpu_s: f64,
    /// The reviews pipeline's transactions.
    pub(super) batches: usize,
}

impl Steady {
    /// CPU microseconds per record.
    pub(super) fn cpu_us_per_record(&self) -> f64 {
        self.cpu_s * 1e6 / self.records.max(1) as f64
    }

    /// Records per transaction, on average.
    pub(super) fn records_per_batch(&self) -> f64 {
        self.records as f64 / self.batches.max(1) as f64
    }
}

/// Produces `records` at `rate` per second into a fresh topic (the `run`-th) while
/// `sluice run` (reviews only) consumes it, waits until it caught up, and reads its CPU and
/// batch log.
pub(super) async fn measure(
    env: &Env,
    admin: &Admin,
    records: &[Generated],
    rate: u64,
    run: usize,
) -> Result<Steady, Failure> {
    let topic = format!("{}-reviews-steady{run}", env.id);
    admin.ensure_topic(&topic, 3).await?;
    let prefix = format!("{}-steady{run}", env.id);
    let tag = format!("steady{run}");
    let log = PathBuf::from(format!(".stack/bench-{tag}.log"));
    let mut cmd = run_command(env, &prefix, &tag, &log)?;
    cmd.env("STORAGE_PIPELINES", "reviews")
        .env(PipelineKind::Reviews.topic_variable(), &topic);
    let mut child = cmd.spawn()?;
    let group = format!("{prefix}.reviews");
    wait_joined(admin, std::slice::from_ref(&group), &mut child, &log).await?;
    let cpu_before = cpu_seconds(child.id()).unwrap_or(0.0);
    let mut settings = env.settings.clone();
    for p in &mut settings.pipelines {
        if p.kind == PipelineKind::Reviews {
            p.topic.clone_from(&topic);
        }
    }
    let producer = sluice_kafka::ResilientProducer::new(&settings.kafka, "sluice-bench-steady")?;
    let hidden = indicatif::ProgressBar::hidden();
    let sent = send_all(&settings, &producer, records, rate, &hidden).await?;
    let end = i64::try_from(sent).unwrap_or(i64::MAX);
    let timeout = Some(Duration::from_secs(120));
    let goal = Stored {
        group: &group,
        topic: &topic,
        end,
    };
    wait_stored(env, goal, &mut child, &log, timeout).await?;
    let cpu_s = cpu_seconds(child.id()).unwrap_or(0.0) - cpu_before;
    stop_run(&mut child, &log)?;
    let batches = runlog::batches(&log).len();
    Ok(Steady {
        rate: rate as f64,
        records: sent,
        cpu_s,
        batches,
    })
}
