//! The resilient producer: acks=all, idempotence, zstd, linger 20 ms, 64 KiB
//! batches, and every delivery report checked.

use crate::config::producer_config;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use sluice_core::KafkaClientSettings;
use std::time::{Duration, SystemTime};

/// Where a record landed, and when its acknowledgement was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivered {
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// When the delivery report was taken (no earlier than the broker's acknowledgement).
    pub acked_at: SystemTime,
}

/// One record to publish.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    /// Topic.
    pub topic: &'a str,
    /// Key bytes.
    pub key: Option<&'a [u8]>,
    /// Value bytes.
    pub payload: &'a [u8],
    /// Explicit partition, or `None` for the key's hash.
    pub partition: Option<i32>,
    /// Headers (name, value).
    pub headers: &'a [(&'a str, &'a [u8])],
}

/// One record to publish as a copy of a consumed one: its headers are re-published exactly
/// as they were, in order, repeats and headers without a value (`None`) included (a dead
/// letter's replay).
#[derive(Debug, Clone, Copy)]
pub struct OutgoingCopy<'a> {
    /// Topic.
    pub topic: &'a str,
    /// Key bytes.
    pub key: Option<&'a [u8]>,
    /// Value bytes.
    pub payload: &'a [u8],
    /// Explicit partition, or `None` for the key's hash.
    pub partition: Option<i32>,
    /// Headers (name, value; `None`: no value), in order.
    pub headers: &'a [(&'a str, Option<&'a [u8]>)],
}

/// A producer whose sends resolve only when the broker acknowledged (acks=all).
#[derive(Clone)]
pub struct ResilientProducer {
    producer: FutureProducer,
}

impl std::fmt::Debug for ResilientProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResilientProducer").finish_non_exhaustive()
    }
}

impl ResilientProducer {
    /// Creates the producer.
    pub fn new(client: &KafkaClientSettings, client_id: &str) -> Result<Self, KafkaError> {
        Ok(Self {
            producer: producer_config(client, client_id).create()?,
        })
    }

    /// [`ResilientProducer::new`] whose records are acknowledged or failed within
    /// `delivery_timeout` of being queued (`message.timeout.ms`; the request timeout is
    /// lowered to it when shorter), with `linger` instead of the default 20 ms. The outbox
    /// dispatcher relies on the bound, and waits for a key's record before sending the
    /// next one, so it wants a short linger. Its queue holds at most about `queue_bytes`
    /// (a full queue makes [`ResilientProducer::enqueue`] wait).
    pub fn with_timings(
        client: &KafkaClientSettings,
        client_id: &str,
        delivery_timeout: Duration,
        linger: Duration,
        queue_bytes: usize,
    ) -> Result<Self, KafkaError> {
        let config = crate::config::timed_producer_config(
            client,
            client_id,
            delivery_timeout,
            linger,
            queue_bytes,
        );
        Ok(Self {
            producer: config.create()?,
        })
    }

    /// Publishes one record and waits for its delivery report.
    pub async fn send(&self, record: Outgoing<'_>) -> Result<Delivered, KafkaError> {
        self.enqueue(record)?.await
    }

    /// Publishes a copy of a consumed record (its headers as they were) and waits for its
    /// delivery report.
    pub async fn send_copy(&self, record: OutgoingCopy<'_>) -> Result<Delivered, KafkaError> {
        let headers = record
            .headers
            .iter()
            .map(|&(key, value)| Header { key, value });
        let future = future_record(
            record.topic,
            record.key,
            record.payload,
            record.partition,
            headers,
        );
        self.queue(future)?.await
    }

    /// Queues one record without waiting for its delivery (waiting for room when the local
    /// queue is full); the returned future resolves with the delivery report. Callers must
    /// await every future: an unchecked delivery is a lost message.
    pub fn enqueue(
        &self,
        record: Outgoing<'_>,
    ) -> Result<impl Future<Output = Result<Delivered, KafkaError>> + use<>, KafkaError> {
        let headers = record.headers.iter().map(|&(key, value)| Header {
            key,
            value: Some(value),
        });
        self.queue(future_record(
            record.topic,
            record.key,
            record.payload,
            record.partition,
            headers,
        ))
    }

    /// As [`ResilientProducer::enqueue`] for a record whose value may be absent: `None` is a
    /// tombstone (a Kafka null value, what a compacted topic reads as a delete); `partition`
    /// `None` places it by its key's hash.
    pub fn enqueue_maybe_tombstone(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        partition: Option<i32>,
        headers: &[(&str, &[u8])],
    ) -> Result<impl Future<Output = Result<Delivered, KafkaError>> + use<>, KafkaError> {
        let headers = headers.iter().map(|&(key, value)| Header {
            key,
            value: Some(value),
        });
        let mut future = future_record(topic, key, &[], partition, headers);
        future.payload = payload;
        self.queue(future)
    }

    /// Queues `future` (waiting for room when the local queue is full); the returned future
    /// resolves with the delivery report.
    fn queue(
        &self,
        mut future: FutureRecord<'_, [u8], [u8]>,
    ) -> Result<impl Future<Output = Result<Delivered, KafkaError>> + use<>, KafkaError> {
        let delivery = loop {
            match self.producer.send_result(future) {
                Ok(delivery) => break delivery,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    future = back;
                    self.producer.poll(Duration::from_millis(5));
                }
                Err((error, _)) => return Err(error),
            }
        };
        Ok(async move {
            match delivery.await {
                Ok(Ok(d)) => Ok(Delivered {
                    partition: d.partition,
                    offset: d.offset,
                    acked_at: SystemTime::now(),
                }),
                Ok(Err((error, _))) => Err(error),
                Err(_canceled) => Err(KafkaError::Canceled),
            }
        })
    }

    /// Waits until every queued record has been delivered or failed.
    pub fn flush(&self, timeout: Duration) -> Result<(), KafkaError> {
        self.producer.flush(timeout)
    }
}

/// A record for librdkafka: `headers` in order.
fn future_record<'a>(
    topic: &'a str,
    key: Option<&'a [u8]>,
    payload: &'a [u8],
    partition: Option<i32>,
    headers: impl ExactSizeIterator<Item = Header<'a, &'a [u8]>>,
) -> FutureRecord<'a, [u8], [u8]> {
    let mut owned = OwnedHeaders::new_with_capacity(headers.len());
    for header in headers {
        owned = owned.insert(header);
    }
    let mut future = FutureRecord::<[u8], [u8]>::to(topic)
        .payload(payload)
        .headers(owned);
    if let Some(key) = key {
        future = future.key(key);
    }
    if let Some(partition) = partition {
        future = future.partition(partition);
    }
    future
}
