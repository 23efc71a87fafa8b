//! A sink declared in a mapping file: its plan's decoder, its lookups (one resolver each, a
//! TTL cache per sink, no negative caching), its survivor rule and its planned statement.

use super::{Bound, Recheck, Rejection, unknown_reason};
use crate::record::{dead_letter, kafka_timestamp};
use sluice_core::dedupe::Deduped;
use sluice_core::{DeadLetterKind, WriteOutcome};
use sluice_kafka::Record;
use sluice_postgres::declared::{DeclaredUpsertError, write_declared};
use sluice_postgres::lookup::{LookupResolver, LookupValue};
use sluice_registry::{Registry, RegistryError};
use sluice_sinks::messages::DecodeError;
use sluice_sinks::{Cell, Decoded, Lookup, RecordMeta, Sink, SinkDecoder, SinkPlan, SinkRow};
use sqlx::PgConnection;
use std::sync::Arc;
use std::time::Duration;

/// A declared sink that cannot be run (validation missed something: a bug, reported as fatal).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeclaredError {
    /// A lookup writes a column whose type no lookup value fits.
    #[error("sink `{sink}`, column `{column}`: a lookup cannot write a {param_type} column")]
    LookupColumn {
        /// The sink.
        sink: String,
        /// The column.
        column: String,
        /// Its parameter type.
        param_type: String,
    },
    /// A sink reads a schema registry format and no registry is configured.
    #[error(
        "sink `{sink}` reads {encoding} records: set SCHEMA_REGISTRY_URL to the schema registry's Confluent-compatible API"
    )]
    NoRegistry {
        /// The sink.
        sink: String,
        /// The format it reads.
        encoding: &'static str,
    },
    /// A sink of many tables whose table template cannot be used (validation missed it).
    #[error("sink `{sink}`: {reason}")]
    Template {
        /// The sink.
        sink: String,
        /// Why.
        reason: String,
    },
    /// The registry client cannot be built (a TLS file unreadable).
    #[error("sink `{sink}`: {reason}")]
    Registry {
        /// The sink.
        sink: String,
        /// Why.
        reason: String,
    },
}

/// One lookup of the sink: where it writes, what it reads, and its resolver.
#[derive(Debug)]
struct Resolver {
    position: usize,
    lookup: Lookup,
    field: String,
    kind: DeadLetterKind,
    resolver: LookupResolver,
}

/// A validated sink ready to run.
#[derive(Debug)]
pub struct Declared {
    /// The sink as planned (its columns filled in): planned again when its table changes.
    sink: Sink,
    /// A `columns = "auto"` sink as declared, before its columns were filled in from the
    /// table: filled in again when the table is planned again (a column added since).
    unfilled: Option<Sink>,
    cache_ttl: Duration,
    plan: SinkPlan,
    /// The table, shared by its dead letters and metrics.
    table: Arc<str>,
    decoder: SinkDecoder,
    lookups: Vec<Resolver>,
    /// Where writers' schemas come from, for a sink reading a registry format.
    registry: Option<Registry>,
}

impl Declared {
    /// The runnable form of `sink` as `plan` (its plan against the live schema) checks it;
    /// each lookup caches found keys for `cache_ttl`.
    pub fn new(sink: &Sink, plan: SinkPlan, cache_ttl: Duration) -> Result<Self, DeclaredError> {
        let decoder = SinkDecoder::new(sink, &plan);
        let mut lookups = Vec::new();
        for (position, lookup) in decoder.lookups() {
            let column = plan.columns.get(position);
            let param_type = column.map_or("", |c| c.param_type.as_str());
            let value = LookupValue::from_param_type(param_type).ok_or_else(|| {
                DeclaredError::LookupColumn {
                    sink: sink.name.clone(),
                    column: column.map_or_else(String::new, |c| c.column.clone()),
                    param_type: param_type.to_owned(),
                }
            })?;
            lookups.push(Resolver {
                position,
                field: lookup.field.to_string(),
                kind: DeadLetterKind::unresolved(&lookup.unknown_kind),
                resolver: LookupResolver::new(
                    lookup,
                    column.and_then(|c| c.lookup_key.as_deref()),
                    value,
                    cache_ttl,
                ),
                lookup: lookup.clone(),
            });
        }
        Ok(Self {
            sink: sink.clone(),
            unfilled: None,
            cache_ttl,
            table: Arc::from(plan.table.as_str()),
            plan,
            decoder,
            lookups,
            registry: None,
        })
    }

