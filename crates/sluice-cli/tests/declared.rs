//! Declared sinks run by the `sluice` binary against the real Kafka and PostgreSQL:
//!
//! 1. the same 100,000 reviews, 2,000 app-stats and 500 network-metrics (with the load
//!    generator's poison) through the built-in pipelines and through the seed mappings of
//!    `deploy/sinks/` leave identical tables and identical dead letters (kind and reason);
//! 2. a fourth topic that no code knows lands from a table and a mapping file alone, with
//!    its poison dead-lettered under the mapping's kind, metrics, `lag`, `dlq` and `replay`
//!    by the sink's name, and a replay leaves the table byte-identical;
//! 3. a mapping that does not fit the schema exits 2 naming the sink and the column, before
//!    anything is consumed.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use sluice_loadgen::{
    AnalyzerConfig, CrawlerConfig, Generated, PoisonKind, analysis, app_names, app_stats_for_crawl,
    poison, reviews_for_crawl,
};
use sluice_testkit::TestSchema;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{Env, PIPELINES, Running};

/// The seed mappings with their topics renamed to this test's topics.
fn seed_mappings(env: &Env, dir: &Path) -> PathBuf {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/sinks");
    let out = dir.join("sinks");
    std::fs::create_dir_all(&out).unwrap();
    for pipeline in PIPELINES {
        let text = std::fs::read_to_string(seeds.join(format!("{pipeline}.toml"))).unwrap();
        let from = format!("topic = \"{pipeline}\"");
        assert!(text.contains(&from), "{pipeline}.toml names its topic");
        let text = text.replace(&from, &format!("topic = \"{}\"", env.topic(pipeline)));
        std::fs::write(out.join(format!("{pipeline}.toml")), text).unwrap();
    }
    out
}

