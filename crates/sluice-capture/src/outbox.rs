//! The outbox over WAL (docs/capture.md#the-outbox-over-wal): sluice's outbox table and
//! logical decoding messages relayed as the records `sluice dispatch` publishes, with no
//! change-event envelope.
//!
//! - An insert into an outbox table (`CAPTURE_OUTBOX_TABLES`) whose `status` is `CDC` is one
//!   record, as Debezium's Outbox Event Router writes it with the settings of
//!   docs/outbox.md: topic from `topic`, key from `partition_key`, partition from `partition`
//!   (or the key's hash), sluice's four headers (`sluice-event-id`, `-event-type`,
//!   `-aggregate-type`, `-aggregate-id`, in that order) and the payload as PostgreSQL's text
//!   of its `jsonb`. A row of another status is the dispatcher's and is not relayed (the
//!   publication should leave it out: `WHERE (status = 'CDC')`); updates and deletes of the
//!   table (its life cycle, its retention) are not relayed either, as the router skips them.
//! - A message `pg_logical_emit_message(true, '<prefix><topic>[/<key>]', payload)` whose
//!   prefix starts with `CAPTURE_MESSAGE_PREFIX` is one record of its payload to `<topic>`,
//!   with the key after the first `/` (none without one): an outbox with no table at all.
//!   A message under another prefix is not ours and is skipped.

use crate::debezium::Record;
use crate::model::{Cell, Relation, Tuple};
use sluice_outbox::{
    AGGREGATE_ID_HEADER, AGGREGATE_TYPE_HEADER, EVENT_ID_HEADER, EVENT_TYPE_HEADER,
};

/// What `sluice capture` relays as outbox records instead of change events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routing {
    /// Outbox tables, `schema.table` (`CAPTURE_OUTBOX_TABLES`).
    pub outbox_tables: Vec<String>,
    /// The prefix of the logical messages relayed (`CAPTURE_MESSAGE_PREFIX`); `None`: none.
    pub message_prefix: Option<String>,
}

impl Routing {
    /// Whether `relation` is an outbox table.
    pub fn is_outbox(&self, relation: &Relation) -> bool {
        self.outbox_tables
            .iter()
            .any(|t| t.split_once('.') == Some((relation.schema.as_str(), relation.table.as_str())))
    }
}

/// Why a row or a message cannot be relayed. Fatal for the session: skipping it would lose
/// an event, and the slot keeps it until the cause is fixed (docs/capture.md#the-outbox-over-wal).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// A table named in `CAPTURE_OUTBOX_TABLES` lacks a column of sluice's outbox.
    #[error(
        "{table} is named in CAPTURE_OUTBOX_TABLES but has no column `{column}`: not sluice's outbox table (sluice migrate makes it)"
    )]
    NotAnOutbox {
        /// `schema.table`.
        table: String,
        /// The missing column.
        column: &'static str,
    },
    /// A table named in `CAPTURE_OUTBOX_TABLES` does not exist (its rows would be relayed as
    /// change events of another name, or not at all).
    #[error(
        "{table} is named in CAPTURE_OUTBOX_TABLES but is no table of the source database (names are exact: schema.table)"
    )]
    NoSuchTable {
        /// `schema.table`.
        table: String,
    },
    /// A value of an outbox row cannot make its record.
    #[error("outbox row of {table}: column `{column}` {problem}")]
    Value {
        /// `schema.table`.
        table: String,
        /// The column.
        column: &'static str,
        /// What is wrong with it.
        problem: String,
    },
    /// A message under `CAPTURE_MESSAGE_PREFIX` names no valid topic.
    #[error(
        "logical message with prefix {prefix:?}: after {ours:?} comes no topic name (letters, digits, '.', '_', '-'; at most 249), then optionally '/' and the key"
    )]
    MessageTopic {
        /// The message's prefix.
        prefix: String,
        /// `CAPTURE_MESSAGE_PREFIX`.
        ours: String,
    },
}

/// The columns of sluice's outbox a record is built from.
const COLUMNS: [&str; 9] = [
    "id",
    "topic",
    "partition_key",
    "partition",
    "payload",
    "event_type",
    "aggregate_type",
    "aggregate_id",
    "status",
];

/// Where an outbox table's columns are in its rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxShape {
    table: String,
    at: [usize; 9],
}

