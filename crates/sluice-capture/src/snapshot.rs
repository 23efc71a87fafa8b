//! The initial snapshot (docs/capture.md#snapshot): the published tables' rows as `r`
//! records, read in the snapshot the slot exported at its creation, so they are exactly the
//! database at the slot's consistent point (or, taken again after a copy cut short, in a
//! snapshot of then), stamped with the slot's restart position (no streamed change has an
//! earlier LSN), and sent to Kafka (every one acknowledged) before the first streamed change.
//!
//! Values are read through a cursor over the simple query protocol, whose results are each type's text
//! output — what pgoutput sends, so a snapshot row and a streamed row of the same values
//! encode alike (`SELECT x::text` would not: `true::text` is `true`, the output is `t`).

use crate::catalog::column_catalog;
use crate::debezium::{EncodeError, Envelope, Position, Record, Snapshot, TableShape};
use crate::lsn::Lsn;
use crate::model::{Cell, Column, Relation, ReplicaIdentity, Tuple};
use crate::outbox::Routing;
use chrono::Utc;
use rdkafka::error::KafkaError;
use sluice_kafka::ResilientProducer;
use sluice_kafka::producer::Delivered;
use sqlx::{PgConnection, Row, ValueRef};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;

/// Rows read at a time (a cursor's `FETCH`).
const BATCH: usize = 1_000;

/// Records queued to Kafka and not yet acknowledged, at most: the oldest is awaited first.
const IN_FLIGHT: usize = 10_000;

/// Why the snapshot stopped. A crash or failure leaves it incomplete: the next start does it
/// again into the slot it keeps (docs/capture.md#snapshot).
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Reading the source failed.
    #[error("snapshot: reading the source: {0}")]
    Database(#[from] sqlx::Error),
    /// Kafka refused or failed a record.
    #[error("snapshot: Kafka did not take a record: {0}")]
    Kafka(#[from] KafkaError),
    /// A row could not become its record.
    #[error("snapshot: {0}")]
    Encode(#[from] EncodeError),
    /// A value came in a form the snapshot cannot read.
    #[error("snapshot: {table}: column {column}: {detail}")]
    Value {
        /// `schema.table`.
        table: String,
        /// The column.
        column: String,
        /// What was wrong.
        detail: String,
    },
}

/// What the snapshot sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SnapshotReport {
    /// Tables read (outbox tables are not: their past rows were relayed already).
    pub tables: usize,
    /// Records Kafka acknowledged.
    pub records: u64,
}

/// Where the snapshot reads and what it writes.
#[derive(Debug)]
pub struct SnapshotCopy<'a> {
    /// An ordinary connection to the source database, not in a transaction.
    pub conn: &'a mut PgConnection,
    /// The name of the snapshot the slot exported (`SET TRANSACTION SNAPSHOT`); `None` for
    /// a snapshot taken again into a slot that exists (a copy cut short): a snapshot of now,
    /// whose changes since the slot's start are streamed after it.
    pub exported: Option<&'a str>,
    /// Every record's `source.lsn` (named for the point the copy sees; the stamp is the
    /// slot's restart position, before every change the slot streams: a transaction open
    /// across its consistent point has changes before it), so that a sink's LSN guard lets
    /// each streamed change win over the copy.
    pub consistent_point: Lsn,
    /// The publication whose tables are read.
    pub publication: &'a str,
    /// The records' settings.
    pub envelope: &'a Envelope,
    /// The outbox tables, which are not read.
    pub routing: &'a Routing,
    /// The producer.
    pub producer: &'a ResilientProducer,
}

type Delivery = Pin<Box<dyn Future<Output = Result<Delivered, KafkaError>> + Send>>;

/// The row held back until the next one says whether it was its table's last.
struct Held {
    table: usize,
    row: Tuple,
    first: bool,
}

impl SnapshotCopy<'_> {
    /// Reads every published table in the exported snapshot and sends its rows; returns once
    /// Kafka acknowledged all of them.
    pub async fn run(self) -> Result<SnapshotReport, SnapshotError> {
        let SnapshotCopy {
            conn,
            exported,
            consistent_point,
            publication,
            envelope,
            routing,
            producer,
        } = self;
        let snapshot = exported.map_or_else(String::new, |name| {
            format!("SET TRANSACTION SNAPSHOT '{}'; ", name.replace('\'', "''"))
        });
        simple(
            conn,
            format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ; {snapshot}\
                 SET LOCAL DateStyle = 'ISO, MDY'; SET LOCAL IntervalStyle = 'postgres'; \
                 SET LOCAL bytea_output = 'hex'; SET LOCAL TimeZone = 'UTC'; \
                 SET LOCAL extra_float_digits = 3; SET LOCAL lc_monetary = 'C'"
            ),
        )
        .await?;
        let xid: i64 = sqlx::query_scalar("SELECT txid_current() % 4294967296")
            .fetch_one(&mut *conn)
            .await?;
        let at = Position {
            commit_time: Utc::now(),
            xid: u32::try_from(xid).unwrap_or_default(),
            lsn: consistent_point,
            last_commit_lsn: None,
            snapshot: Snapshot::True,
        };
        let shapes = shapes(conn, publication, envelope, routing).await?;
        let mut sender = Sender {
            producer,
            envelope,
            at,
            queued: VecDeque::new(),
            records: 0,
        };
        send_rows(conn, &shapes, &mut sender).await?;
        let records = sender.drain().await?;
        simple(conn, "COMMIT".to_owned()).await?;
        Ok(SnapshotReport {
            tables: shapes.len(),
            records,
        })
    }
}

