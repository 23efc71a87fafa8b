//! One drain of a produced backlog by `sluice run` (a child process): start it under a fresh
//! group, wait until PostgreSQL's offsets (what sluice stored) reach the end, read its batch
//! log back.

use super::{Env, latency, rate, runlog};
use crate::Failure;
use anyhow::anyhow;
use sluice_core::PipelineKind;
use sluice_kafka::Admin;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One drain of the reviews backlog by `sluice run`.
#[derive(Debug, Clone)]
pub(super) struct Drained {
    /// Rows/s from the first record in the pipeline's hands to lag 0.
    pub(super) drain: f64,
    /// Rows/s from the group join to lag 0 (includes the consumer's start-up).
    pub(super) with_startup: f64,
    /// Peak RSS, KiB.
    pub(super) rss_kb: u64,
    /// CPU time (user + system) the process had used when the backlog was drained, seconds.
    pub(super) cpu_s: f64,
    /// Records drained.
    pub(super) records: u64,
    /// Rows the drain updated (from the batch log).
    pub(super) updated: u64,
    /// The reviews pipeline's committed batches.
    pub(super) batches: Vec<runlog::Batch>,
    /// Cumulative (seconds since the first record in hand, rows) after each batch.
    pub(super) timeline: Vec<(f64, u64)>,
}

/// The CPU time (user + system) process `pid` has used so far, from `/proc/<pid>/stat`.
pub(super) fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (in parentheses, which may contain spaces): state is the
    // 3rd field, utime the 14th and stime the 15th.
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // USER_HZ is 100 on every Linux this runs on.
    Some(ticks / 100.0)
}

/// Runs `sluice run` with the bench settings under a fresh group prefix until the reviews
/// backlog is drained.
pub(super) async fn drain(
    env: &Env,
    admin: &Admin,
    tag: &str,
    extra: &[(&str, &str)],
    probe: Option<&latency::Probe>,
) -> Result<Drained, Failure> {
    let prefix = format!("{}-{tag}", env.id);
    let log = PathBuf::from(format!(".stack/bench-{tag}.log"));
    let mut cmd = run_command(env, &prefix, tag, &log)?;
    cmd.envs(extra.iter().copied());
    let mut child = cmd.spawn()?;
    let group = format!("{prefix}.reviews");
    let variable = PipelineKind::Reviews.topic_variable();
    let topic = extra
        .iter()
        .find(|(k, _)| *k == variable)
        .map_or_else(|| format!("{}-reviews", env.id), |(_, v)| (*v).to_owned());
    let pipelines = extra
        .iter()
        .find(|(k, _)| *k == "STORAGE_PIPELINES")
        .map_or("reviews", |(_, v)| *v);
    let groups: Vec<String> = pipelines
        .split(',')
        .map(|p| format!("{prefix}.{p}"))
        .collect();
    wait_joined(admin, &groups, &mut child, &log).await?;
    let started = Instant::now();
    if let Some(probe) = probe {
        probe.start();
    }
    let end: i64 = admin.watermarks(&topic)?.iter().map(|m| m.high).sum();
    let goal = Stored {
        group: &group,
        topic: &topic,
        end,
    };
    wait_stored(env, goal, &mut child, &log, None).await?;
    let elapsed = started.elapsed();
    let drained_at = chrono::Utc::now();
    if let Some(probe) = probe {
        probe.stop();
        probe.wait_drained().await?;
    }
    let rss = crate::demo::peak_rss_kb(child.id()).unwrap_or(0);
    let cpu_s = cpu_seconds(child.id()).unwrap_or(0.0);
    stop_run(&mut child, &log)?;
    let n = usize::try_from(end).unwrap_or(0);
    let batches = runlog::batches(&log);
    let first = runlog::first_data_at(&batches);
    let drain_time = first
        .and_then(|first| (drained_at - first).to_std().ok())
        .unwrap_or(elapsed);
    let timeline = first.map_or_else(Vec::new, |f| runlog::timeline(&batches, f));
    Ok(Drained {
        drain: rate(n, drain_time),
        with_startup: rate(n, elapsed),
        rss_kb: rss,
        cpu_s,
        records: n as u64,
        updated: batches.iter().map(|b| b.updated).sum(),
        batches,
        timeline,
    })
}

