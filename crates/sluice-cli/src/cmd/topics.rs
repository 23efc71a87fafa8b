//! `sluice topics ensure`: the storage topics exist with the partitions, replication factor,
//! `min.insync.replicas` and retention of the `STORAGE_TOPIC_*` settings.

use crate::Failure;
use clap::Subcommand;
use sluice_kafka::admin::{Admin, TopicReport};
use std::time::Duration;

/// Partitions of the topics the demo and the benchmarks create (a count never shrinks).
pub const PARTITIONS: i32 = sluice_core::topic_settings::DEFAULT_PARTITIONS;

/// Topic actions.
#[derive(Debug, Subcommand)]
pub enum TopicsAction {
    /// Create the topics of the configured pipelines, or bring existing ones to the
    /// settings (grow partitions, set min.insync.replicas and retention); idempotent.
    Ensure,
}

/// Entry point.
pub fn run(action: TopicsAction) -> Result<(), Failure> {
    let TopicsAction::Ensure = action;
    let settings = super::settings()?;
    let admin = Admin::new(&settings.kafka, Duration::from_secs(30))?;
    let brokers = admin.broker_count()?;
    let plan = settings.topics.plan(brokers).map_err(Failure::config)?;
    if let Some(reduced) = &plan.reduced {
        println!("note: {reduced}");
    }
    super::runtime()?.block_on(async {
        for pipeline in &settings.pipelines {
            let report = admin.ensure_durable_topic(&pipeline.topic, &plan).await?;
            println!("{}: {}", pipeline.topic, describe(&report, &plan));
            if let Some(warning) = &report.replication_warning {
                println!("warning: {}: {warning}", pipeline.topic);
            }
        }
        Ok(())
    })
}

/// One line: what was created or changed.
fn describe(report: &TopicReport, plan: &sluice_core::TopicPlan) -> String {
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
