//! The disposition of a Kafka client error (docs/ARCHITECTURE.md#errors).

use crate::stall::ErrorClass;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use sluice_core::Disposition;
use sluice_core::disposition::{KafkaErrorFlags, classify_kafka};

/// librdkafka's flags for an error, as far as the error carries them.
///
/// `rdkafka` exposes `is_fatal`/`is_retriable` only on `RDKafkaError` values; a plain
/// `KafkaError` carries an error code, and librdkafka reports fatal client state with the
/// `Fatal` code. Broker-side codes that librdkafka itself retries (transport failures,
/// timeouts, leadership changes, coordinator moves, rebalances) are retriable.
pub fn flags(error: &KafkaError) -> KafkaErrorFlags {
    let Some(code) = error.rdkafka_error_code() else {
        return KafkaErrorFlags {
            fatal: false,
            retriable: false,
        };
    };
    use RDKafkaErrorCode as C;
    // Client states that retrying cannot fix: a fatal client, missing credentials or ACLs,
    // a configuration the broker refuses.
    // librdkafka marks some consumption errors fatal itself (a fenced static member).
    let fatal = matches!(error, KafkaError::MessageConsumptionFatal(_))
        || matches!(
            code,
            C::Fatal
                | C::FencedInstanceId
                | C::Authentication
                | C::SaslAuthenticationFailed
                | C::TopicAuthorizationFailed
                | C::GroupAuthorizationFailed
                | C::ClusterAuthorizationFailed
                | C::InvalidSessionTimeout
                | C::InvalidGroupId
                | C::InvalidConfig
                | C::UnsupportedVersion
        );
    let retriable = matches!(
        code,
        C::BrokerTransportFailure
            | C::AllBrokersDown
            | C::OperationTimedOut
            | C::RequestTimedOut
            | C::NotCoordinator
            | C::CoordinatorNotAvailable
            | C::CoordinatorLoadInProgress
            | C::NotLeaderForPartition
            | C::LeaderNotAvailable
            | C::NetworkException
            | C::RebalanceInProgress
            | C::IllegalGeneration
            | C::UnknownMemberId
            | C::StaleMemberEpoch
            | C::AssignmentLost
            | C::State
    );
    KafkaErrorFlags { fatal, retriable }
}

/// How a consumer error behaves over time (see `crate::stall`): a state librdkafka
/// recovers from once its cause passes, one that may or may not heal, or one that cannot.
///
/// Codes that cannot heal: `NotImplemented` is what librdkafka reports for a record batch
/// in a codec it was built without; `BadCompression` and `BadMsg` are batches it cannot
/// decode. The offset never moves past them, so retrying is a silent stall.
pub fn consumer_error_class(error: &KafkaError) -> ErrorClass {
    use RDKafkaErrorCode as C;
    let f = flags(error);
    if f.fatal {
        return ErrorClass::Permanent;
    }
    if f.retriable {
        return ErrorClass::Transient;
    }
    match error.rdkafka_error_code() {
        Some(
            C::NotImplemented
            | C::BadCompression
            | C::BadMessage
            | C::InvalidMessage
            | C::UnsupportedCompressionType
            | C::UnsupportedForMessageFormat
            | C::InconsistentGroupProtocol,
        ) => ErrorClass::Permanent,
        // Deleted topics, missing partitions and everything not classified above: they may
        // heal (metadata catching up after a topic is created), so they are bounded in time.
        _ => ErrorClass::Persistent,
    }
}

/// Retry, or fatal, for a Kafka client error. (Kafka errors are never a dead letter: a
/// record that cannot be stored is decided by the decoder, not the client.)
pub fn disposition(error: &KafkaError) -> Disposition {
    classify_kafka(flags(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_failures_are_transient_and_fatal_is_fatal() {
        let transient = KafkaError::ConsumerCommit(RDKafkaErrorCode::RebalanceInProgress);
        assert_eq!(disposition(&transient), Disposition::Retry);
        let gone = KafkaError::MessageConsumption(RDKafkaErrorCode::BrokerTransportFailure);
        assert_eq!(disposition(&gone), Disposition::Retry);
        // What a cluster just started answers for a group's offsets.
        let starting = KafkaError::MetadataFetch(RDKafkaErrorCode::NotCoordinator);
        assert_eq!(disposition(&starting), Disposition::Retry);
        for code in [
            RDKafkaErrorCode::Fatal,
            RDKafkaErrorCode::TopicAuthorizationFailed,
            RDKafkaErrorCode::GroupAuthorizationFailed,
            RDKafkaErrorCode::InvalidSessionTimeout,
        ] {
            let error = KafkaError::MessageConsumption(code);
            assert_eq!(disposition(&error), Disposition::Fatal, "{code:?}");
            assert!(flags(&error).fatal, "{code:?}");
        }
        let creation = KafkaError::ClientCreation("bad config".into());
        assert_eq!(disposition(&creation), Disposition::Fatal);
    }

    #[test]
    fn consumer_errors_by_how_they_behave_over_time() {
        let class = |code| consumer_error_class(&KafkaError::MessageConsumption(code));
        use RDKafkaErrorCode as C;
        for code in [
            C::BrokerTransportFailure,
            C::AllBrokersDown,
            C::NotLeaderForPartition,
            C::LeaderNotAvailable,
            C::CoordinatorNotAvailable,
            C::RebalanceInProgress,
        ] {
            assert_eq!(class(code), ErrorClass::Transient, "{code:?}");
        }
        for code in [
            C::UnknownTopicOrPartition,
            C::UnknownTopic,
            C::UnknownPartition,
        ] {
            assert_eq!(class(code), ErrorClass::Persistent, "{code:?}");
        }
        for code in [
            C::NotImplemented,
            C::BadCompression,
            C::BadMessage,
            C::Fatal,
            C::TopicAuthorizationFailed,
        ] {
            assert_eq!(class(code), ErrorClass::Permanent, "{code:?}");
        }
        assert_eq!(
            consumer_error_class(&KafkaError::MessageConsumptionFatal(C::Fatal)),
            ErrorClass::Permanent
        );
    }
}
