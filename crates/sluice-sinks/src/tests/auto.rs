//! `columns = "auto"`: the file's two forms, the columns filled in from the table (its
//! order, the generated and `never_written` columns left out, explicit entries first), the
//! key from the primary key, and a record decoded through the filled-in sink — fields of the
//! columns' names read, the record's other fields ignored.

use std::collections::HashMap;

use serde_json::json;

use crate::{
    Cell, ColumnShape, ConflictPolicy, RecordMeta, SinkDecoder, SinkError, SqlType, TableShape,
    parse_sinks, plan_sink, with_table_columns,
};

fn column(name: &str, sql_type: SqlType, not_null: bool) -> ColumnShape {
    ColumnShape {
        name: name.into(),
        sql_type,
        not_null,
        has_default: false,
        writable: true,
        time_precision: None,
    }
}

/// `orders (order_id bigint, line int, "item.sku" text, qty int not null, note text,
/// total generated, synced_at default now())`, primary key `(order_id, line)`.
fn tables(primary_key: bool) -> HashMap<String, TableShape> {
    let orders = TableShape {
        name: "shop.orders".into(),
        columns: vec![
            column("order_id", SqlType::BigInt, true),
            column("line", SqlType::Integer, true),
            column("item.sku", SqlType::Text, false),
            column("qty", SqlType::Integer, true),
            column("note", SqlType::Text, false),
            ColumnShape {
                writable: false,
                has_default: true,
                ..column("total", SqlType::BigInt, false)
            },
            ColumnShape {
                has_default: true,
                ..column("synced_at", SqlType::TimestampTz, true)
            },
        ],
        unique_keys: vec![vec!["order_id".into(), "line".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: primary_key.then(|| vec!["order_id".into(), "line".into()]),
        partitioned: false,
    };
    HashMap::from([("shop.orders".into(), orders)])
}

fn sink(extra: &str) -> crate::Sink {
    let file = format!("[[sink]]\nname = \"orders\"\ntable = \"shop.orders\"\n{extra}");
    parse_sinks("m.toml", &file)
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0)
}

fn names(sink: &crate::Sink) -> Vec<&str> {
    sink.columns.iter().map(|c| c.column.as_str()).collect()
}

#[test]
fn the_file_says_auto_alone_or_beside_explicit_columns() {
    let alone = sink("columns = \"auto\"\n");
    assert!(alone.auto_columns);
    assert!(alone.columns.is_empty() && alone.key.is_empty());
    assert_eq!(alone.conflict, ConflictPolicy::AlwaysUpdate);
    let beside = sink(
        "never_written = [\"synced_at\"]\n[sink.columns]\n\"*\" = \"auto\"\n\
         note = { field = \"remark\" }\n",
    );
    assert!(beside.auto_columns);
    assert_eq!(names(&beside), ["note"]);
    let bad = parse_sinks(
        "m.toml",
        "[[sink]]\nname = \"o\"\ntable = \"t\"\n[sink.columns]\n\"*\" = \"all\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        bad.contains("columns.\"*\"") && bad.contains("\"auto\""),
        "{bad}"
    );
    let bad = parse_sinks(
        "m.toml",
        "[[sink]]\nname = \"o\"\ntable = \"t\"\ncolumns = \"every\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("or \"auto\""), "{bad}");
    // Without auto, a key is still required.
    let errors = crate::check_sinks(
        "m.toml",
        &[sink("[sink.columns]\nqty = { field = \"q\" }\n")],
    );
    assert!(
        errors.iter().any(|e| e.to_string().contains("`key`")),
        "{errors:?}"
    );
}

