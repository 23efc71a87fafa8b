//! The stateful half of decoding: the relations a session has described, and the typed
//! events their changes become.

use super::DecodeError;
use super::message::{Message, decode_message};
use crate::lsn::Lsn;
use crate::model::{CaptureEvent, Change, OldRow, Relation, Tuple};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::Arc;

/// Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
const POSTGRES_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// A PostgreSQL timestamp (microseconds since 2000-01-01 UTC) as a UTC instant.
pub fn postgres_time(micros: i64) -> DateTime<Utc> {
    // Out of chrono's range only for values PostgreSQL cannot write either.
    DateTime::from_timestamp_micros(micros.saturating_add(POSTGRES_EPOCH_MICROS))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Decodes one session's messages in order. A session starts with no relations: pgoutput
/// sends each table's Relation message before its first change in the session.
#[derive(Debug, Default)]
pub struct Decoder {
    relations: HashMap<u32, Arc<Relation>>,
}

impl Decoder {
    /// A decoder for a new session.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// The relation with this OID, as last described.
    pub fn relation(&self, oid: u32) -> Option<&Arc<Relation>> {
        self.relations.get(&oid)
    }

    /// Decodes the message at `lsn` (its XLogData's start). `None` for the messages that
    /// only inform the decoder (Type, Origin).
    pub fn decode(&mut self, lsn: Lsn, bytes: &[u8]) -> Result<Option<CaptureEvent>, DecodeError> {
        self.event(lsn, decode_message(bytes)?)
    }

    /// Turns a decoded message into its event.
    pub fn event(
        &mut self,
        lsn: Lsn,
        message: Message,
    ) -> Result<Option<CaptureEvent>, DecodeError> {
        let change = match message {
            Message::Begin {
                final_lsn,
                commit_time,
                xid,
            } => {
                return Ok(Some(CaptureEvent::Begin {
                    xid,
                    final_lsn,
                    commit_time: postgres_time(commit_time),
                }));
            }
            Message::Commit {
                commit_lsn,
                end_lsn,
                commit_time,
            } => {
                return Ok(Some(CaptureEvent::Commit {
                    commit_lsn,
                    end_lsn,
                    commit_time: postgres_time(commit_time),
                }));
            }
            Message::Relation(relation) => {
                let relation = Arc::new(relation);
                self.relations.insert(relation.oid, Arc::clone(&relation));
                return Ok(Some(CaptureEvent::Relation(relation)));
            }
            Message::LogicalMessage {
                transactional,
                lsn,
                prefix,
                content,
            } => {
                return Ok(Some(CaptureEvent::Message {
                    transactional,
                    lsn,
                    prefix,
                    content,
                }));
            }
            Message::Origin { .. } | Message::Type { .. } => return Ok(None),
            change @ (Message::Insert { .. }
            | Message::Update { .. }
            | Message::Delete { .. }
            | Message::Truncate { .. }) => self.change(change)?,
        };
        Ok(Some(CaptureEvent::Change { lsn, change }))
    }

    /// A row change's message, its relation resolved and its tuples checked against it.
    fn change(&self, message: Message) -> Result<Change, DecodeError> {
        Ok(match message {
            Message::Insert { relation, new } => {
                let relation = self.known(relation)?;
                Change::Insert {
                    new: checked(&relation, new)?,
                    relation,
                }
            }
            Message::Update { relation, old, new } => {
                let relation = self.known(relation)?;
                Change::Update {
                    old: old.map(|old| checked_old(&relation, old)).transpose()?,
                    new: checked(&relation, new)?,
                    relation,
                }
            }
            Message::Delete { relation, old } => {
                let relation = self.known(relation)?;
                Change::Delete {
                    old: checked_old(&relation, old)?,
                    relation,
                }
            }
            Message::Truncate {
                relations,
                cascade,
                restart_identity,
            } => Change::Truncate {
                relations: relations
                    .into_iter()
                    .map(|oid| self.known(oid))
                    .collect::<Result<_, _>>()?,
                cascade,
                restart_identity,
            },
            // `event` hands only the four change kinds here; an error, not a panic, if that
            // ever changes.
            other => return Err(DecodeError::NotAChange(format!("{other:?}"))),
        })
    }

    fn known(&self, oid: u32) -> Result<Arc<Relation>, DecodeError> {
        self.relations
            .get(&oid)
            .cloned()
            .ok_or(DecodeError::UnknownRelation(oid))
    }
}

/// The tuple, if it has one cell per column of its relation.
fn checked(relation: &Relation, tuple: Tuple) -> Result<Tuple, DecodeError> {
    if tuple.len() == relation.columns.len() {
        Ok(tuple)
    } else {
        Err(DecodeError::ColumnCount {
            table: format!("{}.{}", relation.schema, relation.table),
            expected: relation.columns.len(),
            got: tuple.len(),
        })
    }
}

fn checked_old(relation: &Relation, old: OldRow) -> Result<OldRow, DecodeError> {
    Ok(match old {
        OldRow::Key(tuple) => OldRow::Key(checked(relation, tuple)?),
        OldRow::Full(tuple) => OldRow::Full(checked(relation, tuple)?),
    })
}
