//! Declared sinks against the real PostgreSQL: the catalog reader, validation of the seed
//! mappings against the migrated schema, and the generated statements run for real — the
//! seed mappings' statements bound with the built-in pipelines' own columns leave the same
//! table contents and return the same inserted/updated/skipped answers as the built-in SQL.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use sluice_core::sinks::{RecordMeta, SinkDecoder, SinkPlan, SqlType, parse_sinks, plan_sink};
use sluice_core::topics::app_stats::AppStatsTopic;
use sluice_core::topics::network_metrics::NetworkMetricsTopic;
use sluice_core::topics::reviews::ReviewsTopic;
use sluice_core::{Resolved, Topic};
use sluice_postgres::catalog::{sink_tables, table_shape};
use sluice_testkit::TestSchema;
use sqlx::PgConnection;

const APPS: &str = "apps_registry_application";

fn seed(name: &str) -> String {
    let path = format!(
        "{}/../../deploy/sinks/{name}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

async fn migrated(stack: &sluice_testkit::Stack) -> (TestSchema, PgConnection) {
    let schema = TestSchema::create(stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate(&mut conn, APPS)
        .await
        .expect("migrate");
    (schema, conn)
}

async fn plan(conn: &mut PgConnection, name: &str) -> SinkPlan {
    let sinks = parse_sinks(name, &seed(name)).unwrap_or_else(|e| panic!("{e}"));
    let tables = sink_tables(conn, &sinks).await.expect("catalog");
    plan_sink(&sinks[0], "storage-consumer", &tables).unwrap_or_else(|e| panic!("{name}: {e:?}"))
}

/// Runs `sql` with topic `T`'s columns of `rows`; the returned booleans.
async fn run<T: Topic>(
    conn: &mut PgConnection,
    sql: &str,
    rows: &[Resolved<T::Message>],
) -> Vec<bool> {
    sluice_postgres::repo::returned_by::<T>(conn, sql, rows)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{sql}"))
}

/// The table's rows as text, without the columns a default fills (id, times of insertion).
async fn contents(conn: &mut PgConnection, table: &str) -> Vec<String> {
    let sql = format!(
        "SELECT (to_jsonb(t) - 'id' - 'inserted_at' - 'first_seen_at')::text FROM {table} t \
         ORDER BY 1"
    );
    sqlx::query_scalar(&sql)
        .fetch_all(conn)
        .await
        .expect("contents")
}

fn decoded<T: Topic>(
    application_id: i64,
    messages: &[serde_json::Value],
) -> Vec<Resolved<T::Message>> {
    messages
        .iter()
        .enumerate()
        .map(|(record, json)| Resolved {
            record,
            application_id,
            message: T::decode(Some(json.to_string().as_bytes())).expect("a valid message"),
        })
        .collect()
}

/// Runs each batch through the built-in statement in one schema and through the seed
/// mapping's statement in another; both must answer and store the same.
async fn same_as_builtin<T: Topic>(
    stack: &sluice_testkit::Stack,
    seed_name: &str,
    batches: &[Vec<serde_json::Value>],
) {
    let (builtin_schema, mut builtin) = migrated(stack).await;
    let (mapped_schema, mut mapped) = migrated(stack).await;
    let plan = plan(&mut mapped, seed_name).await;
    let ids = builtin_schema.register_apps(&["com.example".into()]).await;
    let mapped_ids = mapped_schema.register_apps(&["com.example".into()]).await;
    assert_eq!(ids, mapped_ids);
    for batch in batches {
        let rows = decoded::<T>(ids[0], batch);
        let expected = run::<T>(&mut builtin, T::UPSERT_SQL, &rows).await;
        let got = run::<T>(&mut mapped, &plan.statement, &rows).await;
        assert_eq!(got, expected, "{seed_name}: returned rows of a batch");
    }
    let table = T::SPEC.table;
    let expected = contents(&mut builtin, table).await;
    assert!(!expected.is_empty());
    assert_eq!(
        contents(&mut mapped, table).await,
        expected,
        "{seed_name}: table contents"
    );
    drop((builtin, mapped));
    builtin_schema.drop_schema().await;
    mapped_schema.drop_schema().await;
}

/// `UNNEST($n::type[])` parameter types of a statement, in order.
fn param_types(sql: &str) -> Vec<String> {
    (1..100)
        .map_while(|n| {
            let marker = format!("${n}::");
            let at = sql.find(&marker)? + marker.len();
            Some(sql[at..].split("[]").next()?.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn the_catalog_reader_sees_types_limits_defaults_and_unique_keys() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    sqlx::raw_sql(
        "CREATE TABLE shapes (
             id BIGSERIAL PRIMARY KEY, a SMALLINT NOT NULL, b VARCHAR(12), c NUMERIC(10, 2),
             d TIMESTAMP, e BIGINT[], f TEXT NOT NULL DEFAULT 'x', g UUID, h BYTEA,
             i BIGINT GENERATED ALWAYS AS (a * 2) STORED, j INT GENERATED ALWAYS AS IDENTITY,
             k INT GENERATED BY DEFAULT AS IDENTITY,
             UNIQUE (a, b), UNIQUE (g) DEFERRABLE);
         CREATE UNIQUE INDEX shapes_partial ON shapes (c) WHERE c > 0;
         CREATE UNIQUE INDEX shapes_covering ON shapes (d) INCLUDE (f);",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let shape = table_shape(&mut conn, "shapes")
        .await
        .unwrap()
        .expect("the table");
    let described: Vec<(String, String, bool, bool, bool)> = shape
        .columns
        .iter()
        .map(|c| {
            let type_name = c.sql_type.to_string();
            (
                c.name.clone(),
                type_name,
                c.not_null,
                c.has_default,
                c.writable,
            )
        })
        .collect();
    let row = |n: &str, t: &str, nn: bool, def: bool| (n.to_owned(), t.to_owned(), nn, def, true);
    let unwritable = |n: &str, t: &str, nn: bool| (n.to_owned(), t.to_owned(), nn, true, false);
    assert_eq!(
        described,
        [
            row("id", "bigint", true, true),
            row("a", "smallint", true, false),
            row("b", "varchar(12)", false, false),
            row("c", "numeric(10,2)", false, false),
            row("d", "timestamp", false, false),
            row("e", "bigint[]", false, false),
            row("f", "text", true, true),
            row("g", "uuid", false, false),
            row("h", "bytea", false, false),
            unwritable("i", "bigint", false),
            unwritable("j", "integer", true),
            row("k", "integer", true, true),
        ]
    );
    assert_eq!(
        shape.column("e").unwrap().sql_type,
        SqlType::Array(Box::new(SqlType::BigInt))
    );
    let mut keys = shape.unique_keys.clone();
    keys.sort();
    assert_eq!(
        keys,
        [
            vec!["a".to_owned(), "b".to_owned()],
            vec!["d".to_owned()],
            vec!["id".to_owned()]
        ],
        "no deferrable, partial or expression index; INCLUDE columns are not key columns"
    );
    assert_eq!(table_shape(&mut conn, "no_such_table").await.unwrap(), None);
    drop(conn);
    schema.drop_schema().await;
}

#[tokio::test]
async fn the_seed_mappings_validate_and_plan_the_built_in_statements() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let (schema, mut conn) = migrated(&stack).await;
    let builtins = [
        ("reviews", ReviewsTopic::UPSERT_SQL),
        ("app-stats", AppStatsTopic::UPSERT_SQL),
        ("network-metrics", NetworkMetricsTopic::UPSERT_SQL),
    ];
    for (name, builtin) in builtins {
        let plan = plan(&mut conn, name).await;
        assert_eq!(plan.group, format!("storage-consumer.{name}"));
        assert_eq!(
            param_types(&plan.statement),
            param_types(builtin),
            "{name}: the same parameters in the same order"
        );
        let conflict = |sql: &str| {
            let at = sql.find("ON CONFLICT").expect("ON CONFLICT");
            sql[at..]
                .split_whitespace()
                .take(4)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(conflict(&plan.statement), conflict(builtin), "{name}");
    }
    let reviews = plan(&mut conn, "reviews").await;
    let set = |sql: &str| {
        let mut columns: Vec<String> = sql
            .lines()
            .filter_map(|l| l.split_once("= EXCLUDED."))
            .map(|(column, _)| column.trim().to_owned())
            .collect();
        columns.sort();
        columns
    };
    assert_eq!(set(&reviews.statement), set(ReviewsTopic::UPSERT_SQL));
    assert!(
        reviews
            .statement
            .contains("WHERE EXCLUDED.last_synced_at > reviews.last_synced_at"),
        "{}",
        reviews.statement
    );

    // The decoder of the plan read from the live catalog gives the built-in reasons.
    let sinks = parse_sinks("reviews", &seed("reviews")).unwrap();
    let decoder = SinkDecoder::new(&sinks[0], &reviews);
    let meta = RecordMeta {
        topic: "reviews",
        partition: 0,
        offset: 0,
        timestamp: None,
        key: None,
    };
    let poison = [
        r#"{"review_id":"r","package_name":"p","score":6,"thumbs_up_count":1,"at":"2026-01-01T00:00:00","last_synced_at":"2026-01-01T00:00:00"}"#,
        r#"{"review_id":"r","package_name":"p","score":4,"thumbs_up_count":2147483648,"at":"2026-01-01T00:00:00","last_synced_at":"2026-01-01T00:00:00"}"#,
        r#"{"review_id":"r","packageName":"p","score":4}"#,
        r#"{"review_id":"r","package_name":"p","score":4,"thumbs_up_count":1,"app_version":"12345678901234567890123456789012345678901234567890123456789012345","at":"2026-01-01T00:00:00","last_synced_at":"2026-01-01T00:00:00"}"#,
        r#"{"review_id":"","package_name":"p"}"#,
        r#"{"review_id":"r","package_name":"p","score":4,"thumbs_up_count":1,"at":"yesterday","last_synced_at":"2026-01-01T00:00:00"}"#,
    ];
    for payload in poison {
        let expected = sluice_core::messages::decode_review(Some(payload.as_bytes()))
            .expect_err("poison")
            .to_string();
        let got = decoder
            .decode(Some(payload.as_bytes()), &meta)
            .expect_err("poison")
            .to_string();
        assert_eq!(got, expected, "{payload}");
    }
    drop(conn);
    schema.drop_schema().await;
}

#[tokio::test]
async fn the_reviews_mapping_stores_what_the_built_in_stores() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    // `at` (reviewed_at) changes with every version: the built-in never updates it.
    let review = |id: &str, synced: &str, thumbs: i64, reply: Option<&str>| {
        serde_json::json!({"review_id": id, "package_name": "com.example", "score": 4,
            "user_name": "ann", "content": "fine", "thumbs_up_count": thumbs,
            "app_version": "1.2", "at": synced, "reply_content": reply,
            "replied_at": reply.map(|_| "2026-11-02T10:00:00Z"),
            "last_synced_at": synced})
    };
    same_as_builtin::<ReviewsTopic>(
        &stack,
        "reviews",
        &[
            vec![
                review("r1", "2026-11-03T00:00:00Z", 1, None),
                review("r2", "2026-11-03T00:00:00Z", 5, None),
            ],
            // r1 older: skipped; r2 newer: updated; r3 new: inserted.
            vec![
                review("r1", "2026-11-02T00:00:00Z", 9, Some("old")),
                review("r2", "2026-11-04T00:00:00Z", 6, Some("thanks")),
                review("r3", "2026-11-04T00:00:00Z", 0, None),
            ],
            // The same version again: skipped (the guard is strictly newer).
            vec![review("r2", "2026-11-04T00:00:00Z", 7, None)],
        ],
    )
    .await;
}

#[tokio::test]
async fn the_app_stats_and_network_metrics_mappings_store_what_the_built_ins_store() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let stats = |at: &str, ratings: i64, histogram: Option<[i64; 5]>| {
        serde_json::json!({"package_name": "com.example", "crawled_at": at, "title": "App",
            "score": 4.5, "ratings": ratings, "histogram": histogram, "price": 0.0,
            "free": true, "version": "2.0", "updated_at": "2026-10-01T00:00:00Z"})
    };
    same_as_builtin::<AppStatsTopic>(
        &stack,
        "app-stats",
        &[
            vec![
                stats("2026-11-01T00:00:00Z", 10, Some([1, 2, 3, 4, 5])),
                stats("2026-11-02T00:00:00Z", 11, None),
            ],
            // A redelivery: the first delivery wins.
            vec![stats("2026-11-01T00:00:00Z", 99, Some([5, 4, 3, 2, 1]))],
        ],
    )
    .await;
    let metrics = |id: &str, packets: i64, domains: Option<Vec<&str>>| {
        serde_json::json!({"analysis_id": id, "package_name": "com.example",
            "captured_at": "2026-11-01T00:00:00Z", "duration_seconds": 1.5,
            "packet_count": packets, "total_bytes": 100, "bytes_sent": 40,
            "bytes_received": 60, "dns_queries": 3, "tls_handshakes": 2,
            "plaintext_http_requests": 0, "domains": domains})
    };
    let (a, b) = (
        "7d1b2a5e-7c1f-4a35-9d0b-3f1c2b4a5e6f",
        "0b7f6c1e-2d3a-4b5c-8d9e-0f1a2b3c4d5e",
    );
    same_as_builtin::<NetworkMetricsTopic>(
        &stack,
        "network-metrics",
        &[
            vec![
                metrics(a, 10, Some(vec!["b.example", "a.example"])),
                metrics(b, 3, None),
            ],
            vec![metrics(a, 11, Some(vec![]))],
        ],
    )
    .await;
}

/// tenant, item, amount, tags, synced_at, the record's timestamp.
type TinyRow<'a> = (
    &'a str,
    i32,
    i64,
    Option<serde_json::Value>,
    &'a str,
    &'a str,
);
/// item, amount, tags, first_at.
type TinyStored = (i32, i64, Option<Vec<String>>, chrono::DateTime<chrono::Utc>);

#[tokio::test]
async fn a_tiny_sink_runs_its_statement_with_a_composite_key_and_the_guard() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    sqlx::raw_sql(
        "CREATE TABLE tiny (
             tenant TEXT NOT NULL, item INTEGER NOT NULL, amount BIGINT NOT NULL,
             tags TEXT[], synced_at TIMESTAMPTZ NOT NULL, first_at TIMESTAMPTZ NOT NULL,
             seen_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (tenant, item))",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let file = r#"
[[sink]]
name = "tiny"
table = "tiny"
key = ["tenant", "item"]
conflict = { newest-wins = "synced_at" }
insert_only = ["first_at"]
never_written = ["seen_at"]

[sink.columns]
tenant = { field = "tenant" }
item = { field = "item" }
amount = { field = "amount" }
tags = { field = "tags" }
synced_at = { field = "synced_at" }
first_at = { kafka = "timestamp" }
"#;
    let sinks = parse_sinks("tiny.toml", file).unwrap();
    let tables = sink_tables(&mut conn, &sinks).await.unwrap();
    let plan = plan_sink(&sinks[0], "storage-consumer", &tables).unwrap();
    let t = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
    let mut batch = async |rows: &[TinyRow<'_>]| {
        let returned: Vec<bool> = sqlx::query_scalar(&plan.statement)
            .bind(rows.iter().map(|r| r.0).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| r.1).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| r.2).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| r.3.clone()).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| t(r.4)).collect::<Vec<_>>())
            .bind(rows.iter().map(|r| t(r.5)).collect::<Vec<_>>())
            .fetch_all(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", plan.statement));
        returned
    };
    let tags = Some(serde_json::json!(["b", "a"]));
    let (t1, t2, t3) = (
        "2026-11-01T00:00:00Z",
        "2026-11-02T00:00:00Z",
        "2026-11-03T00:00:00Z",
    );
    assert_eq!(
        batch(&[
            ("x", 1, 10, tags.clone(), t2, t1),
            ("x", 2, 20, None, t2, t1)
        ])
        .await,
        [true, true],
        "two new rows"
    );
    assert_eq!(
        batch(&[
            ("x", 1, 11, None, t1, t3),
            ("x", 2, 21, Some(serde_json::json!([])), t3, t3)
        ])
        .await,
        [false],
        "(x,1) older: skipped; (x,2) newer: updated"
    );
    let rows: Vec<TinyStored> =
        sqlx::query_as("SELECT item, amount, tags, first_at FROM tiny ORDER BY item")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(
        rows,
        [
            (1, 10, Some(vec!["b".to_owned(), "a".to_owned()]), t(t1)),
            (2, 21, Some(vec![]), t(t1)),
        ],
        "arrays rebuilt in order; first_at is insert-only"
    );
    drop(conn);
    schema.drop_schema().await;
}
