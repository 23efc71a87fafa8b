//! `sluice replay <pipeline> --to earliest|latest|<RFC 3339 time>`: move one pipeline's
//! group offsets. Prints the plan and changes nothing without `--execute`; refuses while
//! the group has active members (Kafka would reject the commit anyway, and a running
//! consumer would overwrite it); touches only that pipeline's group. Idempotent writes make
//! re-reading safe: a replay adds no rows and changes none (reviews keep the newest crawl).

use anyhow::anyhow;
use chrono::{DateTime, Utc};
use clap::Args;
use serde::Serialize;
use sluice_core::topics::Topics;
use sluice_kafka::Admin;
use sluice_process::Failure;
use std::time::Duration;

/// Options of `sluice replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The pipeline whose group is moved: a seed (app-stats, reviews, network-metrics) or
    /// a sink of the mapping file.
    pipeline: String,
    /// The mapping file (or folder) of declared sinks; default `SLUICE_SINKS_FILE`.
    #[arg(long = "sinks", value_name = "FILE|DIR")]
    sinks: Option<String>,
    /// Where to: `earliest`, `latest`, or an RFC 3339 time (the first record at or after it).
    #[arg(long, value_parser = parse_target)]
    to: Target,
    /// Apply the plan (without it, only print it).
    #[arg(long)]
    execute: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Where a replay moves the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The low watermark.
    Earliest,
    /// The high watermark.
    Latest,
    /// The first offset at or after a time.
    Time(DateTime<Utc>),
}

fn parse_target(s: &str) -> Result<Target, String> {
    match s {
        "earliest" => Ok(Target::Earliest),
        "latest" => Ok(Target::Latest),
        _ => DateTime::parse_from_rfc3339(s)
            .map(|t| Target::Time(t.with_timezone(&Utc)))
            .map_err(|e| {
                format!(
                    "expected earliest, latest or an RFC 3339 time like 2026-11-29T10:00:00Z ({e})"
                )
            }),
    }
}

#[derive(Debug, Serialize)]
struct Move {
    topic: String,
    partition: i32,
    /// Kafka's committed offset.
    current: Option<i64>,
    /// PostgreSQL's offset (the one that counts).
    postgres: Option<i64>,
    target: i64,
}

#[derive(Debug, Serialize)]
struct Plan {
    pipeline: String,
    group: String,
    topics: Vec<String>,
    to: String,
    executed: bool,
    partitions: Vec<Move>,
}

/// Entry point.
pub fn run(args: &ReplayArgs) -> Result<(), Failure> {
    let pipelines = super::pipelines::Pipelines::load(args.sinks.as_deref())?;
    let names = pipelines.names()?;
    let (name, topics, group) = find_pipeline(&names, &args.pipeline)?;
    let admin = Admin::new(&pipelines.settings.kafka, Duration::from_secs(15))?;
    let topics = admin.topics_of(topics)?;
    let database_url = pipelines.settings.database_url.clone();
    let stored = postgres_offsets(&database_url, group)?;
    let moves = plan_moves(&admin, group, &topics, args.to, &stored)?;
    let mut plan = Plan {
        pipeline: name.clone(),
        group: group.clone(),
        topics,
        to: target_label(args.to),
        executed: false,
        partitions: moves,
    };
    let members = admin.group_members(group)?;
    if args.execute {
        if members > 0 {
            return Err(anyhow!(
                "group {group} has {members} active member(s): stop the {name} pipeline first (replay refuses to move a live group)"
            )
            .into());
        }
        execute(&admin, &database_url, &plan)?;
        plan.executed = true;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
    } else {
        print_plan(&plan, members);
    }
    Ok(())
}

