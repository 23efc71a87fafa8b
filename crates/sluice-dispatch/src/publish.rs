//! Publishing a claimed batch with the resilient producer: key = partition key, explicit
//! partition when set, headers with the event id, type and aggregate.
//!
//! Invariant (per-key order): an event is handed to the producer only after every earlier
//! event of its (topic, key) in the batch was acknowledged. The batch goes out in waves —
//! the first unsent event of every key, all pipelined, then their delivery reports — so a
//! batch of distinct keys is one wave, and only a key with several events in the batch waits
//! a round trip per event. Pipelining one key's events is not enough: librdkafka leaves a
//! gap when a record times out (or its produce request fails) while a later record of the
//! same partition still gets through, and the later event would then be in the topic ahead
//! of the earlier one's re-publication. At a key's first failure the rest of its chain is
//! not sent ([`Sent::Held`]); the dispatcher requeues them without an attempt, behind the
//! failed event's back-off.
//!
//! Nothing is handed to the producer after the claim's send window closes
//! ([`crate::settings::OutboxSettings::send_window`]): stale recovery must never
//! look at a claim whose records can still reach Kafka.

use crate::store::claim::ClaimedEvent;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use serde_json::Value;
use sluice_kafka::ResilientProducer;
use sluice_kafka::producer::{Delivered, Outgoing};
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

pub use sluice_outbox::{
    AGGREGATE_ID_HEADER, AGGREGATE_TYPE_HEADER, EVENT_ID_HEADER, EVENT_TYPE_HEADER,
};

/// The record headers of an event: sluice's four, then the row's own (a JSON string is sent
/// as its text, any other value as JSON). A row header cannot replace sluice's.
pub fn record_headers(event: &ClaimedEvent) -> Vec<(String, Vec<u8>)> {
    let mut headers = vec![
        (
            EVENT_ID_HEADER.to_owned(),
            event.id.to_string().into_bytes(),
        ),
        (
            EVENT_TYPE_HEADER.to_owned(),
            event.event_type.clone().into_bytes(),
        ),
        (
            AGGREGATE_TYPE_HEADER.to_owned(),
            event.aggregate_type.clone().into_bytes(),
        ),
        (
            AGGREGATE_ID_HEADER.to_owned(),
            event.aggregate_id.clone().into_bytes(),
        ),
    ];
    for (name, value) in &event.headers {
        if headers.iter().any(|(own, _)| own == name) {
            continue;
        }
        let bytes = match value {
            Value::String(text) => text.clone().into_bytes(),
            other => other.to_string().into_bytes(),
        };
        headers.push((name.clone(), bytes));
    }
    headers
}

/// Whether a publish error means the explicit partition does not exist (yet) on the
/// broker: the topic needs more partitions, not another attempt.
pub fn is_unknown_partition(event: &ClaimedEvent, error: &KafkaError) -> bool {
    event.partition.is_some()
        && matches!(
            error.rdkafka_error_code(),
            Some(RDKafkaErrorCode::UnknownPartition | RDKafkaErrorCode::UnknownTopicOrPartition)
        )
}

/// Whether a failed publish may stem from a topic the broker does not have: librdkafka
/// holds a record for an unknown topic until the delivery timeout (or the metadata
/// propagation time) and then fails it as timed out or as an unknown topic.
pub fn may_be_a_missing_topic(error: &KafkaError) -> bool {
    matches!(
        error.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::MessageTimedOut
                | RDKafkaErrorCode::UnknownTopic
                | RDKafkaErrorCode::UnknownTopicOrPartition
        )
    )
}

/// What became of one claimed event.
#[derive(Debug)]
pub enum Sent {
    /// The broker acknowledged the record.
    Delivered(Delivered),
    /// Queueing or delivering the record failed.
    Failed(KafkaError),
    /// Not handed to the producer; requeue without an attempt.
    Held(HoldReason),
}

/// Why an event was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldReason {
    /// An earlier event of its key in this batch failed.
    BehindFailure,
    /// The claim's send window closed before its turn.
    WindowClosed,
}

impl HoldReason {
    /// The text recorded in `last_error`.
    pub fn as_str(self) -> &'static str {
        match self {
            HoldReason::BehindFailure => "held: an earlier event of its key failed",
            HoldReason::WindowClosed => "held: the claim's send window closed",
        }
    }
}

