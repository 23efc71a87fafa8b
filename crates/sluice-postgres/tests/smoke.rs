//! Smoke test against the real PostgreSQL: transactions roll back and commit.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use sqlx::{Connection, Row};

#[tokio::test]
async fn rollback_then_commit() {
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = sluice_testkit::TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    let version: String = sqlx::query_scalar("SHOW server_version")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    println!("PostgreSQL {version}");
    let major: u32 = version.split('.').next().unwrap().parse().unwrap();
    assert!(major >= 15, "PostgreSQL 15+ required, got {version}");

    sqlx::query("CREATE TABLE smoke (id INT PRIMARY KEY)")
        .execute(&mut conn)
        .await
        .unwrap();
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("INSERT INTO smoke VALUES (1)")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    sqlx::query("INSERT INTO smoke VALUES (2)")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // A transaction dropped without commit rolls back too.
    {
        let mut tx = conn.begin().await.unwrap();
        sqlx::query("INSERT INTO smoke VALUES (3)")
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    let rows = sqlx::query("SELECT id FROM smoke ORDER BY id")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    let ids: Vec<i32> = rows.iter().map(|r| r.get("id")).collect();
    assert_eq!(ids, vec![2]);
    drop(conn);
    schema.drop_schema().await;
}

/// The claim keeps, with each offset it stores, the timestamp of the batch's last record (what
/// tells a topic created again from the one read); an older sluice's four-argument claim
/// during a rolling upgrade, and `sluice replay`, leave it unknown.
#[tokio::test]
async fn the_claim_keeps_the_last_records_stamp_with_the_offset() {
    use sluice_postgres::offsets::{Claimed, claim, restart_at_start, set_offsets};
    let Some(stack) = sluice_testkit::stack() else {
        return;
    };
    let schema = sluice_testkit::TestSchema::create(&stack).await;
    let mut conn = schema.connect().await;
    sluice_postgres::migrate::migrate_own(&mut conn)
        .await
        .unwrap();
    let claimed = |next: i64, last: Option<i64>| {
        vec![Claimed {
            topic: "t".into(),
            partition: 0,
            next,
            last_record_ms: last,
        }]
    };
    for (next, last, expected) in [
        (10, Some(111), (10, Some(111))),
        // A batch behind the stored offset (another owner's, applied already) changes nothing.
        (5, Some(55), (10, Some(111))),
        (20, Some(222), (20, Some(222))),
        (30, None, (30, None)),
        (40, Some(444), (40, Some(444))),
    ] {
        let mut tx = conn.begin().await.unwrap();
        claim(&mut tx, "g", &claimed(next, last)).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(stored(&mut conn).await, expected, "after a claim of {next}");
    }
    sqlx::query(
        "SELECT * FROM claim_consumer_offsets('g', ARRAY['t'], ARRAY[0], ARRAY[50::bigint])",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        stored(&mut conn).await,
        (50, None),
        "an older sluice's claim"
    );
    let mut tx = conn.begin().await.unwrap();
    claim(&mut tx, "g", &claimed(60, Some(666))).await.unwrap();
    tx.commit().await.unwrap();
    set_offsets(&mut conn, "g", &[("t".into(), 0, 7)])
        .await
        .unwrap();
    assert_eq!(stored(&mut conn).await, (7, None), "set by sluice replay");

    // A log found gone: moved to the new log's start, or deleted when that is not known; an
    // offset that moved meanwhile is left alone.
    let mut tx = conn.begin().await.unwrap();
    claim(&mut tx, "g", &claimed(70, Some(777))).await.unwrap();
    tx.commit().await.unwrap();
    restart_at_start(&mut conn, "g", &[("t".into(), 0, 69, Some(3))])
        .await
        .unwrap();
    assert_eq!(stored(&mut conn).await, (70, Some(777)), "moved meanwhile");
    restart_at_start(&mut conn, "g", &[("t".into(), 0, 70, Some(3))])
        .await
        .unwrap();
    assert_eq!(stored(&mut conn).await, (3, None), "at the new log's start");
    restart_at_start(&mut conn, "g", &[("t".into(), 0, 3, None)])
        .await
        .unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM consumer_offsets")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 0, "deleted when the start is not known");

    // Both in one call (one statement): partition 0 moved, partition 1 deleted, partition 2
    // (moved meanwhile) and another group's row left alone.
    let mut tx = conn.begin().await.unwrap();
    let three: Vec<Claimed> = [(0, 80), (1, 81), (2, 82)]
        .into_iter()
        .map(|(partition, next)| Claimed {
            topic: "t".into(),
            partition,
            next,
            last_record_ms: Some(1),
        })
        .collect();
    claim(&mut tx, "g", &three).await.unwrap();
    claim(&mut tx, "other", &three[..1]).await.unwrap();
    tx.commit().await.unwrap();
    restart_at_start(
        &mut conn,
        "g",
        &[
            ("t".into(), 0, 80, Some(4)),
            ("t".into(), 1, 81, None),
            ("t".into(), 2, 1, Some(4)),
        ],
    )
    .await
    .unwrap();
    let rows: Vec<(String, i32, i64, Option<i64>)> = sqlx::query_as(
        "SELECT consumer_group::text, partition, next_offset, last_record_ms \
         FROM consumer_offsets ORDER BY consumer_group, partition",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(
        rows,
        vec![
            ("g".into(), 0, 4, None),
            ("g".into(), 2, 82, Some(1)),
            ("other".into(), 0, 80, Some(1)),
        ]
    );
    drop(conn);
    schema.drop_schema().await;
}

/// The group `g`'s one stored offset and the stamp kept with it.
async fn stored(conn: &mut sqlx::PgConnection) -> (i64, Option<i64>) {
    sqlx::query_as(
        "SELECT next_offset, last_record_ms FROM consumer_offsets WHERE consumer_group = 'g'",
    )
    .fetch_one(conn)
    .await
    .unwrap()
}
