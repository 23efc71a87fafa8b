//! The batch loop of one pipeline (SPEC S3.1).
//!
//! Invariant: an offset is committed to Kafka only after the PostgreSQL transaction that
//! holds its batch's effect has committed. No state survives from one poll to the next,
//! so a rebalance in the middle of a batch only means the uncommitted batch is redelivered
//! to whoever gets the partition, and `ON CONFLICT` makes that a no-op.

use crate::batch::{Decoded, decode_batch, store_batch};
use crate::heartbeat::Heartbeat;
use crate::kind::{AppStatsTopic, NetworkMetricsTopic, ReviewsTopic, TopicKind};
use crate::rejects::log_rejects;
use sluice_core::settings::{PipelineSettings, Settings};
use sluice_core::{BatchReport, Disposition, PipelineKind};
use sluice_kafka::config::ConsumerOptions;
use sluice_kafka::{BatchConsumer, Record};
use sluice_postgres::{ApplicationResolver, disposition, sqlstate};
use sqlx::{Connection, PgConnection};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Consecutive failed offset commits after which the pipeline fails on purpose: a livelock
/// that never lowers lag is worse than a crash (SPEC S3.1).
pub const MAX_CONSECUTIVE_COMMIT_FAILURES: u32 = 5;

/// Why a pipeline stopped with an error. Every variant is fatal for the process.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The Kafka client could not be created or failed fatally.
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
    /// A database error that is not transient (e.g. a revoked privilege).
    #[error("database error (not transient, SQLSTATE {}): {source}", .sqlstate.as_deref().unwrap_or("none"))]
    Database {
        /// The SQLSTATE, if the server sent one.
        sqlstate: Option<String>,
        /// The error.
        #[source]
        source: sqlx::Error,
    },
    /// A transient database error that outlasted every retry.
    #[error("database still failing after {attempts} retries: {source}")]
    RetriesExhausted {
        /// Retries made.
        attempts: u32,
        /// The last error.
        #[source]
        source: sqlx::Error,
    },
    /// Too many consecutive offset-commit failures.
    #[error("{count} consecutive offset commits failed; last error: {last}")]
    CommitFailures {
        /// How many in a row.
        count: u32,
        /// The last error.
        last: rdkafka::error::KafkaError,
    },
}

/// Totals of a pipeline run, returned when it stops cleanly.
#[derive(Debug, Clone, Copy, Default)]
pub struct PipelineTotals {
    /// Batches committed.
    pub batches: u64,
    /// Sum of every batch's counters.
    pub report: BatchReport,
}

/// Runs one pipeline until `stop` is cancelled (Ok) or a fatal error (Err).
pub async fn run_pipeline(
    settings: &Settings,
    pipeline: &PipelineSettings,
    stop: &CancellationToken,
) -> Result<PipelineTotals, PipelineError> {
    match pipeline.kind {
        PipelineKind::AppStats => run_typed::<AppStatsTopic>(settings, pipeline, stop).await,
        PipelineKind::Reviews => run_typed::<ReviewsTopic>(settings, pipeline, stop).await,
        PipelineKind::NetworkMetrics => {
            run_typed::<NetworkMetricsTopic>(settings, pipeline, stop).await
        }
    }
}

struct Worker<'a> {
    settings: &'a Settings,
    pipeline: &'a PipelineSettings,
    resolver: ApplicationResolver,
    conn: Option<PgConnection>,
}

