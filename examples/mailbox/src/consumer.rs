//! The example's consumer: one record, one transaction, then the offset.

use crate::metrics::MailboxMetrics;
use crate::{GROUP, MailboxError, REJECT_REASON, users::CommandPayload};
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use serde_json::Value;
use sluice_core::KafkaClientSettings;
use sluice_kafka::KafkaError;
use sluice_kafka::clients::subscribed_stream_consumer;
use sluice_kafka::config::ConsumerOptions;
use sluice_kafka::error::consumer_error_class;
use sluice_kafka::stall::{StallWatch, Verdict};
use sluice_outbox::{EVENT_ID_HEADER, Handled, OutboxError, ProcessKey, RecordOutcome};
use sluice_outbox::{HandleError, handle_outbox_record};
use sluice_retry::{Failure, Forwarder, Outcome, OwnedRecord, RetryHandler, Source, Tiers};
use sqlx::{Connection, PgConnection};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// Where the consumer reads and writes.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// `bootstrap.servers` and the `KAFKA_*` client properties.
    pub kafka: KafkaClientSettings,
    /// The database holding the outbox and the example's tables.
    pub database_url: String,
    /// The mailbox topic.
    pub topic: String,
    /// The consumer group; [`GROUP`] by default.
    pub group: String,
    /// `client.id`.
    pub client_id: String,
    /// The retry tiers (`MAILBOX_RETRY_TIERS` in the CLI): with them, a record the handler
    /// fails on goes to `<topic>.retry.<tier>` and finally `<topic>.dlt`, and the tier
    /// consumers run beside the main one. `None` (the default): no retry topics, and such a
    /// failure ends the run.
    pub retry: Option<Tiers>,
}

impl ConsumerConfig {
    /// A configuration in group [`GROUP`].
    pub fn new(
        kafka: KafkaClientSettings,
        database_url: impl Into<String>,
        topic: impl Into<String>,
    ) -> ConsumerConfig {
        ConsumerConfig {
            kafka,
            database_url: database_url.into(),
            topic: topic.into(),
            group: GROUP.to_owned(),
            client_id: "mailbox-example".to_owned(),
            retry: None,
        }
    }

    /// The main consumer, subscribed to the topic: the manual-commit configuration of every
    /// sluice consumer ([`sluice_kafka::config::consumer_config`]).
    pub(crate) fn subscribe(&self) -> Result<StreamConsumer, KafkaError> {
        let options = ConsumerOptions {
            batch_tuning: None,
            client: &self.kafka,
            group: &self.group,
            auto_offset_reset: "earliest",
            session_timeout: Duration::from_secs(10),
            max_poll_interval: Duration::from_secs(300),
            client_id: &self.client_id,
            group_instance_id: None,
        };
        // Partitions are added as users are created: see them within a second.
        let tuning = [("topic.metadata.refresh.interval.ms", "1000")];
        subscribed_stream_consumer(&options, &tuning, &[self.topic.as_str()])
    }
}

/// A consumer error that keeps repeating this long ends the run (the storage pipelines'
/// default `STORAGE_CONSUMER_ERROR_TIMEOUT_SECONDS`, `sluice_kafka::stall`).
const MAX_ERROR_EPISODE: Duration = Duration::from_secs(30);

/// What a consumer's run did, per record outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumerTotals {
    /// Commands applied (row SUCCESS).
    pub applied: u64,
    /// Commands rejected by the handler (row PUSHED_FAILURE).
    pub rejected: u64,
    /// Already processed records whose missing SUCCESS transition was added.
    pub completed: u64,
    /// Records whose row was already terminal (a redelivery).
    pub skipped: u64,
    /// Records whose row was requeued (it is published again) or without an event id
    /// header.
    pub ignored: u64,
    /// Records whose outbox row does not exist: purged by retention before this consumer
    /// got to them (it lags more than `OUTBOX_RETENTION_DAYS`), or not this database's
    /// events. Their commands were NOT applied; each is logged as an error with its
    /// coordinates.
    pub missing_row: u64,
    /// Records the handler failed on (a demonstration op), each forwarded to a retry tier
    /// or the dead-letter topic.
    pub failed: u64,
}

