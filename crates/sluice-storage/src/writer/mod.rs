//! One writer of a pipeline: stores one decoded batch in one transaction, retrying
//! transient failures (docs/ARCHITECTURE.md#errors) with back-off on a fresh connection.

pub(crate) mod pool;

use crate::batch::{Decoded, store_batch};
use crate::error::PipelineError;
use crate::events::BatchRetrying;
use crate::heartbeat::WriterLiveness;
use crate::metrics::PipelineMetrics;
use crate::rejects::log_rejects;
use crate::selected::Identity;
use crate::sink::StorageSink;
use sluice_core::settings::Settings;
use sluice_core::{BatchReport, DeadLetter, Disposition};
use sluice_kafka::Record;
use sluice_postgres::{disposition, sqlstate};
use sqlx::{Connection, PgConnection};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// One writer's own connection, writing through the pipeline's sink (whose reference
/// caches the writers share).
#[derive(Debug)]
pub struct Writer<'a, S> {
    index: usize,
    settings: &'a Settings,
    pipeline: &'a Identity,
    sink: &'a S,
    conn: Option<PgConnection>,
    metrics: &'a PipelineMetrics,
}

impl<'a, S: StorageSink> Writer<'a, S> {
    /// Writer `index` of the pipeline, through `sink`; it connects on first use.
    pub fn new(
        settings: &'a Settings,
        pipeline: &'a Identity,
        sink: &'a S,
        metrics: &'a PipelineMetrics,
        index: usize,
    ) -> Self {
        Self {
            index,
            settings,
            pipeline,
            sink,
            conn: None,
            metrics,
        }
    }

    /// Which writer of its pipeline this is.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Closes the connection.
    pub async fn close(mut self) {
        if let Some(conn) = self.conn.take() {
            let _ = conn.close().await;
        }
    }

    /// Stores a batch, retrying transient failures with back-off on a fresh connection.
    /// `Ok(None)`: stopped while waiting to retry.
    pub async fn store_with_retries(
        &mut self,
        records: &[Record],
        decoded: &Decoded<S::Message>,
        stop: &CancellationToken,
        liveness: &WriterLiveness,
    ) -> Result<Option<BatchReport>, PipelineError> {
        let mut delays = self.settings.db_retry.delays();
        let mut retries = 0u32;
        let stored = self
            .retry_loop(records, decoded, stop, liveness, &mut delays, &mut retries)
            .await;
        if retries > 0 {
            self.metrics.retries_over();
        }
        stored
    }

    async fn retry_loop(
        &mut self,
        records: &[Record],
        decoded: &Decoded<S::Message>,
        stop: &CancellationToken,
        liveness: &WriterLiveness,
        delays: &mut impl Iterator<Item = Duration>,
        retries: &mut u32,
    ) -> Result<Option<BatchReport>, PipelineError> {
        loop {
            let attempt = self.try_store(records, decoded).await;
            let error = match attempt {
                Ok((mut report, dead)) => {
                    report.retries = *retries;
                    log_rejects(&self.pipeline.name, &dead);
                    return Ok(Some(report));
                }
                Err(error) => error,
            };
            if disposition(&error) != Disposition::Retry {
                return Err(PipelineError::Database {
                    sqlstate: sqlstate(&error),
                    source: error,
                });
            }
            // The connection may be broken; the next attempt opens a fresh one.
            self.conn = None;
            let Some(delay) = delays.next() else {
                return Err(PipelineError::RetriesExhausted {
                    attempts: *retries,
                    source: error,
                });
            };
            if *retries == 0 {
                self.metrics.retries_begin();
            }
            *retries += 1;
            BatchRetrying {
                metrics: self.metrics,
                writer: self.index,
                error: &error,
                retry: *retries,
                delay,
            }
            .emit();
            // Waiting out an outage is what the pipeline should be doing: keep the heartbeat
            // fresh (a PostgreSQL restart must not make a liveness probe kill the process).
            let until = tokio::time::Instant::now() + delay;
            while tokio::time::Instant::now() < until {
                liveness.turn();
                let step = until.min(tokio::time::Instant::now() + Duration::from_secs(1));
                tokio::select! {
                    () = tokio::time::sleep_until(step) => {}
                    () = stop.cancelled() => return Ok(None),
                }
            }
        }
    }

    async fn try_store(
        &mut self,
        records: &[Record],
        decoded: &Decoded<S::Message>,
    ) -> Result<(BatchReport, Vec<DeadLetter>), sqlx::Error> {
        let conn = match self.conn.as_mut() {
            Some(conn) => conn,
            None => self.conn.insert(
                sluice_postgres::connect(&self.settings.database_url, &self.pipeline.name).await?,
            ),
        };
        store_batch(conn, self.sink, &self.pipeline.group, records, decoded).await
    }
}
