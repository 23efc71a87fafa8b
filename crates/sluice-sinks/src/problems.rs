//! What can be wrong with a mapping file before any database is asked.

/// A mapping file that cannot be used; `Display` names the file, the sink and the key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MappingError {
    /// The file cannot be read.
    #[error("{file}: cannot read: {message}")]
    Read {
        /// The file.
        file: String,
        /// The I/O error.
        message: String,
    },
    /// The text is not TOML.
    #[error("{file}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// The parser's message with line and column.
        message: String,
    },
    /// A key is unknown, missing or of the wrong type.
    #[error("{file}: sink `{sink}`{}: {message}", key_part(.key))]
    Key {
        /// The file.
        file: String,
        /// The sink's name (or `#n`, its position, when it has none).
        sink: String,
        /// The key at fault (`columns.score`), empty for the sink table itself.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The keys are well-formed but contradict each other.
    #[error("{file}: sink `{sink}`: {problem}")]
    Invalid {
        /// The file.
        file: String,
        /// The sink's name.
        sink: String,
        /// What is wrong.
        problem: MappingProblem,
    },
}

fn key_part(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!(", key `{key}`")
    }
}

impl MappingError {
    pub(crate) fn invalid(file: &str, sink: &str, problem: MappingProblem) -> Self {
        Self::Invalid {
            file: file.to_owned(),
            sink: sink.to_owned(),
            problem,
        }
    }
}

