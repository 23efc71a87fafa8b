//! `sluice lag`: per group, topic and partition — committed, end, lag, and whether the group
//! has members.

use clap::Args;
use serde::Serialize;
use sluice_core::Settings;
use sluice_core::sinks::Topics;
use sluice_kafka::Admin;
use sluice_process::Failure;
use std::time::Duration;

/// Options of `sluice lag`.
#[derive(Debug, Args)]
pub struct LagArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// The mapping file (or folder) of declared sinks; default `SLUICE_SINKS_FILE`.
    #[arg(long = "sinks", value_name = "FILE|DIR")]
    sinks: Option<String>,
}

/// Lag of one partition.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionLag {
    /// Partition.
    pub partition: i32,
    /// The group's committed offset (`None`: nothing committed yet).
    pub committed: Option<i64>,
    /// The end (high watermark) offset.
    pub end: i64,
    /// Records not yet committed by the group (from the low watermark when nothing is
    /// committed, as a new group with `earliest` would read them).
    pub lag: i64,
}

/// Lag of one pipeline's group.
#[derive(Debug, Clone, Serialize)]
pub struct GroupLag {
    /// Pipeline name.
    pub pipeline: String,
    /// Consumer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Active members of the group.
    pub members: usize,
    /// Sum over partitions.
    pub total_lag: i64,
    /// Per partition.
    pub partitions: Vec<PartitionLag>,
}

/// Lag of every configured pipeline's group.
pub fn collect(settings: &Settings, admin: &Admin) -> Result<Vec<GroupLag>, Failure> {
    let names: Vec<(String, Topics, String)> = settings
        .pipelines
        .iter()
        .map(|p| {
            (
                p.kind.name().to_owned(),
                Topics::one(p.topic.clone()),
                p.group.clone(),
            )
        })
        .collect();
    collect_named(&names, admin)
}

/// Lag of each (pipeline, topics, group): one entry per topic (a pattern's topics as the
/// cluster has them now).
pub fn collect_named(
    pipelines: &[(String, Topics, String)],
    admin: &Admin,
) -> Result<Vec<GroupLag>, Failure> {
    let mut groups = Vec::new();
    for (name, topics, group) in pipelines {
        for topic in admin.topics_of(topics)? {
            let partitions: Vec<PartitionLag> = admin
                .group_offsets(group, &topic)?
                .iter()
                .map(|p| PartitionLag {
                    partition: p.partition,
                    committed: p.committed,
                    end: p.high,
                    lag: p.lag(),
                })
                .collect();
            groups.push(GroupLag {
                pipeline: name.clone(),
                group: group.clone(),
                topic,
                members: admin.group_members(group)?,
                total_lag: partitions.iter().map(|p| p.lag).sum(),
                partitions,
            });
        }
    }
    Ok(groups)
}

/// Entry point.
pub fn run(args: &LagArgs) -> Result<(), Failure> {
    let pipelines = super::pipelines::Pipelines::load(args.sinks.as_deref())?;
    let admin = Admin::new(&pipelines.settings.kafka, Duration::from_secs(15))?;
    let groups = collect_named(&pipelines.names()?, &admin)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&groups)?);
        return Ok(());
    }
    println!(
        "{:<40} {:<24} {:>9} {:>12} {:>12} {:>10}  members",
        "group", "topic", "partition", "committed", "end", "lag"
    );
    for g in &groups {
        for p in &g.partitions {
            let committed = p
                .committed
                .map_or_else(|| "-".to_owned(), |c| c.to_string());
            println!(
                "{:<40} {:<24} {:>9} {:>12} {:>12} {:>10}  {}",
                g.group, g.topic, p.partition, committed, p.end, p.lag, g.members
            );
        }
    }
    Ok(())
}
