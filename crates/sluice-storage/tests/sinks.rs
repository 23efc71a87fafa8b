//! The seed mappings through the storage consumer's own batch path (decode → resolve
//! references → de-duplicate → one statement with savepoint isolation → dead letters →
//! COMMIT) on the real PostgreSQL, without Kafka: the load generator's mixes (duplicates,
//! older versions, every poison kind) leave one row per key and exactly the dead letters the
//! generator marks, each of its kind; and a fourth topic lands from a mapping and a table.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_core::{BatchReport, PipelineKind};
use sluice_kafka::Record;
use sluice_loadgen::{
    AnalyzerConfig, CrawlerConfig, Expect, Generated, PoisonKind, analysis, app_names,
    app_stats_for_crawl, poison, reviews_for_crawl,
};
use sluice_postgres::catalog::sink_tables;
use sluice_sinks::{parse_sinks, plan_sink};
use sluice_storage::batch::{Done, Stored, decode_batch, store_batch};
use sluice_storage::sink::{Declared, Tables};
use sluice_testkit::TestSchema;
use sqlx::PgConnection;

const APPS: &str = "apps_registry_application";
const TTL: Duration = Duration::from_secs(300);
const GROUP: &str = "storage-consumer.test";

async fn migrated(stack: &sluice_testkit::Stack, apps: &[String]) -> (TestSchema, PgConnection) {
    let schema = TestSchema::create(stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate(&mut conn, APPS)
        .await
        .expect("migrate");
    schema.register_apps(apps).await;
    (schema, conn)
}

/// The generated values as records of one partition, offsets from 0.
fn as_records(topic: &str, generated: &[Generated]) -> Vec<Record> {
    generated
        .iter()
        .enumerate()
        .map(|(offset, g)| Record {
            key: Some(g.key.clone()),
            payload: g.payload.clone(),
            timestamp_ms: Some(1_764_504_000_000 + offset as i64),
            ..Record::at(topic, 0, offset as i64)
        })
        .collect()
}

/// Every batch through `sink`, each in its own transaction; the reports.
async fn store_all(
    conn: &mut PgConnection,
    sink: &Tables,
    records: &[Record],
    batch: usize,
) -> Vec<BatchReport> {
    let mut reports = Vec::new();
    for chunk in records.chunks(batch) {
        let decoded = decode_batch(sink, chunk);
        let (origins, committed) = (Vec::new(), Default::default());
        let stored = store_batch(conn, GROUP, (chunk, &decoded, &origins), &committed)
            .await
            .expect("store the batch");
        let Stored::Done(Done { report, .. }) = stored else {
            panic!("PostgreSQL lost no offsets here: {stored:?}");
        };
        reports.push(report);
    }
    reports
}

/// (offset, kind, reason) of every dead letter.
async fn dead_letters(conn: &mut PgConnection) -> Vec<(i64, String, String)> {
    sqlx::query_as(
        "SELECT kafka_offset, error_kind, reason FROM dead_letter_events ORDER BY kafka_offset",
    )
    .fetch_all(conn)
    .await
    .expect("dead letters")
}

/// The seed mapping `deploy/sinks/<seed>.toml`, planned against `conn`'s schema.
async fn seed_sink(conn: &mut PgConnection, seed: &str) -> Tables {
    let path = format!(
        "{}/../../deploy/sinks/{seed}.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    let sinks = parse_sinks(&path, &std::fs::read_to_string(&path).unwrap()).unwrap();
    let tables = sink_tables(conn, &sinks).await.unwrap();
    let plan = plan_sink(&sinks[0], "storage-consumer", &tables).unwrap();
    Tables::fixed(Declared::new(&sinks[0], plan, TTL).unwrap())
}

/// Runs `generated` in batches of `batch` through the seed mapping in a schema of its own;
/// checks what the generator expects of every record (each dead letter's kind, a row per key)
/// and returns (rows, dead letters by kind).
async fn through_the_seed(
    seed: &str,
    generated: &[Generated],
    batch: usize,
    apps: &[String],
) -> (usize, BTreeMap<String, usize>) {
    let stack = sluice_testkit::stack().expect("the stack");
    let (schema, mut conn) = migrated(&stack, apps).await;
    let records = as_records(seed, generated);
    let sink = seed_sink(&mut conn, seed).await;
    assert_eq!(sink.name(), seed);

    let reports = store_all(&mut conn, &sink, &records, batch).await;
    let dead = dead_letters(&mut conn).await;
    // Every record the generator marks as poison is a dead letter of its kind, and no other.
    let expected_dead: Vec<(i64, &str)> = generated
        .iter()
        .enumerate()
        .filter_map(|(offset, g)| match g.expect {
            Expect::DeadLetter(PoisonKind::UnknownPackage) => {
                Some((offset as i64, "unknown_application"))
            }
            Expect::DeadLetter(_) => Some((offset as i64, "decode_error")),
            Expect::Row | Expect::NoChange => None,
        })
        .collect();
    let got_dead: Vec<(i64, &str)> = dead.iter().map(|(o, k, _)| (*o, k.as_str())).collect();
    assert_eq!(got_dead, expected_dead, "{seed}: dead letters");
    let table = seed.parse::<PipelineKind>().expect("a seed").table();
    let rows = sluice_testkit::table_rows(&mut conn, table).await;
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    for (_, kind, _) in &dead {
        *by_kind.entry(kind.clone()).or_default() += 1;
    }
    let mut total = BatchReport::default();
    for report in &reports {
        total += *report;
    }
    assert_eq!(
        total.write.inserted as usize,
        rows.len(),
        "{seed}: one insert per row"
    );
    assert_eq!(
        total.dead_lettered(),
        dead.len() as u64,
        "{seed}: reports count the dead"
    );
    println!(
        "{seed}: {} records, {} rows, {:?}, dead letters {by_kind:?}",
        records.len(),
        rows.len(),
        total.write,
    );
    drop(conn);
    schema.drop_schema().await;
    (rows.len(), by_kind)
}

/// The generator's poison records are reviews-shaped: in another topic every one fails
/// decoding (a required field is missing) before any lookup, so each is a `decode_error`.
fn reviews_shaped(mut generated: Generated) -> Generated {
    generated.expect = Expect::DeadLetter(PoisonKind::MissingField);
    generated
}

/// The distinct values of `field` among the records the generator expects to be stored.
fn stored_keys(generated: &[Generated], field: &str) -> usize {
    let keys: std::collections::BTreeSet<String> = generated
        .iter()
        .filter(|g| matches!(g.expect, Expect::Row | Expect::NoChange))
        .filter_map(|g| {
            let value: serde_json::Value = serde_json::from_slice(g.payload.as_deref()?).ok()?;
            Some(value[field].to_string())
        })
        .collect();
    keys.len()
}

#[tokio::test]
async fn reviews_land_through_the_seed_mapping_as_the_generator_expects() {
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
    let mut generated = reviews_for_crawl(&config);
    // A second crawl re-reads the same reviews with more thumbs-up: updates.
    generated.extend(reviews_for_crawl(&CrawlerConfig {
        crawl: 2,
        reviews: 3_000,
        ..config.clone()
    }));
    let apps = app_names(&config.app_prefix, config.apps);
    let (rows, dead) = through_the_seed("reviews", &generated, 500, &apps).await;
    assert_eq!(rows, stored_keys(&generated, "review_id"));
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
async fn app_stats_and_network_metrics_land_through_the_seed_mappings() {
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
        expect: Expect::DeadLetter(PoisonKind::UnknownPackage),
        ..stats[0].clone()
    });
    for kind in PoisonKind::ALL {
        stats.push(reviews_shaped(poison(
            PipelineKind::AppStats,
            kind,
            &apps[0],
            &mut rng,
        )));
    }
    let (rows, dead) = through_the_seed("app-stats", &stats, 200, &apps).await;
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
        metrics.push(reviews_shaped(poison(
            PipelineKind::NetworkMetrics,
            kind,
            &apps[0],
            &mut rng,
        )));
    }
    let (rows, dead) = through_the_seed("network-metrics", &metrics, 50, &apps).await;
    assert_eq!(rows, 500);
    assert_eq!(dead.values().sum::<usize>(), 12, "{dead:?}");
}

