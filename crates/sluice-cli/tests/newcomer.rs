//! A newcomer's first run, as the README's tour tells it: an empty database, one table of
//! their own, one mapping file (no `conflict`: the default), `sluice migrate`, `sluice topics
//! ensure --sinks`, `sluice run --sinks`. Every record lands, and the database then holds the
//! user's table and sluice's own tables, nothing of the seed system (its tables, its
//! applications table); `sluice topics ensure` creates the sink's topic only.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use sluice_postgres::migrate::{MIGRATIONS, Set};
use sqlx::{Connection, Executor, PgConnection};
use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::database::Database;

const RECORDS: usize = 2_000;

/// The tables sluice's own migrations create, read from their SQL, and its bookkeeping table.
fn own_tables() -> BTreeSet<String> {
    let mut tables = BTreeSet::from(["storage_consumer_migrations".to_owned()]);
    for migration in MIGRATIONS.iter().filter(|m| m.set == Set::Own) {
        for part in migration.sql.split("CREATE TABLE ").skip(1) {
            let name = part.trim_start_matches("IF NOT EXISTS ");
            let name: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            tables.insert(name);
        }
    }
    tables
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_lands_rows_with_only_sluice_tables_created() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let db = Database::create(&stack).await;
    let prefix = sluice_testkit::unique("newcomer");
    let topic = format!("{prefix}-things");
    let dir = std::env::temp_dir().join(&prefix);
    std::fs::create_dir_all(&dir).unwrap();
    let mut conn = PgConnection::connect(&db.url).await.unwrap();
    conn.execute("CREATE TABLE things (id INT PRIMARY KEY, v TEXT NOT NULL)")
        .await
        .unwrap();
    let mapping = dir.join("things.toml");
    std::fs::write(
        &mapping,
        format!(
            "[[sink]]\nname = \"things\"\ntopic = \"{topic}\"\ntable = \"things\"\n\
             key = [\"id\"]\n[sink.columns]\nid = {{ field = \"id\" }}\nv = {{ field = \"v\" }}\n"
        ),
    )
    .unwrap();
    let mapping = mapping.display().to_string();
    let sluice = |args: &[&str]| db.sluice(&stack, &prefix, &dir, args);

    // `sluice migrate` on a database without the seed system's applications table.
    let migrated = sluice(&["migrate"]).output().unwrap();
    assert!(
        migrated.status.success(),
        "sluice migrate: {}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let own = own_tables();
    for table in [
        "dead_letter_events",
        "outbox_events",
        "processed_kafka_messages",
        "consumer_offsets",
    ] {
        assert!(own.contains(table), "{table} among {own:?}");
    }

    // `sluice topics ensure --sinks`: the sink's topic, and no seed topic.
    let ensured = sluice(&["topics", "ensure", "--sinks", &mapping])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&ensured.stdout).into_owned();
    assert!(
        ensured.status.success(),
        "topics ensure: {printed}{}",
        String::from_utf8_lossy(&ensured.stderr)
    );
    let topic_lines: Vec<&str> = printed
        .lines()
        .filter(|line| !line.starts_with("note:") && !line.starts_with("warning:"))
        .collect();
    assert_eq!(topic_lines.len(), 1, "{printed}");
    assert!(
        topic_lines[0].starts_with(&format!("{topic}: ")),
        "{printed}"
    );

    let records: Vec<sluice_testkit::RawRecord> = (0..RECORDS)
        .map(|n| {
            // Keyed by the row's id, so that a row's records are in one partition, in order.
            let id = n % (RECORDS - 100);
            let value = serde_json::json!({"id": id, "v": format!("v{n}")});
            (
                Some(id.to_string().into_bytes()),
                Some(value.to_string().into_bytes()),
            )
        })
        .collect();
    sluice_testkit::produce(&stack, &topic, &records).await;

    let log = dir.join("run.log");
    let mut run = sluice(&["run", "--sinks", &mapping])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // The last 100 records update the first 100 keys (the default conflict: always-update).
    let expected = (RECORDS - 100) as i64;
    let deadline = Instant::now() + Duration::from_secs(120);
    let landed = loop {
        let (rows, updated): (i64, i64) =
            sqlx::query_as("SELECT count(*), count(*) FILTER (WHERE v <> 'v' || id) FROM things")
                .fetch_one(&mut conn)
                .await
                .unwrap();
        if (rows, updated) == (expected, 100) || Instant::now() > deadline {
            break (rows, updated);
        }
        if let Some(status) = run.try_wait().unwrap() {
            panic!(
                "sluice run exited with {status}:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let stopped = Command::new("kill")
        .args(["-TERM", &run.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let status = run.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(landed, (expected, 100), "rows, updated rows:\n{text}");
    assert!(status.success(), "sluice run ended with {status}:\n{text}");

    // Only the user's table and sluice's own: no seed table, no applications table.
    let mut expected_tables = own;
    expected_tables.insert("things".to_owned());
    assert_eq!(db.tables().await, expected_tables);

    // `sluice verify` of this deployment: no applications table, no seed topic or table.
    let verified = sluice(&["verify", "--sinks", &mapping]).output().unwrap();
    assert!(
        verified.status.success(),
        "sluice verify: {}{}",
        String::from_utf8_lossy(&verified.stdout),
        String::from_utf8_lossy(&verified.stderr)
    );
    let shown = String::from_utf8_lossy(&verified.stdout);
    assert!(shown.contains(&format!("{topic} 2000")), "{shown}");
    assert!(shown.contains("things 1900"), "{shown}");

    // The seed system's tables need its applications table, and say so.
    let seeds = sluice(&["migrate", "--seeds"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&seeds.stderr);
    assert!(!seeds.status.success(), "{stderr}");
    assert!(stderr.contains("apps_registry_application"), "{stderr}");
    assert_eq!(
        db.tables().await,
        expected_tables,
        "a refused --seeds creates nothing"
    );

    drop(conn);
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    let _ = std::fs::remove_dir_all(&dir);
    db.drop().await;
}
