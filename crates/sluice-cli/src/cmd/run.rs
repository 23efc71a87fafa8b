//! `sluice run`: the storage consumer under its supervisor (docs/ARCHITECTURE.md#supervisor).

use crate::Failure;
use sluice_core::settings::variables;
use sluice_storage::{StorageMetrics, run_pipelines};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The settings table for `sluice run --help`.
pub fn settings_help() -> String {
    let mut help = String::from("Environment (docs/ARCHITECTURE.md#settings):\n");
    for (name, default, meaning) in variables() {
        help.push_str(&format!("  {name:<38} {meaning} [default: {default}]\n"));
    }
    help.push_str(&crate::observe::help_line(38));
    help.push_str(
        "\nExit codes: 0 stopped by SIGTERM/SIGINT after committing; 1 a pipeline failed or \
         the shutdown timed out; 2 invalid settings (nothing consumed).",
    );
    help
}

/// Entry point: migrations, then the pipelines until a signal or a failure.
pub fn run() -> Result<(), Failure> {
    let settings = Arc::new(super::settings()?);
    // The endpoint starts before the migrations so that a port in use fails at once (exit 2)
    // and /health/ready says "not running" while the migrations run.
    let mut registry = prometheus_client::registry::Registry::default();
    crate::observe::register_build_info(&mut registry);
    let kinds: Vec<_> = settings.pipelines.iter().map(|p| p.kind).collect();
    let metrics = StorageMetrics::register(&mut registry, &kinds);
    let _endpoint = {
        let metrics = metrics.clone();
        crate::observe::start(
            registry,
            crate::observe::Health {
                ready: Arc::new(move || metrics.readiness()),
                // The pipelines' own failures end the process (the supervisor stops
                // them all), so while it serves, its loops are alive.
                live: Arc::new(|| Ok(())),
            },
        )?
    };
    let runtime = super::runtime()?;
    // Installed once, before any start-up work, and kept to the end (see StopSignals).
    let mut signals = {
        let _context = runtime.enter();
        super::StopSignals::install()?
    };
    // A stop signal while migrating (or waiting for another starter's migration lock) is a
    // clean stop too: the migration's transaction rolls back and nothing was consumed.
    let migrated = runtime.block_on(async {
        tokio::select! {
            result = super::migrate::apply(&settings) => result.map(|()| true),
            _ = signals.recv() => Ok(false),
        }
    });
    if !migrated? {
        tracing::info!("stop signal during migrations: exiting before any pipeline started");
        return Ok(());
    }

    let stop = CancellationToken::new();
    let supervisor = {
        let settings = Arc::clone(&settings);
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("supervisor".into())
            .spawn(move || run_pipelines(settings, &metrics, stop))?
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
            for (kind, t) in totals {
                tracing::info!(pipeline = %kind, batches = t.batches, records = t.report.records,
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
