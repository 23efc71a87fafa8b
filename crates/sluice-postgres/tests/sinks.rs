//! Declared sinks against the real PostgreSQL: the catalog reader, validation of the seed
//! mappings against the migrated schema, and the planned statements run for real — the seed
//! mappings' statements, bound with decoded and resolved rows, return the inserted / updated
//! / skipped answers and leave the rows the seed topics' contracts promise (newest crawl wins
//! for reviews, first delivery wins for app-stats and network-metrics).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use std::time::Duration;

use chrono::{DateTime, Utc};
use sluice_core::{PipelineKind, WriteOutcome};
use sluice_postgres::catalog::{sink_tables, table_shape};
use sluice_postgres::declared::write_declared;
use sluice_postgres::lookup::{LookupResolver, LookupValue};
use sluice_sinks::{
    Cell, RecordMeta, SinkDecoder, SinkPlan, SinkRow, SqlType, parse_sinks, plan_sink,
};
use sluice_testkit::TestSchema;
use sqlx::PgConnection;
use uuid::Uuid;

const APPS: &str = "apps_registry_application";

/// What the seed records carry besides their value (no seed column reads it).
const META: RecordMeta<'static> = RecordMeta {
    topic: "seed",
    partition: 0,
    offset: 0,
    timestamp: None,
    key: None,
    headers: &[],
};

async fn migrated(stack: &sluice_testkit::Stack) -> (TestSchema, PgConnection) {
    let schema = TestSchema::create(stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate(&mut conn, APPS)
        .await
        .expect("migrate");
    (schema, conn)
}

/// The seed mapping of `kind` planned against the live catalog, and its decoder.
async fn plan(conn: &mut PgConnection, kind: PipelineKind) -> (SinkPlan, SinkDecoder) {
    let sink = sluice_sinks::seed_sink(kind).unwrap_or_else(|e| panic!("{e}"));
    let tables = sink_tables(conn, std::slice::from_ref(&sink))
        .await
        .expect("catalog");
    let plan =
        plan_sink(&sink, "storage-consumer", &tables).unwrap_or_else(|e| panic!("{kind}: {e:?}"));
    // Prepared on the connection that writes next, as `sluice run` plans: the writes below
    // must not reuse a statement prepared with PostgreSQL's inferred parameter types.
    let refused = sluice_postgres::declared::prepare_sink(conn, &sink, &plan)
        .await
        .expect("prepare");
    assert!(refused.is_empty(), "{refused:?}");
    let decoder = SinkDecoder::new(&sink, &plan);
    (plan, decoder)
}

/// Decodes `batch`, resolves its lookups as the storage pipeline does and runs the plan's
/// statement over it (each batch here holds one record per natural key); what it did.
async fn write(
    conn: &mut PgConnection,
    (plan, decoder): &(SinkPlan, SinkDecoder),
    batch: &[serde_json::Value],
) -> WriteOutcome {
    let mut rows: Vec<SinkRow> = batch
        .iter()
        .enumerate()
        .map(|(record, json)| {
            let cells = decoder
                .decode(Some(json.to_string().as_bytes()), &META)
                .unwrap_or_else(|e| panic!("{json}: {e}"));
            SinkRow::new(record, cells)
        })
        .collect();
    for (position, lookup) in decoder.lookups() {
        let param_type = &plan.columns[position].param_type;
        let value = LookupValue::from_param_type(param_type).expect("a lookup column");
        let key_type = plan.columns[position].lookup_key.as_deref();
        let resolver = LookupResolver::new(lookup, key_type, value, Duration::from_secs(60));
        let keys: Vec<String> = rows
            .iter()
            .filter_map(|row| match row.cell(position) {
                Some(Cell::Lookup(key)) => Some(key.clone()),
                _ => None,
            })
            .collect();
        let (found, _) = resolver
            .resolve(conn, keys.iter().map(String::as_str))
            .await
            .expect("resolve");
        for row in &mut rows {
            if let Some(Cell::Lookup(key)) = row.cell(position) {
                let key = key.clone();
                row.resolve(
                    position,
                    found.get(&key).cloned().expect("a registered app"),
                );
                row.keys.push(Some(key));
            }
        }
    }
    write_declared(conn, plan, &rows, &|_| None)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plan.statement))
}

