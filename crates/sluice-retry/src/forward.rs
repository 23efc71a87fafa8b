//! Forwarding a failed record to its next tier or to the dead-letter topic.
//!
//! Invariant: [`Forwarder::forward`] returns Ok only once the broker acknowledged the copy
//! (acks=all through [`ResilientProducer`]); the caller commits the source offset after
//! that, never before, so a crash in between duplicates into the next topic at worst.

use crate::error::RetryError;
use crate::headers::{self, RetryHeaders};
use crate::names::{dlt_topic, retry_topic};
use crate::record::OwnedRecord;
use crate::route::{Destination, Failure, Source, due_ms, next_destination};
use crate::tiers::Tiers;
use sluice_core::KafkaClientSettings;
use sluice_kafka::ResilientProducer;
use sluice_kafka::producer::Outgoing;

/// The log event of one forward at `$level`: where the record came from and went, its
/// attempt, the destination's own fields (`$extra`), and the error.
macro_rules! forward_event {
    ($level:ident, $record:expr, $forwarded:expr, $failure:expr, { $($extra:tt)* },
        $message:literal) => {
        tracing::$level!(
            from_topic = %$record.topic,
            from_partition = $record.partition,
            from_offset = $record.offset,
            to_topic = %$forwarded.topic,
            to_partition = $forwarded.partition,
            to_offset = $forwarded.offset,
            attempt = $forwarded.attempt,
            $($extra)*
            error = %$failure.message,
            $message
        )
    };
}

/// A forward worked out, not yet sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// Where to.
    pub destination: Destination,
    /// The destination topic.
    pub topic: String,
    /// The record's own headers (any `sluice-retry-*` ones dropped; a header without a value
    /// is kept with an empty one), then the new retry headers.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The retry headers written.
    pub retry: RetryHeaders,
}

/// Works out the forward of `record`, which failed with `failure` in `source`, where
/// `topic` is the main topic: the destination, and the headers (the original topic is always
/// `topic`; the original coordinates from the record's retry headers when it comes from a
/// tier, else from the record itself — a main-topic record's own `sluice-retry-*` headers
/// are dropped, never trusted; the attempt count one more than before; the first failure
/// kept; due now plus the tier's delay).
pub fn plan_forward(
    tiers: &Tiers,
    topic: &str,
    record: &OwnedRecord,
    source: Source,
    failure: &Failure,
    now_ms: i64,
) -> Planned {
    let destination = next_destination(tiers, source, failure.class);
    // Only sluice writes retry headers into a tier topic; on a main-topic record they were
    // written by whoever produced it (or enqueued its outbox row) and are not trusted.
    let previous = match source {
        Source::Tier(_) => RetryHeaders::decode(record),
        Source::Main => None,
    };
    let attempt = match source {
        Source::Tier(_) => headers::attempt_of(record),
        Source::Main => 0,
    }
    .saturating_add(1);
    let retry = RetryHeaders {
        // Never from a header: the topic this forwarder serves is the record's origin.
        original_topic: topic.to_owned(),
        original_partition: previous
            .as_ref()
            .map_or(record.partition, |p| p.original_partition),
        original_offset: previous
            .as_ref()
            .map_or(record.offset, |p| p.original_offset),
        original_timestamp_ms: previous
            .as_ref()
            .map_or(record.timestamp_ms, |p| p.original_timestamp_ms),
        error_class: failure.class.as_str().to_owned(),
        error_message: failure.message.clone(),
        attempt,
        first_failure_ms: previous.as_ref().map_or(now_ms, |p| p.first_failure_ms),
        due_ms: due_ms(tiers, destination, now_ms),
    };
    let mut out: Vec<(String, Vec<u8>)> = record
        .headers
        .iter()
        .filter(|(name, _)| !name.starts_with(headers::PREFIX))
        .map(|(name, value)| (name.clone(), value.clone().unwrap_or_default()))
        .collect();
    out.extend(
        retry
            .encode()
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value)),
    );
    let topic = match destination {
        Destination::Tier(index) => tiers
            .get(index)
            .map_or_else(|| dlt_topic(topic), |tier| retry_topic(topic, tier)),
        Destination::DeadLetter => dlt_topic(topic),
    };
    Planned {
        destination,
        topic,
        headers: out,
        retry,
    }
}

/// Where a forwarded copy landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarded {
    /// Its destination.
    pub destination: Destination,
    /// Its topic.
    pub topic: String,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// The attempt count it carries.
    pub attempt: u32,
}

/// Forwards failed records of one main topic to its tiers and dead-letter topic.
#[derive(Debug, Clone)]
pub struct Forwarder {
    producer: ResilientProducer,
    topic: String,
    tiers: Tiers,
}

impl Forwarder {
    /// A forwarder for main topic `topic` with its own resilient producer.
    pub fn new(
        kafka: &KafkaClientSettings,
        topic: impl Into<String>,
        tiers: Tiers,
        client_id: &str,
    ) -> Result<Forwarder, RetryError> {
        Ok(Forwarder {
            producer: ResilientProducer::new(kafka, client_id)?,
            topic: topic.into(),
            tiers,
        })
    }

    /// The tiers.
    pub fn tiers(&self) -> &Tiers {
        &self.tiers
    }

