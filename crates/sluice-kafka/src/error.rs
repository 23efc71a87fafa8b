//! The disposition of a Kafka client error (SPEC S4.7).

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
    let fatal = matches!(
        code,
        C::Fatal
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
            | C::UnknownTopicOrPartition
            | C::AssignmentLost
            | C::State
    );
    KafkaErrorFlags { fatal, retriable }
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
}
