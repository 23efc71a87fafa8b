//! The relay loop: capture events in, Debezium records out to Kafka, and the slot's
//! confirmed position moved only behind Kafka's acknowledgements ([`Acks`]).
//!
//! Per transaction, in commit order: its records are queued to the producer in the order of
//! its changes (one idempotent producer, so a partition keeps that order through retries);
//! its `end_lsn` is confirmed once every record of it and of every transaction before it was
//! acknowledged (acks=all). A delivery failure ends the relay with an error and nothing past
//! the last confirmed commit confirmed: the next session streams those transactions again,
//! whole and in order (docs/capture.md#durability).

use super::acks::{AckError, AckWatch, Acks, TxTicket};
use crate::catalog::column_catalog;
use crate::debezium::{EncodeError, Envelope, Position, Record, Snapshot, TableShape};
use crate::error::CaptureError;
use crate::lsn::Lsn;
use crate::metrics::CaptureMetrics;
use crate::model::{CaptureEvent, Change, Relation};
use crate::outbox::{OutboxShape, RouteError, Routing, message_record};
use crate::source::CaptureStream;
use chrono::{DateTime, Utc};
use rdkafka::error::KafkaError;
use sluice_kafka::ResilientProducer;
use sqlx::PgConnection;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Why the relay stopped before its stop signal.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The replication session failed (see [`CaptureError::disposition`]).
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// Kafka refused or failed a record: the session ends and the next one re-sends from
    /// the confirmed position, or, when Kafka would refuse it again (too large, no such
    /// topic, not allowed), the capture ends (see [`RelayError::disposition`]).
    #[error("Kafka did not take a record of topic {topic}: {source}")]
    Kafka {
        /// The record's topic.
        topic: String,
        /// The producer's error.
        #[source]
        source: KafkaError,
    },
    /// The state topic (where the initial snapshot's progress is kept) could not be made,
    /// read or written.
    #[error("the capture's state topic {topic}: {source}")]
    StateTopic {
        /// `CAPTURE_STATE_TOPIC`.
        topic: String,
        /// The client's error.
        #[source]
        source: KafkaError,
    },
    /// The catalog of a table could not be read.
    #[error("reading the catalog of {table}: {source}")]
    Catalog {
        /// `schema.table`.
        table: String,
        /// The database error.
        #[source]
        source: sqlx::Error,
    },
    /// A change could not become records.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// The stream broke the protocol's nesting (a change outside a transaction, a change of
    /// a table it never described).
    #[error("replication stream out of order: {0}")]
    Order(String),
    /// The relay's own bookkeeping failed: a bug, never a confirmation.
    #[error(transparent)]
    Acks(#[from] AckError),
    /// An outbox row or a logical message cannot become its record.
    #[error(transparent)]
    Route(#[from] RouteError),
    /// Another capture of the slot runs (its session holds the slot's advisory lock): this
    /// one waits for it to end.
    #[error("another sluice capture of slot {slot} runs on this database; waiting for it to end")]
    Busy {
        /// The slot.
        slot: String,
    },
    /// The initial snapshot stopped.
    #[error(transparent)]
    Snapshot(#[from] crate::snapshot::SnapshotError),
    /// `CAPTURE_PUBLICATION` names no publication of the source database: checked before the
    /// slot is made, so a slot never waits (holding WAL) for a stream that cannot start.
    #[error(
        "publication {publication} does not exist in the source database (CAPTURE_PUBLICATION); create it with CREATE PUBLICATION {publication} FOR TABLE …"
    )]
    NoPublication {
        /// `CAPTURE_PUBLICATION`.
        publication: String,
    },
    /// `CAPTURE_SLOT` names a slot that is not a logical `pgoutput` slot of the source
    /// database: no session could stream from it.
    #[error(
        "replication slot {slot} (CAPTURE_SLOT) exists but {what}: sluice capture streams from a logical slot of the pgoutput plugin in database {database}; name another slot, or drop this one if nothing else uses it"
    )]
    ForeignSlot {
        /// `CAPTURE_SLOT`.
        slot: String,
        /// How it differs: `is a physical slot`, `decodes with test_decoding`, `belongs to
        /// database other`.
        what: String,
        /// The source database.
        database: String,
    },
}

/// What the relay did until it stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayReport {
    /// Transactions read (committed ones, empty included).
    pub transactions: u64,
    /// Records Kafka acknowledged.
    pub records: u64,
    /// The last position confirmed to the slot, if any.
    pub confirmed: Option<Lsn>,
}

