//! One pgoutput message in its wire shape: changes name their table by OID.

use super::DecodeError;
use super::reader::Reader;
use crate::lsn::Lsn;
use crate::model::{Cell, Column, OldRow, Relation, ReplicaIdentity, Tuple};

/// A pgoutput message (protocol version 1, or 2 without streaming).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// `B`: a transaction starts.
    Begin {
        /// The LSN of its commit record.
        final_lsn: Lsn,
        /// Commit time, microseconds since 2000-01-01 UTC.
        commit_time: i64,
        /// Its xid.
        xid: u32,
    },
    /// `C`: it committed.
    Commit {
        /// The commit record's LSN.
        commit_lsn: Lsn,
        /// Just past the commit record.
        end_lsn: Lsn,
        /// Commit time, microseconds since 2000-01-01 UTC.
        commit_time: i64,
    },
    /// `O`: the changes come from another node's replication origin.
    Origin {
        /// The origin's commit LSN.
        lsn: Lsn,
        /// The origin's name.
        name: String,
    },
    /// `R`: a table's description.
    Relation(Relation),
    /// `Y`: a (non built-in) type's name.
    Type {
        /// Its OID.
        oid: u32,
        /// Its schema.
        schema: String,
        /// Its name.
        name: String,
    },
    /// `I`.
    Insert {
        /// The table's OID.
        relation: u32,
        /// The new row.
        new: Tuple,
    },
    /// `U`.
    Update {
        /// The table's OID.
        relation: u32,
        /// `K` (old key) or `O` (old row) when sent.
        old: Option<OldRow>,
        /// The new row.
        new: Tuple,
    },
    /// `D`.
    Delete {
        /// The table's OID.
        relation: u32,
        /// `K` (old key) or `O` (old row).
        old: OldRow,
    },
    /// `T`.
    Truncate {
        /// The tables' OIDs.
        relations: Vec<u32>,
        /// `CASCADE`.
        cascade: bool,
        /// `RESTART IDENTITY`.
        restart_identity: bool,
    },
    /// `M`: `pg_logical_emit_message`.
    LogicalMessage {
        /// Emitted as part of a transaction.
        transactional: bool,
        /// Its LSN.
        lsn: Lsn,
        /// Its prefix.
        prefix: String,
        /// Its content.
        content: Vec<u8>,
    },
}

const TRUNCATE_CASCADE: u8 = 1;
const TRUNCATE_RESTART_IDENTITY: u8 = 2;
const COLUMN_IS_KEY: u8 = 1;

/// Decodes one pgoutput message (the payload of one XLogData).
pub fn decode_message(bytes: &[u8]) -> Result<Message, DecodeError> {
    let mut r = Reader::new(bytes);
    let message = decode(&mut r)?;
    if !r.is_empty() {
        // A longer message than its fields is one we misread: never guess past it.
        return Err(DecodeError::TrailingBytes);
    }
    Ok(message)
}

fn decode(r: &mut Reader<'_>) -> Result<Message, DecodeError> {
    let tag = r.u8("message type")?;
    match tag {
        b'B' => Ok(Message::Begin {
            final_lsn: Lsn(r.u64("Begin final LSN")?),
            commit_time: r.i64("Begin commit time")?,
            xid: r.u32("Begin xid")?,
        }),
        b'C' => {
            let _flags = r.u8("Commit flags")?;
            Ok(Message::Commit {
                commit_lsn: Lsn(r.u64("Commit LSN")?),
                end_lsn: Lsn(r.u64("Commit end LSN")?),
                commit_time: r.i64("Commit time")?,
            })
        }
        b'O' => Ok(Message::Origin {
            lsn: Lsn(r.u64("Origin LSN")?),
            name: r.string("Origin name")?,
        }),
        b'R' => relation(r).map(Message::Relation),
        b'Y' => Ok(Message::Type {
            oid: r.u32("Type OID")?,
            schema: r.string("Type schema")?,
            name: r.string("Type name")?,
        }),
        b'I' => {
            let relation = r.u32("Insert relation")?;
            match r.u8("Insert marker")? {
                b'N' => Ok(Message::Insert {
                    relation,
                    new: tuple(r)?,
                }),
                other => Err(DecodeError::UnexpectedTupleMarker(char::from(other))),
            }
        }
        b'U' => update(r),
        b'D' => {
            let relation = r.u32("Delete relation")?;
            let marker = r.u8("Delete marker")?;
            Ok(Message::Delete {
                relation,
                old: old_row(marker, r)?,
            })
        }
        b'T' => truncate(r),
        b'M' => {
            let flags = r.u8("Message flags")?;
            Ok(Message::LogicalMessage {
                transactional: flags & 1 == 1,
                lsn: Lsn(r.u64("Message LSN")?),
                prefix: r.string("Message prefix")?,
                content: r.counted("Message content")?.to_vec(),
            })
        }
        b'S' | b'E' | b'c' | b'A' | b'P' | b'K' | b'r' | b'p' | b'b' => {
            Err(DecodeError::Streaming(char::from(tag)))
        }
        other => Err(DecodeError::UnknownMessage(char::from(other))),
    }
}

