//! A pipeline's tables (docs/sinks.md#many-tables): one fixed table, or — for a sink whose
//! `table` has placeholders, or with routes (docs/sinks.md#routes: the first route whose
//! condition a record meets takes it) — the table each record names, planned against the live catalog
//! the first time a record names it (the same validation and statements as a fixed table),
//! then kept. A table that does not exist (or cannot take the sink) is remembered for
//! [`MISSING_FOR`]: its records are dead letters of kind `unknown_table` naming it, and the
//! other tables go on; after that it is looked up again, so a table created later is written
//! from then on (`sluice dlq replay --kind unknown_table` brings back what came before).

use super::refresh::Refreshed;
use super::{Declared, DeclaredError};
use regex::Regex;
use sluice_kafka::Record;
use sluice_registry::{Registry, RegistryError};
use sluice_sinks::messages::DecodeError;
use sluice_sinks::{
    Named, OnTombstone, RouteInput, Sink, SinkDecoder, TableTemplate, Topics, Unrouted, When,
    plan_sink, plan_template, with_table_columns,
};
use sqlx::PgConnection;
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// How long a table that could not be planned is not looked up again.
pub const MISSING_FOR: Duration = Duration::from_secs(10);

/// The dead-letter kind of a record whose table does not exist (or cannot take the sink).
pub const UNKNOWN_TABLE: &str = "unknown_table";

pub use sluice_sinks::UNROUTED;

/// Where a record goes.
#[derive(Debug, Clone)]
pub enum Route {
    /// To this table's sink.
    To(Arc<Declared>),
    /// Nowhere: a dead letter of kind [`UNKNOWN_TABLE`] with this reason (and the table,
    /// when the record names one).
    Unknown(Option<Arc<str>>, String),
    /// Nowhere: no route of the sink takes it; a dead letter of kind [`UNROUTED`] with this
    /// reason.
    Unrouted(String),
    /// Nowhere: its value, which a route's condition reads, cannot be read; a dead letter
    /// of kind `decode_error` with this reason.
    Undecodable(String),
    /// To a table not planned yet: the batch waits until a writer plans it.
    Plan(PendingTable),
    /// Not known yet: its value is in a registry format whose writer's schema a route's
    /// condition needs; the batch waits until it is fetched.
    Schema(i32),
    /// Nowhere, and no dead letter: a tombstone of a sink that ignores tombstones, when its
    /// table is named by the change event it does not carry (or by a route it does not
    /// meet); a record no route takes when the sink says `unrouted = "ignore"`.
    Ignore,
}

/// A table to plan: its name, and which of the sink's table sets (its routes, or its one
/// template) names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PendingTable {
    /// The set (a route's number from 0; 0 for a sink without routes).
    pub set: usize,
    /// The table.
    pub table: String,
}

/// The tables of one pipeline.
#[derive(Debug)]
pub struct Tables {
    name: String,
    routes: Routes,
    registry: Option<Registry>,
    /// Tables planned again when the catalog changed under them (`refresh.rs`).
    pub(super) refreshed: Refreshed,
}

#[derive(Debug)]
enum Routes {
    /// One table: its sink, replaced when its table changes under it.
    Fixed(RwLock<Arc<Declared>>),
    Sets(Box<TableSets>),
}

/// A sink whose records name their tables: one set of tables (a `table` with
/// placeholders), or one per route, each with the tables met so far.
#[derive(Debug)]
struct TableSets {
    sets: Vec<TableSet>,
    /// Reads what the routes' conditions read of a record (its value, its key).
    reader: SinkDecoder,
    reads_value: bool,
    reads_key: bool,
    unrouted: Unrouted,
    on_tombstone: OnTombstone,
    pattern: Option<Regex>,
    cache_ttl: Duration,
}

