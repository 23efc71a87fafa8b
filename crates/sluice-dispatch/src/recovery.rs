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
/// The longest one topic's search may take before the round gives up.
const SEARCH_DEADLINE: Duration = Duration::from_secs(60);
/// Kafka calls' timeout.
const KAFKA_TIMEOUT: Duration = Duration::from_secs(10);

/// What one recovery round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Stale DISPATCHING rows found.
    pub stale: usize,
    /// Found in Kafka and marked PUBLISHED (or already past it).
    pub published: usize,
    /// Not found in Kafka and requeued to PENDING.
    pub requeued: usize,
    /// Moved by someone else while the search ran; left alone.
    pub raced: usize,
}

/// One recovery round over every row DISPATCHING for longer than `stale_after`:
/// [`list_stale`], then [`settle_stale`].
pub async fn recover_stale(
    conn: &mut PgConnection,
    kafka: &KafkaClientSettings,
    stale_after: Duration,
) -> Result<RecoveryReport, DispatchError> {
    let rows = list_stale(conn, stale_after).await?;
    settle_stale(conn, kafka, rows).await
}

/// Looks for each listed row's record in Kafka and settles the row under the claim it was
/// listed with: found → PUBLISHED, not found → PENDING. A row no longer held by that claim
/// is left alone (`raced`).
pub async fn settle_stale(
    conn: &mut PgConnection,
    kafka: &KafkaClientSettings,
    rows: Vec<StaleRow>,
) -> Result<RecoveryReport, DispatchError> {
    let mut report = RecoveryReport {
        stale: rows.len(),
        ..RecoveryReport::default()
    };
    if rows.is_empty() {
        return Ok(report);
    }
    let mut by_topic: BTreeMap<String, Vec<StaleRow>> = BTreeMap::new();
    for row in rows {
        by_topic.entry(row.topic.clone()).or_default().push(row);
    }
    for (topic, rows) in by_topic {
        let bootstrap = kafka.clone();
        let wanted: Vec<(Uuid, Option<i32>)> = rows.iter().map(|r| (r.id, r.partition)).collect();
        let from_ms = rows.iter().map(|r| r.claimed_at_ms).min().unwrap_or(0) - CLOCK_MARGIN_MS;
        let search_topic = topic.clone();
        let found = tokio::task::spawn_blocking(move || {
            search_topic_for_ids(&bootstrap, &search_topic, from_ms, &wanted)
        })
        .await
        .map_err(|e| DispatchError::Recovery(format!("search task failed: {e}")))??;
        for row in rows {
            match found.get(&row.id) {
                Some(&(partition, offset)) => {
                    let settled =
                        settle_published(conn, row.claim_id, &[(row.id, partition, offset)])
                            .await?;
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
    }
    Ok(report)
}

/// Reads `topic` from `from_ms` to its current end, looking for records whose event-id
/// header is one of `wanted` (an id with an explicit partition is looked for there only).
/// Returns id → (partition, offset) of the first record found for each id.
pub fn search_topic_for_ids(
    kafka: &KafkaClientSettings,
    topic: &str,
    from_ms: i64,
    wanted: &[(Uuid, Option<i32>)],
) -> Result<HashMap<Uuid, (i32, i64)>, DispatchError> {
    let admin = Admin::new(kafka, KAFKA_TIMEOUT)?;
    let Some(count) = admin.partition_count(topic)? else {
        return Ok(HashMap::new());
    };
    let partitions: BTreeSet<i32> = if wanted.iter().any(|(_, p)| p.is_none()) {
        (0..count).collect()
    } else {
        wanted
            .iter()
            .filter_map(|(_, p)| *p)
            .filter(|p| *p < count)
            .collect()
    };
    let ids: HashMap<String, Option<i32>> =
        wanted.iter().map(|(id, p)| (id.to_string(), *p)).collect();
    let starts: HashMap<i32, i64> = admin
        .offsets_for_time(topic, from_ms.max(0))?
        .into_iter()
        .collect();
    let ends: HashMap<i32, i64> = admin
        .watermarks(topic)?
        .into_iter()
        .map(|m| (m.partition, m.high))
        .collect();
    let mut list = TopicPartitionList::new();
    let mut open: BTreeSet<i32> = BTreeSet::new();
    for &partition in &partitions {
        let (Some(&start), Some(&end)) = (starts.get(&partition), ends.get(&partition)) else {
            continue;
        };
        if start < end {
            list.add_partition_offset(topic, partition, Offset::Offset(start))?;
            open.insert(partition);
        }
    }
    let mut found = HashMap::new();
    if open.is_empty() {
        return Ok(found);
    }
    let reader: BaseConsumer = assigned_reader(kafka, "sluice-outbox-recovery", &list)?;
    let deadline = Instant::now() + SEARCH_DEADLINE;
    while !open.is_empty() && found.len() < ids.len() {
        if Instant::now() > deadline {
            return Err(DispatchError::Recovery(format!(
                "searching {topic} did not reach the end offsets within {SEARCH_DEADLINE:?}"
            )));
        }
        let Some(message) = reader.poll(Duration::from_millis(200)) else {
            continue;
        };
        let message = match message {
            Ok(message) => message,
            Err(KafkaError::PartitionEOF(partition)) => {
                open.remove(&partition);
                continue;
            }
            Err(error) => return Err(error.into()),
        };
        let partition = message.partition();
        let offset = message.offset();
        if ends.get(&partition).is_some_and(|&end| offset + 1 >= end) {
            open.remove(&partition);
        }
        let Some(headers) = message.headers() else {
            continue;
        };
        let Some(id) = headers
            .iter()
            .find(|h| h.key == EVENT_ID_HEADER)
            .and_then(|h| h.value)
            .and_then(|v| std::str::from_utf8(v).ok())
        else {
            continue;
        };
        if let Some(explicit) = ids.get(id)
            && explicit.is_none_or(|p| p == partition)
            && let Ok(uuid) = Uuid::parse_str(id)
        {
            found.entry(uuid).or_insert((partition, offset));
        }
    }
    Ok(found)
}
