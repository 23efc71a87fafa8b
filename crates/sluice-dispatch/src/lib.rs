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
//! The loop: claim and publish while there is work; otherwise wait for a NOTIFY on
//! [`sluice_outbox::NOTIFY_CHANNEL`], the poll interval, or the stop token. Recovery and retention
//! run between batches on their own timers. A stop lets the batch in flight finish.
//!
//! Test-only fault injection (the `failpoint` module) exists only in builds with the `failpoints`
//! feature; a production build has no such code and ignores `SLUICE_FAILPOINT`.
//!
//! All of the dispatcher's SQL lives in [`store`]; the other modules call it.

mod error;
#[cfg(feature = "failpoints")]
pub mod failpoint;
pub mod metrics;
pub mod probe;
pub mod publish;
pub mod recovery;
pub mod store;

pub use error::DispatchError;
#[cfg(feature = "failpoints")]
pub use failpoint::Failpoint;
pub use publish::EVENT_ID_HEADER;

use metrics::DispatchMetrics;
use publish::{Sent, is_unknown_partition, publish_in_key_order};
use sluice_core::outbox_settings::OutboxSettings;
use sluice_kafka::{Admin, ResilientProducer};
use sqlx::PgConnection;
use sqlx::postgres::PgListener;
use std::time::Duration;
use store::claim::{ClaimedEvent, claim_batch_as};
use store::failure::{FailedPublishOutcome, mark_publish_failed, requeue_without_attempt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How often stale dispatch recovery runs (at most; it also waits for the stale timeout).
const RECOVERY_EVERY: Duration = Duration::from_secs(30);
/// How often retention runs.
const RETENTION_EVERY: Duration = Duration::from_secs(3600);
/// The producer's linger: short, because a key with several events in a batch costs one
/// linger plus one round trip per event ([`publish`] sends a key's next event only after
/// the previous one was acknowledged). Events of distinct keys are queued together before
/// any report is awaited, so they still share produce requests.
const LINGER: Duration = Duration::from_millis(5);
/// The wait before an event whose partition was just created is claimed again.
const NEW_PARTITION_DELAY: Duration = Duration::from_secs(1);

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
    /// every outcome under that token.
    pub async fn dispatch_once(&mut self) -> Result<DispatchReport, DispatchError> {
        let id = self.settings.dispatcher_id.clone();
        let limit = self.settings.batch_size;
        let claim = Uuid::new_v4();
        // Taken before the claim statement starts, so never later than the claim time the
        // database records: the send window is measured conservatively.
        let started = std::time::Instant::now();
        let send_until = started + self.settings.send_window();
        let events = claim_batch_as(self.connection().await?, &id, claim, limit).await?;
        let mut report = DispatchReport {
            claimed: events.len(),
            claim_time: started.elapsed(),
            ..DispatchReport::default()
        };
        if events.is_empty() {
            return Ok(report);
        }
        #[cfg(feature = "failpoints")]
        if self.failpoint == Some(Failpoint::BeforePublish) {
            Failpoint::BeforePublish.trigger();
        }
        let started = std::time::Instant::now();
        let results =
            publish_in_key_order(&self.producer, &events, send_until, &mut self.fail_next).await;
        report.publish_time = started.elapsed();
        #[cfg(feature = "failpoints")]
        if self.failpoint == Some(Failpoint::AfterPublish) {
            Failpoint::AfterPublish.trigger();
        }
        let started = std::time::Instant::now();
        let mut failures = vec![];
        let mut held = vec![];
        let mut acks = Vec::with_capacity(events.len());
        let mut latencies = Vec::with_capacity(events.len());
        for (event, result) in events.iter().zip(results) {
            match result {
                Sent::Delivered(d) => {
                    acks.push((event.id, d.partition, d.offset));
                    latencies.push((std::time::SystemTime::from(event.created_at), d.acked_at));
                }
                Sent::Failed(error) => failures.push((event, error)),
                Sent::Held(why) => held.push((event, why)),
            }
        }
        let settled =
            store::settle::settle_published(self.connection().await?, Some(claim), &acks).await?;
        self.metrics
            .batch(settled.published, latencies, failures.len());
        report.published = settled.published + settled.already_past;
        report.lost += settled.lost;
        if settled.lost > 0 {
            tracing::warn!(%claim, lost = settled.lost,
                "acknowledged records whose claim was lost before the mark (left to the new holder)");
        }
        let mut refresh = false;
        for (event, error) in failures {
            self.record_failure(event, &error, &mut report, &mut refresh)
                .await?;
        }
        for (event, why) in held {
            let attempts = u32::try_from(event.attempts).unwrap_or(0);
            let conn = self.connection().await?;
            if requeue_without_attempt(
                conn,
                claim,
                event.id,
                attempts,
                Duration::ZERO,
                why.as_str(),
            )
            .await?
            {
                report.held += 1;
            } else {
                report.lost += 1;
            }
        }
        if refresh {
            self.refresh_producer();
        }
        report.mark_time = started.elapsed();
        Ok(report)
    }

    async fn record_failure(
        &mut self,
        event: &ClaimedEvent,
        error: &rdkafka::error::KafkaError,
        report: &mut DispatchReport,
        refresh: &mut bool,
    ) -> Result<(), DispatchError> {
        let claim = event.claim_id;
        let attempts = u32::try_from(event.attempts).unwrap_or(0);
        if is_unknown_partition(event, error) {
            let wanted = event.partition.unwrap_or(0).saturating_add(1);
            match self.admin.partition_count(&event.topic) {
                Ok(Some(count)) if count < wanted => {
                    tracing::info!(topic = %event.topic, from = count, to = wanted,
                        "explicit partition missing: growing the topic");
                    if let Err(grow) = self.admin.grow_topic(&event.topic, wanted).await {
                        tracing::warn!(topic = %event.topic, error = %grow, "growing the topic failed");
                    }
                    *refresh = true;
                }
                // The broker has the partition; the producer's metadata is behind (another
                // process grew the topic). librdkafka rejects an unknown partition at once
                // without refreshing, so a new producer is the refresh.
                Ok(Some(_)) => *refresh = true,
                Ok(None) => {}
                Err(metadata) => {
                    tracing::warn!(topic = %event.topic, error = %metadata, "partition count unknown");
                }
            }
            let conn = self.connection().await?;
            let reason = format!(
                "unknown partition {}: {error}",
                event.partition.unwrap_or(-1)
            );
            if requeue_without_attempt(
                conn,
                claim,
                event.id,
                attempts,
                NEW_PARTITION_DELAY,
                &reason,
            )
            .await?
            {
                report.repartitioned += 1;
            } else {
                report.lost += 1;
            }
            return Ok(());
        }
        let settings = self.settings.clone();
        let conn = self.connection().await?;
        match mark_publish_failed(
            conn,
            &settings,
            claim,
            event.id,
            attempts,
            &error.to_string(),
        )
        .await?
        {
            FailedPublishOutcome::Requeued { .. } => report.retried += 1,
            FailedPublishOutcome::Failed { .. } => report.failed += 1,
            FailedPublishOutcome::NotClaimed => report.lost += 1,
        }
        Ok(())
    }

    /// Replaces the producer by a new one, whose first metadata request sees the topic's
    /// current partitions. Every delivery of the old one was already awaited.
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

    /// Runs until `stop` is cancelled; the batch in flight is finished first. Database and
    /// broker failures are logged and retried after the poll interval; only a failure to
    /// create the clients is returned.
    pub async fn run(mut self, stop: CancellationToken) -> Result<DispatchTotals, DispatchError> {
        let mut totals = DispatchTotals::default();
        let mut listener: Option<PgListener> = None;
        let mut next_recovery = Instant::now() + self.settings.stale_dispatch.min(RECOVERY_EVERY);
        let mut next_retention = Instant::now();
        tracing::info!(dispatcher = %self.settings.dispatcher_id, "outbox dispatcher started");
        while !stop.is_cancelled() {
            self.metrics.tick();
            if listener.is_none() {
                listener = listen(&self.settings.database_url).await;
            }
            let full = match self.dispatch_once().await {
                Ok(report) => {
                    self.metrics.batch_done(None);
                    if report.claimed > 0 {
                        totals.batches += 1;
                        totals.published += report.published as u64;
                        totals.retried += report.retried as u64;
                        totals.failed += report.failed as u64;
                        totals.held += report.held as u64;
                        totals.lost += report.lost as u64;
                        tracing::info!(
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
                    report.claimed >= self.settings.batch_size as usize
                }
                Err(error) => {
                    tracing::warn!(%error, "outbox batch failed; retrying after the poll interval");
                    self.metrics.batch_done(Some(error.to_string()));
                    self.conn = None;
                    false
                }
            };
            if Instant::now() >= next_recovery {
                next_recovery = Instant::now() + self.settings.stale_dispatch.min(RECOVERY_EVERY);
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
            if Instant::now() >= next_retention {
                next_retention = Instant::now() + RETENTION_EVERY;
                if let Err(error) = self.purge_expired().await {
                    tracing::warn!(%error, "outbox retention failed");
                }
            }
            if full {
                continue;
            }
            let wait = tokio::time::sleep(self.settings.poll_interval);
            match listener.as_mut() {
                Some(l) => tokio::select! {
                    () = stop.cancelled() => {}
                    () = wait => {}
                    received = l.recv() => if let Err(error) = received {
                        tracing::warn!(%error, "outbox listener lost; polling until it reconnects");
                        listener = None;
                    },
                },
                None => tokio::select! {
                    () = stop.cancelled() => {}
                    () = wait => {}
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
            "outbox dispatcher stopped"
        );
        Ok(totals)
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
