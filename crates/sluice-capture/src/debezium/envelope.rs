//! A change as the Kafka records Debezium's PostgreSQL connector writes for it
//! (docs/capture.md#the-envelope): `c`, `u`, `d` + tombstone, a key change as `d` +
//! tombstone + `c` with the `__debezium.newkey` / `__debezium.oldkey` headers, the TOAST
//! placeholder for an unchanged out-of-line value, and the four context headers.

use super::cell::{Place, Warned, push_cell};
pub use super::encode_error::{EncodeError, UNAVAILABLE};
use super::json::push_string;
use super::shape::TableShape;
use crate::lsn::Lsn;
use crate::model::{Cell, Change, OldRow, Tuple};
use chrono::{DateTime, Utc};

/// The settings every record of one capture shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvelopeSettings {
    /// The logical name (Debezium's `topic.prefix`): topics are `<prefix>.<schema>.<table>`.
    pub prefix: String,
    /// The source database's name (`source.db`).
    pub database: String,
    /// `source.version`: what wrote the record.
    pub version: String,
    /// Schemas in key and value (`JsonConverter`'s `schemas.enable`).
    pub schemas: bool,
    /// `__debezium.context.runId`: one per run of the capture.
    pub run_id: String,
}

/// `source.snapshot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Snapshot {
    /// A streamed change.
    False,
    /// The snapshot's first record.
    First,
    /// The first record of a table after the snapshot's first.
    FirstInDataCollection,
    /// A snapshot record.
    True,
    /// The last record of a table before the snapshot's last.
    LastInDataCollection,
    /// The snapshot's last record.
    Last,
}

impl Snapshot {
    fn as_str(self) -> &'static str {
        match self {
            Snapshot::False => "false",
            Snapshot::First => "first",
            Snapshot::FirstInDataCollection => "first_in_data_collection",
            Snapshot::LastInDataCollection => "last_in_data_collection",
            Snapshot::True => "true",
            Snapshot::Last => "last",
        }
    }
}

/// Where a change comes from: its transaction and WAL position (the `source` block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The transaction's commit time.
    pub commit_time: DateTime<Utc>,
    /// The transaction's id.
    pub xid: u32,
    /// The change's own LSN (`source.lsn`).
    pub lsn: Lsn,
    /// The previous transaction's commit LSN, `None` for the first of a session
    /// (`source.sequence`'s first element).
    pub last_commit_lsn: Option<Lsn>,
    /// Whether the record is part of a snapshot.
    pub snapshot: Snapshot,
}

/// One Kafka record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its topic.
    pub topic: String,
    /// Its key; `None` for a table without a primary key.
    pub key: Option<Vec<u8>>,
    /// Its value; `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    /// Its headers, in order.
    pub headers: Vec<(&'static str, String)>,
    /// Its explicit partition (an outbox row's `partition`); `None`: the key's hash decides.
    pub partition: Option<i32>,
}

/// One event's operation and row images, and the row its key comes from.
#[derive(Debug, Clone, Copy)]
struct Images<'a> {
    op: char,
    before: Option<&'a Tuple>,
    after: Option<&'a Tuple>,
    key: &'a Tuple,
}

/// Builds the records of changes (one [`TableShape`] per table, built by the caller).
#[derive(Debug, Clone)]
pub struct Envelope {
    settings: EnvelopeSettings,
    /// The columns a numeric `NaN` was logged for.
    warned: Warned,
}

