//! A declared sink as the mapping file states it (not yet checked against a database).

use serde::{Deserialize, Serialize};
use std::fmt;

pub use super::checks::{Bound, ValueRules};
use super::modes::{DebeziumModes, DecimalForm};
use sluice_core::topics::Topics;

/// One declared sink: a topic landed in a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Sink {
    /// The sink's name: group names, metric labels, the CLI.
    pub name: String,
    /// The topics it reads.
    pub topics: Topics,
    /// The consumer group, when the file sets one (otherwise [`Sink::group`] derives it).
    pub group: Option<String>,
    /// The table it writes, `[schema.]table` — or, with placeholders, how each record names
    /// its table (`table_template`).
    pub table: String,
    /// `table` with placeholders (`{topic}`, `{1}`, `{source.schema}`…): the table of each
    /// record, planned when first met (docs/sinks.md#many-tables); `None`: one fixed table.
    pub table_template: Option<crate::TableTemplate>,
    /// The natural key: the `ON CONFLICT` columns.
    pub key: Vec<String>,
    /// What a second delivery of a key does.
    pub conflict: ConflictPolicy,
    /// Mapped columns written on insert and left out of the update.
    pub insert_only: Vec<String>,
    /// Table columns the statement never names (a default or another writer owns them).
    pub never_written: Vec<String>,
    /// Records per poll = per transaction, at most.
    pub batch_size: usize,
    /// Bytes of records (keys, values, headers) per transaction, at most: a batch closes at
    /// `batch_size` records or at this many bytes, whichever comes first; a record larger than
    /// this is a batch of its own (docs/ARCHITECTURE.md#memory).
    pub batch_bytes: usize,
    /// Each written column and its source, in the file's order (the decoder's order).
    pub columns: Vec<ColumnMapping>,
    /// `columns = "auto"`: every other writable column of the table reads the record field
    /// of its name, filled in from the live catalog (`auto.rs`); `columns` holds the
    /// explicit entries, which take precedence.
    pub auto_columns: bool,
    /// How a record value is wrapped.
    pub format: Format,
    /// How record values are written (`format = "avro"`, or `value_format` beside
    /// `format = "debezium"`).
    pub value_encoding: Encoding,
    /// How record keys are written (`key_format`).
    pub key_encoding: Encoding,
    /// The registry subject of the values (default: `<topic>-value`, the TopicNameStrategy).
    pub subject: Option<String>,
    /// What a tombstone (a record without a value) does.
    pub on_tombstone: OnTombstone,
    /// The Debezium (or Kafka Connect) source's value-handling modes: how a value whose
    /// schema does not name its type reads (a `debezium` or `connect-json` sink only).
    pub modes: DebeziumModes,
    /// `[[sink.route]]`: one topic's records to several tables, each route taking the
    /// records its condition holds for (docs/sinks.md#routes); empty: no routes.
    pub routes: Vec<crate::SinkRoute>,
    /// What a record no route takes does.
    pub unrouted: crate::Unrouted,
}

impl Sink {
    /// The consumer group: the file's, or `<prefix>.<name>` as for the seed pipelines.
    pub fn group(&self, prefix: &str) -> String {
        self.group
            .clone()
            .unwrap_or_else(|| format!("{prefix}.{}", self.name))
    }

    /// The sink as it writes `table`, one of the tables its `table_template` names.
    pub fn for_table(&self, table: &str) -> Sink {
        Sink {
            table: table.to_owned(),
            table_template: None,
            ..self.clone()
        }
    }

    /// Whether its records name their tables (a `table` with placeholders, or routes): each
    /// table is planned when a record first goes to it.
    pub fn many_tables(&self) -> bool {
        self.table_template.is_some() || !self.routes.is_empty()
    }

    /// The mapping of `column`, if it has one.
    pub fn mapping(&self, column: &str) -> Option<&ColumnMapping> {
        self.columns.iter().find(|c| c.column == column)
    }

    /// The columns a conflicting row updates: mapped, not a key, not insert-only.
    pub fn updated_columns(&self) -> impl Iterator<Item = &str> {
        self.columns
            .iter()
            .map(|c| c.column.as_str())
            .filter(|c| !self.key.iter().any(|k| k == c))
            .filter(|c| !self.insert_only.iter().any(|k| k == c))
    }
}