impl ConsumerTotals {
    /// Adds another consumer's counts (the tier consumers').
    pub fn add(&mut self, other: &ConsumerTotals) {
        self.applied += other.applied;
        self.rejected += other.rejected;
        self.completed += other.completed;
        self.skipped += other.skipped;
        self.ignored += other.ignored;
        self.missing_row += other.missing_row;
        self.failed += other.failed;
    }
}

/// What one record came to.
pub(super) enum Handling {
    /// Handled through its outbox row.
    Outcome(RecordOutcome),
    /// No event id header.
    NoEventId,
    /// No outbox row for its event id.
    MissingRow,
    /// The handler's work failed on the record (retryably); nothing was committed.
    Failed(String),
}

/// The main consumer. A record the handler fails on is forwarded to the first retry tier
/// (acknowledged by the broker) before its offset is committed.
pub(super) async fn consume(
    config: &ConsumerConfig,
    metrics: &MailboxMetrics,
    stop: CancellationToken,
) -> Result<ConsumerTotals, MailboxError> {
    let consumer = config.subscribe()?;
    let conn = sluice_postgres::connect(&config.database_url, "mailbox").await?;
    let mut handler = MailboxHandler::new(conn, config.group.clone(), metrics.clone());
    let forwarder = match &config.retry {
        Some(tiers) => Some(Forwarder::new(
            &config.kafka,
            &config.topic,
            tiers.clone(),
            &format!("{}-retry", config.client_id),
        )?),
        None => None,
    };
    let mut errors = StallWatch::new(MAX_ERROR_EPISODE);
    tracing::info!(topic = %config.topic, group = %config.group, "mailbox consumer started");
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        let message = tokio::select! {
            () = stop.cancelled() => break,
            _ = tick.tick() => {
                let assigned = consumer.assignment().is_ok_and(|a| a.count() > 0);
                metrics.tick(assigned);
                continue;
            }
            message = consumer.recv() => message,
        };
        let message = match message {
            Ok(message) => message,
            Err(error) => {
                // The storage pipelines' rule: ride out what heals, stop at once on what
                // cannot, and bound what may or may not.
                let class = consumer_error_class(&error);
                let key = error
                    .rdkafka_error_code()
                    .map_or(i32::MIN, |code| code as i32);
                match errors.observe(key, class, Instant::now()) {
                    Verdict::Ride => {
                        tracing::warn!(%error, ?class, "mailbox consumer error (the client retries)");
                        continue;
                    }
                    Verdict::Stalled { for_, reports } => {
                        tracing::error!(%error, ?class, for_s = for_.as_secs(), reports,
                            "mailbox consumer error did not heal; stopping");
                        return Err(error.into());
                    }
                }
            }
        };
        let record = OwnedRecord::from_message(&message);
        if let Outcome::Failed(failure) = handler.handle(&record).await? {
            let Some(forwarder) = &forwarder else {
                return Err(MailboxError::HandlerFailed(failure.message));
            };
            // Acknowledged before the commit below: a crash in between forwards it again.
            forwarder.forward(&record, Source::Main, &failure).await?;
        }
        consumer.commit_message(&message, CommitMode::Async)?;
    }
    consumer.unsubscribe();
    let totals = handler.close().await?;
    tracing::info!(?totals, "mailbox consumer stopped");
    Ok(totals)
}