/// A contradiction inside one sink, found without a database.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MappingProblem {
    /// A column has none or several sources.
    #[error(
        "column `{column}`: exactly one of `field`, `const`, `kafka`, `lookup`, `key`, `header`, \
         `cdc` is required"
    )]
    SourceCount {
        /// The column.
        column: String,
    },
    /// `path` without `header`.
    #[error("column `{column}`: `path` reads into a header: it needs `header`")]
    PathWithoutHeader {
        /// The column.
        column: String,
    },
    /// A field path with an empty segment.
    #[error("column `{column}`: field path `{path}` has an empty segment")]
    BadFieldPath {
        /// The column.
        column: String,
        /// The path as written.
        path: String,
    },
    /// A constant that is not a string, number or boolean.
    #[error("column `{column}`: a constant must be a string, number or boolean, not {found}")]
    BadConstant {
        /// The column.
        column: String,
        /// The TOML type found.
        found: &'static str,
    },
    /// Value rules, `required` or `decimal` on a constant or Kafka source (nothing to check).
    #[error(
        "column `{column}`: value rules, `required` and `decimal` apply to a `field`, `lookup`, \
         `key` or `header` only"
    )]
    RulesWithoutField {
        /// The column.
        column: String,
    },
    /// A name that is not a legal topic, table, column or dead-letter kind.
    #[error("{what} `{name}` is not legal: {rule}")]
    IllegalName {
        /// What it names (`topic`, `table`, `column`, …).
        what: &'static str,
        /// The name.
        name: String,
        /// The accepted form.
        rule: &'static str,
    },
    /// No key columns.
    #[error("`key` must name at least one column")]
    NoKey,
    /// A key column without a source.
    #[error("column `{column}`: a key column must have a source in `columns`")]
    KeyNotMapped {
        /// The column.
        column: String,
    },
    /// The newest-wins column without a source.
    #[error("column `{column}`: the newest-wins column must have a source in `columns`")]
    GuardNotMapped {
        /// The column.
        column: String,
    },
    /// The newest-wins column is a key column (the guard would compare a value with itself).
    #[error("column `{column}`: the newest-wins column cannot be a key column")]
    GuardIsKey {
        /// The column.
        column: String,
    },
    /// A never-written column is a key column.
    #[error("column `{column}`: a key column cannot be never-written")]
    NeverWrittenIsKey {
        /// The column.
        column: String,
    },
    /// A never-written column has a source.
    #[error("column `{column}`: a never-written column cannot have a source in `columns`")]
    NeverWrittenIsMapped {
        /// The column.
        column: String,
    },
    /// An insert-only column that is a key or has no source.
    #[error("column `{column}`: an insert-only column must have a source and not be a key")]
    BadInsertOnly {
        /// The column.
        column: String,
    },
    /// An update policy with nothing left to update.
    #[error("`conflict = {policy}` but every mapped column is a key or insert-only")]
    NothingToUpdate {
        /// The policy.
        policy: String,
    },
    /// A column listed twice.
    #[error("column `{column}`: listed twice in `{list}`")]
    Duplicate {
        /// The column.
        column: String,
        /// The list (`key`, `insert_only`, `never_written`).
        list: &'static str,
    },
    /// A declared rule contradicts itself (`min` above `max`).
    #[error("column `{column}`: {rule}")]
    BadRule {
        /// The column.
        column: String,
        /// What is wrong.
        rule: String,
    },
    /// `debezium = { … }` on a sink whose records are not Kafka Connect's.
    #[error(
        "`debezium` declares a Kafka Connect source's value-handling modes: it needs `format = \
         \"debezium\"` or `\"connect-json\"`, not `\"{format}\"` (a `json` sink reads a decimal \
         string per column: `{{ field = \"amount\", decimal = \"string\" }}`)"
    )]
    ModesWithoutConnect {
        /// The sink's format.
        format: &'static str,
    },
    /// `value_format` on a sink that is not a Debezium one.
    #[error(
        "`value_format` goes with `format = \"debezium\"`; a plain record in a registry format \
         says so in `format` (`format = \"avro\"`, \"protobuf\" or \"json-schema\")"
    )]
    ValueFormatWithoutDebezium,
    /// `subject` on a sink whose values are not in a registry format.
    #[error(
        "`subject` names a schema registry subject: the sink's values need a registry format (avro, protobuf, json-schema)"
    )]
    SubjectWithoutRegistry,
    /// `batch_size = 0`.
    #[error("`batch_size` must be at least 1")]
    ZeroBatchSize,
    /// `batch_bytes = 0`.
    #[error("`batch_bytes` must be at least 1")]
    ZeroBatchBytes,
    /// Two sinks share a name.
    #[error("the name is used by another sink too")]
    DuplicateName,
    /// More than one of `topic`, `topics`, `topic_pattern`, or an empty `topics`.
    #[error(
        "name the topics once: one of `topic = \"t\"`, `topics = [\"a\", \"b\"]` (not empty) \
         or `topic_pattern = \"regex\"` (default: the sink's name)"
    )]
    TopicChoice,
    /// A `topic_pattern` that does not compile.
    #[error("topic_pattern `{pattern}` is not a regular expression: {reason}")]
    BadTopicPattern {
        /// The pattern.
        pattern: String,
        /// Why not.
        reason: String,
    },
    /// A `table` with placeholders that cannot name a table.
    #[error("table `{table}`: {reason}")]
    BadTableTemplate {
        /// The table as written.
        table: String,
        /// Why not.
        reason: String,
    },
    /// A sink with routes sets what each route sets for itself.
    #[error("`{key}` is set by each `[[sink.route]]` of a sink with routes, not by the sink")]
    RouteOwnKey {
        /// The key.
        key: &'static str,
    },
    /// `unrouted` on a sink without routes.
    #[error("`unrouted` needs `[[sink.route]]` entries")]
    UnroutedWithoutRoutes,
    /// A route's `when` cannot be read.
    #[error("`when`: {reason}")]
    BadWhen {
        /// Why not.
        reason: String,
    },
    /// A problem of one route.
    #[error("route {route}: {problem}")]
    InRoute {
        /// The route: its number from 1 in the file's order, and its table when known.
        route: String,
        /// What is wrong.
        problem: Box<MappingProblem>,
    },
    /// Two sinks read the same topic.
    #[error("topic `{topic}` is read by sink `{other}` too")]
    DuplicateTopic {
        /// The topic.
        topic: String,
        /// The other sink.
        other: String,
    },
}

impl MappingProblem {
    /// The problem as one of route `route` (`#2`, `#2 (table \`orders\`)`) of a sink.
    pub(crate) fn in_route(self, route: String) -> Self {
        Self::InRoute {
            route,
            problem: Box::new(self),
        }
    }
}
