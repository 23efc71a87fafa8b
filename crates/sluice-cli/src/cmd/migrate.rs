//! `sluice migrate` (docs/ARCHITECTURE.md#migrations): sluice's own tables, and the seed
//! system's with `--seeds`.

use anyhow::Context;
use clap::Args;
use sluice_postgres::Scope;
use sluice_process::Failure;
use sluice_storage::StorageSettings;

/// Options of `sluice migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Also create the seed system's tables (`app_stats`, `reviews`, `network_metrics`),
    /// whose foreign keys need the applications table (`STORAGE_APPLICATIONS_TABLE`).
    /// `sluice run` does this by itself when it runs the seed pipelines.
    #[arg(long)]
    seeds: bool,
}

/// Applies the migrations of this build: sluice's own tables, and the seed system's when
/// `seeds`.
pub async fn apply(settings: &StorageSettings, seeds: bool) -> Result<(), Failure> {
    let mut conn = sluice_postgres::connect(&settings.database_url, "migrate")
        .await
        .context("cannot connect to DATABASE_URL")?;
    let scope = if seeds {
        Scope::WithSeeds {
            applications_table: &settings.applications_table,
        }
    } else {
        Scope::Own
    };
    let report = sluice_postgres::migrate::migrate_scope(&mut conn, scope, i64::MAX).await?;
    tracing::info!(
        applied = report.applied.len(),
        schema_version = report.version,
        seeds,
        "migrations done"
    );
    Ok(())
}

/// Entry point.
pub fn run(args: &MigrateArgs) -> Result<(), Failure> {
    let settings = super::settings()?;
    sluice_process::runtime()?.block_on(apply(&settings, args.seeds))
}
