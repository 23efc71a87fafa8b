//! The seed topics as sinks: their mapping files (compiled in, `sluice_core::pipeline`) parsed,
//! and — as a process runs them — with the settings' topic, group, batch size and
//! applications table applied.

use super::file::parse_sinks;
use super::model::{Sink, Source};
use super::problems::MappingError;
use sluice_core::pipeline::PipelineKind;
use sluice_core::settings::PipelineSettings;
use sluice_core::topics::Topics;

/// The applications table the seed mappings name; `STORAGE_APPLICATIONS_TABLE` replaces it.
pub const SEED_APPLICATIONS_TABLE: &str = "apps_registry_application";

/// The seed's sink as its mapping file declares it.
pub fn seed_sink(kind: PipelineKind) -> Result<Sink, MappingError> {
    let file = format!("deploy/sinks/{}.toml (compiled in)", kind.name());
    let mut sinks = parse_sinks(&file, kind.mapping())?;
    match sinks.pop() {
        Some(sink) if sinks.is_empty() => Ok(sink),
        _ => Err(MappingError::Read {
            file,
            message: "a seed mapping file must declare exactly one sink".into(),
        }),
    }
}

/// The seed's sink as this process runs it: the mapping file with the `pipeline` settings'
/// topic, group and batch size, and its lookups in `applications_table`.
pub fn running_seed_sink(
    pipeline: &PipelineSettings,
    applications_table: &str,
) -> Result<Sink, MappingError> {
    let mut sink = seed_sink(pipeline.kind)?;
    sink.topics = Topics::one(pipeline.topic.clone());
    sink.group = Some(pipeline.group.clone());
    sink.batch_size = pipeline.batch_size;
    for column in &mut sink.columns {
        if let Source::Lookup(lookup) = &mut column.source
            && lookup.table == SEED_APPLICATIONS_TABLE
        {
            applications_table.clone_into(&mut lookup.table);
        }
    }
    Ok(sink)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_files_agree_with_their_kinds() {
        for kind in PipelineKind::ALL {
            let sink = seed_sink(kind).unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(sink.name, kind.name());
            assert_eq!(sink.topics, Topics::one(kind.default_topic()));
            assert_eq!(sink.table, kind.table());
            assert_eq!(sink.batch_size, kind.default_batch_size());
            assert_eq!(
                sink.group, None,
                "{kind}: the group comes from STORAGE_GROUP_PREFIX"
            );
            assert_eq!(
                kind.env_suffix(),
                kind.name().to_ascii_uppercase().replace('-', "_")
            );
        }
    }

    #[test]
    fn a_process_runs_a_seed_with_its_settings() {
        let settings = PipelineSettings {
            kind: PipelineKind::Reviews,
            topic: "crawl.reviews".into(),
            group: "g.reviews".into(),
            batch_size: 1000,
            writers: 2,
        };
        let sink = running_seed_sink(&settings, "registry.apps").unwrap();
        assert_eq!(
            (sink.topics.named(), sink.group.as_deref(), sink.batch_size),
            (&["crawl.reviews".to_owned()][..], Some("g.reviews"), 1000)
        );
        let tables: Vec<&str> = sink
            .columns
            .iter()
            .filter_map(|c| match &c.source {
                Source::Lookup(lookup) => Some(lookup.table.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(tables, ["registry.apps"]);
    }
}
