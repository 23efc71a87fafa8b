//! The dead-letter counts migration 0021's triggers keep (the console's pipelines page reads
//! them instead of counting the dead letters on every load): on the real PostgreSQL, they
//! equal a count of `dead_letter_events` after every kind of change, and two writers of
//! different partitions never wait for each other on them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use chrono::{DateTime, Utc};
use sluice_core::{DeadLetter, DeadLetterKind, RecordCoords};
use sluice_postgres::migrate::migrate_up_to;
use sluice_postgres::repo::insert_dead_letters;
use sqlx::{Connection, PgConnection};
use std::sync::Arc;

const APPLICATIONS: &str = "apps_registry_application";

/// A dead letter of `topic`/`partition` at `offset`, going to `table`.
fn letter(
    topic: &str,
    partition: i32,
    offset: i64,
    kind: DeadLetterKind,
    table: Option<&Arc<str>>,
) -> DeadLetter {
    let coords = RecordCoords {
        topic: topic.into(),
        partition,
        offset,
    };
    let at = DateTime::<Utc>::from_timestamp_millis(1_700_000_000_000 + offset).unwrap();
    let letter = DeadLetter::new(coords, Some(b"k"), Some(b"{oops"), Some(at), kind, "bad");
    match table {
        Some(table) => letter.with_table(table),
        None => letter,
    }
}

/// `(topic, group, table, kind, n)`, sorted.
type Counts = Vec<(String, String, Option<String>, String, i64)>;