fn outcome(inserted: u64, updated: u64, skipped: u64) -> WriteOutcome {
    WriteOutcome {
        inserted,
        updated,
        skipped,
        ..Default::default()
    }
}

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
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
    assert_eq!(shape.primary_key, Some(vec!["id".to_owned()]));
    sqlx::raw_sql("CREATE TABLE keyless (a INT UNIQUE, b INT)")
        .execute(&mut conn)
        .await
        .unwrap();
    let keyless = table_shape(&mut conn, "keyless").await.unwrap().unwrap();
    assert_eq!(
        (keyless.unique_keys, keyless.primary_key),
        (vec![vec!["a".to_owned()]], None)
    );
    assert_eq!(table_shape(&mut conn, "no_such_table").await.unwrap(), None);
    drop(conn);
    schema.drop_schema().await;
}

/// A plan's columns and their parameter types, in order.
type Columns = &'static [(&'static str, &'static str)];

#[tokio::test]
async fn the_seed_mappings_validate_and_plan_the_seed_statements() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let (schema, mut conn) = migrated(&stack).await;
    // Each seed's columns and parameter types in order, and its conflict clause, as the
    // topics' own SQL had them (crates/sluice-core/src/topics/*.sql before the one engine).
    let expected: [(PipelineKind, Columns, &str); 3] = [
        (
            PipelineKind::Reviews,
            &[
                ("review_id", "varchar"),
                ("application_id", "bigint"),
                ("user_name", "varchar"),
                ("score", "smallint"),
                ("content", "text"),
                ("thumbs_up_count", "int"),
                ("app_version", "varchar"),
                ("reviewed_at", "timestamptz"),
                ("reply_content", "text"),
                ("replied_at", "timestamptz"),
                ("last_synced_at", "timestamptz"),
            ],
            "ON CONFLICT (review_id) DO UPDATE SET",
        ),
        (
            PipelineKind::AppStats,
            &[
                ("application_id", "bigint"),
                ("crawled_at", "timestamptz"),
                ("title", "varchar"),
                ("score", "float8"),
                ("ratings", "bigint"),
                ("reviews_count", "bigint"),
                ("installs_min", "bigint"),
                ("installs_real", "bigint"),
                ("histogram", "jsonb"),
                ("price", "float8"),
                ("free", "bool"),
                ("version", "varchar"),
                ("updated_at", "timestamptz"),
            ],
            "ON CONFLICT (application_id, crawled_at) DO NOTHING",
        ),
        (
            PipelineKind::NetworkMetrics,
            &[
                ("analysis_id", "uuid"),
                ("application_id", "bigint"),
                ("captured_at", "timestamptz"),
                ("duration_seconds", "float8"),
                ("packet_count", "bigint"),
                ("total_bytes", "bigint"),
                ("bytes_sent", "bigint"),
                ("bytes_received", "bigint"),
                ("dns_queries", "int"),
                ("tls_handshakes", "int"),
                ("plaintext_http_requests", "int"),
                ("domains", "jsonb"),
            ],
            "ON CONFLICT (analysis_id) DO NOTHING",
        ),
    ];
    for (kind, columns, conflict) in expected {
        let (plan, _) = plan(&mut conn, kind).await;
        assert_eq!(plan.group, format!("storage-consumer.{kind}"));
        let planned: Vec<(&str, &str)> = plan
            .columns
            .iter()
            .map(|c| (c.column.as_str(), c.param_type.as_str()))
            .collect();
        assert_eq!(planned, columns, "{kind}: columns and parameter types");
        let types: Vec<&str> = columns.iter().map(|(_, t)| *t).collect();
        assert_eq!(param_types(&plan.statement), types, "{kind}: the statement");
        // The statement quotes every name; the expectations are written without quotes.
        let unquoted = plan.statement.replace('"', "");
        let clause = unquoted
            .lines()
            .find(|l| l.starts_with("ON CONFLICT"))
            .unwrap_or_default();
        assert_eq!(clause, conflict, "{kind}");
        let returning = if conflict.ends_with("DO NOTHING") {
            "RETURNING TRUE AS inserted"
        } else {
            "RETURNING (xmax = 0) AS inserted"
        };
        assert!(plan.statement.ends_with(returning), "{}", plan.statement);
    }
    let (reviews, decoder) = plan(&mut conn, PipelineKind::Reviews).await;
    let unquoted = reviews.statement.replace('"', "");
    let mut set: Vec<&str> = unquoted
        .lines()
        .filter_map(|l| l.split_once("= EXCLUDED."))
        .map(|(column, _)| column.trim())
        .collect();
    set.sort_unstable();
    assert_eq!(
        set,
        [
            "app_version",
            "content",
            "last_synced_at",
            "replied_at",
            "reply_content",
            "score",
            "thumbs_up_count",
            "user_name"
        ],
        "application_id and reviewed_at are insert-only"
    );
    assert!(
        reviews
            .statement
            .contains("WHERE EXCLUDED.\"last_synced_at\" > target.\"last_synced_at\""),
        "{}",
        reviews.statement
    );

    // The decoder of the plan read from the live catalog gives the seed topic's reasons.
    let poison = [
        (
            r#"{"review_id":"r","package_name":"p","score":6,"thumbs_up_count":1,"at":"2026-01-01T00:00:00","last_synced_at":"2026-01-01T00:00:00"}"#,
            "field `score`: must be between 1 and 5, got 6",
        ),
        (
            r#"{"review_id":"r","package_name":"p","score":4,"thumbs_up_count":2147483648,"at":"2026-01-01T00:00:00","last_synced_at":"2026-01-01T00:00:00"}"#,
            "field `thumbs_up_count`: out of range for INTEGER (0 … 2147483647), got 2147483648",
        ),
        (
            r#"{"review_id":"r","packageName":"p","score":4}"#,
            "field `package_name`: required field is missing \
             (found legacy camelCase field `packageName`)",
        ),
        (
            r#"{"review_id":"r","package_name":"p","score":4,"thumbs_up_count":1,"app_version":"12345678901234567890123456789012345678901234567890123456789012345","at":"2026-01-01T00:00:00","last_synced_at":"2026-01-01T00:00:00"}"#,
            "field `app_version`: must be at most 64 characters, got 65",
        ),
        (
            r#"{"review_id":"","package_name":"p"}"#,
            "field `review_id`: must not be empty",
        ),
        (
            r#"{"review_id":"r","package_name":"p","score":4,"thumbs_up_count":1,"at":"yesterday","last_synced_at":"2026-01-01T00:00:00"}"#,
            "field `at`: must be an RFC 3339 timestamp, got \"yesterday\"",
        ),
    ];
    for (payload, reason) in poison {
        let got = decoder
            .decode(Some(payload.as_bytes()), &META)
            .expect_err("poison")
            .to_string();
        assert_eq!(got, reason, "{payload}");
    }
    drop(conn);
    schema.drop_schema().await;
}

