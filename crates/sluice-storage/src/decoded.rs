//! A batch decoded (docs/ARCHITECTURE.md#sinks): each record routed to its table's sink and
//! decoded there, the batch grouped into runs of one table in record order; or, when a
//! writer's schema is not fetched or a table not planned yet, only what it waits for.

use crate::record::dead_letter;
use crate::sink::{Declared, PendingTable, Route, Tables, UNKNOWN_TABLE, UNROUTED};
use sluice_core::{DeadLetter, DeadLetterKind};
use sluice_kafka::Record;
use sluice_sinks::Decoded;
use sluice_sinks::messages::DecodeError;
use std::collections::HashSet;
use std::sync::Arc;

/// The records of a batch one table's sink decoded, with their record index.
#[derive(Debug, Clone)]
pub struct Group {
    /// The table's sink.
    pub sink: Arc<Declared>,
    /// Its records' decodings, with the index of their record in the batch.
    pub messages: Vec<(usize, Decoded)>,
}

/// A batch after decoding: the valid records' decodings by table (with their record index)
/// and the rejects — or, when some record's writer's schema is not fetched yet, or its table
/// not planned yet, nothing but those schema ids and tables: the batch is decoded again once
/// they are (never dead-lettered for them).
#[derive(Debug)]
pub struct DecodedBatch {
    /// Valid records' decodings, by the table they go to.
    pub groups: Vec<Group>,
    /// Records that failed decoding.
    pub rejected: Vec<DeadLetter>,
    /// Records (their indices) of a sink of many tables ignored without a table: tombstones
    /// that name none, counted as skipped.
    pub ignored: Vec<usize>,
    /// Schema ids to fetch before the batch can be decoded (sorted, each once).
    pub pending: Vec<i32>,
    /// Tables to plan before the batch can be decoded (sorted, each once).
    pub pending_tables: Vec<PendingTable>,
    /// How many plans its tables had replaced when it was decoded ([`Tables::refresh_of`]).
    pub generation: u64,
}

impl DecodedBatch {
    /// Whether something must be fetched or planned before the batch can be stored.
    pub fn waits(&self) -> bool {
        !self.pending.is_empty() || !self.pending_tables.is_empty()
    }

    /// The decoding of the records of `records` at `kept` (ascending indices), numbered as
    /// those records are among themselves: a batch the claim shortened is stored from its one
    /// decoding, whatever the schema cache holds by then.
    pub fn kept(&self, records: &[Record], kept: &[usize]) -> DecodedBatch {
        let groups = self
            .groups
            .iter()
            .map(|group| Group {
                sink: Arc::clone(&group.sink),
                messages: group
                    .messages
                    .iter()
                    .filter_map(|(index, decoded)| {
                        let at = kept.binary_search(index).ok()?;
                        Some((at, decoded.clone()))
                    })
                    .collect(),
            })
            .filter(|group| !group.messages.is_empty())
            .collect();
        let coords: HashSet<(&str, i32, i64)> = kept
            .iter()
            .filter_map(|&i| records.get(i))
            .map(|r| (r.topic.as_str(), r.partition, r.offset))
            .collect();
        let rejected = self
            .rejected
            .iter()
            .filter(|d| {
                let c = &d.coords;
                coords.contains(&(c.topic.as_str(), c.partition, c.offset))
            })
            .cloned()
            .collect();
        DecodedBatch {
            groups,
            rejected,
            ignored: self
                .ignored
                .iter()
                .filter_map(|index| kept.binary_search(index).ok())
                .collect(),
            pending: self.pending.clone(),
            pending_tables: self.pending_tables.clone(),
            generation: self.generation,
        }
    }

    /// How many records decoded into rows (deletes, ignored events).
    pub fn decoded_len(&self) -> usize {
        self.groups.iter().map(|g| g.messages.len()).sum()
    }
}

/// Decodes every record of a batch, each by its table's sink; pure but for the tables met
/// (read from `tables`' memory, never planned here).
pub fn decode_batch(tables: &Tables, records: &[Record]) -> DecodedBatch {
    let mut groups: Vec<Group> = Vec::new();
    let mut rejected = Vec::new();
    let mut ignored = Vec::new();
    let mut pending = Vec::new();
    let mut pending_tables = Vec::new();
    // Read before the sinks: a plan replaced meanwhile makes the batch decoded again.
    let generation = tables.generation();
    // A fixed table's one group takes every record: room for them at once.
    let fixed = tables.fixed_sink();
    let room = if fixed.is_some() { records.len() } else { 0 };
    for (index, record) in records.iter().enumerate() {
        // A fixed table's sink is borrowed, not routed: no reference count per record.
        let routed;
        let sink = match &fixed {
            Some(fixed) => fixed,
            None => match tables.route(record) {
                Route::To(sink) => {
                    routed = sink;
                    &routed
                }
                Route::Ignore => {
                    ignored.push(index);
                    continue;
                }
                Route::Plan(table) => {
                    pending_tables.push(table);
                    continue;
                }
                Route::Schema(schema_id) => {
                    pending.push(schema_id);
                    continue;
                }
                nowhere => {
                    rejected.extend(nowhere_letter(record, nowhere));
                    continue;
                }
            },
        };
        match sink.decode(record) {
            Ok(message) => group_of(&mut groups, sink, room).push((index, message)),
            Err(DecodeError::SchemaPending { schema_id }) => pending.push(schema_id),
            Err(error) => rejected.push(
                dead_letter(record, DeadLetterKind::DecodeError, error.to_string())
                    .with_table(sink.table()),
            ),
        }
    }
    if pending.is_empty() && pending_tables.is_empty() {
        return DecodedBatch {
            groups,
            rejected,
            ignored,
            pending,
            pending_tables,
            generation,
        };
    }
    pending.sort_unstable();
    pending.dedup();
    pending_tables.sort_unstable();
    pending_tables.dedup();
    DecodedBatch {
        groups: Vec::new(),
        rejected: Vec::new(),
        ignored: Vec::new(),
        pending,
        pending_tables,
        generation,
    }
}

