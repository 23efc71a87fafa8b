//! The capture spike against the stack's PostgreSQL: a source database with a table under
//! `REPLICA IDENTITY DEFAULT` and a publication, a slot made by the capture session (with an
//! exported snapshot), and every kind of change read back through the stream as the typed
//! model. Nothing is acknowledged until the test acknowledges; then the slot's confirmed
//! LSN moves to exactly that position. The slot and the database are dropped at the end,
//! also when the test fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use sluice_capture::{
    CaptureEvent, CaptureStream, Cell, Change, Lsn, OldRow, Relation, ReplicaIdentity, Session,
    SlotSnapshot, SourceConfig,
};
use sqlx::{Connection, Executor, PgConnection};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TABLE: &str = "
CREATE TABLE public.items (
  id bigint PRIMARY KEY,
  title text,
  amount numeric(12,2),
  big text,
  at timestamptz
);
ALTER TABLE public.items REPLICA IDENTITY DEFAULT;
-- 3,200 bytes that pglz does not compress: stored out of line (TOASTed)
CREATE FUNCTION big_text(seed text, n int) RETURNS text LANGUAGE sql AS
  $$ SELECT string_agg(md5(seed || i), '' ORDER BY i) FROM generate_series(1, n) i $$;
INSERT INTO items VALUES (1, 'before the slot', 1.00, 'small', NULL);
";

/// The test database URL, or `None` (skip) outside CI.
fn admin_url() -> Option<String> {
    match std::env::var("SLUICE_TEST_DATABASE_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!("CI=true but SLUICE_TEST_DATABASE_URL is not set: run `make test`")
        }
        Err(_) => {
            eprintln!("SKIPPED: no stack configured; run `make test` (it starts the stack)");
            None
        }
    }
}

/// `url` with its database replaced by `database` (query kept).
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let (server, _) = base.rsplit_once('/').expect("a database in the URL");
    match query {
        Some(query) => format!("{server}/{database}?{query}"),
        None => format!("{server}/{database}"),
    }
}

/// The source database and its slot. Dropping it (also while unwinding) drops the slot
/// (a leftover slot pins WAL for the whole cluster) and then the database.
struct Source {
    admin_url: String,
    url: String,
    database: String,
    slot: String,
    publication: String,
}

impl Source {
    async fn create(admin_url: &str) -> Source {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let database = format!("capture_{:x}{nanos:x}", std::process::id());
        let mut admin = PgConnection::connect(admin_url).await.unwrap();
        admin
            .execute(format!("CREATE DATABASE {database}").as_str())
            .await
            .unwrap();
        // Defaults unlike UTC and ISO, so the capture's own settings must be what counts.
        sqlx::raw_sql(&format!(
            "ALTER DATABASE {database} SET timezone = 'Asia/Kolkata'; \
             ALTER DATABASE {database} SET datestyle = 'SQL, DMY'"
        ))
        .execute(&mut admin)
        .await
        .unwrap();
        let source = Source {
            admin_url: admin_url.to_owned(),
            url: with_database(admin_url, &database),
            slot: format!("{database}_slot"),
            publication: format!("{database}_pub"),
            database,
        };
        let mut conn = source.connect().await;
        sqlx::raw_sql(TABLE).execute(&mut conn).await.unwrap();
        sqlx::raw_sql(&format!(
            "CREATE PUBLICATION {} FOR TABLE public.items",
            source.publication
        ))
        .execute(&mut conn)
        .await
        .unwrap();
        source
    }

    async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", self.url))
    }

    /// Each statement in its own transaction, as psql -c would.
    async fn run(&self, conn: &mut PgConnection, statements: &[&str]) {
        for statement in statements {
            sqlx::raw_sql(statement)
                .execute(&mut *conn)
                .await
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
        }
    }

    async fn confirmed_flush(&self) -> Lsn {
        let mut conn = self.connect().await;
        let text: String = sqlx::query_scalar(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
        )
        .bind(&self.slot)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        text.parse().unwrap()
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        let (admin_url, slot, database) = (
            self.admin_url.clone(),
            self.slot.clone(),
            self.database.clone(),
        );
        // A runtime of its own: the test's may be the one unwinding.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let mut admin = PgConnection::connect(&admin_url).await.unwrap();
                // The walsender may still hold the slot for a moment after the session ended.
                let deadline = Instant::now() + Duration::from_secs(30);
                loop {
                    let dropped = sqlx::query(
                        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots \
                         WHERE slot_name = $1 AND active",
                    )
                    .bind(&slot)
                    .execute(&mut admin)
                    .await
                    .and(
                        sqlx::query(
                            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots \
                             WHERE slot_name = $1",
                        )
                        .bind(&slot)
                        .execute(&mut admin)
                        .await,
                    );
                    if dropped.is_ok() || Instant::now() > deadline {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                let left: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1",
                )
                .bind(&slot)
                .fetch_one(&mut admin)
                .await
                .unwrap();
                if left != 0 {
                    eprintln!("replication slot {slot} could not be dropped");
                }
                admin
                    .execute(format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)").as_str())
                    .await
                    .unwrap();
            });
        });
        if cleanup.join().is_err() {
            eprintln!("cleanup of {} failed", self.database);
        }
    }
}