/// How a record's bytes are written: JSON text, or a schema registry format whose records
/// carry the writer's schema id in a wire header (docs/ARCHITECTURE.md#registry-formats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Encoding {
    /// JSON text.
    #[default]
    Json,
    /// Avro binary behind the wire header.
    Avro,
    /// Protobuf behind the wire header and its message indexes.
    Protobuf,
    /// JSON behind the wire header, its JSON Schema in the registry.
    JsonSchema,
}

impl Encoding {
    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Avro => "avro",
            Self::Protobuf => "protobuf",
            Self::JsonSchema => "json-schema",
        }
    }

    /// Whether its records carry a schema id the registry resolves.
    pub fn is_registry(self) -> bool {
        !matches!(self, Self::Json)
    }
}

/// How a record value is wrapped around the fields a sink reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// A JSON object.
    Json,
    /// Kafka Connect's JsonConverter with `schemas.enable=true`: `{"schema":…,"payload":…}`,
    /// the fields read from `payload`, Connect's logical types read by the schema.
    ConnectJson,
    /// A JSON object behind the schema registry's 5-byte wire header (magic byte 0, then the
    /// schema id, big-endian).
    SchemaRegistryJson,
    /// Debezium change events (`before`/`after`/`op`/`source`), with or without the Connect
    /// envelope: applied to the table, deletes included.
    Debezium,
}

impl Format {
    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::ConnectJson => "connect-json",
            Self::SchemaRegistryJson => "schema-registry-json",
            Self::Debezium => "debezium",
        }
    }

    /// What a tombstone does when the sink does not say: a Debezium delete event carries the
    /// delete and its tombstone only lets compaction forget the key, so it is ignored; in any
    /// other topic a record without a value is kept as a dead letter (nothing is dropped or
    /// deleted unless the sink asks for it).
    pub fn default_tombstone(self) -> OnTombstone {
        match self {
            Self::Debezium => OnTombstone::Ignore,
            _ => OnTombstone::DeadLetter,
        }
    }
}

/// What a tombstone (a record whose value is null) does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnTombstone {
    /// Deletes the row of its key (the key columns read from the record key).
    Delete,
    /// Nothing (the record is committed, no row changes).
    Ignore,
    /// A dead letter with the record's coordinates.
    DeadLetter,
}

impl OnTombstone {
    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Ignore => "ignore",
            Self::DeadLetter => "dead-letter",
        }
    }
}

/// What a second delivery of a natural key does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "policy")]
pub enum ConflictPolicy {
    /// The first delivery wins: `ON CONFLICT DO NOTHING`.
    InsertIgnore,
    /// The newest version by `column` wins: an older one never overwrites a newer row.
    NewestWins {
        /// The column compared (`WHERE EXCLUDED.column > table.column`).
        column: String,
    },
    /// Every delivery overwrites the row.
    AlwaysUpdate,
}

impl fmt::Display for ConflictPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InsertIgnore => f.write_str("insert-ignore"),
            Self::NewestWins { column } => write!(f, "newest-wins by {column}"),
            Self::AlwaysUpdate => f.write_str("always-update"),
        }
    }
}

/// One written column and where its value comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnMapping {
    /// The table column.
    pub column: String,
    /// Where its value comes from.
    pub source: Source,
    /// Whether the field must be present (`None`: when the column is NOT NULL).
    pub required: Option<bool>,
    /// Rules declared on top of the column's own limits.
    pub rules: ValueRules,
    /// A `numeric` column's own form (`decimal = "string"`: a string holding a decimal is
    /// read too), over the sink's `decimal` mode.
    pub decimal: Option<DecimalForm>,
    /// Filled in from the table by `columns = "auto"`, not written in the file: a registry
    /// subject without its field is no reason to refuse the sink.
    pub filled_in: bool,
}

