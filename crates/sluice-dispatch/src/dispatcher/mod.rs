//! The dispatcher daemon: one [`Dispatcher`] with its own database connection, NOTIFY
//! listener and producer.
//!
//! Its `impl` is split by responsibility, one file each:
//! - here: building it, its connection and producer, and the maintenance rounds (stale
//!   dispatch recovery, retention);
//! - `batch`: one batch's steps — claim, publish, settle — and [`Dispatcher::dispatch_once`],
//!   which runs them one after the other;
//! - `run`: the loop ([`Dispatcher::run`]) that overlaps those steps across batches, its
//!   state a named struct with one method per step;
//! - `in_flight`: the batches being published while the loop claims and settles others.

mod batch;
mod in_flight;
mod run;

pub use in_flight::PIPELINE_DEPTH;

use crate::error::DispatchError;
use crate::events::StaleRecovered;
#[cfg(feature = "failpoints")]
use crate::failpoint::Failpoint;
use crate::floor::{ClaimFloor, FULL_SCAN_EVERY};
use crate::metrics::DispatchMetrics;
use crate::recovery::{self, RecoveryReport};
use crate::settings::OutboxSettings;
use crate::store;
use sluice_kafka::{Admin, ResilientProducer};
use sqlx::PgConnection;
use std::time::Duration;

/// The producer's linger: short, because a key with several events in a batch costs one
/// linger plus one round trip per event (`publish` sends a key's next event only after
/// the previous one was acknowledged), and the linger is part of every event's commit →
/// ack latency. A batch's records are queued together before any report is awaited, so
/// they still share produce requests. Measured with `sluice-lab bench outbox` at 1,000
/// events/s: 1 ms against 5 ms took the commit → ack median from 15–19 ms to 8–9 ms, for
/// no loss of throughput.
const LINGER: Duration = Duration::from_millis(1);

/// One dispatcher: its own database connection, listener and producer.
#[derive(Debug)]
pub struct Dispatcher {
    settings: OutboxSettings,
    conn: Option<PgConnection>,
    producer: ResilientProducer,
    admin: std::sync::Arc<Admin>,
    #[cfg(feature = "failpoints")]
    failpoint: Option<Failpoint>,
    /// The `fail-first-publish` fault is still to be spent.
    fail_next: bool,
    metrics: DispatchMetrics,
    /// Where the claims look for due events from (see `crate::floor`).
    floor: ClaimFloor,
}

impl Dispatcher {
    /// Creates the Kafka clients; the database is connected lazily (and again after a
    /// lost connection).
    pub fn new(settings: OutboxSettings) -> Result<Self, DispatchError> {
        let producer = ResilientProducer::with_timings(
            &settings.kafka,
            &settings.dispatcher_id,
            settings.delivery_timeout,
            LINGER,
            producer_queue_bytes(&settings),
        )?;
        let admin = std::sync::Arc::new(Admin::new(&settings.kafka, Duration::from_secs(10))?);
        let dispatcher = Self {
            settings,
            conn: None,
            producer,
            admin,
            #[cfg(feature = "failpoints")]
            failpoint: None,
            fail_next: false,
            metrics: DispatchMetrics::default(),
            floor: ClaimFloor::new(FULL_SCAN_EVERY, std::time::Instant::now()),
        };
        #[cfg(feature = "failpoints")]
        let dispatcher = dispatcher.with_failpoint(Failpoint::from_env());
        Ok(dispatcher)
    }

    /// Exports this dispatcher's counters and health through `metrics` (registered by the
    /// binary; see [`crate::metrics`]).
    pub fn with_metrics(mut self, metrics: DispatchMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Replaces the fault taken from the environment (tests inject one without touching
    /// the process environment).
    #[cfg(feature = "failpoints")]
    pub fn with_failpoint(mut self, failpoint: Option<Failpoint>) -> Self {
        self.failpoint = failpoint;
        self.fail_next = failpoint == Some(Failpoint::FailFirstPublish);
        self
    }

    /// The dispatcher's connection, opened (and prepared) if there is none.
    async fn connection(&mut self) -> Result<&mut PgConnection, DispatchError> {
        let conn = match self.conn.take() {
            Some(conn) => conn,
            None => {
                let mut conn =
                    sluice_postgres::connect(&self.settings.database_url, "dispatch").await?;
                store::prepare_connection(&mut conn).await?;
                // Perhaps another server (a failover): nothing known holds there.
                self.floor.reset();
                conn
            }
        };
        Ok(self.conn.insert(conn))
    }

    /// Replaces the producer by a new one, whose first metadata request sees the topic's
    /// current partitions. A batch still in flight keeps its handle on the old one until
    /// its deliveries are resolved.
    fn refresh_producer(&mut self) {
        match ResilientProducer::with_timings(
            &self.settings.kafka,
            &self.settings.dispatcher_id,
            self.settings.delivery_timeout,
            LINGER,
            producer_queue_bytes(&self.settings),
        ) {
            Ok(producer) => self.producer = producer,
            Err(error) => {
                tracing::warn!(%error, "cannot create a new producer; keeping the old one")
            }
        }
    }

    /// The seq this dispatcher's claims look for due events from, when no claim from seq 0
    /// is due (see docs/ARCHITECTURE.md#claim-floor).
    pub fn claim_floor(&self) -> i64 {
        self.floor.value()
    }

    /// How often a claim starts from seq 0 ([`crate::FULL_SCAN_EVERY`] unless set here):
    /// the longest a row below the floor waits. Tests lengthen it to show what the floor
    /// alone does.
    pub fn with_full_scan_every(mut self, every: Duration) -> Self {
        self.floor
            .set_full_scan_every(every, std::time::Instant::now());
        self
    }

    /// One stale dispatch recovery round (see [`recovery`]).
    pub async fn recover_stale(&mut self) -> Result<RecoveryReport, DispatchError> {
        let bootstrap = self.settings.kafka.clone();
        let limits = recovery::RecoveryLimits::new(self.settings.stale_dispatch);
        let report = recovery::recover_stale(self.connection().await?, &bootstrap, &limits).await;
        // Rows it requeued (even in a round that then failed) may lie anywhere below the floor.
        self.floor.reset();
        report
    }

    /// One retention round (see [`store::retention`]).
    pub async fn purge_expired(&mut self) -> Result<u64, DispatchError> {
        let age = self.settings.retention;
        store::retention::purge_expired(self.connection().await?, age).await
    }

    /// One stale dispatch recovery round, logged and exported.
    async fn recovery_round(&mut self) {
        match self.recover_stale().await {
            Ok(report) => StaleRecovered {
                metrics: &self.metrics,
                report: &report,
            }
            .emit(),
            Err(error) => tracing::warn!(%error, "stale dispatch recovery failed"),
        }
    }

    /// One retention round, its failure logged.
    async fn retention_round(&mut self) {
        if let Err(error) = self.purge_expired().await {
            tracing::warn!(%error, "outbox retention failed");
        }
    }
}

/// The most bytes the dispatcher's producer queues (`queue.buffering.max.kbytes`): the claims
/// in flight ([`PIPELINE_DEPTH`]) twice over, for the record overhead and compression buffers
/// (docs/ARCHITECTURE.md#memory).
fn producer_queue_bytes(settings: &OutboxSettings) -> usize {
    let claims = PIPELINE_DEPTH as u64;
    usize::try_from(settings.batch_bytes.saturating_mul(2 * claims)).unwrap_or(usize::MAX)
}