async fn run_typed<K: TopicKind>(
    settings: &Settings,
    pipeline: &PipelineSettings,
    stop: &CancellationToken,
) -> Result<PipelineTotals, PipelineError> {
    let client_id = format!("sluice-{}-{}", pipeline.kind, std::process::id());
    let consumer = BatchConsumer::subscribe(
        &ConsumerOptions {
            bootstrap_servers: &settings.bootstrap_servers,
            group: &pipeline.group,
            auto_offset_reset: settings.auto_offset_reset.as_str(),
            session_timeout: settings.session_timeout,
            max_poll_interval: settings.max_poll_interval,
            client_id: &client_id,
        },
        &pipeline.topic,
    )?;
    let mut worker = Worker {
        settings,
        pipeline,
        resolver: ApplicationResolver::new(&settings.applications_table, settings.app_cache_ttl),
        conn: None,
    };
    let mut heartbeat = Heartbeat::new(Path::new(&settings.heartbeat_dir), pipeline.kind.name());
    let mut totals = PipelineTotals::default();
    let mut commit_failures = 0u32;
    tracing::info!(pipeline = %pipeline.kind, topic = %pipeline.topic, group = %pipeline.group,
        batch_size = pipeline.batch_size, "pipeline started");

    let result = loop {
        heartbeat.beat();
        if stop.is_cancelled() {
            break Ok(());
        }
        let polled = Instant::now();
        let records = match consumer.poll_batch(pipeline.batch_size, settings.poll_timeout) {
            Ok(records) => records,
            Err(error) => break Err(PipelineError::Kafka(error)),
        };
        if records.is_empty() {
            continue;
        }
        let started = Instant::now();
        let mut phases = Phases {
            poll: started - polled,
            ..Phases::default()
        };
        let decoded = decode_batch::<K>(&records);
        phases.decode = started.elapsed();
        let report = match worker
            .store_with_retries::<K>(&records, &decoded, stop)
            .await
        {
            Ok(Some(report)) => report,
            // Stopped while waiting to retry: nothing committed, the batch is redelivered.
            Ok(None) => break Ok(()),
            Err(error) => break Err(error),
        };
        phases.store = started.elapsed() - phases.decode;
        // Only now, with the transaction committed, does the offset move.
        let committing = Instant::now();
        match consumer.commit(&records) {
            Ok(()) => commit_failures = 0,
            Err(error) => {
                commit_failures += 1;
                tracing::warn!(pipeline = %pipeline.kind, %error, consecutive = commit_failures,
                    "offset commit failed; the data is durable and will be redelivered as a no-op");
                if commit_failures >= MAX_CONSECUTIVE_COMMIT_FAILURES {
                    break Err(PipelineError::CommitFailures {
                        count: commit_failures,
                        last: error,
                    });
                }
            }
        }
        phases.commit = committing.elapsed();
        totals.batches += 1;
        totals.report += report;
        log_batch(pipeline.kind, &report, &records, &phases);
    };
    consumer.close();
    if let Some(conn) = worker.conn.take() {
        let _ = conn.close().await;
    }
    match result {
        Ok(()) => {
            tracing::info!(pipeline = %pipeline.kind, batches = totals.batches,
                records = totals.report.records, "pipeline stopped");
            Ok(totals)
        }
        Err(error) => {
            tracing::error!(pipeline = %pipeline.kind, %error, "pipeline failed");
            Err(error)
        }
    }
}

impl Worker<'_> {
    /// Stores a batch, retrying transient failures with back-off on a fresh connection.
    /// `Ok(None)`: stopped while waiting to retry.
    async fn store_with_retries<K: TopicKind>(
        &mut self,
        records: &[Record],
        decoded: &Decoded<K::Message>,
        stop: &CancellationToken,
    ) -> Result<Option<BatchReport>, PipelineError> {
        let mut delays = self.settings.db_retry.delays();
        let mut retries = 0u32;
        loop {
            let attempt = self.try_store::<K>(records, decoded).await;
            let error = match attempt {
                Ok((mut report, dead)) => {
                    report.retries = retries;
                    log_rejects(self.pipeline.kind, &dead);
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
                    attempts: retries,
                    source: error,
                });
            };
            retries += 1;
            tracing::warn!(pipeline = %self.pipeline.kind, %error, retry = retries,
                delay_ms = delay.as_millis() as u64, "transient database error; retrying the batch");
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = stop.cancelled() => return Ok(None),
            }
        }
    }

    async fn try_store<K: TopicKind>(
        &mut self,
        records: &[Record],
        decoded: &Decoded<K::Message>,
    ) -> Result<(BatchReport, Vec<sluice_core::DeadLetter>), sqlx::Error> {
        let conn = match self.conn.as_mut() {
            Some(conn) => conn,
            None => self
                .conn
                .insert(PgConnection::connect(&self.settings.database_url).await?),
        };
        store_batch::<K>(
            conn,
            &self.resolver,
            &self.pipeline.group,
            &self.settings.applications_table,
            records,
            decoded,
        )
        .await
    }
}

/// Where a batch's time went.
#[derive(Debug, Default)]
struct Phases {
    /// Waiting for and copying the records out of the client.
    poll: Duration,
    /// Decoding and validating.
    decode: Duration,
    /// The database transaction, retries included.
    store: Duration,
    /// The synchronous offset commit.
    commit: Duration,
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn log_batch(kind: PipelineKind, report: &BatchReport, records: &[Record], phases: &Phases) {
    let lag_hint = records
        .iter()
        .map(|r| r.partition)
        .collect::<std::collections::BTreeSet<_>>();
    tracing::info!(
        pipeline = %kind,
        records = report.records,
        inserted = report.write.inserted,
        updated = report.write.updated,
        skipped = report.write.skipped,
        dead_lettered = report.dead_lettered(),
        decode_errors = report.decode_errors,
        unknown_applications = report.unknown_applications,
        constraint_violations = report.constraint_violations,
        dead_letters_new = report.dead_letters_inserted,
        retries = report.retries,
        partitions = ?lag_hint,
        poll_us = micros(phases.poll),
        decode_us = micros(phases.decode),
        store_us = micros(phases.store),
        commit_us = micros(phases.commit),
        "batch committed"
    );
}
