//! `sluice dlt list|show|replay`: the dead-letter topic `<topic>.dlt` of the retry tiers,
//! mirroring `sluice dlq` for the database dead letters.
//!
//! `replay` is a dry run unless `--execute`. It reads from where the replay group
//! `<topic>.dlt.replay` stopped, re-publishes each record's key, payload and own headers to
//! its original topic with a `sluice-replay-count` header one higher, waits for the
//! broker's acknowledgement, and only then commits the group past the record: each
//! dead-lettered record is replayed once (a crash between the two replays it again, which
//! the handler's idempotency absorbs). A copy that fails through every tier again lands in
//! the dead-letter topic with its count, so `--max-replays` bounds the loop. Text from the
//! record is printed with its control characters escaped (see `cmd::dead_letters`).

use super::dead_letters::{
    Payload, ReplayReport, print_headers, print_json, print_key_and_payload, replay_limit_refusal,
    would_republish,
};
use super::retry::main_topic;
use anyhow::anyhow;
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use serde::Serialize;
use sluice_core::KafkaClientSettings;
use sluice_core::untrusted::escape_controls;
use sluice_kafka::admin::GroupOffsets;
use sluice_kafka::producer::Outgoing;
use sluice_kafka::{Admin, REPLAY_COUNT_HEADER, ResilientProducer};
use sluice_process::Failure;
use sluice_retry::headers::{self, RetryHeaders};
use sluice_retry::read::{Range, read_ranges};
use sluice_retry::{OwnedRecord, dlt_topic};
use std::time::Duration;

/// Dead-letter topic actions.
#[derive(Debug, Subcommand)]
pub enum DltAction {
    /// List the records of `<topic>.dlt`, oldest first.
    List(ListArgs),
    /// Show one record with every header, its key and payload (text, or hex).
    Show(ShowArgs),
    /// Re-publish records to their original topic (dry run without --execute).
    Replay(ReplayArgs),
}