/// One decoded transaction.
#[derive(Debug)]
struct Transaction {
    xid: u32,
    final_lsn: Lsn,
    commit_lsn: Lsn,
    end_lsn: Lsn,
    changes: Vec<(Lsn, Change)>,
    messages: Vec<(bool, String, Vec<u8>)>,
}

/// Reads until `count` transactions committed; Relation messages are collected apart.
async fn read_transactions(
    stream: &mut CaptureStream,
    count: usize,
) -> (Vec<Arc<Relation>>, Vec<Transaction>) {
    let mut relations = Vec::new();
    let mut done = Vec::new();
    let mut open: Option<Transaction> = None;
    while done.len() < count {
        let event = tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("no event within 60 s")
            .expect("the stream failed")
            .expect("the stream ended");
        match event {
            CaptureEvent::Begin {
                xid,
                final_lsn,
                commit_time,
            } => {
                let age = chrono::Utc::now() - commit_time;
                assert!(age.num_seconds().abs() < 120, "commit time {commit_time}");
                assert!(open.is_none(), "Begin inside a transaction");
                open = Some(Transaction {
                    xid,
                    final_lsn,
                    commit_lsn: Lsn::ZERO,
                    end_lsn: Lsn::ZERO,
                    changes: Vec::new(),
                    messages: Vec::new(),
                });
            }
            CaptureEvent::Relation(relation) => relations.push(relation),
            CaptureEvent::Change { lsn, change } => {
                open.as_mut()
                    .expect("a change outside a transaction")
                    .changes
                    .push((lsn, change));
            }
            CaptureEvent::Message {
                transactional,
                prefix,
                content,
                ..
            } => {
                open.as_mut()
                    .expect("a transactional message outside its transaction")
                    .messages
                    .push((transactional, prefix, content));
            }
            CaptureEvent::Commit {
                commit_lsn,
                end_lsn,
                ..
            } => {
                let mut transaction = open.take().expect("Commit without Begin");
                transaction.commit_lsn = commit_lsn;
                transaction.end_lsn = end_lsn;
                done.push(transaction);
            }
            CaptureEvent::KeepAlive { .. } => {}
        }
    }
    (relations, done)
}

