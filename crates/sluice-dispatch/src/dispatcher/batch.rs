//! One batch's three steps, which the dispatch loop overlaps across batches: [`Claimed`]
//! (PENDING → DISPATCHING under a fresh token), [`Published`] (its records acknowledged or
//! failed, key by key), and the settle that records every outcome under that token.
//!
//! Overlapping batches keep per-key order because the claim never hands out a key that is
//! DISPATCHING in an earlier claim (`store/sql/claim.sql`): two batches in flight at once
//! hold disjoint keys, so their records may go out together.

use super::Dispatcher;
use crate::error::DispatchError;
use crate::events::BatchPublished;
#[cfg(feature = "failpoints")]
use crate::failpoint::Failpoint;
use crate::publish::{Sent, is_unknown_partition, may_be_a_missing_topic, publish_in_key_order};
use crate::report::DispatchReport;
use crate::store::claim::{ClaimLimit, ClaimedEvent, claim_batch_as};
use crate::store::failure::{
    FailedPublishOutcome, mark_publish_failed, note_before_last_error, registry_partitions,
    requeue_without_attempt,
};
use crate::store::settle::settle_published;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How long the broker is asked whether the topics of timed-out publishes exist, after
/// their failed attempts are recorded.
const TOPIC_CHECK: Duration = Duration::from_secs(2);

/// The wait before an event whose partition was just created is claimed again.
const NEW_PARTITION_DELAY: Duration = Duration::from_secs(1);

/// A committed claim whose records are not handed to the producer yet.
#[derive(Debug)]
pub(crate) struct Claimed {
    /// The claim token every later move of these rows compares.
    pub(crate) token: Uuid,
    /// The claimed events, in creation order.
    pub(crate) events: Vec<ClaimedEvent>,
    /// Whether due events were left out for the byte budget (a backlog).
    pub(crate) cut: bool,
    /// Nothing of this claim is handed to the producer at or after this instant.
    pub(crate) send_until: Instant,
    /// How long the claim statement took.
    pub(crate) claim_time: Duration,
}

/// A claim whose every record is resolved: acknowledged, failed or held back.
#[derive(Debug)]
pub(crate) struct Published {
    pub(crate) claimed: Claimed,
    /// One outcome per event, in the order of `claimed.events`.
    pub(crate) results: Vec<Sent>,
    /// From the first record queued to the last delivery report.
    pub(crate) publish_time: Duration,
}

/// A batch being published; it owns its events and a handle on the producer.
pub(crate) type Publishing = Pin<Box<dyn Future<Output = Published> + Send>>;

impl Dispatcher {
    /// Claims one batch under a fresh claim token, publishes it key by key and records
    /// every outcome under that token, one step after the other (the loop in [`Self::run`]
    /// overlaps these steps across batches).
    pub async fn dispatch_once(&mut self) -> Result<DispatchReport, DispatchError> {
        let claimed = self.claim().await?;
        if claimed.events.is_empty() {
            return Ok(DispatchReport {
                claim_time: claimed.claim_time,
                ..DispatchReport::default()
            });
        }
        let published = self.publish(claimed).await;
        self.settle(published).await
    }

    /// Claims up to a batch of due events under a fresh claim token.
    pub(crate) async fn claim(&mut self) -> Result<Claimed, DispatchError> {
        let id = self.settings.dispatcher_id.clone();
        let mut limit = ClaimLimit {
            events: self.settings.batch_size,
            bytes: self.settings.batch_bytes,
            from_seq: self.floor.for_claim(Instant::now()),
        };
        let token = Uuid::new_v4();
        // Taken before the claim statement starts, so never later than the claim time the
        // database records: the send window is measured conservatively.
        let started = Instant::now();
        let send_until = started + self.settings.send_window();
        let mut claim = claim_batch_as(self.connection().await?, &id, token, limit).await?;
        if claim.events.is_empty()
            && limit.from_seq > 0
            && self.floor.rescan_after_empty(Instant::now())
        {
            // Nothing from the floor: what woke the claim may be a row below it (a release, a
            // retry, another dispatcher's requeue), so look from seq 0 before waiting.
            limit.from_seq = 0;
            claim = claim_batch_as(self.connection().await?, &id, token, limit).await?;
        }
        if let Some(probe) = claim.probe {
            self.floor.observe(probe);
        }
        Ok(Claimed {
            token,
            events: claim.events,
            cut: claim.cut,
            send_until,
            claim_time: started.elapsed(),
        })
    }

