//! A retry tier's consumer: hold a record until it is due without blocking other
//! partitions, then handle it; forward a failure to the next tier or the dead-letter topic.
//!
//! Invariants:
//! - A partition whose next record is not due is paused (librdkafka pause/resume) and the
//!   record is held in memory; the loop keeps polling, so the other partitions keep flowing
//!   and the group membership stays alive. It never sleeps in the poll loop: it waits on the
//!   earliest due time, the next record, or the stop token, whichever comes first.
//! - Within a partition, records are handled in offset order, each once per run: a record
//!   that still arrives for a paused partition (fetched before the pause) is queued behind
//!   the held one, not handled before it nor dropped. After the queue drains, the partition
//!   resumes from the application's position, right after the last handled record.
//! - An offset is committed only after its record was handled, or after its forward was
//!   acknowledged. A handler error that is not the record's fault ends the run uncommitted.

use crate::error::RetryError;
use crate::forward::Forwarder;
use crate::headers::due_of;
use crate::names::{retry_topic, tier_group};
use crate::record::OwnedRecord;
use crate::route::{Failure, Source};
use crate::tiers::Tiers;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::{Offset, TopicPartitionList};
use sluice_core::KafkaClientSettings;
use sluice_kafka::config::{ConsumerOptions, consumer_config};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What a handler made of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Handled (applied, rejected by the business rules, or already processed): commit.
    Done,
    /// The handler failed on this record: forward it, then commit.
    Failed(Failure),
}

/// A record handler shared by the main consumer and the tier consumers.
pub trait RetryHandler: Send {
    /// An error that is not the record's fault (its database is down): it ends the run and
    /// the record is read again.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Handles one record; `record.headers` carry the retry headers, if any.
    fn handle(
        &mut self,
        record: &OwnedRecord,
    ) -> impl Future<Output = Result<Outcome, Self::Error>> + Send;
}

/// Where one tier consumer reads.
#[derive(Debug, Clone)]
pub struct TierConfig {
    /// `bootstrap.servers` and the `KAFKA_*` client properties.
    pub kafka: KafkaClientSettings,
    /// The main topic (the tier topics are named after it).
    pub topic: String,
    /// The main consumer's group (the tier groups are named after it).
    pub group: String,
    /// All tiers.
    pub tiers: Tiers,
    /// This consumer's tier (0-based).
    pub tier: usize,
}

impl TierConfig {
    /// This tier's topic, `<topic>.retry.<label>`.
    pub fn tier_topic(&self) -> String {
        self.tiers
            .get(self.tier)
            .map_or_else(String::new, |t| retry_topic(&self.topic, t))
    }

    /// This tier's group, `<group>.retry.<label>`.
    pub fn tier_group(&self) -> String {
        self.tiers
            .get(self.tier)
            .map_or_else(String::new, |t| tier_group(&self.group, t))
    }

    /// The manual-commit configuration of every sluice consumer, in the tier's group.
    fn client(&self) -> rdkafka::ClientConfig {
        let group = self.tier_group();
        consumer_config(&ConsumerOptions {
            batch_tuning: None,
            client: &self.kafka,
            group: &group,
            auto_offset_reset: "earliest",
            session_timeout: Duration::from_secs(10),
            max_poll_interval: Duration::from_secs(300),
            client_id: &format!("sluice-retry-{group}"),
            group_instance_id: None,
        })
    }
}

/// What a tier consumer's run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TierTotals {
    /// Records handled with [`Outcome::Done`].
    pub handled: u64,
    /// Records forwarded to the next tier.
    pub retried: u64,
    /// Records forwarded to the dead-letter topic.
    pub dead_lettered: u64,
    /// Times a partition was paused to hold a record that was not due.
    pub paused: u64,
    /// Records that arrived for a paused partition and were queued behind the held one.
    pub queued_while_paused: u64,
}

/// One partition's records waiting for the first one's due time.
#[derive(Debug, Default)]
struct Waiting {
    records: VecDeque<(OwnedRecord, i64)>,
}

/// Runs tier `config.tier` until `stop` is cancelled; see the module docs.
pub async fn run_tier<H: RetryHandler>(
    config: &TierConfig,
    forwarder: &Forwarder,
    handler: &mut H,
    stop: CancellationToken,
) -> Result<TierTotals, RetryError> {
    let topic = config.tier_topic();
    let consumer: StreamConsumer = config.client().create()?;
    consumer.subscribe(&[topic.as_str()])?;
    let mut tier = TierLoop {
        consumer: &consumer,
        topic: &topic,
        forwarder,
        handler,
        source: Source::Tier(config.tier),
        failpoint: crate::failpoint::armed(),
        totals: TierTotals::default(),
        waiting: BTreeMap::new(),
    };
    tracing::info!(%topic, group = %config.tier_group(), "retry tier consumer started");
    loop {
        let next_due = tier
            .waiting
            .values()
            .filter_map(|w| w.records.front().map(|(_, due)| *due))
            .min();
        let wait = next_due
            .map(|due| Duration::from_millis(u64::try_from(due - crate::now_ms()).unwrap_or(0)));
        tokio::select! {
            () = stop.cancelled() => break,
            () = sleep_or_forever(wait) => {
                tracing::debug!(%topic, held = tier.waiting.len(), "a held record is due");
                let ready: Vec<i32> = tier
                    .waiting
                    .iter()
                    .filter(|(_, w)| w.records.front().is_some_and(|(_, d)| *d <= crate::now_ms()))
                    .map(|(p, _)| *p)
                    .collect();
                for partition in ready {
                    tier.drain(partition).await?;
                }
            }
            message = consumer.recv() => {
                let message = match message {
                    Ok(message) => message,
                    Err(error) => {
                        if sluice_kafka::error::flags(&error).fatal {
                            return Err(error.into());
                        }
                        tracing::warn!(%error, %topic, "retry tier consumer error (the client retries)");
                        continue;
                    }
                };
                let record = OwnedRecord::from_message(&message);
                drop(message);
                tier.receive(record).await?;
            }
        }
    }
    let totals = tier.totals;
    consumer.unsubscribe();
    tracing::info!(%topic, ?totals, "retry tier consumer stopped");
    Ok(totals)
}

