//! A `numeric` `NaN` or infinity, which Debezium 3.6.1 cannot convert: null in a row image
//! (the column's default for a `NOT NULL` column with one), in `after` and `before` alike, a
//! whole `numeric[]` null for one such element; and a stop only where Debezium's connector
//! stops too (a key column, a `NOT NULL` column without a default).

use super::*;

/// `id numeric PRIMARY KEY, h numeric, f numeric(12,2) NOT NULL DEFAULT 0, r numeric NOT
/// NULL, a numeric[]` in schema `public`, table `t`, under `identity`.
fn shape(identity: ReplicaIdentity) -> TableShape {
    let column = |name: &str, type_oid: u32, type_modifier: i32| Column {
        name: name.to_owned(),
        type_oid,
        type_modifier,
        is_key: name == "id" && identity == ReplicaIdentity::Default,
    };
    let relation = Relation {
        oid: 9,
        schema: "public".into(),
        table: "t".into(),
        replica_identity: identity,
        columns: vec![
            column("id", 1700, -1),
            column("h", 1700, -1),
            column("f", 1700, ((12 << 16) | 2) + 4),
            column("r", 1700, -1),
            column("a", 1231, -1),
        ],
    };
    let catalog = |optional: bool, default: Option<&str>, primary_key: bool| ColumnCatalog {
        optional,
        default: default.map(str::to_owned),
        primary_key,
        enum_allowed: None,
        domain_base: None,
    };
    let catalog = [
        catalog(false, None, true),
        catalog(true, None, false),
        // 0.00 at scale 2: the unscaled 0 in one byte.
        catalog(false, Some("\"AA==\""), false),
        catalog(false, None, false),
        catalog(true, None, false),
    ];
    TableShape::new("p", &relation, &catalog)
}

fn relation(identity: ReplicaIdentity) -> Arc<Relation> {
    Arc::new(Relation {
        oid: 9,
        schema: "public".into(),
        table: "t".into(),
        replica_identity: identity,
        columns: Vec::new(),
    })
}

fn envelope() -> Envelope {
    let (envelope, _) = items();
    Envelope::new(EnvelopeSettings {
        schemas: false,
        ..envelope.settings().clone()
    })
}

fn row(cells: [&str; 5]) -> Tuple {
    cells.iter().map(|cell| text(cell)).collect()
}

fn insert(cells: [&str; 5]) -> Change {
    Change::Insert {
        relation: relation(ReplicaIdentity::Default),
        new: row(cells),
    }
}

fn records_of(change: &Change, identity: ReplicaIdentity) -> Result<Vec<Record>, EncodeError> {
    let (at, now) = at_of("01-create-id2");
    envelope().records(&shape(identity), change, &at, now)
}

fn image(record: &Record, which: &str) -> Value {
    let value: Value = serde_json::from_str(&payload_of(record)).unwrap_or_else(|e| panic!("{e}"));
    value[which].clone()
}

#[test]
fn a_nan_in_an_optional_column_is_null_and_the_capture_goes_on() {
    for special in ["NaN", "Infinity", "-Infinity"] {
        let records = records_of(
            &insert(["1", special, "1.50", "2.0", "{1.5}"]),
            ReplicaIdentity::Default,
        )
        .unwrap_or_else(|e| panic!("{special}: {e}"));
        let after = image(&records[0], "after");
        assert_eq!(after["h"], Value::Null, "{special}");
        assert_eq!(after["f"], "AJY=", "{special}: the other columns as ever");
        // r: 2.0 is 2 at scale 0 (trailing zeros stripped).
        assert_eq!(after["r"]["scale"], 0, "{special}");
    }
}

#[test]
fn a_nan_in_a_required_column_with_a_default_is_the_default() {
    let records = records_of(
        &insert(["1", "5", "NaN", "2", "{}"]),
        ReplicaIdentity::Default,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(image(&records[0], "after")["f"], "AA==");
}

#[test]
fn one_nan_element_makes_the_whole_numeric_array_null() {
    let records = records_of(
        &insert(["1", "5", "1.00", "2", "{1.5,NaN,NULL}"]),
        ReplicaIdentity::Default,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(image(&records[0], "after")["a"], Value::Null);
}

#[test]
fn a_nan_in_the_before_image_is_null_too() {
    let old = row(["1", "NaN", "1.00", "2", "{Infinity}"]);
    let new = row(["1", "7", "1.00", "2", "{}"]);
    let change = Change::Update {
        relation: relation(ReplicaIdentity::Full),
        old: Some(OldRow::Full(old)),
        new,
    };
    let records = records_of(&change, ReplicaIdentity::Full).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records.len(), 1);
    let before = image(&records[0], "before");
    assert_eq!(before["h"], Value::Null);
    assert_eq!(before["a"], Value::Null);
    assert_eq!(image(&records[0], "after")["h"]["scale"], 0);
}

/// Where Debezium's record cannot hold the null its converter leaves, its connector stops:
/// so does the capture, naming the column.
#[test]
fn a_nan_where_no_null_can_be_stops_as_debeziums_connector_does() {
    let error = records_of(
        &insert(["1", "5", "1.00", "NaN", "{}"]),
        ReplicaIdentity::Default,
    )
    .expect_err("r is NOT NULL without a default");
    assert!(
        matches!(&error, EncodeError::NoDecimalForm { column, place, .. }
            if column == "r" && place.contains("NOT NULL")),
        "{error}"
    );
    let error = records_of(
        &insert(["NaN", "5", "1.00", "2", "{}"]),
        ReplicaIdentity::Default,
    )
    .expect_err("id is the key");
    assert!(
        matches!(&error, EncodeError::NoDecimalForm { column, place, .. }
            if column == "id" && place.contains("key")),
        "{error}"
    );
    assert!(error.to_string().contains("\"NaN\""), "{error}");
}
