//! The capture spike against the stack's PostgreSQL: a source database with a table under
//! `REPLICA IDENTITY DEFAULT` and a publication, a slot made by the capture session (with an
//! exported snapshot), and every kind of change read back through the stream as the typed
//! model. Nothing is acknowledged until the test acknowledges; then the slot's confirmed
//! LSN moves to exactly that position. The slot and the database are dropped at the end,
//! also when the test fails.
//!
//! sluice-test: decodes-wal (it streams a slot, under deadlines):
//! `scripts/test-all` never runs this binary beside a `floods-wal` one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use sluice_capture::catalog::column_catalog;
use sluice_capture::debezium::{Envelope, EnvelopeSettings, Position, Snapshot, TableShape};
use sluice_capture::{
    CaptureEvent, CaptureStream, Cell, Change, Lsn, OldRow, Relation, ReplicaIdentity, Session,
    SlotSnapshot, SourceConfig,
};
use sqlx::Executor;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{Source, admin_url};

const TABLE: &str = "
CREATE TABLE public.items (
  id bigint PRIMARY KEY,
  title text DEFAULT 'untitled',
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

/// A new session's stream on the slot a stream just shut down: the server may not have ended
/// that stream's walsender yet, and says the slot is in use (55006), a transient error
/// `sluice capture` retries as well; so does this, for up to 10 s.
async fn start_again(config: &SourceConfig) -> CaptureStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let started = match Session::connect(config).await {
            Ok(session) => session.start().await,
            Err(error) => Err(error),
        };
        match started {
            Ok(stream) => return stream,
            Err(error)
                if error.disposition() == sluice_core::Disposition::Retry
                    && Instant::now() < deadline =>
            {
                println!("starting again: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("a new session on the slot: {error}"),
        }
    }
}

fn text(s: &str) -> Cell {
    Cell::Text(s.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decodes_every_change_and_confirms_only_what_is_acknowledged() {
    let Some(admin_url) = admin_url() else { return };
    let source = Source::create(&admin_url, TABLE).await;
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

    // What the Relation message lacks, from the catalog: NOT NULL, the constant default,
    // the primary key; the key schema Debezium writes from them.
    let catalog = column_catalog(&mut writer, items).await.unwrap();
    let described: Vec<_> = catalog
        .iter()
        .map(|c| (c.optional, c.default.as_deref(), c.primary_key))
        .collect();
    assert_eq!(
        described,
        [
            (false, None, true),
            (true, Some("\"untitled\""), false),
            (true, None, false),
            (true, None, false),
            (true, None, false)
        ]
    );
    let shape = TableShape::new("capture", items, &catalog);
    assert_eq!(shape.topic, "capture.public.items");
    assert_eq!(
        shape.key_schema,
        r#"{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],"optional":false,"name":"capture.public.items.Key"}"#
    );
    assert!(
        shape
            .envelope_schema
            .contains(r#"{"type":"string","optional":true,"default":"untitled","field":"title"}"#),
        "{}",
        shape.envelope_schema
    );

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

    // The live insert as its Debezium record (the fixtures' byte equality is the
    // envelope's unit test; here the decoded stream feeds it).
    let envelope = Envelope::new(EnvelopeSettings {
        prefix: "capture".into(),
        database: source.database.clone(),
        version: "test".into(),
        schemas: false,
        run_id: "run".into(),
    });
    let (insert_lsn, _) = &transactions[0].changes[0];
    let at = Position {
        commit_time: chrono::Utc::now(),
        xid: transactions[0].xid,
        lsn: *insert_lsn,
        last_commit_lsn: None,
        snapshot: Snapshot::False,
    };
    let records = envelope
        .records(&shape, changes[0], &at, chrono::Utc::now())
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].key.as_deref(), Some(&br#"{"id":2}"#[..]));
    let value = String::from_utf8(records[0].value.clone().unwrap()).unwrap();
    assert!(
        value.starts_with(
            r#"{"before":null,"after":{"id":2,"title":"inserted","amount":"72Y=","big":""#
        ),
        "{value}"
    );
    assert!(
        value.contains(r#""at":"2026-03-04T03:06:07.123456Z"},"source":"#),
        "{value}"
    );
    assert!(
        value.contains(&format!(r#""lsn":{},"xmin":null"#, insert_lsn.0)),
        "{value}"
    );

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
    let mut stream = start_again(&config).await;
    let (_, again) = read_transactions(&mut stream, 1).await;
    assert_eq!(again[0].commit_lsn, transactions[3].commit_lsn);
    assert!(matches!(again[0].changes[..], [(_, Change::Delete { .. })]));
    stream.shutdown().await.unwrap();
    drop(source);
}
