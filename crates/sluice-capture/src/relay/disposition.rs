//! What a capture does after a failed session (docs/ARCHITECTURE.md#guarantees: every error
//! has a disposition): retry on a new session, from the slot's confirmed position, when the
//! cause may pass; end the capture when the next session would meet it again. Nothing is a
//! dead letter: a change cannot be skipped without breaking the order of its key.

use super::run::RelayError;
use crate::error::passes_by_class;
use crate::snapshot::SnapshotError;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use sluice_core::disposition::Disposition;

impl RelayError {
    /// Retry on a new session, or end the capture.
    pub fn disposition(&self) -> Disposition {
        match self {
            RelayError::Capture(e) => e.disposition(),
            // Re-sent from the confirmed position by the next session, unless Kafka would
            // refuse it again.
            RelayError::Kafka { source, .. } => kafka(source),
            // Its topic may be missing from metadata for a moment after it was made (two
            // captures starting together): only what librdkafka calls fatal ends the capture.
            RelayError::StateTopic { source, .. } => {
                if client_fatal(source) {
                    Disposition::Fatal
                } else {
                    Disposition::Retry
                }
            }
            RelayError::Catalog { source, .. } => transient(source),
            // The same row or message would fail the next session too: the slot keeps it.
            RelayError::Encode(_)
            | RelayError::Order(_)
            | RelayError::Acks(_)
            | RelayError::Route(_) => Disposition::Fatal,
            // Taken again by the next session (into the slot it keeps) when the
            // cause may pass; a table it may not read, a record Kafka refuses, are not.
            RelayError::Snapshot(e) => match e {
                SnapshotError::Kafka(kafka) => sluice_kafka::disposition(kafka),
                SnapshotError::Database(database) => transient(database),
                SnapshotError::Encode(_) | SnapshotError::Value { .. } => Disposition::Fatal,
            },
            RelayError::Busy { .. } => Disposition::Retry,
            // Until an operator creates it.
            RelayError::NoPublication { .. } | RelayError::ForeignSlot { .. } => Disposition::Fatal,
        }
    }
}

/// A Kafka error of a streamed record: fatal when librdkafka says retrying cannot help (a
/// fatal client, missing credentials or ACLs, a configuration the broker refuses) or when
/// Kafka refuses the record or its topic's name — larger than `message.max.bytes`, a record a
/// topic cannot hold, a name no topic can have, a topic policy — since the next session
/// would send the same record and be refused again; retried otherwise (a broker away, a
/// delivery timed out, a leader moving, a full queue). A topic missing from metadata is
/// retried: librdkafka reports a known topic as unknown after one metadata reply that lacks
/// it, as during a rolling restart of the brokers; a topic that never comes back shows as
/// session failures (`SluiceCaptureSessionFailures`).
///
/// Unlike the snapshot's (where anything not known to pass is fatal, as the whole copy
/// starts over), an error this does not know is retried, as it always was.
pub fn kafka(error: &KafkaError) -> Disposition {
    use RDKafkaErrorCode as C;
    if client_fatal(error) {
        return Disposition::Fatal;
    }
    match error.rdkafka_error_code() {
        Some(
            C::MessageSizeTooLarge
            | C::InvalidMessageSize
            | C::MessageBatchTooLarge
            | C::InvalidRecord
            | C::InvalidTopic
            | C::PolicyViolation
            | C::UnsupportedForMessageFormat
            | C::InvalidRequiredAcks
            | C::InvalidArgument,
        ) => Disposition::Fatal,
        _ => Disposition::Retry,
    }
}

/// The client itself is done: librdkafka calls the error fatal (the producer must be built
/// anew, and the next session would build it from the same settings), or it could not be
/// built at all.
fn client_fatal(error: &KafkaError) -> bool {
    sluice_kafka::error::flags(error).fatal || matches!(error, KafkaError::ClientCreation(_))
}

