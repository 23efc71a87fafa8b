//! `sluice dispatch`: the outbox dispatcher until SIGTERM/SIGINT.
//!
//! Settings come from the environment (`OUTBOX_*`, see `--help`); an invalid value exits 2.
//! A stop signal lets the batch in flight finish (publish, then mark), and the process exits
//! 0. Several dispatchers may run at once.

use anyhow::anyhow;
use sluice_dispatch::Dispatcher;
use sluice_dispatch::metrics::DispatchMetrics;
use sluice_dispatch::probe::run_probe;
use sluice_dispatch::settings::{OutboxSettings, variables};
use sluice_process::Failure;
use sqlx::{Connection, PgConnection};
use tokio_util::sync::CancellationToken;

/// The settings table for `sluice dispatch --help`.
pub fn settings_help() -> String {
    let mut help = String::from("Environment:\n");
    for variable in variables() {
        help.push_str(&variable.help_line(32));
    }
    help.push_str(&sluice_process::endpoint::help_line(32));
    help.push_str(
        "\nExit codes: 0 stopped by SIGTERM/SIGINT after the batch in flight; 1 the outbox \
         table is missing or the dispatcher failed; 2 invalid settings.",
    );
    help
}

/// `hostname-pid`: the default dispatcher id (the host name as the storage consumer's
/// static member id reads it).
fn default_dispatcher_id() -> String {
    let host = sluice_process::env_lookup("HOSTNAME")
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "sluice".to_owned());
    format!("{host}-{}", std::process::id())
}

/// The dispatcher settings from the process environment (exit 2 when invalid).
pub fn outbox_settings() -> Result<OutboxSettings, Failure> {
    let names = sluice_process::env_names();
    let settings = OutboxSettings::from_vars(
        &sluice_process::env_lookup,
        names.iter().map(String::as_str),
        &default_dispatcher_id(),
    )
    .map_err(Failure::config)?;
    sluice_process::check_kafka(&settings.kafka)?;
    Ok(settings)
}

/// Fails unless the outbox table exists (run `sluice migrate` first).
pub async fn require_outbox_table(conn: &mut PgConnection) -> Result<(), Failure> {
    if !sluice_outbox::store::outbox_table_exists(conn).await? {
        return Err(
            anyhow!("the outbox_events table does not exist; run `sluice migrate` first").into(),
        );
    }
    Ok(())
}

/// Entry point.
pub fn run() -> Result<(), Failure> {
    let settings = outbox_settings()?;
    // The endpoint starts first: a port in use fails at once (exit 2).
    let mut registry = prometheus_client::registry::Registry::default();
    sluice_process::register_build_info(&mut registry);
    // A healthy loop goes round at least once per batch: claim, publish (bounded by the
    // delivery timeout), mark.
    let live_within =
        settings.delivery_timeout * 2 + settings.poll_interval + std::time::Duration::from_secs(60);
    let metrics = DispatchMetrics::register(&mut registry, live_within);
    let endpoint = sluice_process::endpoint::start(
        registry,
        sluice_process::endpoint::Health::of(
            &metrics,
            DispatchMetrics::readiness,
            DispatchMetrics::liveness,
        ),
    )?;
    let (runtime, mut signals) = sluice_process::service_runtime()?;
    runtime.block_on(async {
        let mut conn = sluice_postgres::connect(&settings.database_url, "dispatch").await?;
        require_outbox_table(&mut conn).await?;
        conn.close().await?;
        let stop = CancellationToken::new();
        if endpoint.is_some() {
            tokio::spawn(run_probe(
                settings.clone(),
                metrics.clone(),
                stop.child_token(),
            ));
        }
        let dispatcher = Dispatcher::new(settings)?.with_metrics(metrics);
        let task = tokio::spawn(dispatcher.run(stop.child_token()));
        sluice_process::run_until_signal("dispatcher", &mut signals, stop, task)
            .await
            .map(|_totals| ())
    })
}
