//! The seed mappings against the built-in topics on the same generated records (the load
//! generator's mixes: duplicates, older versions, every poison kind), batch by batch, on the
//! real PostgreSQL: decode → resolve the application → de-duplicate → the one statement.
//! Both paths must dead-letter the same records with the same kind and reason, answer the
//! same inserted/updated/skipped per batch and leave the same table.
//!
//! The declared path uses only what a mapping gives: its decoder, its lookup resolver, its
//! survivor rule and its statement. This is the component path without Kafka and without the storage pipeline (which does not
//! run declared sinks yet): no savepoint isolation of write-time errors, no commits.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_core::sinks::{
    Cell, RecordMeta, SinkDecoder, SinkPlan, SinkRow, parse_sinks, plan_sink,
};
use sluice_core::topics::app_stats::AppStatsTopic;
use sluice_core::topics::network_metrics::NetworkMetricsTopic;
use sluice_core::topics::reviews::ReviewsTopic;
use sluice_core::{Resolved, Topic};
use sluice_loadgen::{
    AnalyzerConfig, CrawlerConfig, Generated, PoisonKind, analysis, app_names, app_stats_for_crawl,
    poison, reviews_for_crawl,
};
use sluice_postgres::ApplicationResolver;
use sluice_postgres::catalog::sink_tables;
use sluice_postgres::declared::upsert_declared;
use sluice_postgres::lookup::{LookupResolver, LookupValue};
use sluice_testkit::TestSchema;
use sqlx::PgConnection;

const APPS: &str = "apps_registry_application";
const TTL: Duration = Duration::from_secs(300);

/// A dead letter: record index in the whole run, kind, reason.
type Dead = (usize, String, String);

