//! The outbox dispatcher: claim a batch, publish it, record the outcome.
//!
//! At-least-once, written where it is implemented: a row is marked PUBLISHED only after the
//! broker acknowledged its record (acks=all); a failed publish puts it back to PENDING (or
//! FAILURE at the attempt limit); a dispatcher that dies between the acknowledgement and the
//! mark leaves the row DISPATCHING, and [`recovery`] finds the record in Kafka instead of
//! publishing it again. Every one of those moves compares the claim token ([`store::settle`]), so
//! no actor ever moves a claim other than the one it acts on.
//!
//! Per-key order: events of one (topic, partition key) are claimed by one dispatcher at a
//! time (`store/sql/claim.sql`) and sent in creation order, each only after the previous one of
//! its key was acknowledged ([`publish`]); at a key's first failure the rest of its chain is
//! requeued without an attempt behind the failed event's back-off.
//!
//! Stale timeout vs delivery: records are handed to the producer only within the claim's
//! send window, and resolve within the delivery timeout; the settings refuse a stale timeout
//! shorter than both plus a margin, so stale recovery never requeues a claim whose records
//! can still arrive.
//!
//! The loop ([`Dispatcher::run`]) is a pipeline while a backlog lasts: up to
//! [`pipeline::PIPELINE_DEPTH`] claims in flight, each published as soon as it commits, while
//! the connection settles the one before and claims the next. It never breaks per-key order, because a claim never takes a key
//! that is DISPATCHING in an earlier claim, so batches in flight hold disjoint keys. With no
//! work it waits for a NOTIFY on [`sluice_outbox::NOTIFY_CHANNEL`], the poll interval, or the
//! stop token. Recovery and retention run between batches (nothing in flight) on their own
//! timers. A stop lets the batches in flight finish and records their outcomes.
//!
//! Test-only fault injection (the `failpoint` module) exists only in builds with the `failpoints`
//! feature; a production build has no such code and ignores `SLUICE_FAILPOINT`.
//!
//! All of the dispatcher's SQL lives in [`store`]; the other modules call it.

mod batch;
mod error;
#[cfg(feature = "failpoints")]
pub mod failpoint;
pub mod metrics;
pub mod pipeline;
pub mod probe;
pub mod publish;
pub mod recovery;
pub mod settings;
pub mod store;

pub use error::DispatchError;
#[cfg(feature = "failpoints")]
pub use failpoint::Failpoint;
pub use publish::EVENT_ID_HEADER;

use crate::settings::OutboxSettings;
use batch::Published;
use metrics::DispatchMetrics;
use pipeline::InFlight;
use sluice_kafka::{Admin, ResilientProducer};
use sqlx::PgConnection;
use sqlx::postgres::PgListener;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often stale dispatch recovery runs (at most; it also waits for the stale timeout).
const RECOVERY_EVERY: Duration = Duration::from_secs(30);
/// How often retention runs.
const RETENTION_EVERY: Duration = Duration::from_secs(3600);
/// The producer's linger: short, because a key with several events in a batch costs one
/// linger plus one round trip per event ([`publish`] sends a key's next event only after
/// the previous one was acknowledged), and the linger is part of every event's commit →
/// ack latency. A batch's records are queued together before any report is awaited, so
/// they still share produce requests. Measured with `sluice-lab bench outbox` at 1,000
/// events/s: 1 ms against 5 ms took the commit → ack median from 15–19 ms to 8–9 ms, for
/// no loss of throughput.
const LINGER: Duration = Duration::from_millis(1);

/// The wait before an event whose partition was just created is claimed again.
pub(crate) const NEW_PARTITION_DELAY: Duration = Duration::from_secs(1);

/// What one dispatch batch did (the storage pipelines have `sluice_core::BatchReport`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchReport {
    /// Events claimed.
    pub claimed: usize,
    /// Marked PUBLISHED (or found already past it).
    pub published: usize,
    /// Publish failed; back to PENDING with back-off.
    pub retried: usize,
    /// Publish failed at the attempt limit: FAILURE.
    pub failed: usize,
    /// Explicit partition missing: topic grown, requeued without an attempt.
    pub repartitioned: usize,
    /// Not sent (behind an earlier failed event of its key, or the send window closed):
    /// requeued without an attempt.
    pub held: usize,
    /// The claim was lost before the outcome could be recorded (the row was requeued or
    /// re-claimed meanwhile): left to its new holder.
    pub lost: usize,
    /// Time spent claiming.
    pub claim_time: Duration,
    /// Time from the first record queued to the last delivery report.
    pub publish_time: Duration,
    /// Time spent recording the outcomes.
    pub mark_time: Duration,
}