/// The index into `metrics::OUTCOMES` of what a record came to, counted in `totals`.
pub(super) fn count(totals: &mut ConsumerTotals, handling: &Handling) -> usize {
    match handling {
        Handling::Outcome(RecordOutcome::Applied) => {
            totals.applied += 1;
            0
        }
        Handling::Outcome(RecordOutcome::Rejected(_)) => {
            totals.rejected += 1;
            1
        }
        Handling::Outcome(RecordOutcome::Completed { .. }) => {
            totals.completed += 1;
            2
        }
        Handling::Outcome(RecordOutcome::Skipped { .. }) => {
            totals.skipped += 1;
            3
        }
        Handling::Outcome(RecordOutcome::NotReady { .. }) | Handling::NoEventId => {
            totals.ignored += 1;
            4
        }
        Handling::MissingRow => {
            totals.missing_row += 1;
            5
        }
        Handling::Failed(_) => {
            totals.failed += 1;
            6
        }
    }
}

/// One record. Without an event id header it is logged and passed over; without an outbox
/// row (purged by retention, or not this database's event) it is logged as an ERROR with its
/// coordinates and counted — never skipped silently — and the consumer moves on. A record
/// from a retry tier carries its attempt count, which the demonstration ops read.
pub(super) async fn handle_message(
    conn: &mut PgConnection,
    group: &str,
    message: &OwnedRecord,
) -> Result<Handling, MailboxError> {
    let event_id = message
        .header_str(EVENT_ID_HEADER)
        .and_then(|v| Uuid::parse_str(v).ok());
    let Some(event_id) = event_id else {
        tracing::warn!(
            topic = %message.topic,
            partition = message.partition,
            offset = message.offset,
            "mailbox record without an event id header; passed over"
        );
        return Ok(Handling::NoEventId);
    };
    let payload: Option<Value> = message
        .payload
        .as_deref()
        .and_then(|bytes| serde_json::from_slice(bytes).ok());
    let attempt = sluice_retry::headers::attempt_of(message);
    match handle_command(conn, group, event_id, payload.as_ref(), attempt).await {
        Ok(outcome) => Ok(Handling::Outcome(outcome)),
        Err(HandleError::Work(WorkError::Retryable(reason))) => {
            // On to a retry tier or the dead-letter topic: the row is held UNDER_PROCESSING,
            // which retention keeps (a PUBLISHED one it would purge before the replay).
            if let Err(error) = sluice_outbox::hold_for_retry(conn, event_id, &reason).await {
                tracing::warn!(%event_id, %error,
                    "cannot hold the outbox row of a failed record UNDER_PROCESSING");
            }
            Ok(Handling::Failed(reason))
        }
        Err(HandleError::Outbox(OutboxError::NotFound { id })) => {
            tracing::error!(
                event_id = %id,
                topic = %message.topic,
                partition = message.partition,
                offset = message.offset,
                "mailbox record whose outbox row does not exist (purged by retention: the \
                 consumer lags more than OUTBOX_RETENTION_DAYS; or not this database's event); \
                 NOT applied"
            );
            Ok(Handling::MissingRow)
        }
        Err(error) => Err(error.into()),
    }
}

/// Handles the command of outbox event `event_id` once for `group`, in one transaction:
/// a `{"op": "reject"}` command counts as rejected in `mailbox_state` and its row ends
/// PUSHED_FAILURE; any other command is appended to `mailbox_projection`, counted as applied
/// and its row ends SUCCESS. A value that is not a command of a known user is rejected.
///
/// `attempt` is how many times the handler already failed on this record (0 on the main
/// topic). The demonstration ops fail on purpose, before anything is applied, with
/// [`WorkError::Retryable`] (nothing commits, the row stays as it was): `{"op": "flaky",
/// "fail_times": N}` on its first N deliveries, `{"op": "fail"}` always. A record already
/// processed never runs the work, so it never fails again.
pub async fn handle_command(
    conn: &mut PgConnection,
    group: &str,
    event_id: Uuid,
    value: Option<&Value>,
    attempt: u32,
) -> Result<RecordOutcome, HandleError<WorkError>> {
    let key = ProcessKey::Event {
        consumer_group: group.to_owned(),
        event_id,
    };
    let payload = value.and_then(CommandPayload::from_json);
    handle_outbox_record(conn, &key, event_id, async |tx: &mut PgConnection| {
        let Some(payload) = payload else {
            return Ok(Handled::Rejected("not a mailbox command".to_owned()));
        };
        if let Some(reason) = payload.demo_failure(attempt) {
            return Err(WorkError::Retryable(reason));
        }
        apply(tx, &payload).await.map_err(WorkError::of_database)
    })
    .await
}

