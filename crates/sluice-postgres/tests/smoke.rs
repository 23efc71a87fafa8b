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
