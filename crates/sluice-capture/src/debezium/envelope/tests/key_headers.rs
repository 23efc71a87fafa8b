//! The `__debezium.newkey` / `__debezium.oldkey` headers of a key change for key columns of
//! every common type, as Kafka Connect's `SimpleHeaderConverter` prints Debezium's key
//! struct (the `bigint` key of the fixtures is in `the_fixture_statements_give_debeziums_records`).

use super::*;

/// The key columns: (name, type OID, type modifier).
const KEY: [(&str, u32, i32); 11] = [
    ("i", 23, -1),
    ("s", 25, -1),
    ("u", 2950, -1),
    ("d", 1082, -1),
    ("ts", 1114, -1),
    ("tz", 1184, -1),
    ("b", 17, -1),
    ("flag", 16, -1),
    ("n", 1700, ((30 << 16) | 10) + 4),
    ("v", 1700, -1),
    ("g", 20, -1),
];

/// A table whose primary key is [`KEY`], plus `note text`.
fn shape() -> TableShape {
    let mut columns: Vec<Column> = KEY
        .iter()
        .map(|&(name, type_oid, type_modifier)| Column {
            name: name.to_owned(),
            type_oid,
            type_modifier,
            is_key: true,
        })
        .collect();
    columns.push(Column {
        name: "note".into(),
        type_oid: 25,
        type_modifier: -1,
        is_key: false,
    });
    let catalog: Vec<ColumnCatalog> = columns
        .iter()
        .map(|c| ColumnCatalog {
            optional: !c.is_key,
            default: None,
            primary_key: c.is_key,
            enum_allowed: None,
            domain_base: None,
        })
        .collect();
    let relation = Relation {
        oid: 11,
        schema: "public".into(),
        table: "k".into(),
        replica_identity: ReplicaIdentity::Default,
        columns,
    };
    TableShape::new("p", &relation, &catalog)
}

fn row(n: &str, v: &str, s: &str) -> Tuple {
    [
        "7",
        s,
        "0e5e3b1c-1f2a-4b3c-8d4e-5f6a7b8c9d0e",
        "2026-03-04",
        "2026-03-04 05:06:07.123456",
        "2026-03-04 03:06:07.5+00",
        "\\x00ff10",
        "t",
        n,
        v,
        "-9",
        "a note",
    ]
    .iter()
    .map(|cell| text(cell))
    .collect()
}

fn header<'a>(record: &'a Record, name: &str) -> &'a str {
    record
        .headers
        .iter()
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.as_str())
        .unwrap_or_else(|| panic!("no {name} header"))
}

#[test]
fn key_headers_are_the_key_struct_as_simple_header_converter_prints_it() {
    let (envelope, _) = items();
    let (at, now) = at_of("03-delete-id2-pk-update");
    let mut old = row("1001.5714285714", "150.0", "say \"hi\"\\");
    old[11] = Cell::Null;
    let new = row("2001.5714285714", "0.0000000", "say \"hi\"\\");
    let change = Change::Update {
        relation: Arc::new(Relation {
            oid: 11,
            schema: "public".into(),
            table: "k".into(),
            replica_identity: ReplicaIdentity::Default,
            columns: Vec::new(),
        }),
        old: Some(OldRow::Key(old)),
        new,
    };
    let records = envelope
        .records(&shape(), &change, &at, now)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records.len(), 3, "d, tombstone, c");
    let common = concat!(
        "{\"i\":7,\"s\":\"say \\\"hi\\\"\\\\\",\"u\":\"0e5e3b1c-1f2a-4b3c-8d4e-5f6a7b8c9d0e\",",
        "\"d\":20516,\"ts\":1772600767123456,\"tz\":\"2026-03-04T03:06:07.500000Z\",",
        "\"b\":\"AP8Q\",\"flag\":true,",
    );
    // numeric(30,10): BigDecimal.toString(); numeric: the VariableScaleDecimal struct, its
    // trailing zeros stripped (150.0 → 150 = 0x0096 at scale 0; 0.0000000 → 0 at scale 0).
    let new_key = format!(
        "{common}\"n\":2001.5714285714,\"v\":{{\"scale\":0,\"value\":\"AA==\"}},\"g\":-9}}"
    );
    let old_key = format!(
        "{common}\"n\":1001.5714285714,\"v\":{{\"scale\":0,\"value\":\"AJY=\"}},\"g\":-9}}"
    );
    assert_eq!(header(&records[0], "__debezium.newkey"), new_key);
    assert_eq!(header(&records[1], "__debezium.newkey"), new_key);
    assert_eq!(header(&records[2], "__debezium.oldkey"), old_key);
    // The record keys stay JSON: the Decimal as base64, the string JSON-escaped.
    let key = String::from_utf8(records[2].key.clone().unwrap_or_default()).unwrap_or_default();
    let payload = key
        .split_once(",\"payload\":")
        .map(|(_, payload)| payload)
        .unwrap_or_default();
    assert!(
        payload.starts_with("{\"i\":7,\"s\":\"say \\\"hi\\\"\\\\\",\"u\":"),
        "{payload}"
    );
    assert!(payload.contains("\"n\":\"EjRFijiS\""), "{payload}");
}
