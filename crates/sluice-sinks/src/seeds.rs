//! The seed topics as sinks: their mapping files (compiled in, `sluice_core::pipeline`)
//! parsed, and pointed at the applications table a deployment names.

use super::file::parse_sinks;
use super::model::{Sink, Source};
use super::problems::MappingError;
use sluice_core::pipeline::PipelineKind;

/// The applications table the seed mappings name; `STORAGE_APPLICATIONS_TABLE` replaces it.
pub const SEED_APPLICATIONS_TABLE: &str = "apps_registry_application";

/// The seed's mapping file as shipped (`deploy/sinks/<name>.toml`), compiled in.
pub fn seed_mapping(kind: PipelineKind) -> &'static str {
    match kind {
        PipelineKind::AppStats => include_str!("../../../deploy/sinks/app-stats.toml"),
        PipelineKind::Reviews => include_str!("../../../deploy/sinks/reviews.toml"),
        PipelineKind::NetworkMetrics => include_str!("../../../deploy/sinks/network-metrics.toml"),
    }
}

/// The seed's sink as its mapping file declares it.
pub fn seed_sink(kind: PipelineKind) -> Result<Sink, MappingError> {
    let file = format!("deploy/sinks/{}.toml (compiled in)", kind.name());
    let mut sinks = parse_sinks(&file, seed_mapping(kind))?;
    match sinks.pop() {
        Some(sink) if sinks.is_empty() => Ok(sink),
        _ => Err(MappingError::Read {
            file,
            message: "a seed mapping file must declare exactly one sink".into(),
        }),
    }
}

/// Points the seed `sink`'s lookups in [`SEED_APPLICATIONS_TABLE`] at `applications_table`
/// (`STORAGE_APPLICATIONS_TABLE`).
pub fn use_applications_table(sink: &mut Sink, applications_table: &str) {
    for column in &mut sink.columns {
        if let Source::Lookup(lookup) = &mut column.source
            && lookup.table == SEED_APPLICATIONS_TABLE
        {
            applications_table.clone_into(&mut lookup.table);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::topics::Topics;

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
    fn a_seed_looks_apps_up_in_the_applications_table_it_is_given() {
        let mut sink = seed_sink(PipelineKind::Reviews).unwrap();
        use_applications_table(&mut sink, "registry.apps");
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
