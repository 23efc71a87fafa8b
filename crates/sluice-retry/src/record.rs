//! A consumed record detached from the client's buffers, with all its headers.

use rdkafka::message::{Headers, Message};

/// One record, owned: coordinates, timestamp, key, payload and every header in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRecord {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// The record's timestamp in milliseconds since the epoch, if it has one.
    pub timestamp_ms: Option<i64>,
    /// Key bytes, if any.
    pub key: Option<Vec<u8>>,
    /// Value bytes; `None` is a tombstone.
    pub payload: Option<Vec<u8>>,
    /// Headers (name, value) in the record's order; a header may have no value.
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl OwnedRecord {
    /// Copies any rdkafka message.
    pub fn from_message<M: Message>(message: &M) -> OwnedRecord {
        let headers = message
            .headers()
            .map(|headers| {
                headers
                    .iter()
                    .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default();
        OwnedRecord {
            topic: message.topic().to_owned(),
            partition: message.partition(),
            offset: message.offset(),
            timestamp_ms: message.timestamp().to_millis(),
            key: message.key().map(<[u8]>::to_vec),
            payload: message.payload().map(<[u8]>::to_vec),
            headers,
        }
    }

    /// The value of the last header named `name`, if it has one.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .and_then(|(_, value)| value.as_deref())
    }

    /// The value of the last header named `name` as UTF-8 text.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }
}
