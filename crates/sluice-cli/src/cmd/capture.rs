//! `sluice capture`: a publication's changes into Kafka as Debezium-compatible change
//! events, until SIGTERM/SIGINT (docs/capture.md); `sluice capture status`: the slot, its
//! confirmed position and lag, and its initial snapshot's state.
//!
//! Settings come from the environment (`CAPTURE_*`, see `--help`); an invalid value exits 2.
//! A stop signal lets what was sent be acknowledged and confirmed to the slot, and the
//! process exits 0. A broken connection or a failed delivery starts a new session from the
//! slot's confirmed position; anything else exits 1, a record Kafka refuses for good too.

use clap::Subcommand;
use sluice_capture::metrics::{CaptureMetrics, probe_slot};
use sluice_capture::relay::capture;
use sluice_capture::relay::state::StateTopic;
use sluice_capture::settings::{CaptureSettings, variables};
use sluice_kafka::ResilientProducer;
use sluice_process::Failure;
use sqlx::Connection;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// `sluice capture` actions (none: capture until stopped).
#[derive(Debug, Subcommand)]
pub enum CaptureAction {
    /// The slot (active or not), its confirmed position, the WAL it keeps, and whether its
    /// initial snapshot completed; exit 1 when the slot does not exist.
    Status,
}

/// How often the slot's lag and activity are read for the metrics and readiness.
const PROBE_EVERY: Duration = Duration::from_secs(10);

/// How long Kafka has to acknowledge a record before the session ends and a new one
/// re-sends it.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// The producer's linger: change events of one transaction batch together.
const LINGER: Duration = Duration::from_millis(5);
/// The producer's queue: the records waiting for Kafka at most, the most of the process's
/// memory. 16 MiB drained a 200,000-change backlog as fast as 64 MiB did (50,731 against
/// 49,583 events/s, `sluice-lab bench capture`) with less than half the peak RSS (66 against
/// 142 MiB); `KAFKA_QUEUE_BUFFERING_MAX_KBYTES` sets it.
const QUEUE_BYTES: usize = 16 * 1024 * 1024;

/// The settings table for `sluice capture --help`.
pub fn settings_help() -> String {
    let mut help = String::from("Environment:\n");
    for variable in variables() {
        help.push_str(&variable.help_line(32));
    }
    help.push_str(
        "\nExit codes: 0 stopped by SIGTERM/SIGINT after what was sent was acknowledged; 1 a \
         failure no new session can get past (a change that cannot be encoded, a record \
         Kafka refuses for good, a missing publication); 2 invalid settings.",
    );
    help
}

/// Entry point.
pub fn run(action: Option<CaptureAction>) -> Result<(), Failure> {
    let names = sluice_process::env_names();
    let run_id = uuid::Uuid::new_v4().to_string();
    let settings = CaptureSettings::from_vars(
        &sluice_process::env_lookup,
        names.iter().map(String::as_str),
        &run_id,
    )
    .map_err(Failure::config)?;
    match action {
        Some(CaptureAction::Status) => status(&settings),
        None => serve(settings),
    }
}

/// Captures until SIGTERM/SIGINT, with the metrics endpoint when `SLUICE_HTTP_ADDR` is set.
fn serve(settings: CaptureSettings) -> Result<(), Failure> {
    sluice_process::check_kafka(&settings.kafka)?;
    let producer = ResilientProducer::with_timings(
        &settings.kafka,
        "sluice-capture",
        DELIVERY_TIMEOUT,
        LINGER,
        QUEUE_BYTES,
    )?;
    let mut registry = prometheus_client::registry::Registry::default();
    sluice_process::register_build_info(&mut registry);
    let metrics = CaptureMetrics::register(&mut registry);
    let endpoint = sluice_process::endpoint::start(
        registry,
        sluice_process::endpoint::Health::of(
            &metrics,
            CaptureMetrics::readiness,
            CaptureMetrics::liveness,
        ),
    )?;
    let (runtime, mut signals) = sluice_process::service_runtime()?;
    runtime.block_on(async {
        let stop = CancellationToken::new();
        if endpoint.is_some() {
            tokio::spawn(probe_slot(
                settings.database_url.clone(),
                settings.source.slot().to_owned(),
                metrics.clone(),
                PROBE_EVERY,
                stop.child_token(),
            ));
        }
        let child = stop.child_token();
        let slot = settings.source.slot().to_owned();
        let task =
            tokio::spawn(async move { capture(&settings, &producer, &metrics, child).await });
        let report = sluice_process::run_until_signal("capture", &mut signals, stop, task)
            .await
            .inspect_err(|_| {
                // A stopped capture's slot keeps the source's WAL from being recycled.
                tracing::warn!(%slot, "if the replication slot exists (`sluice capture status`), \
                    it keeps the source's WAL while the capture is stopped: start it again once \
                    fixed, or, to retire this capture, drop the slot \
                    (SELECT pg_drop_replication_slot('{slot}'))");
            })?;
        tracing::info!(
            transactions = report.transactions,
            records = report.records,
            confirmed = ?report.confirmed,
            "capture stopped"
        );
        Ok(())
    })
}

/// `sluice capture status`.
fn status(settings: &CaptureSettings) -> Result<(), Failure> {
    let runtime = sluice_process::runtime()?;
    let slot = settings.source.slot();
    let state = runtime.block_on(async {
        let mut conn = sqlx::PgConnection::connect(&settings.database_url).await?;
        Ok::<_, anyhow::Error>(sluice_capture::metrics::slot_state(&mut conn, slot).await?)
    })?;
    let database = &settings.envelope.database;
    let Some(state) = state else {
        println!(
            "slot {slot} on database {database}: does not exist (the capture makes it at its first start)"
        );
        return Err(anyhow::anyhow!("replication slot {slot} does not exist").into());
    };
    println!(
        "slot {slot} on database {database}: {}, confirmed {}, keeps {} bytes of WAL (from its restart_lsn)",
        if state.active {
            "active"
        } else {
            "inactive (no session streams from it)"
        },
        state.confirmed.as_deref().unwrap_or("none"),
        state
            .kept_bytes
            .map_or_else(|| "?".to_owned(), |l| l.to_string()),
    );
    let snapshot = match &settings.snapshot {
        None => "not taken (CAPTURE_SNAPSHOT=never)".to_owned(),
        Some(topic) => {
            let key = (settings.envelope.prefix.as_str(), database.as_str(), slot);
            let state = StateTopic::new(&settings.kafka, topic, key);
            match runtime.block_on(state.last()) {
                Ok(Some(s)) => format!("{} (topic {topic})", format!("{s:?}").to_lowercase()),
                Ok(None) => format!("no record in topic {topic}"),
                Err(e) => format!("unknown: topic {topic}: {e}"),
            }
        }
    };
    println!("initial snapshot: {snapshot}");
    Ok(())
}
