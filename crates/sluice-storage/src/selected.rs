//! The pipelines a process runs: every one is a sink — a seed's mapping compiled into the
//! binary or a sink of a user's mapping file — planned against the live schema. Everything
//! past the sink (the consumer, the batch loop, metrics, heartbeat, logs) knows a pipeline by
//! its [`Identity`].

use crate::settings::{PipelineSettings, StorageSettings};
use crate::sink::{Declared, DeclaredError, Tables};
use sluice_registry::{Registry, RegistrySettings};
use sluice_sinks::{
    MappingError, Sink, SinkError, SinkPlan, Source, Topics, plan_sink, plan_template,
    with_table_columns,
};
use sqlx::PgConnection;
use std::time::Duration;

/// A sink to plan: its mapping with the environment's overrides applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Unplanned {
    /// The sink (topic, group and batch size already the effective ones).
    pub sink: Sink,
    /// Writers (database connections); any free writer takes the next batch of any partition (`queues.rs`).
    pub writers: usize,
    /// Where its topic's name comes from (for the error when the topic does not exist).
    pub topic_source: String,
}

impl Unplanned {
    /// A seed pipeline of the settings (`STORAGE_PIPELINES`): its mapping with
    /// `STORAGE_TOPIC_<P>`, `STORAGE_MAX_POLL_RECORDS[_<P>]`, `STORAGE_WRITERS[_<P>]`, the group
    /// prefix and `STORAGE_APPLICATIONS_TABLE` applied.
    pub fn seed(
        pipeline: &PipelineSettings,
        settings: &StorageSettings,
    ) -> Result<Self, MappingError> {
        Ok(Self {
            sink: running_seed_sink(pipeline, &settings.applications_table)?,
            writers: pipeline.writers,
            topic_source: pipeline.kind.topic_variable(),
        })
    }

    /// Every seed pipeline of the settings.
    pub fn seeds(settings: &StorageSettings) -> Result<Vec<Self>, MappingError> {
        settings
            .pipelines
            .iter()
            .map(|p| Self::seed(p, settings))
            .collect()
    }

    /// A sink of a user's mapping file, with `STORAGE_WRITERS`'s writers.
    pub fn declared(sink: Sink, settings: &StorageSettings) -> Self {
        let topic_source = format!("the `topic` of sink `{}` in the mapping file", sink.name);
        Self {
            sink,
            writers: settings.writers,
            topic_source,
        }
    }
}

/// The seed's sink as this process runs it: its mapping file with the `pipeline` settings'
/// topic, group and batch size, and its lookups in `applications_table`.
fn running_seed_sink(
    pipeline: &PipelineSettings,
    applications_table: &str,
) -> Result<Sink, MappingError> {
    let mut sink = sluice_sinks::seed_sink(pipeline.kind)?;
    sink.topics = Topics::one(pipeline.topic.clone());
    sink.group = Some(pipeline.group.clone());
    sink.batch_size = pipeline.batch_size;
    sluice_sinks::use_applications_table(&mut sink, applications_table);
    Ok(sink)
}

/// One pipeline to run: a sink and its plan against the live schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Pipeline {
    /// The sink as its mapping declares it (with the environment's overrides).
    pub sink: Sink,
    /// Its plan against the live schema.
    pub plan: SinkPlan,
    /// A `columns = "auto"` sink as declared, before its columns were filled in (`sink`):
    /// filled in again when its table is planned again.
    pub unfilled: Option<Sink>,
    /// Writers (database connections).
    pub writers: usize,
    /// Where its topic's name comes from.
    pub topic_source: String,
    /// A sink with routes: each route as planned at start (docs/sinks.md#routes).
    pub routes: Vec<PlannedRoute>,
}

