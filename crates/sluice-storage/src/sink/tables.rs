//! A pipeline's tables (docs/sinks.md#many-tables): one fixed table, or — for a sink whose
//! `table` has placeholders — the table each record names, planned against the live catalog
//! the first time a record names it (the same validation and statements as a fixed table),
//! then kept. A table that does not exist (or cannot take the sink) is remembered for
//! [`MISSING_FOR`]: its records are dead letters of kind `unknown_table` naming it, and the
//! other tables go on; after that it is looked up again, so a table created later is written
//! from then on (`sluice dlq replay --kind unknown_table` brings back what came before).

use super::{Declared, DeclaredError};
use regex::Regex;
use sluice_kafka::Record;
use sluice_registry::{Registry, RegistryError};
use sluice_sinks::{Named, Sink, TableTemplate, Topics, plan_sink, with_table_columns};
use sqlx::PgConnection;
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// How long a table that could not be planned is not looked up again.
pub const MISSING_FOR: Duration = Duration::from_secs(10);

/// The dead-letter kind of a record whose table does not exist (or cannot take the sink).
pub const UNKNOWN_TABLE: &str = "unknown_table";

/// Where a record goes.
#[derive(Debug, Clone)]
pub enum Route {
    /// To this table's sink.
    To(Arc<Declared>),
    /// Nowhere: a dead letter of kind [`UNKNOWN_TABLE`] with this reason.
    Unknown(String),
    /// To a table not planned yet: the batch waits until a writer plans it.
    Plan(String),
    /// Nowhere, and no dead letter: a tombstone of a sink that ignores tombstones, when its
    /// table is named by the change event it does not carry.
    Ignore,
}

/// The tables of one pipeline.
#[derive(Debug)]
pub struct Tables {
    name: String,
    routes: Routes,
    registry: Option<Registry>,
}

#[derive(Debug)]
enum Routes {
    Fixed(Arc<Declared>),
    Named(Box<NamedTables>),
}

/// A sink whose records name their tables, and the tables met so far.
#[derive(Debug)]
struct NamedTables {
    sink: Sink,
    template: TableTemplate,
    pattern: Option<Regex>,
    cache_ttl: Duration,
    known: RwLock<HashMap<String, Known>>,
}

#[derive(Debug, Clone)]
enum Known {
    Ready(Arc<Declared>),
    Missing { reason: String, since: Instant },
}

impl Tables {
    /// One fixed table.
    pub fn fixed(sink: Declared) -> Self {
        Self {
            name: sink.name().to_owned(),
            registry: sink.registry().cloned(),
            routes: Routes::Fixed(Arc::new(sink)),
        }
    }

    /// The tables `sink`'s records name (its `table_template`), none planned yet; `registry`
    /// for a sink reading a registry format.
    pub fn named(
        sink: Sink,
        cache_ttl: Duration,
        registry: Option<Registry>,
    ) -> Result<Self, DeclaredError> {
        let template = sink
            .table_template
            .clone()
            .ok_or_else(|| DeclaredError::Template {
                sink: sink.name.clone(),
                reason: "a sink of many tables needs placeholders in `table`".into(),
            })?;
        let pattern = match &sink.topics {
            Topics::Pattern(pattern) => {
                Some(
                    Topics::compile(pattern).map_err(|reason| DeclaredError::Template {
                        sink: sink.name.clone(),
                        reason,
                    })?,
                )
            }
            Topics::Named(_) => None,
        };
        Ok(Self {
            name: sink.name.clone(),
            registry,
            routes: Routes::Named(Box::new(NamedTables {
                sink,
                template,
                pattern,
                cache_ttl,
                known: RwLock::default(),
            })),
        })
    }

    /// The pipeline's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Fetches the writers' schemas of `ids` (see [`Declared::fetch_schemas`]).
    pub fn fetch_schemas(&self, ids: &[i32]) -> Result<(), RegistryError> {
        match &self.registry {
            Some(registry) => registry.fetch(ids),
            None => Ok(()),
        }
    }

    /// The registry the sink fetches writers' schemas from, if it reads a registry format.
    pub fn registry(&self) -> Option<&Registry> {
        self.registry.as_ref()
    }

    /// The one table's sink of a fixed sink.
    pub fn fixed_sink(&self) -> Option<&Arc<Declared>> {
        match &self.routes {
            Routes::Fixed(sink) => Some(sink),
            Routes::Named(_) => None,
        }
    }

