//! One writer of a pipeline: stores one decoded batch in one transaction, retrying
//! transient failures (docs/ARCHITECTURE.md#errors) with back-off on a fresh connection.
//!
//! The writers of a pipeline remember the next offset they committed per partition, in one
//! memory they share ([`Committed`]: a partition's batches may be stored by any of them, one
//! after another). PostgreSQL holding less means it lost commits (docs/ARCHITECTURE.md#offsets): a batch's claim compares PostgreSQL's
//! offset with where the partition's fetch continued (and with this memory where that is not
//! known), and once a writer falls idle it compares once more (the memory read before
//! PostgreSQL, so a commit another writer makes meanwhile is never taken for a loss) when its last commit is
//! [`FLUSH_GRACE`] old (by then an asynchronous commit is flushed), so a partition whose
//! last batches were lost is found even if no record follows. A batch whose partition's
//! position is known replaces the memory of that partition: after a seek, a new assignment or
//! a topic created again, what was committed before is void.
//!
//! A stop lets the batch in flight finish for [`STOP_GRACE`]; a batch still running then
//! (waiting for a lock another session holds, say) is abandoned: the connection is dropped
//! and its statement cancelled, so nothing of it commits and shutdown stays prompt. Its
//! records were never committed anywhere, so they are read again on the next start.

pub(crate) mod pool;
mod schemas;
mod tables;

use crate::batch::{
    Behind, DecodedBatch, Done, Rewind, Stored, TableGone, partitions_of, store_batch,
};
use crate::by_table::ByTable;
use crate::error::PipelineError;
use crate::events::BatchRetrying;
use crate::heartbeat::WriterLiveness;
use crate::metrics::PipelineMetrics;
use crate::origins::Origins;
use crate::rejects::log_rejects;
use crate::selected::Identity;
use crate::settings::StorageSettings;
use crate::sink::Tables;
use pool::WriterParts;
use sluice_core::settings::SyncCommit;
use sluice_core::{BatchReport, Disposition};
use sluice_kafka::Record;
use sluice_postgres::offsets::Partition;
use sluice_postgres::{disposition, sqlstate};
use sqlx::{Connection, PgConnection};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How old a writer's last commit is before it checks that PostgreSQL kept it: PostgreSQL
/// flushes an asynchronous commit within three `wal_writer_delay`s (200 ms by default).
pub const FLUSH_GRACE: Duration = Duration::from_secs(1);

/// How long a batch in flight when the pipeline is stopped may still take to commit.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// How long cancelling an abandoned statement may take (its connection is closed anyway).
const CANCEL_TIMEOUT: Duration = Duration::from_secs(3);

use tokio_util::sync::CancellationToken;

/// What storing a batch came to, for the writer's loop.
#[derive(Debug)]
pub enum Attempted {
    /// Committed: its report and the partitions to read again from PostgreSQL's offset.
    Stored(BatchReport, Vec<Behind>, ByTable),
    /// Stopped while waiting to retry: nothing committed, the batch is redelivered.
    Stopped,
    /// A table of a sink of many tables changed since it was planned: nothing committed;
    /// the batch is decoded again (the table planned again, or its records dead letters).
    TablesChanged,
}

/// One writer's own connection, writing through the pipeline's sink (whose reference
/// caches the writers share).
#[derive(Debug)]
pub struct Writer<'a> {
    index: usize,
    settings: &'a StorageSettings,
    pipeline: &'a Identity,
    sink: &'a Tables,
    conn: Option<PgConnection>,
    /// The server process of `conn`.
    backend: Option<i32>,
    metrics: &'a PipelineMetrics,
    /// The next offset the pipeline's writers committed, per partition.
    committed: Committed,
    /// When it last committed, until PostgreSQL is seen to have kept it.
    unverified_since: Option<Instant>,
}

impl<'a> Writer<'a> {
    /// Writer `index` of the pipeline, through `sink`, sharing `committed` with the
    /// pipeline's other writers; it connects on first use.
    pub fn new(parts: WriterParts<'a>, committed: Committed, index: usize) -> Self {
        let WriterParts {
            settings,
            pipeline,
            sink,
            metrics,
            ..
        } = parts;
        Self {
            index,
            settings,
            pipeline,
            sink,
            conn: None,
            backend: None,
            metrics,
            committed,
            unverified_since: None,
        }
    }