/// A route of a sink with routes, as planned at start: a fixed table that exists is planned
/// (and its statements prepared) as a fixed sink's, so a route that cannot be written stops
/// the start; one named by each record, or not created yet, is planned when a record first
/// goes to it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedRoute {
    /// Its condition, as the file states it.
    pub when: String,
    /// Its table (with placeholders, as written).
    pub table: String,
    /// Its plan; `None`: planned when a record first goes to it.
    pub plan: Option<SinkPlan>,
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
    /// Writers (database connections); any free writer takes the next batch of any partition (`queues.rs`).
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

    /// The runnable sink of a fixed table; `cache_ttl` for its lookups' caches, `registry`
    /// where a sink reading a registry format fetches writers' schemas. A sink of many
    /// tables has one per table: [`Pipeline::tables`].
    pub fn sink(
        &self,
        cache_ttl: Duration,
        registry: Option<&RegistrySettings>,
    ) -> Result<Declared, DeclaredError> {
        if self.sink.many_tables() {
            return Err(DeclaredError::Template {
                sink: self.sink.name.clone(),
                reason: "its tables are planned as its records name them".into(),
            });
        }
        let mut declared = Declared::new(&self.sink, self.plan.clone(), cache_ttl)?;
        if let Some(unfilled) = &self.unfilled {
            declared = declared.filled_in_from(unfilled);
        }
        Ok(match self.registry(registry)? {
            Some(registry) => declared.with_registry(registry),
            None => declared,
        })
    }

    /// The pipeline's tables: its one table, or those its records name.
    pub fn tables(
        &self,
        cache_ttl: Duration,
        registry: Option<&RegistrySettings>,
    ) -> Result<Tables, DeclaredError> {
        if !self.sink.many_tables() {
            return Ok(Tables::fixed(self.sink(cache_ttl, registry)?));
        }
        Tables::named(self.sink.clone(), cache_ttl, self.registry(registry)?)
    }

    /// The registry client of a sink reading a registry format (`None` for any other).
    fn registry(
        &self,
        registry: Option<&RegistrySettings>,
    ) -> Result<Option<Registry>, DeclaredError> {
        let encoding = if self.sink.value_encoding.is_registry() {
            self.sink.value_encoding
        } else if self.sink.key_encoding.is_registry() {
            self.sink.key_encoding
        } else {
            return Ok(None);
        };
        let settings = registry.ok_or_else(|| DeclaredError::NoRegistry {
            sink: self.sink.name.clone(),
            encoding: encoding.as_str(),
        })?;
        let registry = Registry::new(settings).map_err(|error| DeclaredError::Registry {
            sink: self.sink.name.clone(),
            reason: error.to_string(),
        })?;
        Ok(Some(registry))
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
    let shapes = sluice_postgres::catalog::sink_tables(conn, &with_route_sinks(&sinks)).await?;
    let mut prepared: Vec<(Sink, SinkPlan)> = Vec::new();
    let mut pipelines = Vec::with_capacity(sinks.len());
    let mut errors: Vec<SinkError> = Vec::new();
    for unplanned in sinks {
        // A sink of many tables: each table is planned when a record first names it (a
        // route's fixed table that exists: now too, so that a bad route stops the start).
        if unplanned.sink.many_tables() {
            let routes = planned_routes(
                &unplanned.sink,
                group_prefix,
                &shapes,
                &mut prepared,
                &mut errors,
            );
            pipelines.push(Pipeline {
                plan: plan_template(&unplanned.sink, group_prefix),
                unfilled: None,
                sink: unplanned.sink,
                writers: unplanned.writers,
                topic_source: unplanned.topic_source,
                routes,
            });
            continue;
        }
        // `columns = "auto"`: the sink with its table's columns, from here on.
        let sink = match with_table_columns(&unplanned.sink, &shapes) {
            Ok(sink) => sink.into_owned(),
            Err(mut more) => {
                errors.append(&mut more);
                continue;
            }
        };
        match plan_sink(&sink, group_prefix, &shapes) {
            Ok(plan) => pipelines.push(Pipeline {
                sink,
                plan,
                unfilled: unplanned.sink.auto_columns.then(|| unplanned.sink.clone()),
                writers: unplanned.writers,
                topic_source: unplanned.topic_source,
                routes: Vec::new(),
            }),
            Err(mut more) => errors.append(&mut more),
        }
    }
    if !errors.is_empty() {
        return Ok(Err(errors));
    }
    for pipeline in pipelines.iter().filter(|p| !p.sink.many_tables()) {
        let refused =
            sluice_postgres::declared::prepare_sink(conn, &pipeline.sink, &pipeline.plan).await?;
        errors.extend(refused);
    }
    for (sink, plan) in &prepared {
        errors.extend(sluice_postgres::declared::prepare_sink(conn, sink, plan).await?);
    }
    Ok(if errors.is_empty() {
        Ok(pipelines)
    } else {
        Err(errors)
    })
}

/// The sinks whose tables are read from the catalog: each sink, or a sink with routes' fixed
/// route tables (it has none of its own).
fn with_route_sinks(sinks: &[Unplanned]) -> Vec<Sink> {
    sinks
        .iter()
        .flat_map(|u| match u.sink.routes.as_slice() {
            [] => vec![u.sink.clone()],
            routes => routes
                .iter()
                .filter(|r| r.sink.table_template.is_none())
                .map(|r| r.sink.clone())
                .collect(),
        })
        .collect()
}

/// The routes of a sink with routes as planned at start (see [`planned_route`]), the sinks
/// planned added to `prepared`, the errors to `errors`.
fn planned_routes(
    sink: &Sink,
    group_prefix: &str,
    shapes: &std::collections::HashMap<String, sluice_sinks::TableShape>,
    prepared: &mut Vec<(Sink, SinkPlan)>,
    errors: &mut Vec<SinkError>,
) -> Vec<PlannedRoute> {
    sink.routes
        .iter()
        .map(|route| {
            let plan = match planned_route(&route.sink, group_prefix, shapes) {
                Ok(planned) => planned.map(|(sink, plan)| {
                    prepared.push((sink, plan.clone()));
                    plan
                }),
                Err(mut more) => {
                    errors.append(&mut more);
                    None
                }
            };
            PlannedRoute {
                when: route.when.to_string(),
                table: route.sink.table.clone(),
                plan,
            }
        })
        .collect()
}

/// A route's sink planned against `shapes` when its table is fixed and exists (`None`
/// otherwise: planned when a record first goes to it).
fn planned_route(
    sink: &Sink,
    group_prefix: &str,
    shapes: &std::collections::HashMap<String, sluice_sinks::TableShape>,
) -> Result<Option<(Sink, SinkPlan)>, Vec<SinkError>> {
    if sink.table_template.is_some() || !shapes.contains_key(&sink.table) {
        return Ok(None);
    }
    let sink = with_table_columns(sink, shapes)?.into_owned();
    let plan = plan_sink(&sink, group_prefix, shapes)?;
    Ok(Some((sink, plan)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use sluice_core::pipeline::PipelineKind;

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
