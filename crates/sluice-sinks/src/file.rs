//! Reading a mapping file: TOML text → [`Sink`]s, every key checked.
//!
//! The file is read in two steps so an error can name where it is: the TOML syntax first
//! (line and column), then each `[[sink]]` table on its own (the sink's name) and each of its
//! `columns` on its own (the column's name). Unknown keys are errors, never ignored.

use serde::Deserialize;
use toml::{Table, Value};

use super::model::{
    Bound, CdcField, ColumnMapping, ConflictPolicy, Constant, Encoding, FieldPath, Format,
    KafkaField, Lookup, OnTombstone, Sink, Source, ValueRules,
};
use super::modes::{DebeziumModes, DecimalForm};
use super::problems::{MappingError, MappingProblem};
use crate::{TableTemplate, Unrouted};

mod routes;
use sluice_core::topics::Topics;

/// Records per transaction when a sink does not say.
pub const DEFAULT_BATCH_SIZE: usize = 500;

/// Bytes of records per transaction when a sink does not say (4 MiB): 500 records of 8 KB.
/// Smaller records fill a batch by count first, so only large records meet it; a pipeline's
/// memory is then a few of these per writer (docs/ARCHITECTURE.md#memory).
pub const DEFAULT_BATCH_BYTES: usize = 4 * 1024 * 1024;

/// One `[[sink]]` table without its `columns`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSink {
    /// The sink's name: group names, metric labels, the CLI.
    name: String,
    /// The topic it reads (default: the name).
    topic: Option<String>,
    /// The topics it reads, instead of `topic`.
    topics: Option<Vec<String>>,
    /// Every topic whose whole name matches, instead of `topic`.
    topic_pattern: Option<String>,
    /// The consumer group (default: `<STORAGE_GROUP_PREFIX>.<name>`, as the seeds).
    group: Option<String>,
    /// The table it writes, `[schema.]table` (none with routes: each route names its own).
    table: Option<String>,
    /// The natural key: the columns of a unique constraint or index of the table (with
    /// `columns = "auto"`, default: the primary key).
    #[serde(default)]
    key: Vec<String>,
    /// What a second delivery of a key does (default: `always-update`, the upsert of the
    /// JDBC sinks).
    conflict: Option<RawConflict>,
    /// Mapped columns written when the row is inserted and never updated afterwards.
    #[serde(default)]
    insert_only: Vec<String>,
    /// Table columns sluice never writes (owned by a default or by someone else).
    #[serde(default)]
    never_written: Vec<String>,
    /// Records per poll = per transaction.
    batch_size: Option<usize>,
    /// Bytes of records per transaction.
    batch_bytes: Option<usize>,
    /// How a record value is wrapped (default: a JSON object), or the registry format of a
    /// plain record.
    format: Option<RawFormat>,
    /// How a `debezium` sink's values are written (default: JSON).
    value_format: Option<Encoding>,
    /// How record keys are written (default: JSON).
    key_format: Option<Encoding>,
    /// The registry subject of the values (default: `<topic>-value`).
    subject: Option<String>,
    /// What a tombstone does (default: by the format).
    on_tombstone: Option<OnTombstone>,
    /// The source connector's value-handling modes (`debezium` and `connect-json` sinks).
    debezium: Option<DebeziumModes>,
    /// What a record no `[[sink.route]]` takes does (default: a dead letter).
    unrouted: Option<Unrouted>,
}

/// `format`: an envelope ([`Format`]), or a plain record in a registry format.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum RawFormat {
    Json,
    ConnectJson,
    SchemaRegistryJson,
    Debezium,
    Avro,
    Protobuf,
    JsonSchema,
}

