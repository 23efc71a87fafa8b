//! A consumer context that counts the group's rebalance events, so that the storage
//! pipeline can export them (`sluice_rebalances_total{pipeline,event}`) without the
//! Kafka adapter knowing about metrics; and keeps the high watermark of each partition from
//! the client's statistics, so the lag can be measured without a round trip to the broker.
//!
//! With a [`StartingOffsets`] source, every partition assigned starts where that source
//! says (the storage consumer's offsets in PostgreSQL), set on the assignment itself before
//! anything is fetched — as a Java `ConsumerRebalanceListener` seeks in
//! `onPartitionsAssigned`.

use rdkafka::ClientContext;
use rdkafka::Offset;
use rdkafka::Statistics;
use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A partition as the client's last statistics saw it (`statistics.interval.ms`; librdkafka
/// updates them from fetch responses and commits, so they do not move while the partition's
/// fetching is paused).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionStats {
    /// The high watermark on the broker.
    pub high: i64,
    /// The low watermark on the broker, if known.
    pub low: Option<i64>,
    /// The offset this group last committed, if known.
    pub committed: Option<i64>,
}

/// How many rebalance events a consumer has seen, by event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RebalanceCounts {
    /// Partitions assigned.
    pub assign: u64,
    /// Partitions revoked (or lost).
    pub revoke: u64,
    /// A rebalance that failed.
    pub error: u64,
}

impl RebalanceCounts {
    /// The event names, in the order of [`RebalanceCounts::values`].
    pub const EVENTS: [&'static str; 3] = ["assign", "revoke", "error"];

    /// The counts in the order of [`RebalanceCounts::EVENTS`].
    pub fn values(&self) -> [u64; 3] {
        [self.assign, self.revoke, self.error]
    }
}

/// Where an assigned partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// At this offset.
    Offset(i64),
    /// At the first retained record.
    Beginning,
    /// After the last record.
    End,
}

/// A partition being assigned, as the brokers describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigning {
    /// Its topic.
    pub topic: String,
    /// Its number.
    pub partition: i32,
    /// Its first offset (the log's start), when the broker said.
    pub start: Option<i64>,
    /// Its end offset, when the broker said.
    pub end: Option<i64>,
    /// Whether Kafka holds a committed offset of the group for it (`None`: not known). A
    /// topic deleted loses its groups' committed offsets, so a topic created again under the
    /// same name has none.
    pub kafka_committed: Option<bool>,
}

/// Where assigned partitions start, asked on every assignment (on the thread that polls).
pub trait StartingOffsets: Send + Sync {
    /// For each of `partitions`, where it starts; `Err` when that cannot be known now.
    fn starting_offsets(
        &self,
        partitions: &[Assigning],
    ) -> Result<HashMap<(String, i32), StartAt>, String>;
}

/// The context: shared counters, cheap to clone (a rebuilt client keeps counting).
#[derive(Clone, Default)]
pub struct RebalanceCounter {
    counts: Arc<[AtomicU64; 3]>,
    /// (topic, partition) → the last statistics that knew it.
    partition_stats: Arc<Mutex<HashMap<(String, i32), PartitionStats>>>,
    /// Where assigned partitions start (none: where the group's committed offsets say).
    starts: Option<Arc<dyn StartingOffsets>>,
    /// Why an assignment went ahead without the starting offsets, until taken by
    /// [`RebalanceCounter::take_unpositioned`].
    unpositioned: Arc<Mutex<Option<String>>>,
    /// The offsets assignments were positioned at, until taken by
    /// [`RebalanceCounter::take_positioned`] (to bring Kafka's committed offsets along).
    positioned: Arc<Mutex<Vec<(String, i32, i64)>>>,
    /// Where each partition assigned started (an offset, or the reset position), until
    /// taken by [`RebalanceCounter::take_assigned`] (the storage pipeline tracks where its
    /// fetch continues from, docs/ARCHITECTURE.md#offsets).
    assigned: Arc<Mutex<Vec<(String, i32, StartAt)>>>,
    /// The offset each partition assigned started from, where known (the lag of a partition
    /// that has handed over no record yet is measured from it).
    started_from: Arc<Mutex<HashMap<(String, i32), i64>>>,
}