    /// Starts publishing a claim key by key ([`publish_in_key_order`]); the future owns
    /// everything it needs, so the loop can claim and settle other batches meanwhile.
    pub(crate) fn publish(&mut self, claimed: Claimed) -> Publishing {
        #[cfg(feature = "failpoints")]
        if self.failpoint == Some(Failpoint::BeforePublish) {
            Failpoint::BeforePublish.trigger();
        }
        let producer = self.producer.clone();
        let mut fail_next = std::mem::take(&mut self.fail_next);
        Box::pin(async move {
            let started = Instant::now();
            let results = publish_in_key_order(
                &producer,
                &claimed.events,
                claimed.send_until,
                &mut fail_next,
            )
            .await;
            Published {
                claimed,
                results,
                publish_time: started.elapsed(),
            }
        })
    }

    /// Records every outcome of a published claim under its token: the acknowledged rows
    /// PUBLISHED in one statement, then each failed or held-back row back to PENDING (or
    /// FAILURE).
    pub(crate) async fn settle(
        &mut self,
        published: Published,
    ) -> Result<DispatchReport, DispatchError> {
        #[cfg(feature = "failpoints")]
        if self.failpoint == Some(Failpoint::AfterPublish) {
            Failpoint::AfterPublish.trigger();
        }
        let Published {
            claimed,
            results,
            publish_time,
        } = published;
        let claim = claimed.token;
        let mut report = DispatchReport {
            claimed: claimed.events.len(),
            claim_time: claimed.claim_time,
            publish_time,
            ..DispatchReport::default()
        };
        let started = Instant::now();
        let mut failures = vec![];
        let mut held = vec![];
        let mut acks = Vec::with_capacity(claimed.events.len());
        let mut latencies = Vec::with_capacity(claimed.events.len());
        for (event, result) in claimed.events.iter().zip(results) {
            if !matches!(result, Sent::Delivered(_)) {
                self.floor.lower(event.seq); // it may be PENDING again, below the floor
            }
            match result {
                Sent::Delivered(d) => {
                    acks.push((event.id, d.partition, d.offset));
                    latencies.push((std::time::SystemTime::from(event.created_at), d.acked_at));
                }
                Sent::Failed(error) => failures.push((event, error)),
                Sent::Held(why) => held.push((event, why)),
            }
        }
        let settled = settle_published(self.connection().await?, Some(claim), &acks).await?;
        BatchPublished {
            metrics: &self.metrics,
            claim,
            marked: settled.published,
            lost: settled.lost,
            acks: latencies,
            failed_attempts: failures.len(),
        }
        .emit();
        report.published = settled.published + settled.already_past;
        report.lost += settled.lost;
        let mut refresh = false;
        let mut timed_out: Vec<(&ClaimedEvent, String)> = Vec::new();
        for (event, error) in failures {
            if let Some(written) = self
                .record_failure(event, &error, &mut report, &mut refresh)
                .await?
                && may_be_a_missing_topic(&error)
            {
                timed_out.push((event, written));
            }
        }
        for (event, why) in held {
            if self
                .requeue_without_attempt(event, Duration::ZERO, why.as_str())
                .await?
            {
                report.held += 1;
            } else {
                report.lost += 1;
            }
        }
        if refresh {
            self.refresh_producer();
        }
        if !timed_out.is_empty() {
            self.name_missing_topics(&timed_out).await;
        }
        report.mark_time = started.elapsed();
        Ok(report)
    }

    async fn record_failure(
        &mut self,
        event: &ClaimedEvent,
        kafka_error: &rdkafka::error::KafkaError,
        report: &mut DispatchReport,
        refresh: &mut bool,
    ) -> Result<Option<String>, DispatchError> {
        let claim = event.claim_id;
        let attempts = u32::try_from(event.attempts).unwrap_or(0);
        let mut error = kafka_error.to_string();
        if is_unknown_partition(event, kafka_error) {
            match self.missing_partition(event, refresh).await? {
                None => {
                    let reason = format!(
                        "unknown partition {}: {error}",
                        event.partition.unwrap_or(-1)
                    );
                    if self
                        .requeue_without_attempt(event, NEW_PARTITION_DELAY, &reason)
                        .await?
                    {
                        report.repartitioned += 1;
                    } else {
                        report.lost += 1;
                    }
                    return Ok(None);
                }
                Some(why) => error = format!("{why}: {error}"),
            }
        }
        let settings = self.settings.clone();
        let conn = self.connection().await?;
        match mark_publish_failed(conn, &settings, claim, event.id, attempts, &error).await? {
            FailedPublishOutcome::Requeued { .. } => report.retried += 1,
            FailedPublishOutcome::Failed { .. } => report.failed += 1,
            FailedPublishOutcome::NotClaimed => {
                report.lost += 1;
                return Ok(None);
            }
        }
        Ok(Some(error))
    }