/// The kept counts (their tallies summed, zero sums left out) and a count of the dead
/// letters themselves.
async fn kept_and_counted(conn: &mut PgConnection) -> (Counts, Counts) {
    let kept = sqlx::query_as(
        "SELECT topic::text, consumer_group::text, NULLIF(target_table, ''), error_kind::text,
                sum(n)::bigint
         FROM dead_letter_counts GROUP BY 1, 2, 3, 4 HAVING sum(n) <> 0 ORDER BY 1, 2, 3, 4",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    let counted = sqlx::query_as(
        "SELECT topic::text, consumer_group::text, target_table, error_kind::text, count(*)
         FROM dead_letter_events GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    (kept, counted)
}

async fn assert_kept(conn: &mut PgConnection, after: &str) -> Counts {
    let (kept, counted) = kept_and_counted(conn).await;
    assert_eq!(kept, counted, "after {after}");
    let tallies = tallies(conn).await;
    println!(
        "after {after}: {} keys, {} dead letters, {tallies} tallies",
        kept.len(),
        kept.iter().map(|k| k.4).sum::<i64>()
    );
    kept
}

async fn tallies(conn: &mut PgConnection) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM dead_letter_counts")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// The stack, and a schema migrated up to the counts, with a connection to it.
async fn migrated() -> Option<(
    sluice_testkit::Stack,
    sluice_testkit::TestSchema,
    PgConnection,
)> {
    let stack = sluice_testkit::stack()?;
    let schema = sluice_testkit::TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    migrate_up_to(&mut conn, APPLICATIONS, 21).await.unwrap();
    Some((stack, schema, conn))
}

async fn insert(conn: &mut PgConnection, group: &str, letters: &[DeadLetter]) -> u64 {
    let mut tx = conn.begin().await.unwrap();
    let n = insert_dead_letters(&mut tx, group, letters).await.unwrap();
    tx.commit().await.unwrap();
    n
}

#[tokio::test]
async fn the_kept_counts_follow_every_change_of_the_dead_letters() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = sluice_testkit::TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    let orders: Arc<str> = "orders".into();
    let payments: Arc<str> = "shop.payments".into();

    // Dead letters recorded before the migration are counted by it.
    migrate_up_to(&mut conn, APPLICATIONS, 20).await.unwrap();
    let before: Vec<DeadLetter> = (0..5)
        .map(|o| letter("a", 0, o, DeadLetterKind::DecodeError, Some(&orders)))
        .chain((5..7).map(|o| letter("a", 1, o, DeadLetterKind::DecodeError, None)))
        .collect();
    assert_eq!(insert(&mut conn, "g", &before).await, 7);
    migrate_up_to(&mut conn, APPLICATIONS, 21).await.unwrap();
    let kept = assert_kept(&mut conn, "the migration").await;
    assert_eq!(kept.len(), 2);

    // A batch of many keys; its redelivery adds nothing.
    let batch: Vec<DeadLetter> = (10..40)
        .map(|o| {
            let kind = if o % 3 == 0 {
                DeadLetterKind::ConstraintViolation
            } else {
                DeadLetterKind::Unresolved("unknown_customer")
            };
            let table = [Some(&orders), Some(&payments), None][(o % 4 % 3) as usize];
            letter(["a", "b"][(o % 2) as usize], (o % 3) as i32, o, kind, table)
        })
        .collect();
    assert_eq!(insert(&mut conn, "g", &batch).await, 30);
    assert_eq!(insert(&mut conn, "g", &batch).await, 0, "redelivered");
    assert_eq!(
        insert(&mut conn, "other", &batch[..3]).await,
        0,
        "same identity"
    );
    assert_kept(&mut conn, "a batch and its redelivery").await;

    // A rolled-back batch, and a savepoint rolled back inside a committed one (the writer
    // isolates a failing row so).
    let mut tx = conn.begin().await.unwrap();
    let rolled = [letter("a", 0, 100, DeadLetterKind::DecodeError, None)];
    insert_dead_letters(&mut tx, "g", &rolled).await.unwrap();
    tx.rollback().await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    let mut savepoint = Connection::begin(&mut *tx).await.unwrap();
    insert_dead_letters(&mut savepoint, "g", &rolled)
        .await
        .unwrap();
    savepoint.rollback().await.unwrap();
    let kept_one = [letter("a", 0, 101, DeadLetterKind::DecodeError, None)];
    insert_dead_letters(&mut tx, "g", &kept_one).await.unwrap();
    tx.commit().await.unwrap();
    assert_kept(&mut conn, "rollbacks").await;

    // A replay's bookkeeping changes no key; moving rows to another table or kind does.
    sqlx::query(
        "UPDATE dead_letter_events SET replay_count = replay_count + 1, replayed_at = now()
         WHERE topic = 'a'",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE dead_letter_events SET target_table = 'archive', error_kind = 'decode_error'
         WHERE kafka_offset % 5 = 0",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    assert_kept(&mut conn, "updates").await;

    // An operator's delete from a session whose search_path is another migrated schema:
    // the tallies go beside the dead letters deleted, not into that schema's table.
    let doomed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM dead_letter_events WHERE partition = 1")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    let other = sluice_testkit::TestSchema::create(&stack).await;
    let mut operator = other.connect().await;
    migrate_up_to(&mut operator, APPLICATIONS, 21)
        .await
        .unwrap();
    sqlx::query(&format!(
        "DELETE FROM {}.dead_letter_events WHERE partition = 1",
        schema.name
    ))
    .execute(&mut operator)
    .await
    .unwrap();
    assert_eq!(
        tallies(&mut operator).await,
        0,
        "nothing counted in the other schema"
    );
    other.drop_schema().await;
    let kept = assert_kept(&mut conn, "a delete from another search_path").await;
    let left: i64 = kept.iter().map(|k| k.4).sum();
    assert_eq!(left, 38 - doomed, "{kept:?}");

    // Statement after statement of one dead letter each: the tallies are folded as they go,
    // and stay a few per key.
    for offset in 200..400 {
        let kind = [
            DeadLetterKind::DecodeError,
            DeadLetterKind::ConstraintViolation,
        ];
        let one = letter("a", 2, offset, kind[(offset % 2) as usize], Some(&orders));
        assert_eq!(insert(&mut conn, "g", &[one]).await, 1);
    }
    let kept = assert_kept(&mut conn, "200 statements of one dead letter").await;
    let most: i64 = sqlx::query_scalar(
        "SELECT max(tallies) FROM (SELECT count(*) AS tallies FROM dead_letter_counts
                                   GROUP BY topic, consumer_group, target_table, error_kind) AS k",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(most <= 16, "a key has {most} tallies");

    // Counts lost (a data-only restore, an edit with the triggers off) are counted again.
    sqlx::query("DELETE FROM dead_letter_counts WHERE n > 1")
        .execute(&mut conn)
        .await
        .unwrap();
    assert_ne!(kept_and_counted(&mut conn).await.0, kept);
    sqlx::query("SELECT dead_letter_counts_recount()")
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(assert_kept(&mut conn, "a recount").await, kept);

    sqlx::query("TRUNCATE dead_letter_events")
        .execute(&mut conn)
        .await
        .unwrap();
    let kept = assert_kept(&mut conn, "truncate").await;
    assert!(kept.is_empty());
    assert_eq!(tallies(&mut conn).await, 0);
    assert_eq!(insert(&mut conn, "g", &batch[..4]).await, 4);
    assert_kept(&mut conn, "inserts after the truncate").await;
    schema.drop_schema().await;
}

/// A writer's dead letters never wait on the counts, whatever another open transaction did
/// to the same table and kind: another writer's dead letters (of its own partition or,
/// setting a held row aside, of this one), an operator's delete or update, another writer's
/// fold of the tallies.
#[tokio::test]
async fn a_writer_never_waits_on_the_counts() {
    let Some((_, schema, mut conn)) = migrated().await else {
        return;
    };
    let orders: Arc<str> = "orders".into();
    let to_orders = |partition: i32, offsets: std::ops::Range<i64>| -> Vec<DeadLetter> {
        offsets
            .map(|o| {
                letter(
                    "t",
                    partition,
                    o,
                    DeadLetterKind::DecodeError,
                    Some(&orders),
                )
            })
            .collect()
    };
    insert(&mut conn, "g", &to_orders(0, 0..10)).await;
    let others = [
        "INSERT another partition's dead letters",
        "INSERT this partition's dead letters (a held row set aside)",
        "DELETE",
        "UPDATE target_table",
        "a fold of the tallies",
    ];
    for (round, other) in others.into_iter().enumerate() {
        let base = 1_000 * (round as i64 + 1);
        let mut first = schema.connect().await;
        let mut open = Connection::begin(&mut first).await.unwrap();
        match round {
            0 => {
                insert_dead_letters(&mut open, "g", &to_orders(1, base..base + 10))
                    .await
                    .unwrap();
            }
            1 => {
                insert_dead_letters(&mut open, "g", &to_orders(0, base..base + 10))
                    .await
                    .unwrap();
            }
            2 => {
                sqlx::query("DELETE FROM dead_letter_events WHERE kafka_offset = $1")
                    .bind(round as i64)
                    .execute(&mut *open)
                    .await
                    .unwrap();
            }
            3 => {
                sqlx::query(
                    "UPDATE dead_letter_events SET target_table = 'elsewhere'
                     WHERE kafka_offset = $1",
                )
                .bind(round as i64)
                .execute(&mut *open)
                .await
                .unwrap();
            }
            _ => {
                // Enough statements to fold: the open transaction holds the tallies it took.
                for o in base..base + 100 {
                    insert_dead_letters(&mut open, "g", &to_orders(1, o..o + 1))
                        .await
                        .unwrap();
                }
            }
        }
        let mut second = schema.connect().await;
        let mut writer = Connection::begin(&mut second).await.unwrap();
        sqlx::query("SET LOCAL lock_timeout = '1s'")
            .execute(&mut *writer)
            .await
            .unwrap();
        let written =
            insert_dead_letters(&mut writer, "g", &to_orders(0, base + 100..base + 110)).await;
        assert_eq!(
            written.unwrap_or_else(|e| panic!("the writer waited for {other}: {e}")),
            10
        );
        if round == 4 {
            // This writer's folds skip the tallies the open transaction holds, without waiting.
            for o in base + 200..base + 300 {
                let one = insert_dead_letters(&mut writer, "g", &to_orders(0, o..o + 1)).await;
                one.unwrap_or_else(|e| panic!("a fold waited for another: {e}"));
            }
        }
        writer.commit().await.unwrap();
        open.commit().await.unwrap();
        assert_kept(&mut conn, other).await;
    }

    // A writer under REPEATABLE READ whose snapshot predates another's folds only appends
    // (SKIP LOCKED would fail there on a tally folded since): no serialization failure.
    let mut second = schema.connect().await;
    let mut repeatable = Connection::begin(&mut second).await.unwrap();
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *repeatable)
        .await
        .unwrap();
    sqlx::query("SELECT count(*) FROM dead_letter_events")
        .execute(&mut *repeatable)
        .await
        .unwrap();
    for o in 9_000..9_040 {
        insert(&mut conn, "g", &to_orders(0, o..o + 1)).await;
    }
    for o in 9_100..9_140 {
        insert_dead_letters(&mut repeatable, "g", &to_orders(0, o..o + 1))
            .await
            .unwrap_or_else(|e| panic!("under REPEATABLE READ: {e}"));
    }
    repeatable.commit().await.unwrap();
    assert_kept(&mut conn, "a writer under REPEATABLE READ").await;
    schema.drop_schema().await;
}

