//! A client context that logs librdkafka's errors through `tracing` and remembers the last
//! one that will not heal by retrying (authentication, TLS), so that a call which then times
//! out reports the cause instead of a bare "broker transport failure".

use rdkafka::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use std::sync::{Arc, Mutex};

/// Remembers the last authentication or TLS error of a client.
#[derive(Debug, Clone, Default)]
pub struct ErrorMemory {
    last: Arc<Mutex<Option<(RDKafkaErrorCode, String)>>>,
}

impl ErrorMemory {
    /// The last authentication or TLS error and librdkafka's reason, if any.
    pub fn last(&self) -> Option<(RDKafkaErrorCode, String)> {
        self.last.lock().ok().and_then(|last| last.clone())
    }

    /// `error`, or — when it is a timeout or transport failure and an authentication or
    /// TLS error was seen — that error, which names the cause.
    pub fn explain(&self, error: KafkaError) -> KafkaError {
        use RDKafkaErrorCode as C;
        let vague = matches!(
            error.rdkafka_error_code(),
            Some(
                C::BrokerTransportFailure
                    | C::AllBrokersDown
                    | C::OperationTimedOut
                    | C::RequestTimedOut
            )
        );
        match self.last() {
            Some((code, reason)) if vague => {
                tracing::error!(%error, "kafka: {reason}");
                KafkaError::Global(code)
            }
            _ => error,
        }
    }
}

/// Whether retrying cannot fix an error: credentials, certificates.
pub fn is_auth_or_tls(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::Authentication | C::SaslAuthenticationFailed | C::SSL | C::ClusterAuthorizationFailed
    )
}

impl ClientContext for ErrorMemory {
    /// librdkafka reports a failed SASL authentication or TLS handshake only in its log
    /// (and as an error event nobody polls during a blocking metadata call): remember it.
    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        let severe = matches!(
            level,
            RDKafkaLogLevel::Emerg
                | RDKafkaLogLevel::Alert
                | RDKafkaLogLevel::Critical
                | RDKafkaLogLevel::Error
        );
        let code = if message.contains("SASL authentication error")
            || message.contains("SASL authentication failed")
        {
            Some(RDKafkaErrorCode::Authentication)
        } else if message.contains("SSL handshake failed")
            || message.contains("certificate verify failed")
        {
            Some(RDKafkaErrorCode::SSL)
        } else {
            None
        };
        match code {
            Some(code) if severe => {
                tracing::warn!(target: "librdkafka", facility, "{message}");
                if let Ok(mut last) = self.last.lock() {
                    *last = Some((code, message.to_owned()));
                }
            }
            _ if severe => tracing::warn!(target: "librdkafka", facility, "{message}"),
            _ => tracing::debug!(target: "librdkafka", facility, "{message}"),
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        match error.rdkafka_error_code() {
            Some(code) if is_auth_or_tls(code) => {
                tracing::warn!(target: "librdkafka", %error, reason, "kafka client error");
                if let Ok(mut last) = self.last.lock() {
                    *last = Some((code, reason.to_owned()));
                }
            }
            _ => tracing::debug!(target: "librdkafka", %error, reason, "kafka client error"),
        }
    }
}

impl ConsumerContext for ErrorMemory {}
