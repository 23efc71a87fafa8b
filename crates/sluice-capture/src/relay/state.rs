//! Whether a slot's initial snapshot completed, kept in a Kafka topic
//! (`CAPTURE_STATE_TOPIC`, like Connect's offsets topic; docs/capture.md#snapshot): a record
//! keyed by the topic prefix, database and slot says `snapshotting` before the copy starts and `streaming`
//! once every snapshot record was acknowledged. A start that finds its slot and
//! `snapshotting` as the last word knows the copy was cut short, and does it again.
//!
//! The topic has one partition, infinite retention and `min.insync.replicas` 2 of 3 (fewer on
//! a smaller cluster); it is created when missing. The source database is never written.

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Message, Offset, TopicPartitionList};
use sluice_core::KafkaClientSettings;
use sluice_core::settings::topics::TopicPlan;
use sluice_kafka::{Admin, ResilientProducer};
use std::time::{Duration, Instant};

/// Where a slot's initial snapshot stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotState {
    /// The copy started and has not finished (or its end was not recorded).
    Snapshotting,
    /// The copy finished (or none was wanted): the slot streams.
    Streaming,
}

impl SnapshotState {
    fn as_str(self) -> &'static str {
        match self {
            SnapshotState::Snapshotting => "snapshotting",
            SnapshotState::Streaming => "streaming",
        }
    }
}

/// The state topic and this capture's key in it.
#[derive(Debug, Clone)]
pub struct StateTopic {
    client: KafkaClientSettings,
    topic: String,
    key: String,
}

/// How long reading or creating the state topic may take.
const TIMEOUT: Duration = Duration::from_secs(30);

impl StateTopic {
    /// The state of slot `slot` of database `database` captured under topic prefix `prefix`
    /// (two clusters' captures with the same database and slot names differ by it) in `topic`.
    pub fn new(
        client: &KafkaClientSettings,
        topic: &str,
        (prefix, database, slot): (&str, &str, &str),
    ) -> Self {
        Self {
            client: client.clone(),
            topic: topic.to_owned(),
            key: format!("{prefix}/{database}/{slot}"),
        }
    }

    /// The topic's name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Creates the topic when it is missing (one partition, kept forever).
    pub async fn ensure(&self) -> Result<(), KafkaError> {
        let admin = Admin::new(&self.client, TIMEOUT)?;
        let brokers = admin.broker_count()?.max(1);
        let replication_factor = i16::try_from(brokers.min(3)).unwrap_or(3);
        let plan = TopicPlan {
            partitions: 1,
            replication_factor,
            min_insync_replicas: i32::from(replication_factor.min(2)),
            retention_ms: Some(-1),
            reduced: None,
            partitions_from: None,
            replication_factor_from: None,
        };
        admin.ensure_durable_topic(&self.topic, &plan).await?;
        Ok(())
    }

    /// The last state recorded for this slot, if any. The topic is read by a blocking
    /// consumer (up to 30 s), on a thread of its own rather than the runtime's.
    pub async fn last(&self) -> Result<Option<SnapshotState>, KafkaError> {
        let this = self.clone();
        match tokio::task::spawn_blocking(move || this.read_last()).await {
            Ok(last) => last,
            // The read panicked: so does its caller, as when it ran in place.
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            // Cancelled: only the runtime shutting down does that.
            Err(_) => Err(KafkaError::Canceled),
        }
    }

    /// [`StateTopic::last`], blocking: reads the topic from its start to its end.
    fn read_last(&self) -> Result<Option<SnapshotState>, KafkaError> {
        let config = sluice_kafka::config::reader_config(&self.client, "sluice-capture-state");
        let reader: BaseConsumer = config.create()?;
        let (low, high) = reader.fetch_watermarks(&self.topic, 0, TIMEOUT)?;
        if high <= low {
            return Ok(None);
        }
        let mut assignment = TopicPartitionList::new();
        assignment.add_partition_offset(&self.topic, 0, Offset::Offset(low))?;
        reader.assign(&assignment)?;
        let deadline = Instant::now() + TIMEOUT;
        let mut state = None;
        let mut next = low;
        while next < high {
            if Instant::now() > deadline {
                return Err(KafkaError::MessageConsumption(
                    rdkafka::types::RDKafkaErrorCode::OperationTimedOut,
                ));
            }
            match reader.poll(Duration::from_millis(500)) {
                None | Some(Err(KafkaError::PartitionEOF(_))) => {}
                Some(Err(error)) => return Err(error),
                Some(Ok(message)) => {
                    next = message.offset() + 1;
                    if message.key() == Some(self.key.as_bytes()) {
                        state = match message.payload() {
                            Some(b"snapshotting") => Some(SnapshotState::Snapshotting),
                            Some(b"streaming") => Some(SnapshotState::Streaming),
                            _ => state,
                        };
                    }
                }
            }
        }
        Ok(state)
    }

    /// Records `state` for this slot; returns once Kafka acknowledged it.
    pub async fn record(
        &self,
        producer: &ResilientProducer,
        state: SnapshotState,
    ) -> Result<(), KafkaError> {
        producer
            .enqueue_maybe_tombstone(
                &self.topic,
                Some(self.key.as_bytes()),
                Some(state.as_str().as_bytes()),
                Some(0),
                &[],
            )?
            .await?;
        Ok(())
    }
}