#[test]
fn the_columns_come_from_the_table_and_the_key_from_its_primary_key() {
    let tables = tables(true);
    let declared = sink(
        "never_written = [\"synced_at\"]\n[sink.columns]\n\"*\" = \"auto\"\n\
         note = { field = \"remark\" }\n",
    );
    let filled = with_table_columns(&declared, &tables).unwrap().into_owned();
    assert!(!filled.auto_columns);
    // Table order; the generated column and `never_written` left out; `note` as written.
    assert_eq!(
        names(&filled),
        ["order_id", "line", "item.sku", "qty", "note"]
    );
    assert_eq!(filled.key, ["order_id", "line"]);
    let note = filled.mapping("note").unwrap();
    assert_eq!(note.source.to_string(), "field remark");
    assert!(!note.filled_in && filled.mapping("qty").unwrap().filled_in);
    // A column whose name has a dot reads the field of that name, not a nested path.
    let sku = &filled.mapping("item.sku").unwrap().source;
    assert!(matches!(sku, crate::Source::Field(path) if path.segments() == ["item.sku"]));

    // Decoded: the fields of the columns' names; the record's other fields ignored; a
    // missing nullable field is NULL.
    let plan = plan_sink(&filled, "p", &tables).unwrap_or_else(|e| panic!("{e:?}"));
    let decoder = SinkDecoder::new(&filled, &plan);
    let record = json!({"order_id": 7, "line": 2, "item.sku": "A-1", "qty": 3,
        "remark": "fragile", "note": "not read", "extra": {"deep": [1, 2]}});
    let meta = RecordMeta {
        topic: "orders",
        partition: 0,
        offset: 0,
        timestamp: None,
        key: None,
        headers: &[],
    };
    let cells = decoder
        .decode(Some(record.to_string().as_bytes()), &meta)
        .unwrap();
    assert_eq!(
        cells,
        [
            Cell::BigInt(7),
            Cell::Int(2),
            Cell::Text("A-1".into()),
            Cell::Int(3),
            Cell::Text("fragile".into()),
        ]
    );
    let missing = json!({"order_id": 7, "line": 2, "qty": 3});
    let cells = decoder
        .decode(Some(missing.to_string().as_bytes()), &meta)
        .unwrap();
    assert_eq!((&cells[2], &cells[4]), (&Cell::Null, &Cell::Null));
    // A NOT NULL column's field missing is the record's fault, named.
    let error = decoder
        .decode(
            Some(json!({"order_id": 7, "line": 2}).to_string().as_bytes()),
            &meta,
        )
        .unwrap_err();
    assert!(error.to_string().contains("qty"), "{error}");
}

#[test]
fn what_the_table_cannot_give_is_an_error_naming_the_sink() {
    // No primary key and no `key`.
    let declared = sink("columns = \"auto\"\n");
    let errors = with_table_columns(&declared, &tables(false)).unwrap_err();
    assert_eq!(
        errors,
        [SinkError::NoPrimaryKey {
            sink: "orders".into(),
            table: "shop.orders".into()
        }]
    );
    // `key` named instead: fine without a primary key.
    let keyed = sink("key = [\"order_id\", \"line\"]\ncolumns = \"auto\"\n");
    assert!(with_table_columns(&keyed, &tables(false)).is_ok());
    // The table does not exist.
    let elsewhere = sink("columns = \"auto\"\n");
    let errors = with_table_columns(&elsewhere, &HashMap::new()).unwrap_err();
    assert!(
        matches!(errors[0], SinkError::UnknownTable { .. }),
        "{errors:?}"
    );
    // A key column left to `never_written`: the filled-in sink contradicts itself.
    let never = sink("never_written = [\"line\"]\ncolumns = \"auto\"\n");
    let errors = with_table_columns(&never, &tables(true)).unwrap_err();
    let text = errors[0].to_string();
    assert!(
        text.contains("with the columns of `shop.orders`") && text.contains("line"),
        "{text}"
    );
    // An explicit entry for a column the table lacks is the plan's to name.
    let extra = sink("[sink.columns]\n\"*\" = \"auto\"\nlsn = { kafka = \"offset\" }\n");
    let filled = with_table_columns(&extra, &tables(true))
        .unwrap()
        .into_owned();
    let errors = plan_sink(&filled, "p", &tables(true)).unwrap_err();
    assert!(
        errors
            .iter()
            .any(|e| e.to_string().contains("no column `lsn`")),
        "{errors:?}"
    );
}

