//! A sink declared in a mapping file: its plan's decoder, its lookups (one resolver each, a
//! TTL cache per sink, no negative caching), its survivor rule and its planned statement.

use super::{Bound, Recheck, Rejection, StorageSink, unknown_reason};
use crate::record::{dead_letter, kafka_timestamp};
use sluice_core::dedupe::Deduped;
use sluice_core::messages::DecodeError;
use sluice_core::sinks::{Cell, Decoded, Lookup, RecordMeta, Sink, SinkDecoder, SinkPlan, SinkRow};
use sluice_core::{DeadLetterKind, WriteOutcome};
use sluice_kafka::Record;
use sluice_postgres::declared::{DeclaredUpsertError, write_declared};
use sluice_postgres::lookup::{LookupResolver, LookupValue};
use sqlx::PgConnection;
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
    plan: SinkPlan,
    decoder: SinkDecoder,
    lookups: Vec<Resolver>,
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
            plan,
            decoder,
            lookups,
        })
    }

    /// The plan it runs.
    pub fn plan(&self) -> &SinkPlan {
        &self.plan
    }
}

impl StorageSink for Declared {
    type Message = Decoded;
    type Row = SinkRow;

    fn name(&self) -> &str {
        &self.plan.name
    }

    fn decode(&self, record: &Record) -> Result<Decoded, DecodeError> {
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

    async fn bind(
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

    fn record(row: &SinkRow) -> usize {
        row.record
    }

    fn dedupe(&self, rows: Vec<SinkRow>) -> Deduped<SinkRow> {
        self.decoder.dedupe(rows)
    }

    fn runs(&self, rows: Vec<SinkRow>) -> Vec<Vec<SinkRow>> {
        self.decoder.runs(rows)
    }

    async fn upsert(
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

    async fn recheck(
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
