//! A consumer context that counts the group's rebalance events, so that the storage
//! pipeline can export them (`sluice_rebalances_total{pipeline,event}`) without the
//! Kafka adapter knowing about metrics; and keeps the high watermark of each partition from
//! the client's statistics, so the lag can be measured without a round trip to the broker.

use rdkafka::ClientContext;
use rdkafka::Statistics;
use rdkafka::consumer::{BaseConsumer, ConsumerContext, Rebalance};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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

/// The context: shared counters, cheap to clone (a rebuilt client keeps counting).
#[derive(Debug, Clone, Default)]
pub struct RebalanceCounter {
    counts: Arc<[AtomicU64; 3]>,
    /// (topic, partition) → the high watermark in the last statistics that knew it.
    high_watermarks: Arc<Mutex<HashMap<(String, i32), i64>>>,
}

impl RebalanceCounter {
    /// The counts so far.
    pub fn counts(&self) -> RebalanceCounts {
        let [assign, revoke, error] = &*self.counts;
        RebalanceCounts {
            assign: assign.load(Ordering::Relaxed),
            revoke: revoke.load(Ordering::Relaxed),
            error: error.load(Ordering::Relaxed),
        }
    }

    /// The high watermark of a partition as of the client's last statistics (librdkafka
    /// updates it from every fetch response), if known.
    pub fn high_watermark(&self, topic: &str, partition: i32) -> Option<i64> {
        self.high_watermarks
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
    fn stats(&self, statistics: Statistics) {
        let Ok(mut highs) = self.high_watermarks.lock() else {
            return;
        };
        for (topic, t) in statistics.topics {
            for (partition, p) in t.partitions {
                // Partition -1 is the client's internal "unassigned" queue.
                if partition >= 0 && p.hi_offset >= 0 {
                    highs.insert((topic.clone(), partition), p.hi_offset);
                }
            }
        }
    }
}

impl ConsumerContext for RebalanceCounter {
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