impl std::fmt::Debug for RebalanceCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RebalanceCounter")
            .field("counts", &self.counts())
            .field("starting_offsets", &self.starts.is_some())
            .finish_non_exhaustive()
    }
}

impl RebalanceCounter {
    /// A context whose assignments start where `starts` says.
    pub fn starting_at(starts: Arc<dyn StartingOffsets>) -> Self {
        Self {
            starts: Some(starts),
            ..Self::default()
        }
    }

    /// Why an assignment went ahead without its starting offsets, if one did since the
    /// last call.
    pub fn take_unpositioned(&self) -> Option<String> {
        self.unpositioned.lock().ok()?.take()
    }

    /// The offsets assignments were positioned at since the last call.
    pub fn take_positioned(&self) -> Vec<(String, i32, i64)> {
        self.positioned
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default()
    }

    /// Where the partitions assigned since the last call started, in assignment order.
    pub fn take_assigned(&self) -> Vec<(String, i32, StartAt)> {
        self.assigned
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default()
    }

    /// The offset `topic`/`partition` started from at its last assignment, if known.
    pub fn started_from(&self, topic: &str, partition: i32) -> Option<i64> {
        self.started_from
            .lock()
            .ok()?
            .get(&(topic.to_owned(), partition))
            .copied()
    }

    /// Keeps the offset `topic`/`partition` starts from at `at` (the log's start or end as
    /// `partitions` found them), when known.
    fn note_start(&self, partitions: &[Assigning], topic: &str, partition: i32, at: StartAt) {
        let marks = partitions
            .iter()
            .find(|p| p.topic == topic && p.partition == partition);
        let from = match at {
            StartAt::Offset(o) => Some(o),
            StartAt::Beginning => marks.and_then(|p| p.start),
            StartAt::End => marks.and_then(|p| p.end),
        };
        if let (Some(from), Ok(mut started)) = (from, self.started_from.lock()) {
            started.insert((topic.to_owned(), partition), from);
        }
    }

    /// Sets each assigned partition's offset from `starts` (before librdkafka assigns them).
    fn position(
        &self,
        consumer: &BaseConsumer<Self>,
        starts: &dyn StartingOffsets,
        assigned: &rdkafka::TopicPartitionList,
    ) {
        use rdkafka::consumer::Consumer;
        let timeout = std::time::Duration::from_secs(5);
        // One request for every partition: which of them Kafka holds the group's offset of.
        let committed = consumer
            .committed_offsets(assigned.clone(), timeout)
            .map_err(|error| {
                tracing::warn!(%error, "cannot read the group's committed offsets in Kafka");
            })
            .ok();
        let partitions: Vec<Assigning> = assigned
            .elements()
            .iter()
            .map(|e| {
                let marks = consumer
                    .fetch_watermarks(e.topic(), e.partition(), timeout)
                    .ok();
                (e, marks)
            })
            .map(|(e, marks)| Assigning {
                topic: e.topic().to_owned(),
                partition: e.partition(),
                start: marks.map(|(low, _)| low),
                end: marks.map(|(_, high)| high),
                kafka_committed: committed
                    .as_ref()
                    .and_then(|list| list.find_partition(e.topic(), e.partition()))
                    .filter(|found| found.error().is_ok())
                    .map(|found| matches!(found.offset(), Offset::Offset(o) if o >= 0)),
            })
            .collect();
        if partitions.is_empty() {
            return;
        }
        match starts.starting_offsets(&partitions) {
            Ok(found) => {
                for mut e in assigned.elements() {
                    let Some(&at) = found.get(&(e.topic().to_owned(), e.partition())) else {
                        continue;
                    };
                    let offset = match at {
                        StartAt::Offset(o) => Offset::Offset(o),
                        StartAt::Beginning => Offset::Beginning,
                        StartAt::End => Offset::End,
                    };
                    if let Err(error) = e.set_offset(offset) {
                        tracing::warn!(topic = e.topic(), partition = e.partition(), %error,
                            "cannot set the starting offset");
                        continue;
                    }
                    if let (Offset::Offset(o), Ok(mut positioned)) =
                        (offset, self.positioned.lock())
                    {
                        positioned.push((e.topic().to_owned(), e.partition(), o));
                    }
                    if let Ok(mut assigned) = self.assigned.lock() {
                        assigned.push((e.topic().to_owned(), e.partition(), at));
                    }
                    self.note_start(&partitions, e.topic(), e.partition(), at);
                }
                tracing::info!(partitions = ?found, "partitions assigned at their stored offsets");
            }
            Err(reason) => {
                tracing::error!(%reason, "partitions assigned without their stored offsets");
                if let Ok(mut slot) = self.unpositioned.lock() {
                    *slot = Some(reason);
                }
            }
        }
    }

