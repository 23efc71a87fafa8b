//! `sluice lag`: per group, topic and partition — committed, end, lag, and whether the group
//! has members.

use crate::Failure;
use clap::Args;
use serde::Serialize;
use sluice_core::Settings;
use sluice_kafka::Admin;
use std::time::Duration;

/// Options of `sluice lag`.
#[derive(Debug, Args)]
pub struct LagArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
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
    let mut groups = Vec::new();
    for pipeline in &settings.pipelines {
        let partitions: Vec<PartitionLag> = admin
            .group_offsets(&pipeline.group, &pipeline.topic)?
            .iter()
            .map(|p| PartitionLag {
                partition: p.partition,
                committed: p.committed,
                end: p.high,
                lag: p.lag(),
            })
            .collect();
        groups.push(GroupLag {
            pipeline: pipeline.kind.name().to_owned(),
            group: pipeline.group.clone(),
            topic: pipeline.topic.clone(),
            members: admin.group_members(&pipeline.group)?,
            total_lag: partitions.iter().map(|p| p.lag).sum(),
            partitions,
        });
    }
    Ok(groups)
}

/// Entry point.
pub fn run(args: &LagArgs) -> Result<(), Failure> {
    let settings = super::settings()?;
    let admin = Admin::new(&settings.kafka, Duration::from_secs(15))?;
    let groups = collect(&settings, &admin)?;
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