    /// Once the last commit is [`FLUSH_GRACE`] old: whether PostgreSQL still holds every
    /// offset this writer committed. A connection error leaves the check for the next call.
    pub async fn verify_idle(&mut self) -> Result<(), PipelineError> {
        let Some(since) = self.unverified_since else {
            return Ok(());
        };
        if since.elapsed() < FLUSH_GRACE {
            return Ok(());
        }
        // Read before PostgreSQL: an offset another writer commits meanwhile is in
        // PostgreSQL before it is in this memory.
        let committed = self.committed.snapshot();
        let partitions: Vec<Partition> = committed.keys().cloned().collect();
        let group = self.pipeline.group.as_str();
        let stored = match self.connection().await {
            Ok(conn) => sluice_postgres::offsets::stored(conn, group, &partitions).await,
            Err(error) => Err(error),
        };
        let stored = match stored {
            Ok(stored) => stored,
            Err(error) => {
                tracing::debug!(pipeline = %self.pipeline.name, %error,
                    "cannot check the committed offsets yet");
                self.forget_connection();
                return Ok(());
            }
        };
        for ((topic, partition), &committed) in &committed {
            let postgres = stored.get(&(topic.clone(), *partition)).copied();
            if postgres.is_none_or(|p| p < committed) {
                return Err(rewound(Rewind {
                    topic: topic.clone(),
                    partition: *partition,
                    postgres,
                    committed,
                }));
            }
        }
        self.unverified_since = None;
        Ok(())
    }

    /// The open connection, or a new one (with the pipeline's `synchronous_commit`).
    async fn connection(&mut self) -> Result<&mut PgConnection, sqlx::Error> {
        if self.conn.is_none() {
            let mut conn =
                sluice_postgres::connect(&self.settings.database_url, &self.pipeline.name).await?;
            if self.settings.synchronous_commit == SyncCommit::Off {
                sqlx::query("SET synchronous_commit = off")
                    .execute(&mut conn)
                    .await?;
            }
            self.backend = Some(sluice_postgres::backend_pid(&mut conn).await?);
            self.conn = Some(conn);
        }
        self.conn
            .as_mut()
            .ok_or_else(|| sqlx::Error::Protocol("no connection".into()))
    }

    /// Drops the connection (a fresh one is opened on next use).
    fn forget_connection(&mut self) {
        self.conn = None;
        self.backend = None;
    }

    /// Gives up the statement in flight: drops the connection and asks the server to cancel
    /// what its process still runs (a lock wait would otherwise go on until the lock is
    /// released; the transaction is rolled back either way, since no COMMIT follows).
    async fn abandon(&mut self) {
        let backend = self.backend;
        self.forget_connection();
        let Some(pid) = backend else { return };
        let (url, name) = (&self.settings.database_url, &self.pipeline.name);
        let cancelled = tokio::time::timeout(
            CANCEL_TIMEOUT,
            sluice_postgres::cancel_backend(url, name, pid),
        )
        .await;
        match cancelled {
            Ok(Ok(sent)) => tracing::warn!(pipeline = %name, writer = self.index, backend = pid,
                cancelled = sent, "stopping: abandoned the batch in flight after the grace; \
                its records are read again on the next start"),
            Ok(Err(error)) => tracing::warn!(pipeline = %name, writer = self.index, backend = pid,
                %error, "stopping: abandoned the batch in flight; cannot cancel its statement \
                (the server rolls it back when it sees the connection closed)"),
            Err(_) => tracing::warn!(pipeline = %name, writer = self.index, backend = pid,
                "stopping: abandoned the batch in flight; cancelling its statement timed out"),
        }
    }

    /// The tables it writes through.
    pub fn sink(&self) -> &'a Tables {
        self.sink
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

    /// Stores a batch, retrying transient failures with back-off on a fresh connection;
    /// `origins`: where each of its partitions' fetch continued from. Returns what it did
    /// and the partitions to read again from PostgreSQL's offset (none of their records
    /// written); or that it was stopped while waiting to retry; or that a table of a sink of
    /// many tables changed under it (forgotten: the batch is decoded again).
    pub async fn store_with_retries(
        &mut self,
        batch: (&[Record], &DecodedBatch, &Origins),
        stop: &CancellationToken,
        liveness: &WriterLiveness,
    ) -> Result<Attempted, PipelineError> {
        let mut delays = self.settings.db_retry.delays();
        let mut retries = 0u32;
        let stored = self
            .retry_loop(batch, stop, liveness, &mut delays, &mut retries)
            .await;
        if retries > 0 {
            self.metrics.retries_over();
        }
        stored
    }