/// A route's tables (or a sink's without routes): its condition, its sink, how a record
/// names its table, and the tables met so far.
#[derive(Debug)]
struct TableSet {
    when: Option<When>,
    sink: Sink,
    template: TableTemplate,
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
            routes: Routes::Fixed(RwLock::new(Arc::new(sink))),
            refreshed: Refreshed::default(),
        }
    }

    /// The tables `sink`'s records name (its `table_template`, or its routes' tables), none
    /// planned yet; `registry` for a sink reading a registry format.
    pub fn named(
        sink: Sink,
        cache_ttl: Duration,
        registry: Option<Registry>,
    ) -> Result<Self, DeclaredError> {
        let invalid = |reason: String| DeclaredError::Template {
            sink: sink.name.clone(),
            reason,
        };
        let mut sets = Vec::new();
        if sink.routes.is_empty() {
            let template = sink.table_template.clone().ok_or_else(|| {
                invalid("a sink of many tables needs placeholders in `table`, or routes".into())
            })?;
            sets.push(TableSet::new(None, sink.clone(), template));
        }
        for route in &sink.routes {
            let template = match &route.sink.table_template {
                Some(template) => template.clone(),
                None => TableTemplate::literal(&route.sink.table),
            };
            sets.push(TableSet::new(
                Some(route.when.clone()),
                route.sink.clone(),
                template,
            ));
        }
        let pattern = match &sink.topics {
            Topics::Pattern(pattern) => Some(Topics::compile(pattern).map_err(invalid)?),
            Topics::Named(_) => None,
        };
        let mut reader = SinkDecoder::new(&sink, &plan_template(&sink, ""));
        if let Some(registry) = &registry {
            reader = reader.with_schemas(Arc::new(registry.clone()));
        }
        let conditions = || sets.iter().filter_map(|set| set.when.as_ref());
        let (reads_value, reads_key) = (
            conditions().any(When::reads_value),
            conditions().any(When::reads_key_fields),
        );
        Ok(Self {
            name: sink.name.clone(),
            registry,
            refreshed: Refreshed::default(),
            routes: Routes::Sets(Box::new(TableSets {
                reads_value,
                reads_key,
                reader,
                unrouted: sink.unrouted,
                on_tombstone: sink.on_tombstone,
                pattern,
                cache_ttl,
                sets,
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
            Some(registry) => registry.fetch_settled(ids),
            None => Ok(()),
        }
    }

    /// The registry the sink fetches writers' schemas from, if it reads a registry format.
    pub fn registry(&self) -> Option<&Registry> {
        self.registry.as_ref()
    }

    /// The one table's sink of a fixed sink, as it is now.
    pub fn fixed_sink(&self) -> Option<Arc<Declared>> {
        match &self.routes {
            Routes::Fixed(sink) => Some(Arc::clone(
                &sink.read().unwrap_or_else(PoisonError::into_inner),
            )),
            Routes::Sets(_) => None,
        }
    }

    /// Where `record` goes.
    pub fn route(&self, record: &Record) -> Route {
        let sets = match &self.routes {
            Routes::Fixed(sink) => {
                return Route::To(Arc::clone(
                    &sink.read().unwrap_or_else(PoisonError::into_inner),
                ));
            }
            Routes::Sets(sets) => sets,
        };
        let (index, set) = match sets.choose(record) {
            Ok(chosen) => chosen,
            Err(route) => return route,
        };
        let source = match (&record.payload, set.template.reads_source()) {
            (Some(payload), true) => match sets.reader.change_source(payload) {
                Ok(source) => source,
                Err(DecodeError::SchemaPending { schema_id }) => return Route::Schema(schema_id),
                Err(error) => return Route::Undecodable(error.to_string()),
            },
            _ => None,
        };
        let table = set.template.resolve(&Named {
            topic: &record.topic,
            pattern: sets.pattern.as_ref(),
            source: source.as_ref().map(|(s, t)| (s.as_str(), t.as_str())),
        });
        let table = match table {
            Ok(table) => table,
            Err(_) if record.payload.is_none() && set.sink.on_tombstone == OnTombstone::Ignore => {
                return Route::Ignore;
            }
            // A capture's heartbeat message, a truncate, a transaction's BEGIN/END record on
            // a topic the pattern takes: nothing to write, in no table.
            Err(_)
                if record
                    .payload
                    .as_deref()
                    .is_some_and(|payload| sets.reader.changes_no_row(payload)) =>
            {
                return Route::Ignore;
            }
            Err(reason) => {
                return Route::Unknown(None, format!("the record names no table: {reason}"));
            }
        };
        match set.known(&table) {
            Some(Known::Ready(sink)) => Route::To(sink),
            Some(Known::Missing { reason, since }) if since.elapsed() < MISSING_FOR => {
                Route::Unknown(Some(Arc::from(table.as_str())), reason)
            }
            _ => Route::Plan(PendingTable { set: index, table }),
        }
    }

    /// The sinks planned now for `table`, each with where it is kept (`None`: the fixed
    /// table; else the set of the routes that planned it).
    pub(super) fn planned_for(&self, table: &str) -> Vec<(Option<usize>, Arc<Declared>)> {
        match &self.routes {
            Routes::Fixed(_) => self
                .fixed_sink()
                .filter(|sink| sink.table().as_ref() == table)
                .map(|sink| (None, sink))
                .into_iter()
                .collect(),
            Routes::Sets(sets) => sets
                .sets
                .iter()
                .enumerate()
                .filter_map(|(index, set)| match set.known(table) {
                    Some(Known::Ready(sink)) => Some((Some(index), sink)),
                    _ => None,
                })
                .collect(),
        }
    }

    /// Puts `new` where [`Self::planned_for`] found `old` (`at`), if `old` is still there
    /// (a writer may have forgotten the table meanwhile, or planned it again); whether it was.
    /// A replacement raises the generation at once, so every batch decoded before it is
    /// decoded again.
    pub(super) fn replace(&self, at: Option<usize>, old: &Arc<Declared>, new: Declared) -> bool {
        let new = Arc::new(new);
        let replaced = match (&self.routes, at) {
            (Routes::Fixed(fixed), _) => {
                let mut current = fixed.write().unwrap_or_else(PoisonError::into_inner);
                let still = Arc::ptr_eq(&current, old);
                if still {
                    *current = new;
                }
                still
            }
            (Routes::Sets(sets), Some(index)) => sets.sets.get(index).is_some_and(|set| {
                let mut known = set.known.write().unwrap_or_else(PoisonError::into_inner);
                match known.get_mut(old.table().as_ref()) {
                    Some(Known::Ready(current)) if Arc::ptr_eq(current, old) => {
                        *current = new;
                        true
                    }
                    _ => false,
                }
            }),
            (Routes::Sets(_), None) => false,
        };
        if replaced {
            self.refreshed.replaced();
        }
        replaced
    }

    /// Forgets `table` (dropped or altered since it was planned): the next record that names
    /// it plans it again. False for a fixed table, which is never planned again.
    pub fn forget(&self, table: &str) -> bool {
        let Routes::Sets(sets) = &self.routes else {
            return false;
        };
        for set in &sets.sets {
            set.known
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(table);
        }
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
        tables: &[PendingTable],
    ) -> Result<(), sqlx::Error> {
        let Routes::Sets(sets) = &self.routes else {
            return Ok(());
        };
        for PendingTable { set, table } in tables {
            let Some(set) = sets.sets.get(*set) else {
                continue;
            };
            // Another writer planned it meanwhile (both met it in their batches): kept.
            if matches!(set.known(table), Some(Known::Ready(_))) {
                continue;
            }
            let planned = set
                .planned(conn, table, sets.cache_ttl, self.registry.as_ref())
                .await?;
            let known = match planned {
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
            let mut known_tables = set.known.write().unwrap_or_else(PoisonError::into_inner);
            // A table another writer made ready while this one planned stays ready.
            if !matches!(known_tables.get(table), Some(Known::Ready(_))) {
                known_tables.insert(table.clone(), known);
            }
        }
        Ok(())
    }
}

impl TableSets {
    /// The first set whose condition `record` meets (a sink without routes: its one set),
    /// or where the record goes instead.
    fn choose(&self, record: &Record) -> Result<(usize, &TableSet), Route> {
        if let [set] = self.sets.as_slice()
            && set.when.is_none()
        {
            return Ok((0, set));
        }
        // A Kafka tombstone, or a Connect one (`"payload": null`: no row image).
        let mut tombstone = record.payload.is_none();
        let image = match (&record.payload, self.reads_value) {
            (Some(payload), true) => match self.reader.row_image(payload) {
                Ok(image) => {
                    tombstone = image.is_none();
                    image
                }
                Err(DecodeError::SchemaPending { schema_id }) => {
                    return Err(Route::Schema(schema_id));
                }
                Err(error) => return Err(Route::Undecodable(error.to_string())),
            },
            _ => None,
        };
        // A key a condition reads but cannot (not framed, its schema refused, not JSON) makes
        // the record a dead letter, as its value would — never "no route", which
        // `unrouted = "ignore"` would skip. A key that reads but lacks the path meets no key
        // condition.
        let key_fields = match (&record.key, self.reads_key) {
            (Some(key), true) => match self.reader.key_fields(key) {
                Ok(fields) => Some(fields),
                Err(DecodeError::SchemaPending { schema_id }) => {
                    return Err(Route::Schema(schema_id));
                }
                Err(error) => return Err(Route::Undecodable(format!("record key: {error}"))),
            },
            _ => None,
        };
        let input = RouteInput {
            image,
            key_fields,
            key: record.key.as_deref(),
            headers: &record.headers,
        };
        if let Some(chosen) = self
            .sets
            .iter()
            .enumerate()
            .find(|(_, set)| set.when.as_ref().is_some_and(|when| when.holds(&input)))
        {
            return Ok(chosen);
        }
        // A tombstone no route takes is skipped when the sink ignores or dead-letters
        // tombstones and `unrouted = "ignore"`; a delete with no table is never skipped
        // silently, whatever `unrouted` says.
        match (tombstone, self.on_tombstone, self.unrouted) {
            (true, OnTombstone::Ignore, _)
            | (true, OnTombstone::DeadLetter, Unrouted::Ignore)
            | (false, _, Unrouted::Ignore) => return Err(Route::Ignore),
            _ => {}
        }
        let mut found: Vec<String> = self
            .sets
            .iter()
            .filter_map(|set| set.when.as_ref().map(|when| when.found(&input)))
            .collect();
        found.dedup();
        let what = match (tombstone, self.on_tombstone) {
            (true, OnTombstone::Delete) => "no route takes the tombstone (its delete has no table)",
            (true, _) => "no route takes the tombstone",
            (false, _) => "no route takes the record",
        };
        Err(Route::Unrouted(format!("{what}: {}", found.join("; "))))
    }
}

impl TableSet {
    fn new(when: Option<When>, sink: Sink, template: TableTemplate) -> Self {
        Self {
            when,
            sink,
            template,
            known: RwLock::default(),
        }
    }

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
        cache_ttl: Duration,
        registry: Option<&Registry>,
    ) -> Result<Result<Declared, String>, sqlx::Error> {
        let unfilled = self.sink.for_table(table);
        let shapes =
            sluice_postgres::catalog::sink_tables(conn, std::slice::from_ref(&unfilled)).await?;
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
        let sink = match with_table_columns(&unfilled, &shapes) {
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
        let declared = match Declared::new(&sink, plan, cache_ttl) {
            Ok(declared) => declared.filled_in_from(&unfilled),
            Err(error) => return Ok(Err(format!("table `{table}`: {error}"))),
        };
        Ok(Ok(match registry {
            Some(registry) => declared.with_registry(registry.clone()),
            None => declared,
        }))
    }
}
