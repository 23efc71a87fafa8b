//! A table widened under a running `sluice run` (docs/sinks.md#limits-from-the-catalog),
//! against the real Kafka and PostgreSQL: a record too long for `varchar(16)` is a dead
//! letter; once the column is `varchar(32)` (and a `smallint` an `integer`), the next such
//! record lands without a restart, and the dead letter replayed lands too — for a fixed
//! table and for a table of a sink of many tables alike.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::json;
use std::time::Duration;
use support::case::{Case, text};

const DDL: &str = "
CREATE TABLE things (id BIGINT PRIMARY KEY, tag VARCHAR(16), n SMALLINT);
CREATE TABLE raw_items (id BIGINT PRIMARY KEY, tag VARCHAR(16), n SMALLINT);";

/// `things`: a fixed table; `raw`: a sink of many tables (the topic names its table).
const MAPPING: &str = r#"
[[sink]]
name = "things"
topic = "{prefix}-things"
table = "things"
key = ["id"]

[sink.columns]
id = { field = "id" }
tag = { field = "tag" }
n = { field = "n" }

[[sink]]
name = "raw"
topic_pattern = "{prefix}-src-(items)"
table = "raw_{1}"
columns = "auto"
"#;

#[tokio::test]
async fn a_column_widened_under_a_running_sink_takes_what_it_refused_before() {
    let Some(case) = Case::new(&["things", "src-items"], DDL, MAPPING).await else {
        return;
    };
    let file = case.file.display().to_string();
    let mut run = case
        .env
        .spawn_run("widened", &[("SLUICE_SINKS_FILE", file.as_str())]);
    let long = "T".repeat(20);
    let sinks = [
        ("things", "things", case.env.group("things")),
        ("src-items", "raw_items", case.env.group("raw")),
    ];
    for (topic, _, group) in &sinks {
        case.produce(topic, &[json!({"id": 1, "tag": long, "n": 1})])
            .await;
        case.wait_committed(&mut run, group, &case.topic(topic))
            .await;
    }
    let dead = case.dead_letters().await;
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert!(
        dead.iter()
            .all(|d| d.3.contains("must be at most 16 characters, got 20")),
        "{dead:?}"
    );

    {
        let mut conn = case.env.schema.connect().await;
        sqlx::raw_sql(
            "ALTER TABLE things ALTER COLUMN tag TYPE varchar(32), ALTER COLUMN n TYPE integer;
             ALTER TABLE raw_items ALTER COLUMN tag TYPE varchar(32), ALTER COLUMN n TYPE integer;",
        )
        .execute(&mut conn)
        .await
        .unwrap();
    }
    // The catalog is read again at most once a second per pipeline.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    for (topic, _, group) in &sinks {
        case.produce(topic, &[json!({"id": 2, "tag": long, "n": 40_000})])
            .await;
        case.wait_committed(&mut run, group, &case.topic(topic))
            .await;
    }
    assert_eq!(
        case.dead_letters().await.len(),
        2,
        "no new dead letter:\n{}",
        run.tail()
    );
    let replanned = run.events_named(
        "table changed under its plan (a column added, or a column's type or limits): planned \
         again; the batch is decoded again with it",
    );
    assert_eq!(replanned.len(), 2, "once per table:\n{}", run.tail());

    // The dead letters replayed into the running process land now.
    let replay = case.env.output(
        &["dlq", "replay", "--execute"],
        &[("SLUICE_SINKS_FILE", file.as_str())],
    );
    assert!(
        replay.status.success(),
        "{}{}",
        text(&replay.stdout),
        text(&replay.stderr)
    );
    for (topic, _, group) in &sinks {
        case.wait_committed(&mut run, group, &case.topic(topic))
            .await;
    }
    for (_, table, _) in &sinks {
        assert_eq!(
            case.rows(&format!(
                "SELECT id || ' ' || length(tag) || ' ' || n FROM {table} ORDER BY id"
            ))
            .await,
            ["1 20 1", "2 20 40000"],
            "{table}:\n{}",
            run.tail()
        );
    }
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(60)).success(),
        "{}",
        run.tail()
    );
    case.cleanup().await;
}
