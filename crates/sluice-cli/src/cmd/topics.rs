//! `sluice topics ensure`: the storage topics exist with at least 3 partitions.

use crate::Failure;
use clap::Subcommand;
use sluice_kafka::admin::{Admin, TopicChange};
use std::time::Duration;

/// Partitions of every storage topic (a partition count can never shrink).
pub const PARTITIONS: i32 = 3;

/// Topic actions.
#[derive(Debug, Subcommand)]
pub enum TopicsAction {
    /// Create the topics of the configured pipelines (3 partitions); idempotent.
    Ensure,
}

/// Entry point.
pub fn run(action: TopicsAction) -> Result<(), Failure> {
    let TopicsAction::Ensure = action;
    let settings = super::settings()?;
    let admin = Admin::new(&settings.kafka, Duration::from_secs(30))?;
    super::runtime()?.block_on(async {
        for pipeline in &settings.pipelines {
            let change = admin.ensure_topic(&pipeline.topic, PARTITIONS).await?;
            let what = match change {
                TopicChange::Created(n) => format!("created with {n} partitions"),
                TopicChange::Unchanged(n) => format!("exists with {n} partitions"),
                TopicChange::Grown { from, to } => format!("grown from {from} to {to} partitions"),
            };
            println!("{}: {what}", pipeline.topic);
        }
        Ok(())
    })
}
