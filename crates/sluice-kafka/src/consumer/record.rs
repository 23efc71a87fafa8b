//! The record handed to the application, detached from the client's buffers, with its
//! headers and its replay count (the [`REPLAY_COUNT_HEADER`] of a re-published dead letter).

use rdkafka::message::Message;

/// One consumed record, detached from the client's buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Key bytes, if any.
    pub key: Option<Vec<u8>>,
    /// Value bytes; `None` is a tombstone.
    pub payload: Option<Vec<u8>>,
    /// The record's timestamp in milliseconds since the epoch, if it has one.
    pub timestamp_ms: Option<i64>,
    /// How many times this record was re-published from the dead-letter table (the
    /// [`REPLAY_COUNT_HEADER`] header; 0 when absent, `i32::MAX` when unreadable).
    pub replay_count: i32,
    /// Its headers in order: name and value (`None`: a header without a value).
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Record {
    /// A record at `topic`/`partition`/`offset` with no key, value, timestamp or headers
    /// (what a test builds on).
    pub fn at(topic: &str, partition: i32, offset: i64) -> Self {
        Self {
            topic: topic.to_owned(),
            partition,
            offset,
            key: None,
            payload: None,
            timestamp_ms: None,
            replay_count: 0,
            headers: Vec::new(),
        }
    }

    /// The bytes the record holds: its key, value and headers (what a batch's byte budget
    /// counts, docs/ARCHITECTURE.md#memory).
    pub fn bytes(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len)
            + self.payload.as_ref().map_or(0, Vec::len)
            + self
                .headers
                .iter()
                .map(|(name, value)| name.len() + value.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
    }

    /// Frees the key, value and headers, keeping the coordinates and the timestamp (all an
    /// offset commit and the lag's age need, once the record is stored).
    pub fn drop_contents(&mut self) {
        self.key = None;
        self.payload = None;
        self.headers = Vec::new();
    }
}

/// The header that carries a re-published dead letter's replay count, so that a message
/// that fails again keeps its count and cannot loop forever.
pub const REPLAY_COUNT_HEADER: &str = "sluice-replay-count";

/// The replay count in a record's `headers`; see
/// [`sluice_core::dead_letter::parse_replay_count`] (an unreadable header counts as no replays
/// left).
pub(super) fn replay_count(headers: &[(String, Option<Vec<u8>>)]) -> i32 {
    let values = headers
        .iter()
        .filter(|(name, _)| name == REPLAY_COUNT_HEADER)
        .map(|(_, value)| value.as_deref());
    sluice_core::dead_letter::parse_replay_count(values)
}

/// A record's headers, in order (none: no allocation). Read once per record: each read walks
/// them through the C interface again and copies every name and value.
pub(super) fn headers<M: Message>(message: &M) -> Vec<(String, Option<Vec<u8>>)> {
    use rdkafka::message::Headers;
    message.headers().map_or_else(Vec::new, |headers| {
        headers
            .iter()
            .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
            .collect()
    })
}
