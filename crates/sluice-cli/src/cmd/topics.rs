//! `sluice topics ensure`: the storage topics exist with the partitions, replication factor,
//! `min.insync.replicas` and retention of the `STORAGE_TOPIC_*` settings (each topic may have
//! its own); `sluice topics describe`: what the cluster says about a topic.

use super::pipelines::Pipelines;
use clap::{Args, Subcommand};
use sluice_core::TopicPlan;
use sluice_core::settings::topics::ExistingTopic;
use sluice_core::topics::Topics;
use sluice_kafka::admin::{Admin, TopicDetail, TopicReport};
use sluice_process::Failure;
use std::time::Duration;

/// Partitions of the topics the demo and the benchmarks create (a count never shrinks).
pub const PARTITIONS: i32 = sluice_core::settings::topics::DEFAULT_PARTITIONS;

/// Topic actions.
#[derive(Debug, Subcommand)]
pub enum TopicsAction {
    /// Create the topics of the pipelines `sluice run` would run (a mapping file's sinks, the
    /// seed pipelines without one or when STORAGE_PIPELINES names them), or bring existing
    /// ones to the settings (grow partitions, set min.insync.replicas and retention);
    /// idempotent. A seed pipeline's topic may have its own values
    /// (`STORAGE_TOPIC_<SETTING>_<PIPELINE>`), also when a mapping file runs it; another sink's
    /// topics take the shared ones, and a sink's
    /// `topic_pattern` names no topic to create. A partition count set below a topic's, or a
    /// replication factor set to another value than a topic's, is refused before anything
    /// changes (exit 1).
    Ensure(EnsureArgs),
    /// Partitions (leader, replicas, in-sync replicas) and the configs that matter
    /// (retention.ms, min.insync.replicas, cleanup.policy, unclean.leader.election.enable).
    /// Exit 1 when a topic does not exist.
    Describe(DescribeArgs),
}

/// `sluice topics ensure` arguments.
#[derive(Debug, Args)]
pub struct EnsureArgs {
    /// A mapping file of declared sinks, or a folder of them; default `SLUICE_SINKS_FILE`.
    #[arg(long = "sinks", value_name = "FILE|DIR")]
    pub sinks: Option<String>,
}

/// `sluice topics describe` arguments.
#[derive(Debug, Args)]
pub struct DescribeArgs {
    /// Topics to describe (default: the topics of the pipelines `sluice run` would run).
    pub topics: Vec<String>,
    /// A mapping file of declared sinks, or a folder of them; default `SLUICE_SINKS_FILE`.
    #[arg(long = "sinks", value_name = "FILE|DIR")]
    pub sinks: Option<String>,
    /// One JSON document instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// Entry point.
pub fn run(action: TopicsAction) -> Result<(), Failure> {
    match action {
        TopicsAction::Ensure(args) => ensure(&args),
        TopicsAction::Describe(args) => describe_topics(&args),
    }
}

fn ensure(args: &EnsureArgs) -> Result<(), Failure> {
    let pipelines = Pipelines::load(args.sinks.as_deref())?;
    let settings = &pipelines.settings;
    let selection = pipelines.selection()?;
    let admin = Admin::new(&settings.kafka, Duration::from_secs(30))?;
    let brokers = admin.broker_count()?;
    let mut plans: Vec<(&str, TopicPlan)> = Vec::new();
    for seed in &selection.seeds {
        let plan = settings
            .topics
            .plan_for(seed.kind, brokers)
            .map_err(Failure::config)?;
        add_plan(&mut plans, seed.topic.as_str(), plan);
    }
    for sink in &selection.declared {
        if let Topics::Pattern(pattern) = &sink.topics {
            println!(
                "note: sink {}: topic_pattern {pattern} names no topic to create",
                sink.name
            );
        }
        for topic in sink.topics.named() {
            // A seed pipeline's topic run from a mapping file (`deploy/sinks/`) keeps the
            // pipeline's own values (`STORAGE_TOPIC_<SETTING>_<PIPELINE>`).
            let seed = settings.pipelines.iter().find(|p| p.topic == *topic);
            let plan = match seed {
                Some(seed) => settings.topics.plan_for(seed.kind, brokers),
                None => settings.topics.plan_for_sink(brokers),
            }
            .map_err(Failure::config)?;
            add_plan(&mut plans, topic.as_str(), plan);
        }
    }
    sluice_process::runtime()?.block_on(async {
        // Every refusal is found before anything changes.
        let mut refused = Vec::new();
        for (topic, plan) in &plans {
            let Some(state) = admin.describe_topic(topic).await? else {
                continue;
            };
            let existing = ExistingTopic {
                partitions: state.partitions,
                replication_factor: state.replication_factor,
            };
            if let Some(reason) = plan.refusal(existing) {
                println!("{topic}: refused: {reason}");
                refused.push(*topic);
            }
        }
        if !refused.is_empty() {
            return Err(Failure::from(anyhow::anyhow!(
                "topics ensure refused {} (nothing was changed): {}",
                if refused.len() == 1 {
                    "a topic"
                } else {
                    "topics"
                },
                refused.join(", ")
            )));
        }
        for (topic, plan) in &plans {
            let report = admin.ensure_durable_topic(topic, plan).await?;
            println!("{topic}: {}", describe(&report, plan));
            if let Some(warning) = &report.replication_warning {
                println!("warning: {topic}: {warning}");
            }
        }
        Ok(())
    })
}

/// Adds a topic's plan once; a reduced replication factor is noted once.
fn add_plan<'a>(plans: &mut Vec<(&'a str, TopicPlan)>, topic: &'a str, plan: TopicPlan) {
    if let Some(reduced) = &plan.reduced
        && !plans.iter().any(|(_, p)| p.reduced == plan.reduced)
    {
        println!("note: {reduced}");
    }
    if !plans.iter().any(|(t, _)| *t == topic) {
        plans.push((topic, plan));
    }
}

