//! Which pipelines one process runs: the seed topics and the sinks of a mapping file.
//!
//! Without a mapping file, `STORAGE_PIPELINES` (default: every seed) decides, as always.
//! With one, every sink of the file runs, and a seed runs only if `STORAGE_PIPELINES`
//! names it explicitly — so `sluice run --sinks deploy/sinks/` runs the three seed mappings
//! *instead of* the compiled-in seeds. A name or a consumer group used twice is refused at start:
//! two pipelines in one group would split its partitions between two tables' writers.

use crate::settings::{PipelineSettings, StorageSettings};
use sluice_core::topics::Topics;
use sluice_sinks::Sink;

/// The consumer group's column (`dead_letter_events.consumer_group`) holds 255 characters.
const MAX_GROUP: usize = 255;
/// Kafka's limit on a group instance id (`<instance>-<pipeline>`).
const MAX_INSTANCE_ID: usize = 249;

/// The pipelines to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection<'a> {
    /// Seed pipelines (their mappings compiled in).
    pub seeds: Vec<&'a PipelineSettings>,
    /// Declared sinks, in file order.
    pub declared: Vec<&'a Sink>,
}

impl Selection<'_> {
    /// Every selected pipeline's (name, topics, group), seeds first.
    pub fn names(&self, group_prefix: &str) -> Vec<(String, Topics, String)> {
        let seeds = self.seeds.iter().map(|p| {
            (
                p.kind.name().to_owned(),
                Topics::one(p.topic.clone()),
                p.group.clone(),
            )
        });
        let declared = self
            .declared
            .iter()
            .map(|s| (s.name.clone(), s.topics.clone(), s.group(group_prefix)));
        seeds.chain(declared).collect()
    }
}

/// Why a selection cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectionError {
    /// A sink and a seed (or two files' sinks) share a name.
    #[error(
        "sink `{name}` of {file}: a seed pipeline of that name runs too (STORAGE_PIPELINES \
         names it); rename the sink, or leave `{name}` out of STORAGE_PIPELINES to run the \
         mapping instead of the seed"
    )]
    SameName {
        /// The mapping file.
        file: String,
        /// The name.
        name: String,
    },
    /// Two pipelines would join one consumer group.
    #[error(
        "sink `{sink}` of {file}: consumer group `{group}` is the group of pipeline `{other}` \
         too; two pipelines in one group would split its partitions (set the sink's `group`)"
    )]
    SameGroup {
        /// The mapping file.
        file: String,
        /// The sink.
        sink: String,
        /// The group.
        group: String,
        /// The pipeline already in it.
        other: String,
    },
    /// A name or group too long for Kafka or the dead-letter table.
    #[error("sink `{sink}` of {file}: {what} `{value}` is longer than {max} characters")]
    TooLong {
        /// The mapping file.
        file: String,
        /// The sink.
        sink: String,
        /// What is too long.
        what: &'static str,
        /// Its value.
        value: String,
        /// The limit.
        max: usize,
    },
}

impl SelectionError {
    /// The sink the error is about.
    pub fn sink(&self) -> &str {
        match self {
            Self::SameName { name, .. } => name,
            Self::SameGroup { sink, .. } | Self::TooLong { sink, .. } => sink,
        }
    }
}

/// The pipelines to run: `sinks` (from `file`, already checked) and the seeds of
/// `settings` — all of them when there are no sinks, else only when `seeds_named`
/// (`STORAGE_PIPELINES` was set). `group_prefix` derives a sink's default group.
pub fn select<'a>(
    settings: &'a StorageSettings,
    seeds_named: bool,
    group_prefix: &str,
    file: &str,
    sinks: &'a [Sink],
) -> Result<Selection<'a>, SelectionError> {
    let seeds: Vec<&PipelineSettings> = if sinks.is_empty() || seeds_named {
        settings.pipelines.iter().collect()
    } else {
        Vec::new()
    };
    let mut taken: Vec<(String, String)> = seeds
        .iter()
        .map(|p| (p.kind.name().to_owned(), p.group.clone()))
        .collect();
    for sink in sinks {
        let group = sink.group(group_prefix);
        if taken.iter().any(|(name, _)| *name == sink.name) {
            return Err(SelectionError::SameName {
                file: file.to_owned(),
                name: sink.name.clone(),
            });
        }
        if let Some((other, _)) = taken.iter().find(|(_, g)| *g == group) {
            return Err(SelectionError::SameGroup {
                file: file.to_owned(),
                sink: sink.name.clone(),
                group,
                other: other.clone(),
            });
        }
        let too_long = |what, value: String, max| SelectionError::TooLong {
            file: file.to_owned(),
            sink: sink.name.clone(),
            what,
            value,
            max,
        };
        if group.len() > MAX_GROUP {
            return Err(too_long("consumer group", group, MAX_GROUP));
        }
        if let Some(id) = &settings.instance_id {
            let instance = format!("{id}-{}", sink.name);
            if instance.len() > MAX_INSTANCE_ID {
                return Err(too_long("group instance id", instance, MAX_INSTANCE_ID));
            }
        }
        taken.push((sink.name.clone(), group));
    }
    Ok(Selection {
        seeds,
        declared: sinks.iter().collect(),
    })
}

#[cfg(test)]
mod tests;