/// The open transaction.
#[derive(Debug, Clone, Copy)]
struct Open {
    ticket: TxTicket,
    xid: u32,
    commit_time: DateTime<Utc>,
}

/// One relay session's parts.
#[derive(Debug)]
pub struct Relay<'a> {
    /// The replication stream (started at the slot's confirmed position).
    pub stream: &'a mut CaptureStream,
    /// An ordinary connection to the source database, for the catalog.
    pub catalog: &'a mut PgConnection,
    /// The producer (acks=all, idempotent, `murmur2_random`).
    pub producer: &'a ResilientProducer,
    /// The records' settings.
    pub envelope: &'a Envelope,
    /// The outbox tables and the messages relayed as outbox records.
    pub routing: &'a Routing,
    /// Where acknowledged records are counted.
    pub metrics: &'a CaptureMetrics,
    /// How often a heartbeat message is written to the WAL (`None`: never).
    pub heartbeat: Option<Duration>,
}

/// How long the catalog of a table may take to read when its Relation message arrives.
const CATALOG_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the relay checks that Kafka acknowledges what waits ([`AckWatch`]).
const ACK_WATCH_EVERY: Duration = Duration::from_secs(1);

/// The prefix of the heartbeat messages (never relayed: not under a message prefix of ours).
pub const HEARTBEAT_PREFIX: &str = "sluice-capture-heartbeat";

/// The next heartbeat tick; never without heartbeats.
async fn tick(beat: &mut Option<tokio::time::Interval>) {
    match beat {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Writes a heartbeat: a non-transactional logical message, which the stream brings back
/// and the relay confirms when nothing of its own is pending, so an idle slot moves on and
/// keeps no WAL (docs/capture.md#durability).
async fn emit_heartbeat(catalog: &mut PgConnection) -> Result<(), sqlx::Error> {
    let write = sqlx::query("SELECT pg_logical_emit_message(false, $1, '')::text")
        .bind(HEARTBEAT_PREFIX)
        .execute(catalog);
    // Bounded: a half-open catalog connection must not hold up the acknowledgements.
    match tokio::time::timeout(HEARTBEAT_TIMEOUT, write).await {
        Ok(result) => result.map(|_| ()),
        Err(_) => Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "the heartbeat took longer than 5 s",
        ))),
    }
}

/// How long writing a heartbeat may take.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5);

/// What handling one event needs besides the state.
struct Parts<'c, 'a> {
    catalog: &'c mut PgConnection,
    producer: &'a ResilientProducer,
    envelope: &'a Envelope,
    routing: &'a Routing,
}

/// The loop's state.
struct State {
    acks: Acks,
    shapes: HashMap<u32, TableShape>,
    outboxes: HashMap<u32, OutboxShape>,
    open: Option<Open>,
    last_commit: Option<Lsn>,
    report: RelayReport,
    done: mpsc::UnboundedSender<(TxTicket, Result<(), RelayError>)>,
}

impl Relay<'_> {
    /// Relays until `stop` resolves (then waits for what was sent, confirms it, and returns)
    /// or the session fails.
    pub async fn run(self, stop: impl Future<Output = ()>) -> Result<RelayReport, RelayError> {
        let (done, mut delivered) = mpsc::unbounded_channel();
        let mut state = State {
            acks: Acks::new(),
            shapes: HashMap::new(),
            outboxes: HashMap::new(),
            open: None,
            last_commit: None,
            report: RelayReport::default(),
            done,
        };
        tokio::pin!(stop);
        let Relay {
            stream,
            catalog,
            producer,
            envelope,
            routing,
            metrics,
            heartbeat,
        } = self;
        let mut beat = heartbeat.map(|every| {
            let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            interval
        });
        let mut watch = AckWatch::new();
        // The first check a second in: a new session has handed its first records over.
        let mut watch_every = tokio::time::interval_at(
            tokio::time::Instant::now() + ACK_WATCH_EVERY,
            ACK_WATCH_EVERY,
        );
        watch_every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                () = &mut stop => break,
                // Before the deliveries (a long run of them cannot hold it off), counting
                // what Kafka acknowledged and the loop has not taken yet first.
                _ = watch_every.tick() => {
                    while let Ok(delivery) = delivered.try_recv() {
                        state.delivered(stream, metrics, delivery)?;
                    }
                    let progress = watch.check(state.acks.oldest_waiting());
                    metrics.kafka_progress(progress, std::time::Instant::now());
                }
                Some(delivery) = delivered.recv() => state.delivered(stream, metrics, delivery)?,
                () = tick(&mut beat) => {
                    if let Err(error) = emit_heartbeat(catalog).await {
                        tracing::warn!(%error, "the heartbeat message could not be written (an idle slot then moves only with the server's keepalives)");
                        if error.to_string().contains("permission denied") {
                            beat = None; // not allowed: not tried again this session
                        }
                    }
                }
                // Cancel-safe: CaptureStream::next awaits only its channel's receive.
                event = stream.next() => {
                    let Some(event) = event? else { break };
                    let parts = Parts { catalog, producer, envelope, routing };
                    state.event(parts, stream, event).await?;
                }
            }
        }
        // What was sent before the stop: wait for it, so the slot confirms all of it.
        while state.acks.outstanding() > 0 {
            let Some(delivery) = delivered.recv().await else {
                break;
            };
            state.delivered(stream, metrics, delivery)?;
        }
        Ok(state.report)
    }
}