impl RawFormat {
    /// The envelope and the values' encoding it means.
    fn split(self) -> (Format, Option<Encoding>) {
        match self {
            Self::Json => (Format::Json, None),
            Self::ConnectJson => (Format::ConnectJson, None),
            Self::SchemaRegistryJson => (Format::SchemaRegistryJson, None),
            Self::Debezium => (Format::Debezium, None),
            Self::Avro => (Format::Json, Some(Encoding::Avro)),
            Self::Protobuf => (Format::Json, Some(Encoding::Protobuf)),
            Self::JsonSchema => (Format::Json, Some(Encoding::JsonSchema)),
        }
    }
}

/// `"insert-ignore"`, `"always-update"` or `{ newest-wins = "<column>" }`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(super) enum RawConflict {
    InsertIgnore,
    AlwaysUpdate,
    NewestWins(String),
}

/// One entry of a sink's `columns` table: where the column's value comes from.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawColumn {
    /// A JSON field path of the record value (`a.b` for nested objects).
    field: Option<String>,
    /// A constant.
    #[serde(rename = "const")]
    constant: Option<Value>,
    /// A coordinate of the Kafka record.
    kafka: Option<KafkaField>,
    /// A field resolved through another table.
    lookup: Option<RawLookup>,
    /// A path into the record key's JSON (`""`: the whole key as text).
    key: Option<String>,
    /// A header's name.
    header: Option<String>,
    /// With `header`: a path into the header read as JSON.
    path: Option<String>,
    /// A field of a Debezium change event's envelope.
    cdc: Option<CdcField>,
    /// Whether the field must be present (default: when the column is NOT NULL without a
    /// default).
    required: Option<bool>,
    /// Smallest number allowed (for arrays: of each element).
    min: Option<Bound>,
    /// Largest number allowed (for arrays: of each element).
    max: Option<Bound>,
    /// Fewest characters of a text (for arrays: of each element).
    min_length: Option<usize>,
    /// Most characters of a text (for arrays: of each element).
    max_length: Option<usize>,
    /// Exact element count of an array.
    items: Option<usize>,
    /// Most elements of an array.
    max_items: Option<usize>,
    /// A `numeric` column's form: `"string"` reads a string holding a decimal too.
    decimal: Option<DecimalForm>,
}

/// `{ field, table, key, value, unknown }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLookup {
    field: String,
    table: String,
    key: String,
    value: String,
    unknown: String,
}

/// The entry of `[sink.columns]` that fills in the table's other columns: `"*" = "auto"`
/// (no column can be called `*`).
const AUTO_ENTRY: &str = "*";

/// A TOML error's text, with a hint for the mistake it hides: `columns = "auto"` and a
/// `[sink.columns]` table in one sink are one key given twice.
fn syntax_message(error: &toml::de::Error, text: &str) -> String {
    let message = error.to_string().trim_end().to_owned();
    let auto = text.lines().any(|line| {
        let line = line.replace(' ', "");
        line.starts_with("columns=\"auto\"") || line.starts_with("columns='auto'")
    });
    if auto && error.message().contains("duplicate key") {
        format!(
            "{message}\n`columns = \"auto\"` and a `[sink.columns]` table are the same key: to \
             map some columns and fill in the rest, write `\"*\" = \"auto\"` inside \
             `[sink.columns]`"
        )
    } else {
        message
    }
}

/// Parses a mapping file's text; `file` names it in errors.
pub fn parse_sinks(file: &str, text: &str) -> Result<Vec<Sink>, MappingError> {
    let mut document: Table = text
        .parse()
        .map_err(|e: toml::de::Error| MappingError::Syntax {
            file: file.to_owned(),
            message: syntax_message(&e, text),
        })?;
    let at_file = |sink: &str, key: &str, message: String| MappingError::Key {
        file: file.to_owned(),
        sink: sink.to_owned(),
        key: key.to_owned(),
        message,
    };
    let sinks = match document.remove("sink") {
        None => Vec::new(),
        Some(Value::Array(sinks)) => sinks,
        Some(_) => {
            return Err(at_file(
                "",
                "sink",
                "must be an array of tables `[[sink]]`".into(),
            ));
        }
    };
    if let Some(other) = document.keys().next() {
        return Err(at_file(
            "",
            other,
            "unknown top-level key (expected `[[sink]]`)".into(),
        ));
    }
    sinks
        .into_iter()
        .enumerate()
        .map(|(index, value)| parse_sink(file, index, value))
        .collect()
}