impl Envelope {
    /// An envelope with these settings.
    pub fn new(settings: EnvelopeSettings) -> Envelope {
        Envelope {
            settings,
            warned: Warned::default(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &EnvelopeSettings {
        &self.settings
    }

    /// The records of `change` (a row change of the table `shape` describes), in the order
    /// Debezium writes them; `now` is the processing time (the top-level `ts_ms`). A
    /// `Truncate` gives none (Debezium's default `skipped.operations=t`).
    pub fn records(
        &self,
        shape: &TableShape,
        change: &Change,
        at: &Position,
        now: DateTime<Utc>,
    ) -> Result<Vec<Record>, EncodeError> {
        let event = |op: char, before: Option<&Tuple>, after: Option<&Tuple>, key: &Tuple| {
            let images = Images {
                op,
                before,
                after,
                key,
            };
            self.event(shape, images, at, now)
        };
        match change {
            Change::Insert { new, .. } => Ok(vec![event('c', None, Some(new), new)?]),
            Change::Update { old, new, .. } => {
                let (before, old_row) = match old {
                    Some(OldRow::Full(row)) => (Some(row), Some(row)),
                    Some(OldRow::Key(row)) => (None, Some(row)),
                    None => (None, None),
                };
                let new = match old_row {
                    Some(old_row) => with_unsent_cells(shape, old, old_row, new),
                    None => new.clone(),
                };
                match old_row {
                    Some(old_row) if is_key_change(shape, old_row, &new) => {
                        self.key_change(shape, old, old_row, &new, at, now)
                    }
                    _ => Ok(vec![event('u', before, Some(&new), &new)?]),
                }
            }
            Change::Delete { old, .. } => {
                let row = match old {
                    OldRow::Key(row) | OldRow::Full(row) => row,
                };
                let deleted = event('d', Some(row), None, row)?;
                let tombstone = self.tombstone(&deleted);
                Ok(vec![deleted, tombstone])
            }
            Change::Truncate { .. } => Ok(Vec::new()),
        }
    }

    /// The `r` record of a snapshot row.
    pub fn read(
        &self,
        shape: &TableShape,
        row: &Tuple,
        at: &Position,
        now: DateTime<Utc>,
    ) -> Result<Record, EncodeError> {
        let images = Images {
            op: 'r',
            before: None,
            after: Some(row),
            key: row,
        };
        self.event(shape, images, at, now)
    }

    /// A key change: `d` of the old key and its tombstone (header `__debezium.newkey`),
    /// then `c` of the new key (header `__debezium.oldkey`), all at the change's LSN.
    fn key_change(
        &self,
        shape: &TableShape,
        old: &Option<OldRow>,
        old_row: &Tuple,
        new: &Tuple,
        at: &Position,
        now: DateTime<Utc>,
    ) -> Result<Vec<Record>, EncodeError> {
        let old_key = self
            .key_text(shape, old_row, Place::KeyHeader)?
            .unwrap_or_default();
        let new_key = self
            .key_text(shape, new, Place::KeyHeader)?
            .unwrap_or_default();
        let before = match old {
            Some(OldRow::Full(row) | OldRow::Key(row)) => row,
            None => old_row,
        };
        let images = Images {
            op: 'd',
            before: Some(before),
            after: None,
            key: old_row,
        };
        let mut deleted = self.event(shape, images, at, now)?;
        deleted.headers.insert(0, ("__debezium.newkey", new_key));
        let tombstone = self.tombstone(&deleted);
        let images = Images {
            op: 'c',
            before: None,
            after: Some(new),
            key: new,
        };
        let mut created = self.event(shape, images, at, now)?;
        created.headers.insert(0, ("__debezium.oldkey", old_key));
        Ok(vec![deleted, tombstone, created])
    }

    /// The tombstone after `deleted`: its key and headers, no value.
    fn tombstone(&self, deleted: &Record) -> Record {
        Record {
            topic: deleted.topic.clone(),
            key: deleted.key.clone(),
            value: None,
            headers: deleted.headers.clone(),
            partition: deleted.partition,
        }
    }

    /// One change event with its key and the context headers.
    fn event(
        &self,
        shape: &TableShape,
        images: Images<'_>,
        at: &Position,
        now: DateTime<Utc>,
    ) -> Result<Record, EncodeError> {
        let Images {
            op,
            before,
            after,
            key: key_row,
        } = images;
        let mut payload = String::with_capacity(1024);
        payload.push_str("{\"before\":");
        self.push_row(&mut payload, shape, before)?;
        payload.push_str(",\"after\":");
        self.push_row(&mut payload, shape, after)?;
        payload.push_str(",\"source\":");
        self.push_source(&mut payload, shape, at);
        payload.push_str(",\"transaction\":null,\"op\":\"");
        payload.push(op);
        payload.push('"');
        push_times(&mut payload, now);
        payload.push('}');
        let value = if self.settings.schemas {
            format!(
                "{{\"schema\":{},\"payload\":{payload}}}",
                shape.envelope_schema
            )
        } else {
            payload
        };
        let key = self.key_text(shape, key_row, Place::Key)?.map(|key| {
            if self.settings.schemas {
                format!("{{\"schema\":{},\"payload\":{key}}}", shape.key_schema).into_bytes()
            } else {
                key.into_bytes()
            }
        });
        Ok(Record {
            topic: shape.topic.clone(),
            key,
            value: Some(value.into_bytes()),
            headers: self.context_headers(),
            partition: None,
        })
    }

    /// `__debezium.context.*`, as `extended.headers.enabled=true` (the default) writes them.
    fn context_headers(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "__debezium.context.connectorLogicalName",
                self.settings.prefix.clone(),
            ),
            ("__debezium.context.taskId", "0".to_owned()),
            ("__debezium.context.connectorName", "postgresql".to_owned()),
            ("__debezium.context.runId", self.settings.run_id.clone()),
        ]
    }

    /// The key's payload (`{"id":2}`) or, `place` a key header, its header text (the key
    /// struct as `SimpleHeaderConverter` prints it); `None` for a table without a primary key.
    fn key_text(
        &self,
        shape: &TableShape,
        row: &Tuple,
        place: Place,
    ) -> Result<Option<String>, EncodeError> {
        if shape.key.is_empty() {
            return Ok(None);
        }
        check_arity(shape, row)?;
        let mut out = String::with_capacity(32);
        out.push('{');
        for (n, &at) in shape.key.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            push_cell(&mut out, shape, at, &row[at], place, &self.warned)?;
        }
        out.push('}');
        Ok(Some(out))
    }