impl State {
    /// A delivery's outcome: a failure ends the session; an acknowledgement is counted and
    /// confirms what became confirmable.
    fn delivered(
        &mut self,
        stream: &CaptureStream,
        metrics: &CaptureMetrics,
        (ticket, result): (TxTicket, Result<(), RelayError>),
    ) -> Result<(), RelayError> {
        result?;
        self.acked(stream, ticket)?;
        metrics.acknowledged();
        Ok(())
    }

    /// One record of `ticket` acknowledged: confirm what became confirmable.
    fn acked(&mut self, stream: &CaptureStream, ticket: TxTicket) -> Result<(), RelayError> {
        self.acks.acknowledged(ticket)?;
        self.report.records += 1;
        self.confirm(stream);
        Ok(())
    }

    fn confirm(&mut self, stream: &CaptureStream) {
        if let Some(lsn) = self.acks.confirmable() {
            stream.acknowledge(lsn);
            self.report.confirmed = Some(lsn);
            tracing::debug!(%lsn, "confirmed to the slot");
        }
    }

    async fn event(
        &mut self,
        parts: Parts<'_, '_>,
        stream: &CaptureStream,
        event: CaptureEvent,
    ) -> Result<(), RelayError> {
        let Parts {
            catalog,
            producer,
            envelope,
            routing,
        } = parts;
        match event {
            CaptureEvent::Begin {
                xid, commit_time, ..
            } => {
                if self.open.is_some() {
                    return Err(RelayError::Order("Begin inside a transaction".into()));
                }
                self.open = Some(Open {
                    ticket: self.acks.begin(),
                    xid,
                    commit_time,
                });
            }
            CaptureEvent::Relation(relation) => {
                self.describe(catalog, envelope, routing, &relation).await?;
            }
            CaptureEvent::Change { lsn, change } => {
                let open = self
                    .open
                    .ok_or_else(|| RelayError::Order("a change outside a transaction".into()))?;
                let records = self.records(envelope, &open, lsn, &change)?;
                for record in records {
                    self.send(producer, open.ticket, &record)?;
                }
            }
            CaptureEvent::Commit {
                commit_lsn,
                end_lsn,
                ..
            } => {
                let open = self
                    .open
                    .take()
                    .ok_or_else(|| RelayError::Order("Commit outside a transaction".into()))?;
                self.acks.commit(open.ticket, end_lsn)?;
                self.last_commit = Some(commit_lsn);
                self.report.transactions += 1;
                self.confirm(stream);
            }
            CaptureEvent::Message {
                transactional,
                lsn,
                prefix,
                content,
            } => {
                self.message(producer, routing, transactional, lsn, &prefix, &content)?;
                // One not relayed (a heartbeat) when nothing is pending moves the slot on.
                if !transactional && self.acks.is_empty() && self.open.is_none() {
                    stream.acknowledge(lsn);
                }
            }
            CaptureEvent::KeepAlive { wal_end } => {
                // Nothing of ours before the server's WAL end is unacknowledged: an idle
                // slot moves on (docs/capture.md#durability).
                if self.acks.is_empty() && self.open.is_none() {
                    stream.acknowledge(wal_end);
                }
            }
        }
        Ok(())
    }

