//! A built-in topic (`sluice_core::topics`) as a sink: its decoder, its package-name
//! resolution through the applications table, its survivor rule and its statement.

use super::{Bound, Recheck, Rejection, StorageSink, unknown_reason};
use sluice_core::dedupe::Deduped;
use sluice_core::messages::DecodeError;
use sluice_core::{DeadLetterKind, Resolved, Topic, WriteOutcome};
use sluice_kafka::Record;
use sluice_postgres::ApplicationResolver;
use sqlx::PgConnection;
use std::marker::PhantomData;
use std::time::Duration;

/// Topic `K` with its pipeline's application resolver (a TTL cache per pipeline).
#[derive(Debug)]
pub struct Builtin<K> {
    resolver: ApplicationResolver,
    applications_table: String,
    topic: PhantomData<fn() -> K>,
}

impl<K: Topic> Builtin<K> {
    /// The sink of topic `K`, resolving package names in `applications_table` (validated).
    pub fn new(applications_table: &str, cache_ttl: Duration) -> Self {
        Self {
            resolver: ApplicationResolver::new(applications_table, cache_ttl),
            applications_table: applications_table.to_owned(),
            topic: PhantomData,
        }
    }
}

impl<K: Topic> StorageSink for Builtin<K> {
    type Message = K::Message;
    type Row = Resolved<K::Message>;

    fn name(&self) -> &str {
        K::SPEC.name
    }

    fn decode(&self, record: &Record) -> Result<K::Message, DecodeError> {
        K::decode(record.payload.as_deref())
    }

    async fn bind(
        &self,
        conn: &mut PgConnection,
        messages: &[(usize, K::Message)],
    ) -> Result<Bound<Self::Row>, sqlx::Error> {
        let names = messages.iter().map(|(_, m)| K::package_name(m));
        let (ids, _stats) = self.resolver.resolve(conn, names).await?;
        let mut bound = Bound {
            rows: Vec::with_capacity(messages.len()),
            rejected: Vec::new(),
        };
        for (record, message) in messages {
            let name = K::package_name(message);
            match ids.get(name) {
                Some(&application_id) => bound.rows.push(Resolved {
                    record: *record,
                    application_id,
                    message: message.clone(),
                }),
                None => bound.rejected.push(Rejection {
                    record: *record,
                    kind: DeadLetterKind::UnknownApplication,
                    reason: unknown_reason(
                        "package_name",
                        DeadLetterKind::UnknownApplication,
                        name,
                        &format!("not in {}", self.applications_table),
                    ),
                }),
            }
        }
        Ok(bound)
    }

    fn record(row: &Self::Row) -> usize {
        row.record
    }

    fn dedupe(&self, rows: Vec<Self::Row>) -> Deduped<Self::Row> {
        K::dedupe(rows)
    }

    async fn upsert(
        &self,
        conn: &mut PgConnection,
        rows: &[Self::Row],
    ) -> Result<WriteOutcome, sqlx::Error> {
        sluice_postgres::repo::upsert::<K>(conn, rows).await
    }

    async fn recheck(
        &self,
        conn: &mut PgConnection,
        row: &Self::Row,
    ) -> Result<Recheck<Self::Row>, sqlx::Error> {
        let name = K::package_name(&row.message);
        self.resolver.forget(name);
        let (ids, _) = self.resolver.resolve(conn, [name]).await?;
        Ok(match ids.get(name) {
            Some(&id) if id != row.application_id => Recheck::Rebound(Resolved {
                application_id: id,
                ..row.clone()
            }),
            Some(_) => Recheck::Unchanged,
            None => Recheck::Gone(Rejection {
                record: row.record,
                kind: DeadLetterKind::UnknownApplication,
                reason: unknown_reason(
                    "package_name",
                    DeadLetterKind::UnknownApplication,
                    name,
                    "deleted after it was resolved",
                ),
            }),
        })
    }
}