#[test]
fn a_table_of_key_columns_only_keeps_the_first_delivery() {
    let only_keys = TableShape {
        name: "tags".into(),
        columns: vec![
            column("post", SqlType::BigInt, true),
            column("tag", SqlType::Text, true),
        ],
        unique_keys: vec![vec!["post".into(), "tag".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: Some(vec!["post".into(), "tag".into()]),
        partitioned: false,
    };
    let declared = parse_sinks(
        "m.toml",
        "[[sink]]\nname = \"tags\"\ntable = \"tags\"\ncolumns = \"auto\"\n",
    )
    .unwrap()
    .remove(0);
    let tables = HashMap::from([("tags".into(), only_keys)]);
    let filled = with_table_columns(&declared, &tables).unwrap().into_owned();
    assert_eq!(filled.conflict, ConflictPolicy::InsertIgnore);
    assert!(plan_sink(&filled, "p", &tables).is_ok());
}

#[test]
fn a_table_template_is_checked_against_the_sinks_topics_and_format() {
    let problems = |text: &str| {
        let sinks = parse_sinks("m.toml", text).unwrap_or_else(|e| panic!("{e}"));
        crate::check_sinks("m.toml", &sinks)
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    // Fine: a capture of the pattern, the topic, the source block of change events.
    assert!(problems("[[sink]]\nname = \"a\"\ntopic_pattern = \"src\\\\.(\\\\w+)\"\ntable = \"raw_{1}\"\ncolumns = \"auto\"\n").is_empty());
    assert!(problems("[[sink]]\nname = \"a\"\ntopics = [\"x\", \"y\"]\ntable = \"{topic}\"\ncolumns = \"auto\"\n").is_empty());
    assert!(problems("[[sink]]\nname = \"a\"\ntopic_pattern = \"cdc\\\\..*\"\ntable = \"{source.schema}.{source.table}\"\nformat = \"debezium\"\ncolumns = \"auto\"\n").is_empty());
    // Not: a capture the pattern lacks, a capture without a pattern, the source block of
    // records that are not change events.
    let beyond = problems(
        "[[sink]]\nname = \"a\"\ntopic_pattern = \"src\\\\.(\\\\w+)\"\ntable = \"{1}_{2}\"\ncolumns = \"auto\"\n",
    );
    assert!(
        beyond
            .iter()
            .any(|p| p.contains("{2}` but `topic_pattern` has 1")),
        "{beyond:?}"
    );
    let named = problems("[[sink]]\nname = \"a\"\ntable = \"{1}\"\ncolumns = \"auto\"\n");
    assert!(
        named.iter().any(|p| p.contains("needs `topic_pattern`")),
        "{named:?}"
    );
    let plain =
        problems("[[sink]]\nname = \"a\"\ntable = \"{source.table}\"\ncolumns = \"auto\"\n");
    assert!(
        plain
            .iter()
            .any(|p| p.contains("need `format = \"debezium\"`")),
        "{plain:?}"
    );
    let bad = parse_sinks(
        "m.toml",
        "[[sink]]\nname = \"a\"\ntable = \"{table}\"\ncolumns = \"auto\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(bad.contains("not a placeholder"), "{bad}");
}

#[test]
fn a_source_block_template_ignores_tombstones() {
    let text = "[[sink]]\nname = \"a\"\ntopic = \"t\"\ntable = \"{source.schema}.{source.table}\"\n\
                format = \"debezium\"\non_tombstone = \"delete\"\ncolumns = \"auto\"\n";
    let sinks = parse_sinks("m.toml", text).unwrap();
    let problems: Vec<String> = crate::check_sinks("m.toml", &sinks)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        problems
            .iter()
            .any(|p| p.contains("needs `on_tombstone = \"ignore\"`")),
        "{problems:?}"
    );
}
