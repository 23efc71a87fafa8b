//! Stale dispatch recovery: a row in DISPATCHING past the timeout is not proof that nothing
//! reached Kafka, so it is checked against Kafka before it is requeued.
//!
//! For each stale row, the row's topic — its explicit partition, or every partition — is
//! read from the offset of the claim time (offsets for times, minus a clock margin) to the
//! end offset taken at the start of the search, with a plain consumer (`assign`, no group,
//! nothing committed), looking for a record whose `sluice-event-id` header is the row's id.
//! Found → PUBLISHED with that partition and offset; not found → PENDING, and the event is
//! published again. Both moves compare the claim token listed with the row
//! ([`crate::store::settle`]): several dispatchers run recovery, and a round that listed a row
//! before another round requeued it (and a dispatcher re-claimed it) must not move the new
//! claim. A lost compare is counted as `raced`.
//!
//! A search that cannot finish (broker down, deadline) changes nothing: the rows stay
//! DISPATCHING for the next round, because requeuing a row whose record merely was not seen
//! would publish it twice. A live dispatcher cannot still be publishing a stale claim: it
//! hands records to the producer only within its send window after the claim, and the
//! settings guarantee send window + delivery timeout + margin ≤ stale timeout
//! (`OutboxSettings::send_window`), so every record of a stale claim was acknowledged (and
//! is in the searched range) or failed before the row was listed.
//!
//! A round never blocks itself:
//! - **Each topic on its own.** A topic whose search fails (or passes
//!   [`RecoveryLimits::search_deadline`]) leaves its rows for the next round and is named in
//!   the report ([`RecoveryReport::failed_topics`]); the other topics are settled. Topics go
//!   newest stale claim first, so fresh claims are not held up behind an old one.
//! - **A bounded range.** The search ends at the first offset stamped after the latest
//!   claim + the stale timeout + the clock margin + how far ahead of its append a record's
//!   timestamp may be in that topic (zero with `LogAppendTime`, the topic's
//!   `message.timestamp.after.max.ms` with `CreateTime`: brokers refuse records stamped
//!   further ahead): every record appended before the claim turned stale is stamped
//!   earlier, so it is inside. Only where that lead is unbounded (a cluster before Kafka
//!   3.6, or a limit over a week) does the range run to the topic's current end. So a row
//!   left stale for hours costs the same search as a fresh one, however busy the topic.

use crate::DispatchError;
use crate::publish::EVENT_ID_HEADER;
use crate::store::settle::{requeue_stale, settle_published};
pub use crate::store::stale::{StaleRow, list_stale};
use rdkafka::consumer::BaseConsumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use sluice_core::KafkaClientSettings;
use sluice_kafka::Admin;
use sluice_kafka::clients::assigned_reader;
use sqlx::PgConnection;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// How far before the claim time the search starts (clock skew between the database and
/// the producer's host, which stamps the record).
const CLOCK_MARGIN_MS: i64 = 60_000;
/// The longest one topic's search may take before its rows are left for the next round.
const SEARCH_DEADLINE: Duration = Duration::from_secs(60);

/// What bounds a recovery round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryLimits {
    /// A claim older than this is stale (by then every record of it was acknowledged or
    /// failed).
    pub stale_after: Duration,
    /// The longest one topic's search may take.
    pub search_deadline: Duration,
}

impl RecoveryLimits {
    /// Claims stale after `stale_after`; each topic's search bounded by 60 s.
    pub fn new(stale_after: Duration) -> Self {
        Self {
            stale_after,
            search_deadline: SEARCH_DEADLINE,
        }
    }
}
/// Kafka calls' timeout.
const KAFKA_TIMEOUT: Duration = Duration::from_secs(10);

/// What one recovery round did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Stale DISPATCHING rows found.
    pub stale: usize,
    /// Found in Kafka and marked PUBLISHED (or already past it).
    pub published: usize,
    /// Not found in Kafka and requeued to PENDING.
    pub requeued: usize,
    /// Moved by someone else while the search ran; left alone.
    pub raced: usize,
    /// Left DISPATCHING because their topic's search failed.
    pub unsettled: usize,
    /// The topics whose search failed, with why.
    pub failed_topics: Vec<(String, String)>,
    /// Records read from Kafka by the searches.
    pub scanned: u64,
}