/// Where in the file an error is: the file and the sink (its name, or `#n`).
pub(super) struct At<'a> {
    file: &'a str,
    sink: &'a str,
}

impl At<'_> {
    /// A key of the sink that is unknown, missing or of the wrong type.
    pub(super) fn key(&self, key: &str, message: String) -> MappingError {
        MappingError::Key {
            file: self.file.to_owned(),
            sink: self.sink.to_owned(),
            key: key.to_owned(),
            message,
        }
    }

    /// A contradiction of the sink's keys.
    pub(super) fn invalid(&self, problem: MappingProblem) -> MappingError {
        MappingError::invalid(self.file, self.sink, problem)
    }
}

/// The `index`th `[[sink]]` table, its routes included.
fn parse_sink(file: &str, index: usize, value: Value) -> Result<Sink, MappingError> {
    let number = format!("#{}", index + 1);
    let Value::Table(mut table) = value else {
        let at = At {
            file,
            sink: &number,
        };
        return Err(at.key("sink", "must be a table".into()));
    };
    let label = match table.get("name") {
        Some(Value::String(name)) => name.clone(),
        _ => number,
    };
    let at = At { file, sink: &label };
    let routes = routes::take_routes(&mut table, &at)?;
    let (columns, auto_columns) =
        columns_entry(table.remove("columns")).map_err(|(key, message)| at.key(key, message))?;
    let raw: RawSink = Value::Table(table)
        .try_into()
        .map_err(|e: toml::de::Error| at.key("", e.message().to_owned()))?;
    let mapped = mappings(columns, "columns").map_err(|error| error.at(&at))?;
    let mut parsed = sink(raw, mapped, auto_columns).map_err(|p| at.invalid(p))?;
    routes::add_routes(&mut parsed, routes, &at)?;
    if parsed.routes.is_empty() && parsed.table.is_empty() {
        return Err(at.key(
            "table",
            "missing: the table the sink writes, or `[[sink.route]]` entries".into(),
        ));
    }
    Ok(parsed)
}

/// Why a `columns` table cannot be read: a key's type, or a contradiction.
pub(super) enum ColumnsError {
    Key(String, String),
    Invalid(MappingProblem),
}

impl ColumnsError {
    pub(super) fn at(self, at: &At<'_>) -> MappingError {
        match self {
            Self::Key(key, message) => at.key(&key, message),
            Self::Invalid(problem) => at.invalid(problem),
        }
    }
}

/// Each entry of a `columns` table (`prefix` names it in errors) as a column's mapping.
pub(super) fn mappings(columns: Table, prefix: &str) -> Result<Vec<ColumnMapping>, ColumnsError> {
    let mut mapped = Vec::with_capacity(columns.len());
    for (column, value) in columns {
        let raw_column: RawColumn = value.try_into().map_err(|e: toml::de::Error| {
            ColumnsError::Key(format!("{prefix}.{column}"), e.message().to_owned())
        })?;
        mapped.push(column_mapping(column.clone(), raw_column).map_err(ColumnsError::Invalid)?);
    }
    Ok(mapped)
}

/// Whether a conflict can update something: some mapped column is neither a key nor
/// insert-only (with `columns = "auto"`, known only against the table: assumed).
pub(super) fn updates(
    auto_columns: bool,
    columns: &[ColumnMapping],
    key: &[String],
    insert_only: &[String],
) -> bool {
    auto_columns
        || columns
            .iter()
            .any(|c| !key.contains(&c.column) && !insert_only.contains(&c.column))
}

