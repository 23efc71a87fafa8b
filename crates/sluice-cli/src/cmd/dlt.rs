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
//! record is printed with its control characters escaped.

use crate::Failure;
use anyhow::anyhow;
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use serde::Serialize;
use sluice_core::KafkaClientSettings;
use sluice_core::untrusted::{escape_controls, escape_json_text};
use sluice_kafka::producer::Outgoing;
use sluice_kafka::{Admin, REPLAY_COUNT_HEADER, ResilientProducer};
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
    /// The main topic (its dead-letter topic is `<topic>.dlt`).
    #[arg(long, env = "MAILBOX_TOPIC")]
    topic: String,
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
    /// The main topic.
    #[arg(long, env = "MAILBOX_TOPIC")]
    topic: String,
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
    /// The main topic.
    #[arg(long, env = "MAILBOX_TOPIC")]
    topic: String,
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

/// Bytes as printed: UTF-8 text, or hex when they are not valid UTF-8.
#[derive(Debug, Serialize)]
#[serde(tag = "encoding", content = "data", rename_all = "lowercase")]
enum Payload {
    Utf8(String),
    Hex(String),
}

impl Payload {
    fn of(bytes: &[u8]) -> Self {
        match std::str::from_utf8(bytes) {
            Ok(text) => Payload::Utf8(text.to_owned()),
            Err(_) => Payload::Hex(bytes.iter().map(|b| format!("{b:02x}")).collect()),
        }
    }

    fn text(&self) -> String {
        match self {
            Payload::Utf8(text) => escape_controls(text).into_owned(),
            Payload::Hex(hex) => format!("(hex) {hex}"),
        }
    }
}

fn replay_count(record: &OwnedRecord) -> i32 {
    let values = record
        .headers
        .iter()
        .filter(|(k, _)| k == REPLAY_COUNT_HEADER)
        .map(|(_, v)| v.as_deref());
    sluice_core::dead_letter::parse_replay_count(values)
}

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
    let kafka = super::kafka_settings()?;
    match action {
        DltAction::List(args) => list(&kafka, &args),
        DltAction::Show(args) => show(&kafka, &args),
        DltAction::Replay(args) => super::runtime()?.block_on(replay(&kafka, &args)),
    }
}

fn admin(kafka: &KafkaClientSettings) -> Result<Admin, Failure> {
    Ok(Admin::new(kafka, Duration::from_secs(30))?)
}

/// One partition of `<topic>.dlt`: its watermarks and where the replay group stands.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    partition: i32,
    low: i64,
    high: i64,
    /// The replay group's next offset (`None`: nothing replayed yet).
    next: Option<i64>,
}

/// Per partition of `<topic>.dlt`: its cursor.
fn cursors(admin: &Admin, topic: &str) -> Result<Vec<Cursor>, Failure> {
    let dlt = dlt_topic(topic);
    if admin.partition_count(&dlt)?.is_none() {
        return Err(anyhow!("topic {dlt} does not exist").into());
    }
    let committed = admin.committed_offsets(&replay_group(topic), &dlt)?;
    Ok(admin
        .watermarks(&dlt)?
        .iter()
        .map(|m| {
            let next = committed
                .iter()
                .find(|(p, _)| *p == m.partition)
                .and_then(|(_, o)| *o);
            Cursor {
                partition: m.partition,
                low: m.low,
                high: m.high,
                next,
            }
        })
        .collect())
}

