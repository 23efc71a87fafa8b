//! The Debezium tests' source databases: SQL through the stack script's `psql`, their
//! publication made, and a replication slot dropped once its walsender let go of it.

use std::process::Command;
use std::time::{Duration, Instant};

/// Runs `sql` on `url` through the stack script's `psql`; its output, trimmed.
pub fn psql(stack_script: &str, url: &str, sql: &str) -> String {
    let out = Command::new(stack_script)
        .args(["psql", url, "-XAtq", "-c", sql])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Drops `slot`, ending its walsender first. The walsender notices the closed connection at
/// once; until then the slot is active and cannot be dropped: tried for up to 30 s.
pub fn drop_slot(stack_script: &str, url: &str, slot: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = psql(
            stack_script,
            url,
            &format!("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '{slot}'"),
        );
        if left == "0" {
            return;
        }
        psql(
            stack_script,
            url,
            &format!(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
                 WHERE slot_name = '{slot}' AND active; \
                 SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                 WHERE slot_name = '{slot}' AND NOT active"
            ),
        );
        if Instant::now() > deadline {
            eprintln!("replication slot {slot} could not be dropped");
            return;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until `slot` is active (its consumer streams), at most `timeout`. `alive` panics
/// when the slot's consumer has died and returns its log's tail, which a timeout shows.
///
/// A slot being created is active already, with no confirmed position until it reaches a
/// consistent point, which waits for every transaction running on the server to end (another
/// test's open transaction, say): it counts as active only once it has that position.
pub async fn wait_active(
    conn: &mut sqlx::PgConnection,
    slot: &str,
    timeout: Duration,
    mut alive: impl FnMut() -> String,
) {
    let deadline = Instant::now() + timeout;
    loop {
        let tail = alive();
        let active: Option<bool> = sqlx::query_scalar(
            "SELECT active AND confirmed_flush_lsn IS NOT NULL FROM pg_replication_slots \
             WHERE slot_name = $1",
        )
        .bind(slot)
        .fetch_optional(&mut *conn)
        .await
        .unwrap();
        if active == Some(true) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "replication slot {slot} not active after {timeout:?}:\n{tail}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `CREATE PUBLICATION <publication> FOR TABLE <tables>` on `conn`: `tables` is the list, with
/// any row filter or `WITH (…)` after it.
pub async fn publish(conn: &mut sqlx::PgConnection, publication: &str, tables: &str) {
    sqlx::raw_sql(&format!(
        "CREATE PUBLICATION {publication} FOR TABLE {tables}"
    ))
    .execute(conn)
    .await
    .unwrap_or_else(|e| panic!("CREATE PUBLICATION {publication} FOR TABLE {tables}: {e}"));
}