    /// The same sink, whose columns were filled in from its table from `unfilled`
    /// (`columns = "auto"`; a sink without it is left as it is).
    #[must_use]
    pub fn filled_in_from(mut self, unfilled: &Sink) -> Self {
        if unfilled.auto_columns {
            self.unfilled = Some(unfilled.clone());
        }
        self
    }

    /// The sink as declared when its columns are filled in from its table (`columns =
    /// "auto"`), `None` otherwise.
    pub fn unfilled(&self) -> Option<&Sink> {
        self.unfilled.as_ref()
    }

    /// The same sink fetching the writers' schemas of its registry records from `registry`.
    #[must_use]
    pub fn with_registry(mut self, registry: Registry) -> Self {
        self.decoder = self.decoder.with_schemas(Arc::new(registry.clone()));
        self.registry = Some(registry);
        self
    }

    /// Whether it reads a schema registry format.
    pub fn reads_registry(&self) -> bool {
        self.decoder.reads_registry()
    }

    /// Fetches the writers' schemas of `ids`, for a caller that asks once (`sluice sinks
    /// validate --sample`; the writers ask the registry themselves, waiting as long as it
    /// takes): a "not found" is confirmed before this returns (see
    /// [`Registry::fetch_settled`]). An error is transient; an id the registry refused is no
    /// error (its records are dead-lettered when decoded again).
    pub fn fetch_schemas(&self, ids: &[i32]) -> Result<(), RegistryError> {
        match &self.registry {
            Some(registry) => registry.fetch_settled(ids),
            // Not reached: a sink reading a registry format gets a registry before it runs,
            // and only such a sink meets a schema id; nothing to fetch otherwise.
            None => Ok(()),
        }
    }

    /// The registry the sink fetches writers' schemas from, if it reads a registry format (a
    /// clone shares the client and the cache: fetching through it fills this sink's).
    pub fn registry(&self) -> Option<&Registry> {
        self.registry.as_ref()
    }

    /// The table it writes.
    pub fn table(&self) -> &Arc<str> {
        &self.table
    }

    /// The plan it runs.
    pub fn plan(&self) -> &SinkPlan {
        &self.plan
    }

    /// The sink it was planned from.
    pub fn sink(&self) -> &Sink {
        &self.sink
    }

    /// How long its lookups cache a found key.
    pub fn cache_ttl(&self) -> Duration {
        self.cache_ttl
    }

    /// The top-level record fields (a change event's row-image fields) its columns read.
    pub fn fields_read(&self) -> &[String] {
        self.decoder.fields_read()
    }

    /// Whether some column is resolved through a lookup (a database read at write time).
    pub fn has_lookups(&self) -> bool {
        !self.lookups.is_empty()
    }
}

/// The sink as the batch loop drives it. Every call but [`Declared::decode`] runs inside the
/// batch's transaction; a `sqlx::Error` is classified by the caller (transient → the batch is
/// retried; a constraint error → isolation; anything else stops the pipeline).
impl Declared {
    /// The sink's name: metric labels, logs, heartbeat files, `lag`/`replay`/`dlq`.
    pub fn name(&self) -> &str {
        &self.plan.name
    }

    /// Decodes and validates one record; pure. The error's text is the dead letter's reason.
    pub fn decode(&self, record: &Record) -> Result<Decoded, DecodeError> {
        let meta = RecordMeta {
            topic: &record.topic,
            partition: record.partition,
            offset: record.offset,
            timestamp: kafka_timestamp(record).ok().flatten(),
            key: record.key.as_deref(),
            headers: &record.headers,
        };
        self.decoder.decode_record(record.payload.as_deref(), &meta)
    }

