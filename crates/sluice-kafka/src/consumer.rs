//! The batch consumer of a storage pipeline: poll up to N records, commit them later.
//!
//! Invariant: this type never commits by itself. `commit` is called by the pipeline with
//! the records of a batch whose database transaction has committed; it commits, per
//! partition, the offset after the highest record of the batch, synchronously.
//!
//! A topic never stalls silently: every consumer error goes through a
//! [`StallWatch`](crate::stall::StallWatch). Errors librdkafka recovers from (a broker
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

use crate::config::{ConsumerOptions, consumer_config};
use crate::rebalance::{RebalanceCounter, RebalanceCounts, StartAt, StartingOffsets};
use crate::stall::{ErrorClass, StallWatch, Verdict};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use sluice_core::topics::Topics;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// What the stall watch is keyed by: an error code, or the topic's absence.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Trouble {
    Code(i32),
    TopicMissing,
}

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

/// The record's replay count; see [`sluice_core::dead_letter::parse_replay_count`] (an
/// unreadable header counts as no replays left).
fn replay_count<M: Message>(message: &M) -> i32 {
    use rdkafka::message::Headers;
    let values = message.headers().into_iter().flat_map(|headers| {
        headers
            .iter()
            .filter(|h| h.key == REPLAY_COUNT_HEADER)
            .map(|h| h.value)
    });
    sluice_core::dead_letter::parse_replay_count(values)
}