fn relation(r: &mut Reader<'_>) -> Result<Relation, DecodeError> {
    let oid = r.u32("Relation OID")?;
    let schema = r.string("Relation schema")?;
    let table = r.string("Relation name")?;
    let replica_identity = match r.u8("Relation replica identity")? {
        b'd' => ReplicaIdentity::Default,
        b'n' => ReplicaIdentity::Nothing,
        b'f' => ReplicaIdentity::Full,
        b'i' => ReplicaIdentity::Index,
        other => return Err(DecodeError::UnknownReplicaIdentity(char::from(other))),
    };
    let count = r.i16("Relation column count")?;
    let mut columns = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    for _ in 0..count {
        let flags = r.u8("column flags")?;
        columns.push(Column {
            name: r.string("column name")?,
            type_oid: r.u32("column type OID")?,
            type_modifier: r.i32("column type modifier")?,
            is_key: flags & COLUMN_IS_KEY == COLUMN_IS_KEY,
        });
    }
    Ok(Relation {
        oid,
        schema,
        table,
        replica_identity,
        columns,
    })
}

fn update(r: &mut Reader<'_>) -> Result<Message, DecodeError> {
    let relation = r.u32("Update relation")?;
    let (old, marker) = match r.u8("Update marker")? {
        marker @ (b'K' | b'O') => {
            let old = old_row(marker, r)?;
            (Some(old), r.u8("Update new-row marker")?)
        }
        marker => (None, marker),
    };
    if marker != b'N' {
        return Err(DecodeError::UnexpectedTupleMarker(char::from(marker)));
    }
    Ok(Message::Update {
        relation,
        old,
        new: tuple(r)?,
    })
}

fn old_row(marker: u8, r: &mut Reader<'_>) -> Result<OldRow, DecodeError> {
    match marker {
        b'K' => Ok(OldRow::Key(tuple(r)?)),
        b'O' => Ok(OldRow::Full(tuple(r)?)),
        other => Err(DecodeError::UnexpectedTupleMarker(char::from(other))),
    }
}

fn truncate(r: &mut Reader<'_>) -> Result<Message, DecodeError> {
    let count = r.u32("Truncate relation count")?;
    let options = r.u8("Truncate options")?;
    let relations = (0..count)
        .map(|_| r.u32("Truncate relation"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Message::Truncate {
        relations,
        cascade: options & TRUNCATE_CASCADE != 0,
        restart_identity: options & TRUNCATE_RESTART_IDENTITY != 0,
    })
}

/// TupleData: `Int16` columns, then per column `n` (null), `u` (unchanged TOAST), or `t` /
/// `b` with a counted value.
fn tuple(r: &mut Reader<'_>) -> Result<Tuple, DecodeError> {
    let count = r.i16("tuple column count")?;
    let mut cells = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    for _ in 0..count {
        cells.push(match r.u8("tuple column kind")? {
            b'n' => Cell::Null,
            b'u' => Cell::UnchangedToast,
            b't' => {
                let text = r.counted("text value")?;
                Cell::Text(
                    String::from_utf8(text.to_vec())
                        .map_err(|_| DecodeError::NotUtf8 { what: "text value" })?,
                )
            }
            b'b' => Cell::Binary(r.counted("binary value")?.to_vec()),
            other => return Err(DecodeError::UnknownColumnKind(char::from(other))),
        });
    }
    Ok(cells)
}
