//! The pipelines a process runs: every one is a sink — a seed's mapping compiled into the
//! binary or a sink of a user's mapping file — planned against the live schema. Everything
//! past the sink (the consumer, the batch loop, metrics, heartbeat, logs) knows a pipeline by
//! its [`Identity`].

use crate::sink::{Declared, DeclaredError};
use sluice_core::settings::{PipelineSettings, Settings};
use sluice_sinks::{MappingError, Sink, SinkError, SinkPlan, Source, Topics, plan_sink};
use sqlx::PgConnection;
use std::time::Duration;

/// A sink to plan: its mapping with the environment's overrides applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Unplanned {
    /// The sink (topic, group and batch size already the effective ones).
    pub sink: Sink,
    /// Writers (database connections); each partition has one writer ([`crate::lanes`]).
    pub writers: usize,
    /// Where its topic's name comes from (for the error when the topic does not exist).
    pub topic_source: String,
}

impl Unplanned {
    /// A seed pipeline of the settings (`STORAGE_PIPELINES`): its mapping with
    /// `STORAGE_TOPIC_<P>`, `STORAGE_MAX_POLL_RECORDS[_<P>]`, `STORAGE_WRITERS[_<P>]`, the group
    /// prefix and `STORAGE_APPLICATIONS_TABLE` applied.
    pub fn seed(pipeline: &PipelineSettings, settings: &Settings) -> Result<Self, MappingError> {
        Ok(Self {
            sink: sluice_sinks::running_seed_sink(pipeline, &settings.applications_table)?,
            writers: pipeline.writers,
            topic_source: pipeline.kind.topic_variable(),
        })
    }

    /// Every seed pipeline of the settings.
    pub fn seeds(settings: &Settings) -> Result<Vec<Self>, MappingError> {
        settings
            .pipelines
            .iter()
            .map(|p| Self::seed(p, settings))
            .collect()
    }

    /// A sink of a user's mapping file, with `STORAGE_WRITERS`'s writers.
    pub fn declared(sink: Sink, settings: &Settings) -> Self {
        let topic_source = format!("the `topic` of sink `{}` in the mapping file", sink.name);
        Self {
            sink,
            writers: settings.writers,
            topic_source,
        }
    }
}

/// One pipeline to run: a sink and its plan against the live schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// The sink as its mapping declares it (with the environment's overrides).
    pub sink: Sink,
    /// Its plan against the live schema.
    pub plan: SinkPlan,
    /// Writers (database connections).
    pub writers: usize,
    /// Where its topic's name comes from.
    pub topic_source: String,
}

/// What the batch loop, its logs and its metrics know of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Its name: metric labels, logs, the heartbeat file, the client id.
    pub name: String,
    /// The topics it consumes.
    pub topics: Topics,
    /// Its consumer group.
    pub group: String,
    /// Records per transaction.
    pub batch_size: usize,
    /// Bytes of records per transaction (a larger record is a transaction of its own).
    pub batch_bytes: usize,
    /// Writers (database connections); each partition has one writer ([`crate::lanes`]).
    pub writers: usize,
    /// Where its topic's name comes from (for the error when the topic does not exist).
    pub topic_source: String,
    /// The dead-letter kind its unknown references count under in the metrics.
    pub unresolved_kind: String,
}

impl Pipeline {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.plan.name
    }

    /// Its identity.
    pub fn identity(&self) -> Identity {
        Identity {
            name: self.plan.name.clone(),
            topics: self.plan.topics.clone(),
            group: self.plan.group.clone(),
            batch_size: self.plan.batch_size,
            batch_bytes: self.plan.batch_bytes,
            writers: self.writers,
            topic_source: self.topic_source.clone(),
            unresolved_kind: self
                .sink
                .columns
                .iter()
                .find_map(|c| match &c.source {
                    Source::Lookup(l) => Some(l.unknown_kind.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| "unknown_application".to_owned()),
        }
    }

    /// The runnable sink; `cache_ttl` for its lookups' caches.
    pub fn sink(&self, cache_ttl: Duration) -> Result<Declared, DeclaredError> {
        Declared::new(&self.sink, self.plan.clone(), cache_ttl)
    }
}

/// Each sink planned against the live schema (`conn`'s catalog) and every statement it will
/// run prepared there, so that no SQL error can first appear at run time: the pipelines, or
/// every error of every sink.
pub async fn plan_pipelines(
    conn: &mut PgConnection,
    sinks: Vec<Unplanned>,
    group_prefix: &str,
) -> Result<Result<Vec<Pipeline>, Vec<SinkError>>, sqlx::Error> {
    let declared: Vec<Sink> = sinks.iter().map(|u| u.sink.clone()).collect();
    let shapes = sluice_postgres::catalog::sink_tables(conn, &declared).await?;
    let mut pipelines = Vec::with_capacity(sinks.len());
    let mut errors: Vec<SinkError> = Vec::new();
    for unplanned in sinks {
        match plan_sink(&unplanned.sink, group_prefix, &shapes) {
            Ok(plan) => pipelines.push(Pipeline {
                sink: unplanned.sink,
                plan,
                writers: unplanned.writers,
                topic_source: unplanned.topic_source,
            }),
            Err(mut more) => errors.append(&mut more),
        }
    }
    if !errors.is_empty() {
        return Ok(Err(errors));
    }
    for pipeline in &pipelines {
        let refused =
            sluice_postgres::declared::prepare_sink(conn, &pipeline.sink, &pipeline.plan).await?;
        errors.extend(refused);
    }
    Ok(if errors.is_empty() {
        Ok(pipelines)
    } else {
        Err(errors)
    })
}
