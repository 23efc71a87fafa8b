//! Dead letters: messages that can never be stored.
//!
//! A dead letter keeps the record's coordinates, its Kafka timestamp, its key, its payload
//! as raw bytes (invalid UTF-8 is kept), its headers (in order, repeats and headers without a
//! value kept, values as raw bytes), the original size, and a reason that names the field and
//! the rule. Its identity is the coordinates *and* the record's timestamp, key
//! and payload: replaying a partition must not multiply rows (a redelivered record is
//! byte-identical), and a new record at reused coordinates (its topic was deleted and
//! created again) must not be taken for the old one and dropped. Payloads over 64 KiB are
//! truncated to 64 KiB and the reason says so.

use chrono::{DateTime, Utc};
use std::fmt;

/// The largest payload stored in a dead-letter row.
pub const MAX_STORED_PAYLOAD: usize = 64 * 1024;

/// Where a Kafka record came from (unique only while its topic is not re-created).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordCoords {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: i32,
    /// Offset within the partition.
    pub offset: i64,
}

impl fmt::Display for RecordCoords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]@{}", self.topic, self.partition, self.offset)
    }
}

/// Why a record is a dead letter (`error_kind` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeadLetterKind {
    /// The payload is not a valid message of its topic.
    DecodeError,
    /// The package name is not in the applications table.
    UnknownApplication,
    /// The row passed decoding but broke a database constraint at write time.
    ConstraintViolation,
    /// A declared sink's lookup found no row for the record's key: the kind its mapping file
    /// names (`unknown_application`-style; see [`DeadLetterKind::unresolved`]).
    Unresolved(&'static str),
}

impl DeadLetterKind {
    /// Every kind, in report order.
    pub const ALL: [DeadLetterKind; 3] = [
        Self::DecodeError,
        Self::UnknownApplication,
        Self::ConstraintViolation,
    ];

    /// The `error_kind` column value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DecodeError => "decode_error",
            Self::UnknownApplication => "unknown_application",
            Self::ConstraintViolation => "constraint_violation",
            Self::Unresolved(kind) => kind,
        }
    }

    /// The kind a mapping file names for an unknown lookup key. `unknown_application` is the
    /// seeds' own kind (the metrics and dashboards know it); any other name is interned once per distinct name (a handful per process, read
    /// from the mapping file at start), so the kind stays `Copy`.
    pub fn unresolved(name: &str) -> Self {
        match Self::parse(name) {
            Some(kind) => kind,
            None => Self::Unresolved(intern(name)),
        }
    }

    /// Parses an `error_kind` column value.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// One `&'static str` per distinct name: the names come from mapping files read at start,
/// so the set stays as small as the files.
fn intern(name: &str) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut names = NAMES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(known) = names.iter().find(|known| **known == name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.push(leaked);
    leaked
}

impl fmt::Display for DeadLetterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The replay count given to a record whose `sluice-replay-count` header cannot be read.
pub const UNREADABLE_REPLAY_COUNT: i32 = i32::MAX;

/// The replay count of a record, from the values of all its `sluice-replay-count` headers.
///
/// `sluice dlq replay` writes the header as a plain decimal number (the copy's replay
/// count, 1 or more). No header means 0. A value that is anything else — negative, signed,
/// padded, empty, not UTF-8, too large, or a header without a value — was not written by
/// sluice (a forged or corrupted header), and is read as [`UNREADABLE_REPLAY_COUNT`]: the
/// record is still processed as usual, but if it is dead-lettered again it can never be
/// replayed, so a forged header cannot stretch the replay limit. When the header occurs
/// more than once, the highest count wins, for the same reason.
pub fn parse_replay_count<'a>(values: impl IntoIterator<Item = Option<&'a [u8]>>) -> i32 {
    values.into_iter().fold(0, |highest, value| {
        let count = value
            .filter(|v| !v.is_empty() && v.len() <= 10 && v.iter().all(u8::is_ascii_digit))
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.parse::<i32>().ok())
            .unwrap_or(UNREADABLE_REPLAY_COUNT);
        highest.max(count)
    })
}