/// Totals of a dispatcher's run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DispatchTotals {
    /// Batches with at least one event.
    pub batches: u64,
    /// Events marked PUBLISHED.
    pub published: u64,
    /// Failed publishes requeued with back-off.
    pub retried: u64,
    /// Events moved to FAILURE.
    pub failed: u64,
    /// Events requeued without an attempt because they were not sent.
    pub held: u64,
    /// Outcomes not recorded because the claim was lost.
    pub lost: u64,
    /// Time spent in claim statements, summed over the batches.
    pub claim_time: Duration,
    /// Time from a batch's first record queued to its last delivery report, summed over
    /// the batches (batches in flight together each count their own).
    pub publish_time: Duration,
    /// Time spent recording outcomes, summed over the batches.
    pub mark_time: Duration,
}

impl DispatchTotals {
    /// Adds one settled batch.
    pub fn add(&mut self, report: &DispatchReport) {
        self.batches += 1;
        self.published += report.published as u64;
        self.retried += report.retried as u64;
        self.failed += report.failed as u64;
        self.held += report.held as u64;
        self.lost += report.lost as u64;
        self.claim_time += report.claim_time;
        self.publish_time += report.publish_time;
        self.mark_time += report.mark_time;
    }
}

/// One dispatcher: its own database connection, listener and producer.
#[derive(Debug)]
pub struct Dispatcher {
    settings: OutboxSettings,
    conn: Option<PgConnection>,
    producer: ResilientProducer,
    admin: Admin,
    #[cfg(feature = "failpoints")]
    failpoint: Option<Failpoint>,
    /// The `fail-first-publish` fault is still to be spent.
    fail_next: bool,
    metrics: DispatchMetrics,
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
        )?;
        let admin = Admin::new(&settings.kafka, Duration::from_secs(10))?;
        let dispatcher = Self {
            settings,
            conn: None,
            producer,
            admin,
            #[cfg(feature = "failpoints")]
            failpoint: None,
            fail_next: false,
            metrics: DispatchMetrics::default(),
        };
        #[cfg(feature = "failpoints")]
        let dispatcher = dispatcher.with_failpoint(Failpoint::from_env());
        Ok(dispatcher)
    }

    /// Exports this dispatcher's counters and health through `metrics` (registered by the
    /// binary; see [`metrics`]).
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

    async fn connection(&mut self) -> Result<&mut PgConnection, DispatchError> {
        let conn = match self.conn.take() {
            Some(conn) => conn,
            None => {
                let mut conn =
                    sluice_postgres::connect(&self.settings.database_url, "dispatch").await?;
                store::prepare_connection(&mut conn).await?;
                conn
            }
        };
        Ok(self.conn.insert(conn))
    }

    /// Claims one batch under a fresh claim token, publishes it key by key and records
    /// every outcome under that token, one step after the other (the loop in [`Self::run`]
    /// overlaps these steps across batches).
    pub async fn dispatch_once(&mut self) -> Result<DispatchReport, DispatchError> {
        let claimed = self.claim().await?;
        if claimed.events.is_empty() {
            return Ok(DispatchReport {
                claim_time: claimed.claim_time,
                ..DispatchReport::default()
            });
        }
        let published = self.publish(claimed).await;
        self.settle(published).await
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
        ) {
            Ok(producer) => self.producer = producer,
            Err(error) => {
                tracing::warn!(%error, "cannot create a new producer; keeping the old one")
            }
        }
    }

    /// One stale dispatch recovery round (see [`recovery`]).
    pub async fn recover_stale(&mut self) -> Result<recovery::RecoveryReport, DispatchError> {
        let bootstrap = self.settings.kafka.clone();
        let stale = self.settings.stale_dispatch;
        recovery::recover_stale(self.connection().await?, &bootstrap, stale).await
    }

    /// One retention round (see [`store::retention`]).
    pub async fn purge_expired(&mut self) -> Result<u64, DispatchError> {
        let age = self.settings.retention;
        store::retention::purge_expired(self.connection().await?, age).await
    }

    /// Runs until `stop` is cancelled; the batches in flight are finished first. Database and
    /// broker failures are logged and retried after the poll interval; only a failure to
    /// create the clients is returned.
    ///
    /// The loop keeps up to [`pipeline::PIPELINE_DEPTH`] claims in flight: a claim's records
    /// go to the producer as soon as it commits, and while they wait for their
    /// acknowledgements the connection settles the batch before it and claims the next one.
    /// It claims the next batch while one is in flight only after a full claim (a backlog):
    /// a short claim means the work is caught up, and claiming again at every NOTIFY while
    /// a few events are in flight costs a statement per handful of events (measured: more
    /// database CPU per event and no better latency). Otherwise it claims after a settled
    /// batch (its keys are free again), a NOTIFY or the poll interval.
    pub async fn run(mut self, stop: CancellationToken) -> Result<DispatchTotals, DispatchError> {
        let mut totals = DispatchTotals::default();
        let mut listener: Option<PgListener> = None;
        let mut next_recovery = Instant::now() + self.settings.stale_dispatch.min(RECOVERY_EVERY);
        let mut next_retention = Instant::now();
        let mut in_flight = InFlight::default();
        let mut done: Vec<Published> = vec![];
        // Work is likely waiting: claim as soon as there is room.
        let mut more = true;
        // The last claim was full: the next one may start while it is in flight.
        let mut backlog = false;
        // After a database error, no claim before this instant.
        let mut resume_at: Option<Instant> = None;
        tracing::info!(dispatcher = %self.settings.dispatcher_id, "outbox dispatcher started");
        loop {
            self.metrics.tick();
            let stopping = stop.is_cancelled();
            if stopping && in_flight.is_empty() && done.is_empty() {
                break;
            }
            if listener.is_none() && !stopping {
                listener = listen(&self.settings.database_url).await;
            }
            // 1. Record the outcomes of every batch whose records are all resolved.
            while let Some(published) = done.pop() {
                let result = in_flight.alongside(self.settle(published), &mut done).await;
                self.batch_settled(result, &mut totals);
                more = true;
            }
            // 2. Recovery and retention, between batches (nothing in flight).
            let now = Instant::now();
            let maintenance_due = now >= next_recovery || now >= next_retention;
            if maintenance_due && !stopping {
                if !in_flight.is_empty() {
                    // Let the pipeline drain first: no new claim until then.
                    done.push(in_flight.next().await);
                    continue;
                }
                if now >= next_recovery {
                    next_recovery = now + self.settings.stale_dispatch.min(RECOVERY_EVERY);
                    self.recovery_round().await;
                }
                if now >= next_retention {
                    next_retention = now + RETENTION_EVERY;
                    if let Err(error) = self.purge_expired().await {
                        tracing::warn!(%error, "outbox retention failed");
                    }
                }
                continue;
            }
            // 3. Claim the next batch while there is room; its publish starts at once.
            let may_claim = !stopping
                && more
                && in_flight.has_room()
                && (backlog || in_flight.is_empty())
                && resume_at.is_none_or(|at| Instant::now() >= at);
            if may_claim {
                match in_flight.alongside(self.claim(), &mut done).await {
                    Ok(claimed) if claimed.events.is_empty() => {
                        more = false;
                        backlog = false;
                    }
                    Ok(claimed) => {
                        backlog = claimed.events.len() >= self.settings.batch_size as usize;
                        more = backlog;
                        #[cfg(feature = "failpoints")]
                        if self.failpoint == Some(Failpoint::AfterNextClaim)
                            && !(in_flight.is_empty() && done.is_empty())
                        {
                            // The earlier batch's records all acknowledged, none marked; this
                            // claim committed, nothing of it sent.
                            while !in_flight.is_empty() {
                                done.push(in_flight.next().await);
                            }
                            Failpoint::AfterNextClaim.trigger();
                        }
                        in_flight.push(self.publish(claimed));
                    }
                    Err(error) => {
                        tracing::warn!(%error, "outbox claim failed; retrying after the poll interval");
                        self.metrics.batch_done(Some(error.to_string()));
                        self.conn = None;
                        more = true;
                        resume_at = Some(Instant::now() + self.settings.poll_interval);
                    }
                }
                continue;
            }
            if !done.is_empty() {
                continue;
            }
            // 4. Wait: a batch's records resolved, a NOTIFY, the poll interval, or the stop.
            // With no room for a claim (or stopping, or caught up with a batch in flight),
            // only a resolved batch is worth waking for; NOTIFYs wait in the listener's buffer.
            if stopping || !in_flight.has_room() || (!backlog && !in_flight.is_empty()) {
                tokio::select! {
                    published = in_flight.next() => done.push(published),
                    () = stop.cancelled(), if !stopping => {}
                }
                continue;
            }
            let wait = match resume_at {
                Some(at) => tokio::time::sleep_until(at),
                None => tokio::time::sleep(self.settings.poll_interval),
            };
            let notified = async {
                match listener.as_mut() {
                    Some(l) => {
                        let received = l.recv().await;
                        // One claim answers every NOTIFY already here.
                        while l.next_buffered().is_some() {}
                        received.map(|_| ())
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                published = in_flight.next(), if !in_flight.is_empty() => done.push(published),
                () = stop.cancelled() => {}
                () = wait => {
                    resume_at = None;
                    more = true;
                }
                received = notified => match received {
                    Ok(()) => more = true,
                    Err(error) => {
                        tracing::warn!(%error, "outbox listener lost; polling until it reconnects");
                        listener = None;
                    }
                },
            }
        }
        if let Err(error) = self.producer.flush(Duration::from_secs(10)) {
            tracing::warn!(%error, "producer flush at stop failed");
        }
        tracing::info!(
            batches = totals.batches,
            published = totals.published,
            retried = totals.retried,
            failed = totals.failed,
            held = totals.held,
            lost = totals.lost,
            claim_ms = totals.claim_time.as_millis() as u64,
            publish_ms = totals.publish_time.as_millis() as u64,
            mark_ms = totals.mark_time.as_millis() as u64,
            "outbox dispatcher stopped"
        );
        Ok(totals)
    }

    /// Counts and logs a settled batch (one INFO line with every counter and where its time
    /// went), or logs its failure; the rows of a failed settle stay DISPATCHING for stale
    /// recovery.
    fn batch_settled(
        &mut self,
        result: Result<DispatchReport, DispatchError>,
        totals: &mut DispatchTotals,
    ) {
        match result {
            Ok(report) => {
                self.metrics.batch_done(None);
                totals.add(&report);
                tracing::info!(
                    dispatcher = %self.settings.dispatcher_id,
                    claimed = report.claimed,
                    published = report.published,
                    retried = report.retried,
                    failed = report.failed,
                    repartitioned = report.repartitioned,
                    held = report.held,
                    lost = report.lost,
                    claim_ms = report.claim_time.as_millis() as u64,
                    publish_ms = report.publish_time.as_millis() as u64,
                    mark_ms = report.mark_time.as_millis() as u64,
                    "outbox batch"
                );
            }
            Err(error) => {
                tracing::warn!(dispatcher = %self.settings.dispatcher_id, %error,
                    "recording an outbox batch failed; its rows stay DISPATCHING for stale recovery");
                self.metrics.batch_done(Some(error.to_string()));
                self.conn = None;
            }
        }
    }

    /// One stale dispatch recovery round, logged and exported.
    async fn recovery_round(&mut self) {
        match self.recover_stale().await {
            Ok(r) if r.stale > 0 => {
                self.metrics.recovered(r.published, r.requeued, r.raced);
                tracing::info!(
                    stale = r.stale,
                    published = r.published,
                    requeued = r.requeued,
                    raced = r.raced,
                    "stale dispatch recovery"
                );
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "stale dispatch recovery failed"),
        }
    }
}

async fn listen(url: &str) -> Option<PgListener> {
    let mut listener = match sluice_postgres::connect::listener(url, "dispatch").await {
        Ok(l) => l,
        Err(error) => {
            tracing::warn!(%error, "cannot LISTEN for outbox events; polling only");
            return None;
        }
    };
    match listener.listen(sluice_outbox::NOTIFY_CHANNEL).await {
        Ok(()) => Some(listener),
        Err(error) => {
            tracing::warn!(%error, "cannot LISTEN for outbox events; polling only");
            None
        }
    }
}