/// A role that may write, replay and delete dead letters but has no right on the counts (a
/// console or operator role made before them) still does all three: the triggers count as
/// the tables' owner.
#[tokio::test]
async fn a_role_without_rights_on_the_counts_still_writes_replays_and_deletes() {
    let Some((stack, schema, mut conn)) = migrated().await else {
        return;
    };
    let (s, role) = (&schema.name, format!("{}_writer", schema.name));
    sqlx::raw_sql(&format!(
        "CREATE ROLE {role} NOLOGIN;
         GRANT USAGE ON SCHEMA {s} TO {role};
         GRANT SELECT, INSERT, UPDATE, DELETE ON {s}.dead_letter_events TO {role};
         GRANT USAGE ON SEQUENCE {s}.dead_letter_events_id_seq TO {role};"
    ))
    .execute(&mut conn)
    .await
    .unwrap();
    let mut limited = schema.connect().await;
    sqlx::query(&format!("SET ROLE {role}"))
        .execute(&mut limited)
        .await
        .unwrap();
    let refused = sqlx::query("SELECT count(*) FROM dead_letter_counts")
        .execute(&mut limited)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("permission denied"),
        "{refused}"
    );
    let letters: Vec<DeadLetter> = (0..5)
        .map(|o| letter("t", 0, o, DeadLetterKind::DecodeError, None))
        .collect();
    assert_eq!(insert(&mut limited, "g", &letters).await, 5);
    for statement in [
        "UPDATE dead_letter_events SET replay_count = replay_count + 1, replayed_at = now()
         WHERE kafka_offset = 1",
        "UPDATE dead_letter_events SET error_kind = 'constraint_violation' WHERE kafka_offset = 2",
        "DELETE FROM dead_letter_events WHERE kafka_offset = 3",
    ] {
        sqlx::query(statement)
            .execute(&mut limited)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    drop(limited);
    let kept = assert_kept(&mut conn, "a limited role's changes").await;
    assert_eq!(kept.iter().map(|k| k.4).sum::<i64>(), 4);
    schema.drop_schema().await;
    sqlx::query(&format!("DROP ROLE {role}"))
        .execute(&mut PgConnection::connect(&stack.database_url).await.unwrap())
        .await
        .unwrap();
}