/// The pipeline named `pipeline` among those that run here: (name, topics, group).
fn find_pipeline<'a>(
    names: &'a [(String, Topics, String)],
    pipeline: &str,
) -> Result<&'a (String, Topics, String), Failure> {
    names
        .iter()
        .find(|(name, ..)| *name == pipeline)
        .ok_or_else(|| {
            Failure::config(anyhow!(
                "pipeline `{}` does not run in this environment (STORAGE_PIPELINES and the \
                 mapping file give: {})",
                pipeline,
                names
                    .iter()
                    .map(|(n, ..)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// The group's offsets stored in PostgreSQL, as (topic, partition, offset).
fn postgres_offsets(database_url: &str, group: &str) -> Result<Vec<(String, i32, i64)>, Failure> {
    let stored = sluice_process::runtime()?.block_on(async {
        let mut conn = sluice_postgres::connect(database_url, "replay").await?;
        sluice_postgres::offsets::of_group(&mut conn, group).await
    });
    let stored =
        stored.map_err(|e| anyhow!("cannot read the group's offsets in PostgreSQL: {e}"))?;
    Ok(stored)
}

/// Each partition's move: where Kafka and PostgreSQL have the group now, and the target.
fn plan_moves(
    admin: &Admin,
    group: &str,
    topics: &[String],
    to: Target,
    stored: &[(String, i32, i64)],
) -> Result<Vec<Move>, Failure> {
    let postgres_at = |topic: &str, partition: i32| {
        stored
            .iter()
            .find(|(t, p, _)| t == topic && *p == partition)
            .map(|(_, _, o)| *o)
    };
    let mut moves = Vec::new();
    for topic in topics {
        let offsets = admin.group_offsets(group, topic)?;
        let targets: Vec<(i32, i64)> = match to {
            Target::Earliest => offsets.iter().map(|p| (p.partition, p.low)).collect(),
            Target::Latest => offsets.iter().map(|p| (p.partition, p.high)).collect(),
            Target::Time(t) => admin.offsets_for_time(topic, t.timestamp_millis())?,
        };
        moves.extend(targets.iter().map(|(partition, target)| {
            Move {
                topic: topic.clone(),
                partition: *partition,
                current: offsets
                    .iter()
                    .find(|p| p.partition == *partition)
                    .and_then(|p| p.committed),
                postgres: postgres_at(topic, *partition),
                target: *target,
            }
        }));
    }
    Ok(moves)
}

/// The target in words: `earliest`, `latest` or the RFC 3339 time.
fn target_label(to: Target) -> String {
    match to {
        Target::Earliest => "earliest".into(),
        Target::Latest => "latest".into(),
        Target::Time(t) => t.to_rfc3339(),
    }
}

/// Applies the plan: PostgreSQL's offsets, then Kafka's committed offsets.
fn execute(admin: &Admin, database_url: &str, plan: &Plan) -> Result<(), Failure> {
    // PostgreSQL's copy first: it is the one the pipeline starts from, so a failure
    // between the two leaves a replay that takes effect, never half of one.
    let group = &plan.group;
    let offsets: Vec<(String, i32, i64)> = plan
        .partitions
        .iter()
        .map(|m| (m.topic.clone(), m.partition, m.target))
        .collect();
    sluice_process::runtime()?
        .block_on(async {
            let mut conn = sluice_postgres::connect(database_url, "replay").await?;
            sluice_postgres::offsets::set_offsets(&mut conn, group, &offsets).await
        })
        .map_err(|e| anyhow!("cannot move the group's offsets in PostgreSQL: {e}"))?;
    for topic in &plan.topics {
        let targets: Vec<(i32, i64)> = plan
            .partitions
            .iter()
            .filter(|m| m.topic == *topic)
            .map(|m| (m.partition, m.target))
            .collect();
        admin.commit_group_offsets(group, topic, &targets)?;
    }
    Ok(())
}

/// Prints the plan as text: one line per partition, then what was done (or would be).
fn print_plan(plan: &Plan, members: usize) {
    println!(
        "replay {} (group {}, topic {}) to {}:",
        plan.pipeline,
        plan.group,
        plan.topics.join(", "),
        plan.to
    );
    for m in &plan.partitions {
        let shown = |o: Option<i64>| o.map_or_else(|| "-".to_owned(), |c| c.to_string());
        let topic = if plan.topics.len() > 1 {
            format!("{} ", m.topic)
        } else {
            String::new()
        };
        println!(
            "  {topic}partition {:>3}: postgres {:>12}, kafka {:>12} -> {}",
            m.partition,
            shown(m.postgres),
            shown(m.current),
            m.target
        );
    }
    if plan.executed {
        println!(
            "done: offsets moved in PostgreSQL and committed in Kafka for group {}",
            plan.group
        );
    } else if members > 0 {
        println!(
            "dry run; note: the group has {members} active member(s) and --execute would be refused"
        );
    } else {
        println!("dry run: nothing changed; add --execute to apply");
    }
}
