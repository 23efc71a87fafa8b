//! Declared sinks: a topic landed in a table from a mapping file — the one engine of the
//! storage consumer (the seed topics are mapping files too, `sluice_core::pipeline`), and the
//! messages it decodes. Depends on `sluice-core` only and does no I/O.
//!
//! A mapping file (TOML, `[[sink]]` tables) names per sink its topic, group, table, natural
//! key, conflict policy and each column's source. This module reads it ([`parse_sinks`]),
//! checks what needs no database ([`check_sinks`]), and — given the tables' shapes read from
//! the catalog by the PostgreSQL adapter — validates each sink and plans it ([`plan_sink`]):
//! the one `INSERT … ON CONFLICT` statement per batch, and each column's checks derived from
//! its type, so that decoding can reject what the table would reject.
//!
//! Invariant: a sink that plans without error names only existing columns, its key has a
//! unique constraint on exactly those columns, every source fits its column's type, and
//! every NOT NULL column without a default gets a value. [`SinkDecoder`] decodes a record by a
//! plan with reasons naming the field and keeps one row per key by the policy's survivor
//! rule; the PostgreSQL adapter resolves lookups and binds the statement, and the storage
//! pipeline runs it (`sluice_storage::sink::Declared`).

mod checks;
mod consistency;
mod decimal;
mod decode;
mod envelope;
mod equality;
mod file;
mod forms;
mod held;
pub mod infinity;
mod keep;
pub mod messages;
mod model;
mod modes;
mod names;
mod plan;
mod problems;
mod record;
mod route;
mod rows;
mod scan;
pub mod schemas;
mod seeds;
mod statement;
mod table;
mod template;
mod transcode;
pub mod wire;

pub use checks::Check;
pub use consistency::{check_sink, check_sinks};
pub use decode::{Cell, RecordMeta, SinkDecoder};
pub use envelope::UNAVAILABLE_VALUE;
pub use envelope::change_source;
pub use file::{DEFAULT_BATCH_BYTES, DEFAULT_BATCH_SIZE, parse_sinks};
pub use forms::{Interval, bytes_text, date_text, time_text};
pub use held::{
    EXPIRED_HELD, HELD_ROWS, HeldStatements, LOCK_HELD, NEXT_HELD, ORPHAN_HELD, TAKE_HELD,
};
pub use keep::Keep;
pub use model::{
    Bound, CdcField, ColumnMapping, ConflictPolicy, Constant, Encoding, FieldPath, Format,
    KafkaField, Lookup, OnTombstone, Sink, Source, ValueRules,
};
pub use modes::{
    BinaryMode, DEFAULT_KEY_CHANGE_WAIT, DebeziumModes, DecimalForm, DecimalMode, TimeMode,
};
pub use names::{is_column_name, is_table_name, quote_ident, quote_table};
pub use plan::{ColumnPlan, SinkError, SinkPlan, plan_sink, plan_template, with_table_columns};
pub use problems::{MappingError, MappingProblem};
pub use record::{Decoded, Moved, OLD_KEY_HEADER, RowOp};
pub use route::{RouteInput, SinkRoute, UNROUTED, Unrouted, When, WhenSource};
pub use rows::SinkRow;
pub use seeds::{SEED_APPLICATIONS_TABLE, seed_mapping, seed_sink, use_applications_table};
pub use sluice_core::topics::{MAX_PATTERN_CHARS, Topics};
pub use statement::{MOVED_ROWS, StatementColumn, raised_reason, upsert_statement};
pub use table::{ColumnShape, SqlType, TableShape};
pub use template::{Named, TableTemplate};
pub use wire::{Header, SchemaError, SchemaKind, WireError, WriterSchema};

#[cfg(test)]
mod tests;
