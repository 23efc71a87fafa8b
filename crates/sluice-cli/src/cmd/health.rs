//! `sluice health` (docs/ARCHITECTURE.md#health): exit 0 only if every expected pipeline's heartbeat is fresh.

use clap::Args;
use sluice_process::Failure;
use sluice_storage::heartbeat;
use std::path::Path;
use std::time::Duration;

/// Options of `sluice health`.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// A heartbeat older than this many seconds is stale.
    #[arg(long, default_value_t = 10, env = "STORAGE_HEALTH_MAX_AGE_SECONDS")]
    max_age_seconds: u64,
    /// The mapping file (or folder) of declared sinks; default `SLUICE_SINKS_FILE`. Without
    /// either, the pipelines the running `sluice run` listed in the heartbeat directory, else
    /// the seed pipelines.
    #[arg(long = "sinks", value_name = "FILE|DIR")]
    sinks: Option<String>,
}

/// Entry point.
pub fn run(args: &HealthArgs) -> Result<(), Failure> {
    let pipelines = super::pipelines::Pipelines::load(args.sinks.as_deref())?;
    let dir = Path::new(&pipelines.settings.heartbeat_dir);
    let max_age = Duration::from_secs(args.max_age_seconds);
    // `--sinks` or `SLUICE_SINKS_FILE` say which; else what the running process listed.
    let told = args.sinks.is_some()
        || sluice_process::env_lookup("SLUICE_SINKS_FILE").is_some_and(|f| !f.trim().is_empty());
    let listed = match told {
        true => None,
        false => heartbeat::read_manifest(dir).filter(|names| !names.is_empty()),
    };
    let names = match listed {
        Some(names) => names,
        None => pipelines
            .names()?
            .into_iter()
            .map(|(name, ..)| name)
            .collect(),
    };
    let mut stale = Vec::new();
    for name in names {
        match heartbeat::age(dir, &name) {
            Some(age) if age <= max_age => println!("{name}: ok ({} ms ago)", age.as_millis()),
            Some(age) => {
                println!("{name}: STALE (last heartbeat {} s ago)", age.as_secs());
                stale.push(name);
            }
            None => {
                println!("{name}: STALE (no heartbeat file in {})", dir.display());
                stale.push(name);
            }
        }
    }
    if stale.is_empty() {
        Ok(())
    } else {
        Err(anyhow::anyhow!("unhealthy pipelines: {}", stale.join(", ")).into())
    }
}