/// One recovery round over every row DISPATCHING for longer than `limits.stale_after`:
/// [`list_stale`], then [`settle_stale`].
pub async fn recover_stale(
    conn: &mut PgConnection,
    kafka: &KafkaClientSettings,
    limits: &RecoveryLimits,
) -> Result<RecoveryReport, DispatchError> {
    let rows = list_stale(conn, limits.stale_after).await?;
    settle_stale(conn, kafka, rows, limits).await
}

/// Looks for each listed row's record in Kafka and settles the row under the claim it was
/// listed with: found → PUBLISHED, not found → PENDING. A row no longer held by that claim
/// is left alone (`raced`); the rows of a topic whose search fails are left for the next
/// round (`unsettled`). Only a database error ends the round early.
pub async fn settle_stale(
    conn: &mut PgConnection,
    kafka: &KafkaClientSettings,
    rows: Vec<StaleRow>,
    limits: &RecoveryLimits,
) -> Result<RecoveryReport, DispatchError> {
    let mut report = RecoveryReport {
        stale: rows.len(),
        ..RecoveryReport::default()
    };
    let mut by_topic: BTreeMap<String, Vec<StaleRow>> = BTreeMap::new();
    for row in rows {
        by_topic.entry(row.topic.clone()).or_default().push(row);
    }
    // The topic with the newest stale claim first.
    let mut topics: Vec<(String, Vec<StaleRow>)> = by_topic.into_iter().collect();
    topics.sort_by_key(|(_, rows)| std::cmp::Reverse(newest_claim(rows)));
    for (topic, rows) in topics {
        let searched = search_topic(kafka, &topic, &rows, limits).await;
        let found = match searched {
            Ok(search) => {
                report.scanned += search.scanned;
                search.found
            }
            Err(error) => {
                tracing::warn!(%topic, rows = rows.len(), %error,
                    "stale dispatch: cannot search the topic; its rows stay DISPATCHING for the next round");
                report.unsettled += rows.len();
                report.failed_topics.push((topic, error.to_string()));
                continue;
            }
        };
        settle_rows(conn, &topic, rows, &found, &mut report).await?;
    }
    Ok(report)
}

fn newest_claim(rows: &[StaleRow]) -> i64 {
    rows.iter().map(|r| r.claimed_at_ms).max().unwrap_or(0)
}

/// Searches `topic` for the records of `rows`, within the range their claims bound.
async fn search_topic(
    kafka: &KafkaClientSettings,
    topic: &str,
    rows: &[StaleRow],
    limits: &RecoveryLimits,
) -> Result<Search, DispatchError> {
    let lead = Admin::new(kafka, KAFKA_TIMEOUT)?
        .timestamp_lead(topic)
        .await?;
    let from_ms = rows.iter().map(|r| r.claimed_at_ms).min().unwrap_or(0) - CLOCK_MARGIN_MS;
    let until_ms = lead.map(|lead| {
        let after = limits.stale_after + lead;
        newest_claim(rows)
            .saturating_add(CLOCK_MARGIN_MS)
            .saturating_add(i64::try_from(after.as_millis()).unwrap_or(i64::MAX))
            .saturating_add(1)
    });
    let window = Window {
        from_ms,
        until_ms,
        deadline: limits.search_deadline,
    };
    let wanted: Vec<(Uuid, Option<i32>)> = rows.iter().map(|r| (r.id, r.partition)).collect();
    let (kafka, topic) = (kafka.clone(), topic.to_owned());
    tokio::task::spawn_blocking(move || search_topic_for_ids(&kafka, &topic, &window, &wanted))
        .await
        .map_err(|e| DispatchError::Recovery(format!("search task failed: {e}")))?
}

