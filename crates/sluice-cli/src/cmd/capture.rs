//! `sluice capture`: a publication's changes into Kafka as Debezium-compatible change
//! events, until SIGTERM/SIGINT (docs/capture.md).
//!
//! Settings come from the environment (`CAPTURE_*`, see `--help`); an invalid value exits 2.
//! A stop signal lets what was sent be acknowledged and confirmed to the slot, and the
//! process exits 0. A broken connection or a failed delivery starts a new session from the
//! slot's confirmed position; anything else exits 1.

use sluice_capture::relay::capture;
use sluice_capture::settings::{CaptureSettings, variables};
use sluice_kafka::ResilientProducer;
use sluice_process::Failure;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long Kafka has to acknowledge a record before the session ends and a new one
/// re-sends it.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);
/// The producer's linger: change events of one transaction batch together.
const LINGER: Duration = Duration::from_millis(5);
/// The producer's queue: the records waiting for Kafka at most.
const QUEUE_BYTES: usize = 64 * 1024 * 1024;

/// The settings table for `sluice capture --help`.
pub fn settings_help() -> String {
    let mut help = String::from("Environment:\n");
    for variable in variables() {
        help.push_str(&variable.help_line(32));
    }
    help.push_str(
        "\nExit codes: 0 stopped by SIGTERM/SIGINT after what was sent was acknowledged; 1 a \
         failure no new session can get past (a change that cannot be encoded, a missing \
         publication); 2 invalid settings.",
    );
    help
}

/// Entry point.
pub fn run() -> Result<(), Failure> {
    let names = sluice_process::env_names();
    let run_id = uuid::Uuid::new_v4().to_string();
    let settings = CaptureSettings::from_vars(
        &sluice_process::env_lookup,
        names.iter().map(String::as_str),
        &run_id,
    )
    .map_err(Failure::config)?;
    sluice_process::check_kafka(&settings.kafka)?;
    let producer = ResilientProducer::with_timings(
        &settings.kafka,
        "sluice-capture",
        DELIVERY_TIMEOUT,
        LINGER,
        QUEUE_BYTES,
    )?;
    let (runtime, mut signals) = sluice_process::service_runtime()?;
    runtime.block_on(async {
        let stop = CancellationToken::new();
        let child = stop.child_token();
        let task = tokio::spawn(async move { capture(&settings, &producer, child).await });
        let report = sluice_process::run_until_signal("capture", &mut signals, stop, task).await?;
        tracing::info!(
            transactions = report.transactions,
            records = report.records,
            confirmed = ?report.confirmed,
            "capture stopped"
        );
        Ok(())
    })
}