impl OutboxShape {
    /// The shape of `relation`, which must have every column of sluice's outbox.
    pub fn new(relation: &Relation) -> Result<Self, RouteError> {
        let table = format!("{}.{}", relation.schema, relation.table);
        let mut at = [0; 9];
        for (slot, column) in at.iter_mut().zip(COLUMNS) {
            *slot = relation
                .columns
                .iter()
                .position(|c| c.name == column)
                .ok_or_else(|| RouteError::NotAnOutbox {
                    table: table.clone(),
                    column,
                })?;
        }
        Ok(Self { table, at })
    }

    /// The record of an inserted row; `None` for a row that is not a CDC row.
    pub fn record(&self, new: &Tuple) -> Result<Option<Record>, RouteError> {
        let [
            id,
            topic,
            key,
            partition,
            payload,
            event_type,
            aggregate_type,
            aggregate_id,
            status,
        ] = self.at;
        if self.text(new, status, "status")? != Some("CDC") {
            return Ok(None);
        }
        let partition = match self.text(new, partition, "partition")? {
            None => None,
            Some(text) => Some(
                text.parse::<i32>()
                    .map_err(|e| self.value("partition", e))?,
            ),
        };
        let required = |index: usize, column: &'static str| {
            self.text(new, index, column)?
                .ok_or_else(|| self.value(column, "is NULL"))
        };
        let topic = required(topic, "topic")?;
        if !is_topic_name(topic) {
            return Err(self.value(
                "topic",
                format!(
                    "{topic:?} is not a topic name (letters, digits, '.', '_', '-'; at most 249)"
                ),
            ));
        }
        Ok(Some(Record {
            topic: topic.to_owned(),
            key: Some(required(key, "partition_key")?.as_bytes().to_vec()),
            value: Some(required(payload, "payload")?.as_bytes().to_vec()),
            headers: vec![
                (EVENT_ID_HEADER, required(id, "id")?.to_owned()),
                (
                    EVENT_TYPE_HEADER,
                    required(event_type, "event_type")?.to_owned(),
                ),
                (
                    AGGREGATE_TYPE_HEADER,
                    required(aggregate_type, "aggregate_type")?.to_owned(),
                ),
                (
                    AGGREGATE_ID_HEADER,
                    required(aggregate_id, "aggregate_id")?.to_owned(),
                ),
            ],
            partition,
        }))
    }

    /// The text of cell `index` (`None`: NULL).
    fn text<'t>(
        &self,
        row: &'t Tuple,
        index: usize,
        column: &'static str,
    ) -> Result<Option<&'t str>, RouteError> {
        match row.get(index) {
            Some(Cell::Text(text)) => Ok(Some(text)),
            Some(Cell::Null) => Ok(None),
            Some(Cell::Binary(_)) => Err(self.value(column, "came in binary form")),
            Some(Cell::UnchangedToast) => Err(self.value(column, "was not sent (TOAST)")),
            None => Err(self.value(column, "is missing from the row")),
        }
    }

    fn value(&self, column: &'static str, problem: impl std::fmt::Display) -> RouteError {
        RouteError::Value {
            table: self.table.clone(),
            column,
            problem: problem.to_string(),
        }
    }
}

/// The record of a logical message with `prefix` and `content`, when the prefix starts with
/// `ours`; `None` for another's message.
pub fn message_record(
    prefix: &str,
    ours: &str,
    content: &[u8],
) -> Result<Option<Record>, RouteError> {
    let Some(route) = prefix.strip_prefix(ours) else {
        return Ok(None);
    };
    let (topic, key) = match route.split_once('/') {
        Some((topic, key)) => (topic, Some(key)),
        None => (route, None),
    };
    if !is_topic_name(topic) {
        return Err(RouteError::MessageTopic {
            prefix: prefix.to_owned(),
            ours: ours.to_owned(),
        });
    }
    Ok(Some(Record {
        topic: topic.to_owned(),
        key: key.map(|k| k.as_bytes().to_vec()),
        value: Some(content.to_vec()),
        headers: Vec::new(),
        partition: None,
    }))
}

/// Whether `name` is a valid Kafka topic name (what the broker would refuse, refused here:
/// a record for it could never be delivered).
pub fn is_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests;
