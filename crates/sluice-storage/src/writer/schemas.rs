//! A batch that met a writer's schema not fetched yet (docs/ARCHITECTURE.md#registry-formats):
//! the writer fetches the schemas and decodes the batch again before storing it. A registry
//! that cannot be reached is waited for with back-off, however long it takes — the records
//! stay in their batch, none is dead-lettered for it — while readiness says why and the
//! heartbeat stays fresh (the requests run on a blocking thread); a stop ends the wait at once
//! with nothing committed, even in the middle of a request.

use super::Writer;
use crate::batch::{DecodedBatch, decode_batch};
use crate::error::PipelineError;
use crate::heartbeat::WriterLiveness;
use crate::sink::Tables;
use sluice_core::Disposition;
use sluice_kafka::Record;
use sluice_registry::RegistryError;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The first wait for the registry; it doubles up to [`LONGEST_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(250);

/// The longest wait between two attempts.
const LONGEST_WAIT: Duration = Duration::from_secs(10);

impl Writer<'_> {
    /// `decoded` with every schema it waits for fetched and the batch decoded again;
    /// `Ok(None)`: stopped while waiting.
    pub(super) async fn with_schemas(
        &mut self,
        mut decoded: DecodedBatch,
        records: &[Record],
        stop: &CancellationToken,
        liveness: &WriterLiveness,
    ) -> Result<Option<DecodedBatch>, PipelineError> {
        let mut wait = FIRST_WAIT;
        let mut waited = false;
        while !decoded.pending.is_empty() {
            liveness.turn();
            let Some(fetched) = fetch_or_stop(self.sink, &decoded.pending, stop, liveness).await
            else {
                if waited {
                    self.metrics.retries_over();
                }
                return Ok(None);
            };
            match fetched {
                Ok(()) => {
                    decoded = decode_batch(self.sink, records);
                    continue;
                }
                Err(error) if error.disposition() == Disposition::Fatal => {
                    if waited {
                        self.metrics.retries_over();
                    }
                    return Err(PipelineError::Registry(error));
                }
                Err(error) => {
                    if !waited {
                        self.metrics.retries_begin();
                        waited = true;
                    }
                    self.metrics.waiting_for_registry(&error.to_string());
                    tracing::warn!(pipeline = %self.pipeline.name, writer = self.index,
                        schema_ids = ?decoded.pending, %error, wait_ms = wait.as_millis() as u64,
                        "schema registry unavailable; the batch waits for it");
                }
            }
            if !sleep_or_stop(wait, stop, liveness).await {
                if waited {
                    self.metrics.retries_over();
                }
                return Ok(None);
            }
            wait = (wait * 2).min(LONGEST_WAIT);
        }
        if waited {
            self.metrics.retries_over();
            tracing::info!(pipeline = %self.pipeline.name, writer = self.index,
                "schema registry answered; the batch goes on");
        }
        Ok(Some(decoded))
    }
}

/// Fetches the schemas of `ids` on a blocking thread while the writer's heartbeat is kept
/// fresh; `None` when stopped first. The requests block (up to `SCHEMA_REGISTRY_TIMEOUT_MS`
/// each, several for a schema with references): a registry that is slow or does not answer is
/// being waited for, not a stuck writer, and a stop must not wait for its answer (a request
/// left behind ends on its own, at its timeout).
async fn fetch_or_stop(
    sink: &Tables,
    ids: &[i32],
    stop: &CancellationToken,
    liveness: &WriterLiveness,
) -> Option<Result<(), RegistryError>> {
    let Some(registry) = sink.registry().cloned() else {
        return Some(sink.fetch_schemas(ids));
    };
    let ids = ids.to_vec();
    let mut fetch = tokio::task::spawn_blocking(move || registry.fetch(&ids));
    loop {
        liveness.turn();
        tokio::select! {
            joined = &mut fetch => return match joined {
                Ok(fetched) => Some(fetched),
                // The fetch panicked: the writer panics as it would have on its own thread.
                Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
                // Cancelled: only the runtime shutting down does that.
                Err(_) => None,
            },
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = stop.cancelled() => return None,
        }
    }
}

/// Sleeps `wait` in steps of a second (the heartbeat kept fresh); false when stopped.
pub(super) async fn sleep_or_stop(
    wait: Duration,
    stop: &CancellationToken,
    liveness: &WriterLiveness,
) -> bool {
    let until = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < until {
        liveness.turn();
        let step = until.min(tokio::time::Instant::now() + Duration::from_secs(1));
        tokio::select! {
            () = tokio::time::sleep_until(step) => {}
            () = stop.cancelled() => return false,
        }
    }
    true
}
