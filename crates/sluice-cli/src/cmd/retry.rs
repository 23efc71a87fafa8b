//! `sluice retry status`: per retry tier of a topic, the records waiting (end offset minus
//! the tier group's committed offset, from the low watermark when nothing is committed) and
//! the oldest due time (the due header of each partition's first uncommitted record); then
//! the dead-letter topic's record count.

use crate::Failure;
use anyhow::anyhow;
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use serde::Serialize;
use sluice_core::KafkaClientSettings;
use sluice_kafka::Admin;
use sluice_retry::read::{Range, read_ranges};
use sluice_retry::{Tiers, dlt_topic, headers, retry_topic, tier_group};
use std::time::Duration;

/// `sluice retry …`.
#[derive(Debug, Subcommand)]
pub enum RetryAction {
    /// Per tier: records waiting and the oldest due time; the dead-letter topic's size.
    Status(StatusArgs),
}

/// Options of `retry status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The main topic whose tiers to show.
    #[arg(long, env = "MAILBOX_TOPIC")]
    pub topic: String,
    /// The main consumer's group (tier groups are `<group>.retry.<tier>`); required, there
    /// is no default group.
    #[arg(long, env = "MAILBOX_GROUP")]
    pub group: String,
    /// The tiers, e.g. 30s,2m,5m.
    #[arg(long, env = "MAILBOX_RETRY_TIERS", default_value = sluice_retry::DEFAULT_TIERS)]
    pub tiers: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// One tier's state.
#[derive(Debug, Serialize)]
struct TierStatus {
    tier: String,
    topic: String,
    group: String,
    /// Records not yet committed by the tier's group.
    waiting: i64,
    /// The earliest due time among the partitions' first uncommitted records.
    oldest_due: Option<DateTime<Utc>>,
}

/// The whole answer.
#[derive(Debug, Serialize)]
struct Status {
    topic: String,
    tiers: Vec<TierStatus>,
    dlt_topic: String,
    /// Records in the dead-letter topic (end minus low watermark, over its partitions).
    dlt_records: i64,
}

/// Entry point.
pub fn run(action: RetryAction) -> Result<(), Failure> {
    let kafka = super::kafka_settings()?;
    match action {
        RetryAction::Status(args) => status(&kafka, &args),
    }
}

fn status(kafka: &KafkaClientSettings, args: &StatusArgs) -> Result<(), Failure> {
    let tiers = Tiers::parse(&args.tiers)
        .map_err(|e| Failure::config(anyhow!("MAILBOX_RETRY_TIERS / --tiers: {e}")))?;
    let admin = Admin::new(kafka, Duration::from_secs(30))?;
    let mut out = Status {
        topic: args.topic.clone(),
        tiers: Vec::with_capacity(tiers.len()),
        dlt_topic: dlt_topic(&args.topic),
        dlt_records: 0,
    };
    for tier in tiers.as_slice() {
        let topic = retry_topic(&args.topic, tier);
        let group = tier_group(&args.group, tier);
        let (waiting, oldest_due) = if admin.partition_count(&topic)?.is_some() {
            waiting(kafka, &admin, &topic, &group)?
        } else {
            (0, None)
        };
        out.tiers.push(TierStatus {
            tier: tier.label().to_owned(),
            topic,
            group,
            waiting,
            oldest_due: oldest_due.and_then(DateTime::from_timestamp_millis),
        });
    }
    if admin.partition_count(&out.dlt_topic)?.is_some() {
        out.dlt_records = admin
            .watermarks(&out.dlt_topic)?
            .iter()
            .map(|m| m.high - m.low)
            .sum();
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "{:<8} {:>8}  {:<26} topic / group",
        "tier", "waiting", "oldest due"
    );
    let now = Utc::now();
    for tier in &out.tiers {
        let due = tier.oldest_due.map_or_else(
            || "-".to_owned(),
            |due| {
                let left = (due - now).num_milliseconds() as f64 / 1000.0;
                format!("{} ({left:+.1} s)", due.format("%H:%M:%S%.3f"))
            },
        );
        println!(
            "{:<8} {:>8}  {:<26} {} / {}",
            tier.tier, tier.waiting, due, tier.topic, tier.group
        );
    }
    println!(
        "{:<8} {:>8}  {:<26} {}",
        "dlt", out.dlt_records, "", out.dlt_topic
    );
    Ok(())
}

/// Records waiting in `topic` for `group`, and the earliest due time of each partition's
/// first uncommitted record.
fn waiting(
    kafka: &KafkaClientSettings,
    admin: &Admin,
    topic: &str,
    group: &str,
) -> Result<(i64, Option<i64>), Failure> {
    let marks = admin.watermarks(topic)?;
    let committed = admin.committed_offsets(group, topic)?;
    let mut ranges = Vec::with_capacity(marks.len());
    let mut total = 0;
    for mark in &marks {
        let done = committed
            .iter()
            .find(|(p, _)| *p == mark.partition)
            .and_then(|(_, o)| *o)
            .unwrap_or(mark.low)
            .max(mark.low);
        total += (mark.high - done).max(0);
        ranges.push(Range {
            partition: mark.partition,
            from: done,
            to: mark.high,
        });
    }
    let firsts = read_ranges(kafka, topic, &ranges, 1, Duration::from_secs(30))?;
    let oldest = firsts.iter().filter_map(headers::due_of).min();
    Ok((total, oldest))
}