/// Where a column's value comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// A field of the record's JSON value.
    Field(FieldPath),
    /// The same value for every row.
    Const(Constant),
    /// A coordinate of the Kafka record.
    Kafka(KafkaField),
    /// A field resolved through another table (`package_name` → `application_id`).
    Lookup(Lookup),
    /// A path into the record key's JSON object, or (`None`) the whole key as text.
    Key(Option<FieldPath>),
    /// A header's value: its bytes as text, or (`path`) a path into it read as JSON.
    Header {
        /// The header's name.
        name: String,
        /// A path into its JSON value.
        path: Option<FieldPath>,
    },
    /// A field of a Debezium change event's envelope.
    Cdc(CdcField),
}

/// A field of a Debezium change event's envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CdcField {
    /// `source.lsn`: the change's position in the source's write-ahead log (`bigint`).
    Lsn,
    /// `ts_ms`: when the connector processed the change (`bigint` milliseconds, or a
    /// `timestamptz`).
    TsMs,
    /// `op`: `c`, `r`, `u` or `d` (text).
    Op,
    /// `source.txId`: the source transaction (`bigint`).
    Txid,
}

impl CdcField {
    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lsn => "lsn",
            Self::TsMs => "ts_ms",
            Self::Op => "op",
            Self::Txid => "txid",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Field(path) => write!(f, "field {path}"),
            Self::Const(value) => write!(f, "const {value}"),
            Self::Kafka(field) => write!(f, "kafka {}", field.as_str()),
            Self::Lookup(lookup) => write!(
                f,
                "lookup {} in {}.{} -> {}",
                lookup.field, lookup.table, lookup.key_column, lookup.value_column
            ),
            Self::Key(None) => f.write_str("record key as text"),
            Self::Key(Some(path)) => write!(f, "record key {path}"),
            Self::Header { name, path: None } => write!(f, "header {name:?} as text"),
            Self::Header {
                name,
                path: Some(path),
            } => write!(f, "header {name:?} {path}"),
            Self::Cdc(field) => write!(f, "cdc {}", field.as_str()),
        }
    }
}

/// A dotted path into the record's JSON object (`device.os.version`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPath(Vec<String>);

impl FieldPath {
    /// Parses `a.b.c`; `None` when a segment is empty.
    pub fn parse(text: &str) -> Option<Self> {
        let segments: Vec<String> = text.split('.').map(str::to_owned).collect();
        segments
            .iter()
            .all(|s| !s.is_empty())
            .then_some(Self(segments))
    }

    /// The path of one top-level field named `name` (dots and all: a column's name).
    pub fn field(name: &str) -> Self {
        Self(vec![name.to_owned()])
    }

    /// The path's segments, outermost first.
    pub fn segments(&self) -> &[String] {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("."))
    }
}

/// A constant column value.
#[derive(Debug, Clone, PartialEq)]
pub enum Constant {
    /// A string (also the form of a constant UUID or timestamp).
    Text(String),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A boolean.
    Bool(bool),
}

impl fmt::Display for Constant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(text) => write!(f, "{text:?}"),
            Self::Int(int) => write!(f, "{int}"),
            Self::Float(float) => write!(f, "{float}"),
            Self::Bool(flag) => write!(f, "{flag}"),
        }
    }
}

/// A coordinate of the Kafka record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KafkaField {
    /// The record's timestamp (`timestamptz`).
    Timestamp,
    /// The topic name (up to 249 characters).
    Topic,
    /// The partition (`integer`).
    Partition,
    /// The offset (`bigint`).
    Offset,
    /// The record key, as UTF-8 text.
    Key,
    /// The schema id of a `schema-registry-json` record's wire header (`integer`).
    SchemaId,
}

impl KafkaField {
    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timestamp => "timestamp",
            Self::Topic => "topic",
            Self::Partition => "partition",
            Self::Offset => "offset",
            Self::Key => "key",
            Self::SchemaId => "schema_id",
        }
    }
}

/// A field resolved through `table`: the row whose `key_column` equals the field gives
/// `value_column`. Found values are cached per sink with a TTL; misses are not cached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The field holding the key (`package_name`).
    pub field: FieldPath,
    /// The table looked in.
    pub table: String,
    /// Its column matched against the field (unique).
    pub key_column: String,
    /// Its column written to the sink's column.
    pub value_column: String,
    /// The dead-letter kind of a record whose key is not in the table.
    pub unknown_kind: String,
}
