//! The assignment and positions bookkeeping: the partitions held and held back, a seek, the
//! lag, the stuck partitions named in a stall, and the commits (a batch's offsets, and the
//! starting offsets of an assignment), docs/ARCHITECTURE.md#offsets.

use super::{BatchConsumer, Record};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

impl BatchConsumer {
    /// The partitions this consumer holds now, as (topic, partition).
    pub fn assigned_partitions(&self) -> Result<Vec<(String, i32)>, KafkaError> {
        Ok(self
            .consumer
            .assignment()?
            .elements()
            .iter()
            .map(|e| (e.topic().to_owned(), e.partition()))
            .collect())
    }

    /// Fetches nothing more of the partitions in `hold` until a later call leaves them out:
    /// pauses those newly in it and resumes those no longer in it (whether or not they are
    /// still assigned: librdkafka keeps an application's pause across a reassignment, so a
    /// partition handed back while held stays paused until it is released here). Records
    /// of a partition already fetched when it is paused are dropped by the client and
    /// fetched again after it is resumed, from the position after the last record polled.
    pub fn hold(&mut self, hold: &BTreeSet<(String, i32)>) -> Result<(), KafkaError> {
        if *hold == self.held {
            return Ok(());
        }
        let list = |partitions: Vec<&(String, i32)>| {
            let mut list = TopicPartitionList::with_capacity(partitions.len());
            for (topic, partition) in partitions {
                list.add_partition(topic, *partition);
            }
            list
        };
        let pause: Vec<_> = hold.difference(&self.held).collect();
        let resume: Vec<_> = self.held.difference(hold).collect();
        if !pause.is_empty() {
            self.consumer.pause(&list(pause))?;
        }
        if !resume.is_empty() {
            self.consumer.resume(&list(resume))?;
        }
        self.held.clone_from(hold);
        Ok(())
    }

    /// Moves the fetch position of an assigned partition to `offset`: the next record
    /// delivered of it is the first at or after `offset` (records of it already fetched
    /// are discarded by the client).
    pub fn seek(&self, topic: &str, partition: i32, offset: i64) -> Result<(), KafkaError> {
        self.consumer.seek(
            topic,
            partition,
            Offset::Offset(offset),
            Duration::from_secs(5),
        )
    }

    /// Commits to Kafka the offsets the last assignments started at (PostgreSQL's), so that
    /// Kafka's committed offsets — which lag tools and alerts read — follow PostgreSQL's even
    /// where nothing is consumed, and move back where a crash of PostgreSQL lost batches.
    pub(super) fn commit_positions(&self) {
        let positioned = self.rebalances.take_positioned();
        if positioned.is_empty() {
            return;
        }
        let mut list = TopicPartitionList::with_capacity(positioned.len());
        for (topic, partition, offset) in &positioned {
            if list
                .add_partition_offset(topic, *partition, Offset::Offset(*offset))
                .is_err()
            {
                return;
            }
        }
        if let Err(error) = self.consumer.commit(&list, CommitMode::Async) {
            tracing::warn!(topics = %self.label, %error,
                "cannot commit the starting offsets to Kafka (the next batch's commit will)");
        }
    }
    /// The assigned partitions that have records left but delivered none since `since`,
    /// with the offset the client is stuck at, e.g. `partition 1 at offset 200 of 400`.
    pub(super) fn stuck_partitions(&self, since: Option<Instant>) -> String {
        let Ok(positions) = self.consumer.position() else {
            return "partitions unknown (no assignment)".to_owned();
        };
        let mut stuck = Vec::new();
        for e in positions.elements() {
            let seen = self.last_record.get(&(e.topic().to_owned(), e.partition()));
            let recent = match (since, seen) {
                (Some(since), Some(t)) => *t >= since,
                _ => false,
            };
            if recent {
                continue;
            }
            let high = self
                .consumer
                .fetch_watermarks(e.topic(), e.partition(), Duration::from_secs(1))
                .map_or(-1, |(_, high)| high);
            let at = match e.offset() {
                Offset::Offset(o) => o.to_string(),
                other => format!("{other:?}"),
            };
            if high < 0 || e.offset().to_raw().is_none_or(|o| o < 0 || o < high) {
                let held = self.held.contains(&(e.topic().to_owned(), e.partition()));
                stuck.push(format!(
                    "{} partition {} at offset {at} of {high}{}",
                    e.topic(),
                    e.partition(),
                    if held {
                        " (held back: its writer is behind)"
                    } else {
                        ""
                    }
                ));
            }
        }
        if stuck.is_empty() {
            "no assigned partition with records left".to_owned()
        } else {
            format!("stuck: {}", stuck.join(", "))
        }
    }