/// review_id, application_id, user_name, score, content, thumbs_up_count, app_version,
/// reviewed_at, reply_content, replied_at, last_synced_at.
type StoredReview = (
    String,
    i64,
    Option<String>,
    i16,
    Option<String>,
    i32,
    Option<String>,
    DateTime<Utc>,
    Option<String>,
    Option<DateTime<Utc>>,
    DateTime<Utc>,
);

#[tokio::test]
async fn the_reviews_mapping_keeps_the_newest_crawl() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let (schema, mut conn) = migrated(&stack).await;
    let app = schema.register_apps(&["com.example".into()]).await[0];
    let seed = plan(&mut conn, PipelineKind::Reviews).await;
    // `at` (reviewed_at) changes with every version: it is set on insert only.
    let review = |id: &str, synced: &str, thumbs: i64, reply: Option<&str>| {
        serde_json::json!({"review_id": id, "package_name": "com.example", "score": 4,
            "user_name": "ann", "content": "fine", "thumbs_up_count": thumbs,
            "app_version": "1.2", "at": synced, "reply_content": reply,
            "replied_at": reply.map(|_| "2026-11-02T10:00:00Z"),
            "last_synced_at": synced})
    };
    let batches = [
        (
            vec![
                review("r1", "2026-11-03T00:00:00Z", 1, None),
                review("r2", "2026-11-03T00:00:00Z", 5, None),
            ],
            outcome(2, 0, 0),
        ),
        // r1 older: skipped; r2 newer: updated; r3 new: inserted.
        (
            vec![
                review("r1", "2026-11-02T00:00:00Z", 9, Some("old")),
                review("r2", "2026-11-04T00:00:00Z", 6, Some("thanks")),
                review("r3", "2026-11-04T00:00:00Z", 0, None),
            ],
            outcome(1, 1, 1),
        ),
        // The same version again: skipped (the guard is strictly newer).
        (
            vec![review("r2", "2026-11-04T00:00:00Z", 7, None)],
            outcome(0, 0, 1),
        ),
    ];
    for (i, (batch, expected)) in batches.iter().enumerate() {
        assert_eq!(write(&mut conn, &seed, batch).await, *expected, "batch {i}");
    }
    let stored: Vec<StoredReview> = sqlx::query_as(
        "SELECT review_id, application_id, user_name, score, content, thumbs_up_count, \
         app_version, reviewed_at, reply_content, replied_at, last_synced_at \
         FROM reviews ORDER BY review_id",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let row = |id: &str, thumbs, reviewed, reply: Option<&str>, synced| {
        (
            id.to_owned(),
            app,
            Some("ann".to_owned()),
            4,
            Some("fine".to_owned()),
            thumbs,
            Some("1.2".to_owned()),
            at(reviewed),
            reply.map(str::to_owned),
            reply.map(|_| at("2026-11-02T10:00:00Z")),
            at(synced),
        )
    };
    assert_eq!(
        stored,
        [
            row(
                "r1",
                1,
                "2026-11-03T00:00:00Z",
                None,
                "2026-11-03T00:00:00Z"
            ),
            row(
                "r2",
                6,
                "2026-11-03T00:00:00Z",
                Some("thanks"),
                "2026-11-04T00:00:00Z"
            ),
            row(
                "r3",
                0,
                "2026-11-04T00:00:00Z",
                None,
                "2026-11-04T00:00:00Z"
            ),
        ],
        "r1 kept its newer version, r2 took the newest but kept its first reviewed_at"
    );
    drop(conn);
    schema.drop_schema().await;
}