async fn apply(tx: &mut PgConnection, payload: &CommandPayload) -> Result<Handled, sqlx::Error> {
    if payload.is_reject() {
        let known = sqlx::query(
            "UPDATE mailbox_state SET rejected = rejected + 1, last_seq = $2 WHERE user_id = $1",
        )
        .bind(&payload.user_id)
        .bind(payload.seq)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        return Ok(Handled::Rejected(if known == 0 {
            format!("unknown mailbox user {}", payload.user_id)
        } else {
            REJECT_REASON.to_owned()
        }));
    }
    let position: Option<i64> = sqlx::query_scalar(
        "UPDATE mailbox_state SET applied = applied + 1, last_seq = $2
         WHERE user_id = $1 RETURNING applied",
    )
    .bind(&payload.user_id)
    .bind(payload.seq)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(position) = position else {
        return Ok(Handled::Rejected(format!(
            "unknown mailbox user {}",
            payload.user_id
        )));
    };
    sqlx::query(
        "INSERT INTO mailbox_projection (user_id, seq, command, position) VALUES ($1, $2, $3, $4)",
    )
    .bind(&payload.user_id)
    .bind(payload.seq)
    .bind(payload.command.to_string())
    .bind(position)
    .execute(&mut *tx)
    .await?;
    Ok(Handled::Applied)
}

/// Why the mailbox work failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkError {
    /// The database failed: the run ends, nothing was committed.
    #[error("mailbox database query failed: {0}")]
    Database(#[source] sqlx::Error),
    /// The handler failed on this record and it may pass later (a demonstration op), or
    /// the database refused this record's writes (a constraint, a value): it goes through the
    /// retry tiers to the dead-letter topic instead of stopping every partition.
    #[error("mailbox handler failed: {0}")]
    Retryable(String),
}

impl WorkError {
    /// A database error of the work: the record's own (SQLSTATE class 22, data exception, or
    /// 23, integrity constraint: it fails the same way every time) is this record's failure,
    /// [`WorkError::Retryable`]; any other (the connection, the server) ends the run.
    pub fn of_database(error: sqlx::Error) -> WorkError {
        let own = error
            .as_database_error()
            .and_then(|e| e.code())
            .is_some_and(|code| code.starts_with("22") || code.starts_with("23"));
        if own {
            WorkError::Retryable(format!("the database refused the command: {error}"))
        } else {
            WorkError::Database(error)
        }
    }
}

/// The mailbox handler over its own connection: what the main and the tier consumers call
/// for each record.
#[derive(Debug)]
pub(super) struct MailboxHandler {
    conn: PgConnection,
    group: String,
    metrics: MailboxMetrics,
    totals: ConsumerTotals,
}

impl MailboxHandler {
    /// A handler processing for `group` (the main consumer's group, in every tier).
    pub(super) fn new(conn: PgConnection, group: String, metrics: MailboxMetrics) -> Self {
        MailboxHandler {
            conn,
            group,
            metrics,
            totals: ConsumerTotals::default(),
        }
    }

    /// Closes the connection; returns what was handled.
    pub(super) async fn close(self) -> Result<ConsumerTotals, MailboxError> {
        self.conn.close().await?;
        Ok(self.totals)
    }
}

impl RetryHandler for MailboxHandler {
    type Error = MailboxError;

    async fn handle(&mut self, record: &OwnedRecord) -> Result<Outcome, MailboxError> {
        let handling = handle_message(&mut self.conn, &self.group, record).await?;
        self.metrics.record(count(&mut self.totals, &handling));
        Ok(match handling {
            Handling::Failed(reason) => Outcome::Failed(Failure::retryable(reason)),
            _ => Outcome::Done,
        })
    }
}
