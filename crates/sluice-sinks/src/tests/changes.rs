//! What records do to their rows, without a database: tombstones by the sink's rule, the
//! captured Debezium events (`sluice-cli/tests/data/debezium`) taken apart, and the batch's
//! survivors when deletes, upserts, kept values and key changes meet.

use std::collections::HashMap;

use super::decode::column;
use crate::{
    Cell, ColumnShape, Decoded, RecordMeta, RowOp, SinkDecoder, SinkRow, SqlType, TableShape,
    parse_sinks, plan_sink,
};

const ITEMS: &str = r#"
[[sink]]
name = "items"
table = "items"
key = ["id"]
format = "debezium"
conflict = { newest-wins = "lsn" }
[sink.columns]
id = { field = "id" }
title = { field = "title" }
amount = { field = "amount" }
doc = { field = "doc" }
big = { field = "big" }
day = { field = "day" }
lsn = { cdc = "lsn" }
"#;

fn items(text: &str) -> SinkDecoder {
    let table = TableShape {
        name: "items".into(),
        columns: vec![
            column("id", SqlType::BigInt, true),
            column("title", SqlType::Text, false),
            column(
                "amount",
                SqlType::Numeric {
                    precision: Some(12),
                    scale: 2,
                },
                false,
            ),
            column("doc", SqlType::Jsonb, false),
            column("big", SqlType::Text, false),
            column("day", SqlType::Date, false),
            column("lsn", SqlType::BigInt, false),
        ],
        unique_keys: vec![vec!["id".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    let sinks = parse_sinks("m.toml", text).unwrap();
    let plan = plan_sink(&sinks[0], "p", &HashMap::from([("items".into(), table)]))
        .unwrap_or_else(|e| panic!("{e:?}"));
    SinkDecoder::new(&sinks[0], &plan)
}

/// A record's headers: name and value.
type Headers = Vec<(String, Option<Vec<u8>>)>;

/// A captured record's key, value (`None`: a tombstone) and headers.
fn captured(name: &str) -> (Vec<u8>, Option<Vec<u8>>, Headers) {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sluice-cli/tests/data/debezium");
    let read = |ext: &str| std::fs::read(dir.join(format!("{name}.{ext}"))).ok();
    let headers: serde_json::Value =
        serde_json::from_slice(&read("headers.json").unwrap()).unwrap();
    let headers = headers["headers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h[0].as_str().unwrap().to_owned(),
                h[1].as_str().map(|v| v.as_bytes().to_vec()),
            )
        })
        .collect();
    (read("key.json").unwrap(), read("value.json"), headers)
}

fn decode(decoder: &SinkDecoder, name: &str) -> Decoded {
    let (key, value, headers) = captured(name);
    let meta = RecordMeta {
        topic: "t",
        partition: 0,
        offset: 0,
        timestamp: None,
        key: Some(&key),
        headers: &headers,
    };
    decoder
        .decode_record(value.as_deref(), &meta)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn captured_debezium_events_are_upserts_deletes_and_nothing() {
    let decoder = items(ITEMS);
    let created = decode(&decoder, "01-create-id2");
    assert_eq!(created.op, RowOp::Upsert);
    assert_eq!(created.cells[0], Cell::BigInt(2));
    assert_eq!(created.cells[2], Cell::Numeric("-42.50".into()));
    assert!(
        matches!(&created.cells[3], Cell::RawJson(doc) if doc.contains("12345678901234567890")),
        "a Json string's JSON, digits kept: {:?}",
        created.cells[3]
    );
    assert!(created.keep.is_empty());

    let toasted = decode(&decoder, "02-update-id2-toast-placeholder");
    assert_eq!(toasted.op, RowOp::Upsert);
    assert_eq!(&*toasted.keep, [4], "`big` keeps its stored value");
    assert_eq!(toasted.cells[4], Cell::Null, "never the placeholder text");
    assert_eq!(toasted.cells[2], Cell::Numeric("0.05".into()));

    let deleted = decode(&decoder, "06-delete-id3");
    assert_eq!(deleted.op, RowOp::Delete);
    assert_eq!(deleted.cells[0], Cell::BigInt(3));
    assert!(
        matches!(deleted.cells[6], Cell::BigInt(_)),
        "a delete keeps its version"
    );
    assert_eq!(decode(&decoder, "07-tombstone-id3").op, RowOp::Ignore);

    let moved = decode(&decoder, "05-create-id3-pk-update");
    assert_eq!(moved.cells[0], Cell::BigInt(3));
    let from = moved
        .moved_from
        .expect("the old key from __debezium.oldkey");
    assert_eq!(&*from.key, [Cell::BigInt(2)]);
    assert_eq!(from.version, Some(moved.cells[6].clone()));
}

/// A row of `items`: id, lsn, title, which columns it keeps.
fn row(record: usize, op: RowOp, id: i64, lsn: i64, title: &str, keep: &[usize]) -> SinkRow {
    let cells = vec![
        Cell::BigInt(id),
        Cell::Text(title.into()),
        Cell::Null,
        Cell::Null,
        if keep.contains(&4) {
            Cell::Null
        } else {
            Cell::Text(format!("big {record}"))
        },
        Cell::Null,
        Cell::BigInt(lsn),
    ];
    SinkRow::of(
        record,
        &Decoded {
            op,
            cells: cells.into(),
            keep: keep.into(),
            moved_from: None,
            moving_to: None,
        },
    )
}

#[test]
fn a_delete_meets_its_keys_other_records_by_version() {
    let decoder = items(ITEMS);
    let out = decoder.dedupe(vec![
        row(0, RowOp::Upsert, 1, 10, "first", &[]),
        row(1, RowOp::Delete, 1, 20, "", &[]),
        row(2, RowOp::Upsert, 1, 30, "again", &[4]),
        row(3, RowOp::Upsert, 2, 10, "two", &[]),
        row(4, RowOp::Delete, 2, 20, "", &[]),
        row(5, RowOp::Upsert, 2, 15, "older", &[]),
    ]);
    let survivors: Vec<(i64, RowOp, Option<&Cell>)> = out
        .rows
        .iter()
        .map(|r| {
            let id = match r.cell(0) {
                Some(Cell::BigInt(id)) => *id,
                _ => -1,
            };
            (id, r.op.clone(), r.cell(1))
        })
        .collect();
    assert_eq!(
        survivors,
        [
            (
                1,
                RowOp::Replace {
                    version: Some(Cell::BigInt(20))
                },
                Some(&Cell::Text("again".into()))
            ),
            (
                2,
                RowOp::Replace {
                    version: Some(Cell::BigInt(20))
                },
                Some(&Cell::Text("older".into()))
            ),
        ],
        "key 1: the delete at 20, then the insert at 30; key 2: the delete at 20, then the \
         older insert at 15 (the row is gone: as separate batches, it inserts)"
    );
    // Key 1's survivor keeps `big`, and no record after the delete had it: the stored row's.
    assert_eq!(&*out.rows[0].keep, [4]);
}

#[test]
fn a_survivor_takes_a_kept_value_from_its_keys_earlier_record() {
    let decoder = items(ITEMS);
    let out = decoder.dedupe(vec![
        row(0, RowOp::Upsert, 1, 10, "created", &[]),
        row(1, RowOp::Upsert, 1, 20, "updated", &[4]),
        row(2, RowOp::Upsert, 1, 30, "updated again", &[4]),
    ]);
    assert_eq!(out.rows.len(), 1);
    let survivor = &out.rows[0];
    assert_eq!(survivor.cell(1), Some(&Cell::Text("updated again".into())));
    assert_eq!(
        survivor.cell(4),
        Some(&Cell::Text("big 0".into())),
        "the value the create wrote"
    );
    assert!(survivor.keep.is_empty());
}

#[test]
fn a_tombstone_deletes_ignores_or_is_refused_by_the_rule() {
    let plain = ITEMS
        .replace("format = \"debezium\"\n", "")
        .replace("lsn = { cdc = \"lsn\" }", "lsn = { field = \"lsn\" }")
        .replace("id = { field = \"id\" }", "id = { key = \"id\" }");
    let meta = RecordMeta {
        topic: "t",
        partition: 0,
        offset: 0,
        timestamp: None,
        key: Some(br#"{"id": 7}"#),
        headers: &[],
    };
    let rule = |rule: &str| {
        let text = plain.replace("[sink.columns]", &format!("{rule}\n[sink.columns]"));
        items(&text).decode_record(None, &meta)
    };
    let deleted = rule("on_tombstone = \"delete\"").unwrap();
    assert_eq!(deleted.op, RowOp::Delete);
    assert_eq!(
        deleted.cells[0],
        Cell::BigInt(7),
        "the key from the record key"
    );
    assert_eq!(deleted.cells[6], Cell::Null, "a tombstone has no version");
    assert_eq!(rule("on_tombstone = \"ignore\"").unwrap().op, RowOp::Ignore);
    assert_eq!(
        rule("").unwrap_err().to_string(),
        "record has no value (tombstone)",
        "a JSON topic's default keeps the record as a dead letter"
    );
}

#[test]
fn a_key_changes_delete_and_create_name_each_other_and_are_written_alone() {
    let decoder = items(ITEMS);
    let deleted = decode(&decoder, "03-delete-id2-pk-update");
    assert_eq!(deleted.op, RowOp::Delete);
    assert_eq!(deleted.cells[0], Cell::BigInt(2));
    assert_eq!(
        deleted.moving_to.as_ref().map(|to| &*to.key),
        Some(&[Cell::BigInt(3)][..]),
        "the new key from __debezium.newkey"
    );
    let names = [
        "01-create-id2",
        "02-update-id2-toast-placeholder",
        "03-delete-id2-pk-update",
        "04-tombstone-id2-pk-update",
        "05-create-id3-pk-update",
    ];
    let rows: Vec<SinkRow> = names
        .iter()
        .enumerate()
        .map(|(record, name)| SinkRow::of(record, &decode(&decoder, name)))
        .collect();
    let runs: Vec<Vec<usize>> = decoder
        .runs(rows)
        .iter()
        .map(|run| run.iter().map(|row| row.record).collect())
        .collect();
    assert_eq!(
        runs,
        [vec![0], vec![1], vec![2], vec![3], vec![4]],
        "each change event of key 2 in its own run, the key change's delete alone, the \
         tombstone, the create of the new key alone"
    );
}

/// An unchanged TOASTed `int4[]` comes as the placeholder's bytes, one array item each, as
/// Debezium writes it (and `sluice capture`): a value kept, never an array of those numbers;
/// the unchanged TOASTed `text[]` beside it is the placeholder in an array.
#[test]
fn an_unchanged_toasted_number_array_keeps_its_stored_value() {
    let decoder = survey_decoder(vec![
        column("id", SqlType::Integer, true),
        column("big_tags", SqlType::Array(Box::new(SqlType::Text)), false),
        column(
            "big_nums",
            SqlType::Array(Box::new(SqlType::Integer)),
            false,
        ),
        column("note", SqlType::Text, false),
    ]);
    let (key, value) = captured_type_event("survey-toast-2");
    let meta = meta_of(&key);
    let updated = decoder.decode_record(Some(&value), &meta).unwrap();
    assert_eq!(updated.op, RowOp::Upsert);
    assert_eq!(
        &*updated.keep,
        [1, 2],
        "both arrays keep their stored values"
    );
    assert_eq!(updated.cells[3], Cell::Text("second".into()));
    // The same numbers one short, or other numbers, are values.
    assert!(!crate::envelope::numbers_are_bytes("[95, 95]", b"__d"));
    assert!(crate::envelope::numbers_are_bytes("[95, 95, 100]", b"__d"));
    assert!(crate::envelope::numbers_are_bytes("[95.0,95,100]", b"__d"));
    assert!(!crate::envelope::numbers_are_bytes("[95,95,101]", b"__d"));
    // An unchanged TOASTed `bytea[]`: the placeholder's base64 in an array, as `sluice
    // capture` writes it.
    let mut event: serde_json::Value = serde_json::from_slice(&value).unwrap();
    event["payload"]["after"]["big_tags"] =
        serde_json::json!(["X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="]);
    let bytea = decoder
        .decode_record(Some(event.to_string().as_bytes()), &meta)
        .unwrap();
    assert_eq!(
        &*bytea.keep,
        [1, 2],
        "the base64 placeholder in an array keeps too"
    );
}

/// Debezium's (and `sluice capture`'s) `money` — a Decimal of scale 2 whose scale only the
/// schema has — and the types the server parses from their text (`timetz` in UTC with a `Z`,
/// `tsvector`) read from the captured events of a table holding them: money digit for digit
/// (the largest one a `money` holds too), the others as their strings.
#[test]
fn money_and_the_types_the_server_parses_read_from_debeziums_events() {
    let decoder = survey_decoder(vec![
        column("id", SqlType::Integer, true),
        column("mon", SqlType::Money, false),
        column("ttz", SqlType::Parsed("timetz".into()), false),
        column("tv", SqlType::Parsed("tsvector".into()), false),
    ]);
    let cells = |name: &str| decode_captured(&decoder, name).cells;
    assert_eq!(
        &*cells("survey-t-1"),
        [
            Cell::Int(1),
            Cell::Numeric("-0.01".into()),
            Cell::Text("10:00:00Z".into()),
            Cell::Text("'a':1 'b':2".into()),
        ]
    );
    assert_eq!(
        &*cells("survey-t-2"),
        [
            Cell::Int(2),
            Cell::Numeric("92233720368547758.07".into()),
            Cell::Null,
            Cell::Null,
        ]
    );
}

/// The infinities of `date`, `timestamp` and `timestamptz` columns as Debezium writes them —
/// numbers for dates and timestamps, the words for a `timestamptz`, other numbers and a year
/// string in arrays — read as infinities (the captured `survey-t-3` event).
#[test]
fn debeziums_infinities_read_as_infinities() {
    use crate::infinity::{DATE_INFINITY, DATE_MINUS_INFINITY, INFINITY, MINUS_INFINITY};
    let array = |inner: SqlType| SqlType::Array(Box::new(inner));
    let decoder = survey_decoder(vec![
        column("id", SqlType::Integer, true),
        column("sd", SqlType::Date, false),
        column("sd2", SqlType::Date, false),
        column("sts", SqlType::Timestamp, false),
        column("sts2", SqlType::Timestamp, false),
        column("stz", SqlType::TimestampTz, false),
        column("stz2", SqlType::TimestampTz, false),
        ColumnShape {
            time_precision: Some(3),
            ..column("sts3", SqlType::Timestamp, false)
        },
        column("d", array(SqlType::Date), false),
        column("ts", array(SqlType::TimestampTz), false),
        // A `timestamp(3)[]`: its items are milliseconds (time.precision.mode=adaptive).
        ColumnShape {
            time_precision: Some(3),
            ..column("tsn", array(SqlType::Timestamp), false)
        },
    ]);
    let cells = decode_captured(&decoder, "survey-t-3").cells;
    assert_eq!(
        &cells[..8],
        [
            Cell::Int(3),
            Cell::Date(DATE_INFINITY),
            Cell::Date(DATE_MINUS_INFINITY),
            Cell::Timestamp(INFINITY),
            Cell::Timestamp(MINUS_INFINITY),
            Cell::Timestamp(INFINITY),
            Cell::Timestamp(MINUS_INFINITY),
            Cell::Timestamp(INFINITY),
        ]
    );
    let json = |cell: &Cell| match cell {
        Cell::Json(value) => value.to_string(),
        other => format!("{other:?}"),
    };
    assert_eq!(
        cells[8..].iter().map(json).collect::<Vec<_>>(),
        [
            r#"["-infinity"]"#,
            r#"["infinity","-infinity"]"#,
            r#"["-infinity"]"#
        ]
    );
}

/// The key and value of a captured Debezium event of `sluice-cli/tests/data/debezium/types`
/// (`name`: its files' stem).
fn captured_type_event(name: &str) -> (Vec<u8>, Vec<u8>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../sluice-cli/tests/data/debezium/types");
    let read = |ext: &str| std::fs::read(dir.join(format!("{name}.{ext}"))).unwrap();
    (read("key.json"), read("value.json"))
}

/// A record's coordinates with `key`.
fn meta_of(key: &[u8]) -> RecordMeta<'_> {
    RecordMeta {
        topic: "t",
        partition: 0,
        offset: 0,
        timestamp: None,
        key: Some(key),
        headers: &[],
    }
}

/// The captured event `name` decoded by `decoder`.
fn decode_captured(decoder: &SinkDecoder, name: &str) -> Decoded {
    let (key, value) = captured_type_event(name);
    decoder.decode_record(Some(&value), &meta_of(&key)).unwrap()
}

/// The decoder of a `debezium` sink into table `survey` of `columns` (keyed by `id`), each
/// column read from the field of its name.
fn survey_decoder(columns: Vec<ColumnShape>) -> SinkDecoder {
    let mut text = "[[sink]]\nname = \"survey\"\ntable = \"survey\"\nkey = [\"id\"]\n\
                    format = \"debezium\"\n[sink.columns]\n"
        .to_owned();
    for c in &columns {
        text.push_str(&format!("{0} = {{ field = \"{0}\" }}\n", c.name));
    }
    let table = TableShape {
        name: "survey".into(),
        columns,
        unique_keys: vec![vec!["id".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    let sinks = parse_sinks("m.toml", &text).unwrap();
    let plan = plan_sink(&sinks[0], "p", &HashMap::from([("survey".into(), table)]))
        .unwrap_or_else(|e| panic!("{e:?}"));
    SinkDecoder::new(&sinks[0], &plan)
}

/// A Debezium `Json` field holding `"null"` is the JSON `null` in a `jsonb` column, where a
/// JSON `null` (no value) is SQL NULL.
#[test]
fn a_debezium_json_null_is_stored_as_json_null_not_sql_null() {
    let decoder = items(ITEMS);
    let event = |doc: &str| {
        format!(
            r#"{{"schema":{{"type":"struct","fields":[
                {{"field":"after","type":"struct","optional":true,"fields":[
                    {{"field":"id","type":"int64"}},
                    {{"field":"doc","type":"string","optional":true,"name":"io.debezium.data.Json"}}]}},
                {{"field":"op","type":"string"}}]}},
              "payload":{{"before":null,"after":{{"id":7,"doc":{doc}}},"op":"u","source":{{"lsn":9}}}}}}"#
        )
    };
    let meta = RecordMeta {
        topic: "t",
        partition: 0,
        offset: 0,
        timestamp: None,
        key: Some(br#"{"id":7}"#),
        headers: &[],
    };
    let doc = |text: &str| {
        let value = event(text);
        decoder
            .decode_record(Some(value.as_bytes()), &meta)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .cells[3]
            .clone()
    };
    assert_eq!(doc(r#""null""#), Cell::RawJson("null".into()));
    assert_eq!(doc("null"), Cell::Null);
    assert_eq!(
        doc(r#""{\"a\":null}""#),
        Cell::RawJson(r#"{"a":null}"#.into())
    );
}
