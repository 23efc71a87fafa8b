//! The seed system run from its mapping files (`deploy/sinks/`, which replace the compiled-in
//! seeds): on a fresh database that has only the applications table, `sluice run --sinks`
//! creates the seed tables it writes (a mapping file that writes them needs them as a seed
//! pipeline does), and `sluice topics ensure` plans a seed topic with the pipeline's own
//! `STORAGE_TOPIC_<SETTING>_<PIPELINE>` values when a mapping file runs it. Both found by a
//! review of the change that gave a deployment only sluice's own tables.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use sqlx::{Connection, Executor, PgConnection};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::database::Database;
use support::sluice_binary;

/// The shipped seed mappings (`deploy/sinks/*.toml`) copied into `folder`, each reading the
/// topic `<prefix>-<name>`; those topics.
fn shipped_mappings(folder: &std::path::Path, prefix: &str) -> Vec<String> {
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/sinks");
    let mut topics = Vec::new();
    for name in ["app-stats", "reviews", "network-metrics"] {
        let text = std::fs::read_to_string(shipped.join(format!("{name}.toml"))).unwrap();
        let topic = format!("{prefix}-{name}");
        let text = text.replace(
            &format!("topic = \"{name}\""),
            &format!("topic = \"{topic}\""),
        );
        std::fs::write(folder.join(format!("{name}.toml")), text).unwrap();
        topics.push(topic);
    }
    topics
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_the_shipped_seed_mappings_on_a_fresh_database_gets_their_tables() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let db = Database::create(&stack).await;
    let prefix = sluice_testkit::unique("seedmap");
    let dir = std::env::temp_dir().join(&prefix);
    let sinks = dir.join("sinks");
    std::fs::create_dir_all(&sinks).unwrap();
    let mut conn = PgConnection::connect(&db.url).await.unwrap();
    conn.execute(include_str!("../../../fixtures/applications.sql"))
        .await
        .unwrap();
    let topics = shipped_mappings(&sinks, &prefix);
    for topic in &topics {
        sluice_testkit::create_topic(&stack, topic, 3).await;
    }
    let log = dir.join("run.log");
    let mut run = db
        .sluice(
            &stack,
            &prefix,
            &dir,
            &["run", "--sinks", &sinks.display().to_string()],
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let exited = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    if exited.is_none() {
        let _ = Command::new("kill")
            .args(["-TERM", &run.id().to_string()])
            .status();
        let _ = run.wait();
    }
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let tables = db.tables().await;
    drop(conn);
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    sluice_testkit::delete_topics(&stack, &refs).await;
    let _ = std::fs::remove_dir_all(&dir);
    db.drop().await;
    assert!(
        exited.is_none(),
        "sluice run --sinks <deploy/sinks> exited with {exited:?} on a fresh database:\n{text}"
    );
    for table in [
        "app_stats",
        "reviews",
        "network_metrics",
        "dead_letter_events",
    ] {
        assert!(tables.contains(table), "{table} not in {tables:?}");
    }
}

/// `sluice topics ensure` with `SLUICE_SINKS_FILE` = the shipped seed mappings: the reviews
/// topic keeps its own retention (`STORAGE_TOPIC_RETENTION_MS_REVIEWS`), not the shared one
/// (which, on an existing topic, would shorten the retention of the records it keeps).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_ensure_keeps_a_seed_topics_overrides_when_its_mapping_file_runs_it() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let prefix = sluice_testkit::unique("seedmapt");
    let dir = std::env::temp_dir().join(&prefix);
    let sinks = dir.join("sinks");
    std::fs::create_dir_all(&sinks).unwrap();
    let topics = shipped_mappings(&sinks, &prefix);
    let reviews = format!("{prefix}-reviews");
    let ensure = || {
        Command::new(sluice_binary())
            .args(["topics", "ensure"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("KAFKA_BOOTSTRAP_SERVERS", &stack.bootstrap)
            .env("DATABASE_URL", &stack.database_url)
            .env("SLUICE_SINKS_FILE", &sinks)
            .env("STORAGE_TOPIC_APP_STATS", format!("{prefix}-app-stats"))
            .env("STORAGE_TOPIC_REVIEWS", &reviews)
            .env(
                "STORAGE_TOPIC_NETWORK_METRICS",
                format!("{prefix}-network-metrics"),
            )
            .env("STORAGE_TOPIC_RETENTION_MS", "3600000")
            .env("STORAGE_TOPIC_RETENTION_MS_REVIEWS", "-1")
            .output()
            .unwrap()
    };
    let first = ensure();
    let printed = String::from_utf8_lossy(&first.stdout).into_owned();
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    sluice_testkit::delete_topics(&stack, &refs).await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(first.status.success(), "{first:?}");
    let line = printed
        .lines()
        .find(|l| l.starts_with(&format!("{reviews}: ")))
        .unwrap_or_else(|| panic!("no line for {reviews}:\n{printed}"));
    assert!(
        line.contains("retention.ms -1"),
        "STORAGE_TOPIC_RETENTION_MS_REVIEWS=-1 not applied to the reviews topic:\n{printed}"
    );
}