/// Settles one topic's rows by what its search found.
async fn settle_rows(
    conn: &mut PgConnection,
    topic: &str,
    rows: Vec<StaleRow>,
    found: &HashMap<Uuid, (i32, i64)>,
    report: &mut RecoveryReport,
) -> Result<(), DispatchError> {
    for row in rows {
        match found.get(&row.id) {
            Some(&(partition, offset)) => {
                let settled =
                    settle_published(conn, row.claim_id, &[(row.id, partition, offset)]).await?;
                if settled.published + settled.already_past > 0 {
                    tracing::info!(id = %row.id, %topic, partition, offset,
                        "stale dispatch: record found in Kafka, marked PUBLISHED");
                    report.published += 1;
                } else {
                    tracing::info!(id = %row.id, %topic, claim = ?row.claim_id,
                        "stale dispatch: found in Kafka, but the row changed claim; left alone");
                    report.raced += 1;
                }
            }
            None => {
                if requeue_stale(conn, row.id, row.claim_id).await? {
                    tracing::info!(id = %row.id, %topic, claim = ?row.claim_id,
                        "stale dispatch: no record in Kafka, requeued");
                    report.requeued += 1;
                } else {
                    tracing::info!(id = %row.id, %topic, claim = ?row.claim_id,
                        "stale dispatch: the row changed claim since it was listed; left alone");
                    report.raced += 1;
                }
            }
        }
    }
    Ok(())
}

/// The part of a topic a search reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// From the first offset stamped at or after this time (ms since the epoch).
    pub from_ms: i64,
    /// Up to the first offset stamped at or after this time; `None`: the current end.
    pub until_ms: Option<i64>,
    /// The longest the search may take.
    pub deadline: Duration,
}

/// What a search found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Search {
    /// Event id → (partition, offset) of the first record found for it.
    pub found: HashMap<Uuid, (i32, i64)>,
    /// Records read.
    pub scanned: u64,
}

/// Reads `window` of `topic` (never past its current end), looking for records whose
/// event-id header is one of `wanted` (an id with an explicit partition is looked for there
/// only).
pub fn search_topic_for_ids(
    kafka: &KafkaClientSettings,
    topic: &str,
    window: &Window,
    wanted: &[(Uuid, Option<i32>)],
) -> Result<Search, DispatchError> {
    let admin = Admin::new(kafka, KAFKA_TIMEOUT)?;
    let Some(count) = admin.partition_count(topic)? else {
        return Ok(Search::default());
    };
    let partitions = partitions_to_search(wanted, count);
    let ids: HashMap<String, Option<i32>> =
        wanted.iter().map(|(id, p)| (id.to_string(), *p)).collect();
    let (starts, ends) = range_offsets(&admin, topic, window)?;
    let (list, open) = assign_range(topic, &partitions, &starts, &ends)?;
    if open.is_empty() {
        return Ok(Search::default());
    }
    let reader: BaseConsumer = assigned_reader(kafka, "sluice-outbox-recovery", &list)?;
    let scan = Scan {
        topic,
        ids,
        ends,
        open,
        search: Search::default(),
    };
    scan.run(&reader, window)
}

/// The partitions a search reads: every one of the topic's `count` when an id has no
/// explicit partition, else only the explicit ones that exist.
fn partitions_to_search(wanted: &[(Uuid, Option<i32>)], count: i32) -> BTreeSet<i32> {
    if wanted.iter().any(|(_, p)| p.is_none()) {
        (0..count).collect()
    } else {
        wanted
            .iter()
            .filter_map(|(_, p)| *p)
            .filter(|p| *p < count)
            .collect()
    }
}

/// An offset per partition.
type OffsetByPartition = HashMap<i32, i64>;

