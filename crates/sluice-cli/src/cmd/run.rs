//! `sluice run`: the storage consumer under its supervisor (docs/ARCHITECTURE.md#supervisor).

use super::pipelines::Pipelines;
use anyhow::anyhow;
use clap::Args;
use sluice_process::Failure;
use sluice_storage::settings::{HEARTBEAT_DIR, variables};
use sluice_storage::{Pipeline, StorageMetrics, Unplanned, plan_pipelines, run_selected};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Options of `sluice run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// A mapping file of declared sinks, or a folder of them (`*.toml`); default
    /// `SLUICE_SINKS_FILE`. Its sinks run, and the seed pipelines only if
    /// `STORAGE_PIPELINES` names them.
    #[arg(long = "sinks", value_name = "FILE|DIR")]
    sinks: Option<String>,
}

/// The settings table for `sluice run --help`.
pub fn settings_help() -> String {
    let mut help = String::from("Environment (docs/ARCHITECTURE.md#settings):\n");
    for variable in variables() {
        help.push_str(&variable.help_line(38));
    }
    help.push_str(&sluice_process::endpoint::help_line(38));
    help.push_str(
        "\nExit codes: 0 stopped by SIGTERM/SIGINT after committing; 1 a pipeline failed or \
         the shutdown timed out; 2 invalid settings or mapping file (nothing consumed).",
    );
    help
}

/// Entry point: migrations, then the pipelines until a signal or a failure.
pub fn run(args: &RunArgs) -> Result<(), Failure> {
    let pipelines = with_usable_heartbeat_dir(Pipelines::load(args.sinks.as_deref())?)?;
    let names = listed_for_health(&pipelines)?;
    let settings = Arc::new(pipelines.settings.clone());
    // The seed system's tables only for a process that runs its pipelines (compiled in or
    // from `deploy/sinks/`): a deployment of its own sinks gets sluice's own tables alone.
    let seeds = pipelines.needs()?.seeds;
    // The endpoint starts before the migrations so that a port in use fails at once (exit 2)
    // and /health/ready says "not running" while the migrations run.
    let mut registry = prometheus_client::registry::Registry::default();
    sluice_process::register_build_info(&mut registry);
    let metrics = StorageMetrics::register(&mut registry, &names);
    let _endpoint = {
        let metrics = metrics.clone();
        sluice_process::endpoint::start(
            registry,
            sluice_process::endpoint::Health {
                ready: Arc::new(move || metrics.readiness()),
                // The pipelines' own failures end the process (the supervisor stops
                // them all), so while it serves, its loops are alive.
                live: Arc::new(|| Ok(())),
            },
        )?
    };
    let runtime = sluice_process::runtime()?;
    // Installed once, before any start-up work, and kept to the end (see StopSignals).
    let mut signals = {
        let _context = runtime.enter();
        sluice_process::StopSignals::install()?
    };
    // A stop signal while migrating (or waiting for another starter's migration lock) is a
    // clean stop too: the migration's transaction rolls back and nothing was consumed.
    let migrated = runtime.block_on(async {
        tokio::select! {
            result = super::migrate::apply(&settings, seeds) => result.map(|()| true),
            _ = signals.recv() => Ok(false),
        }
    });
    if !migrated? {
        tracing::info!("stop signal during migrations: exiting before any pipeline started");
        return Ok(());
    }
    // Declared sinks are validated against the schema the migrations left: a table or column
    // that does not fit exits 2 naming the sink and the column, before any consumer exists.
    let selected = runtime.block_on(selected(&pipelines, &settings))?;

    let stop = CancellationToken::new();
    let supervisor = {
        let settings = Arc::clone(&settings);
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("supervisor".into())
            .spawn(move || run_selected(settings, selected, &metrics, stop))?
    };
    runtime.block_on(async {
        let watch = stop.clone();
        tokio::select! {
            signal = signals.recv() => tracing::info!("{signal}: finishing the batches in flight"),
            () = watch.cancelled() => {}
        }
        stop.cancel();
    });
    match supervisor.join() {
        Ok(Ok(totals)) => {
            for (name, t) in totals {
                tracing::info!(pipeline = %name, batches = t.batches, records = t.report.records,
                    inserted = t.report.write.inserted, updated = t.report.write.updated,
                    skipped = t.report.write.skipped, dead_lettered = t.report.dead_lettered(),
                    "pipeline totals");
            }
            Ok(())
        }
        Ok(Err(error)) => Err(error.into()),
        Err(_) => Err(anyhow::anyhow!("the supervisor thread panicked").into()),
    }
}

/// The selected pipelines — the seeds the settings name and the mapping file's sinks —
/// planned against the live schema.
async fn selected(
    pipelines: &Pipelines,
    settings: &sluice_storage::StorageSettings,
) -> Result<Vec<Pipeline>, Failure> {
    let selection = pipelines.selection()?;
    let mut sinks = Vec::new();
    for seed in &selection.seeds {
        sinks.push(Unplanned::seed(seed, settings).map_err(|e| anyhow!("{e}"))?);
    }
    for sink in &selection.declared {
        sinks.push(Unplanned::declared((*sink).clone(), settings));
    }
    let mut conn = sluice_postgres::connect(&settings.database_url, "sinks-plan").await?;
    let planned = plan_pipelines(&mut conn, sinks, &pipelines.group_prefix)
        .await
        .map_err(|e| anyhow!("cannot read the catalog: {e}"))?;
    let _ = sqlx::Connection::close(conn).await;
    match planned {
        Ok(selected) => {
            // Blocking requests, once, before any consumer exists.
            registry_subjects(&selected, settings)?;
            Ok(selected)
        }
        Err(errors) => {
            for error in &errors {
                eprintln!("sluice: invalid: {error}");
            }
            let file = pipelines
                .file
                .as_deref()
                .unwrap_or("the seed mapping files");
            Err(Failure::config(anyhow!(
                "{file}: {} error(s) against the database's schema; nothing was consumed",
                errors.len()
            )))
        }
    }
}

/// Each sink reading a schema registry format checked against its subject's latest version
/// (a field no version has stops the process with exit 2); a registry that cannot be asked
/// now is not a reason to stop (the records wait for it).
pub(super) fn registry_subjects(
    selected: &[Pipeline],
    settings: &sluice_storage::StorageSettings,
) -> Result<(), Failure> {
    let sinks: Vec<&sluice_sinks::Sink> = selected
        .iter()
        .map(|p| &p.sink)
        .filter(|s| s.value_encoding.is_registry() || s.key_encoding.is_registry())
        .collect();
    let Some(first) = sinks.first() else {
        return Ok(());
    };
    let Some(registry_settings) = &settings.registry else {
        return Err(Failure::config(anyhow!(
            "sink `{}` reads a schema registry format: SCHEMA_REGISTRY_URL is not set",
            first.name
        )));
    };
    let registry = sluice_registry::Registry::new(registry_settings)
        .map_err(|e| Failure::config(anyhow!("{e}")))?;
    let checks = sluice_storage::subjects::check_subjects(&sinks, &registry);
    let mut refused = 0;
    for check in &checks {
        if check.refuses() {
            refused += 1;
            eprintln!("sluice: invalid: {check}");
        } else {
            tracing::info!(sink = %check.sink, subject = %check.subject, "{check}");
        }
    }
    if refused > 0 {
        return Err(Failure::config(anyhow!(
            "{refused} sink subject(s) lack mapped fields; nothing was consumed"
        )));
    }
    Ok(())
}

/// The pipelines' names, listed in the heartbeat directory: `sluice health` without
/// arguments (a container's health check) checks these.
fn listed_for_health(pipelines: &Pipelines) -> Result<Vec<String>, Failure> {
    let names: Vec<String> = pipelines
        .names()?
        .into_iter()
        .map(|(name, ..)| name)
        .collect();
    let dir = std::path::Path::new(&pipelines.settings.heartbeat_dir);
    if let Err(error) = sluice_storage::heartbeat::write_manifest(dir, &names) {
        tracing::warn!(%error, "cannot list the pipelines for `sluice health`: give it --sinks");
    }
    Ok(names)
}

/// A heartbeat directory set by `STORAGE_HEARTBEAT_DIR` that cannot be made or opened is a
/// setting to fix (exit 2), found before anything is consumed. The default one may be
/// unusable where nothing reads heartbeat files (a read-only root file system probed over
/// HTTP, whose readiness does not read them): a warning, as a write failing later is.
fn with_usable_heartbeat_dir(pipelines: Pipelines) -> Result<Pipelines, Failure> {
    let (dir, variable) = (&pipelines.settings.heartbeat_dir, HEARTBEAT_DIR.name);
    if let Err(error) = sluice_storage::heartbeat::prepare_dir(std::path::Path::new(dir)) {
        if std::env::var(variable).is_ok_and(|v| !v.trim().is_empty()) {
            return Err(Failure::config(anyhow!("{variable}={dir:?}: {error}")));
        }
        tracing::warn!(%error, "the default heartbeat directory cannot be used: `sluice health` will fail (set {variable})");
    }
    Ok(pipelines)
}