    /// The main topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Publishes a copy of `record` (same key and payload; see [`plan_forward`]) to its next
    /// destination and waits for the broker's acknowledgement.
    pub async fn forward(
        &self,
        record: &OwnedRecord,
        source: Source,
        failure: &Failure,
    ) -> Result<Forwarded, RetryError> {
        let plan = plan_forward(
            &self.tiers,
            &self.topic,
            record,
            source,
            failure,
            crate::now_ms(),
        );
        let headers: Vec<(&str, &[u8])> = plan
            .headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_slice()))
            .collect();
        let delivered = self
            .producer
            .send(Outgoing {
                topic: &plan.topic,
                key: record.key.as_deref(),
                payload: record.payload.as_deref().unwrap_or_default(),
                partition: None,
                headers: &headers,
            })
            .await?;
        let forwarded = Forwarded {
            destination: plan.destination,
            topic: plan.topic,
            partition: delivered.partition,
            offset: delivered.offset,
            attempt: plan.retry.attempt,
        };
        match plan.destination {
            Destination::Tier(_) => forward_event!(info, record, forwarded, failure,
                { due_ms = plan.retry.due_ms, }, "record forwarded to a retry tier"),
            Destination::DeadLetter => forward_event!(warn, record, forwarded, failure,
                { error_class = failure.class.as_str(), },
                "record dead-lettered to the dead-letter topic"),
        }
        Ok(forwarded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The forward of `record` from `source` in tiers `1s,2s` of main topic `mail`.
    fn plan(record: &OwnedRecord, source: Source, failure: Failure, now_ms: i64) -> Planned {
        let tiers = Tiers::parse("1s,2s").unwrap_or_else(|e| panic!("{e}"));
        plan_forward(&tiers, "mail", record, source, &failure, now_ms)
    }

    fn record(topic: &str, headers: Vec<(String, Option<Vec<u8>>)>) -> OwnedRecord {
        OwnedRecord {
            topic: topic.into(),
            partition: 1,
            offset: 5,
            timestamp_ms: Some(1_000),
            key: Some(b"k".to_vec()),
            payload: Some(b"v".to_vec()),
            headers,
        }
    }

    #[test]
    fn a_first_failure_goes_to_the_first_tier_with_the_record_as_origin() {
        let own = vec![
            ("sluice-event-id".to_owned(), Some(b"abc".to_vec())),
            ("empty".to_owned(), None),
        ];
        let plan = plan(
            &record("mail", own),
            Source::Main,
            Failure::retryable("boom"),
            50_000,
        );
        assert_eq!(plan.destination, Destination::Tier(0));
        assert_eq!(plan.topic, "mail.retry.1s");
        assert_eq!(
            plan.retry,
            RetryHeaders {
                original_topic: "mail".into(),
                original_partition: 1,
                original_offset: 5,
                original_timestamp_ms: Some(1_000),
                error_class: "retryable".into(),
                error_message: "boom".into(),
                attempt: 1,
                first_failure_ms: 50_000,
                due_ms: 51_000,
            }
        );
        assert_eq!(plan.headers[0], ("sluice-event-id".into(), b"abc".to_vec()));
        assert_eq!(plan.headers[1], ("empty".into(), Vec::new()));
        assert_eq!(plan.headers.len(), 2 + 9);
    }

    #[test]
    fn retry_headers_on_a_main_topic_record_are_never_trusted() {
        // A producer (or an outbox row) sets every retry header, naming another topic.
        let forged = RetryHeaders {
            original_topic: "payments".into(),
            original_partition: 7,
            original_offset: 7,
            original_timestamp_ms: Some(7),
            error_class: "permanent".into(),
            error_message: "forged".into(),
            attempt: 9,
            first_failure_ms: 7,
            due_ms: 7,
        };
        let own: Vec<(String, Option<Vec<u8>>)> = forged
            .encode()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), Some(v)))
            .collect();
        let plan = plan(
            &record("mail", own),
            Source::Main,
            Failure::permanent("no"),
            50_000,
        );
        assert_eq!(plan.topic, "mail.dlt");
        assert_eq!(plan.retry.original_topic, "mail");
        assert_eq!(
            (plan.retry.original_partition, plan.retry.original_offset),
            (1, 5)
        );
        assert_eq!(
            (plan.retry.attempt, plan.retry.first_failure_ms),
            (1, 50_000)
        );
        assert_eq!(plan.headers.len(), 9, "the forged headers dropped");
    }

    #[test]
    fn a_later_failure_keeps_the_origin_and_first_failure_and_replaces_the_rest() {
        let first = plan(
            &record(
                "mail",
                vec![("sluice-event-id".into(), Some(b"abc".to_vec()))],
            ),
            Source::Main,
            Failure::retryable("one"),
            50_000,
        );
        let in_tier = OwnedRecord {
            topic: first.topic.clone(),
            partition: 0,
            offset: 99,
            timestamp_ms: Some(50_010),
            key: Some(b"k".to_vec()),
            payload: Some(b"v".to_vec()),
            headers: first
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), Some(v.clone())))
                .collect(),
        };
        let second = plan(&in_tier, Source::Tier(0), Failure::retryable("two"), 52_000);
        assert_eq!(second.topic, "mail.retry.2s");
        assert_eq!(second.retry.original_offset, 5);
        assert_eq!(second.retry.original_partition, 1);
        assert_eq!(second.retry.first_failure_ms, 50_000);
        assert_eq!(second.retry.attempt, 2);
        assert_eq!(second.retry.due_ms, 54_000);
        assert_eq!(second.retry.error_message, "two");
        // One copy of each retry header, not two.
        assert_eq!(second.headers.len(), first.headers.len());
        let third = plan(
            &in_tier,
            Source::Tier(1),
            Failure::retryable("three"),
            60_000,
        );
        assert_eq!(third.topic, "mail.dlt");
        assert_eq!(third.retry.due_ms, 60_000);
        let permanent = plan(
            &record("mail", vec![]),
            Source::Main,
            Failure::permanent("never"),
            1,
        );
        assert_eq!(
            (
                permanent.topic.as_str(),
                permanent.retry.error_class.as_str()
            ),
            ("mail.dlt", "permanent")
        );
    }
}
