//! Out-of-line values an UPDATE did not change: under identity `FULL` the old row holds them,
//! so `after` (and the `c` of a key change) carries them; under `DEFAULT` only the key's
//! columns can be taken from the old row and the others stay `__debezium_unavailable_value`.

use super::*;

const UNAVAILABLE: &str = "__debezium_unavailable_value";

fn relation() -> Arc<Relation> {
    Arc::new(Relation {
        oid: 16_400,
        schema: "public".into(),
        table: "items".into(),
        replica_identity: ReplicaIdentity::Full,
        columns: Vec::new(),
    })
}

/// Row `id` as stored before the update: `big` (column 4) holds `big`.
fn old_row(id: &str, big: &str) -> Tuple {
    let mut row = row_2_updated(id, "before");
    row[4] = text(big);
    row
}

fn after_of(record: &Record) -> Value {
    let value: Value = serde_json::from_str(&payload_of(record)).unwrap_or_else(|e| panic!("{e}"));
    value["payload"]["after"].clone()
}

#[test]
fn an_unchanged_out_of_line_value_comes_from_the_full_old_row() {
    let (envelope, shape) = items();
    let (at, now) = at_of("02-update-id2-toast-placeholder");
    let big = "x".repeat(8_032);
    let update = Change::Update {
        relation: relation(),
        old: Some(OldRow::Full(old_row("2", &big))),
        new: row_2_updated("2", "after"),
    };
    let records = envelope
        .records(&shape, &update, &at, now)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records.len(), 1);
    let after = after_of(&records[0]);
    assert!(
        after["big"] == Value::String(big.clone()),
        "after.big: {}",
        after["big"]
    );
    assert_eq!(after["title"], "after");

    // A key change under FULL: the `c` of the new key carries the value too.
    let change = Change::Update {
        relation: relation(),
        old: Some(OldRow::Full(old_row("2", &big))),
        new: row_2_updated("3", "moved"),
    };
    let records = envelope
        .records(&shape, &change, &at, now)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records.len(), 3, "d, tombstone, c");
    let created = after_of(&records[2]);
    assert_eq!(created["id"], 3);
    assert!(
        created["big"] == Value::String(big),
        "after.big of the c: {}",
        created["big"]
    );
}

#[test]
fn without_the_full_old_row_the_value_stays_unavailable() {
    let (envelope, shape) = items();
    let (at, now) = at_of("02-update-id2-toast-placeholder");
    // DEFAULT identity, the key changed: the old row holds only the key.
    let change = Change::Update {
        relation: relation(),
        old: Some(OldRow::Key(key_only("2"))),
        new: row_2_updated("3", "moved"),
    };
    let records = envelope
        .records(&shape, &change, &at, now)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records.len(), 3);
    assert_eq!(after_of(&records[2])["big"], UNAVAILABLE);
    // DEFAULT identity, the key unchanged: no old row at all.
    let update = Change::Update {
        relation: relation(),
        old: None,
        new: row_2_updated("2", "after"),
    };
    let records = envelope
        .records(&shape, &update, &at, now)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(after_of(&records[0])["big"], UNAVAILABLE);
}

#[test]
fn an_old_row_marked_whole_but_holding_only_the_key_fills_nothing() {
    // A partitioned table published by its FULL root: pgoutput marks the old tuple whole
    // ('O') by the root's identity, but the partition logged only its key (DEFAULT).
    let (envelope, shape) = items();
    let (at, now) = at_of("02-update-id2-toast-placeholder");
    let change = Change::Update {
        relation: relation(),
        old: Some(OldRow::Full(key_only("2"))),
        new: row_2_updated("3", "moved"),
    };
    let records = envelope
        .records(&shape, &change, &at, now)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records.len(), 3, "d, tombstone, c");
    assert_eq!(after_of(&records[2])["big"], UNAVAILABLE, "never null");
}