/// Every row of `app_permissions`, every column, as text.
async fn snapshot(conn: &mut PgConnection) -> Vec<String> {
    let sql = "SELECT to_jsonb(t)::text FROM app_permissions t ORDER BY 1";
    sqlx::query_scalar(sql)
        .fetch_all(conn)
        .await
        .expect("snapshot")
}

/// A fourth topic no code knows: a table (as the user's migration creates it) and a mapping.
const PERMISSIONS_TABLE: &str = include_str!("../../../deploy/fourth-topic/app_permissions.sql");
const PERMISSIONS_SINK: &str = include_str!("../../../deploy/fourth-topic/app-permissions.toml");

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
    let sink = Tables::fixed(Declared::new(&sinks[0], plan, TTL).unwrap());

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
            "unknown_package",
            "field `package_name`: unknown package `com.nobody` (not in apps_registry_application)",
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
    let generated: Vec<Generated> = messages
        .iter()
        .map(|m| Generated {
            pipeline: PipelineKind::Reviews,
            key: Vec::new(),
            payload: Some(m.to_string().into_bytes()),
            expect: sluice_loadgen::Expect::Row,
        })
        .collect();
    let records = as_records("app-permissions", &generated);
    let expected_dead: Vec<(i64, String, String)> = expected_dead
        .into_iter()
        .map(|(at, kind, reason)| (at as i64, kind, reason))
        .collect();

    let reports = store_all(&mut conn, &sink, &records, 100).await;
    let written: u64 = reports
        .iter()
        .map(|r| r.write.inserted + r.write.updated)
        .sum();
    let dead = dead_letters(&mut conn).await;
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
    let replayed = store_all(&mut conn, &sink, &records, 100).await;
    let replay_written: u64 = replayed
        .iter()
        .map(|r| r.write.inserted + r.write.updated)
        .sum();
    assert_eq!(
        replay_written, 0,
        "every replayed row is skipped by the guard"
    );
    assert_eq!(dead_letters(&mut conn).await, expected_dead);
    assert_eq!(
        replayed
            .iter()
            .map(|r| r.dead_letters_inserted)
            .sum::<u64>(),
        0,
        "a replayed dead letter is the same row"
    );
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

    // An application deleted after its id was cached: the write breaks the foreign key, the
    // row's lookup runs again past the cache, and the record is dead-lettered with the
    // mapping's kind; the batch's other row is written.
    sqlx::query("INSERT INTO apps_registry_application (package_name) VALUES ('com.perm.late')")
        .execute(&mut conn)
        .await
        .unwrap();
    let late = as_records(
        "app-permissions-late",
        &[
            permission("com.perm.late", "android.permission.CAMERA", true, 20),
            permission(&apps[1], "android.permission.LATE", true, 20),
        ]
        .map(|m| Generated {
            pipeline: PipelineKind::Reviews,
            key: Vec::new(),
            payload: Some(m.to_string().into_bytes()),
            expect: sluice_loadgen::Expect::Row,
        }),
    );
    let warm = decode_batch(&sink, &late[..1]);
    let fixed = sink.fixed_sink().expect("one table");
    let bound = fixed
        .bind(&mut conn, &warm.groups[0].messages)
        .await
        .unwrap();
    assert_eq!((bound.rows.len(), bound.rejected.len()), (1, 0));
    sqlx::query("DELETE FROM apps_registry_application WHERE package_name = 'com.perm.late'")
        .execute(&mut conn)
        .await
        .unwrap();
    let report = store_all(&mut conn, &sink, &late, 100).await;
    assert_eq!(report[0].write.inserted, 1, "{report:?}");
    let (kind, reason): (String, String) = sqlx::query_as(
        "SELECT error_kind, reason FROM dead_letter_events WHERE topic = 'app-permissions-late'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(kind, "unknown_package");
    assert_eq!(
        reason,
        "field `package_name`: unknown package `com.perm.late` (deleted after it was resolved)"
    );
    drop(conn);
    schema.drop_schema().await;
}