fn describe_topics(args: &DescribeArgs) -> Result<(), Failure> {
    let (kafka, topics) = if args.topics.is_empty() {
        let pipelines = Pipelines::load(args.sinks.as_deref())?;
        let topics = pipelines.needs()?.topics;
        (pipelines.settings.kafka, topics)
    } else {
        (sluice_process::kafka_settings()?, args.topics.clone())
    };
    let admin = Admin::new(&kafka, Duration::from_secs(30))?;
    let described = sluice_process::runtime()?.block_on(async {
        let mut described = Vec::with_capacity(topics.len());
        for topic in &topics {
            described.push((topic.as_str(), admin.describe_topic_detail(topic).await?));
        }
        Ok::<_, Failure>(described)
    })?;
    if args.json {
        let json: Vec<serde_json::Value> = described
            .iter()
            .map(|(topic, detail)| topic_json(topic, detail.as_ref()))
            .collect();
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        for (i, (topic, detail)) in described.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print!("{}", topic_table(topic, detail.as_ref()));
        }
    }
    let missing: Vec<&str> = described
        .iter()
        .filter(|(_, d)| d.is_none())
        .map(|(t, _)| *t)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(anyhow::anyhow!("no such topic: {}", missing.join(", ")).into())
    }
}

fn ids(list: &[i32]) -> String {
    list.iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The human form: a header line, the configs, one row per partition.
fn topic_table(topic: &str, detail: Option<&TopicDetail>) -> String {
    use std::fmt::Write as _;
    let Some(detail) = detail else {
        return format!("{topic}: does not exist\n");
    };
    let mut out = format!(
        "{topic}: {} partitions, replication factor {}, {} under-replicated\n",
        detail.partitions.len(),
        detail.replication_factor(),
        detail.under_replicated()
    );
    for config in &detail.configs {
        let _ = writeln!(
            out,
            "  {:<32} {:<14} ({})",
            config.name,
            config.value.as_deref().unwrap_or("?"),
            config.source
        );
    }
    let _ = writeln!(
        out,
        "  {:>9}  {:>6}  {:<12}  isr",
        "partition", "leader", "replicas"
    );
    for p in &detail.partitions {
        let leader = p
            .leader
            .map_or_else(|| "none".to_owned(), |l| l.to_string());
        let _ = writeln!(
            out,
            "  {:>9}  {:>6}  {:<12}  {}",
            p.partition,
            leader,
            ids(&p.replicas),
            ids(&p.isr)
        );
    }
    out
}

/// The JSON form of one topic.
fn topic_json(topic: &str, detail: Option<&TopicDetail>) -> serde_json::Value {
    let Some(detail) = detail else {
        return serde_json::json!({ "topic": topic, "exists": false });
    };
    let configs: serde_json::Map<String, serde_json::Value> = detail
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_owned(),
                serde_json::json!({ "value": c.value, "source": c.source }),
            )
        })
        .collect();
    serde_json::json!({
        "topic": topic,
        "exists": true,
        "partition_count": detail.partitions.len(),
        "replication_factor": detail.replication_factor(),
        "under_replicated_partitions": detail.under_replicated(),
        "configs": configs,
        "partitions": detail.partitions.iter().map(|p| serde_json::json!({
            "partition": p.partition,
            "leader": p.leader,
            "replicas": p.replicas,
            "isr": p.isr,
        })).collect::<Vec<_>>(),
    })
}

/// One line: what was created or changed.
fn describe(report: &TopicReport, plan: &TopicPlan) -> String {
    let retention = plan
        .retention_ms
        .map(|ms| format!(", retention.ms {ms}"))
        .unwrap_or_default();
    if report.created {
        return format!(
            "created with {} partitions, replication factor {}, min.insync.replicas {}{retention}",
            report.partitions, report.replication_factor, plan.min_insync_replicas
        );
    }
    let mut changes = Vec::new();
    if report.partitions != report.partitions_before {
        changes.push(format!(
            "partitions grown from {} to {}",
            report.partitions_before, report.partitions
        ));
    }
    for change in &report.changed {
        changes.push(format!(
            "{} {} -> {}",
            change.name,
            change.from.as_deref().unwrap_or("(unset)"),
            change.to
        ));
    }
    let state = format!(
        "exists with {} partitions, replication factor {}",
        report.partitions, report.replication_factor
    );
    if changes.is_empty() {
        format!("{state}; unchanged")
    } else {
        format!("{state}; {}", changes.join(", "))
    }
}
