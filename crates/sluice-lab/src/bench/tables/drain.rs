//! One drain of the many-tables backlog by `sluice run` with one side's mapping file: fresh
//! groups, from the process's start until PostgreSQL's offsets of its groups cover every
//! topic's records; its CPU, peak RSS and threads read from `/proc` before it is stopped.

use super::super::drain::{check_alive, cpu_seconds, run_command, stop_run};
use super::super::{Env, rate};
use crate::Failure;
use anyhow::anyhow;
use chrono::{DateTime, Utc};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One side of the comparison: its mapping file and what its drain waits for.
pub(super) struct Side {
    /// How the table shows it.
    pub(super) label: &'static str,
    /// The mapping file `sluice run` reads.
    pub(super) file: PathBuf,
    /// Its sinks' names (each group is `<prefix>.<name>`).
    pub(super) sinks: Vec<String>,
    /// The topics its sinks read.
    pub(super) topics: Vec<String>,
    /// Variables its `sluice run` gets besides the bench's (`STORAGE_WRITERS`).
    pub(super) vars: Vec<(&'static str, String)>,
}

/// One drain's figures.
#[derive(Debug, Clone, Copy)]
pub(super) struct Drain {
    /// Rows per second from the first record in a pipeline's hands to the last stored.
    pub(super) rate: f64,
    /// Rows per second from the process's start (its planning and group joins included).
    pub(super) with_startup: f64,
    /// Seconds from the process's start to the first record in a pipeline's hands (its
    /// migrations check, planning, group adoption and joins).
    pub(super) startup_s: f64,
    /// `sluice run`'s CPU seconds (user + system) over its whole life up to the drain's end.
    pub(super) cpu_s: f64,
    /// `sluice run`'s peak RSS (`VmHWM`), MiB.
    pub(super) rss_mib: f64,
    /// `sluice run`'s threads when the backlog was stored.
    pub(super) threads: u64,
    /// Records drained.
    pub(super) records: usize,
}

/// Drains `count` records with `side`'s file: `sluice run` under the group prefix
/// `<id>-<tag>`, its JSON log in `.stack/bench-<tag>.log`.
pub(super) async fn drain(
    env: &Env,
    side: &Side,
    count: usize,
    tag: &str,
) -> Result<Drain, Failure> {
    let prefix = format!("{}-{tag}", env.id);
    let log = PathBuf::from(format!(".stack/bench-{tag}.log"));
    let mut cmd = run_command(env, &prefix, tag, &log)?;
    // With a mapping file, a seed runs only when STORAGE_PIPELINES names it (docs/sinks.md).
    cmd.env("SLUICE_SINKS_FILE", &side.file)
        .env_remove("STORAGE_PIPELINES")
        .envs(side.vars.iter().map(|(k, v)| (k, v)));
    let spawned_at = Utc::now();
    let started = Instant::now();
    let mut child = cmd.spawn()?;
    let groups: Vec<String> = side.sinks.iter().map(|s| format!("{prefix}.{s}")).collect();
    let mut conn = sluice_postgres::connect(&env.url, "bench-wait").await?;
    let end = i64::try_from(count).unwrap_or(i64::MAX);
    let deadline = started + Duration::from_secs(600);
    loop {
        check_alive(&mut child, &log)?;
        let stored: i64 = sqlx::query_scalar(
            "SELECT coalesce(sum(next_offset), 0)::bigint FROM consumer_offsets \
             WHERE consumer_group = ANY($1) AND topic = ANY($2)",
        )
        .bind(&groups)
        .bind(&side.topics)
        .fetch_one(&mut conn)
        .await?;
        if stored >= end {
            break;
        }
        if Instant::now() > deadline {
            let _ = stop_run(&mut child, &log);
            return Err(
                anyhow!("{}: stored {stored} of {end} records in 600 s", side.label).into(),
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    let drained_at = Utc::now();
    let pid = child.id();
    let rss_kb = crate::demo::peak_rss_kb(pid).unwrap_or(0);
    let cpu_s = cpu_seconds(pid).unwrap_or(0.0);
    let threads = threads(pid).unwrap_or(0);
    stop_run(&mut child, &log)?;
    let first = first_data_at(&log, &side.sinks).unwrap_or(spawned_at);
    let drain_time = (drained_at - first).to_std().unwrap_or(elapsed);
    Ok(Drain {
        rate: rate(count, drain_time),
        with_startup: rate(count, elapsed),
        startup_s: (first - spawned_at).num_milliseconds() as f64 / 1000.0,
        cpu_s,
        rss_mib: rss_kb as f64 / 1024.0,
        threads,
        records: count,
    })
}

/// The threads of process `pid`, from `/proc/<pid>/status`.
fn threads(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
}

/// When the first of `sinks`' pipelines had records in hand: over their `batch committed`
/// lines with records, the earliest log time less the decode, store and commit it took.
fn first_data_at(log: &Path, sinks: &[String]) -> Option<DateTime<Utc>> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["message"] == "batch committed" && e["records"].as_u64().unwrap_or(0) > 0)
        .filter(|e| {
            e["pipeline"]
                .as_str()
                .is_some_and(|p| sinks.iter().any(|s| s == p))
        })
        .filter_map(|e| {
            let at = DateTime::parse_from_rfc3339(e["timestamp"].as_str()?).ok()?;
            let spent: u64 = ["decode_us", "store_us", "commit_us"]
                .iter()
                .map(|k| e[*k].as_u64().unwrap_or(0))
                .sum();
            let spent = i64::try_from(spent).unwrap_or(0);
            Some(at.with_timezone(&Utc) - chrono::Duration::microseconds(spent))
        })
        .min()
}
