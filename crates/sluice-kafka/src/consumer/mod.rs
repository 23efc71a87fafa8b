//! The batch consumer of a storage pipeline: poll up to N records, commit them later.
//!
//! Invariant: this type never commits by itself. `commit` is called by the pipeline with
//! the records of a batch whose database transaction has committed; it commits, per
//! partition, the offset after the highest record of the batch, synchronously.
//!
//! A topic never stalls silently: every consumer error goes through a
//! [`StallWatch`]. Errors librdkafka recovers from (a broker
//! restarting, a leader moving) are ridden out; an error that cannot heal, or that keeps
//! coming back for the bound, ends the pipeline with a [`ConsumeError`] naming the topic,
//! the stuck partitions with their offsets, and the cause. The topics' existence is checked
//! every few seconds too, since a deleted topic does not always surface as an error.
//!
//! A consumer reads named topics or every topic matching a pattern ([`Topics`]). A pattern is
//! matched by sluice, not by librdkafka, so that the consumer and the CLI (`sluice lag`,
//! `sluice replay`) agree on the topics it covers: every [`TOPIC_CHECK_INTERVAL`] the
//! cluster's topic list is read and, when the matching set changed, the consumer subscribes
//! to the new set (the group rebalances). A topic created after start is read within that
//! interval plus one rebalance.
//!
//! The files, by concern: this one holds the consumer, its creation and its close;
//! `poll.rs` the batch poll; `positions.rs` the assignment and positions bookkeeping (hold,
//! seek, lag, commits); `trouble.rs` the error handling (the stall watch, fencing);
//! `subscription.rs` the topics followed (named topics' existence, a pattern's matches);
//! `record.rs` the record with its headers and replay count.

mod poll;
mod positions;
mod record;
mod subscription;
mod trouble;

pub use positions::next_offsets;
pub use record::{REPLAY_COUNT_HEADER, Record};

use crate::config::{ConsumerOptions, consumer_config};
use crate::rebalance::{RebalanceCounter, RebalanceCounts, StartAt, StartingOffsets};
use crate::stall::StallWatch;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use sluice_core::topics::Topics;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use subscription::matching;
use trouble::Trouble;

/// How often the consumer checks that its topics still exist, and looks for new topics
/// matching its pattern.
pub const TOPIC_CHECK_INTERVAL: Duration = Duration::from_secs(5);

/// Why consuming stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumeError {
    /// The client failed (could not be created, or a fatal client state).
    #[error("kafka: {0}")]
    Client(#[from] KafkaError),
    /// A consumer error that cannot heal or did not heal within the bound.
    #[error("topic `{topic}` is stalled: {cause} (reported {reports} times over {} s); {stuck}", .for_.as_secs())]
    Stalled {
        /// The topic.
        topic: String,
        /// The stuck partitions and their offsets, as far as the client knows them.
        stuck: String,
        /// The error librdkafka keeps reporting.
        cause: String,
        /// How long it was reported.
        for_: Duration,
        /// How many times.
        reports: u64,
    },
    /// A named topic disappeared while the pipeline was running.
    #[error("topic `{topic}` no longer exists (deleted while running; checked for {} s)", .for_.as_secs())]
    TopicGone {
        /// The topic.
        topic: String,
        /// How long it has been missing.
        for_: Duration,
    },
    /// Another live consumer joined the group with the same static member id.
    #[error(
        "fenced: another live process joined group `{group}` as static member `{instance}`; \
         each live process needs its own STORAGE_INSTANCE_ID ({detail})"
    )]
    Fenced {
        /// The group.
        group: String,
        /// The shared `group.instance.id`.
        instance: String,
        /// librdkafka's message.
        detail: String,
    },
}

/// A subscribed, manual-commit consumer of named topics or of a pattern's topics.
pub struct BatchConsumer {
    consumer: BaseConsumer<RebalanceCounter>,
    /// Counts the group's rebalances; kept across a rebuilt client.
    rebalances: RebalanceCounter,
    /// The configuration, to build the client again after self-fencing (see `on_fenced`).
    config: rdkafka::ClientConfig,
    /// What it reads, as configured.
    topics: Topics,
    /// What it is subscribed to now (for a pattern: the matching topics found last).
    subscribed: Vec<String>,
    /// `topics` in words, for errors and logs.
    label: String,
    group: String,
    /// When the client last reported a transient (broker-side) error.
    last_transient: Option<Instant>,
    /// When the client was built again after being fenced.
    rejoins: Vec<Instant>,
    /// The consumer errors logged lately (each kind once per period).
    quiet: trouble::Quiet,
    instance: Option<String>,
    watch: StallWatch<Trouble>,
    /// When each partition last delivered a record (to name the stuck ones).
    last_record: HashMap<(String, i32), Instant>,
    next_topic_check: Instant,
    /// The partitions the application holds back (paused), see [`BatchConsumer::hold`].
    held: BTreeSet<(String, i32)>,
    /// Where the partitions assigned since the last [`BatchConsumer::take_starts`] started.
    starts: Vec<(String, i32, StartAt)>,
}

