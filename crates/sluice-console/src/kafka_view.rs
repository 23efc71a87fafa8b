//! What Kafka and the file system say about each pipeline: lag per partition, the group's
//! members with their instance ids, and the heartbeat file's age; the retry tiers' backlog
//! and the `.dlt` topic's size. Every call here blocks (librdkafka's admin API), so the
//! pages run them on the blocking pool.

use crate::sources::{PipelineSource, RetrySource};
use serde::Serialize;
use sluice_kafka::{Admin, KafkaError};
use std::path::Path;
use std::time::SystemTime;

/// One partition's lag.
#[derive(Debug, Clone, Serialize)]
pub struct PartitionLag {
    /// Partition.
    pub partition: i32,
    /// The group's committed offset (`None`: nothing committed).
    pub committed: Option<i64>,
    /// The end offset.
    pub end: i64,
    /// Records not committed yet.
    pub lag: i64,
}

/// One topic of a pipeline.
#[derive(Debug, Clone, Serialize)]
pub struct TopicLag {
    /// Topic.
    pub topic: String,
    /// Per partition.
    pub partitions: Vec<PartitionLag>,
}

/// One member of the group.
#[derive(Debug, Clone, Serialize)]
pub struct Member {
    /// `group.instance.id`, for a static member.
    pub instance_id: Option<String>,
    /// `client.id`.
    pub client_id: String,
    /// Host.
    pub host: String,
}

/// What Kafka says about one pipeline (or why it could not say).
#[derive(Debug, Clone, Serialize, Default)]
pub struct PipelineKafka {
    /// Per topic.
    pub topics: Vec<TopicLag>,
    /// Sum over every partition.
    pub total_lag: i64,
    /// Committed offsets summed (for the rate sampler).
    pub committed: i64,
    /// The group's members.
    pub members: Vec<Member>,
    /// Kafka's error, when it could not be read.
    pub error: Option<String>,
}

/// Reads one pipeline's lag and members.
pub fn read_pipeline(admin: &Admin, pipeline: &PipelineSource) -> PipelineKafka {
    match try_read(admin, pipeline) {
        Ok(view) => view,
        Err(error) => PipelineKafka {
            error: Some(error.to_string()),
            ..PipelineKafka::default()
        },
    }
}

fn try_read(admin: &Admin, pipeline: &PipelineSource) -> Result<PipelineKafka, KafkaError> {
    let mut view = PipelineKafka::default();
    for topic in admin.topics_of(&pipeline.topics)? {
        let partitions: Vec<PartitionLag> = admin
            .group_offsets(&pipeline.group, &topic)?
            .iter()
            .map(|p| PartitionLag {
                partition: p.partition,
                committed: p.committed,
                end: p.high,
                lag: p.lag(),
            })
            .collect();
        view.total_lag += partitions.iter().map(|p| p.lag).sum::<i64>();
        view.committed += partitions.iter().filter_map(|p| p.committed).sum::<i64>();
        view.topics.push(TopicLag { topic, partitions });
    }
    view.members = admin
        .group_member_list(&pipeline.group)?
        .into_iter()
        .map(|m| Member {
            instance_id: m.instance_id().map(str::to_owned),
            client_id: m.client_id,
            host: m.host,
        })
        .collect();
    Ok(view)
}

/// Seconds since the pipeline's heartbeat file was written; `None` when this host cannot
/// see it (no directory configured, or no such file here).
pub fn heartbeat_age(dir: Option<&Path>, pipeline: &str) -> Option<f64> {
    let path = sluice_storage::heartbeat::path(dir?, pipeline);
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(
        SystemTime::now()
            .duration_since(modified)
            .map_or(0.0, |d| d.as_secs_f64()),
    )
}

/// One retry tier's backlog.
#[derive(Debug, Clone, Serialize)]
pub struct TierBacklog {
    /// Tier label (`30s`).
    pub tier: String,
    /// Its topic.
    pub topic: String,
    /// Its group.
    pub group: String,
    /// Records its group has not committed.
    pub waiting: i64,
}

/// The retry tiers and the dead-letter topic (`sluice retry status`, `sluice dlt`).
#[derive(Debug, Clone, Serialize, Default)]
pub struct RetryView {
    /// The main topic.
    pub topic: String,
    /// Per tier.
    pub tiers: Vec<TierBacklog>,
    /// The `.dlt` topic.
    pub dlt_topic: String,
    /// Records the `.dlt` topic retains (`None`: it does not exist).
    pub dlt_records: Option<i64>,
    /// Kafka's error, when it could not be read.
    pub error: Option<String>,
}

/// Reads the retry tiers' backlog and the `.dlt` topic's size.
pub fn read_retry(admin: &Admin, retry: &RetrySource) -> RetryView {
    let mut view = RetryView {
        topic: retry.topic.clone(),
        dlt_topic: sluice_retry::dlt_topic(&retry.topic),
        ..RetryView::default()
    };
    let read = || -> Result<(Vec<TierBacklog>, Option<i64>), KafkaError> {
        let mut tiers = Vec::new();
        for tier in retry.tiers.as_slice() {
            let topic = sluice_retry::retry_topic(&retry.topic, tier);
            let group = sluice_retry::tier_group(&retry.group, tier);
            let waiting = match admin.partition_count(&topic)? {
                Some(_) => admin
                    .group_offsets(&group, &topic)?
                    .iter()
                    .map(|p| p.lag())
                    .sum(),
                None => 0,
            };
            tiers.push(TierBacklog {
                tier: tier.label().to_owned(),
                topic,
                group,
                waiting,
            });
        }
        let dlt = match admin.partition_count(&view.dlt_topic)? {
            Some(_) => Some(
                admin
                    .watermarks(&view.dlt_topic)?
                    .iter()
                    .map(|p| p.records())
                    .sum(),
            ),
            None => None,
        };
        Ok((tiers, dlt))
    };
    match read() {
        Ok((tiers, dlt)) => {
            view.tiers = tiers;
            view.dlt_records = dlt;
        }
        Err(error) => view.error = Some(error.to_string()),
    }
    view
}