    async fn retry_loop(
        &mut self,
        batch: (&[Record], &DecodedBatch, &Origins),
        stop: &CancellationToken,
        liveness: &WriterLiveness,
        delays: &mut impl Iterator<Item = Duration>,
        retries: &mut u32,
    ) -> Result<Attempted, PipelineError> {
        loop {
            let Some(attempt) = self.try_store(batch, stop).await else {
                self.abandon().await;
                return Ok(Attempted::Stopped);
            };
            let error = match attempt {
                Ok(Stored::Done(Done {
                    mut report,
                    dead,
                    behind,
                    tables,
                })) => {
                    report.retries = *retries;
                    log_rejects(&self.pipeline.name, &dead);
                    self.note_committed(batch.0, batch.2, &behind);
                    self.unverified_since = Some(Instant::now());
                    return Ok(Attempted::Stored(report, behind, tables));
                }
                Ok(Stored::Rewound(rewind)) => return Err(rewound(rewind)),
                Ok(Stored::TableGone(TableGone { table, error })) => {
                    if self.sink.forget(&table) {
                        return Ok(Attempted::TablesChanged);
                    }
                    return Err(PipelineError::Database {
                        sqlstate: sqlstate(&error),
                        source: error,
                    });
                }
                Err(error) => error,
            };
            let (delay, error) = self.next_wait(error, delays, *retries)?;
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
            if !schemas::sleep_or_stop(delay, stop, liveness).await {
                return Ok(Attempted::Stopped);
            }
        }
    }

    /// How long to wait before trying again after `error`, with `attempts` made so far: an
    /// error that is not transient, or retries spent, ends the pipeline. The connection is
    /// dropped (it may be broken; the next attempt opens a fresh one).
    fn next_wait(
        &mut self,
        error: sqlx::Error,
        delays: &mut impl Iterator<Item = Duration>,
        attempts: u32,
    ) -> Result<(Duration, sqlx::Error), PipelineError> {
        if disposition(&error) != Disposition::Retry {
            return Err(PipelineError::Database {
                sqlstate: sqlstate(&error),
                source: error,
            });
        }
        self.forget_connection();
        match delays.next() {
            Some(delay) => Ok((delay, error)),
            None => Err(PipelineError::RetriesExhausted {
                attempts,
                source: error,
            }),
        }
    }

    /// Remembers what a stored batch committed, per partition. Where the partition's fetch
    /// position is known, that position already agrees with PostgreSQL (the claim checked),
    /// so the batch's next offset replaces what was remembered: after a seek, a new
    /// assignment or a topic created again, an offset committed before is void
    /// (docs/ARCHITECTURE.md#offsets). A partition read again holds PostgreSQL's offset.
    fn note_committed(&mut self, records: &[Record], origins: &Origins, behind: &[Behind]) {
        let mut memory = self.committed.lock();
        for (topic, partition, _, next) in partitions_of(records) {
            let key = (topic, partition);
            if let Some(b) = behind
                .iter()
                .find(|b| b.partition == key.1 && b.topic == key.0)
            {
                memory.insert(key, b.postgres);
                continue;
            }
            let known = origins.iter().any(|(k, o)| *k == key && o.is_some());
            let at = memory.entry(key).or_insert(next);
            *at = if known { next } else { (*at).max(next) };
        }
    }

    /// One attempt; `None` when `stop` came and the attempt did not end within
    /// [`STOP_GRACE`] (it was dropped, the caller abandons the connection).
    async fn try_store(
        &mut self,
        (records, decoded, origins): (&[Record], &DecodedBatch, &Origins),
        stop: &CancellationToken,
    ) -> Option<Result<Stored, sqlx::Error>> {
        let pipeline = self.pipeline;
        let committed = self.committed.snapshot();
        let attempt = async {
            let conn = self.connection().await?;
            let group = &pipeline.group;
            store_batch(conn, group, (records, decoded, origins), &committed).await
        };
        let stopped = async {
            stop.cancelled().await;
            tokio::time::sleep(STOP_GRACE).await;
        };
        let stored = tokio::select! {
            stored = attempt => Some(stored),
            () = stopped => None,
        };
        stored
    }
}

/// The next offset a pipeline's writers committed, per partition: one memory they share.
#[derive(Debug, Clone, Default)]
pub struct Committed(Arc<Mutex<HashMap<Partition, i64>>>);

impl Committed {
    /// The memory, locked (a poisoned lock still holds the offsets: a writer that panicked
    /// ends the pipeline anyway).
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Partition, i64>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A copy of the memory as it is now.
    fn snapshot(&self) -> HashMap<Partition, i64> {
        self.lock().clone()
    }
}

fn rewound(rewind: Rewind) -> PipelineError {
    PipelineError::Rewound {
        topic: rewind.topic,
        partition: rewind.partition,
        postgres: rewind.postgres,
        committed: rewind.committed,
    }
}