    /// Records left per assigned partition: the partition's end (high watermark) minus this
    /// consumer's position (the offset after the last record handed to the application;
    /// where nothing was handed yet, the offset the partition started from at its
    /// assignment, else the group's committed offset, else the partition's start).
    ///
    /// Without `ask_broker` all of it comes from the client's last statistics
    /// (`statistics.interval.ms`, 2 s with batch tuning; librdkafka takes them from the
    /// fetch responses) and nothing waits for the broker; a partition the statistics do not
    /// name yet is left out. With `ask_broker` the broker is asked, a round trip each, only
    /// for the partitions held back (their statistics do not move while their fetching is
    /// paused), and the group's committed offsets once where neither a position nor the
    /// assignment's start is known, until `timeout` has passed in all. A round trip waits behind the fetch under way on the
    /// same connection, so one per partition every few seconds starved the reader of a
    /// topic with many partitions that never had a record. A fetch of the watermarks that
    /// fails leaves the partition to its statistics.
    pub fn lag(
        &self,
        timeout: Duration,
        ask_broker: bool,
    ) -> Result<Vec<(String, i32, i64)>, KafkaError> {
        let known = |o: Offset| o.to_raw().filter(|o| *o >= 0);
        let positions = self.consumer.position()?;
        let deadline = Instant::now() + timeout;
        // The group's committed offsets, asked within the same second, only where neither a
        // position nor the assignment's start is known; a failure leaves them to the
        // statistics.
        let committed = if ask_broker
            && positions.elements().iter().any(|e| {
                known(e.offset()).is_none()
                    && self
                        .rebalances
                        .started_from(e.topic(), e.partition())
                        .is_none()
            }) {
            self.consumer.committed(timeout).ok()
        } else {
            None
        };
        let mut lags = Vec::with_capacity(positions.count());
        for e in positions.elements() {
            let (topic, partition) = (e.topic(), e.partition());
            let stats = self.rebalances.partition_stats(topic, partition);
            let held = self.held.contains(&(topic.to_owned(), partition));
            let asked = if ask_broker && held && Instant::now() < deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                self.consumer
                    .fetch_watermarks(topic, partition, left)
                    .ok()
                    .map(|(low, high)| (Some(low), high))
            } else {
                None
            };
            let Some((low, high)) = asked.or(stats.map(|s| (s.low, s.high))) else {
                continue;
            };
            let at = known(e.offset())
                .or_else(|| self.rebalances.started_from(topic, partition))
                .or_else(|| {
                    committed
                        .as_ref()
                        .and_then(|c| c.find_partition(topic, partition))
                        .and_then(|c| known(c.offset()))
                })
                .or_else(|| stats.and_then(|s| s.committed))
                .or(low);
            let Some(at) = at else {
                continue;
            };
            lags.push((topic.to_owned(), partition, (high - at).max(0)));
        }
        Ok(lags)
    }

    /// Commits, synchronously, the offset after the highest record of each partition that
    /// this consumer still owns. Offsets of partitions revoked since the batch was polled
    /// are left out: their new owner re-reads them (a no-op write), and committing them
    /// could move the new owner's progress backwards.
    pub fn commit(&self, records: &[Record]) -> Result<(), KafkaError> {
        let list = next_offsets(records)?;
        let owned = self.consumer.assignment()?;
        let mut kept = TopicPartitionList::with_capacity(list.count());
        for e in list.elements() {
            if owned.find_partition(e.topic(), e.partition()).is_some() {
                kept.add_partition_offset(e.topic(), e.partition(), e.offset())?;
            }
        }
        if kept.count() < list.count() {
            tracing::info!(topics = %self.label, skipped = list.count() - kept.count(),
                "not committing offsets of partitions revoked since the batch was polled");
        }
        if kept.count() == 0 {
            return Ok(());
        }
        self.consumer.commit(&kept, CommitMode::Sync)
    }
}

/// Per partition, the offset after the highest record: what a commit stores.
pub fn next_offsets(records: &[Record]) -> Result<TopicPartitionList, KafkaError> {
    let mut highest: BTreeMap<(&str, i32), i64> = BTreeMap::new();
    for r in records {
        let entry = highest
            .entry((r.topic.as_str(), r.partition))
            .or_insert(r.offset);
        *entry = (*entry).max(r.offset);
    }
    let mut list = TopicPartitionList::with_capacity(highest.len());
    for ((topic, partition), offset) in highest {
        list.add_partition_offset(topic, partition, Offset::Offset(offset + 1))?;
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(partition: i32, offset: i64) -> Record {
        Record::at("t", partition, offset)
    }

    #[test]
    fn commits_the_offset_after_the_highest_record_per_partition() {
        let list = next_offsets(&[record(0, 5), record(1, 2), record(0, 7), record(0, 6)]).unwrap();
        let offsets: Vec<(i32, Offset)> = list
            .elements()
            .iter()
            .map(|e| (e.partition(), e.offset()))
            .collect();
        assert_eq!(
            offsets,
            vec![(0, Offset::Offset(8)), (1, Offset::Offset(3))]
        );
        assert_eq!(next_offsets(&[]).unwrap().count(), 0);
    }
}