    /// Resolves the lookups of a batch's decoded records (`(record index, decoded)`): a row
    /// whose key is not in its table is rejected.
    pub async fn bind(
        &self,
        conn: &mut PgConnection,
        messages: &[(usize, Decoded)],
    ) -> Result<Bound<SinkRow>, sqlx::Error> {
        let mut rows: Vec<SinkRow> = messages
            .iter()
            .map(|(record, decoded)| SinkRow::of(*record, decoded))
            .collect();
        let mut rejected = Vec::new();
        for lookup in &self.lookups {
            let keys = rows
                .iter()
                .filter_map(|row| match row.cell(lookup.position) {
                    Some(Cell::Lookup(key)) => Some(key.as_str()),
                    _ => None,
                });
            let (found, _stats) = lookup.resolver.resolve(conn, keys).await?;
            rows.retain_mut(|row| {
                let Some(Cell::Lookup(key)) = row.cell(lookup.position) else {
                    // NULL (an optional field left out): nothing to look up.
                    row.keys.push(None);
                    return true;
                };
                let key = key.clone();
                match found.get(&key) {
                    Some(value) => {
                        row.resolve(lookup.position, value.clone());
                        row.keys.push(Some(key));
                        true
                    }
                    None => {
                        rejected.push(Rejection {
                            record: row.record,
                            kind: lookup.kind,
                            reason: unknown_reason(
                                &lookup.field,
                                lookup.kind,
                                &key,
                                &format!("not in {}", lookup.lookup.table),
                            ),
                        });
                        false
                    }
                }
            });
        }
        rejected.sort_by_key(|r: &Rejection| r.record);
        Ok(Bound { rows, rejected })
    }

    /// The record index of a row.
    pub fn record(row: &SinkRow) -> usize {
        row.record
    }

    /// One row per natural key by the sink's survivor rule (the same rule as its statement's
    /// `ON CONFLICT` across batches), the others kept as runners-up.
    pub fn dedupe(&self, rows: Vec<SinkRow>) -> Deduped<SinkRow> {
        self.decoder.dedupe(rows)
    }

    /// A batch's rows (in record order) as the runs written one after another, each
    /// de-duplicated on its own: one run, except where a Debezium sink writes a change event
    /// alone (docs/ARCHITECTURE.md#sinks).
    pub fn runs(&self, rows: Vec<SinkRow>) -> Vec<Vec<SinkRow>> {
        self.decoder.runs(rows)
    }

    /// The sink's one statement over `rows` (one per natural key); `records` are the batch's
    /// (a row that waits keeps its record, to be dead-lettered if it can never be applied).
    pub async fn upsert(
        &self,
        conn: &mut PgConnection,
        rows: &[SinkRow],
        records: &[Record],
    ) -> Result<WriteOutcome, sqlx::Error> {
        let origin = |index: usize| {
            records.get(index).map(|record| {
                dead_letter(record, DeadLetterKind::ConstraintViolation, String::new())
            })
        };
        match write_declared(conn, &self.plan, rows, &origin).await {
            Ok(outcome) => Ok(outcome),
            Err(DeclaredUpsertError::Database(error)) => Err(error),
            // A row that does not fit its own plan is a bug: fatal, never retried.
            Err(error) => Err(sqlx::Error::Encode(Box::new(error))),
        }
    }

    /// Looks a row's references up again past the cache (after it alone broke a foreign key).
    pub async fn recheck(
        &self,
        conn: &mut PgConnection,
        row: &SinkRow,
    ) -> Result<Recheck<SinkRow>, sqlx::Error> {
        let mut rebound = row.clone();
        for (lookup, key) in self.lookups.iter().zip(&row.keys) {
            let Some(key) = key else { continue };
            lookup.resolver.forget(key);
            let (found, _) = lookup.resolver.resolve(conn, [key.as_str()]).await?;
            match found.get(key) {
                Some(value) => rebound.resolve(lookup.position, value.clone()),
                None => {
                    return Ok(Recheck::Gone(Rejection {
                        record: row.record,
                        kind: lookup.kind,
                        reason: unknown_reason(
                            &lookup.field,
                            lookup.kind,
                            key,
                            "deleted after it was resolved",
                        ),
                    }));
                }
            }
        }
        Ok(if rebound.cells().eq(row.cells()) {
            Recheck::Unchanged
        } else {
            Recheck::Rebound(rebound)
        })
    }
}