/// Per partition, where the window starts (the first offset stamped at or after its
/// `from_ms`) and ends (the current end, or the first offset stamped at or after its
/// `until_ms` when that is earlier).
fn range_offsets(
    admin: &Admin,
    topic: &str,
    window: &Window,
) -> Result<(OffsetByPartition, OffsetByPartition), DispatchError> {
    let starts: OffsetByPartition = admin
        .offsets_for_time(topic, window.from_ms.max(0))?
        .into_iter()
        .collect();
    let mut ends: OffsetByPartition = admin
        .watermarks(topic)?
        .into_iter()
        .map(|m| (m.partition, m.high))
        .collect();
    if let Some(until_ms) = window.until_ms {
        // `offsets_for_time` answers the current end where nothing is stamped that late.
        for (partition, until) in admin.offsets_for_time(topic, until_ms.max(0))? {
            if let Some(end) = ends.get_mut(&partition) {
                *end = (*end).min(until);
            }
        }
    }
    Ok((starts, ends))
}

/// The assignment of the reader (each partition with records in its range, from its
/// start), and those partitions (the ones still open).
fn assign_range(
    topic: &str,
    partitions: &BTreeSet<i32>,
    starts: &OffsetByPartition,
    ends: &OffsetByPartition,
) -> Result<(TopicPartitionList, BTreeSet<i32>), DispatchError> {
    let mut list = TopicPartitionList::new();
    let mut open: BTreeSet<i32> = BTreeSet::new();
    for &partition in partitions {
        let (Some(&start), Some(&end)) = (starts.get(&partition), ends.get(&partition)) else {
            continue;
        };
        if start < end {
            list.add_partition_offset(topic, partition, Offset::Offset(start))?;
            open.insert(partition);
        }
    }
    Ok((list, open))
}

/// One topic's search under way: the ids looked for (with their explicit partition), each
/// partition's end, the partitions not read to their end yet, and what was found so far.
struct Scan<'a> {
    topic: &'a str,
    ids: HashMap<String, Option<i32>>,
    ends: OffsetByPartition,
    open: BTreeSet<i32>,
    search: Search,
}

impl Scan<'_> {
    /// Polls `reader` until every partition is read to its end or every id is found; an
    /// error when that takes longer than the window's deadline.
    fn run(mut self, reader: &BaseConsumer, window: &Window) -> Result<Search, DispatchError> {
        let deadline = Instant::now() + window.deadline;
        while !self.open.is_empty() && self.search.found.len() < self.ids.len() {
            if Instant::now() >= deadline {
                return Err(DispatchError::Recovery(format!(
                    "searching {} did not reach the end of its range within {:?} \
                     ({} records read)",
                    self.topic, window.deadline, self.search.scanned
                )));
            }
            let Some(message) = reader.poll(Duration::from_millis(200)) else {
                continue;
            };
            let message = match message {
                Ok(message) => message,
                Err(KafkaError::PartitionEOF(partition)) => {
                    self.open.remove(&partition);
                    continue;
                }
                Err(error) => return Err(error.into()),
            };
            self.look_at(&message);
        }
        Ok(self.search)
    }

    /// Looks at one record: past the range it closes its partition unread; within it, it
    /// is counted (the last one closes its partition) and its event id noted if wanted.
    fn look_at<M: Message>(&mut self, message: &M) {
        let partition = message.partition();
        let offset = message.offset();
        if self.ends.get(&partition).is_some_and(|&end| offset >= end) {
            // Past the range (the fetch brings whole batches): not looked at.
            self.open.remove(&partition);
            return;
        }
        self.search.scanned += 1;
        if self
            .ends
            .get(&partition)
            .is_some_and(|&end| offset + 1 >= end)
        {
            self.open.remove(&partition);
        }
        let Some(id) = event_id(message) else {
            return;
        };
        if let Some(explicit) = self.ids.get(id)
            && explicit.is_none_or(|p| p == partition)
            && let Ok(uuid) = Uuid::parse_str(id)
        {
            self.search.found.entry(uuid).or_insert((partition, offset));
        }
    }
}

/// The record's event id (its [`EVENT_ID_HEADER`]), if it has one in UTF-8.
fn event_id<M: Message>(message: &M) -> Option<&str> {
    message
        .headers()?
        .iter()
        .find(|h| h.key == EVENT_ID_HEADER)
        .and_then(|h| h.value)
        .and_then(|v| std::str::from_utf8(v).ok())
}