/// One dead-letter row, ready to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// Where the record came from.
    pub coords: RecordCoords,
    /// The record's key, if any.
    pub key: Option<Vec<u8>>,
    /// The payload, at most [`MAX_STORED_PAYLOAD`] bytes; `None` for a tombstone.
    pub payload: Option<Vec<u8>>,
    /// The original payload size in bytes.
    pub payload_size: i32,
    /// The record's Kafka timestamp, if it had one.
    pub kafka_timestamp: Option<DateTime<Utc>>,
    /// The class of failure.
    pub kind: DeadLetterKind,
    /// A human reason naming the field and the rule (and the truncation, if any), with
    /// control characters escaped: it may echo bytes of the message.
    pub reason: String,
    /// Times this record was already re-published from the dead-letter table.
    pub replay_count: i32,
    /// The record's headers in order: name and value (`None`: a header without a value).
    /// Names may repeat. A replay re-publishes them (docs/ARCHITECTURE.md#dead-letters).
    pub headers: Vec<RecordHeader>,
    /// The table the record was going to, when one was chosen: the metrics' `table` label,
    /// and `dead_letter_events.target_table` (migration 0018), so an operator finds a
    /// table's dead letters (docs/ARCHITECTURE.md#dead-letters).
    pub table: Option<std::sync::Arc<str>>,
}

/// One Kafka header: its name and its value (`None`: a header without a value).
pub type RecordHeader = (String, Option<Vec<u8>>);

impl DeadLetter {
    /// Builds a dead letter, truncating the payload to [`MAX_STORED_PAYLOAD`] bytes and
    /// saying so in the reason. The reason's control characters are escaped
    /// ([`crate::untrusted::escape_controls`]): it is logged and printed, and may quote a
    /// package name or a field value from the message.
    pub fn new(
        coords: RecordCoords,
        key: Option<&[u8]>,
        payload: Option<&[u8]>,
        kafka_timestamp: Option<DateTime<Utc>>,
        kind: DeadLetterKind,
        reason: impl Into<String>,
    ) -> Self {
        let reason = reason.into();
        let mut reason = crate::untrusted::escape_controls(&reason).into_owned();
        let size = payload.map_or(0, <[u8]>::len);
        let stored = payload.map(|p| {
            if p.len() > MAX_STORED_PAYLOAD {
                reason.push_str(&format!(
                    " [payload truncated to {MAX_STORED_PAYLOAD} of {size} bytes]"
                ));
                p[..MAX_STORED_PAYLOAD].to_vec()
            } else {
                p.to_vec()
            }
        });
        DeadLetter {
            coords,
            key: key.map(<[u8]>::to_vec),
            payload: stored,
            payload_size: i32::try_from(size).unwrap_or(i32::MAX),
            kafka_timestamp,
            kind,
            reason,
            replay_count: 0,
            headers: Vec::new(),
            table: None,
        }
    }

    /// Names the table the record was going to.
    pub fn with_table(mut self, table: &std::sync::Arc<str>) -> Self {
        self.table = Some(std::sync::Arc::clone(table));
        self
    }

    /// Keeps the record's headers, in order.
    pub fn with_headers(mut self, headers: Vec<RecordHeader>) -> Self {
        self.headers = headers;
        self
    }

    /// Carries over the replay count of a re-published record.
    pub fn with_replay_count(mut self, replay_count: i32) -> Self {
        self.replay_count = replay_count;
        self
    }
}