/// `conflict`, or — none given — the JDBC sinks' upsert when a conflict can update
/// something, else the first delivery wins (what an upsert of such a row does).
pub(super) fn conflict(raw: Option<RawConflict>, updates: bool) -> ConflictPolicy {
    match raw {
        Some(RawConflict::InsertIgnore) => ConflictPolicy::InsertIgnore,
        Some(RawConflict::AlwaysUpdate) => ConflictPolicy::AlwaysUpdate,
        Some(RawConflict::NewestWins(column)) => ConflictPolicy::NewestWins { column },
        None if updates => ConflictPolicy::AlwaysUpdate,
        None => ConflictPolicy::InsertIgnore,
    }
}

/// `columns`: a table of columns (with `"*" = "auto"`, the table's others filled in too), or
/// `"auto"` alone; whether the table fills them in. An error names the key and why.
pub(super) fn columns_entry(value: Option<Value>) -> Result<(Table, bool), (&'static str, String)> {
    match value {
        Some(Value::Table(mut columns)) => match columns.remove(AUTO_ENTRY) {
            None => Ok((columns, false)),
            Some(Value::String(auto)) if auto == "auto" => Ok((columns, true)),
            Some(_) => Err((
                "columns.\"*\"",
                "must be \"auto\" (every other column of the table from the field of its name)"
                    .into(),
            )),
        },
        Some(Value::String(auto)) if auto == "auto" => Ok((Table::new(), true)),
        Some(_) => Err(("columns", "must be a table of columns, or \"auto\"".into())),
        None => Ok((Table::new(), false)),
    }
}

/// `topic`, `topics` or `topic_pattern` (at most one; default: the sink's name).
fn topics(raw: &mut RawSink) -> Result<Topics, MappingProblem> {
    match (
        raw.topic.take(),
        raw.topics.take(),
        raw.topic_pattern.take(),
    ) {
        (None, None, None) => Ok(Topics::one(raw.name.clone())),
        (Some(topic), None, None) => Ok(Topics::one(topic)),
        (None, Some(topics), None) if !topics.is_empty() => Ok(Topics::Named(topics)),
        (None, None, Some(pattern)) => match Topics::compile(&pattern) {
            Ok(_) => Ok(Topics::Pattern(pattern)),
            Err(reason) => Err(MappingProblem::BadTopicPattern { pattern, reason }),
        },
        _ => Err(MappingProblem::TopicChoice),
    }
}

/// The envelope and the values' encoding: `format = "avro"` (a plain record), or
/// `format = "debezium"` with `value_format = "avro"`.
fn encodings(raw: &RawSink) -> Result<(Format, Encoding), MappingProblem> {
    let (format, plain) = raw.format.unwrap_or(RawFormat::Json).split();
    let value = match (plain, raw.value_format) {
        (Some(encoding), None) => encoding,
        (None, None) => Encoding::Json,
        (None, Some(encoding)) if format == Format::Debezium => encoding,
        (_, Some(_)) => return Err(MappingProblem::ValueFormatWithoutDebezium),
    };
    if raw.subject.is_some() && !value.is_registry() {
        return Err(MappingProblem::SubjectWithoutRegistry);
    }
    Ok((format, value))
}