    /// A Relation message: the table's shape from it and the catalog.
    async fn describe(
        &mut self,
        catalog: &mut PgConnection,
        envelope: &Envelope,
        routing: &Routing,
        relation: &Arc<Relation>,
    ) -> Result<(), RelayError> {
        if routing.is_outbox(relation) {
            self.outboxes
                .insert(relation.oid, OutboxShape::new(relation)?);
            return Ok(());
        }
        // Bounded: a half-open catalog connection must not hold the relay (and its
        // acknowledgements) for as long as TCP takes to notice; a new session reconnects.
        let read = tokio::time::timeout(CATALOG_TIMEOUT, column_catalog(catalog, relation))
            .await
            .unwrap_or_else(|_| {
                Err(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no answer in {} s", CATALOG_TIMEOUT.as_secs()),
                )))
            });
        let columns = read.map_err(|source| RelayError::Catalog {
            table: format!("{}.{}", relation.schema, relation.table),
            source,
        })?;
        let shape = TableShape::new(&envelope.settings().prefix, relation, &columns);
        self.shapes.insert(relation.oid, shape);
        Ok(())
    }

    fn records(
        &self,
        envelope: &Envelope,
        open: &Open,
        lsn: Lsn,
        change: &Change,
    ) -> Result<Vec<Record>, RelayError> {
        let oid = match change {
            Change::Insert { relation, .. }
            | Change::Update { relation, .. }
            | Change::Delete { relation, .. } => relation.oid,
            Change::Truncate { .. } => return Ok(Vec::new()),
        };
        if let Some(outbox) = self.outboxes.get(&oid) {
            // Only inserts: the router skips a row's later life (its updates, its purge).
            return Ok(match change {
                Change::Insert { new, .. } => outbox.record(new)?.into_iter().collect(),
                _ => Vec::new(),
            });
        }
        let shape = self.shapes.get(&oid).ok_or_else(|| {
            RelayError::Order(format!("a change of table {oid} before its Relation"))
        })?;
        let at = Position {
            commit_time: open.commit_time,
            xid: open.xid,
            lsn,
            last_commit_lsn: self.last_commit,
            snapshot: Snapshot::False,
        };
        Ok(envelope.records(shape, change, &at, Utc::now())?)
    }

    /// A logical message: relayed when its prefix is ours. One emitted in a transaction is
    /// part of it; one emitted outside is a transaction of its own, confirmed at its LSN (a
    /// restart may send it again, never lose it).
    fn message(
        &mut self,
        producer: &ResilientProducer,
        routing: &Routing,
        transactional: bool,
        lsn: Lsn,
        prefix: &str,
        content: &[u8],
    ) -> Result<(), RelayError> {
        let Some(ours) = &routing.message_prefix else {
            return Ok(());
        };
        let Some(record) = message_record(prefix, ours, content)? else {
            return Ok(());
        };
        match (transactional, self.open) {
            (true, Some(open)) => self.send(producer, open.ticket, &record),
            (false, None) => {
                let ticket = self.acks.begin();
                self.send(producer, ticket, &record)?;
                self.acks.commit(ticket, lsn)?;
                Ok(())
            }
            (true, None) => Err(RelayError::Order(
                "a transactional message outside a transaction".into(),
            )),
            (false, Some(_)) => Err(RelayError::Order(
                "a non-transactional message inside a transaction".into(),
            )),
        }
    }

    /// Queues one record; its acknowledgement comes back through `done`.
    fn send(
        &mut self,
        producer: &ResilientProducer,
        ticket: TxTicket,
        record: &Record,
    ) -> Result<(), RelayError> {
        let headers: Vec<(&str, &[u8])> = record
            .headers
            .iter()
            .map(|(name, value)| (*name, value.as_bytes()))
            .collect();
        let kafka = |source| RelayError::Kafka {
            topic: record.topic.clone(),
            source,
        };
        let delivery = producer
            .enqueue_maybe_tombstone(
                &record.topic,
                record.key.as_deref(),
                record.value.as_deref(),
                record.partition,
                &headers,
            )
            .map_err(kafka)?;
        self.acks.sent(ticket)?;
        let done = self.done.clone();
        let topic = record.topic.clone();
        tokio::spawn(async move {
            let result = delivery
                .await
                .map(|_| ())
                .map_err(|source| RelayError::Kafka { topic, source });
            // The relay may have ended already; then nothing waits for this result.
            let _ = done.send((ticket, result));
        });
        Ok(())
    }
}
