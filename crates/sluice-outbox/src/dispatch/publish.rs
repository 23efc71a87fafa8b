//! Publishing a claimed batch with the resilient producer (SPEC S7): key = partition key,
//! explicit partition when set, headers with the event id, type and aggregate.

use super::claim::ClaimedEvent;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use serde_json::Value;
use sluice_kafka::ResilientProducer;
use sluice_kafka::producer::{Delivered, Outgoing};

/// The header carrying the event id; stale dispatch recovery looks for it.
pub const EVENT_ID_HEADER: &str = "sluice-event-id";
/// The header carrying the event type.
pub const EVENT_TYPE_HEADER: &str = "sluice-event-type";
/// The header carrying the aggregate type.
pub const AGGREGATE_TYPE_HEADER: &str = "sluice-aggregate-type";
/// The header carrying the aggregate id.
pub const AGGREGATE_ID_HEADER: &str = "sluice-aggregate-id";

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
/// broker: the topic needs more partitions (S11), not another attempt.
pub fn is_unknown_partition(event: &ClaimedEvent, error: &KafkaError) -> bool {
    event.partition.is_some()
        && matches!(
            error.rdkafka_error_code(),
            Some(RDKafkaErrorCode::UnknownPartition | RDKafkaErrorCode::UnknownTopicOrPartition)
        )
}

/// Publishes `events` in their order and waits for every delivery report; one result per
/// event, in the same order. All records are queued before the first report is awaited,
/// so a batch costs one linger, and the idempotent producer keeps each partition's order.
pub async fn publish_batch(
    producer: &ResilientProducer,
    events: &[ClaimedEvent],
) -> Vec<Result<Delivered, KafkaError>> {
    let mut deliveries = Vec::with_capacity(events.len());
    for event in events {
        let headers = record_headers(event);
        let header_refs: Vec<(&str, &[u8])> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_slice()))
            .collect();
        let payload = event.payload.to_string();
        let queued = producer.enqueue(Outgoing {
            topic: &event.topic,
            key: Some(event.partition_key.as_bytes()),
            payload: payload.as_bytes(),
            partition: event.partition,
            headers: &header_refs,
        });
        deliveries.push(queued);
    }
    let mut results = Vec::with_capacity(events.len());
    for queued in deliveries {
        results.push(match queued {
            Ok(delivery) => delivery.await,
            Err(error) => Err(error),
        });
    }
    results
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
