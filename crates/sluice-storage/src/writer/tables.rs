//! A batch whose records name tables not planned yet (a sink of many tables,
//! docs/sinks.md#many-tables): the writer plans them on its connection — the catalog read and
//! the statements prepared, as for a fixed table at start — then decodes the batch again. A
//! database that cannot be reached is waited for with the batch loop's back-off; nothing of
//! the batch is stored meanwhile, so nothing is lost. A batch whose sink refused records has
//! their tables read from the catalog again, in case a change let them in (`sink/refresh.rs`).

use super::Writer;
use super::schemas::sleep_or_stop;
use crate::batch::{DecodedBatch, decode_batch};
use crate::error::PipelineError;
use crate::heartbeat::WriterLiveness;
use crate::sink::Refresh;
use sluice_kafka::Record;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

impl Writer<'_> {
    /// `decoded` once every table it waits for and every writer's schema it needs is known,
    /// decoded again each time; `Ok(None)`: stopped while waiting.
    pub(super) async fn ready(
        &mut self,
        mut decoded: DecodedBatch,
        records: &[Record],
        stop: &CancellationToken,
        liveness: &WriterLiveness,
    ) -> Result<Option<DecodedBatch>, PipelineError> {
        loop {
            let next = if !decoded.pending_tables.is_empty() {
                self.with_tables(&decoded.pending_tables, records, stop, liveness)
                    .await?
            } else if !decoded.pending.is_empty() {
                self.with_schemas(decoded, records, stop, liveness).await?
            } else {
                match self.refreshed(&decoded, stop, liveness).await {
                    Some(true) => Some(decode_batch(self.sink, records)),
                    Some(false) => return Ok(Some(decoded)),
                    None => None,
                }
            };
            match next {
                Some(next) => decoded = next,
                None => return Ok(None),
            }
        }
    }

    /// Whether `decoded` must be decoded again because a table's plan changed
    /// (`sink/refresh.rs`); `None` when stopped first. A database that cannot be reached now
    /// leaves the batch as it was decoded: storing it meets the same database, and retries
    /// it there. The heartbeat stays fresh meanwhile (a catalog read may wait for a lock).
    async fn refreshed(
        &mut self,
        decoded: &DecodedBatch,
        stop: &CancellationToken,
        liveness: &WriterLiveness,
    ) -> Option<bool> {
        let sink = self.sink;
        let tables = match sink.refresh_of(decoded) {
            Refresh::Nothing => return Some(false),
            Refresh::DecodeAgain => return Some(true),
            Refresh::Check(tables) => tables,
        };
        let replanned = {
            let read = async {
                let conn = self.connection().await?;
                sink.replan(conn, &tables, decoded.generation).await
            };
            tokio::pin!(read);
            loop {
                liveness.turn();
                tokio::select! {
                    replanned = &mut read => break Some(replanned),
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    () = stop.cancelled() => break None,
                }
            }
        };
        match replanned {
            Some(Ok(again)) => Some(again),
            // Stopped in the middle of a read: the connection may be mid-statement.
            None => {
                self.forget_connection();
                None
            }
            Some(Err(error)) => {
                tracing::warn!(pipeline = %self.pipeline.name, writer = self.index, %error,
                    "cannot read the catalog for a table's changes; the batch goes on as decoded");
                self.forget_connection();
                Some(false)
            }
        }
    }

    /// The batch decoded again once `tables` are planned; `Ok(None)`: stopped first.
    async fn with_tables(
        &mut self,
        tables: &[crate::sink::PendingTable],
        records: &[Record],
        stop: &CancellationToken,
        liveness: &WriterLiveness,
    ) -> Result<Option<DecodedBatch>, PipelineError> {
        let sink = self.sink;
        let mut delays = self.settings.db_retry.delays();
        let mut attempts = 0u32;
        loop {
            liveness.turn();
            let planned = match self.connection().await {
                Ok(conn) => sink.plan(conn, tables).await,
                Err(error) => Err(error),
            };
            let error = match planned {
                Ok(()) => return Ok(Some(decode_batch(sink, records))),
                Err(error) => error,
            };
            let (delay, error) = self.next_wait(error, &mut delays, attempts)?;
            attempts += 1;
            tracing::warn!(pipeline = %self.pipeline.name, writer = self.index, %error,
                delay_ms = delay.as_millis() as u64, "cannot plan the batch's tables yet; retrying");
            if !sleep_or_stop(delay, stop, liveness).await {
                return Ok(None);
            }
        }
    }
}