    /// After the failed attempts are recorded (`events`, each with the `last_error` it was
    /// given): the producer only says a publish timed out (or knows no such topic), so the
    /// broker is asked about each of their topics, all at once and for at most
    /// [`TOPIC_CHECK`] (a broker that is down says nothing in time), and the attempts of a
    /// topic it does not have get `topic … does not exist` in front of their `last_error`
    /// where it is still the one written. Only that text changes, never a state; a failure
    /// here is logged and the batch's outcome stands.
    async fn name_missing_topics(&mut self, events: &[(&ClaimedEvent, String)]) {
        let mut asked = tokio::task::JoinSet::new();
        let mut topics: Vec<&str> = events.iter().map(|(e, _)| e.topic.as_str()).collect();
        topics.sort_unstable();
        topics.dedup();
        for topic in topics {
            let (admin, topic) = (self.admin.clone(), topic.to_owned());
            asked
                .spawn_blocking(move || (matches!(admin.partition_count(&topic), Ok(None)), topic));
        }
        let deadline = tokio::time::Instant::now() + TOPIC_CHECK;
        let mut missing = Vec::new();
        while let Ok(Some(answer)) = tokio::time::timeout_at(deadline, asked.join_next()).await {
            if let Ok((true, topic)) = answer {
                missing.push(topic);
            }
        }
        asked.detach_all();
        for topic in missing {
            let note = format!("topic {topic} does not exist; sluice does not create it: ");
            // An explicit partition's attempt may say so already.
            let (ids, errors): (Vec<Uuid>, Vec<&str>) = events
                .iter()
                .filter(|(e, error)| e.topic == topic && !error.starts_with(&note))
                .map(|(e, error)| (e.id, error.as_str()))
                .unzip();
            if ids.is_empty() {
                continue;
            }
            let noted = match self.connection().await {
                Ok(conn) => note_before_last_error(conn, &ids, &errors, &note).await,
                Err(error) => Err(error),
            };
            if let Err(error) = noted {
                tracing::warn!(%topic, %error, "could not note the missing topic in last_error");
                // The connection may be broken: the next use opens another.
                self.conn = None;
                return;
            }
        }
    }

    /// Back to PENDING after `delay`, costing `event` no attempt; false when its claim was
    /// lost.
    async fn requeue_without_attempt(
        &mut self,
        event: &ClaimedEvent,
        delay: Duration,
        reason: &str,
    ) -> Result<bool, DispatchError> {
        let attempts = u32::try_from(event.attempts).unwrap_or(0);
        let conn = self.connection().await?;
        requeue_without_attempt(conn, event.claim_id, event.id, attempts, delay, reason).await
    }

    /// An explicit partition the topic lacks. `None` when it exists now (the producer's
    /// metadata was behind, or the topic was grown to the partition registry's count): the
    /// event is retried without an attempt. Otherwise why it cannot be published yet, a
    /// failed attempt (with its back-off, FAILURE at the limit): the topic is missing, the
    /// partition registry (`topic_partition_counts`) never opened the partition, or its
    /// count could not be read or reached. A topic is grown only to the registry's count —
    /// higher than the broker's when the topic was deleted and made again smaller, or the
    /// cluster replaced — never for a partition the registry did not open: one bad row must
    /// not grow a topic (and move every hashed key of it).
    async fn missing_partition(
        &mut self,
        event: &ClaimedEvent,
        refresh: &mut bool,
    ) -> Result<Option<String>, DispatchError> {
        let (topic, partition) = (&event.topic, event.partition.unwrap_or(-1));
        let wanted = partition.saturating_add(1);
        let count = match self.admin.partition_count(topic) {
            Ok(Some(count)) => count,
            Ok(None) => {
                return Ok(Some(format!(
                    "topic {topic} does not exist; sluice does not create it"
                )));
            }
            Err(metadata) => {
                tracing::warn!(%topic, error = %metadata, "partition count unknown");
                return Ok(Some(format!(
                    "the partition count of topic {topic} cannot be read ({metadata})"
                )));
            }
        };
        if count >= wanted {
            // The broker has the partition; the producer's metadata is behind (another
            // process grew the topic). librdkafka rejects an unknown partition at once
            // without refreshing, so a new producer is the refresh.
            *refresh = true;
            return Ok(None);
        }
        let opened = registry_partitions(self.connection().await?, topic).await?;
        if opened < wanted {
            return Ok(Some(format!(
                "partition {partition} is not in topic {topic} ({count} partitions) and the \
                 partition registry opened {opened} partitions of it; sluice grows a topic \
                 only to those: grow it to publish the event"
            )));
        }
        tracing::info!(%topic, from = count, to = opened,
            "explicit partition missing: growing the topic to the partition registry's count");
        if let Err(grow) = self.admin.grow_topic(topic, opened).await {
            tracing::warn!(%topic, error = %grow, "growing the topic failed");
            return Ok(Some(format!(
                "partition {partition} is not in topic {topic} ({count} partitions); growing \
                 it to the partition registry's {opened} failed: {grow}"
            )));
        }
        *refresh = true;
        Ok(None)
    }
}
