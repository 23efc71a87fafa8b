//! The `sluice-retry-*` headers a forwarded record carries, and their encoding.
//!
//! Every value is UTF-8 text; numbers are decimal, times are milliseconds since the Unix
//! epoch. The record's own headers (e.g. `sluice-event-id`) are kept before them.

use crate::record::OwnedRecord;

/// The topic the record was first consumed from.
pub const ORIGINAL_TOPIC: &str = "sluice-retry-original-topic";
/// Its partition there.
pub const ORIGINAL_PARTITION: &str = "sluice-retry-original-partition";
/// Its offset there.
pub const ORIGINAL_OFFSET: &str = "sluice-retry-original-offset";
/// Its timestamp there (absent when the record had none).
pub const ORIGINAL_TIMESTAMP: &str = "sluice-retry-original-timestamp";
/// `retryable` or `permanent`: the class of the last failure.
pub const ERROR_CLASS: &str = "sluice-retry-error-class";
/// The last failure's message.
pub const ERROR_MESSAGE: &str = "sluice-retry-error-message";
/// How many times the handler failed on the record so far (1 in the first tier).
pub const ATTEMPT: &str = "sluice-retry-attempt";
/// When the handler first failed on the record.
pub const FIRST_FAILURE: &str = "sluice-retry-first-failure";
/// When the record is due for its next attempt (in the dead-letter topic: when it was
/// dead-lettered).
pub const DUE: &str = "sluice-retry-due";

/// The prefix of every header this crate writes; a forward replaces them.
pub const PREFIX: &str = "sluice-retry-";

/// The longest error message kept in a header, in bytes (cut at a character boundary).
pub const MAX_ERROR_MESSAGE: usize = 1024;

/// The retry headers of a forwarded record, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryHeaders {
    /// See [`ORIGINAL_TOPIC`].
    pub original_topic: String,
    /// See [`ORIGINAL_PARTITION`].
    pub original_partition: i32,
    /// See [`ORIGINAL_OFFSET`].
    pub original_offset: i64,
    /// See [`ORIGINAL_TIMESTAMP`].
    pub original_timestamp_ms: Option<i64>,
    /// See [`ERROR_CLASS`].
    pub error_class: String,
    /// See [`ERROR_MESSAGE`].
    pub error_message: String,
    /// See [`ATTEMPT`].
    pub attempt: u32,
    /// See [`FIRST_FAILURE`].
    pub first_failure_ms: i64,
    /// See [`DUE`].
    pub due_ms: i64,
}

impl RetryHeaders {
    /// The headers as (name, value) pairs, in a fixed order.
    pub fn encode(&self) -> Vec<(&'static str, Vec<u8>)> {
        let mut out = vec![
            (ORIGINAL_TOPIC, self.original_topic.clone().into_bytes()),
            (
                ORIGINAL_PARTITION,
                self.original_partition.to_string().into_bytes(),
            ),
            (
                ORIGINAL_OFFSET,
                self.original_offset.to_string().into_bytes(),
            ),
        ];
        if let Some(ts) = self.original_timestamp_ms {
            out.push((ORIGINAL_TIMESTAMP, ts.to_string().into_bytes()));
        }
        out.extend([
            (ERROR_CLASS, self.error_class.clone().into_bytes()),
            (
                ERROR_MESSAGE,
                truncate(&self.error_message).as_bytes().to_vec(),
            ),
            (ATTEMPT, self.attempt.to_string().into_bytes()),
            (
                FIRST_FAILURE,
                self.first_failure_ms.to_string().into_bytes(),
            ),
            (DUE, self.due_ms.to_string().into_bytes()),
        ]);
        out
    }

    /// The retry headers of `record`, or `None` when it has none or one is missing or
    /// unreadable (a record never forwarded, or written by something else).
    pub fn decode(record: &OwnedRecord) -> Option<RetryHeaders> {
        Some(RetryHeaders {
            original_topic: record.header_str(ORIGINAL_TOPIC)?.to_owned(),
            original_partition: number(record, ORIGINAL_PARTITION)?,
            original_offset: number(record, ORIGINAL_OFFSET)?,
            original_timestamp_ms: number(record, ORIGINAL_TIMESTAMP),
            error_class: record.header_str(ERROR_CLASS)?.to_owned(),
            error_message: record.header_str(ERROR_MESSAGE)?.to_owned(),
            attempt: number(record, ATTEMPT)?,
            first_failure_ms: number(record, FIRST_FAILURE)?,
            due_ms: number(record, DUE)?,
        })
    }
}

/// How many times the handler already failed on `record` ([`ATTEMPT`]; 0 when absent or
/// unreadable: a first delivery).
pub fn attempt_of(record: &OwnedRecord) -> u32 {
    number(record, ATTEMPT).unwrap_or(0)
}

/// When `record` is due ([`DUE`]), if it says.
pub fn due_of(record: &OwnedRecord) -> Option<i64> {
    number(record, DUE)
}

fn number<T: std::str::FromStr>(record: &OwnedRecord, name: &str) -> Option<T> {
    record.header_str(name)?.trim().parse().ok()
}

fn truncate(message: &str) -> &str {
    if message.len() <= MAX_ERROR_MESSAGE {
        return message;
    }
    let mut end = MAX_ERROR_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers() -> RetryHeaders {
        RetryHeaders {
            original_topic: "mail".into(),
            original_partition: 2,
            original_offset: 41,
            original_timestamp_ms: Some(1_764_000_000_000),
            error_class: "retryable".into(),
            error_message: "flaky: fails 2 time(s) ✓".into(),
            attempt: 2,
            first_failure_ms: 1_764_000_000_100,
            due_ms: 1_764_000_002_100,
        }
    }

    fn record_with(encoded: Vec<(&'static str, Vec<u8>)>) -> OwnedRecord {
        OwnedRecord {
            topic: "mail.retry.2s".into(),
            partition: 0,
            offset: 7,
            timestamp_ms: None,
            key: Some(b"u1".to_vec()),
            payload: Some(b"{}".to_vec()),
            headers: encoded
                .into_iter()
                .map(|(k, v)| (k.to_owned(), Some(v)))
                .collect(),
        }
    }

    #[test]
    fn encode_then_decode_is_the_identity() {
        let h = headers();
        let record = record_with(h.encode());
        assert_eq!(RetryHeaders::decode(&record), Some(h.clone()));
        assert_eq!(attempt_of(&record), 2);
        assert_eq!(due_of(&record), Some(h.due_ms));
        let without_ts = RetryHeaders {
            original_timestamp_ms: None,
            ..h
        };
        let record = record_with(without_ts.encode());
        assert_eq!(record.header(ORIGINAL_TIMESTAMP), None);
        assert_eq!(RetryHeaders::decode(&record), Some(without_ts));
    }

    #[test]
    fn a_record_without_retry_headers_is_a_first_delivery() {
        let record = record_with(vec![("sluice-event-id", b"x".to_vec())]);
        assert_eq!(RetryHeaders::decode(&record), None);
        assert_eq!(attempt_of(&record), 0);
        assert_eq!(due_of(&record), None);
        let garbage = record_with(vec![(ATTEMPT, b"-1".to_vec()), (DUE, b"soon".to_vec())]);
        assert_eq!(attempt_of(&garbage), 0);
        assert_eq!(due_of(&garbage), None);
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_ERROR_MESSAGE);
        let cut = truncate(&long);
        assert!(cut.len() <= MAX_ERROR_MESSAGE && cut.len() >= MAX_ERROR_MESSAGE - 1);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
