//! A sink of many tables run by the `sluice` binary against the real Kafka and PostgreSQL
//! (docs/sinks.md#many-tables): one sink reads three topics by a pattern and writes each
//! into the table its name's capture names, columns from each table (`columns = "auto"`).
//! A table that does not exist dead-letters its records as `unknown_table` while the other
//! tables go on; once created, the next records land and `sluice dlq replay --kind
//! unknown_table --table raw_items` brings back the ones before. A table dropped while the
//! sink runs makes its next records dead letters too; nothing stops.
//!
//! Each dead letter names the table its record was going to (issue 45, item 5):
//! `sluice dlq list --table` lists one table's, and the console's pipelines page counts a
//! pipeline's dead letters by table and kind, its list filters by table.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::case::{Case, text};
use support::console::Console;

const DDL: &str = "
CREATE TABLE raw_orders (id BIGINT PRIMARY KEY, total NUMERIC(10, 2), note TEXT);
CREATE TABLE raw_users (id BIGINT PRIMARY KEY, name TEXT NOT NULL);";

const MAPPING: &str = r#"
[[sink]]
name = "raw"
topic_pattern = "{prefix}-src-(orders|users|items)"
table = "raw_{1}"
columns = "auto"
"#;

/// Waits until the sink's group has committed every record of `topics`.
async fn committed(case: &Case, run: &mut support::Running, topics: &[&str]) {
    let group = case.env.group("raw");
    for topic in topics {
        case.wait_committed(run, &group, &case.topic(topic)).await;
    }
}

