//! The records of `source.sql`'s statements against the Debezium 3.6.1 fixtures
//! (crates/sluice-cli/tests/data/debezium): byte for byte, with each fixture's own `source`
//! position (LSN, transaction, commit time) given to the envelope and the processing time
//! (the top-level `ts_ms`/`ts_us`/`ts_ns`) masked.

use super::*;
use crate::debezium::shape::{ColumnCatalog, TableShape};
use crate::model::{Column, Relation, ReplicaIdentity};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

mod enum_array;
mod full_identity;
mod key_headers;
mod numeric_special;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sluice-cli/tests/data/debezium")
}

fn read(name: &str) -> Option<String> {
    std::fs::read_to_string(fixtures().join(name)).ok()
}

/// A fixture record: key, value (None for a tombstone), headers.
struct Fixture {
    key: String,
    value: Option<String>,
    headers: Vec<(String, String)>,
}

fn fixture(stem: &str) -> Fixture {
    let headers: Value = serde_json::from_str(
        &read(&format!("{stem}.headers.json")).unwrap_or_else(|| panic!("{stem}.headers.json")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let headers = headers["headers"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|h| {
                    (
                        h[0].as_str().unwrap_or("").to_owned(),
                        h[1].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Fixture {
        key: read(&format!("{stem}.key.json")).unwrap_or_else(|| panic!("{stem}.key.json")),
        value: read(&format!("{stem}.value.json")),
        headers,
    }
}

/// The fixture's `source` position and processing time.
fn position(value: &str) -> (Position, DateTime<Utc>) {
    let v: Value = serde_json::from_str(value).unwrap_or_else(|e| panic!("{e}"));
    let payload = &v["payload"];
    let source = &payload["source"];
    let sequence: Value = serde_json::from_str(source["sequence"].as_str().unwrap_or("[]"))
        .unwrap_or_else(|e| panic!("{e}"));
    let snapshot = match source["snapshot"].as_str() {
        Some("last") => Snapshot::Last,
        Some("true") => Snapshot::True,
        Some("first") => Snapshot::First,
        _ => Snapshot::False,
    };
    let micros = source["ts_us"].as_i64().unwrap_or_default();
    let at = Position {
        commit_time: DateTime::from_timestamp_micros(micros).unwrap_or_default(),
        xid: u32::try_from(source["txId"].as_u64().unwrap_or_default()).unwrap_or_default(),
        lsn: Lsn(source["lsn"].as_u64().unwrap_or_default()),
        last_commit_lsn: sequence[0].as_str().and_then(|s| s.parse().ok()).map(Lsn),
        snapshot,
    };
    let nanos = payload["ts_ns"].as_i64().unwrap_or_default();
    (at, DateTime::from_timestamp_nanos(nanos))
}

/// `big` of a fixture's `after` (the md5 text `source.sql`'s `big_text` builds).
fn big(stem: &str) -> String {
    let v: Value = serde_json::from_str(&read(&format!("{stem}.value.json")).unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}"));
    v["payload"]["after"]["big"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn items() -> (Envelope, TableShape) {
    let column = |name: &str, type_oid: u32, type_modifier: i32| Column {
        name: name.to_owned(),
        type_oid,
        type_modifier,
        is_key: name == "id",
    };
    let relation = Relation {
        oid: 16_400,
        schema: "public".into(),
        table: "items".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: vec![
            column("id", 20, -1),
            column("title", 25, -1),
            column("amount", 1700, ((12 << 16) | 2) + 4),
            column("doc", 3802, -1),
            column("big", 25, -1),
            column("at", 1184, -1),
            column("note", 25, -1),
            column("day", 1082, -1),
            column("ts", 1114, -1),
        ],
    };
    let catalog: Vec<ColumnCatalog> = relation
        .columns
        .iter()
        .map(|c| ColumnCatalog {
            optional: c.name != "id",
            default: None,
            primary_key: c.name == "id",
            enum_allowed: None,
            domain_base: None,
        })
        .collect();
    let envelope = Envelope::new(EnvelopeSettings {
        prefix: "dbzsamples".into(),
        database: "dbz_samples".into(),
        version: "3.6.1.Final".into(),
        schemas: true,
        run_id: "01a23463-c6ea-764f-ac08-08320dec7db0".into(),
    });
    (envelope, TableShape::new("dbzsamples", &relation, &catalog))
}

fn text(s: &str) -> Cell {
    Cell::Text(s.to_owned())
}

/// Everything up to the top-level processing time (the value's last `,"ts_ms":`).
fn masked(value: &str) -> &str {
    value.rfind(",\"ts_ms\":").map_or(value, |at| &value[..at])
}

fn assert_records(records: &[Record], stems: &[&str]) {
    assert_eq!(records.len(), stems.len(), "records of {stems:?}");
    for (record, stem) in records.iter().zip(stems) {
        let expected = fixture(stem);
        assert_eq!(record.topic, "dbzsamples.public.items");
        let key = String::from_utf8(record.key.clone().unwrap_or_default()).unwrap_or_default();
        assert_eq!(key, expected.key, "{stem}: key");
        let value = record
            .value
            .as_ref()
            .map(|v| String::from_utf8_lossy(v).into_owned());
        match (&value, &expected.value) {
            (Some(ours), Some(theirs)) => assert_eq!(masked(ours), masked(theirs), "{stem}: value"),
            (None, None) => {}
            _ => panic!("{stem}: tombstone differs: ours {value:?}"),
        }
        let headers: Vec<(String, String)> = record
            .headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        assert_eq!(headers, expected.headers, "{stem}: headers");
    }
}

fn at_of(stem: &str) -> (Position, DateTime<Utc>) {
    position(&read(&format!("{stem}.value.json")).unwrap_or_default())
}

fn row_2_updated(id: &str, title: &str) -> Tuple {
    vec![
        text(id),
        text(title),
        text("0.05"),
        text("[1, {\"x\": null}]"),
        Cell::UnchangedToast,
        text("2026-07-08 09:10:11.654321+00"),
        Cell::Null,
        text("1969-12-31"),
        text("1969-12-31 23:59:59.999999"),
    ]
}

fn key_only(id: &str) -> Tuple {
    let mut row = vec![Cell::Null; 9];
    row[0] = text(id);
    row
}

#[test]
fn the_fixture_statements_give_debeziums_records() {
    let (envelope, shape) = items();
    let relation = Arc::new(Relation {
        oid: 16_400,
        schema: "public".into(),
        table: "items".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: Vec::new(),
    });
    let row_1 = |title: &str, big: String| {
        vec![
            text("1"),
            text(title),
            text("1234567890.12"),
            text("{\"a\": 1, \"b\": [true, null, \"x\"], \"n\": 1.50}"),
            Cell::Text(big),
            text("2026-03-04 03:06:07.123456+00"),
            Cell::Null,
            text("2026-03-04"),
            text("2026-03-04 05:06:07.123456"),
        ]
    };
    // 00: the snapshot's row 1.
    let (at, now) = at_of("00-read-id1-snapshot");
    let read_1 = envelope
        .read(
            &shape,
            &row_1("snapshot row", big("00-read-id1-snapshot")),
            &at,
            now,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_records(&[read_1], &["00-read-id1-snapshot"]);

    // 01: INSERT id 2.
    let insert_2 = Change::Insert {
        relation: relation.clone(),
        new: vec![
            text("2"),
            text("inserted"),
            text("-42.50"),
            text(
                "{\"big\": 12345678901234567890, \"list\": [1, 2.5, \"três\"], \"nested\": {\"k\": \"v\"}}",
            ),
            Cell::Text(big("01-create-id2")),
            text("2026-07-08 09:10:11.654321+00"),
            text("a note"),
            text("1969-12-31"),
            text("1969-12-31 23:59:59.999999"),
        ],
    };
    let cases: Vec<(Change, &str, Vec<&str>)> = vec![
        (insert_2, "01-create-id2", vec!["01-create-id2"]),
        // 02: big untouched, so pgoutput sends it as unchanged TOAST.
        (
            Change::Update {
                relation: relation.clone(),
                old: None,
                new: row_2_updated("2", "updated, big untouched"),
            },
            "02-update-id2-toast-placeholder",
            vec!["02-update-id2-toast-placeholder"],
        ),
        // 03-05: the key 2 -> 3.
        (
            Change::Update {
                relation: relation.clone(),
                old: Some(OldRow::Key(key_only("2"))),
                new: row_2_updated("3", "key changed 2 -> 3"),
            },
            "03-delete-id2-pk-update",
            vec![
                "03-delete-id2-pk-update",
                "04-tombstone-id2-pk-update",
                "05-create-id3-pk-update",
            ],
        ),
        (
            Change::Delete {
                relation: relation.clone(),
                old: OldRow::Key(key_only("3")),
            },
            "06-delete-id3",
            vec!["06-delete-id3", "07-tombstone-id3"],
        ),
        (
            Change::Insert {
                relation: relation.clone(),
                new: vec![
                    text("3"),
                    text("re-inserted"),
                    text("99.99"),
                    text("{}"),
                    Cell::Text(big("08-create-id3-reinsert")),
                    text("2026-12-31 18:29:59+00"),
                    Cell::Null,
                    text("2026-12-31"),
                    text("2026-12-31 23:59:59"),
                ],
            },
            "08-create-id3-reinsert",
            vec!["08-create-id3-reinsert"],
        ),
        (
            Change::Update {
                relation,
                old: None,
                new: row_1("big changed", big("09-update-id1-big-changed")),
            },
            "09-update-id1-big-changed",
            vec!["09-update-id1-big-changed"],
        ),
    ];
    for (change, first, stems) in cases {
        let (at, now) = at_of(first);
        let records = envelope
            .records(&shape, &change, &at, now)
            .unwrap_or_else(|e| panic!("{first}: {e}"));
        assert_records(&records, &stems);
    }
}

#[test]
fn without_schemas_key_and_value_are_the_payloads() {
    let (envelope, shape) = items();
    let envelope = Envelope::new(EnvelopeSettings {
        schemas: false,
        ..envelope.settings().clone()
    });
    let (at, now) = at_of("06-delete-id3");
    let records = envelope
        .records(
            &shape,
            &Change::Delete {
                relation: Arc::new(Relation {
                    oid: 1,
                    schema: "public".into(),
                    table: "items".into(),
                    replica_identity: ReplicaIdentity::Default,
                    columns: Vec::new(),
                }),
                old: OldRow::Key(key_only("3")),
            },
            &at,
            now,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records[0].key.as_deref(), Some(&b"{\"id\":3}"[..]));
    let value =
        String::from_utf8_lossy(records[0].value.as_deref().unwrap_or_default()).into_owned();
    assert!(
        value.starts_with("{\"before\":{\"id\":3,\"title\":null,"),
        "{value}"
    );
    assert!(value.contains(",\"op\":\"d\","), "{value}");
    assert_eq!(records[1].value, None);
}

#[test]
fn a_row_of_the_wrong_width_is_refused() {
    let (envelope, shape) = items();
    let (at, now) = at_of("01-create-id2");
    let error = envelope
        .records(
            &shape,
            &Change::Insert {
                relation: Arc::new(Relation {
                    oid: 1,
                    schema: "public".into(),
                    table: "items".into(),
                    replica_identity: ReplicaIdentity::Default,
                    columns: Vec::new(),
                }),
                new: vec![text("1")],
            },
            &at,
            now,
        )
        .expect_err("one value for nine columns");
    assert!(
        matches!(
            error,
            EncodeError::Arity {
                found: 1,
                expected: 9,
                ..
            }
        ),
        "{error}"
    );
}

/// A shape of `id bigint PRIMARY KEY, title text NOT NULL DEFAULT 'untitled', n int NOT
/// NULL` under `identity`.
fn required_shape(identity: ReplicaIdentity) -> TableShape {
    let column = |name: &str, type_oid: u32| Column {
        name: name.to_owned(),
        type_oid,
        type_modifier: -1,
        is_key: name == "id" && identity == ReplicaIdentity::Default,
    };
    let relation = Relation {
        oid: 7,
        schema: "public".into(),
        table: "t".into(),
        replica_identity: identity,
        columns: vec![column("id", 20), column("title", 25), column("n", 23)],
    };
    let catalog = [
        ColumnCatalog {
            optional: false,
            default: None,
            primary_key: true,
            enum_allowed: None,
            domain_base: None,
        },
        ColumnCatalog {
            optional: false,
            default: Some("\"untitled\"".into()),
            primary_key: false,
            enum_allowed: None,
            domain_base: None,
        },
        ColumnCatalog {
            optional: false,
            default: None,
            primary_key: false,
            enum_allowed: None,
            domain_base: None,
        },
    ];
    TableShape::new("p", &relation, &catalog)
}

fn payload_of(record: &Record) -> String {
    String::from_utf8_lossy(record.value.as_deref().unwrap_or_default()).into_owned()
}

#[test]
fn a_required_column_the_delete_did_not_send_is_its_default_or_zero() {
    let (envelope, _) = items();
    let envelope = Envelope::new(EnvelopeSettings {
        schemas: false,
        ..envelope.settings().clone()
    });
    let shape = required_shape(ReplicaIdentity::Default);
    let (at, now) = at_of("06-delete-id3");
    let relation = Arc::new(Relation {
        oid: 7,
        schema: "public".into(),
        table: "t".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: Vec::new(),
    });
    let records = envelope
        .records(
            &shape,
            &Change::Delete {
                relation,
                old: OldRow::Key(vec![text("5"), Cell::Null, Cell::Null]),
            },
            &at,
            now,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        payload_of(&records[0])
            .starts_with("{\"before\":{\"id\":5,\"title\":\"untitled\",\"n\":0},\"after\":null"),
        "{}",
        payload_of(&records[0])
    );
}

#[test]
fn an_old_row_without_the_whole_key_is_no_key_change() {
    let (envelope, _) = items();
    // Identity USING INDEX on another column: the old tuple has that column, not `id`.
    let shape = required_shape(ReplicaIdentity::Index);
    let (at, now) = at_of("02-update-id2-toast-placeholder");
    let relation = Arc::new(Relation {
        oid: 7,
        schema: "public".into(),
        table: "t".into(),
        replica_identity: ReplicaIdentity::Index,
        columns: Vec::new(),
    });
    let update = |old: Tuple, new: Tuple| Change::Update {
        relation: relation.clone(),
        old: Some(OldRow::Key(old)),
        new,
    };
    let records = envelope
        .records(
            &shape,
            &update(
                vec![Cell::Null, text("old title"), Cell::Null],
                vec![text("5"), text("new title"), text("1")],
            ),
            &at,
            now,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records.len(), 1, "one u, not d + tombstone + c");
    assert!(payload_of(&records[0]).contains(",\"op\":\"u\","));
    // A key column the new row did not send (unchanged out of line) is the old one: no
    // key change either.
    let records = envelope
        .records(
            &shape,
            &update(
                vec![text("5"), text("t"), text("1")],
                vec![Cell::UnchangedToast, text("t2"), text("1")],
            ),
            &at,
            now,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records.len(), 1);
    assert!(
        payload_of(&records[0]).contains("\"after\":{\"id\":5,"),
        "{}",
        payload_of(&records[0])
    );
    // A real key change is still the triple.
    let records = envelope
        .records(
            &shape,
            &update(
                vec![text("5"), text("t"), text("1")],
                vec![text("6"), text("t"), text("1")],
            ),
            &at,
            now,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records.len(), 3);
}