/// The dead letter of a record that goes to no table: its table unknown, no route taking
/// it, or its value unreadable by the routes (`None` for a route that is not one of those).
fn nowhere_letter(record: &Record, route: Route) -> Option<DeadLetter> {
    Some(match route {
        Route::Unknown(table, reason) => {
            let letter = dead_letter(record, DeadLetterKind::unresolved(UNKNOWN_TABLE), reason);
            match &table {
                Some(table) => letter.with_table(table),
                None => letter,
            }
        }
        Route::Unrouted(reason) => {
            dead_letter(record, DeadLetterKind::unresolved(UNROUTED), reason)
        }
        Route::Undecodable(reason) => dead_letter(record, DeadLetterKind::DecodeError, reason),
        Route::To(_) | Route::Ignore | Route::Plan(_) | Route::Schema(_) => return None,
    })
}

/// The messages of the last group if it is `sink`'s, else of a new group: the groups are
/// runs of consecutive records of one table, written in record order, so a batch whose
/// records go from one table to another and back applies them in the order they came (a
/// parent row, its child, then the parent's delete). A new group has room for `room` messages.
fn group_of<'g>(
    groups: &'g mut Vec<Group>,
    sink: &Arc<Declared>,
    room: usize,
) -> &'g mut Vec<(usize, Decoded)> {
    if !groups.last().is_some_and(|g| Arc::ptr_eq(&g.sink, sink)) {
        groups.push(Group {
            sink: Arc::clone(sink),
            messages: Vec::with_capacity(room),
        });
    }
    let last = groups.len() - 1;
    &mut groups[last].messages
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;
    use std::collections::HashMap;

    /// A sink of one BIGINT column `id`.
    fn one_column_sink() -> Declared {
        let sinks = sluice_sinks::parse_sinks(
            "m.toml",
            "[[sink]]\nname = \"t\"\ntable = \"t\"\nkey = [\"id\"]\n\
             [sink.columns]\nid = { field = \"id\" }\n",
        )
        .unwrap();
        let table = sluice_sinks::TableShape {
            name: "t".into(),
            columns: vec![sluice_sinks::ColumnShape {
                name: "id".into(),
                sql_type: sluice_sinks::SqlType::BigInt,
                not_null: true,
                has_default: false,
                writable: true,
                time_precision: None,
            }],
            unique_keys: vec![vec!["id".into()]],
            nulls_not_distinct_keys: Vec::new(),
            primary_key: None,
            partitioned: false,
        };
        let tables = HashMap::from([("t".to_owned(), table)]);
        let plan = sluice_sinks::plan_sink(&sinks[0], "p", &tables).unwrap();
        Declared::new(&sinks[0], plan, std::time::Duration::from_secs(1)).unwrap()
    }

    #[test]
    fn the_records_kept_keep_their_decoding_renumbered() {
        let at = |offset: i64| Record {
            offset,
            payload: Some(b"x".to_vec()),
            ..Record::at("t", 0, 1)
        };
        let records: Vec<Record> = (10..15).map(at).collect();
        let sink = Arc::new(one_column_sink());
        let group = |indices: &[usize]| Group {
            sink: Arc::clone(&sink),
            messages: indices
                .iter()
                .map(|&i| (i, Decoded::upsert(vec![sluice_sinks::Cell::Null; i])))
                .collect(),
        };
        let decoded = DecodedBatch {
            // Two tables: records 0 and 4 to one, 2 to the other.
            groups: vec![group(&[0, 4]), group(&[2])],
            rejected: [1]
                .into_iter()
                .map(|i| dead_letter(&records[i], DeadLetterKind::DecodeError, "bad".into()))
                .collect(),
            // Record 3: a tombstone of a sink of many tables that names no table.
            ignored: vec![3],
            pending: Vec::new(),
            pending_tables: Vec::new(),
            generation: 0,
        };
        let kept = decoded.kept(&records, &[2, 3, 4]);
        let messages: Vec<Vec<(usize, usize)>> = kept
            .groups
            .iter()
            .map(|g| {
                g.messages
                    .iter()
                    .map(|(i, d)| (*i, d.cells.len()))
                    .collect()
            })
            .collect();
        assert_eq!(
            messages,
            [vec![(2, 4)], vec![(0, 2)]],
            "records 12 and 14, numbered 0 and 2, each in its table's group"
        );
        assert!(kept.rejected.is_empty(), "record 11 is left out");
        assert_eq!(
            kept.ignored,
            [1],
            "record 13, numbered 1, still counted as skipped"
        );
    }
}