    /// Where `record` goes.
    pub fn route(&self, record: &Record) -> Route {
        let named = match &self.routes {
            Routes::Fixed(sink) => return Route::To(Arc::clone(sink)),
            Routes::Named(named) => named,
        };
        let source = if named.template.reads_source() {
            record
                .payload
                .as_deref()
                .and_then(sluice_sinks::change_source)
        } else {
            None
        };
        let table = named.template.resolve(&Named {
            topic: &record.topic,
            pattern: named.pattern.as_ref(),
            source: source.as_ref().map(|(s, t)| (s.as_str(), t.as_str())),
        });
        let table = match table {
            Ok(table) => table,
            Err(_)
                if record.payload.is_none()
                    && named.sink.on_tombstone == sluice_sinks::OnTombstone::Ignore =>
            {
                return Route::Ignore;
            }
            Err(reason) => return Route::Unknown(format!("the record names no table: {reason}")),
        };
        let known = named.known.read().unwrap_or_else(PoisonError::into_inner);
        match known.get(&table) {
            Some(Known::Ready(sink)) => Route::To(Arc::clone(sink)),
            Some(Known::Missing { reason, since }) if since.elapsed() < MISSING_FOR => {
                Route::Unknown(reason.clone())
            }
            _ => Route::Plan(table),
        }
    }

    /// Forgets `table` (dropped or altered since it was planned): the next record that names
    /// it plans it again. False for a fixed table, which is never planned again.
    pub fn forget(&self, table: &str) -> bool {
        let Routes::Named(named) = &self.routes else {
            return false;
        };
        let mut known = named.known.write().unwrap_or_else(PoisonError::into_inner);
        known.remove(table);
        tracing::warn!(pipeline = %self.name, table = %table,
            "table dropped or altered since it was planned: planned again");
        true
    }

    /// Plans each of `tables` against the catalog on `conn`: a table that exists and takes
    /// the sink is ready; any other is remembered as missing (its records dead-lettered)
    /// for [`MISSING_FOR`]. Only a database error is an error (the caller retries it).
    pub async fn plan(
        &self,
        conn: &mut PgConnection,
        tables: &[String],
    ) -> Result<(), sqlx::Error> {
        let Routes::Named(named) = &self.routes else {
            return Ok(());
        };
        for table in tables {
            // Another writer planned it meanwhile (both met it in their batches): kept.
            if matches!(named.known(table), Some(Known::Ready(_))) {
                continue;
            }
            let known = match named.planned(conn, table, self.registry.as_ref()).await? {
                Ok(sink) => {
                    tracing::info!(pipeline = %self.name, table = %table, "table planned");
                    Known::Ready(Arc::new(sink))
                }
                Err(reason) => {
                    tracing::warn!(pipeline = %self.name, table = %table, %reason,
                        "table cannot be written: its records are dead letters for now");
                    Known::Missing {
                        reason,
                        since: Instant::now(),
                    }
                }
            };
            let mut tables = named.known.write().unwrap_or_else(PoisonError::into_inner);
            // A table another writer made ready while this one planned stays ready.
            if !matches!(tables.get(table), Some(Known::Ready(_))) {
                tables.insert(table.clone(), known);
            }
        }
        Ok(())
    }
}

impl NamedTables {
    /// What is known of `table`.
    fn known(&self, table: &str) -> Option<Known> {
        let known = self.known.read().unwrap_or_else(PoisonError::into_inner);
        known.get(table).cloned()
    }

    /// The sink of `table`, planned and its statements prepared on `conn`; `Ok(Err(reason))`
    /// when the table does not exist or cannot take the sink.
    async fn planned(
        &self,
        conn: &mut PgConnection,
        table: &str,
        registry: Option<&Registry>,
    ) -> Result<Result<Declared, String>, sqlx::Error> {
        let sink = self.sink.for_table(table);
        let shapes =
            sluice_postgres::catalog::sink_tables(conn, std::slice::from_ref(&sink)).await?;
        if !shapes.contains_key(table) {
            return Ok(Err(format!("table `{table}` does not exist")));
        }
        let refused = |errors: Vec<sluice_sinks::SinkError>| {
            let reasons: Vec<String> = errors.iter().map(ToString::to_string).collect();
            format!(
                "table `{table}` cannot take sink `{}`: {}",
                self.sink.name,
                reasons.join("; ")
            )
        };
        let sink = match with_table_columns(&sink, &shapes) {
            Ok(sink) => sink.into_owned(),
            Err(errors) => return Ok(Err(refused(errors))),
        };
        let plan = match plan_sink(&sink, "", &shapes) {
            Ok(plan) => plan,
            Err(errors) => return Ok(Err(refused(errors))),
        };
        let errors = sluice_postgres::declared::prepare_sink(conn, &sink, &plan).await?;
        if !errors.is_empty() {
            return Ok(Err(refused(errors)));
        }
        let declared = match Declared::new(&sink, plan, self.cache_ttl) {
            Ok(declared) => declared,
            Err(error) => return Ok(Err(format!("table `{table}`: {error}"))),
        };
        Ok(Ok(match registry {
            Some(registry) => declared.with_registry(registry.clone()),
            None => declared,
        }))
    }
}