/// A database error a new session may get past: the connection, not the statement — also
/// a server that says so (SQLSTATE class 08 connection exception, 53 insufficient resources,
/// 57 operator intervention: shutting down, starting up, a failover).
fn transient(error: &sqlx::Error) -> Disposition {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_) => Disposition::Retry,
        sqlx::Error::Database(db) if db.code().is_some_and(|code| passes_by_class(&code)) => {
            Disposition::Retry
        }
        _ => Disposition::Fatal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RDKafkaErrorCode as C;

    #[test]
    fn kafka_refusing_the_record_or_its_topic_ends_the_capture() {
        let produced = KafkaError::MessageProduction;
        let table = [
            // The broker, or the client, refuses the record or its topic.
            (produced(C::MessageSizeTooLarge), Disposition::Fatal),
            (produced(C::InvalidMessageSize), Disposition::Fatal),
            (produced(C::MessageBatchTooLarge), Disposition::Fatal),
            (produced(C::InvalidRecord), Disposition::Fatal),
            (produced(C::InvalidTopic), Disposition::Fatal),
            (produced(C::PolicyViolation), Disposition::Fatal),
            (produced(C::UnsupportedForMessageFormat), Disposition::Fatal),
            (produced(C::InvalidRequiredAcks), Disposition::Fatal),
            (produced(C::InvalidArgument), Disposition::Fatal),
            (KafkaError::ClientCreation("bad".into()), Disposition::Fatal),
            (produced(C::TopicAuthorizationFailed), Disposition::Fatal),
            (produced(C::ClusterAuthorizationFailed), Disposition::Fatal),
            (produced(C::SaslAuthenticationFailed), Disposition::Fatal),
            (produced(C::Fatal), Disposition::Fatal),
            // Kafka away or busy: a new session sends it again.
            (produced(C::MessageTimedOut), Disposition::Retry),
            (produced(C::BrokerTransportFailure), Disposition::Retry),
            (produced(C::AllBrokersDown), Disposition::Retry),
            (produced(C::RequestTimedOut), Disposition::Retry),
            (produced(C::NotLeaderForPartition), Disposition::Retry),
            (produced(C::LeaderNotAvailable), Disposition::Retry),
            (produced(C::NotEnoughReplicas), Disposition::Retry),
            (
                produced(C::NotEnoughReplicasAfterAppend),
                Disposition::Retry,
            ),
            (produced(C::QueueFull), Disposition::Retry),
            // A topic missing from one metadata reply (a rolling restart): not for good.
            (produced(C::UnknownTopic), Disposition::Retry),
            (produced(C::UnknownTopicOrPartition), Disposition::Retry),
            (produced(C::UnknownPartition), Disposition::Retry),
            (produced(C::PurgeQueue), Disposition::Retry),
            (KafkaError::Canceled, Disposition::Retry),
        ];
        for (error, expected) in table {
            assert_eq!(kafka(&error), expected, "{error}");
            let relayed = RelayError::Kafka {
                topic: "dbz.public.items".into(),
                source: error,
            };
            assert_eq!(relayed.disposition(), expected, "{relayed}");
        }
    }

    #[test]
    fn a_refused_record_names_its_topic_and_the_cause() {
        let error = RelayError::Kafka {
            topic: "dbz.public.items".into(),
            source: KafkaError::MessageProduction(C::MessageSizeTooLarge),
        };
        let text = error.to_string();
        assert!(text.contains("topic dbz.public.items"), "{text}");
        assert!(text.contains("MessageSizeTooLarge"), "{text}");
        assert_eq!(error.disposition(), Disposition::Fatal);
    }

    #[test]
    fn the_state_topic_ends_the_capture_only_on_what_kafka_calls_fatal() {
        let state = |source| RelayError::StateTopic {
            topic: "sluice-capture-state".into(),
            source,
        };
        let denied = state(KafkaError::MessageProduction(C::TopicAuthorizationFailed));
        assert_eq!(denied.disposition(), Disposition::Fatal);
        let away = state(KafkaError::MessageProduction(C::MessageTimedOut));
        assert_eq!(away.disposition(), Disposition::Retry);
        // Just made by another capture, not yet in this client's metadata.
        let unseen = state(KafkaError::MetadataFetch(C::UnknownTopicOrPartition));
        assert_eq!(unseen.disposition(), Disposition::Retry);
    }

    #[test]
    fn database_errors_retry_only_for_the_connection() {
        let io = sqlx::Error::Io(std::io::Error::other("reset"));
        assert_eq!(transient(&io), Disposition::Retry);
        assert_eq!(transient(&sqlx::Error::PoolTimedOut), Disposition::Retry);
        assert_eq!(transient(&sqlx::Error::RowNotFound), Disposition::Fatal);
    }
}