/// One tier consumer's loop state.
struct TierLoop<'a, H> {
    consumer: &'a StreamConsumer,
    topic: &'a str,
    forwarder: &'a Forwarder,
    handler: &'a mut H,
    source: Source,
    /// The crash failpoint is armed (tests): it fires after a forward, before the commit.
    failpoint: bool,
    totals: TierTotals,
    /// Per paused partition, the records held until due.
    waiting: BTreeMap<i32, Waiting>,
}

impl<H: RetryHandler> TierLoop<'_, H> {
    /// A record just polled: queued behind its partition's held records, held (and its
    /// partition paused) when not due yet, else handled.
    async fn receive(&mut self, record: OwnedRecord) -> Result<(), RetryError> {
        let partition = record.partition;
        let due = due_of(&record).unwrap_or(0);
        if let Some(held) = self.waiting.get_mut(&partition) {
            // Fetched before the pause took effect, or read again after a
            // rebalance: keep offset order behind (or instead of) the held records.
            if held
                .records
                .back()
                .is_some_and(|(r, _)| record.offset <= r.offset)
            {
                held.records.retain(|(r, _)| r.offset < record.offset);
            }
            held.records.push_back((record, due));
            self.totals.queued_while_paused += 1;
            return pause(self.consumer, self.topic, partition, true);
        }
        if due > crate::now_ms() {
            pause(self.consumer, self.topic, partition, true)?;
            self.totals.paused += 1;
            tracing::debug!(topic = %self.topic, partition, offset = record.offset, due_ms = due,
                "record not due yet; partition paused");
            self.waiting
                .entry(partition)
                .or_default()
                .records
                .push_back((record, due));
            return Ok(());
        }
        self.process(&record).await
    }

    /// Handles the due records at the front of `partition`'s queue, in offset order;
    /// resumes the partition once its queue is empty (or stays paused on a record not due
    /// yet).
    async fn drain(&mut self, partition: i32) -> Result<(), RetryError> {
        let topic = self.topic;
        let assigned = self
            .consumer
            .assignment()
            .is_ok_and(|a| a.find_partition(topic, partition).is_some());
        tracing::debug!(%topic, partition, assigned, "handling the due records of a held partition");
        if !assigned {
            // Revoked while held: the new owner reads the records again from the committed
            // offset. The pause is lifted too: librdkafka keeps an application's pause across
            // a reassignment, so a partition handed back later would never be fetched again.
            self.waiting.remove(&partition);
            if let Err(error) = pause(self.consumer, topic, partition, false) {
                tracing::warn!(%topic, partition, %error, "cannot lift the pause of a revoked partition");
            }
            tracing::info!(%topic, partition, "held records dropped: the partition was revoked");
            return Ok(());
        }
        loop {
            let Some(queue) = self.waiting.get_mut(&partition) else {
                return Ok(());
            };
            match queue.records.front() {
                Some((_, due)) if *due > crate::now_ms() => return Ok(()),
                Some(_) => {}
                None => {
                    self.waiting.remove(&partition);
                    pause(self.consumer, topic, partition, false)?;
                    return Ok(());
                }
            }
            let Some((record, _)) = queue.records.pop_front() else {
                return Ok(());
            };
            self.process(&record).await?;
        }
    }

    /// Handles one record; forwards it on a failure (then the failpoint, if armed); commits.
    async fn process(&mut self, record: &OwnedRecord) -> Result<(), RetryError> {
        let outcome = self
            .handler
            .handle(record)
            .await
            .map_err(|e| RetryError::Handler(Box::new(e)))?;
        match outcome {
            Outcome::Done => self.totals.handled += 1,
            Outcome::Failed(failure) => {
                let forwarded = self
                    .forwarder
                    .forward(record, self.source, &failure)
                    .await?;
                match forwarded.destination {
                    crate::Destination::Tier(_) => self.totals.retried += 1,
                    crate::Destination::DeadLetter => self.totals.dead_lettered += 1,
                }
                if self.failpoint {
                    crate::failpoint::trigger();
                }
            }
        }
        commit(self.consumer, record)
    }
}

/// Commits the offset after `record` (asynchronously: a lost commit re-reads the record,
/// which the handler's idempotency absorbs).
pub(crate) fn commit(consumer: &StreamConsumer, record: &OwnedRecord) -> Result<(), RetryError> {
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(
        &record.topic,
        record.partition,
        Offset::Offset(record.offset + 1),
    )?;
    consumer.commit(&list, CommitMode::Async)?;
    Ok(())
}

fn pause(
    consumer: &StreamConsumer,
    topic: &str,
    partition: i32,
    pause: bool,
) -> Result<(), RetryError> {
    let mut list = TopicPartitionList::new();
    list.add_partition(topic, partition);
    if pause {
        consumer.pause(&list)?;
    } else {
        consumer.resume(&list)?;
        tracing::debug!(%topic, partition, "partition resumed");
    }
    Ok(())
}

async fn sleep_or_forever(wait: Option<Duration>) {
    match wait {
        Some(wait) => tokio::time::sleep(wait).await,
        None => std::future::pending().await,
    }
}