/// Publishes `events` (in creation order) key by key in waves (see the module docs) and
/// returns one outcome per event, in the same order. Nothing is queued at or after
/// `send_until`. `fail_next` is the test-only fault (read only with the `failpoints`
/// feature): when set, the first event to be sent is not sent and fails as a delivery
/// timeout would, and the flag is cleared.
pub async fn publish_in_key_order(
    producer: &ResilientProducer,
    events: &[ClaimedEvent],
    send_until: Instant,
    #[cfg_attr(
        not(feature = "failpoints"),
        expect(
            unused_variables,
            reason = "the fault exists only with the failpoints feature"
        )
    )]
    fail_next: &mut bool,
) -> Vec<Sent> {
    let mut chains: Vec<VecDeque<usize>> = vec![];
    let mut chain_of: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, event) in events.iter().enumerate() {
        let key = (event.topic.as_str(), event.partition_key.as_str());
        let c = *chain_of.entry(key).or_insert_with(|| {
            chains.push(VecDeque::new());
            chains.len() - 1
        });
        chains[c].push_back(i);
    }
    let mut results: Vec<Option<Sent>> = events.iter().map(|_| None).collect();
    loop {
        let mut wave = vec![];
        for (c, chain) in chains.iter_mut().enumerate() {
            let Some(i) = chain.pop_front() else {
                continue;
            };
            if Instant::now() >= send_until {
                results[i] = Some(Sent::Held(HoldReason::WindowClosed));
                hold(chain, &mut results, HoldReason::WindowClosed);
                continue;
            }
            #[cfg(feature = "failpoints")]
            if std::mem::take(fail_next) {
                tracing::warn!(id = %events[i].id, "failpoint: this publish fails once");
                results[i] = Some(Sent::Failed(KafkaError::MessageProduction(
                    RDKafkaErrorCode::MessageTimedOut,
                )));
                hold(chain, &mut results, HoldReason::BehindFailure);
                continue;
            }
            match enqueue(producer, &events[i]) {
                Ok(delivery) => wave.push((c, i, delivery)),
                Err(error) => {
                    results[i] = Some(Sent::Failed(error));
                    hold(chain, &mut results, HoldReason::BehindFailure);
                }
            }
        }
        if wave.is_empty() && chains.iter().all(VecDeque::is_empty) {
            break;
        }
        for (c, i, delivery) in wave {
            match delivery.await {
                Ok(delivered) => results[i] = Some(Sent::Delivered(delivered)),
                Err(error) => {
                    results[i] = Some(Sent::Failed(error));
                    hold(&mut chains[c], &mut results, HoldReason::BehindFailure);
                }
            }
        }
    }
    results
        .into_iter()
        .map(|r| r.unwrap_or(Sent::Held(HoldReason::BehindFailure)))
        .collect()
}

/// Marks the rest of a key's chain as not sent.
fn hold(chain: &mut VecDeque<usize>, results: &mut [Option<Sent>], why: HoldReason) {
    for i in chain.drain(..) {
        results[i] = Some(Sent::Held(why));
    }
}

/// Queues one event's record; the future resolves with its delivery report.
fn enqueue(
    producer: &ResilientProducer,
    event: &ClaimedEvent,
) -> Result<impl Future<Output = Result<Delivered, KafkaError>> + use<>, KafkaError> {
    let headers = record_headers(event);
    let header_refs: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_slice()))
        .collect();
    let payload = event.payload.to_string();
    producer.enqueue(Outgoing {
        topic: &event.topic,
        key: Some(event.partition_key.as_bytes()),
        payload: payload.as_bytes(),
        partition: event.partition,
        headers: &header_refs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use uuid::Uuid;

    fn event() -> ClaimedEvent {
        ClaimedEvent {
            id: Uuid::nil(),
            seq: 1,
            aggregate_type: "user".into(),
            aggregate_id: "42".into(),
            event_type: "mailbox.command".into(),
            topic: "t".into(),
            partition_key: "42".into(),
            partition: None,
            payload: json!({}),
            headers: json!({"trace": "abc", "n": 1, EVENT_ID_HEADER: "forged"})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            attempts: 0,
            claim_id: Uuid::nil(),
            created_at: chrono::DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn headers_carry_id_type_aggregate_and_the_rows_own() {
        let headers = record_headers(&event());
        let text: Vec<(String, String)> = headers
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8(v).unwrap_or_default()))
            .collect();
        assert_eq!(
            text,
            vec![
                (EVENT_ID_HEADER.into(), Uuid::nil().to_string()),
                (EVENT_TYPE_HEADER.into(), "mailbox.command".into()),
                (AGGREGATE_TYPE_HEADER.into(), "user".into()),
                (AGGREGATE_ID_HEADER.into(), "42".into()),
                ("n".into(), "1".into()),
                ("trace".into(), "abc".into()),
            ]
        );
    }

    #[test]
    fn unknown_partition_only_for_an_explicit_partition() {
        let error = KafkaError::MessageProduction(RDKafkaErrorCode::UnknownPartition);
        assert!(!is_unknown_partition(&event(), &error));
        let mut explicit = event();
        explicit.partition = Some(7);
        assert!(is_unknown_partition(&explicit, &error));
        let other = KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut);
        assert!(!is_unknown_partition(&explicit, &other));
    }
}