/// Why a dead letter replayed `count` times already cannot be replayed again under a limit
/// of `max_replays`, or why a tombstone (no payload) cannot be replayed at all: the rule
/// `sluice dlq replay`, `sluice dlt replay` and `sluice console` share.
pub fn replay_limit_refusal(count: i32, max_replays: i32, tombstone: bool) -> Option<String> {
    if count >= max_replays {
        Some(format!(
            "already replayed {count} time(s) (limit {max_replays})"
        ))
    } else if tombstone {
        Some("tombstone: there is no payload to replay".into())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coords() -> RecordCoords {
        RecordCoords {
            topic: "reviews".into(),
            partition: 2,
            offset: 41,
        }
    }

    #[test]
    fn a_mapping_names_its_unresolved_kinds() {
        assert_eq!(
            DeadLetterKind::unresolved("unknown_application"),
            DeadLetterKind::UnknownApplication,
            "the built-in kind, so a seed mapping dead-letters as the built-in does"
        );
        let kind = DeadLetterKind::unresolved("unknown_permission");
        assert_eq!(kind.as_str(), "unknown_permission");
        assert_eq!(kind, DeadLetterKind::unresolved("unknown_permission"));
        assert!(std::ptr::eq(
            kind.as_str(),
            DeadLetterKind::unresolved("unknown_permission").as_str()
        ));
        assert_ne!(kind, DeadLetterKind::unresolved("unknown_device"));
        assert_eq!(DeadLetterKind::parse("unknown_permission"), None);
    }

    #[test]
    fn small_payload_is_kept_whole() {
        let dl = DeadLetter::new(
            coords(),
            Some(b"k"),
            Some(b"\xff\xfe"),
            None,
            DeadLetterKind::DecodeError,
            "payload is not valid UTF-8",
        );
        assert_eq!(dl.payload.as_deref(), Some(&b"\xff\xfe"[..]));
        assert_eq!(dl.payload_size, 2);
        assert_eq!(dl.reason, "payload is not valid UTF-8");
    }

    #[test]
    fn large_payload_is_truncated_and_the_reason_says_so() {
        let big = vec![b'x'; MAX_STORED_PAYLOAD + 10];
        let dl = DeadLetter::new(
            coords(),
            None,
            Some(&big),
            None,
            DeadLetterKind::DecodeError,
            "bad",
        );
        assert_eq!(dl.payload.as_ref().map(Vec::len), Some(MAX_STORED_PAYLOAD));
        assert_eq!(dl.payload_size, (MAX_STORED_PAYLOAD + 10) as i32);
        assert!(
            dl.reason.contains("truncated to 65536 of 65546 bytes"),
            "{}",
            dl.reason
        );
    }

    #[test]
    fn tombstone_has_no_payload() {
        let dl = DeadLetter::new(coords(), None, None, None, DeadLetterKind::DecodeError, "t");
        assert_eq!(dl.payload, None);
        assert_eq!(dl.payload_size, 0);
    }

    #[test]
    fn a_reason_echoing_message_bytes_holds_no_control_character() {
        let dl = DeadLetter::new(
            coords(),
            None,
            Some(b"x"),
            None,
            DeadLetterKind::UnknownApplication,
            "unknown application `a\u{1b}]0;pwned\u{7}\u{1b}[31m\nb`",
        );
        assert!(!dl.reason.chars().any(char::is_control), "{}", dl.reason);
        assert!(dl.reason.contains("a\\u{1b}]0;pwned"), "{}", dl.reason);
    }

    #[test]
    fn replay_count_header_cannot_stretch_the_limit() {
        let one = |v: &'static [u8]| parse_replay_count([Some(v)]);
        assert_eq!(parse_replay_count([]), 0, "no header");
        assert_eq!(one(b"0"), 0);
        assert_eq!(one(b"1"), 1);
        assert_eq!(one(b"3"), 3);
        assert_eq!(one(b"2147483647"), i32::MAX);
        for garbage in [
            &b"-1"[..],
            b"-2147483648",
            b"+1",
            b" 1",
            b"1 ",
            b"",
            b"abc",
            b"1e3",
            b"2147483648",
            b"99999999999",
            b"\xff",
            b"\xff1",
            b"\x31\x00",
        ] {
            assert_eq!(
                one(garbage),
                UNREADABLE_REPLAY_COUNT,
                "{:?}",
                String::from_utf8_lossy(garbage)
            );
        }
        assert_eq!(
            parse_replay_count([None]),
            UNREADABLE_REPLAY_COUNT,
            "no value"
        );
        assert_eq!(
            parse_replay_count([Some(&b"0"[..]), Some(b"2")]),
            2,
            "the highest of repeated headers"
        );
        assert_eq!(
            parse_replay_count([Some(&b"1"[..]), Some(b"-5")]),
            UNREADABLE_REPLAY_COUNT
        );
    }

    #[test]
    fn kinds_round_trip() {
        for kind in DeadLetterKind::ALL {
            assert_eq!(DeadLetterKind::parse(kind.as_str()), Some(kind));
        }
        assert_eq!(DeadLetterKind::parse("other"), None);
    }

    #[test]
    fn the_replay_limit_comes_before_the_tombstone() {
        assert_eq!(
            replay_limit_refusal(3, 3, true).as_deref(),
            Some("already replayed 3 time(s) (limit 3)")
        );
        assert_eq!(
            replay_limit_refusal(0, 3, true).as_deref(),
            Some("tombstone: there is no payload to replay")
        );
        assert_eq!(replay_limit_refusal(2, 3, false), None);
    }
}