/// Waits until `group` has committed every record of `topic`.
async fn wait_committed(env: &Env, group: &str, topic: &str, run: &mut Running, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        run.assert_alive();
        let offsets = env.admin().group_offsets(group, topic).unwrap();
        let end: i64 = offsets.iter().map(|p| p.high).sum();
        let committed: i64 = offsets.iter().map(|p| p.committed.unwrap_or(0)).sum();
        if end > 0 && committed == end {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{group}: committed {committed}/{end}\n{}",
            run.tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Table rows as text (without the columns a default fills) and dead letters as
/// (topic, partition, offset, kind, reason).
async fn contents(schema: &TestSchema) -> (Vec<String>, Vec<(String, i32, i64, String, String)>) {
    let mut conn = schema.connect().await;
    let mut rows = Vec::new();
    for table in ["reviews", "app_stats", "network_metrics"] {
        let more = sluice_testkit::table_rows(&mut conn, table).await;
        rows.extend(more.into_iter().map(|row| format!("{table} {row}")));
    }
    let dead = sqlx::query_as(
        "SELECT topic, partition, kafka_offset, error_kind, reason FROM dead_letter_events \
         ORDER BY topic, partition, kafka_offset",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    (rows, dead)
}

fn raw(records: &[Generated]) -> Vec<sluice_testkit::RawRecord> {
    records
        .iter()
        .map(|g| (Some(g.key.clone()), g.payload.clone()))
        .collect()
}

#[tokio::test]
async fn the_seed_mappings_land_what_the_built_ins_land() {
    let Some(env) = Env::new().await else {
        return;
    };
    let config = CrawlerConfig {
        apps: 200,
        reviews: 100_000,
        app_prefix: sluice_testkit::unique("com.decl"),
        duplicate_fraction: 0.05,
        out_of_order_fraction: 0.05,
        poison_fraction: 0.01,
        ..CrawlerConfig::default()
    };
    let apps = app_names(&config.app_prefix, config.apps);
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(7);
    let reviews = reviews_for_crawl(&config);
    let stats_config = CrawlerConfig {
        apps: 1_000,
        ..config.clone()
    };
    let all_apps = app_names(&config.app_prefix, stats_config.apps);
    let mut stats = app_stats_for_crawl(&stats_config);
    stats.extend(app_stats_for_crawl(&CrawlerConfig {
        crawl: 2,
        ..stats_config.clone()
    }));
    let analyzer = AnalyzerConfig {
        apps: apps[..50].to_vec(),
        seed: 11,
    };
    let at = chrono::Utc::now();
    let mut metrics: Vec<Generated> = (0..500).map(|n| analysis(&analyzer, n, at)).collect();
    for kind in PoisonKind::ALL {
        stats.push(poison(
            sluice_core::PipelineKind::AppStats,
            kind,
            &apps[0],
            &mut rng,
        ));
        metrics.push(poison(
            sluice_core::PipelineKind::NetworkMetrics,
            kind,
            &apps[0],
            &mut rng,
        ));
    }
    env.schema.register_apps(&all_apps).await;
    for (pipeline, records) in [
        ("reviews", &reviews),
        ("app-stats", &stats),
        ("network-metrics", &metrics),
    ] {
        sluice_testkit::produce(&env.stack, &env.topic(pipeline), &raw(records)).await;
    }

    // The built-in pipelines.
    let mut builtin = env.spawn_run("builtin", &[]);
    for pipeline in PIPELINES {
        env.wait_caught_up(pipeline, &mut builtin, Duration::from_secs(600))
            .await;
    }
    builtin.signal("TERM");
    assert!(builtin.wait(Duration::from_secs(60)).success());

    // The mappings, in a schema and groups of their own.
    let declared_schema = TestSchema::create(&env.stack).await;
    declared_schema.register_apps(&all_apps).await;
    let prefix = format!("{}-declared", env.prefix);
    let sinks = seed_mappings(&env, &env.dir);
    let heartbeats = env.dir.join("heartbeat-declared").display().to_string();
    let log = env.dir.join("declared.log");
    let mut cmd = env.sluice(&["run", "--sinks", &sinks.display().to_string()]);
    cmd.envs([
        ("DATABASE_URL", declared_schema.url.as_str()),
        ("STORAGE_GROUP_PREFIX", prefix.as_str()),
        ("STORAGE_HEARTBEAT_DIR", heartbeats.as_str()),
    ]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut declared = Running {
        child: cmd.spawn().unwrap(),
        log,
    };
    for pipeline in PIPELINES {
        let group = format!("{prefix}.{pipeline}");
        wait_committed(
            &env,
            &group,
            &env.topic(pipeline),
            &mut declared,
            Duration::from_secs(600),
        )
        .await;
    }
    declared.signal("TERM");
    assert!(declared.wait(Duration::from_secs(60)).success());
    let started = declared.events_named("pipeline started");
    assert_eq!(started.len(), 3, "three declared pipelines, no built-in");

    let (rows, dead) = contents(&env.schema).await;
    let (declared_rows, declared_dead) = contents(&declared_schema).await;
    assert!(rows.len() > 90_000, "{} rows", rows.len());
    assert_eq!(declared_rows.len(), rows.len(), "row counts");
    assert!(declared_rows == rows, "table contents differ");
    let kinds = |d: &[(String, i32, i64, String, String)]| {
        let mut kinds = std::collections::BTreeMap::<String, usize>::new();
        for (.., kind, _) in d {
            *kinds.entry(kind.clone()).or_default() += 1;
        }
        kinds
    };
    assert!(dead.len() > 1_000, "{:?}", kinds(&dead));
    assert_eq!(
        declared_dead, dead,
        "dead letters (coordinates, kind, reason)"
    );
    println!(
        "built-in and mappings: {} rows identical, {} dead letters identical {:?}",
        rows.len(),
        dead.len(),
        kinds(&dead)
    );
    declared_schema.drop_schema().await;
    env.cleanup().await;
}

/// A table that no code of sluice knows, as the user's own migration creates it, and its
/// mapping (the example of docs/sinks.md).
const PERMISSIONS_TABLE: &str = include_str!("../../../deploy/fourth-topic/app_permissions.sql");
const PERMISSIONS_SINK: &str = include_str!("../../../deploy/fourth-topic/app-permissions.toml");

/// The example's mapping reading `topic`.
fn permissions_sink(topic: &str) -> String {
    let name = "name = \"app-permissions\"";
    assert!(PERMISSIONS_SINK.contains(name));
    PERMISSIONS_SINK.replacen(name, &format!("{name}\ntopic = \"{topic}\""), 1)
}

async fn snapshot(schema: &TestSchema) -> Vec<String> {
    let mut conn = schema.connect().await;
    sqlx::query_scalar("SELECT to_jsonb(t)::text FROM app_permissions t ORDER BY 1")
        .fetch_all(&mut conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_fourth_topic_lands_from_a_mapping_and_a_migration_alone() {
    let Some(env) = Env::new().await else {
        return;
    };
    let apps: Vec<String> = (0..5).map(|i| format!("{}.perm{i}", env.prefix)).collect();
    env.schema.register_apps(&apps).await;
    {
        let mut conn = env.schema.connect().await;
        sqlx::raw_sql(PERMISSIONS_TABLE)
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let topic = format!("{}-app-permissions", env.prefix);
    sluice_testkit::create_topic(&env.stack, &topic, 3).await;
    let file = env.dir.join("app-permissions.toml");
    std::fs::write(&file, permissions_sink(&topic)).unwrap();
    let file = file.display().to_string();

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
                // A newer observation, then an older one: the older never overwrites.
                messages.push(permission(app, &name, p % 2 == 1, 12));
                messages.push(permission(app, &name, true, 9));
            }
        }
    }
    let poison = [
        (permission("com.nobody", "x", true, 10), "unknown_package"),
        (
            permission(&apps[0], &"p".repeat(129), true, 10),
            "decode_error",
        ),
        (
            serde_json::json!({"package_name": apps[0], "permission": "y",
                "observed_at": "2026-11-10T00:00:00Z"}),
            "decode_error",
        ),
    ];
    for (message, _) in &poison {
        messages.push(message.clone());
    }
    // One partition key per app: an app's observations stay in order.
    let records: Vec<sluice_testkit::RawRecord> = messages
        .iter()
        .map(|m| {
            let key = m["package_name"].as_str().unwrap_or("").as_bytes().to_vec();
            (Some(key), Some(m.to_string().into_bytes()))
        })
        .collect();
    sluice_testkit::produce(&env.stack, &topic, &records).await;

    let port = support::http::free_port();
    let addr = format!("127.0.0.1:{port}");
    let group = env.group("app-permissions");
    let mut run = env.spawn_run(
        "permissions",
        &[
            ("SLUICE_SINKS_FILE", file.as_str()),
            ("SLUICE_HTTP_ADDR", addr.as_str()),
        ],
    );
    wait_committed(&env, &group, &topic, &mut run, Duration::from_secs(120)).await;
    let samples = support::http::scrape(port);
    let labels = [("pipeline", "app-permissions")];
    assert_eq!(
        support::http::sum(&samples, "sluice_records_total", &labels),
        messages.len() as f64,
        "every record counted under the sink's name"
    );
    assert_eq!(
        support::http::sum(
            &samples,
            "sluice_dead_letters_total",
            &[("pipeline", "app-permissions"), ("kind", "unknown_package")]
        ),
        1.0
    );
    run.signal("TERM");
    assert!(run.wait(Duration::from_secs(60)).success());
    let started = run.events_named("pipeline started");
    assert_eq!(started.len(), 1, "only the declared sink runs: {started:?}");

    let rows = snapshot(&env.schema).await;
    assert_eq!(rows.len(), 100, "5 apps × 20 permissions");
    let newest = env
        .count("SELECT count(*) FROM app_permissions WHERE observed_at = '2026-11-12T00:00:00Z'")
        .await;
    let observed_again = (0..5)
        .flat_map(|a| (0..20).map(move |p| (a + p) % 3 == 0))
        .filter(|again| *again)
        .count();
    assert_eq!(
        newest as usize, observed_again,
        "the newer observation wins"
    );
    let mut dead: Vec<String> = {
        let mut conn = env.schema.connect().await;
        sqlx::query_scalar("SELECT error_kind FROM dead_letter_events ORDER BY kafka_offset")
            .fetch_all(&mut conn)
            .await
            .unwrap()
    };
    dead.sort();
    let mut expected: Vec<String> = poison.iter().map(|(_, k)| (*k).to_owned()).collect();
    expected.sort();
    assert_eq!(dead, expected);

    // `lag` and `dlq` by the sink's name.
    let lag = env.output(&["lag", "--json", "--sinks", &file], &[]);
    assert!(
        lag.status.success(),
        "{}",
        String::from_utf8_lossy(&lag.stderr)
    );
    let lag: serde_json::Value = serde_json::from_slice(&lag.stdout).unwrap();
    assert_eq!(lag[0]["pipeline"], "app-permissions", "{lag}");
    assert_eq!(lag[0]["total_lag"], 0, "{lag}");
    assert_eq!(lag[0]["total_stored_lag"], 0, "{lag}");
    let listed = env.output(
        &[
            "dlq",
            "list",
            "--pipeline",
            "app-permissions",
            "--kind",
            "unknown_package",
            "--json",
        ],
        &[("SLUICE_SINKS_FILE", file.as_str())],
    );
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");

    // Replay the whole topic: nothing changes.
    let replay = env.output(
        &[
            "replay",
            "app-permissions",
            "--to",
            "earliest",
            "--execute",
            "--sinks",
            &file,
        ],
        &[],
    );
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    assert_eq!(
        env.admin()
            .group_offsets(&group, &topic)
            .unwrap()
            .iter()
            .map(|p| p.committed.unwrap_or(0))
            .sum::<i64>(),
        0
    );
    let mut again = env.spawn_run(
        "permissions-replay",
        &[("SLUICE_SINKS_FILE", file.as_str())],
    );
    wait_committed(&env, &group, &topic, &mut again, Duration::from_secs(120)).await;
    again.signal("TERM");
    assert!(again.wait(Duration::from_secs(60)).success());
    assert_eq!(
        snapshot(&env.schema).await,
        rows,
        "byte-identical after the replay"
    );
    assert_eq!(
        env.count("SELECT count(*) FROM dead_letter_events").await,
        poison.len() as i64,
        "a replayed dead letter is the same row"
    );
    let _ = env.admin();
    sluice_testkit::delete_topics(&env.stack, &[topic.as_str()]).await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_mapping_that_does_not_fit_the_schema_exits_2_before_consuming() {
    let Some(env) = Env::new().await else {
        return;
    };
    let topic = env.topic("reviews");
    sluice_testkit::produce(
        &env.stack,
        &topic,
        &[(Some(b"k".to_vec()), Some(b"{}".to_vec()))],
    )
    .await;
    let mapping = |line: &str| {
        format!(
            "[[sink]]\nname = \"my-reviews\"\ntopic = \"{topic}\"\ntable = \"reviews\"\n\
             key = [\"review_id\"]\nconflict = \"insert-ignore\"\n[sink.columns]\n\
             review_id = {{ field = \"id\" }}\n{line}\n"
        )
    };
    let cases = [
        (
            mapping("no_such_column = { field = \"x\" }"),
            "no_such_column",
        ),
        (mapping("score = { const = \"high\" }"), "score"),
    ];
    for (n, (text, column)) in cases.iter().enumerate() {
        let file = env.dir.join(format!("bad{n}.toml"));
        std::fs::write(&file, text).unwrap();
        let out = env.output(&["run", "--sinks", &file.display().to_string()], &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("my-reviews"), "names the sink: {stderr}");
        assert!(
            stderr.contains(column),
            "names the column `{column}`: {stderr}"
        );
    }
    // A sink named like a built-in that STORAGE_PIPELINES names: refused too.
    let file = env.dir.join("clash.toml");
    std::fs::write(
        &file,
        mapping("content = { field = \"x\" }").replace("my-reviews", "reviews"),
    )
    .unwrap();
    let out = env.output(
        &["run", "--sinks", &file.display().to_string()],
        &[("STORAGE_PIPELINES", "reviews")],
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let offsets = env
        .admin()
        .group_offsets(&env.group("my-reviews"), &topic)
        .unwrap();
    assert!(
        offsets.iter().all(|p| p.committed.is_none()),
        "nothing consumed: {offsets:?}"
    );
    env.cleanup().await;
}
