//! The demo's `sluice run`: started as a child process with its JSON log in a file, waited
//! for until it is in its groups, stopped with SIGTERM (or on drop); its peak memory and its
//! log's totals.

use crate::Failure;
use anyhow::{Context, anyhow};
use serde_json::Value;
use sluice_kafka::Admin;
use sluice_storage::StorageSettings;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The demo's `sluice run`: a demo that leaves early (an error, its deadline) ends it on drop
/// — SIGTERM, and SIGKILL if it has not exited 10 s later — so no consumer outlives a failed
/// demo and fences the next one's static members.
pub(super) struct Consumer(Child);

impl std::ops::Deref for Consumer {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Consumer {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        if !matches!(self.0.try_wait(), Ok(None)) {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let grace = Instant::now() + Duration::from_secs(10);
        while Instant::now() < grace {
            if !matches!(self.0.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("sluice run did not stop within 10 s of SIGTERM: killed");
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `sluice run` (beside this executable), its JSON log to `log`.
pub(super) fn spawn_consumer(log: &PathBuf) -> Result<Consumer, Failure> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::File::create(log).with_context(|| format!("create {}", log.display()))?;
    let exe = crate::sluice_exe()?;
    Ok(Consumer(
        Command::new(exe)
            .arg("run")
            .env("SLUICE_LOG_FORMAT", "json")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .context("start sluice run")?,
    ))
}

/// Waits (at most 60 s) until the consumer has a member in each pipeline's group.
pub(super) async fn wait_for_members(
    settings: &StorageSettings,
    admin: &Admin,
    child: &mut Child,
    log: &std::path::Path,
) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait()? {
            return Err(anyhow!("the consumer exited with {status}; see {}", log.display()).into());
        }
        let mut joined = true;
        for p in &settings.pipelines {
            joined &= admin.group_members(&p.group)? > 0;
        }
        if joined {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(anyhow!("the consumer did not join its groups within 60 s").into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The consumer's peak resident set (VmHWM), from /proc.
pub fn peak_rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Stops the consumer with SIGTERM and waits for its exit.
pub(super) fn stop(child: &mut Child) -> Result<std::process::ExitStatus, Failure> {
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()?;
    Ok(child.wait()?)
}

/// The consumer's "pipeline totals" line for `pipeline` in its JSON log: (inserted, updated).
pub(super) fn pipeline_totals(log: &std::path::Path, pipeline: &str) -> Option<(i64, i64)> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|e| e["message"] == "pipeline totals" && e["pipeline"] == pipeline)
        .and_then(|e| Some((e["inserted"].as_i64()?, e["updated"].as_i64()?)))
}
