//! Validation against a table's shape and the derived checks, without a database (the
//! shapes are written here as the catalog reader would return them).

use std::collections::HashMap;

use crate::{ColumnShape, SinkError, SqlType, TableShape, parse_sinks, plan_sink};

fn column(name: &str, sql_type: SqlType, not_null: bool, has_default: bool) -> ColumnShape {
    ColumnShape {
        name: name.into(),
        sql_type,
        not_null,
        has_default,
        writable: true,
        time_precision: None,
    }
}

fn tables() -> HashMap<String, TableShape> {
    let events = TableShape {
        name: "events".into(),
        columns: vec![
            column("id", SqlType::BigInt, true, true),
            column("event_id", SqlType::Varchar(Some(36)), true, false),
            column("app", SqlType::BigInt, true, false),
            column("score", SqlType::SmallInt, true, false),
            column("origin", SqlType::Varchar(Some(8)), false, false),
            column("part", SqlType::SmallInt, false, false),
            column(
                "tags",
                SqlType::Array(Box::new(SqlType::Text)),
                false,
                false,
            ),
            column("at", SqlType::Timestamp, false, false),
            column("blob", SqlType::Other("bytea".into()), false, false),
            column("inserted_at", SqlType::TimestampTz, true, true),
            ColumnShape {
                writable: false,
                ..column("total", SqlType::BigInt, false, true)
            },
        ],
        unique_keys: vec![vec!["id".into()], vec!["event_id".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    let apps = TableShape {
        name: "apps".into(),
        columns: vec![
            column("id", SqlType::BigInt, true, true),
            column("package_name", SqlType::Varchar(Some(255)), true, false),
            column("title", SqlType::Text, false, false),
        ],
        unique_keys: vec![vec!["id".into()], vec!["package_name".into()]],
        nulls_not_distinct_keys: Vec::new(),
        primary_key: None,
        partitioned: false,
    };
    HashMap::from([("events".into(), events), ("apps".into(), apps)])
}

const SINK: &str = r#"
[[sink]]
name = "events"
table = "events"
key = ["event_id"]
conflict = "insert-ignore"

[sink.columns]
event_id = { field = "event_id", min_length = 1 }
app = { lookup = { field = "package", table = "apps", key = "package_name", value = "id", unknown = "unknown_app" } }
score = { field = "score", min = 1, max = 5 }
origin = { const = "crawler" }
tags = { field = "tags", max_items = 3, max_length = 20 }
at = { kafka = "timestamp" }
"#;

fn plan(text: &str) -> Result<crate::SinkPlan, Vec<String>> {
    let sinks = parse_sinks("m.toml", text).unwrap_or_else(|e| panic!("{e}"));
    plan_sink(&sinks[0], "storage-consumer", &tables())
        .map_err(|errors| errors.iter().map(ToString::to_string).collect())
}

fn errors(from: &str, to: &str) -> Vec<String> {
    assert!(SINK.contains(from), "{from}");
    plan(&SINK.replacen(from, to, 1)).expect_err("an invalid sink")
}

#[test]
fn a_valid_sink_plans_its_statement_and_the_checks_of_each_column() {
    let plan = plan(SINK).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(plan.group, "storage-consumer.events");
    assert_eq!(
        plan.statement,
        "INSERT INTO \"events\" AS target \
         (\"event_id\", \"app\", \"score\", \"origin\", \"tags\", \"at\")\n\
         SELECT \"event_id\", \"app\", \"score\", \"origin\", CASE WHEN \"tags\" IS NULL \
         THEN NULL ELSE ARRAY(SELECT e.value::text FROM jsonb_array_elements_text(\"tags\") \
         WITH ORDINALITY AS e(value, n) ORDER BY e.n) END, \"at\"\n\
         FROM UNNEST($1::varchar[], $2::bigint[], $3::smallint[], $4::varchar[], $5::jsonb[], \
         $6::timestamp[]) AS t(\"event_id\", \"app\", \"score\", \"origin\", \"tags\", \"at\")\n\
         ON CONFLICT (\"event_id\") DO NOTHING\n\
         RETURNING TRUE AS inserted"
    );
    let checks: Vec<(String, Vec<String>)> = plan
        .columns
        .iter()
        .map(|c| {
            (
                c.column.clone(),
                c.checks.iter().map(ToString::to_string).collect(),
            )
        })
        .collect();
    let expect = |column: &str, checks: &[&str]| {
        (
            column.to_owned(),
            checks.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        checks,
        [
            expect("event_id", &["required", "text of 1..36 characters"]),
            expect(
                "app",
                &[
                    "required",
                    "text of 0..255 characters",
                    "known in apps.package_name (else dead letter unknown_app)"
                ]
            ),
            expect("score", &["required", "SMALLINT integer 1..5"]),
            expect("origin", &[]),
            expect(
                "tags",
                &[
                    "NULL when absent",
                    "array of at most 3 elements",
                    "each element: text of 0..20 characters"
                ]
            ),
            expect("at", &[]),
        ]
    );
}

#[test]
fn the_plan_names_the_format_as_the_file_says_it() {
    let json = plan(SINK).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        (json.format.as_str(), json.value_format, json.key_format),
        ("json", None, None)
    );
    let avro = SINK.replacen(
        "conflict =",
        "format = \"avro\"\nkey_format = \"protobuf\"\nconflict =",
        1,
    );
    let avro = plan(&avro).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(
        avro.format, "avro",
        "not the JSON object an Avro record is read as"
    );
    assert_eq!(avro.value_format, None, "format says it already");
    assert_eq!(avro.key_format.as_deref(), Some("protobuf"));
}

#[test]
fn unknown_table_and_columns_are_named() {
    assert_eq!(
        errors("table = \"events\"", "table = \"nope\""),
        ["sink `events`: table `nope` does not exist"]
    );
    assert_eq!(
        errors("origin =", "orign ="),
        ["sink `events`, column `orign`: table `events` has no column `orign`"]
    );
    assert_eq!(
        errors("value = \"id\"", "value = \"app_id\""),
        ["sink `events`, column `app`: table `apps` has no column `app_id`"]
    );
    assert_eq!(
        errors("table = \"apps\"", "table = \"applications\""),
        ["sink `events`, column `app`: lookup table `applications` does not exist"]
    );
}

#[test]
fn a_key_needs_a_unique_constraint_on_exactly_its_columns() {
    let sink = SINK.replacen("key = [\"event_id\"]", "key = [\"event_id\", \"score\"]", 1);
    assert_eq!(
        plan(&sink).expect_err("no such key"),
        [
            "sink `events`, column `event_id, score`: no unique constraint or index of `events` \
          is exactly (event_id, score), which ON CONFLICT needs"
        ]
    );
    assert_eq!(
        errors("key = \"package_name\"", "key = \"title\""),
        ["sink `events`, column `app`: lookup key `apps.title` has no unique constraint"]
    );
}

#[test]
fn sources_that_cannot_fit_their_column_are_refused() {
    assert_eq!(
        errors("const = \"crawler\"", "const = \"crawler-long\""),
        [
            "sink `events`, column `origin`: const \"crawler-long\" cannot fit varchar(8): \
          12 characters, the column holds 8"
        ]
    );
    assert_eq!(
        errors(
            "origin = { const = \"crawler\" }",
            "part = { kafka = \"offset\" }"
        ),
        [
            "sink `events`, column `part`: kafka offset cannot fit smallint: an offset is a 64-bit integer"
        ]
    );
    assert_eq!(
        errors(
            "origin = { const = \"crawler\" }",
            "part = { kafka = \"partition\" }"
        ),
        [
            "sink `events`, column `part`: kafka partition cannot fit smallint: a partition is a 32-bit integer"
        ]
    );
    assert_eq!(
        errors(
            "origin = { const = \"crawler\" }",
            "part = { const = \"7\" }"
        ),
        ["sink `events`, column `part`: const \"7\" cannot fit smallint: a string"]
    );
    assert_eq!(
        errors(
            "origin = { const = \"crawler\" }",
            "blob = { field = \"blob\" }"
        ),
        ["sink `events`, column `blob`: type bytea is not supported by declared sinks"]
    );
    assert_eq!(
        errors(
            "score = { field = \"score\", min = 1, max = 5 }",
            "score = { lookup = { field = \"p\", table = \"apps\", key = \"package_name\", value = \"id\", unknown = \"u\" } }"
        ),
        [
            "sink `events`, column `score`: lookup p in apps.package_name -> id cannot fit \
             smallint: `apps.id` is bigint"
        ]
    );
    assert_eq!(
        errors("min = 1, max = 5", "min_length = 1"),
        ["sink `events`, column `score`: rule `min_length` does not apply to smallint"]
    );
}

#[test]
fn a_generated_column_cannot_be_written() {
    assert_eq!(
        errors(
            "origin = { const = \"crawler\" }",
            "total = { field = \"total\" }"
        ),
        ["sink `events`, column `total`: a generated or GENERATED ALWAYS column cannot be written"]
    );
}

#[test]
fn a_not_null_column_without_a_default_needs_a_source() {
    assert_eq!(
        errors("score = { field = \"score\", min = 1, max = 5 }\n", ""),
        ["sink `events`, column `score`: NOT NULL without a default, and no source"]
    );
}

#[test]
fn every_error_names_its_sink_and_column() {
    let sinks = parse_sinks("m.toml", &SINK.replacen("origin =", "orign =", 1)).unwrap();
    let errors = plan_sink(&sinks[0], "p", &tables()).unwrap_err();
    assert!(matches!(&errors[0], SinkError::UnknownColumn { .. }));
    assert_eq!(
        (errors[0].sink(), errors[0].column()),
        ("events", Some("orign"))
    );
}