/// A record's headers, in order (none: no allocation).
fn headers<M: Message>(message: &M) -> Vec<(String, Option<Vec<u8>>)> {
    use rdkafka::message::Headers;
    message.headers().map_or_else(Vec::new, |headers| {
        headers
            .iter()
            .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
            .collect()
    })
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

    /// The topics it is subscribed to now.
    pub fn subscribed(&self) -> &[String] {
        &self.subscribed
    }

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
                    let record = Record {
                        topic: message.topic().to_owned(),
                        partition: message.partition(),
                        offset: message.offset(),
                        key: message.key().map(<[u8]>::to_vec),
                        payload: message.payload().map(<[u8]>::to_vec),
                        timestamp_ms: message.timestamp().to_millis(),
                        replay_count: replay_count(&message),
                        headers: headers(&message),
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
    fn commit_positions(&self) {
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

    fn on_error(&mut self, error: KafkaError) -> Result<(), ConsumeError> {
        if crate::error::flags(&error).fatal {
            // The client's own account of its fatal state, when it has one.
            let (code, detail) = self.consumer.client().fatal_error().unwrap_or_else(|| {
                let code = error
                    .rdkafka_error_code()
                    .unwrap_or(RDKafkaErrorCode::Fatal);
                (code, error.to_string())
            });
            if code == RDKafkaErrorCode::FencedInstanceId
                || error.rdkafka_error_code() == Some(RDKafkaErrorCode::FencedInstanceId)
            {
                return self.on_fenced(detail);
            }
            return Err(ConsumeError::Stalled {
                topic: self.label.clone(),
                stuck: self.stuck_partitions(None),
                cause: format!("{error} ({detail})"),
                for_: Duration::ZERO,
                reports: 1,
            });
        }
        let class = crate::error::consumer_error_class(&error);
        let key = error
            .rdkafka_error_code()
            .map_or(Trouble::Code(i32::MIN), |code| Trouble::Code(code as i32));
        match self.watch.observe(key, class, Instant::now()) {
            Verdict::Ride => {
                if class == ErrorClass::Transient {
                    self.last_transient = Some(Instant::now());
                    tracing::warn!(topics = %self.label, %error, "consumer error (the client retries)");
                } else {
                    tracing::warn!(topics = %self.label, %error, bound_s = self.watch.bound().as_secs(),
                        "consumer error; the pipeline stops if it keeps coming back for the bound");
                }
                Ok(())
            }
            Verdict::Stalled { for_, reports } => {
                let since = Instant::now().checked_sub(for_);
                Err(ConsumeError::Stalled {
                    topic: self.label.clone(),
                    stuck: self.stuck_partitions(since),
                    cause: error.to_string(),
                    for_,
                    reports,
                })
            }
        }
    }

    /// Fenced as a static member. Either another live process joined with the same
    /// `group.instance.id` (a configuration error: exit with a clear message rather than
    /// fence each other back and forth), or the client fenced itself: after a broker
    /// restart or a coordinator move, librdkafka may join again without its member id, and
    /// the coordinator then fences the session it still holds — which is this process's own.
    /// So a fence that comes within a minute of a broker-side error is taken for the second
    /// case and the client is built again and rejoins, at most three times in ten minutes;
    /// any other fence ends the pipeline. Records already polled stay valid: a batch whose
    /// partitions the new client does not own is simply not committed and comes again.
    fn on_fenced(&mut self, detail: String) -> Result<(), ConsumeError> {
        let now = Instant::now();
        let fenced = ConsumeError::Fenced {
            group: self.group.clone(),
            instance: self.instance.clone().unwrap_or_default(),
            detail,
        };
        if !may_rejoin_after_fence(now, self.last_transient, &mut self.rejoins) {
            return Err(fenced);
        }
        tracing::warn!(topics = %self.label, group = %self.group, rejoins = self.rejoins.len() + 1,
            error = %fenced, "fenced right after a broker disruption (the client fencing its own \
            previous session); building the client again and rejoining");
        let consumer: BaseConsumer<RebalanceCounter> =
            self.config.create_with_context(self.rebalances.clone())?;
        subscribe_to(&consumer, &self.subscribed)?;
        self.consumer = consumer;
        self.rejoins.push(now);
        // The new client holds nothing back; the next `hold` pauses again what it names.
        self.held.clear();
        Ok(())
    }

    /// Every few seconds: are the named topics still there, and which topics match the
    /// pattern now? A deleted named topic is bounded like any persistent error, so a topic
    /// that is being re-created has the bound to come back; a pattern's topics come and go.
    fn check_topics(&mut self) -> Result<(), ConsumeError> {
        let now = Instant::now();
        if now < self.next_topic_check {
            return Ok(());
        }
        self.next_topic_check = now + TOPIC_CHECK_INTERVAL;
        if self.topics.is_pattern() {
            self.follow_pattern();
            return Ok(());
        }
        let mut missing = None;
        for topic in self.topics.named() {
            let Ok(metadata) = self
                .consumer
                .fetch_metadata(Some(topic), Duration::from_secs(2))
            else {
                return Ok(()); // the broker is unreachable: nothing learned
            };
            if !exists(&metadata, topic) {
                missing = Some(topic.clone());
                break;
            }
        }
        let Some(topic) = missing else {
            return Ok(());
        };
        match self
            .watch
            .observe(Trouble::TopicMissing, ErrorClass::Persistent, now)
        {
            Verdict::Ride => {
                tracing::warn!(%topic, bound_s = self.watch.bound().as_secs(),
                    "the topic does not exist; the pipeline stops if it does not come back");
                Ok(())
            }
            Verdict::Stalled { for_, .. } => Err(ConsumeError::TopicGone { topic, for_ }),
        }
    }

    /// Subscribes to the topics matching the pattern now, when they changed.
    fn follow_pattern(&mut self) {
        let Some(now_matching) = matching(&self.consumer, &self.topics) else {
            return; // the broker is unreachable: nothing learned
        };
        if now_matching == self.subscribed {
            return;
        }
        let added: Vec<&String> = now_matching
            .iter()
            .filter(|t| !self.subscribed.contains(t))
            .collect();
        let removed: Vec<&String> = self
            .subscribed
            .iter()
            .filter(|t| !now_matching.contains(t))
            .collect();
        match subscribe_to(&self.consumer, &now_matching) {
            Ok(()) => {
                tracing::info!(topics = %self.label, ?added, ?removed, subscribed = now_matching.len(),
                    "the topics matching the pattern changed; subscribed to the new set");
                self.subscribed = now_matching;
            }
            Err(error) => {
                tracing::warn!(topics = %self.label, %error, "cannot subscribe to the topics matching the pattern; trying again");
            }
        }
    }

    /// The assigned partitions that have records left but delivered none since `since`,
    /// with the offset the client is stuck at, e.g. `partition 1 at offset 200 of 400`.
    fn stuck_partitions(&self, since: Option<Instant>) -> String {
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
    /// consumer's position (the offset after the last record handed to the application; the
    /// group's committed offset where nothing was consumed yet, and the start of the
    /// partition where the group never committed). With `ask_broker` the watermarks are
    /// asked of the broker (a round trip per partition, up to `timeout` each); without it
    /// the high watermark is the one in the client's last statistics (`statistics.interval.ms`,
    /// 2 s with batch tuning; librdkafka takes it from the fetch responses, so it does not
    /// move while fetching is paused), and the broker is asked only for a partition that
    /// has no statistics or no position yet. A fetch of the watermarks that fails leaves the
    /// partition out.
    pub fn lag(
        &self,
        timeout: Duration,
        ask_broker: bool,
    ) -> Result<Vec<(String, i32, i64)>, KafkaError> {
        let positions = self.consumer.position()?;
        let committed = if positions
            .elements()
            .iter()
            .any(|e| e.offset().to_raw().is_none_or(|o| o < 0))
        {
            Some(self.consumer.committed(timeout)?)
        } else {
            None
        };
        let mut lags = Vec::with_capacity(positions.count());
        for e in positions.elements() {
            let known = |o: Offset| o.to_raw().filter(|o| *o >= 0);
            let cached = if ask_broker {
                None
            } else {
                self.rebalances.high_watermark(e.topic(), e.partition())
            };
            let watermarks = match cached {
                // The low watermark is only needed where the position is not known.
                Some(high) if known(e.offset()).is_some() => Ok((0, high)),
                _ => self
                    .consumer
                    .fetch_watermarks(e.topic(), e.partition(), timeout),
            };
            let Ok((low, high)) = watermarks else {
                continue;
            };
            let at = known(e.offset())
                .or_else(|| {
                    committed
                        .as_ref()
                        .and_then(|c| c.find_partition(e.topic(), e.partition()))
                        .and_then(|c| known(c.offset()))
                })
                .unwrap_or(low);
            lags.push((e.topic().to_owned(), e.partition(), (high - at).max(0)));
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

/// Subscribes to `topics`; to none (unsubscribed) when the list is empty.
fn subscribe_to<C: rdkafka::consumer::ConsumerContext>(
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

/// Whether the metadata holds `topic` without an unknown-topic error.
fn exists(metadata: &rdkafka::metadata::Metadata, topic: &str) -> bool {
    metadata.topics().iter().any(|t| {
        t.name() == topic
            && !t.error().is_some_and(|code| {
                matches!(
                    RDKafkaErrorCode::from(code),
                    RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic
                )
            })
    })
}

/// The cluster's topics that `topics` covers now; `None` when the cluster cannot be asked.
fn matching<C: rdkafka::consumer::ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topics: &Topics,
) -> Option<Vec<String>> {
    let metadata = consumer.fetch_metadata(None, Duration::from_secs(5)).ok()?;
    Some(
        topics.select(
            metadata
                .topics()
                .iter()
                .filter(|t| t.error().is_none())
                .map(|t| t.name()),
        ),
    )
}

/// Whether a fence at `now` is taken for self-fencing (see `BatchConsumer::on_fenced`): a
/// broker-side error within the last minute, and fewer than three rejoins in ten minutes.
/// Forgets rejoins older than ten minutes.
fn may_rejoin_after_fence(
    now: Instant,
    last_transient: Option<Instant>,
    rejoins: &mut Vec<Instant>,
) -> bool {
    const SELF_FENCE_WINDOW: Duration = Duration::from_secs(60);
    const REJOIN_WINDOW: Duration = Duration::from_secs(600);
    const MAX_REJOINS: usize = 3;
    rejoins.retain(|t| now.saturating_duration_since(*t) < REJOIN_WINDOW);
    let after_broker_trouble =
        last_transient.is_some_and(|t| now.saturating_duration_since(t) < SELF_FENCE_WINDOW);
    after_broker_trouble && rejoins.len() < MAX_REJOINS
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
    fn a_fence_is_taken_for_self_fencing_only_right_after_broker_trouble_and_rarely() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut rejoins = Vec::new();
        // No broker trouble: another live process has the id.
        assert!(!may_rejoin_after_fence(at(100), None, &mut rejoins));
        assert!(!may_rejoin_after_fence(at(100), Some(at(30)), &mut rejoins));
        // Right after a broker restart: rejoin, but three times at most in ten minutes.
        for i in 0..3 {
            assert!(may_rejoin_after_fence(
                at(100 + i),
                Some(at(90)),
                &mut rejoins
            ));
            rejoins.push(at(100 + i));
        }
        assert!(!may_rejoin_after_fence(
            at(110),
            Some(at(105)),
            &mut rejoins
        ));
        // Ten minutes later the budget is back.
        assert!(may_rejoin_after_fence(at(800), Some(at(790)), &mut rejoins));
        assert!(rejoins.is_empty(), "old rejoins forgotten");
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
