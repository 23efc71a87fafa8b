//! The typed change model a pgoutput stream decodes into: what a Debezium envelope is built
//! from (docs/capture.md#the-event-model).
//!
//! Values stay PostgreSQL's text output (pgoutput's text format): the envelope maps each to
//! Debezium's logical type by the column's type OID, so nothing here interprets a value.

use crate::lsn::Lsn;
use chrono::{DateTime, Utc};
use std::sync::Arc;

/// A type OID (`pg_type.oid`), e.g. 20 = `int8`, 1700 = `numeric`.
pub type TypeOid = u32;

/// What a table's UPDATE and DELETE carry of the old row (`ALTER TABLE … REPLICA IDENTITY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaIdentity {
    /// `DEFAULT`: the primary key's columns (an UPDATE carries them only when they change).
    Default,
    /// `NOTHING`: no old row at all.
    Nothing,
    /// `FULL`: every column of the old row.
    Full,
    /// `USING INDEX`: the columns of the named unique index.
    Index,
}

/// One column of a published table, as the Relation message describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// The column's name.
    pub name: String,
    /// Its type's OID.
    pub type_oid: TypeOid,
    /// `atttypmod`: e.g. precision and scale of a `numeric(12,2)`, -1 when none.
    pub type_modifier: i32,
    /// Part of the replica identity (the key Debezium's record key is built from).
    pub is_key: bool,
}

/// A published table as of the changes that follow its Relation message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// The table's OID (`pg_class.oid`); changes name their table by it.
    pub oid: u32,
    /// Its schema (`public`).
    pub schema: String,
    /// Its name.
    pub table: String,
    /// What its UPDATEs and DELETEs carry of the old row.
    pub replica_identity: ReplicaIdentity,
    /// Its columns in `attnum` order (dropped and generated columns left out).
    pub columns: Vec<Column>,
}

/// One column's value in a tuple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// SQL NULL.
    Null,
    /// An out-of-line (TOASTed) value the UPDATE did not change: pgoutput does not send it.
    /// Debezium writes `__debezium_unavailable_value` in its place.
    UnchangedToast,
    /// The value in PostgreSQL's text output format (`1234.50`, `2026-03-04 05:06:07+02`).
    Text(String),
    /// The value in the type's binary send format (only with pgoutput's `binary` option).
    Binary(Vec<u8>),
}

/// A row's values, one cell per column of its relation, in the relation's column order.
pub type Tuple = Vec<Cell>;

/// The old row an UPDATE or DELETE carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OldRow {
    /// Only the replica identity's columns are set, the others are `Cell::Null`
    /// (identity `DEFAULT` or `USING INDEX`).
    Key(Tuple),
    /// The whole old row (identity `FULL`).
    Full(Tuple),
}

/// A row change in a published table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A new row.
    Insert {
        /// The table.
        relation: Arc<Relation>,
        /// The row.
        new: Tuple,
    },
    /// A changed row. `old` is `None` when the identity is `DEFAULT` and the key did not
    /// change (so a key change is exactly an update with `Some(OldRow::Key)`).
    Update {
        /// The table.
        relation: Arc<Relation>,
        /// The old key or row, when pgoutput sent one.
        old: Option<OldRow>,
        /// The new row; out-of-line values it did not change are `Cell::UnchangedToast`.
        new: Tuple,
    },
    /// A removed row, known by its old key (or the whole old row under `FULL`).
    Delete {
        /// The table.
        relation: Arc<Relation>,
        /// The old key or row.
        old: OldRow,
    },
    /// One TRUNCATE statement over one or more published tables.
    Truncate {
        /// The tables emptied (CASCADE already expanded by PostgreSQL).
        relations: Vec<Arc<Relation>>,
        /// `TRUNCATE … CASCADE`.
        cascade: bool,
        /// `TRUNCATE … RESTART IDENTITY`.
        restart_identity: bool,
    },
}

/// What the capture stream hands on, in WAL order.
#[derive(Debug, Clone, PartialEq)]
pub enum CaptureEvent {
    /// A transaction starts; its changes follow, then its `Commit`.
    Begin {
        /// The transaction's id.
        xid: u32,
        /// The LSN of its commit record.
        final_lsn: Lsn,
        /// When it committed.
        commit_time: DateTime<Utc>,
    },
    /// The table's description, sent before its first change in the session and again
    /// after its shape changed. Changes already carry it; this is for a schema history.
    Relation(Arc<Relation>),
    /// A row change, at the LSN of its own WAL record (Debezium's `source.lsn`).
    Change {
        /// The change's WAL position.
        lsn: Lsn,
        /// The change.
        change: Change,
    },
    /// `pg_logical_emit_message`: the outbox with no table (docs/capture.md#the-outbox-over-wal).
    Message {
        /// Emitted inside a transaction (delivered at its commit) or not (at once).
        transactional: bool,
        /// The message's WAL position.
        lsn: Lsn,
        /// The prefix it was emitted with (the routing key).
        prefix: String,
        /// Its content.
        content: Vec<u8>,
    },
    /// The transaction committed. Acknowledging `end_lsn` (after Kafka acknowledged every
    /// event of the transaction and of those before) lets the slot forget them.
    Commit {
        /// The LSN of the commit record.
        commit_lsn: Lsn,
        /// The LSN just past it: the position to acknowledge.
        end_lsn: Lsn,
        /// When it committed.
        commit_time: DateTime<Utc>,
    },
    /// The server's keepalive: the WAL it has written, no change of ours before it pending.
    KeepAlive {
        /// The server's current WAL end.
        wal_end: Lsn,
    },
}
