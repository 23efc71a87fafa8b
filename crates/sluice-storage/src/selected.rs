//! The pipelines a process runs, whatever declared them: a built-in topic (its settings) or a
//! sink of a mapping file (its plan against the live schema). Everything past the sink — the
//! consumer, the batch loop, metrics, heartbeat, logs — knows a pipeline by its [`Identity`].

use crate::sink::DeclaredError;
use sluice_core::settings::{PipelineSettings, Settings};
use sluice_core::sinks::{Sink, SinkPlan};

/// A declared sink, validated against the schema it will write.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredPipeline {
    /// The sink as its file declares it.
    pub sink: Sink,
    /// Its plan against the live schema.
    pub plan: SinkPlan,
}

/// One pipeline to run.
#[derive(Debug, Clone, PartialEq)]
pub enum Pipeline {
    /// A built-in topic.
    Builtin(PipelineSettings),
    /// A sink of a mapping file.
    Declared(Box<DeclaredPipeline>),
}

/// What the batch loop, its logs and its metrics know of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Its name: metric labels, logs, the heartbeat file, the client id.
    pub name: String,
    /// The topic it consumes.
    pub topic: String,
    /// Its consumer group.
    pub group: String,
    /// Records per transaction.
    pub batch_size: usize,
    /// Writers (database connections); partition p goes to writer p % N.
    pub writers: usize,
    /// Where its topic's name comes from (for the error when the topic does not exist).
    pub topic_source: String,
    /// The dead-letter kind its unknown references count under in the metrics.
    pub unresolved_kind: String,
}

impl Pipeline {
    /// The pipelines of the built-in settings alone.
    pub fn builtins(settings: &Settings) -> Vec<Pipeline> {
        settings
            .pipelines
            .iter()
            .cloned()
            .map(Pipeline::Builtin)
            .collect()
    }

    /// Its name.
    pub fn name(&self) -> &str {
        match self {
            Self::Builtin(p) => p.kind.name(),
            Self::Declared(d) => &d.plan.name,
        }
    }

    /// Its identity (`settings` gives a declared sink its writer count).
    pub fn identity(&self, settings: &Settings) -> Identity {
        match self {
            Self::Builtin(p) => Identity {
                name: p.kind.name().to_owned(),
                topic: p.topic.clone(),
                group: p.group.clone(),
                batch_size: p.batch_size,
                writers: p.writers,
                topic_source: p.kind.topic_variable(),
                unresolved_kind: "unknown_application".to_owned(),
            },
            Self::Declared(d) => Identity {
                name: d.plan.name.clone(),
                topic: d.plan.topic.clone(),
                group: d.plan.group.clone(),
                batch_size: d.plan.batch_size,
                writers: settings.writers,
                topic_source: format!("the `topic` of sink `{}` in the mapping file", d.plan.name),
                unresolved_kind: d
                    .sink
                    .columns
                    .iter()
                    .find_map(|c| match &c.source {
                        sluice_core::sinks::Source::Lookup(l) => Some(l.unknown_kind.clone()),
                        _ => None,
                    })
                    .unwrap_or_else(|| "unknown_application".to_owned()),
            },
        }
    }
}

impl DeclaredPipeline {
    /// The runnable sink; `cache_ttl` for its lookups' caches.
    pub fn sink(
        &self,
        cache_ttl: std::time::Duration,
    ) -> Result<crate::sink::Declared, DeclaredError> {
        crate::sink::Declared::new(&self.sink, self.plan.clone(), cache_ttl)
    }
}