impl std::fmt::Debug for BatchConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchConsumer")
            .field("topics", &self.label)
            .finish_non_exhaustive()
    }
}

impl BatchConsumer {
    /// Creates the client and subscribes to `topics` (for a pattern: the topics matching it
    /// now, none if the cluster cannot be asked yet). A consumer error that keeps coming
    /// back for `stall_bound` ends polling with [`ConsumeError::Stalled`]. With `starts`, each
    /// partition assigned starts where it says, not at the group's committed offset.
    pub fn subscribe(
        options: &ConsumerOptions<'_>,
        topics: &Topics,
        stall_bound: Duration,
        starts: Option<Arc<dyn StartingOffsets>>,
    ) -> Result<Self, KafkaError> {
        let config = consumer_config(options);
        let rebalances =
            starts.map_or_else(RebalanceCounter::default, RebalanceCounter::starting_at);
        let consumer: BaseConsumer<RebalanceCounter> =
            config.create_with_context(rebalances.clone())?;
        let subscribed = match topics {
            Topics::Named(_) => topics.select([]),
            Topics::Pattern(_) => matching(&consumer, topics).unwrap_or_default(),
        };
        subscribe_to(&consumer, &subscribed)?;
        Ok(Self {
            consumer,
            rebalances,
            config,
            last_transient: None,
            rejoins: Vec::new(),
            quiet: trouble::Quiet::default(),
            label: topics.to_string(),
            topics: topics.clone(),
            subscribed,
            group: options.group.to_owned(),
            instance: options.group_instance_id.map(str::to_owned),
            watch: StallWatch::new(stall_bound),
            last_record: HashMap::new(),
            next_topic_check: Instant::now() + TOPIC_CHECK_INTERVAL,
            held: BTreeSet::new(),
            starts: Vec::new(),
        })
    }

    /// Whether a consumer error has been repeating lately: the pipeline is not healthy,
    /// even before the error becomes fatal.
    pub fn is_failing(&self) -> bool {
        self.watch.is_failing(Instant::now())
    }

    /// Why an assignment went ahead without its starting offsets, if one did since the last
    /// call (the partitions then start at the group's committed offsets).
    pub fn take_unpositioned(&self) -> Option<String> {
        self.rebalances.take_unpositioned()
    }

    /// The group rebalances this consumer has seen, by event.
    pub fn rebalances(&self) -> RebalanceCounts {
        self.rebalances.counts()
    }

    /// The topics it is subscribed to now.
    pub fn subscribed(&self) -> &[String] {
        &self.subscribed
    }

    /// Leaves the group and closes the client (the broker rebalances at once).
    ///
    /// librdkafka never sends a LeaveGroup for a static member while the client is being
    /// destroyed (a static member is meant to come back); it does send one when the
    /// application unsubscribes and the revocation completes. So the client is polled after
    /// `unsubscribe` until its assignment is gone and the leave has had a moment to go out:
    /// a clean stop frees the partitions at once, and `sluice replay` sees no member left.
    pub fn close(self) {
        self.consumer.unsubscribe();
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut unassigned_at: Option<Instant> = None;
        while Instant::now() < deadline {
            // Records polled now were never committed; dropping them means redelivery.
            let _ = self.consumer.poll(Duration::from_millis(50));
            let empty = self.consumer.assignment().map_or(true, |a| a.count() == 0);
            match (empty, unassigned_at) {
                (true, None) => unassigned_at = Some(Instant::now()),
                (true, Some(t)) if t.elapsed() >= Duration::from_millis(300) => break,
                (false, _) => unassigned_at = None,
                _ => {}
            }
        }
        drop(self.consumer);
    }
}

/// Subscribes to `topics`; to none (unsubscribed) when the list is empty.
pub(super) fn subscribe_to<C: rdkafka::consumer::ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topics: &[String],
) -> Result<(), KafkaError> {
    if topics.is_empty() {
        consumer.unsubscribe();
        return Ok(());
    }
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    consumer.subscribe(&names)
}