/// `sluice run` (`env.sluice`: the one beside this executable, or a baseline build) with the bench's settings, group prefix `prefix`, its JSON
/// log in `log`.
pub(super) fn run_command(
    env: &Env,
    prefix: &str,
    tag: &str,
    log: &std::path::Path,
) -> Result<Command, Failure> {
    let mut cmd = Command::new(&env.sluice);
    cmd.arg("run")
        .env(
            "KAFKA_BOOTSTRAP_SERVERS",
            &env.settings.kafka.bootstrap_servers,
        )
        .env("DATABASE_URL", &env.url)
        .env(
            PipelineKind::Reviews.topic_variable(),
            format!("{}-reviews", env.id),
        )
        .env(
            PipelineKind::NetworkMetrics.topic_variable(),
            format!("{}-network-metrics", env.id),
        )
        .env("STORAGE_GROUP_PREFIX", prefix)
        .env(
            "STORAGE_HEARTBEAT_DIR",
            format!(".stack/bench-heartbeat-{tag}"),
        )
        .env("SLUICE_LOG_FORMAT", "json")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log)?);
    Ok(cmd)
}

/// What a drain waits for: `group` has stored `end` records of `topic`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stored<'a> {
    /// The consumer group.
    pub(super) group: &'a str,
    /// The topic drained.
    pub(super) topic: &'a str,
    /// The records to be stored, summed over the topic's partitions.
    pub(super) end: i64,
}

/// Waits until `goal.group` has stored `goal.end` records of `goal.topic` (PostgreSQL's
/// offsets, summed over its partitions: each batch's transaction moves them; Kafka's commit
/// follows it), `child` still running; at most `timeout` when one is given.
pub(super) async fn wait_stored(
    env: &Env,
    goal: Stored<'_>,
    child: &mut Child,
    log: &std::path::Path,
    timeout: Option<Duration>,
) -> Result<(), Failure> {
    let Stored { group, topic, end } = goal;
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut conn = sluice_postgres::connect(&env.url, "bench-wait").await?;
    loop {
        check_alive(child, log)?;
        let stored: i64 = sluice_postgres::offsets::of_group(&mut conn, group)
            .await?
            .iter()
            .filter(|(t, ..)| t == topic)
            .map(|(.., next)| next)
            .sum();
        if stored >= end {
            return Ok(());
        }
        if deadline.is_some_and(|d| Instant::now() > d) {
            return Err(anyhow!("sluice run stored {stored} of {end} records in time").into());
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Stops `sluice run` with SIGTERM and checks that it exited 0.
pub(super) fn stop_run(child: &mut Child, log: &std::path::Path) -> Result<(), Failure> {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    let status = child.wait()?;
    if !status.success() {
        return Err(anyhow!("sluice run exited with {status}; see {}", log.display()).into());
    }
    Ok(())
}

/// Waits (at most 60 s) until every group in `groups` has a member: `sluice run` is in.
pub(super) async fn wait_joined(
    admin: &Admin,
    groups: &[String],
    child: &mut Child,
    log: &std::path::Path,
) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while groups
        .iter()
        .map(|g| admin.group_members(g))
        .collect::<Result<Vec<_>, _>>()?
        .contains(&0)
    {
        check_alive(child, log)?;
        if Instant::now() > deadline {
            return Err(anyhow!("sluice run did not join within 60 s").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

pub(super) fn check_alive(child: &mut Child, log: &std::path::Path) -> Result<(), Failure> {
    match child.try_wait()? {
        Some(status) => Err(anyhow!(
            "sluice run exited early with {status}; see {}",
            log.display()
        )
        .into()),
        None => Ok(()),
    }
}
