//! The decoder against messages written as pgoutput writes them (`proto.c`).

use super::*;
use crate::lsn::Lsn;
use crate::model::{CaptureEvent, Cell, Change, Column, OldRow, Relation, ReplicaIdentity};
use proptest::prelude::*;

/// Writes pgoutput messages, field by field.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn tag(mut self, t: u8) -> Self {
        self.0.push(t);
        self
    }
    fn u8(self, v: u8) -> Self {
        self.tag(v)
    }
    fn i16(mut self, v: i16) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn i32(mut self, v: i32) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn u32(mut self, v: u32) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend(v.to_be_bytes());
        self
    }
    fn string(mut self, s: &str) -> Self {
        self.0.extend(s.as_bytes());
        self.0.push(0);
        self
    }
    fn tuple(mut self, cells: &[Cell]) -> Self {
        self.0
            .extend(i16::try_from(cells.len()).unwrap().to_be_bytes());
        for cell in cells {
            match cell {
                Cell::Null => self.0.push(b'n'),
                Cell::UnchangedToast => self.0.push(b'u'),
                Cell::Text(t) => {
                    self.0.push(b't');
                    self.0.extend(i32::try_from(t.len()).unwrap().to_be_bytes());
                    self.0.extend(t.as_bytes());
                }
                Cell::Binary(b) => {
                    self.0.push(b'b');
                    self.0.extend(i32::try_from(b.len()).unwrap().to_be_bytes());
                    self.0.extend(b);
                }
            }
        }
        self
    }
}

fn relation_bytes(relation: &Relation) -> Vec<u8> {
    let identity = match relation.replica_identity {
        ReplicaIdentity::Default => b'd',
        ReplicaIdentity::Nothing => b'n',
        ReplicaIdentity::Full => b'f',
        ReplicaIdentity::Index => b'i',
    };
    let mut w = Writer::default()
        .tag(b'R')
        .u32(relation.oid)
        .string(&relation.schema)
        .string(&relation.table)
        .u8(identity)
        .i16(i16::try_from(relation.columns.len()).unwrap());
    for c in &relation.columns {
        w = w
            .u8(u8::from(c.is_key))
            .string(&c.name)
            .u32(c.type_oid)
            .i32(c.type_modifier);
    }
    w.0
}

fn items() -> Relation {
    let column = |name: &str, type_oid, is_key| Column {
        name: name.into(),
        type_oid,
        type_modifier: -1,
        is_key,
    };
    Relation {
        oid: 16_385,
        schema: "public".into(),
        table: "items".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: vec![column("id", 20, true), column("big", 25, false)],
    }
}

fn text(s: &str) -> Cell {
    Cell::Text(s.into())
}

fn change(decoder: &mut Decoder, bytes: &[u8]) -> Change {
    match decoder.decode(Lsn(7), bytes).unwrap() {
        Some(CaptureEvent::Change { lsn, change }) => {
            assert_eq!(lsn, Lsn(7));
            change
        }
        other => panic!("not a change: {other:?}"),
    }
}