    /// A row image, or `null`.
    fn push_row(
        &self,
        out: &mut String,
        shape: &TableShape,
        row: Option<&Tuple>,
    ) -> Result<(), EncodeError> {
        let Some(row) = row else {
            out.push_str("null");
            return Ok(());
        };
        check_arity(shape, row)?;
        out.push('{');
        for (at, cell) in row.iter().enumerate() {
            if at > 0 {
                out.push(',');
            }
            push_cell(out, shape, at, cell, Place::Row, &self.warned)?;
        }
        out.push('}');
        Ok(())
    }

    /// The `source` block.
    fn push_source(&self, out: &mut String, shape: &TableShape, at: &Position) {
        let micros = at.commit_time.timestamp_micros();
        out.push_str("{\"version\":");
        push_string(out, &self.settings.version);
        out.push_str(",\"connector\":\"postgresql\",\"name\":");
        push_string(out, &self.settings.prefix);
        out.push_str(&format!(",\"ts_ms\":{}", micros.div_euclid(1000)));
        out.push_str(",\"snapshot\":\"");
        out.push_str(at.snapshot.as_str());
        out.push_str("\",\"db\":");
        push_string(out, &self.settings.database);
        let last = at
            .last_commit_lsn
            .map_or_else(|| "null".to_owned(), |lsn| format!("\"{}\"", lsn.0));
        let sequence = format!("[{last},\"{}\"]", at.lsn.0);
        out.push_str(",\"sequence\":");
        push_string(out, &sequence);
        out.push_str(&format!(
            ",\"ts_us\":{micros},\"ts_ns\":{}",
            i128::from(micros) * 1000
        ));
        out.push_str(",\"schema\":");
        push_string(out, &shape.schema);
        out.push_str(",\"table\":");
        push_string(out, &shape.table);
        out.push_str(&format!(
            ",\"txId\":{},\"lsn\":{},\"xmin\":null,\"origin\":null,\"origin_lsn\":null}}",
            at.xid, at.lsn.0
        ));
    }
}

/// `,"ts_ms":…,"ts_us":…,"ts_ns":…` of the processing time.
fn push_times(out: &mut String, now: DateTime<Utc>) {
    let nanos = now
        .timestamp_nanos_opt()
        .map_or_else(|| i128::from(now.timestamp_micros()) * 1000, i128::from);
    out.push_str(&format!(
        ",\"ts_ms\":{},\"ts_us\":{},\"ts_ns\":{nanos}",
        nanos.div_euclid(1_000_000),
        nanos.div_euclid(1000)
    ));
}

/// Whether an update that carried an old row changed the record key: the old row has every
/// key column (an old tuple of another replica identity index may have the primary key's
/// columns NULL) and one of them differs from the new row's (a key cell the new row did not
/// send, an unchanged out-of-line value, is the old one).
fn is_key_change(shape: &TableShape, old: &Tuple, new: &Tuple) -> bool {
    if shape.key.is_empty() || old.len() != shape.columns.len() || new.len() != old.len() {
        return false;
    }
    let complete = shape.key.iter().all(|&at| matches!(old[at], Cell::Text(_)));
    complete
        && shape
            .key
            .iter()
            .any(|&at| new[at] != Cell::UnchangedToast && new[at] != old[at])
}

/// `new` with the out-of-line values it did not send (unchanged by the UPDATE) taken from
/// the old row where pgoutput sent them: every column under identity `FULL` (PostgreSQL logs
/// the whole old row, its out-of-line values inlined), else the key's columns. A cell the old
/// row does not hold (NULL or unsent there too) stays unsent (`__debezium_unavailable_value`).
fn with_unsent_cells(
    shape: &TableShape,
    old: &Option<OldRow>,
    old_row: &Tuple,
    new: &Tuple,
) -> Tuple {
    let mut new = new.clone();
    if old_row.len() != new.len() {
        return new;
    }
    let full = matches!(old, Some(OldRow::Full(_)));
    for at in 0..new.len() {
        // NULL in the old row is no value of an unchanged out-of-line column: an old tuple
        // marked whole may still hold only a key (a partitioned table published by a FULL
        // root, its partition logged under its own identity), and Debezium, too, fills only
        // from a non-null old value.
        if new[at] == Cell::UnchangedToast
            && !matches!(old_row[at], Cell::UnchangedToast | Cell::Null)
            && (full || shape.key.contains(&at))
        {
            new[at] = old_row[at].clone();
        }
    }
    new
}

fn check_arity(shape: &TableShape, row: &Tuple) -> Result<(), EncodeError> {
    if row.len() == shape.columns.len() {
        Ok(())
    } else {
        Err(EncodeError::Arity {
            topic: shape.topic.clone(),
            found: row.len(),
            expected: shape.columns.len(),
        })
    }
}

#[cfg(test)]
mod tests;