/// The shapes of the publication's tables but the outbox ones.
async fn shapes(
    conn: &mut PgConnection,
    publication: &str,
    envelope: &Envelope,
    routing: &Routing,
) -> Result<Vec<Table>, SnapshotError> {
    let mut shapes = Vec::new();
    for (partitioned, relation) in published(conn, publication).await? {
        if routing.is_outbox(&relation) {
            continue;
        }
        let catalog = column_catalog(conn, &relation).await?;
        shapes.push(Table {
            shape: TableShape::new(&envelope.settings().prefix, &relation, &catalog),
            relation,
            partitioned,
        });
    }
    Ok(shapes)
}

/// A table the snapshot reads.
struct Table {
    shape: TableShape,
    relation: Relation,
    /// Published by its root: its partitions' rows are its own (read without `ONLY`).
    partitioned: bool,
}

/// Every row of every table, through a cursor, each held back until the next tells its
/// `source.snapshot` marker.
async fn send_rows(
    conn: &mut PgConnection,
    shapes: &[Table],
    sender: &mut Sender<'_>,
) -> Result<(), SnapshotError> {
    let mut held: Option<Held> = None;
    for (index, table) in shapes.iter().enumerate() {
        let relation = &table.relation;
        simple(
            conn,
            format!(
                "DECLARE sluice_snapshot NO SCROLL CURSOR FOR {}",
                select(relation, table.partitioned)
            ),
        )
        .await?;
        let mut first = true;
        loop {
            let rows = simple(conn, format!("FETCH FORWARD {BATCH} FROM sluice_snapshot")).await?;
            if rows.is_empty() {
                break;
            }
            for row in &rows {
                let row = tuple(relation, row)?;
                if let Some(before) = held.take() {
                    let marker = marker(
                        &before,
                        before.first && before.table == 0,
                        before.table != index,
                        false,
                    );
                    sender
                        .send(&shapes[before.table].shape, &before.row, marker)
                        .await?;
                }
                held = Some(Held {
                    table: index,
                    row,
                    first,
                });
                first = false;
            }
        }
        simple(conn, "CLOSE sluice_snapshot".to_owned()).await?;
    }
    if let Some(last) = held.take() {
        let marker = marker(&last, last.first && last.table == 0, true, true);
        sender
            .send(&shapes[last.table].shape, &last.row, marker)
            .await?;
    }
    Ok(())
}

/// A held row's `source.snapshot`, now that it is known whether it is the snapshot's first
/// (`very_first`: the first row of the first table; none when that table is empty, as in
/// Debezium), its table's last (`table_ended`) and the snapshot's (`snapshot_ended`).
fn marker(held: &Held, very_first: bool, table_ended: bool, snapshot_ended: bool) -> Snapshot {
    // Debezium's order: the snapshot's last, its first (only in the first table), a table's
    // last, a table's first.
    match (very_first, held.first, table_ended, snapshot_ended) {
        (_, _, _, true) => Snapshot::Last,
        (true, _, _, _) => Snapshot::First,
        (_, _, true, _) => Snapshot::LastInDataCollection,
        (_, true, _, _) => Snapshot::FirstInDataCollection,
        _ => Snapshot::True,
    }
}

/// Sends records, keeping at most [`IN_FLIGHT`] unacknowledged.
struct Sender<'a> {
    producer: &'a ResilientProducer,
    envelope: &'a Envelope,
    at: Position,
    queued: VecDeque<Delivery>,
    /// Records acknowledged.
    records: u64,
}

impl Sender<'_> {
    async fn send(
        &mut self,
        shape: &TableShape,
        row: &Tuple,
        snapshot: Snapshot,
    ) -> Result<(), SnapshotError> {
        let at = Position {
            snapshot,
            ..self.at
        };
        let record: Record = self.envelope.read(shape, row, &at, Utc::now())?;
        let headers: Vec<(&str, &[u8])> = record
            .headers
            .iter()
            .map(|(name, value)| (*name, value.as_bytes()))
            .collect();
        let delivery = self.producer.enqueue_maybe_tombstone(
            &record.topic,
            record.key.as_deref(),
            record.value.as_deref(),
            None,
            &headers,
        )?;
        self.queued.push_back(Box::pin(delivery));
        while self.queued.len() > IN_FLIGHT {
            self.acknowledged().await?;
        }
        Ok(())
    }

    async fn acknowledged(&mut self) -> Result<(), SnapshotError> {
        if let Some(oldest) = self.queued.pop_front() {
            oldest.await?;
            self.records += 1;
        }
        Ok(())
    }

    /// Waits for every queued record; how many Kafka acknowledged in all.
    async fn drain(mut self) -> Result<u64, SnapshotError> {
        while !self.queued.is_empty() {
            self.acknowledged().await?;
        }
        Ok(self.records)
    }
}

