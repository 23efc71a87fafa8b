//! The restart figure: `sluice run` is SIGKILLed once it has committed a batch, started again
//! with the same settings, and timed from its start to its first committed batch. Measured
//! with static membership (the default) and, as the baseline, with dynamic membership, where
//! the dead process's membership holds its partitions until its session times out.

use super::drain::stop_run;
use super::{Env, check_alive, run_command};
use crate::Failure;
use anyhow::anyhow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Restart-to-first-batch, in seconds.
#[derive(Debug, Clone, Copy)]
pub struct Restart {
    /// With `STORAGE_INSTANCE_ID` (the default).
    pub static_s: f64,
    /// With `STORAGE_INSTANCE_ID=off` (not measured by a quick bench: it waits out a session).
    pub dynamic_s: Option<f64>,
}

/// Measures both on the bench's reviews backlog, with default consumer settings; the
/// dynamic-membership baseline only if `dynamic`.
pub async fn measure(env: &Env, dynamic: bool) -> Result<Restart, Failure> {
    let static_s = restart_once(env, "restart-static", "bench-restart")
        .await?
        .as_secs_f64();
    let dynamic_s = if dynamic {
        Some(
            restart_once(env, "restart-dynamic", "off")
                .await?
                .as_secs_f64(),
        )
    } else {
        None
    };
    Ok(Restart {
        static_s,
        dynamic_s,
    })
}

async fn restart_once(env: &Env, tag: &str, instance: &str) -> Result<Duration, Failure> {
    let prefix = format!("{}-{tag}", env.id);
    let first_log = PathBuf::from(format!(".stack/bench-{tag}-1.log"));
    let mut first = run_command(env, &prefix, tag, &first_log)?
        .env("STORAGE_PIPELINES", "reviews")
        .env("STORAGE_INSTANCE_ID", instance)
        .spawn()?;
    wait_first_batch(&mut first, &first_log, Duration::from_secs(120)).await?;
    first.kill()?; // SIGKILL
    first.wait()?;

    let second_log = PathBuf::from(format!(".stack/bench-{tag}-2.log"));
    let started = Instant::now();
    let mut second = run_command(env, &prefix, tag, &second_log)?
        .env("STORAGE_PIPELINES", "reviews")
        .env("STORAGE_INSTANCE_ID", instance)
        .spawn()?;
    wait_first_batch(&mut second, &second_log, Duration::from_secs(180)).await?;
    let elapsed = started.elapsed();
    stop_run(&mut second, &second_log)?;
    Ok(elapsed)
}

async fn wait_first_batch(
    child: &mut std::process::Child,
    log: &Path,
    timeout: Duration,
) -> Result<(), Failure> {
    let deadline = Instant::now() + timeout;
    loop {
        check_alive(child, log)?;
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let committed = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .any(|e| {
                e["message"] == "batch committed" && e["records"].as_u64().is_some_and(|n| n > 0)
            });
        if committed {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "no batch committed within {timeout:?}; see {}",
                log.display()
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
