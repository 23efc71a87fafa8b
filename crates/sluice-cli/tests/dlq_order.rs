//! `sluice dlq replay` re-publishes dead letters in the order their records had
//! (docs/operations.md): two changes of one key, both dead letters, replayed, land in their
//! order, so the key ends with the later one — not the earlier one on top of it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::json;
use support::case::{Case, text};

const DDL: &str = "CREATE TABLE items (id BIGINT PRIMARY KEY, v TEXT, \
    w TEXT CHECK (w LIKE 'ok%'));";

/// Batches of one: each record is its own dead letter (in a batch, a key's later record
/// would supersede its earlier one).
const MAPPING: &str = r#"
[[sink]]
name = "items"
topic = "{prefix}-items"
table = "items"
key = ["id"]
batch_size = 1

[sink.columns]
id = { field = "id" }
v = { field = "v" }
w = { field = "w" }
"#;

#[tokio::test]
async fn dlq_replay_republishes_a_keys_dead_letters_in_their_order() {
    let Some(case) = Case::new(&["items"], DDL, MAPPING).await else {
        return;
    };
    // Key 1 changes three times, key 2 twice; every change is refused by the CHECK on `w`.
    let changes = [
        json!({"id": 1, "v": "first", "w": "no"}),
        json!({"id": 2, "v": "first", "w": "no"}),
        json!({"id": 1, "v": "second", "w": "no"}),
        json!({"id": 1, "v": "third", "w": "no"}),
        json!({"id": 2, "v": "second", "w": "no"}),
    ];
    case.produce("items", &changes).await;
    case.run_to_end("refused").await;
    let dead = case.dead_letters().await;
    assert_eq!(dead.len(), 5, "{dead:?}");
    assert!(
        dead.iter().all(|d| d.2 == "constraint_violation"),
        "{dead:?}"
    );

    // The constraint lifted, the dead letters replayed and applied.
    {
        let mut conn = case.env.schema.connect().await;
        sqlx::raw_sql("ALTER TABLE items DROP CONSTRAINT items_w_check")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let file = case.file.display().to_string();
    let replay = case.env.output(
        &["dlq", "replay", "--pipeline", "items", "--execute"],
        &[("SLUICE_SINKS_FILE", file.as_str())],
    );
    assert!(
        replay.status.success(),
        "{}{}",
        text(&replay.stdout),
        text(&replay.stderr)
    );
    case.run_to_end("replayed").await;
    assert_eq!(
        case.rows("SELECT id || ' ' || v FROM items ORDER BY id")
            .await,
        ["1 third", "2 second"],
        "each key ends with its last change; replay output:\n{}",
        text(&replay.stdout)
    );
    case.cleanup().await;
}

/// A replay takes the rows not yet replayed: rows it replayed before (whose copies failed
/// again) do not fill its `--limit` and keep it from the rest.
#[tokio::test]
async fn dlq_replay_moves_past_the_rows_it_already_replayed() {
    let Some(case) = Case::new(&["items"], DDL, MAPPING).await else {
        return;
    };
    let changes: Vec<serde_json::Value> = (1..=4)
        .map(|id| json!({"id": id, "v": "first", "w": "no"}))
        .collect();
    case.produce("items", &changes).await;
    case.run_to_end("refused").await;
    assert_eq!(case.dead_letters().await.len(), 4);
    let file = case.file.display().to_string();
    let vars = [("SLUICE_SINKS_FILE", file.as_str())];
    let replay = || {
        case.env.output(
            &[
                "dlq",
                "replay",
                "--pipeline",
                "items",
                "--limit",
                "2",
                "--execute",
            ],
            &vars,
        )
    };
    // The CHECK still refuses them: the two copies become dead letters of their own.
    let first = replay();
    assert!(first.status.success(), "{}", text(&first.stderr));
    case.run_to_end("refused again").await;
    assert_eq!(case.dead_letters().await.len(), 6);
    // The next replay takes the two rows never replayed (ids 3 and 4), not the two it took.
    let second = replay();
    let out = text(&second.stdout);
    assert!(second.status.success(), "{out}{}", text(&second.stderr));
    assert_eq!(out.matches("re-published").count(), 2, "{out}");
    assert!(!out.contains("refused"), "{out}");
    let ids: Vec<i64> = {
        let mut conn = case.env.schema.connect().await;
        sqlx::query_scalar(
            "SELECT (convert_from(payload, 'UTF8')::jsonb ->> 'id')::bigint \
             FROM dead_letter_events WHERE replayed_at IS NOT NULL ORDER BY 1",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap()
    };
    assert_eq!(ids, [1, 2, 3, 4], "each original replayed once");
    // The four originals (replayed: done) are left out; their four copies (each at the limit
    // of `--max-replays 1`) are left out and counted, not refused one by one.
    case.run_to_end("refused a third time").await;
    let capped = case.env.output(
        &[
            "dlq",
            "replay",
            "--pipeline",
            "items",
            "--max-replays",
            "1",
            "--execute",
        ],
        &vars,
    );
    let said = text(&capped.stderr);
    assert_eq!(capped.status.code(), Some(1), "{said}");
    assert!(
        said.contains("4 dead letter(s) matching the filter, never replayed, cannot be replayed"),
        "{said}"
    );
    case.cleanup().await;
}

/// Once every dead letter was replayed and landed, a replay finds nothing to do: exit 0,
/// whatever the history (a cron job's replay does not start failing).
#[tokio::test]
async fn dlq_replay_with_everything_replayed_has_nothing_to_do() {
    let Some(case) = Case::new(&["items"], DDL, MAPPING).await else {
        return;
    };
    case.produce("items", &[json!({"id": 1, "v": "first", "w": "no"})])
        .await;
    case.run_to_end("refused").await;
    {
        let mut conn = case.env.schema.connect().await;
        sqlx::raw_sql("ALTER TABLE items DROP CONSTRAINT items_w_check")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let file = case.file.display().to_string();
    let vars = [("SLUICE_SINKS_FILE", file.as_str())];
    let replay = || {
        case.env.output(
            &["dlq", "replay", "--pipeline", "items", "--execute"],
            &vars,
        )
    };
    let first = replay();
    assert!(first.status.success(), "{}", text(&first.stderr));
    case.run_to_end("landed").await;
    let again = replay();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("no dead letter to replay matches"),
        "{}",
        text(&again.stdout)
    );
    case.cleanup().await;
}