#[test]
fn a_transaction_of_every_change_kind() {
    let mut decoder = Decoder::new();
    let begin = Writer::default()
        .tag(b'B')
        .u64(0x10_0000_0200)
        .u64(0) // 2000-01-01T00:00:00Z
        .u32(733)
        .0;
    assert_eq!(
        decoder.decode(Lsn(1), &begin).unwrap(),
        Some(CaptureEvent::Begin {
            xid: 733,
            final_lsn: Lsn(0x10_0000_0200),
            commit_time: "2000-01-01T00:00:00Z".parse().unwrap(),
        })
    );
    let relation = match decoder.decode(Lsn(2), &relation_bytes(&items())).unwrap() {
        Some(CaptureEvent::Relation(r)) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(*relation, items());

    let insert = Writer::default()
        .tag(b'I')
        .u32(16_385)
        .u8(b'N')
        .tuple(&[text("1"), text("long")])
        .0;
    assert_eq!(
        change(&mut decoder, &insert),
        Change::Insert {
            relation: relation.clone(),
            new: vec![text("1"), text("long")]
        }
    );

    // An update that left the TOASTed value alone, then a key change (old key 'K').
    let update = Writer::default()
        .tag(b'U')
        .u32(16_385)
        .u8(b'N')
        .tuple(&[text("1"), Cell::UnchangedToast])
        .0;
    assert_eq!(
        change(&mut decoder, &update),
        Change::Update {
            relation: relation.clone(),
            old: None,
            new: vec![text("1"), Cell::UnchangedToast]
        }
    );
    let key_change = Writer::default()
        .tag(b'U')
        .u32(16_385)
        .u8(b'K')
        .tuple(&[text("1"), Cell::Null])
        .u8(b'N')
        .tuple(&[text("2"), Cell::UnchangedToast])
        .0;
    assert_eq!(
        change(&mut decoder, &key_change),
        Change::Update {
            relation: relation.clone(),
            old: Some(OldRow::Key(vec![text("1"), Cell::Null])),
            new: vec![text("2"), Cell::UnchangedToast]
        }
    );
    let delete = Writer::default()
        .tag(b'D')
        .u32(16_385)
        .u8(b'O')
        .tuple(&[text("2"), text("long")])
        .0;
    assert_eq!(
        change(&mut decoder, &delete),
        Change::Delete {
            relation: relation.clone(),
            old: OldRow::Full(vec![text("2"), text("long")])
        }
    );
    let truncate = Writer::default().tag(b'T').u32(1).u8(3).u32(16_385).0;
    assert_eq!(
        change(&mut decoder, &truncate),
        Change::Truncate {
            relations: vec![relation],
            cascade: true,
            restart_identity: true
        }
    );
    let message = Writer::default()
        .tag(b'M')
        .u8(1)
        .u64(9)
        .string("outbox")
        .i32(2)
        .u8(b'h')
        .u8(b'i')
        .0;
    assert_eq!(
        decoder.decode(Lsn(9), &message).unwrap(),
        Some(CaptureEvent::Message {
            transactional: true,
            lsn: Lsn(9),
            prefix: "outbox".into(),
            content: b"hi".to_vec()
        })
    );
    let commit = Writer::default()
        .tag(b'C')
        .u8(0)
        .u64(0x10_0000_0200)
        .u64(0x10_0000_0230)
        .u64(1_000_000)
        .0;
    assert_eq!(
        decoder.decode(Lsn(10), &commit).unwrap(),
        Some(CaptureEvent::Commit {
            commit_lsn: Lsn(0x10_0000_0200),
            end_lsn: Lsn(0x10_0000_0230),
            commit_time: "2000-01-01T00:00:01Z".parse().unwrap(),
        })
    );
}

#[test]
fn refuses_what_it_cannot_read() {
    let mut decoder = Decoder::new();
    let orphan = Writer::default()
        .tag(b'I')
        .u32(99)
        .u8(b'N')
        .tuple(&[text("1")])
        .0;
    assert_eq!(
        decoder.decode(Lsn(1), &orphan),
        Err(DecodeError::UnknownRelation(99))
    );
    decoder.decode(Lsn(1), &relation_bytes(&items())).unwrap();
    let short = Writer::default()
        .tag(b'I')
        .u32(16_385)
        .u8(b'N')
        .tuple(&[text("1")])
        .0;
    assert!(matches!(
        decoder.decode(Lsn(1), &short),
        Err(DecodeError::ColumnCount {
            expected: 2,
            got: 1,
            ..
        })
    ));
    let stream_start = Writer::default().tag(b'S').u32(1).u8(1).0;
    assert_eq!(
        decode_message(&stream_start),
        Err(DecodeError::Streaming('S'))
    );
    let mut trailing = relation_bytes(&items());
    trailing.push(0);
    assert_eq!(decode_message(&trailing), Err(DecodeError::TrailingBytes));
}

fn cell() -> impl Strategy<Value = Cell> {
    prop_oneof![
        Just(Cell::Null),
        Just(Cell::UnchangedToast),
        ".{0,40}".prop_map(Cell::Text),
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Cell::Binary),
    ]
}

proptest! {
    /// Whatever a tuple holds, it decodes to what was written.
    #[test]
    fn tuples_round_trip(cells in proptest::collection::vec(cell(), 0..20)) {
        let insert = Writer::default().tag(b'I').u32(5).u8(b'N').tuple(&cells).0;
        prop_assert_eq!(
            decode_message(&insert),
            Ok(Message::Insert { relation: 5, new: cells })
        );
    }

    /// Any prefix of a valid message is an error, never a panic or a shorter message.
    #[test]
    fn a_cut_message_is_an_error(cells in proptest::collection::vec(cell(), 1..10), cut in 0usize..1000) {
        let update = Writer::default().tag(b'U').u32(5).u8(b'K').tuple(&cells)
            .u8(b'N').tuple(&cells).0;
        let cut = cut % update.len();
        prop_assert!(decode_message(&update[..cut]).is_err());
    }

    /// Arbitrary bytes never panic the decoder.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Decoder::new().decode(Lsn(0), &bytes);
    }
}