/// Options of `dlt list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The main topic (its dead-letter topic is `<topic>.dlt`) [default: MAILBOX_TOPIC].
    #[arg(long)]
    topic: Option<String>,
    /// At most this many records per partition.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `dlt show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The main topic [default: MAILBOX_TOPIC].
    #[arg(long)]
    topic: Option<String>,
    /// The record's partition in `<topic>.dlt`.
    #[arg(long)]
    partition: i32,
    /// The record's offset in `<topic>.dlt`.
    #[arg(long)]
    offset: i64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `dlt replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The main topic [default: MAILBOX_TOPIC].
    #[arg(long)]
    topic: Option<String>,
    /// At most this many records in all.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Refuse records already replayed this many times.
    #[arg(long, default_value_t = 3)]
    max_replays: i32,
    /// Publish and move the replay group (without it, only print what would be replayed).
    #[arg(long)]
    execute: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Also replay records whose origin header names this topic instead of the one the
    /// dead-letter topic belongs to (headers can be written by any producer, so such a
    /// record is refused unless named here).
    #[arg(long, value_name = "TOPIC")]
    to: Option<String>,
}

/// The replay group of a main topic's dead-letter topic.
fn replay_group(topic: &str) -> String {
    format!("{}.replay", dlt_topic(topic))
}

/// A record as printed.
#[derive(Debug, Serialize)]
struct Shown {
    partition: i32,
    offset: i64,
    timestamp: Option<DateTime<Utc>>,
    original: Option<String>,
    error_class: Option<String>,
    error_message: Option<String>,
    attempt: Option<u32>,
    first_failure: Option<DateTime<Utc>>,
    replay_count: i32,
    replayed: bool,
    headers: Vec<(String, Option<Payload>)>,
    key: Option<Payload>,
    payload: Option<Payload>,
}

fn replay_count(record: &OwnedRecord) -> i32 {
    let values = record
        .headers
        .iter()
        .filter(|(k, _)| k == REPLAY_COUNT_HEADER)
        .map(|(_, v)| v.as_deref());
    sluice_core::dead_letter::parse_replay_count(values)
}

/// `record` as printed; `replayed_before` is the replay group's committed offset in its
/// partition.
fn shown(record: &OwnedRecord, replayed_before: Option<i64>) -> Shown {
    let retry = RetryHeaders::decode(record);
    Shown {
        partition: record.partition,
        offset: record.offset,
        timestamp: record
            .timestamp_ms
            .and_then(DateTime::from_timestamp_millis),
        original: retry.as_ref().map(|r| {
            format!(
                "{}[{}]@{}",
                r.original_topic, r.original_partition, r.original_offset
            )
        }),
        error_class: retry.as_ref().map(|r| r.error_class.clone()),
        error_message: retry.as_ref().map(|r| r.error_message.clone()),
        attempt: retry.as_ref().map(|r| r.attempt),
        first_failure: retry
            .as_ref()
            .and_then(|r| DateTime::from_timestamp_millis(r.first_failure_ms)),
        replay_count: replay_count(record),
        replayed: replayed_before.is_some_and(|next| record.offset < next),
        headers: record
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.as_deref().map(Payload::of)))
            .collect(),
        key: record.key.as_deref().map(Payload::of),
        payload: record.payload.as_deref().map(Payload::of),
    }
}

/// Entry point.
pub fn run(action: DltAction) -> Result<(), Failure> {
    let kafka = sluice_process::kafka_settings()?;
    match action {
        DltAction::List(args) => list(&kafka, &main_topic(args.topic.as_deref())?, &args),
        DltAction::Show(args) => show(&kafka, &main_topic(args.topic.as_deref())?, &args),
        DltAction::Replay(args) => {
            let topic = main_topic(args.topic.as_deref())?;
            sluice_process::runtime()?.block_on(replay(&kafka, &topic, &args))
        }
    }
}

fn admin(kafka: &KafkaClientSettings) -> Result<Admin, Failure> {
    Ok(Admin::new(kafka, Duration::from_secs(30))?)
}

/// How long reading the dead-letter topic may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Per partition of `<topic>.dlt`: its watermarks and where the replay group stands.
fn cursors(admin: &Admin, topic: &str) -> Result<Vec<GroupOffsets>, Failure> {
    let dlt = dlt_topic(topic);
    if admin.partition_count(&dlt)?.is_none() {
        return Err(anyhow!("topic {dlt} does not exist").into());
    }
    Ok(admin.group_offsets(&replay_group(topic), &dlt)?)
}

/// The records of `<topic>.dlt` from each partition's offset `from` to its end, at most
/// `limit` per partition.
fn read_to_end(
    kafka: &KafkaClientSettings,
    topic: &str,
    cursors: &[GroupOffsets],
    from: impl Fn(&GroupOffsets) -> i64,
    limit: usize,
) -> Result<Vec<OwnedRecord>, Failure> {
    let ranges: Vec<Range> = cursors
        .iter()
        .map(|c| Range {
            partition: c.partition,
            from: from(c),
            to: c.high,
        })
        .collect();
    Ok(read_ranges(
        kafka,
        &dlt_topic(topic),
        &ranges,
        limit.max(1),
        READ_TIMEOUT,
    )?)
}

fn list(kafka: &KafkaClientSettings, topic: &str, args: &ListArgs) -> Result<(), Failure> {
    let cursors = cursors(&admin(kafka)?, topic)?;
    let records = read_to_end(kafka, topic, &cursors, |c| c.low, args.limit)?;
    let rows: Vec<Shown> = records
        .iter()
        .map(|r| {
            let committed = cursors
                .iter()
                .find(|c| c.partition == r.partition)
                .and_then(|c| c.committed);
            shown(r, committed)
        })
        .collect();
    if args.json {
        return print_json(&rows);
    }
    let dlt = dlt_topic(topic);
    println!(
        "{:<10} {:<20} {:<40} {:<10} {:>7} {:>7} {:>8}  error",
        "record", "dead-lettered", "original", "class", "attempt", "replays", "replayed"
    );
    for row in &rows {
        let message: String = row
            .error_message
            .as_deref()
            .unwrap_or("-")
            .chars()
            .take(100)
            .collect();
        println!(
            "{:<10} {:<20} {:<40} {:<10} {:>7} {:>7} {:>8}  {}",
            format!("{}@{}", row.partition, row.offset),
            row.timestamp.map_or_else(
                || "-".to_owned(),
                |t| t.format("%Y-%m-%d %H:%M:%S").to_string()
            ),
            escape_controls(row.original.as_deref().unwrap_or("-")),
            escape_controls(row.error_class.as_deref().unwrap_or("-")),
            row.attempt
                .map_or_else(|| "-".to_owned(), |a| a.to_string()),
            row.replay_count,
            if row.replayed { "yes" } else { "no" },
            escape_controls(&message)
        );
    }
    println!("{} record(s) in {dlt}", rows.len());
    Ok(())
}

fn show(kafka: &KafkaClientSettings, topic: &str, args: &ShowArgs) -> Result<(), Failure> {
    let cursors = cursors(&admin(kafka)?, topic)?;
    let Some(&GroupOffsets {
        low,
        high,
        committed,
        ..
    }) = cursors.iter().find(|c| c.partition == args.partition)
    else {
        return Err(anyhow!("{} has no partition {}", dlt_topic(topic), args.partition).into());
    };
    if args.offset < low || args.offset >= high {
        return Err(anyhow!(
            "no record at {}[{}]@{} (offsets {low}..{high})",
            dlt_topic(topic),
            args.partition,
            args.offset
        )
        .into());
    }
    let range = Range {
        partition: args.partition,
        from: args.offset,
        to: args.offset + 1,
    };
    let records = read_ranges(kafka, &dlt_topic(topic), &[range], 1, READ_TIMEOUT)?;
    let record = records
        .first()
        .ok_or_else(|| anyhow!("the record at offset {} was not read", args.offset))?;
    let s = shown(record, committed);
    if args.json {
        return print_json(&s);
    }
    println!(
        "record:        {}[{}]@{}",
        dlt_topic(topic),
        s.partition,
        s.offset
    );
    println!(
        "original:      {}",
        escape_controls(s.original.as_deref().unwrap_or("-"))
    );
    println!(
        "error class:   {}",
        escape_controls(s.error_class.as_deref().unwrap_or("-"))
    );
    println!(
        "error:         {}",
        escape_controls(s.error_message.as_deref().unwrap_or("-"))
    );
    println!(
        "attempts:      {}",
        s.attempt.map_or_else(|| "-".to_owned(), |a| a.to_string())
    );
    println!(
        "first failure: {}",
        s.first_failure
            .map_or_else(|| "-".to_owned(), |t| t.to_rfc3339())
    );
    println!(
        "replays:       {} (replayed: {})",
        s.replay_count,
        if s.replayed { "yes" } else { "no" }
    );
    print_headers(&s.headers);
    print_key_and_payload(s.key.as_ref(), s.payload.as_ref());
    Ok(())
}

/// Why a record cannot be replayed, if it cannot.
/// Why `record` of `<topic>.dlt` is not replayed, if it is not: the replay limit, or an
/// origin header that names another topic than `topic` (the one the dead-letter topic belongs
/// to) and that `--to` does not name.
fn refusal(record: &OwnedRecord, topic: &str, args: &ReplayArgs) -> Option<String> {
    let tombstone = record.payload.is_none();
    if let Some(why) = replay_limit_refusal(replay_count(record), args.max_replays, tombstone) {
        return Some(why);
    }
    let origin = headers::ORIGINAL_TOPIC;
    match record.header_str(origin) {
        None => Some(format!("no {origin} header: the original topic is unknown")),
        Some(named) if named == topic || args.to.as_deref() == Some(named) => None,
        Some(named) => Some(format!(
            "its {origin} header names `{named}`, not `{topic}` (the topic {}.dlt belongs to); \
             headers can be written by any producer: pass --to {named} to send it there",
            topic
        )),
    }
}

#[derive(Debug, Serialize)]
struct ReplayLine {
    record: String,
    original: String,
    action: String,
}

/// The records to replay, at most `limit`: oldest first over all partitions, but each
/// partition in offset order from its cursor — timestamps within a partition need not grow
/// (forwarders on several hosts), and the replay group commits a record's `offset + 1`, so
/// taking a later offset before an earlier one would skip the earlier one for good (or move
/// the commit back and replay records twice). The merge picks, among the partitions' next
/// records, the one with the oldest timestamp; a partition's records are never reordered.
fn replay_order(mut records: Vec<OwnedRecord>, limit: usize) -> Vec<OwnedRecord> {
    use std::collections::{BTreeMap, VecDeque};
    records.sort_by_key(|r| (r.partition, r.offset));
    let mut queues: BTreeMap<i32, VecDeque<OwnedRecord>> = BTreeMap::new();
    for record in records {
        queues
            .entry(record.partition)
            .or_default()
            .push_back(record);
    }
    let mut out = Vec::new();
    while out.len() < limit {
        let next = queues
            .iter()
            .filter_map(|(p, q)| q.front().map(|r| ((r.timestamp_ms, *p, r.offset), *p)))
            .min()
            .map(|(_, p)| p);
        let Some(record) = next
            .and_then(|p| queues.get_mut(&p))
            .and_then(VecDeque::pop_front)
        else {
            break;
        };
        out.push(record);
    }
    out
}

/// Where a replayed record goes: back to the partition it came from, since a topic whose
/// partitions are chosen by the producer (a user pinned to one) is not keyed by hash. A
/// partition the topic does not have (a header written by another producer, a topic made
/// again with fewer) leaves the choice to the key. Each topic's partition count is read once.
#[derive(Debug, Default)]
struct OwnPartitions(std::collections::HashMap<String, Option<i32>>);

impl OwnPartitions {
    /// The partition of `topic` that `record` goes to (`None`: by its key).
    fn of(
        &mut self,
        admin: &Admin,
        record: &OwnedRecord,
        topic: &str,
    ) -> Result<Option<i32>, Failure> {
        let has = match self.0.get(topic) {
            Some(has) => *has,
            None => {
                let has = admin.partition_count(topic)?;
                self.0.insert(topic.to_owned(), has);
                has
            }
        };
        Ok(RetryHeaders::decode(record)
            .map(|h| h.original_partition)
            .filter(|p| *p >= 0 && has.is_some_and(|has| *p < has)))
    }
}

async fn replay(
    kafka: &KafkaClientSettings,
    topic: &str,
    args: &ReplayArgs,
) -> Result<(), Failure> {
    let admin = admin(kafka)?;
    let dlt = dlt_topic(topic);
    let group = replay_group(topic);
    let cursors = cursors(&admin, topic)?;
    let read = read_to_end(kafka, topic, &cursors, GroupOffsets::next, args.limit)?;
    let records = replay_order(read, args.limit.max(1));
    let producer = if args.execute {
        Some(ResilientProducer::new(kafka, "sluice-dlt-replay")?)
    } else {
        None
    };
    let mut report = ReplayReport::with_capacity(records.len());
    let mut partitions = OwnPartitions::default();
    for record in &records {
        let original = record
            .header_str(headers::ORIGINAL_TOPIC)
            .unwrap_or("-")
            .to_owned();
        let count = replay_count(record);
        let action = match (refusal(record, topic, args), &producer) {
            (Some(why), _) => report.refuse(&why),
            (None, None) => would_republish(&original, count + 1),
            (None, Some(producer)) => {
                let count = (count + 1).to_string();
                let mut kept: Vec<(&str, &[u8])> = record
                    .headers
                    .iter()
                    .filter(|(k, _)| !k.starts_with(headers::PREFIX) && k != REPLAY_COUNT_HEADER)
                    .map(|(k, v)| (k.as_str(), v.as_deref().unwrap_or_default()))
                    .collect();
                kept.push((REPLAY_COUNT_HEADER, count.as_bytes()));
                let partition = partitions.of(&admin, record, &original)?;
                let delivered = producer
                    .send(Outgoing {
                        topic: &original,
                        key: record.key.as_deref(),
                        payload: record.payload.as_deref().unwrap_or_default(),
                        partition,
                        headers: &kept,
                    })
                    .await?;
                format!(
                    "re-published to {original}[{}]@{} (replay {count})",
                    delivered.partition, delivered.offset
                )
            }
        };
        if args.execute {
            // Acknowledged (or refused for good): the replay group moves past the record.
            admin.commit_group_offsets(&group, &dlt, &[(record.partition, record.offset + 1)])?;
        }
        report.lines.push(ReplayLine {
            record: format!("{dlt}[{}]@{}", record.partition, record.offset),
            original,
            action,
        });
    }
    report.print(
        args.json,
        args.execute,
        |line| {
            format!(
                "{:<40} {}",
                escape_controls(&line.record),
                escape_controls(&line.action)
            )
        },
        Some(&format!("nothing to replay in {dlt}")),
        "record",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(partition: i32, offset: i64, timestamp_ms: i64) -> OwnedRecord {
        OwnedRecord {
            topic: "t.dlt".into(),
            partition,
            offset,
            timestamp_ms: Some(timestamp_ms),
            key: None,
            payload: None,
            headers: Vec::new(),
        }
    }

    fn coordinates(records: &[OwnedRecord]) -> Vec<(i32, i64)> {
        records.iter().map(|r| (r.partition, r.offset)).collect()
    }

    #[test]
    fn a_partition_is_replayed_in_offset_order_whatever_its_timestamps() {
        // p0@0 is stamped after p0@1 (two forwarders, two clocks).
        let read = vec![
            record(0, 0, 2_000),
            record(0, 1, 1_000),
            record(1, 0, 1_500),
        ];
        assert_eq!(
            coordinates(&replay_order(read.clone(), 2)),
            [(1, 0), (0, 0)],
            "p0@1 never before p0@0"
        );
        assert_eq!(
            coordinates(&replay_order(read, 10)),
            [(1, 0), (0, 0), (0, 1)]
        );
        assert!(replay_order(Vec::new(), 5).is_empty());
    }
}