/// application_id, crawled_at, title, score, ratings, [reviews_count, installs_min,
/// installs_real], histogram, price, free, version, updated_at.
type StoredStats = (
    i64,
    DateTime<Utc>,
    Option<String>,
    Option<f64>,
    Option<i64>,
    Vec<Option<i64>>,
    Option<Vec<i64>>,
    Option<f64>,
    Option<bool>,
    Option<String>,
    Option<DateTime<Utc>>,
);

/// analysis_id, application_id, captured_at, duration_seconds, packet_count, total_bytes,
/// bytes_sent, bytes_received, dns_queries, tls_handshakes, plaintext_http_requests, domains.
type StoredMetrics = (
    Uuid,
    i64,
    DateTime<Utc>,
    f64,
    i64,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i32>,
    Option<i32>,
    Option<i32>,
    Option<Vec<String>>,
);

#[tokio::test]
async fn the_app_stats_and_network_metrics_mappings_keep_the_first_delivery() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let (schema, mut conn) = migrated(&stack).await;
    let app = schema.register_apps(&["com.example".into()]).await[0];
    let seed = plan(&mut conn, PipelineKind::AppStats).await;
    let stats = |crawled: &str, ratings: i64, histogram: Option<[i64; 5]>| {
        serde_json::json!({"package_name": "com.example", "crawled_at": crawled, "title": "App",
            "score": 4.5, "ratings": ratings, "histogram": histogram, "price": 0.0,
            "free": true, "version": "2.0", "updated_at": "2026-10-01T00:00:00Z"})
    };
    let first = [
        stats("2026-11-01T00:00:00Z", 10, Some([1, 2, 3, 4, 5])),
        stats("2026-11-02T00:00:00Z", 11, None),
    ];
    assert_eq!(write(&mut conn, &seed, &first).await, outcome(2, 0, 0));
    // A redelivery: the first delivery wins.
    let again = [stats("2026-11-01T00:00:00Z", 99, Some([5, 4, 3, 2, 1]))];
    assert_eq!(write(&mut conn, &seed, &again).await, outcome(0, 0, 1));
    let stored: Vec<StoredStats> = sqlx::query_as(
        "SELECT application_id, crawled_at, title, score, ratings, \
         ARRAY[reviews_count, installs_min, installs_real], histogram, price, free, version, \
         updated_at FROM app_stats ORDER BY crawled_at",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let row = |crawled: &str, ratings, histogram: Option<Vec<i64>>| {
        (
            app,
            at(crawled),
            Some("App".to_owned()),
            Some(4.5),
            Some(ratings),
            vec![None, None, None],
            histogram,
            Some(0.0),
            Some(true),
            Some("2.0".to_owned()),
            Some(at("2026-10-01T00:00:00Z")),
        )
    };
    assert_eq!(
        stored,
        [
            row("2026-11-01T00:00:00Z", 10, Some(vec![1, 2, 3, 4, 5])),
            row("2026-11-02T00:00:00Z", 11, None),
        ],
        "the histogram rebuilt in order; the redelivery changed nothing"
    );

    let seed = plan(&mut conn, PipelineKind::NetworkMetrics).await;
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
    let first = [
        metrics(a, 10, Some(vec!["b.example", "a.example"])),
        metrics(b, 3, None),
    ];
    assert_eq!(write(&mut conn, &seed, &first).await, outcome(2, 0, 0));
    // A redelivery of `a` with other values: the first wins.
    let again = [metrics(a, 11, Some(vec![]))];
    assert_eq!(write(&mut conn, &seed, &again).await, outcome(0, 0, 1));
    let stored: Vec<StoredMetrics> = sqlx::query_as(
        "SELECT analysis_id, application_id, captured_at, duration_seconds, packet_count, \
         total_bytes, bytes_sent, bytes_received, dns_queries, tls_handshakes, \
         plaintext_http_requests, domains FROM network_metrics ORDER BY analysis_id",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let row = |id: &str, packets, domains: Option<Vec<&str>>| {
        (
            Uuid::parse_str(id).unwrap(),
            app,
            at("2026-11-01T00:00:00Z"),
            1.5,
            packets,
            100,
            Some(40),
            Some(60),
            Some(3),
            Some(2),
            Some(0),
            domains.map(|d| d.into_iter().map(str::to_owned).collect()),
        )
    };
    assert_eq!(
        stored,
        [
            row(b, 3, None),
            row(a, 10, Some(vec!["b.example", "a.example"])),
        ],
        "domains rebuilt in order; the redelivery changed nothing"
    );
    drop(conn);
    schema.drop_schema().await;
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