fn text(s: &str) -> Cell {
    Cell::Text(s.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decodes_every_change_and_confirms_only_what_is_acknowledged() {
    let Some(admin_url) = admin_url() else { return };
    let source = Source::create(&admin_url).await;
    let config = SourceConfig::from_url(&source.url, &source.slot, &source.publication)
        .unwrap()
        .with_status_interval(Duration::from_millis(100));

    // The slot, with a snapshot exported at its consistent point: a transaction that
    // imports it sees row 1 (written before) and nothing written after.
    let mut session = Session::connect(&config).await.unwrap();
    let slot = session
        .create_slot(false, SlotSnapshot::Export)
        .await
        .unwrap();
    assert_eq!(slot.name, source.slot);
    let exported = slot.snapshot.clone().expect("an exported snapshot");
    let mut snapshot = source.connect().await;
    snapshot
        .execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await
        .unwrap();
    snapshot
        .execute(format!("SET TRANSACTION SNAPSHOT '{exported}'").as_str())
        .await
        .unwrap();
    let mut stream = session.start().await.unwrap();

    let mut writer = source.connect().await;
    source
        .run(
            &mut writer,
            &[
                "INSERT INTO items VALUES (2, 'inserted', -42.50, big_text('two', 100), \
                 '2026-03-04 05:06:07.123456+02')",
                "UPDATE items SET title = 'updated, big untouched', amount = 0.05 WHERE id = 2",
                "UPDATE items SET id = 3, title = 'key changed 2 -> 3' WHERE id = 2",
                "DELETE FROM items WHERE id = 3",
                "BEGIN; SELECT pg_logical_emit_message(true, 'sluice.outbox', 'hello'); \
                 INSERT INTO items VALUES (4, NULL, NULL, NULL, NULL); COMMIT",
            ],
        )
        .await;
    let in_snapshot: Vec<i64> = sqlx::query_scalar("SELECT id FROM items ORDER BY id")
        .fetch_all(&mut snapshot)
        .await
        .unwrap();
    assert_eq!(
        in_snapshot,
        [1],
        "the exported snapshot is the slot's start"
    );
    snapshot.execute("COMMIT").await.unwrap();
    // After the snapshot's reader: TRUNCATE is not MVCC-safe, an older snapshot would see
    // the table empty (docs/capture.md#snapshot).
    source.run(&mut writer, &["TRUNCATE items"]).await;

    let (relations, transactions) = read_transactions(&mut stream, 6).await;

    // The table as the Relation message describes it: sent before its first change, and
    // again after an invalidation of its cache entry (the TRUNCATE here), unchanged.
    let items = relations.first().expect("a Relation message");
    assert!(relations.iter().all(|r| r == items), "{relations:?}");
    assert_eq!(
        (items.schema.as_str(), items.table.as_str()),
        ("public", "items")
    );
    assert_eq!(items.replica_identity, ReplicaIdentity::Default);
    let columns: Vec<_> = items
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.type_oid, c.type_modifier, c.is_key))
        .collect();
    // numeric(12,2): typmod ((12 << 16) | 2) + 4
    assert_eq!(
        columns,
        [
            ("id", 20, -1, true),
            ("title", 25, -1, false),
            ("amount", 1700, (12 << 16 | 2) + 4, false),
            ("big", 25, -1, false),
            ("at", 1184, -1, false)
        ]
    );
    let table_oid: i64 = sqlx::query_scalar("SELECT 'public.items'::regclass::oid::bigint")
        .fetch_one(&mut writer)
        .await
        .unwrap();
    assert_eq!(i64::from(items.oid), table_oid);

    // Transactions in commit order, each change inside its transaction's WAL range.
    let mut previous_end = slot.consistent_point;
    for t in &transactions {
        assert_eq!(t.final_lsn, t.commit_lsn, "Begin names its commit record");
        assert!(t.end_lsn > t.commit_lsn && t.commit_lsn >= previous_end);
        for (lsn, _) in &t.changes {
            assert!(
                *lsn >= previous_end && *lsn < t.commit_lsn,
                "{lsn} in {t:?}"
            );
        }
        assert!(t.xid > 0);
        previous_end = t.end_lsn;
    }
    let changes: Vec<&Change> = transactions
        .iter()
        .flat_map(|t| t.changes.iter().map(|(_, c)| c))
        .collect();
    let Change::Insert { new, relation } = changes[0] else {
        panic!("insert expected: {:?}", changes[0])
    };
    assert!(Arc::ptr_eq(relation, items));
    assert_eq!(new[..3], [text("2"), text("inserted"), text("-42.50")]);
    match &new[3] {
        Cell::Text(value) => assert_eq!(value.len(), 3_200, "big_text('two', 100)"),
        other => panic!("big in full expected: {other:?}"),
    }
    // In UTC and ISO form whatever the server's TimeZone and DateStyle.
    assert_eq!(new[4], text("2026-03-04 03:06:07.123456+00"));

    // The TOASTed value the update left alone is not sent: the marker Debezium turns
    // into __debezium_unavailable_value.
    assert_eq!(
        *changes[1],
        Change::Update {
            relation: items.clone(),
            old: None,
            new: vec![
                text("2"),
                text("updated, big untouched"),
                text("0.05"),
                Cell::UnchangedToast,
                text("2026-03-04 03:06:07.123456+00")
            ],
        }
    );
    // A key change carries the old key (the other columns null), the new row keeps the
    // marker.
    assert_eq!(
        *changes[2],
        Change::Update {
            relation: items.clone(),
            old: Some(OldRow::Key(vec![
                text("2"),
                Cell::Null,
                Cell::Null,
                Cell::Null,
                Cell::Null
            ])),
            new: vec![
                text("3"),
                text("key changed 2 -> 3"),
                text("0.05"),
                Cell::UnchangedToast,
                text("2026-03-04 03:06:07.123456+00")
            ],
        }
    );
    assert_eq!(
        *changes[3],
        Change::Delete {
            relation: items.clone(),
            old: OldRow::Key(vec![
                text("3"),
                Cell::Null,
                Cell::Null,
                Cell::Null,
                Cell::Null
            ]),
        }
    );
    assert_eq!(
        transactions[4].messages,
        [(true, "sluice.outbox".to_owned(), b"hello".to_vec())]
    );
    assert_eq!(
        *changes[4],
        Change::Insert {
            relation: items.clone(),
            new: vec![text("4"), Cell::Null, Cell::Null, Cell::Null, Cell::Null],
        }
    );
    assert_eq!(
        *changes[5],
        Change::Truncate {
            relations: vec![items.clone()],
            cascade: false,
            restart_identity: false,
        }
    );
    assert_eq!(changes.len(), 6);

    // Read is not confirmed: the slot is still where it started.
    assert_eq!(source.confirmed_flush().await, slot.consistent_point);
    // Acknowledge the third transaction: the slot moves to exactly its end.
    let acknowledged = transactions[2].end_lsn;
    stream.acknowledge(acknowledged);
    // The status update that carries it would carry any position the stream had
    // confirmed on its own (they only grow), so "exactly" proves there was none.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let confirmed = source.confirmed_flush().await;
        if confirmed >= acknowledged {
            assert_eq!(
                confirmed, acknowledged,
                "the slot confirmed more than was acknowledged"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "confirmed_flush_lsn {confirmed} did not reach {acknowledged} in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stream.shutdown().await.unwrap();

    // A new session resumes after what was acknowledged: the delete comes again, the
    // acknowledged transactions do not.
    let session = Session::connect(&config).await.unwrap();
    let mut stream = session.start().await.unwrap();
    let (_, again) = read_transactions(&mut stream, 1).await;
    assert_eq!(again[0].commit_lsn, transactions[3].commit_lsn);
    assert!(matches!(again[0].changes[..], [(_, Change::Delete { .. })]));
    stream.shutdown().await.unwrap();
    drop(source);
}
