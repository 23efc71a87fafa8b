//! `sluice migrate` (docs/ARCHITECTURE.md#migrations).

use anyhow::Context;
use sluice_core::Settings;
use sluice_process::Failure;

/// Applies the migrations of this build.
pub async fn apply(settings: &Settings) -> Result<(), Failure> {
    let mut conn = sluice_postgres::connect(&settings.database_url, "migrate")
        .await
        .context("cannot connect to DATABASE_URL")?;
    let report = sluice_postgres::migrate(&mut conn, &settings.applications_table).await?;
    tracing::info!(
        applied = report.applied.len(),
        schema_version = report.version,
        "migrations done"
    );
    Ok(())
}

/// Entry point.
pub fn run() -> Result<(), Failure> {
    let settings = super::settings()?;
    sluice_process::runtime()?.block_on(apply(&settings))
}
