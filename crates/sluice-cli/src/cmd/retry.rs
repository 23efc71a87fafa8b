//! `sluice retry status`: per retry tier of a topic, the records waiting (end offset minus
//! the tier group's committed offset, from the low watermark when nothing is committed) and
//! the oldest due time (the due header of each partition's first uncommitted record); then
//! the dead-letter topic's record count.

use anyhow::anyhow;
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use serde::Serialize;
use sluice_core::KafkaClientSettings;
use sluice_core::settings::EnvReader;
use sluice_kafka::Admin;
use sluice_kafka::admin::{GroupOffsets, PartitionOffsets};
use sluice_process::Failure;
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
    /// The main topic whose tiers to show [default: MAILBOX_TOPIC].
    #[arg(long)]
    pub topic: Option<String>,
    /// The main consumer's group (tier groups are `<group>.retry.<tier>`) [default:
    /// MAILBOX_GROUP; required, there is no default group].
    #[arg(long)]
    pub group: Option<String>,
    /// The tiers, e.g. 30s,2m,5m [default: MAILBOX_RETRY_TIERS, else 30s,2m,5m].
    #[arg(long)]
    pub tiers: Option<String>,
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

/// The main topic: `flag`, else `MAILBOX_TOPIC` (required), read and checked as
/// the mailbox example reads it (empty is unset; an invalid name exits 2).
pub(super) fn main_topic(flag: Option<&str>) -> Result<String, Failure> {
    match flag {
        Some(topic) => Ok(topic.to_owned()),
        None => EnvReader::new(&sluice_process::env_lookup)
            .required_topic("MAILBOX_TOPIC", "the mailbox topic")
            .map_err(Failure::config),
    }
}

/// The main consumer's group: `flag`, else `MAILBOX_GROUP` (required: there is no default
/// group), checked as a group name (an invalid one exits 2 naming the variable).
pub(super) fn main_group(flag: Option<&str>) -> Result<String, Failure> {
    match flag {
        Some(group) => Ok(group.to_owned()),
        None => EnvReader::new(&sluice_process::env_lookup)
            .required_topic("MAILBOX_GROUP", "the business consumer's group")
            .map_err(Failure::config),
    }
}

/// The tiers: `flag`, else `MAILBOX_RETRY_TIERS`, else the default ones; exit 2 when they
/// do not parse.
pub(super) fn tiers(flag: Option<&str>) -> Result<Tiers, Failure> {
    let tiers = match flag {
        Some(tiers) => tiers.to_owned(),
        None => EnvReader::new(&sluice_process::env_lookup)
            .string("MAILBOX_RETRY_TIERS", sluice_retry::DEFAULT_TIERS),
    };
    Tiers::parse(&tiers).map_err(|e| Failure::config(anyhow!("MAILBOX_RETRY_TIERS / --tiers: {e}")))
}

/// Entry point.
pub fn run(action: RetryAction) -> Result<(), Failure> {
    let kafka = sluice_process::kafka_settings()?;
    match action {
        RetryAction::Status(args) => status(&kafka, &args),
    }
}

fn status(kafka: &KafkaClientSettings, args: &StatusArgs) -> Result<(), Failure> {
    let main = main_topic(args.topic.as_deref())?;
    let consumer_group = main_group(args.group.as_deref())?;
    let tiers = tiers(args.tiers.as_deref())?;
    let admin = Admin::new(kafka, Duration::from_secs(30))?;
    let mut out = Status {
        topic: main.clone(),
        tiers: Vec::with_capacity(tiers.len()),
        dlt_topic: dlt_topic(&main),
        dlt_records: 0,
    };
    for tier in tiers.as_slice() {
        let topic = retry_topic(&main, tier);
        let group = tier_group(&consumer_group, tier);
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
            .map(PartitionOffsets::records)
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
    let offsets = admin.group_offsets(group, topic)?;
    let total = offsets.iter().map(GroupOffsets::lag).sum();
    let ranges: Vec<Range> = offsets
        .iter()
        .map(|p| Range {
            partition: p.partition,
            from: p.next(),
            to: p.high,
        })
        .collect();
    let firsts = read_ranges(kafka, topic, &ranges, 1, Duration::from_secs(30))?;
    let oldest = firsts.iter().filter_map(headers::due_of).min();
    Ok((total, oldest))
}
