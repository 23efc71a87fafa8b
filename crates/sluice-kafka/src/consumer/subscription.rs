//! The topics followed: every [`TOPIC_CHECK_INTERVAL`](super::TOPIC_CHECK_INTERVAL), a named
//! topic's existence is checked (a deleted one is bounded like any persistent error) and a
//! pattern's matching topics are read again (the consumer subscribes to the new set).

use super::BatchConsumer;
use super::ConsumeError;
use super::TOPIC_CHECK_INTERVAL;
use super::subscribe_to;
use super::trouble::Trouble;
use crate::stall::{ErrorClass, Verdict};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use sluice_core::topics::Topics;
use std::time::{Duration, Instant};

impl BatchConsumer {
    /// Every few seconds: are the named topics still there, and which topics match the
    /// pattern now? A deleted named topic is bounded like any persistent error, so a topic
    /// that is being re-created has the bound to come back; a pattern's topics come and go.
    pub(super) fn check_topics(&mut self) -> Result<(), ConsumeError> {
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
pub(super) fn matching<C: rdkafka::consumer::ConsumerContext>(
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