#[tokio::test]
async fn one_sink_writes_the_table_each_topic_names_and_waits_for_a_missing_one() {
    let topics = ["src-orders", "src-users", "src-items"];
    let Some(case) = Case::new(&topics, DDL, MAPPING).await else {
        return;
    };
    let plan = case.assert_valid();
    assert!(
        plan.contains("tables: named by each record (raw_{1})"),
        "{plan}"
    );
    let orders: Vec<Value> = (1..=3)
        .map(|id| json!({"id": id, "total": id * 10, "note": format!("o{id}")}))
        .collect();
    case.produce("src-orders", &orders).await;
    case.produce(
        "src-users",
        &[json!({"id": 1, "name": "ann", "age": 40}), json!({"id": 2})],
    )
    .await;
    case.produce("src-items", &[json!({"id": 7}), json!({"id": 8})])
        .await;
    let file = case.file.display().to_string();
    let mut run = case
        .env
        .spawn_run("many", &[("SLUICE_SINKS_FILE", file.as_str())]);
    committed(&case, &mut run, &topics).await;
    assert_eq!(
        case.rows("SELECT id || ' ' || total || ' ' || note FROM raw_orders ORDER BY id")
            .await,
        ["1 10.00 o1", "2 20.00 o2", "3 30.00 o3"]
    );
    assert_eq!(
        case.rows("SELECT id || ' ' || name FROM raw_users").await,
        ["1 ann"]
    );
    let dead = case.dead_letters().await;
    let kinds: Vec<(&str, &str)> = dead
        .iter()
        .map(|(topic, _, kind, _)| (topic.rsplit('-').next().unwrap_or(""), kind.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("items", "unknown_table"),
            ("items", "unknown_table"),
            ("users", "decode_error")
        ],
        "{dead:?}"
    );
    assert!(
        dead[0].3.contains("table `raw_items` does not exist"),
        "{dead:?}"
    );
    dead_letters_by_table(&case, &file);

    // The table created: after the wait the sink looks it up again; a new record lands.
    {
        let mut conn = case.env.schema.connect().await;
        sqlx::raw_sql("CREATE TABLE raw_items (id BIGINT PRIMARY KEY)")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(11)).await;
    case.produce("src-items", &[json!({"id": 9})]).await;
    committed(&case, &mut run, &["src-items"]).await;
    assert_eq!(case.rows("SELECT id::text FROM raw_items").await, ["9"]);

    // The records that came before: replayed from the dead-letter table, that table's only.
    let replay = case.env.output(
        &[
            "dlq",
            "replay",
            "--kind",
            "unknown_table",
            "--table",
            "raw_items",
            "--execute",
        ],
        &[("SLUICE_SINKS_FILE", file.as_str())],
    );
    assert!(
        replay.status.success(),
        "{}{}",
        text(&replay.stdout),
        text(&replay.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ids = case
            .rows("SELECT id::text FROM raw_items ORDER BY id")
            .await;
        if ids.len() == 3 {
            assert_eq!(ids, ["7", "8", "9"]);
            break;
        }
        assert!(Instant::now() < deadline, "{ids:?}\n{}", run.tail());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // A table dropped while the sink runs: its next record is a dead letter, the other
    // tables go on, the process keeps running.
    {
        let mut conn = case.env.schema.connect().await;
        sqlx::raw_sql("DROP TABLE raw_users")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    case.produce("src-users", &[json!({"id": 3, "name": "cy"})])
        .await;
    case.produce("src-orders", &[json!({"id": 4, "total": 40})])
        .await;
    committed(&case, &mut run, &["src-users", "src-orders"]).await;
    assert_eq!(
        case.rows("SELECT id::text FROM raw_orders WHERE id = 4")
            .await,
        ["4"]
    );
    let dead = case.dead_letters().await;
    assert!(
        dead.iter()
            .any(|d| d.2 == "unknown_table" && d.3.contains("`raw_users` does not exist")),
        "{dead:?}"
    );
    // A column added while the sink runs: no statement fails and no record is refused, yet
    // within half a minute (the catalog is read again for a `columns = "auto"` table) its
    // field is written.
    {
        let mut conn = case.env.schema.connect().await;
        sqlx::raw_sql("ALTER TABLE raw_orders ADD COLUMN extra INT DEFAULT 7")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut id = 100;
    loop {
        id += 1;
        case.produce("src-orders", &[json!({"id": id, "total": 1, "extra": id})])
            .await;
        committed(&case, &mut run, &["src-orders"]).await;
        let extra = case
            .rows(&format!(
                "SELECT extra::text FROM raw_orders WHERE id = {id}"
            ))
            .await;
        if extra == [id.to_string()] {
            break;
        }
        assert_eq!(extra, ["7"], "before the new plan: the default");
        assert!(Instant::now() < deadline, "never written\n{}", run.tail());
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(60)).success(),
        "{}",
        run.tail()
    );
    // `sluice verify` reads the pattern's topics from the cluster and counts no template as a
    // table (it failed on `relation "raw_{1}" does not exist`, and checked no topic): first
    // the topics' one partition against its rule of three, then, grown, every step.
    let sinks = [("SLUICE_SINKS_FILE", file.as_str())];
    let one = case.env.output(&["verify"], &sinks);
    let said = text(&one.stderr);
    assert!(
        !one.status.success()
            && said.contains("has 1 partitions")
            && topics.iter().any(|t| said.contains(&case.topic(t))),
        "{said}"
    );
    for topic in topics {
        case.env
            .admin()
            .grow_topic(&case.topic(topic), 3)
            .await
            .unwrap();
    }
    let verified = case.env.output(&["verify"], &sinks);
    let said = format!("{}{}", text(&verified.stdout), text(&verified.stderr));
    assert!(verified.status.success(), "{said}");
    for topic in topics {
        assert!(
            said.contains(&format!("{} (3)", case.topic(topic))),
            "{said}"
        );
    }
    assert!(!said.contains("raw_{1}"), "{said}");
    case.cleanup().await;
}

/// The dead letters so far (two `unknown_table` of raw_items, one `decode_error` of
/// raw_users) as `sluice dlq list --table` and the console show them.
fn dead_letters_by_table(case: &Case, file: &str) {
    let sinks = [("SLUICE_SINKS_FILE", file)];
    let list = |args: &[&str]| {
        let out = case.env.output(args, &sinks);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let listed: Vec<Value> =
        serde_json::from_str(&list(&["dlq", "list", "--table", "raw_items", "--json"])).unwrap();
    let shown: Vec<(&str, &str)> = listed
        .iter()
        .map(|d| {
            (
                d["table"].as_str().unwrap(),
                d["error_kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("raw_items", "unknown_table"),
            ("raw_items", "unknown_table")
        ],
        "{listed:?}"
    );
    let users = list(&["dlq", "list", "--pipeline", "raw", "--table", "raw_users"]);
    println!("sluice dlq list --table raw_users:\n{users}");
    assert!(users.lines().next().unwrap().contains(" table "), "{users}");
    assert!(
        users.contains(" raw_users ") && users.contains("decode_error"),
        "{users}"
    );
    assert!(users.ends_with("1 row(s)\n"), "{users}");

    // The console: the pipelines page counts the sink's dead letters by table and kind; the
    // list filters by table and shows it.
    let console = Console::start_with(&case.env, "console", None, &sinks);
    let (status, page) = console.get("/pipelines");
    assert_eq!(status, 200, "{page}");
    let by_table: Vec<String> = page
        .split("<tr><td class=\"table\">")
        .skip(1)
        .map(|row| {
            let cells: Vec<String> = row.split("</td>").take(3).map(without_tags).collect();
            cells.join(" ")
        })
        .collect();
    println!("console pipelines page, dead letters by table: {by_table:?}");
    assert_eq!(
        by_table,
        ["raw_items unknown_table 2", "raw_users decode_error 1"],
        "{page}"
    );
    let (status, page) = console.get("/dead-letters?pipeline=raw&table=raw_items");
    assert_eq!(status, 200, "{page}");
    let tables: Vec<&str> = page
        .split("<td class=\"table\">")
        .skip(1)
        .filter_map(|cell| cell.split('<').next())
        .collect();
    assert_eq!(tables, ["raw_items", "raw_items"], "{page}");
    assert!(
        page.contains("<option value=\"raw_items\" selected>"),
        "the filter shows its table: {page}"
    );
}

/// An HTML fragment's text: its tags left out.
fn without_tags(html: &str) -> String {
    let mut text = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.trim().to_owned()
}