async fn migrated(stack: &sluice_testkit::Stack, apps: &[String]) -> (TestSchema, PgConnection) {
    let schema = TestSchema::create(stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate(&mut conn, APPS)
        .await
        .expect("migrate");
    schema.register_apps(apps).await;
    (schema, conn)
}

/// The built-in path for one batch: dead letters and the statement's answers.
async fn builtin_batch<T: Topic>(
    conn: &mut PgConnection,
    resolver: &ApplicationResolver,
    first: usize,
    batch: &[Generated],
) -> (Vec<Dead>, Vec<bool>) {
    let mut dead = Vec::new();
    let mut decoded = Vec::new();
    for (i, record) in batch.iter().enumerate() {
        match T::decode(record.payload.as_deref()) {
            Ok(message) => decoded.push((i, message)),
            Err(error) => dead.push((first + i, "decode_error".into(), error.to_string())),
        }
    }
    let names = decoded.iter().map(|(_, m)| T::package_name(m));
    let (ids, _) = resolver.resolve(conn, names).await.expect("resolve");
    let mut rows = Vec::new();
    for (record, message) in decoded {
        let name = T::package_name(&message);
        match ids.get(name) {
            Some(id) => rows.push(Resolved {
                record,
                application_id: *id,
                message,
            }),
            None => dead.push((
                first + record,
                "unknown_application".into(),
                name.to_owned(),
            )),
        }
    }
    dead.sort();
    let rows = T::dedupe(rows).rows;
    if rows.is_empty() {
        return (dead, Vec::new());
    }
    let returned = sluice_postgres::repo::returned_by::<T>(conn, T::UPSERT_SQL, &rows)
        .await
        .expect("built-in upsert");
    (dead, returned)
}

/// The declared path for one batch.
async fn declared_batch(
    conn: &mut PgConnection,
    plan: &SinkPlan,
    decoder: &SinkDecoder,
    resolvers: &[LookupResolver],
    first: usize,
    batch: &[Generated],
) -> (Vec<Dead>, Vec<bool>) {
    let mut dead = Vec::new();
    let mut rows = Vec::new();
    for (i, record) in batch.iter().enumerate() {
        let meta = RecordMeta {
            topic: "t",
            partition: 0,
            offset: (first + i) as i64,
            timestamp: None,
            key: Some(&record.key),
        };
        match decoder.decode(record.payload.as_deref(), &meta) {
            Ok(cells) => rows.push(SinkRow { record: i, cells }),
            Err(error) => dead.push((first + i, "decode_error".into(), error.to_string())),
        }
    }
    for ((position, lookup), resolver) in decoder.lookups().zip(resolvers) {
        let names = rows.iter().filter_map(|r| match &r.cells[position] {
            Cell::Lookup(name) => Some(name.as_str()),
            _ => None,
        });
        let (ids, _) = resolver.resolve(conn, names).await.expect("lookup");
        rows.retain_mut(|row| {
            let Cell::Lookup(name) = &row.cells[position] else {
                return true;
            };
            match ids.get(name) {
                Some(cell) => {
                    row.cells[position] = cell.clone();
                    true
                }
                None => {
                    dead.push((
                        first + row.record,
                        lookup.unknown_kind.clone(),
                        name.clone(),
                    ));
                    false
                }
            }
        });
    }
    dead.sort();
    let rows = decoder.dedupe(rows).rows;
    let answers = upsert_declared(conn, plan, &rows)
        .await
        .expect("declared upsert");
    (dead, answers)
}

/// The table's rows as text, without the columns a default fills.
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

/// Runs `records` in batches of `batch` through both paths; returns (rows, dead letters by
/// kind) after asserting they agree.
async fn same_through_both<T: Topic>(
    seed: &str,
    records: &[Generated],
    batch: usize,
    apps: &[String],
) -> (usize, BTreeMap<String, usize>) {
    let stack = sluice_testkit::stack().expect("the stack");
    let (builtin_schema, mut builtin) = migrated(&stack, apps).await;
    let (declared_schema, mut declared) = migrated(&stack, apps).await;
    let path = format!(
        "{}/../../deploy/sinks/{seed}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let sinks = parse_sinks(&path, &std::fs::read_to_string(&path).unwrap()).unwrap();
    let tables = sink_tables(&mut declared, &sinks).await.unwrap();
    let plan = plan_sink(&sinks[0], "storage-consumer", &tables).unwrap();
    let decoder = SinkDecoder::new(&sinks[0], &plan);
    let resolvers: Vec<LookupResolver> = decoder
        .lookups()
        .map(|(position, lookup)| {
            let value = LookupValue::from_param_type(&plan.columns[position].param_type);
            LookupResolver::new(lookup, value.expect("an integer or text column"), TTL)
        })
        .collect();
    let resolver = ApplicationResolver::new(APPS, TTL);
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    let mut answers = [0usize; 2];
    for (n, chunk) in records.chunks(batch).enumerate() {
        let first = n * batch;
        let expected = builtin_batch::<T>(&mut builtin, &resolver, first, chunk).await;
        let got = declared_batch(&mut declared, &plan, &decoder, &resolvers, first, chunk).await;
        assert_eq!(got.0, expected.0, "{seed}: dead letters of batch {n}");
        assert_eq!(got.1, expected.1, "{seed}: answers of batch {n}");
        for (_, kind, _) in &expected.0 {
            *by_kind.entry(kind.clone()).or_default() += 1;
        }
        answers[0] += expected.1.iter().filter(|i| **i).count();
        answers[1] += expected.1.iter().filter(|i| !**i).count();
    }
    let table = T::SPEC.table;
    let rows = contents(&mut builtin, table).await;
    assert_eq!(
        contents(&mut declared, table).await,
        rows,
        "{seed}: table contents"
    );
    println!(
        "{seed}: {} records, {} rows, {} inserted, {} updated, dead letters {by_kind:?}",
        records.len(),
        rows.len(),
        answers[0],
        answers[1]
    );
    drop((builtin, declared));
    builtin_schema.drop_schema().await;
    declared_schema.drop_schema().await;
    (rows.len(), by_kind)
}

#[tokio::test]
async fn reviews_land_the_same_through_the_mapping_and_the_built_in() {
    if sluice_testkit::stack().is_none() {
        return;
    }
    let config = CrawlerConfig {
        apps: 30,
        reviews: 6_000,
        app_prefix: sluice_testkit::unique("com.decl"),
        duplicate_fraction: 0.05,
        out_of_order_fraction: 0.05,
        poison_fraction: 0.02,
        ..CrawlerConfig::default()
    };
    let mut records = reviews_for_crawl(&config);
    // A second crawl re-reads the same reviews with more thumbs-up: updates.
    records.extend(reviews_for_crawl(&CrawlerConfig {
        crawl: 2,
        reviews: 3_000,
        ..config.clone()
    }));
    let apps = app_names(&config.app_prefix, config.apps);
    let (rows, dead) = same_through_both::<ReviewsTopic>("reviews", &records, 500, &apps).await;
    assert!(rows > 5_000, "{rows}");
    assert!(
        dead.get("decode_error").copied().unwrap_or(0) > 50,
        "{dead:?}"
    );
    assert!(
        dead.get("unknown_application").copied().unwrap_or(0) > 5,
        "{dead:?}"
    );
}

#[tokio::test]
async fn app_stats_and_network_metrics_land_the_same_through_the_mappings() {
    if sluice_testkit::stack().is_none() {
        return;
    }
    let config = CrawlerConfig {
        apps: 1_000,
        app_prefix: sluice_testkit::unique("com.decl"),
        ..CrawlerConfig::default()
    };
    let apps = app_names(&config.app_prefix, config.apps);
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(3);
    let mut stats = app_stats_for_crawl(&config);
    // A second crawl, a redelivery of the first (first delivery wins) and poison.
    stats.extend(app_stats_for_crawl(&CrawlerConfig {
        crawl: 2,
        ..config.clone()
    }));
    stats.extend(app_stats_for_crawl(&config).into_iter().take(100));
    let unknown =
        serde_json::json!({"package_name": "com.nobody", "crawled_at": "2026-01-01T00:00:00Z"});
    stats.push(Generated {
        payload: Some(unknown.to_string().into_bytes()),
        ..stats[0].clone()
    });
    for kind in PoisonKind::ALL {
        stats.push(poison(
            sluice_core::PipelineKind::AppStats,
            kind,
            &apps[0],
            &mut rng,
        ));
    }
    let (rows, dead) = same_through_both::<AppStatsTopic>("app-stats", &stats, 200, &apps).await;
    assert_eq!(rows, 2_000);
    assert_eq!(dead.values().sum::<usize>(), 13, "{dead:?}");

    let analyzer = AnalyzerConfig {
        apps: apps[..50].to_vec(),
        seed: 11,
    };
    let at = chrono::DateTime::parse_from_rfc3339("2026-11-30T12:00:00Z")
        .unwrap()
        .to_utc();
    let mut metrics: Vec<Generated> = (0..500).map(|n| analysis(&analyzer, n, at)).collect();
    metrics.extend((0..50).map(|n| analysis(&analyzer, n, at)));
    for kind in PoisonKind::ALL {
        metrics.push(poison(
            sluice_core::PipelineKind::NetworkMetrics,
            kind,
            &apps[0],
            &mut rng,
        ));
    }
    let (rows, dead) =
        same_through_both::<NetworkMetricsTopic>("network-metrics", &metrics, 50, &apps).await;
    assert_eq!(rows, 500);
    assert_eq!(dead.values().sum::<usize>(), 12, "{dead:?}");
}

#[tokio::test]
async fn a_lookup_caches_what_it_finds_and_never_what_it_misses() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    schema.register_apps(&["com.a".into()]).await;
    let lookup = sluice_core::sinks::Lookup {
        field: sluice_core::sinks::FieldPath::parse("package_name").unwrap(),
        table: APPS.into(),
        key_column: "package_name".into(),
        value_column: "id".into(),
        unknown_kind: "unknown_application".into(),
    };
    let resolver = LookupResolver::new(&lookup, LookupValue::Int, TTL);
    let (found, stats) = resolver
        .resolve(&mut conn, ["com.a", "com.b", "com.a"])
        .await
        .unwrap();
    assert_eq!(
        found,
        std::collections::HashMap::from([("com.a".into(), Cell::Int(1))])
    );
    assert_eq!((stats.cache_hits, stats.queried, stats.found), (0, 2, 1));
    // Registered a moment later: found at once (no negative caching); com.a from the cache.
    schema.register_apps(&["com.b".into()]).await;
    let (found, stats) = resolver
        .resolve(&mut conn, ["com.a", "com.b"])
        .await
        .unwrap();
    assert_eq!(found.get("com.b"), Some(&Cell::Int(2)));
    assert_eq!((stats.cache_hits, stats.queried, stats.found), (1, 1, 1));
    drop(conn);
    schema.drop_schema().await;
}

/// Every row of `app_permissions`, every column, as text.
async fn snapshot(conn: &mut PgConnection) -> Vec<String> {
    let sql = "SELECT to_jsonb(t)::text FROM app_permissions t ORDER BY 1";
    sqlx::query_scalar(sql)
        .fetch_all(conn)
        .await
        .expect("snapshot")
}

/// A fourth topic no code knows: a table (as a migration would create it) and a mapping.
const PERMISSIONS_TABLE: &str = "
CREATE TABLE app_permissions (
    application_id   BIGINT NOT NULL REFERENCES apps_registry_application (id),
    permission       VARCHAR(128) NOT NULL,
    granted          BOOLEAN NOT NULL,
    protection_level VARCHAR(32),
    observed_at      TIMESTAMPTZ NOT NULL,
    source_offset    BIGINT NOT NULL,
    first_seen_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (application_id, permission)
)";

const PERMISSIONS_SINK: &str = r#"
[[sink]]
name = "app-permissions"
table = "app_permissions"
key = ["application_id", "permission"]
conflict = { newest-wins = "observed_at" }
never_written = ["first_seen_at"]
batch_size = 100

[sink.columns]
application_id = { lookup = { field = "package_name", table = "apps_registry_application", key = "package_name", value = "id", unknown = "unknown_application" }, min_length = 1 }
permission = { field = "permission", min_length = 1 }
granted = { field = "granted" }
protection_level = { field = "protection_level" }
observed_at = { field = "observed_at" }
source_offset = { kafka = "offset" }
"#;

#[tokio::test]
async fn a_fourth_topic_lands_from_a_mapping_and_a_table_alone_and_replays_byte_identical() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let apps: Vec<String> = (0..5).map(|i| format!("com.perm.app{i}")).collect();
    let (schema, mut conn) = migrated(&stack, &apps).await;
    sqlx::raw_sql(PERMISSIONS_TABLE)
        .execute(&mut conn)
        .await
        .unwrap();
    let sinks = parse_sinks("app-permissions.toml", PERMISSIONS_SINK).unwrap();
    let tables = sink_tables(&mut conn, &sinks).await.unwrap();
    let plan = plan_sink(&sinks[0], "storage-consumer", &tables).unwrap();
    let decoder = SinkDecoder::new(&sinks[0], &plan);
    let resolvers: Vec<LookupResolver> = decoder
        .lookups()
        .map(|(_, lookup)| LookupResolver::new(lookup, LookupValue::BigInt, TTL))
        .collect();

    let permission = |app: &str, name: &str, granted: bool, day: u32| {
        serde_json::json!({"package_name": app, "permission": name, "granted": granted,
            "protection_level": "dangerous", "observed_at": format!("2026-11-{day:02}T00:00:00Z")})
    };
    let mut messages = Vec::new();
    for (a, app) in apps.iter().enumerate() {
        for p in 0..20 {
            let name = format!("android.permission.P{p}");
            messages.push(permission(app, &name, p % 2 == 0, 10));
            if (a + p) % 3 == 0 {
                // A newer observation, then an older one and a re-sent copy.
                messages.push(permission(app, &name, p % 2 == 1, 12));
                messages.push(permission(app, &name, true, 9));
                messages.push(permission(app, &name, p % 2 == 1, 12));
            }
        }
    }
    let poison = [
        (
            permission("com.nobody", "x", true, 10),
            "unknown_application",
            "com.nobody",
        ),
        (
            permission(&apps[0], &"p".repeat(129), true, 10),
            "decode_error",
            "field `permission`: must be at most 128 characters, got 129",
        ),
        (
            serde_json::json!({"package_name": apps[0], "permission": "y", "observed_at": "2026-11-10T00:00:00Z"}),
            "decode_error",
            "field `granted`: required field is missing",
        ),
        (
            permission(&apps[0], "z", true, 10)
                .as_object()
                .map(|o| {
                    let mut o = o.clone();
                    o.insert("granted".into(), "yes".into());
                    serde_json::Value::Object(o)
                })
                .unwrap(),
            "decode_error",
            "field `granted`: must be a boolean, got a string \"yes\"",
        ),
    ];
    let mut expected_dead = Vec::new();
    for (i, (message, kind, reason)) in poison.iter().enumerate() {
        let at = 37 + i * 41;
        messages.insert(at, message.clone());
        expected_dead.push((at, (*kind).to_owned(), (*reason).to_owned()));
    }
    let records: Vec<Generated> = messages
        .iter()
        .map(|m| Generated {
            pipeline: sluice_core::PipelineKind::Reviews,
            key: Vec::new(),
            payload: Some(m.to_string().into_bytes()),
            expect: sluice_loadgen::Expect::Row,
        })
        .collect();

    let mut dead = Vec::new();
    let mut written = 0;
    for (n, chunk) in records.chunks(100).enumerate() {
        let (d, answers) =
            declared_batch(&mut conn, &plan, &decoder, &resolvers, n * 100, chunk).await;
        dead.extend(d);
        written += answers.len();
    }
    assert_eq!(dead, expected_dead);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM app_permissions")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(rows, 100, "5 apps × 20 permissions");
    let newest: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM app_permissions WHERE observed_at = '2026-11-12T00:00:00Z'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let observed_again = (0..5)
        .flat_map(|a| (0..20).map(move |p| (a + p) % 3 == 0))
        .filter(|again| *again)
        .count();
    assert_eq!(
        usize::try_from(newest).unwrap(),
        observed_again,
        "every key observed again later holds the newer observation"
    );
    let before = snapshot(&mut conn).await;

    // Replay: the same records again (same offsets) change nothing and dead-letter the same.
    let mut replayed_dead = Vec::new();
    let mut replay_answers = 0;
    for (n, chunk) in records.chunks(100).enumerate() {
        let (d, answers) =
            declared_batch(&mut conn, &plan, &decoder, &resolvers, n * 100, chunk).await;
        replayed_dead.extend(d);
        replay_answers += answers.len();
    }
    assert_eq!(
        replay_answers, 0,
        "every replayed row is skipped by the guard"
    );
    assert_eq!(replayed_dead, expected_dead);
    assert_eq!(
        snapshot(&mut conn).await,
        before,
        "byte-identical after replay"
    );
    println!(
        "app-permissions: {} records, {written} rows written ({rows} in the table), {} dead \
         letters; replay: 0 written, table identical",
        records.len(),
        dead.len()
    );
    drop(conn);
    schema.drop_schema().await;
}
