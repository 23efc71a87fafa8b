//! The batch poll: up to N records or a byte budget, waiting only for the first; the records
//! of a partition reassigned during the poll are dropped (see [`BatchConsumer::take_starts`]).

use super::record::{headers, replay_count};
use super::{BatchConsumer, ConsumeError, Record};
use crate::rebalance::{RebalanceCounter, StartAt};
use rdkafka::message::Message;
use std::time::{Duration, Instant};

impl BatchConsumer {
    /// Waits up to `timeout` for a first record, then takes what is already fetched, up to
    /// `max` records or until they hold `max_bytes` ([`Record::bytes`]; a first record larger
    /// than that is taken alone). Errors librdkafka recovers from are logged and ridden out; a
    /// fatal client error, or one that does not heal within the bound, is returned.
    pub fn poll_batch(
        &mut self,
        max: usize,
        max_bytes: usize,
        timeout: Duration,
    ) -> Result<Vec<Record>, ConsumeError> {
        self.check_topics()?;
        let mut records: Vec<Record> = Vec::new();
        let mut bytes = 0usize;
        let deadline = Instant::now() + timeout;
        while records.len() < max && bytes < max_bytes {
            let wait = if records.is_empty() {
                deadline.saturating_duration_since(Instant::now())
            } else {
                Duration::ZERO
            };
            let polled = self.consumer.poll(wait);
            // A partition (re)assigned during this poll starts afresh where the assignment
            // says: its records delivered before are of the previous assignment (never
            // committed, read again from the new start), so they are dropped here and every
            // record returned continues from the start reported by `take_starts`.
            if note_assigned(&self.rebalances, &mut self.starts, &mut records) {
                bytes = records.iter().map(Record::bytes).sum();
            }
            match polled {
                Some(Ok(message)) => {
                    let headers = headers(&message);
                    let record = Record {
                        topic: message.topic().to_owned(),
                        partition: message.partition(),
                        offset: message.offset(),
                        key: message.key().map(<[u8]>::to_vec),
                        payload: message.payload().map(<[u8]>::to_vec),
                        timestamp_ms: message.timestamp().to_millis(),
                        replay_count: replay_count(&headers),
                        headers,
                    };
                    bytes += record.bytes();
                    records.push(record);
                }
                Some(Err(error)) => {
                    self.on_error(error)?;
                    if records.is_empty() && Instant::now() >= deadline {
                        break;
                    }
                }
                None => {
                    if !records.is_empty() || Instant::now() >= deadline {
                        break;
                    }
                }
            }
        }
        self.commit_positions();
        if !records.is_empty() {
            let now = Instant::now();
            let mut partitions: Vec<(&str, i32)> = Vec::new();
            for r in &records {
                if !partitions.contains(&(r.topic.as_str(), r.partition)) {
                    partitions.push((r.topic.as_str(), r.partition));
                }
            }
            for (topic, partition) in partitions {
                self.last_record.insert((topic.to_owned(), partition), now);
            }
        }
        Ok(records)
    }

    /// Where the partitions assigned since the last call started (an offset, or the reset
    /// position), in assignment order. Every record [`BatchConsumer::poll_batch`] returned of
    /// such a partition was fetched after its assignment, from that start on.
    pub fn take_starts(&mut self) -> Vec<(String, i32, StartAt)> {
        std::mem::take(&mut self.starts)
    }
}

/// Takes the assignments made during the last poll into `starts` and drops the records of
/// those partitions polled before them; whether there were any.
fn note_assigned(
    rebalances: &RebalanceCounter,
    starts: &mut Vec<(String, i32, StartAt)>,
    records: &mut Vec<Record>,
) -> bool {
    let assigned = rebalances.take_assigned();
    if assigned.is_empty() {
        return false;
    }
    records.retain(|r| {
        !assigned
            .iter()
            .any(|(t, p, _)| *p == r.partition && *t == r.topic)
    });
    starts.extend(assigned);
    true
}
