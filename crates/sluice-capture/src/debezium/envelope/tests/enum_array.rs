//! Enums, arrays and intervals against Debezium 3.6.1's own records of them
//! (crates/sluice-cli/tests/data/debezium/types: `enum-array.sql` ran while the connector
//! streamed): schema and values byte for byte, the processing time masked.

use super::*;

fn types_fixture(stem: &str) -> (String, String) {
    let read = |name: &str| {
        read(&format!("types/{stem}.{name}.json")).unwrap_or_else(|| panic!("{stem}.{name}.json"))
    };
    (read("key"), read("value"))
}

fn shape() -> (Envelope, TableShape, Arc<Relation>) {
    let column = |name: &str, type_oid: u32| Column {
        name: name.to_owned(),
        type_oid,
        type_modifier: -1,
        is_key: name == "id",
    };
    const MOOD: u32 = 90_001;
    let relation = Relation {
        oid: 90_000,
        schema: "dbzenum".into(),
        table: "t".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: vec![
            column("id", 23),
            column("m", MOOD),
            column("mo", MOOD),
            column("tags", 1009),
            column("nums", 1007),
            column("big", 1016),
            column("ival", 1186),
        ],
    };
    let mood = Some("sad,ok,happy, very".to_owned());
    let catalog = [
        ("id", false, None, None),
        ("m", false, Some("\"ok\"".to_owned()), mood.clone()),
        ("mo", true, None, mood),
        ("tags", true, None, None),
        ("nums", false, None, None),
        ("big", true, None, None),
        ("ival", true, None, None),
    ]
    .map(|(name, optional, default, enum_allowed)| ColumnCatalog {
        optional,
        default,
        primary_key: name == "id",
        enum_allowed,
        domain_base: None,
    });
    let envelope = Envelope::new(EnvelopeSettings {
        prefix: "dbzenum".into(),
        database: "sluice".into(),
        version: "3.6.1.Final".into(),
        schemas: true,
        run_id: "unused".into(),
    });
    let shape = TableShape::new("dbzenum", &relation, &catalog);
    (envelope, shape, Arc::new(relation))
}

#[test]
fn enums_arrays_and_intervals_are_debeziums() {
    let (envelope, shape, relation) = shape();
    let rows = [
        (
            "enum-array-id1",
            vec![
                text("1"),
                text("happy, very"),
                Cell::Null,
                text(r#"{a,"b c","\"q\"",NULL}"#),
                text("{1,2,3}"),
                text("{9007199254740993}"),
                text("1 day 02:03:04.5"),
            ],
        ),
        (
            "enum-array-id2",
            vec![
                text("2"),
                text("ok"),
                Cell::Null,
                Cell::Null,
                text("{}"),
                Cell::Null,
                Cell::Null,
            ],
        ),
    ];
    for (stem, new) in rows {
        let (key, value) = types_fixture(stem);
        let (at, now) = position(&value);
        let insert = Change::Insert {
            relation: relation.clone(),
            new,
        };
        let records = envelope
            .records(&shape, &insert, &at, now)
            .unwrap_or_else(|e| panic!("{stem}: {e}"));
        assert_eq!(records.len(), 1, "{stem}");
        let ours_key =
            String::from_utf8(records[0].key.clone().unwrap_or_default()).unwrap_or_default();
        assert_eq!(ours_key, key, "{stem}: key");
        let ours =
            String::from_utf8(records[0].value.clone().unwrap_or_default()).unwrap_or_default();
        assert_eq!(masked(&ours), masked(&value), "{stem}: value");
    }
}