fn sink(
    mut raw: RawSink,
    columns: Vec<ColumnMapping>,
    auto_columns: bool,
) -> Result<Sink, MappingProblem> {
    let (format, value_encoding) = encodings(&raw)?;
    if raw.debezium.is_some() && !matches!(format, Format::Debezium | Format::ConnectJson) {
        return Err(MappingProblem::ModesWithoutConnect {
            format: format.as_str(),
        });
    }
    let updates = updates(auto_columns, &columns, &raw.key, &raw.insert_only);
    let table = raw.table.take().unwrap_or_default();
    let table_template =
        TableTemplate::parse(&table).map_err(|reason| MappingProblem::BadTableTemplate {
            table: table.clone(),
            reason,
        })?;
    Ok(Sink {
        topics: topics(&mut raw)?,
        name: raw.name,
        group: raw.group,
        table,
        table_template,
        key: raw.key,
        conflict: conflict(raw.conflict, updates),
        insert_only: raw.insert_only,
        never_written: raw.never_written,
        batch_size: raw.batch_size.unwrap_or(DEFAULT_BATCH_SIZE),
        batch_bytes: raw.batch_bytes.unwrap_or(DEFAULT_BATCH_BYTES),
        columns,
        auto_columns,
        format,
        value_encoding,
        key_encoding: raw.key_format.unwrap_or_default(),
        subject: raw.subject,
        on_tombstone: raw
            .on_tombstone
            .unwrap_or_else(|| format.default_tombstone()),
        modes: raw.debezium.unwrap_or_default(),
        routes: Vec::new(),
        unrouted: raw.unrouted.unwrap_or_default(),
    })
}

/// One column's source: exactly one of `field`, `const`, `kafka`, `lookup`.
fn column_mapping(column: String, raw: RawColumn) -> Result<ColumnMapping, MappingProblem> {
    let given = [
        raw.field.is_some(),
        raw.constant.is_some(),
        raw.kafka.is_some(),
        raw.lookup.is_some(),
        raw.key.is_some(),
        raw.header.is_some(),
        raw.cdc.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(MappingProblem::SourceCount { column });
    }
    let path = |text: String| {
        FieldPath::parse(&text).ok_or_else(|| MappingProblem::BadFieldPath {
            column: column.clone(),
            path: text,
        })
    };
    if raw.path.is_some() && raw.header.is_none() {
        return Err(MappingProblem::PathWithoutHeader { column });
    }
    let source = if let Some(field) = raw.field {
        Source::Field(path(field)?)
    } else if let Some(value) = raw.constant {
        Source::Const(constant(&column, value)?)
    } else if let Some(kafka) = raw.kafka {
        Source::Kafka(kafka)
    } else if let Some(lookup) = raw.lookup {
        Source::Lookup(Lookup {
            field: path(lookup.field)?,
            table: lookup.table,
            key_column: lookup.key,
            value_column: lookup.value,
            unknown_kind: lookup.unknown,
        })
    } else if let Some(key) = raw.key {
        Source::Key(if key.is_empty() {
            None
        } else {
            Some(path(key)?)
        })
    } else if let Some(name) = raw.header {
        Source::Header {
            name,
            path: raw.path.map(path).transpose()?,
        }
    } else if let Some(cdc) = raw.cdc {
        Source::Cdc(cdc)
    } else {
        return Err(MappingProblem::SourceCount { column });
    };
    let rules = ValueRules {
        min: raw.min,
        max: raw.max,
        min_length: raw.min_length,
        max_length: raw.max_length,
        items: raw.items,
        max_items: raw.max_items,
    };
    if !matches!(
        source,
        Source::Field(_) | Source::Lookup(_) | Source::Key(_) | Source::Header { .. }
    ) && (rules != ValueRules::default() || raw.required.is_some() || raw.decimal.is_some())
    {
        return Err(MappingProblem::RulesWithoutField { column });
    }
    Ok(ColumnMapping {
        column,
        source,
        required: raw.required,
        rules,
        decimal: raw.decimal,
        filled_in: false,
    })
}

fn constant(column: &str, value: Value) -> Result<Constant, MappingProblem> {
    match value {
        Value::String(text) => Ok(Constant::Text(text)),
        Value::Integer(int) => Ok(Constant::Int(int)),
        Value::Float(float) => Ok(Constant::Float(float)),
        Value::Boolean(flag) => Ok(Constant::Bool(flag)),
        other => Err(MappingProblem::BadConstant {
            column: column.to_owned(),
            found: other.type_str(),
        }),
    }
}