fn list(kafka: &KafkaClientSettings, args: &ListArgs) -> Result<(), Failure> {
    let cursors = cursors(&admin(kafka)?, &args.topic)?;
    let ranges: Vec<Range> = cursors
        .iter()
        .map(|c| Range {
            partition: c.partition,
            from: c.low,
            to: c.high,
        })
        .collect();
    let dlt = dlt_topic(&args.topic);
    let records = read_ranges(
        kafka,
        &dlt,
        &ranges,
        args.limit.max(1),
        Duration::from_secs(30),
    )?;
    let rows: Vec<Shown> = records
        .iter()
        .map(|r| {
            let next = cursors
                .iter()
                .find(|c| c.partition == r.partition)
                .and_then(|c| c.next);
            shown(r, next)
        })
        .collect();
    if args.json {
        return print_json(&rows);
    }
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

fn show(kafka: &KafkaClientSettings, args: &ShowArgs) -> Result<(), Failure> {
    let cursors = cursors(&admin(kafka)?, &args.topic)?;
    let Some(&Cursor {
        low, high, next, ..
    }) = cursors.iter().find(|c| c.partition == args.partition)
    else {
        return Err(anyhow!(
            "{} has no partition {}",
            dlt_topic(&args.topic),
            args.partition
        )
        .into());
    };
    if args.offset < low || args.offset >= high {
        return Err(anyhow!(
            "no record at {}[{}]@{} (offsets {low}..{high})",
            dlt_topic(&args.topic),
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
    let records = read_ranges(
        kafka,
        &dlt_topic(&args.topic),
        &[range],
        1,
        Duration::from_secs(30),
    )?;
    let record = records
        .first()
        .ok_or_else(|| anyhow!("the record at offset {} was not read", args.offset))?;
    let s = shown(record, next);
    if args.json {
        return print_json(&s);
    }
    println!(
        "record:        {}[{}]@{}",
        dlt_topic(&args.topic),
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
    println!("headers:");
    for (name, value) in &s.headers {
        println!(
            "  {}: {}",
            escape_controls(name),
            value
                .as_ref()
                .map_or_else(|| "(null)".to_owned(), Payload::text)
        );
    }
    for (label, value) in [("key", &s.key), ("payload", &s.payload)] {
        match value {
            None => println!("{label}: (null)"),
            Some(Payload::Utf8(text)) => println!("{label} (utf-8):\n{}", escape_controls(text)),
            Some(Payload::Hex(hex)) => println!("{label} (hex, not valid UTF-8):\n{hex}"),
        }
    }
    Ok(())
}

/// Prints a value as pretty JSON with no raw control character.
fn print_json<T: Serialize>(value: &T) -> Result<(), Failure> {
    let json = serde_json::to_string_pretty(value)?;
    println!("{}", escape_json_text(&json));
    Ok(())
}

/// Why a record cannot be replayed, if it cannot.
fn refusal(record: &OwnedRecord, max_replays: i32) -> Option<String> {
    let count = replay_count(record);
    if count >= max_replays {
        Some(format!(
            "already replayed {count} time(s) (limit {max_replays})"
        ))
    } else if record.payload.is_none() {
        Some("tombstone: there is no payload to replay".into())
    } else if record.header_str(headers::ORIGINAL_TOPIC).is_none() {
        Some(format!(
            "no {} header: the original topic is unknown",
            headers::ORIGINAL_TOPIC
        ))
    } else {
        None
    }
}

#[derive(Debug, Serialize)]
struct ReplayLine {
    record: String,
    original: String,
    action: String,
}

async fn replay(kafka: &KafkaClientSettings, args: &ReplayArgs) -> Result<(), Failure> {
    let admin = admin(kafka)?;
    let dlt = dlt_topic(&args.topic);
    let group = replay_group(&args.topic);
    let cursors = cursors(&admin, &args.topic)?;
    let ranges: Vec<Range> = cursors
        .iter()
        .map(|c| Range {
            partition: c.partition,
            from: c.next.unwrap_or(c.low).max(c.low),
            to: c.high,
        })
        .collect();
    let mut records = read_ranges(
        kafka,
        &dlt,
        &ranges,
        args.limit.max(1),
        Duration::from_secs(30),
    )?;
    // Oldest first over all partitions, then the limit in all.
    records.sort_by_key(|r| (r.timestamp_ms, r.partition, r.offset));
    records.truncate(args.limit.max(1));
    let producer = if args.execute {
        Some(ResilientProducer::new(kafka, "sluice-dlt-replay")?)
    } else {
        None
    };
    let mut lines = Vec::with_capacity(records.len());
    let mut refused = 0usize;
    for record in &records {
        let original = record
            .header_str(headers::ORIGINAL_TOPIC)
            .unwrap_or("-")
            .to_owned();
        let count = replay_count(record);
        let action = match (refusal(record, args.max_replays), &producer) {
            (Some(why), _) => {
                refused += 1;
                format!("refused: {why}")
            }
            (None, None) => format!("would re-publish to {original} (replay {})", count + 1),
            (None, Some(producer)) => {
                let count = (count + 1).to_string();
                let mut kept: Vec<(&str, &[u8])> = record
                    .headers
                    .iter()
                    .filter(|(k, _)| !k.starts_with(headers::PREFIX) && k != REPLAY_COUNT_HEADER)
                    .map(|(k, v)| (k.as_str(), v.as_deref().unwrap_or_default()))
                    .collect();
                kept.push((REPLAY_COUNT_HEADER, count.as_bytes()));
                let delivered = producer
                    .send(Outgoing {
                        topic: &original,
                        key: record.key.as_deref(),
                        payload: record.payload.as_deref().unwrap_or_default(),
                        partition: None,
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
        lines.push(ReplayLine {
            record: format!("{dlt}[{}]@{}", record.partition, record.offset),
            original,
            action,
        });
    }
    if args.json {
        print_json(&lines)?;
    } else {
        for line in &lines {
            println!(
                "{:<40} {}",
                escape_controls(&line.record),
                escape_controls(&line.action)
            );
        }
        if lines.is_empty() {
            println!("nothing to replay in {dlt}");
        }
        if !args.execute {
            println!("dry run: nothing published; add --execute");
        }
    }
    if refused > 0 && refused == records.len() {
        return Err(anyhow!("every chosen record was refused").into());
    }
    Ok(())
}
