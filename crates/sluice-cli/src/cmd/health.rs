//! `sluice health` (docs/ARCHITECTURE.md#health): exit 0 only if every expected pipeline's heartbeat is fresh.

use crate::Failure;
use clap::Args;
use sluice_storage::heartbeat;
use std::path::Path;
use std::time::Duration;

/// Options of `sluice health`.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// A heartbeat older than this many seconds is stale.
    #[arg(long, default_value_t = 10, env = "STORAGE_HEALTH_MAX_AGE_SECONDS")]
    max_age_seconds: u64,
}

/// Entry point.
pub fn run(args: &HealthArgs) -> Result<(), Failure> {
    let settings = super::settings()?;
    let dir = Path::new(&settings.heartbeat_dir);
    let max_age = Duration::from_secs(args.max_age_seconds);
    let mut stale = Vec::new();
    for pipeline in &settings.pipelines {
        let name = pipeline.kind.name();
        match heartbeat::age(dir, name) {
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