    /// The counts so far.
    pub fn counts(&self) -> RebalanceCounts {
        let [assign, revoke, error] = &*self.counts;
        RebalanceCounts {
            assign: assign.load(Ordering::Relaxed),
            revoke: revoke.load(Ordering::Relaxed),
            error: error.load(Ordering::Relaxed),
        }
    }

    /// What the client's last statistics say of a partition, if they name it.
    pub fn partition_stats(&self, topic: &str, partition: i32) -> Option<PartitionStats> {
        self.partition_stats
            .lock()
            .ok()?
            .get(&(topic.to_owned(), partition))
            .copied()
    }

    fn record(&self, rebalance: &Rebalance<'_>) {
        let slot = match rebalance {
            Rebalance::Assign(_) => 0,
            Rebalance::Revoke(_) => 1,
            Rebalance::Error(_) => 2,
        };
        self.counts[slot].fetch_add(1, Ordering::Relaxed);
    }
}

impl ClientContext for RebalanceCounter {
    /// A transient error (a broker unreachable, all brokers down) is said by librdkafka's own
    /// log line and handed to the consumer's poll, which logs it (once in a while) and
    /// watches it for stalls: at debug here, not a third time at error level as rdkafka's
    /// default does, many times a second in an outage. Any other error stays at error level.
    fn error(&self, error: rdkafka::error::KafkaError, reason: &str) {
        if crate::error::flags(&error).retriable {
            tracing::debug!(target: "librdkafka", %error, reason, "kafka client error");
        } else {
            tracing::error!(target: "librdkafka", %error, reason, "kafka client error");
        }
    }

    fn stats(&self, statistics: Statistics) {
        let Ok(mut known) = self.partition_stats.lock() else {
            return;
        };
        for (topic, t) in statistics.topics {
            for (partition, p) in t.partitions {
                // Partition -1 is the client's internal "unassigned" queue.
                if partition >= 0 && p.hi_offset >= 0 {
                    let offset = |o: i64| (o >= 0).then_some(o);
                    let stats = PartitionStats {
                        high: p.hi_offset,
                        low: offset(p.lo_offset),
                        committed: offset(p.committed_offset),
                    };
                    known.insert((topic.clone(), partition), stats);
                }
            }
        }
    }
}

impl ConsumerContext for RebalanceCounter {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        // Where a partition started holds for its assignment only (set again below when known).
        if let (Rebalance::Assign(list) | Rebalance::Revoke(list), Ok(mut started)) =
            (rebalance, self.started_from.lock())
        {
            for e in list.elements() {
                started.remove(&(e.topic().to_owned(), e.partition()));
            }
        }
        if let (Some(starts), Rebalance::Assign(assigned)) = (&self.starts, rebalance) {
            self.position(consumer, starts.as_ref(), assigned);
        }
    }

    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        tracing::debug!(event = ?rebalance, "consumer group rebalance");
        self.record(rebalance);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::TopicPartitionList;
    use rdkafka::error::KafkaError;

    #[test]
    fn counts_each_event_and_survives_a_clone() {
        let counter = RebalanceCounter::default();
        let rebuilt = counter.clone();
        let tpl = TopicPartitionList::new();
        counter.record(&Rebalance::Assign(&tpl));
        rebuilt.record(&Rebalance::Revoke(&tpl));
        rebuilt.record(&Rebalance::Assign(&tpl));
        counter.record(&Rebalance::Error(KafkaError::Canceled));
        assert_eq!(
            counter.counts(),
            RebalanceCounts {
                assign: 2,
                revoke: 1,
                error: 1
            }
        );
        assert_eq!(counter.counts().values(), [2, 1, 1]);
    }
}