/// The publication's tables, as pgoutput would describe them (their columns in `attnum`
/// order, generated and dropped ones left out, the replica identity's flagged as key), each
/// with whether it is partitioned (published by its root: its partitions' rows are its own).
async fn published(
    conn: &mut PgConnection,
    publication: &str,
) -> Result<Vec<(bool, Relation)>, sqlx::Error> {
    let tables: Vec<(i64, String, String, String)> = sqlx::query_as(
        "SELECT c.oid::bigint, n.nspname::text, c.relname::text, \
         c.relreplident::text || c.relkind::text \
         FROM pg_publication_tables p JOIN pg_namespace n ON n.nspname = p.schemaname \
         JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = p.tablename \
         WHERE p.pubname = $1 AND c.relkind IN ('r', 'p') ORDER BY n.nspname::text COLLATE \"C\", c.relname::text COLLATE \"C\"",
    )
    .bind(publication)
    .fetch_all(&mut *conn)
    .await?;
    let mut relations = Vec::with_capacity(tables.len());
    for (oid, schema, table, kinds) in tables {
        // relreplident then relkind: `d` + `r`, `f` + `p` …
        let (identity, kind) = kinds.split_at(1.min(kinds.len()));
        let replica_identity = match identity {
            "f" => ReplicaIdentity::Full,
            "n" => ReplicaIdentity::Nothing,
            "i" => ReplicaIdentity::Index,
            _ => ReplicaIdentity::Default,
        };
        let columns: Vec<(String, i64, i32, bool)> = sqlx::query_as(
            "SELECT a.attname::text, a.atttypid::bigint, a.atttypmod, \
             coalesce(a.attnum = ANY (i.indkey), false) \
             FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid \
             AND CASE WHEN $2 = 'i' THEN i.indisreplident ELSE i.indisprimary END \
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped \
             AND a.attgenerated = '' ORDER BY a.attnum",
        )
        .bind(oid)
        .bind(identity)
        .fetch_all(&mut *conn)
        .await?;
        relations.push((
            kind == "p",
            Relation {
                oid: u32::try_from(oid).unwrap_or_default(),
                schema,
                table,
                replica_identity,
                columns: columns
                    .into_iter()
                    .map(|(name, type_oid, type_modifier, key)| Column {
                        name,
                        type_oid: u32::try_from(type_oid).unwrap_or_default(),
                        type_modifier,
                        is_key: match replica_identity {
                            ReplicaIdentity::Full => true,
                            ReplicaIdentity::Nothing => false,
                            ReplicaIdentity::Default | ReplicaIdentity::Index => key,
                        },
                    })
                    .collect(),
            },
        ));
    }
    Ok(relations)
}

/// Runs `sql` (one or more statements) over the simple query protocol.
async fn simple(
    conn: &mut PgConnection,
    sql: String,
) -> Result<Vec<sqlx::postgres::PgRow>, sqlx::Error> {
    sqlx::Executor::fetch_all(conn, sql.as_str()).await
}

/// `SELECT "a", "b" FROM ONLY "schema"."table"`: the relation's columns in its order, not its
/// inheritance children's rows (each is published, and read, as its own table); a
/// partitioned table published by its root without `ONLY` (its partitions' rows).
fn select(relation: &Relation, partitioned: bool) -> String {
    let quote = |name: &str| format!("\"{}\"", name.replace('"', "\"\""));
    let columns: Vec<String> = relation.columns.iter().map(|c| quote(&c.name)).collect();
    format!(
        "SELECT {} FROM {}{}.{}",
        if columns.is_empty() {
            "NULL".to_owned()
        } else {
            columns.join(", ")
        },
        if partitioned { "" } else { "ONLY " },
        quote(&relation.schema),
        quote(&relation.table)
    )
}

/// A row of the simple query protocol (each value its type's text output) as a tuple.
fn tuple(relation: &Relation, row: &sqlx::postgres::PgRow) -> Result<Tuple, SnapshotError> {
    let mut cells = Vec::with_capacity(relation.columns.len());
    for (i, column) in relation.columns.iter().enumerate() {
        let value = row.try_get_raw(i)?;
        if value.is_null() {
            cells.push(Cell::Null);
            continue;
        }
        let text = value.as_str().map_err(|e| SnapshotError::Value {
            table: format!("{}.{}", relation.schema, relation.table),
            column: column.name.clone(),
            detail: e.to_string(),
        })?;
        cells.push(Cell::Text(text.to_owned()));
    }
    Ok(cells)
}
