//! Every move out of DISPATCHING compares the claim it acts on, shown with crafted state on
//! the real stack (a second connection plays the other actor; no sleeps that happen to line
//! up): two recoveries that listed the same stale row, a slow dispatcher's late marks after
//! its claim was requeued and re-claimed, and per-key order when a key's first publish fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::kafka::{read_topic, settings};
use common::{setup, status_of, teardown};
use serde_json::json;
use sluice_dispatch::publish::record_headers;
use sluice_dispatch::recovery::{
    RecoveryLimits, RecoveryReport, list_stale, recover_stale, settle_stale,
};
use sluice_dispatch::store::claim::{ClaimLimit, ClaimedEvent, claim_batch, claim_batch_as};
use sluice_dispatch::store::failure::{
    FailedPublishOutcome, mark_publish_failed, requeue_without_attempt,
};
use sluice_dispatch::store::settle::{Settled, settle_published};
use sluice_dispatch::{Dispatcher, Failpoint};
use sluice_kafka::ResilientProducer;
use sluice_kafka::producer::Outgoing;
use sluice_outbox::{NewEvent, OutboxStatus, enqueue};
use sqlx::PgConnection;
use std::time::{Duration, Instant};
use uuid::Uuid;

fn kafka(stack: &sluice_testkit::Stack) -> sluice_core::KafkaClientSettings {
    sluice_core::KafkaClientSettings::new(&stack.bootstrap)
}
const STALE: Duration = Duration::from_secs(60);

/// Moves the claim time of every DISPATCHING row 5 minutes back: the claim is stale.
async fn age_claims(conn: &mut PgConnection) {
    sqlx::query(
        "UPDATE outbox_events SET claimed_at = now() - interval '5 minutes'
         WHERE status = 'DISPATCHING'",
    )
    .execute(conn)
    .await
    .unwrap();
}

/// (status, claim_id, published_offset) of a row.
async fn row(conn: &mut PgConnection, id: Uuid) -> (String, Option<Uuid>, Option<i64>) {
    sqlx::query_as("SELECT status, claim_id, published_offset FROM outbox_events WHERE id = $1")
        .bind(id)
        .fetch_one(conn)
        .await
        .unwrap()
}

/// Publishes a claimed event's record as a dispatcher would; returns its offset.
async fn publish(producer: &ResilientProducer, event: &ClaimedEvent) -> (i32, i64) {
    let headers = record_headers(event);
    let refs: Vec<(&str, &[u8])> = headers
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_slice()))
        .collect();
    let payload = event.payload.to_string();
    let d = producer
        .send(Outgoing {
            topic: &event.topic,
            key: Some(event.partition_key.as_bytes()),
            payload: payload.as_bytes(),
            partition: event.partition,
            headers: &refs,
        })
        .await
        .unwrap();
    (d.partition, d.offset)
}

/// Recovery R2 lists two stale rows; recovery R1 requeues them; dispatcher D re-claims both
/// and publishes one. R2 then acts on its old listing: it finds the published record, and
/// it does not find the other — both compares are lost, D's fresh claim is untouched, and
/// D's own mark then succeeds. Before claim tokens, R2's requeue compared the status only
/// and moved D's live claim back to PENDING (the duplicate of the issue).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_recoveries_listing_the_same_stale_row_move_it_once() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-claims");
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let mut r2 = schema.connect().await;
    let a = NewEvent::new(&topic, "user", "a", "e", json!({"n": "a"}));
    let b = NewEvent::new(&topic, "user", "b", "e", json!({"n": "b"}));
    enqueue(&mut conn, &a).await.unwrap();
    enqueue(&mut conn, &b).await.unwrap();

    // A dispatcher claims both and dies; the claim goes stale.
    let dead = claim_batch(&mut conn, "dead", 10).await.unwrap();
    assert_eq!(dead.len(), 2);
    let dead_claim = dead[0].claim_id;
    age_claims(&mut conn).await;

    // R2 lists them (and is then slow); R1 does a whole round: nothing in Kafka, requeued.
    let listed = list_stale(&mut r2, STALE).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|r| r.claim_id == Some(dead_claim)));
    let r1 = recover_stale(&mut conn, &kafka(&stack), &RecoveryLimits::new(STALE))
        .await
        .unwrap();
    assert_eq!((r1.stale, r1.requeued), (2, 2));

    // D re-claims both and publishes `a`.
    let live = claim_batch(&mut conn, "live", 10).await.unwrap();
    assert_eq!(live.len(), 2);
    let live_claim = live[0].claim_id;
    assert_ne!(live_claim, dead_claim);
    let producer = ResilientProducer::new(&kafka(&stack), "claims-test").unwrap();
    let live_a = live.iter().find(|e| e.id == a.id).unwrap();
    let (partition, offset) = publish(&producer, live_a).await;

    // R2 acts on its old listing.
    let report = settle_stale(&mut r2, &kafka(&stack), listed, &RecoveryLimits::new(STALE))
        .await
        .unwrap();
    assert_eq!(
        report,
        RecoveryReport {
            stale: 2,
            published: 0,
            requeued: 0,
            raced: 2,
            scanned: report.scanned,
            ..RecoveryReport::default()
        },
        "both compares lost"
    );
    for id in [a.id, b.id] {
        assert_eq!(
            row(&mut conn, id).await,
            ("DISPATCHING".to_owned(), Some(live_claim), None),
            "{id} is still D's claim"
        );
    }
    // D's mark under its own claim goes through.
    let settled = settle_published(&mut conn, Some(live_claim), &[(a.id, partition, offset)])
        .await
        .unwrap();
    assert_eq!(settled.published, 1);
    assert_eq!(
        row(&mut conn, a.id).await,
        ("PUBLISHED".to_owned(), Some(live_claim), Some(offset))
    );
    assert_eq!(
        read_topic(&stack, &topic).len(),
        1,
        "nothing published twice"
    );
    drop(r2);
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

/// Dispatcher A claims an event and stalls; recovery requeues it (nothing in Kafka);
/// dispatcher B re-claims it. A's late marks — published, failed, requeued — all lose their
/// compare and leave B's claim as it is. Before claim tokens, A's late PUBLISHED mark moved
/// B's claim (status-only compare), releasing the key's later events before B's copy.
#[tokio::test]
async fn a_late_mark_after_requeue_and_reclaim_changes_nothing() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-claims");
    let event = NewEvent::new(&topic, "user", "k", "e", json!({}));
    enqueue(&mut conn, &event).await.unwrap();
    let a = claim_batch(&mut conn, "slow-a", 10).await.unwrap();
    let a_claim = a[0].claim_id;
    age_claims(&mut conn).await;
    // The topic does not exist: the search finds nothing, the row is requeued.
    let report = recover_stale(&mut conn, &kafka(&stack), &RecoveryLimits::new(STALE))
        .await
        .unwrap();
    assert_eq!(report.requeued, 1);
    let b = claim_batch(&mut conn, "b", 10).await.unwrap();
    let b_claim = b[0].claim_id;

    let mut late = schema.connect().await;
    let settled = settle_published(&mut late, Some(a_claim), &[(event.id, 0, 42)])
        .await
        .unwrap();
    assert_eq!(
        settled,
        Settled {
            published: 0,
            already_past: 0,
            lost: 1
        }
    );
    let s = settings(&stack, &schema, "slow-a");
    assert_eq!(
        mark_publish_failed(&mut late, &s, a_claim, event.id, 0, "late")
            .await
            .unwrap(),
        FailedPublishOutcome::NotClaimed
    );
    assert!(
        !requeue_without_attempt(&mut late, a_claim, event.id, 0, Duration::ZERO, "late")
            .await
            .unwrap()
    );
    assert_eq!(
        row(&mut conn, event.id).await,
        ("DISPATCHING".to_owned(), Some(b_claim), None),
        "B's claim untouched"
    );
    let attempts: i32 = sqlx::query_scalar("SELECT attempts FROM outbox_events WHERE id = $1")
        .bind(event.id)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(attempts, 0, "A's late failure burned no attempt");
    // B's own mark goes through.
    let settled = settle_published(&mut conn, Some(b_claim), &[(event.id, 0, 7)])
        .await
        .unwrap();
    assert_eq!(settled.published, 1);
    assert_eq!(
        status_of(&mut conn, event.id).await,
        OutboxStatus::Published
    );
    drop(late);
    teardown(schema, conn).await;
}

/// Five events of one key; the first publish fails once (failpoint). The other four are
/// not sent behind it and are requeued without an attempt; after the back-off the topic
/// holds 1..5 in order. Before, the whole batch was pipelined and 2..5 were published and
/// marked while 1 waited for its retry: the topic read 2, 3, 4, 5, 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_first_publish_holds_its_key_and_order_is_kept() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let stack = sluice_testkit::stack().unwrap();
    let topic = sluice_testkit::unique("outbox-order-fail");
    sluice_testkit::create_topic(&stack, &topic, 1).await;
    let mut ids = vec![];
    for n in 1..=5 {
        let event = NewEvent::new(&topic, "user", "one-key", "e", json!({"n": n}));
        ids.push(enqueue(&mut conn, &event).await.unwrap());
    }
    let mut dispatcher = Dispatcher::new(settings(&stack, &schema, "failing"))
        .unwrap()
        .with_failpoint(Some(Failpoint::FailFirstPublish));
    let first = dispatcher.dispatch_once().await.unwrap();
    assert_eq!(
        (first.claimed, first.published, first.retried, first.held),
        (5, 0, 1, 4),
        "the first fails, the rest are held: {first:?}"
    );
    assert!(read_topic(&stack, &topic).is_empty(), "nothing sent ahead");
    // The retry waits for the back-off (100 ms in the test settings).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        dispatcher.dispatch_once().await.unwrap();
        let published: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM outbox_events WHERE status = 'PUBLISHED' AND topic = $1",
        )
        .bind(&topic)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        if published == 5 {
            break;
        }
        assert!(Instant::now() < deadline, "{published} of 5 published");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let order: Vec<i64> = read_topic(&stack, &topic)
        .iter()
        .map(|r| r.payload["n"].as_i64().unwrap())
        .collect();
    assert_eq!(order, vec![1, 2, 3, 4, 5]);
    let attempts: Vec<i32> =
        sqlx::query_scalar("SELECT attempts FROM outbox_events WHERE topic = $1 ORDER BY seq")
            .bind(&topic)
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(attempts, vec![1, 0, 0, 0, 0], "only the failed one paid");
    sluice_testkit::delete_topics(&stack, &[&topic]).await;
    teardown(schema, conn).await;
}

/// A key is in flight at one dispatcher at a time, whatever the creation order of its
/// events: an earlier event that becomes PENDING again (the operator re-opens it from
/// FAILURE) while a later event of its key is DISPATCHING waits until that claim is settled.
#[tokio::test]
async fn an_event_reopened_behind_its_keys_claim_waits_for_that_claim() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox-reopen");
    let first = enqueue(
        &mut conn,
        &NewEvent::new(&topic, "user", "k", "e", json!({"n": 1})),
    )
    .await
    .unwrap();
    let second = enqueue(
        &mut conn,
        &NewEvent::new(&topic, "user", "k", "e", json!({"n": 2})),
    )
    .await
    .unwrap();
    // The first event fails for good; the second is claimed and in flight.
    for (from, to) in [
        (OutboxStatus::Pending, OutboxStatus::Dispatching),
        (OutboxStatus::Dispatching, OutboxStatus::Failure),
    ] {
        sluice_outbox::transition(&mut conn, first, &[from], to)
            .await
            .unwrap();
    }
    let claimed = claim_batch(&mut conn, "d1", 10).await.unwrap();
    assert_eq!(claimed.iter().map(|e| e.id).collect::<Vec<_>>(), [second]);
    // The operator re-opens the first one: PENDING, earlier than the key's claim.
    sluice_outbox::transition(
        &mut conn,
        first,
        &[OutboxStatus::Failure],
        OutboxStatus::Pending,
    )
    .await
    .unwrap();
    let claimed_meanwhile = claim_batch(&mut conn, "d2", 10).await.unwrap();
    assert!(
        claimed_meanwhile.is_empty(),
        "claimed while its key is in flight: {claimed_meanwhile:?}"
    );
    let settled = settle_published(&mut conn, Some(claimed[0].claim_id), &[(second, 0, 1)])
        .await
        .unwrap();
    assert_eq!(settled.published, 1);
    let claimed = claim_batch(&mut conn, "d2", 10).await.unwrap();
    assert_eq!(claimed.iter().map(|e| e.id).collect::<Vec<_>>(), [first]);
    teardown(schema, conn).await;
}

/// A claim is bounded in bytes as well as in events (docs/ARCHITECTURE.md#memory): it stops
/// before the event that would take it past its bytes, says it left events out, and takes an
/// event larger than the budget alone rather than never; a later event of a key left out is
/// never claimed before it.
#[tokio::test]
async fn a_claim_stops_at_its_bytes_and_takes_a_larger_event_alone() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox-bytes");
    // Text PostgreSQL does not compress (pseudo-random letters): stored about as long.
    let text = |n: usize, seed: u64| -> String {
        let mut x = seed * 2_654_435_761 + 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'a' + (x % 26) as u8)
            })
            .collect()
    };
    let mut ids = vec![];
    // Keys a, b, c, d: 30 KB each, then a 100 KB event of key e, then 1 KB of key a.
    for (i, (key, size)) in [
        ("a", 30_000),
        ("b", 30_000),
        ("c", 30_000),
        ("d", 30_000),
        ("e", 100_000),
        ("a", 1_000),
    ]
    .into_iter()
    .enumerate()
    {
        let event = NewEvent::new(
            &topic,
            "doc",
            key,
            "e",
            json!({ "v": text(size, i as u64) }),
        );
        ids.push(enqueue(&mut conn, &event).await.unwrap());
    }
    let limit = ClaimLimit {
        events: 10,
        bytes: 64 * 1024,
        from_seq: 0,
    };
    let ids_of = |claim: &[ClaimedEvent]| claim.iter().map(|e| e.id).collect::<Vec<_>>();
    // 30 + 30 KB fit in 64 KiB, a third 30 KB would not.
    let first = claim_batch_as(&mut conn, "d1", Uuid::new_v4(), limit)
        .await
        .unwrap();
    assert_eq!(ids_of(&first.events), ids[..2], "two of 30 KB");
    assert!(first.cut, "events were left out for the bytes");
    let second = claim_batch_as(&mut conn, "d2", Uuid::new_v4(), limit)
        .await
        .unwrap();
    assert_eq!(ids_of(&second.events), ids[2..4]);
    assert!(second.cut);
    // 100 KB is over the budget: claimed alone. Key a's last event waits behind key a's
    // claim (in flight at d1), so nothing else is due.
    let third = claim_batch_as(&mut conn, "d3", Uuid::new_v4(), limit)
        .await
        .unwrap();
    assert_eq!(
        ids_of(&third.events),
        [ids[4]],
        "an event over the budget goes alone"
    );
    assert!(!third.cut, "nothing was left out for the bytes");
    let settled = settle_published(&mut conn, Some(first.events[0].claim_id), &[(ids[0], 0, 1)])
        .await
        .unwrap();
    assert_eq!(settled.published, 1);
    let settled = settle_published(&mut conn, Some(first.events[1].claim_id), &[(ids[1], 0, 2)])
        .await
        .unwrap();
    assert_eq!(settled.published, 1);
    let last = claim_batch_as(&mut conn, "d1", Uuid::new_v4(), limit)
        .await
        .unwrap();
    assert_eq!(ids_of(&last.events), [ids[5]]);
    // Without a byte budget the count alone bounds a claim, as before.
    let events = claim_batch(&mut conn, "d1", 10).await.unwrap();
    assert!(events.is_empty(), "{events:?}");
    teardown(schema, conn).await;
}

/// Every plan node of an `EXPLAIN (FORMAT JSON)` document, depth first.
fn plan_nodes(node: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
    out.push(node.clone());
    if let Some(children) = node.get("Plans").and_then(|p| p.as_array()) {
        for child in children {
            plan_nodes(child, out);
        }
    }
}

/// One line per plan node: type, subplan, index, rows, loops and filter.
fn outline(nodes: &[serde_json::Value]) -> Vec<String> {
    nodes
        .iter()
        .map(|n| {
            format!(
                "{} {} {} rows={} loops={} {}",
                n["Node Type"].as_str().unwrap_or("?"),
                n["Subplan Name"].as_str().unwrap_or(""),
                n["Index Name"].as_str().unwrap_or(""),
                n["Actual Rows"],
                n["Actual Loops"],
                n["Filter"]
                    .as_str()
                    .or(n["Join Filter"].as_str())
                    .unwrap_or("")
            )
        })
        .collect()
}

/// Runs the claim under `EXPLAIN ANALYZE` (so it claims, as `planner`, up to 100 rows) and
/// returns the plan, its nodes and its outline.
async fn explain_claim(
    conn: &mut PgConnection,
) -> (serde_json::Value, Vec<serde_json::Value>, Vec<String>) {
    let claim = include_str!("../src/store/sql/claim.sql");
    let explain = format!("EXPLAIN (ANALYZE, FORMAT JSON) {claim}");
    let plan: serde_json::Value = sqlx::query_scalar(&explain)
        .bind("planner")
        .bind(100i32)
        .bind(Uuid::new_v4())
        .bind(i64::MAX)
        .bind(0i64)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    let mut nodes = Vec::new();
    plan_nodes(&plan[0]["Plan"], &mut nodes);
    let outline = outline(&nodes);
    (plan, nodes, outline)
}

/// The partition keys `planner` claimed, in seq order.
async fn claimed_by_planner(conn: &mut PgConnection) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT partition_key FROM outbox_events WHERE claimed_by = 'planner' ORDER BY seq",
    )
    .fetch_all(conn)
    .await
    .unwrap()
}

/// Inserts `count` PENDING rows of `topic`, keyed by `keys` (an expression of `g`, 1 to
/// `count`), available at once or, with `delay`, that long after now.
async fn insert_rows(
    conn: &mut PgConnection,
    topic: &str,
    keys: &str,
    count: i32,
    delay: Option<&str>,
) {
    let (column, value) = match delay {
        Some(delay) => (", available_at", format!(", now() + interval '{delay}'")),
        None => ("", String::new()),
    };
    sqlx::query(&format!(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, topic,
                                    partition_key, payload{column})
         SELECT 'user', g::text, 'plan', $1, {keys}, '{{}}'::jsonb{value}
         FROM generate_series(1, $2) AS g"
    ))
    .bind(topic)
    .bind(count)
    .execute(conn)
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delayed_row_check_stays_a_probe_under_stale_statistics() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    // A short topic (the schema is this test's own, and nothing is published): with keys
    // of some 40 bytes the index probe looks dear enough that the planner chose it for the
    // old NOT EXISTS too, and this test would not show the plan that statement could get.
    let topic = "t";
    // Autovacuum would refresh the statistics this test keeps stale.
    sqlx::query("ALTER TABLE outbox_events SET (autovacuum_enabled = false)")
        .execute(&mut conn)
        .await
        .unwrap();
    // Statistics taken while no row was delayed: the planner expects none.
    insert_rows(&mut conn, topic, "'early' || g", 1000, None).await;
    for sql in ["ANALYZE outbox_events", "DELETE FROM outbox_events"] {
        sqlx::query(sql).execute(&mut conn).await.unwrap();
    }
    // Then 1,000 keys each with a row delayed by an hour and three due rows behind it
    // (3,000 rows the scan passes and must refuse), and 1,000 rows of free keys.
    insert_rows(&mut conn, topic, "'d' || g", 1000, Some("1 hour")).await;
    insert_rows(&mut conn, topic, "'d' || (g % 1000 + 1)", 3000, None).await;
    insert_rows(&mut conn, topic, "'free' || g", 1000, None).await;

    let (_, nodes, outline) = explain_claim(&mut conn).await;
    println!(
        "claim with 1,000 rows delayed, stale statistics:\n{}",
        outline.join("\n")
    );
    // The table holds 5,000 rows. An anti-join against a materialized set of the delayed
    // rows reads that set once per row the scan passes (~500 rows x 3,100 loops); one probe
    // per passing row reads at most a row each.
    for (node, line) in nodes.iter().zip(&outline) {
        let rows = node["Actual Rows"].as_f64().unwrap_or(0.0);
        let loops = node["Actual Loops"].as_f64().unwrap_or(0.0);
        assert!(
            rows * loops <= 10_000.0,
            "a plan node read {rows} rows {loops} times: {line}\n{}",
            outline.join("\n")
        );
    }
    assert!(
        outline
            .iter()
            .any(|l| l.contains("outbox_events_delayed_key_idx") && l.contains("loops=3100")),
        "the delayed rows are probed once per row the scan passes:\n{}",
        outline.join("\n")
    );
    // The delayed keys' due rows wait; the 100 oldest rows of free keys are claimed.
    let expected: Vec<String> = (1..=100).map(|i| format!("free{i}")).collect();
    assert_eq!(claimed_by_planner(&mut conn).await, expected);
    teardown(schema, conn).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_stays_linear_with_50_000_keys_in_flight_and_a_small_work_mem() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox-plan");
    // 50,000 keys in flight, then 10,000 PENDING rows behind them and 5,000 of free keys.
    sqlx::query(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, topic, partition_key, payload)
         SELECT 'user', g::text, 'plan', $1, 'k' || g, '{}'::jsonb FROM generate_series(1, 50000) AS g",
    )
    .bind(&topic)
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE outbox_events SET status = 'DISPATCHING', claimed_by = 'elsewhere',
                claimed_at = now(), claim_id = gen_random_uuid()
         WHERE topic = $1",
    )
    .bind(&topic)
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, topic, partition_key, payload)
         SELECT 'user', g::text, 'plan', $1, 'k' || g, '{}'::jsonb FROM generate_series(1, 10000) AS g
         UNION ALL
         SELECT 'user', g::text, 'plan', $1, 'free' || g, '{}'::jsonb FROM generate_series(1, 5000) AS g",
    )
    .bind(&topic)
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query("ANALYZE outbox_events")
        .execute(&mut conn)
        .await
        .unwrap();
    // The in-flight keys no longer fit in the hash budget.
    sqlx::query("SET work_mem = '64kB'")
        .execute(&mut conn)
        .await
        .unwrap();

    let started = Instant::now();
    let (plan, nodes, outline) = explain_claim(&mut conn).await;
    let took = started.elapsed();
    let root = &plan[0];
    println!(
        "claim with 50,000 keys in flight, work_mem 64kB: {:.1} ms execution ({:.1} ms round trip)\n{}",
        root["Execution Time"].as_f64().unwrap_or(-1.0),
        took.as_secs_f64() * 1000.0,
        outline.join("\n")
    );
    // A plain (unhashed) subplan runs once per row that reaches it: had the keys in flight
    // been one, once per PENDING row over 50,000 keys. Only two may be plain: the delayed-row
    // probe, which runs on the rows the hashed keys in flight let through (here once per
    // free row the scan passes), and the final check's per-candidate probe, each at most the
    // batch size of runs here.
    for node in &nodes {
        let name = node["Subplan Name"].as_str().unwrap_or("");
        if name.starts_with("SubPlan") {
            let loops = node["Actual Loops"].as_i64().unwrap_or(0);
            assert!(
                loops <= 100,
                "a subplan run {loops} times: {name}\n{}",
                outline.join("\n")
            );
        }
    }
    assert!(
        outline.iter().any(|l| l.contains("NOT (hashed SubPlan")),
        "the keys in flight are hashed:\n{}",
        outline.join("\n")
    );
    // EXPLAIN ANALYZE ran the claim: it took the 100 oldest rows of free keys.
    let expected: Vec<String> = (1..=100).map(|i| format!("free{i}")).collect();
    assert_eq!(claimed_by_planner(&mut conn).await, expected);
    teardown(schema, conn).await;
}

/// A consumer that read the record before the dispatcher's mark moved the row on
/// (DISPATCHING → UNDER_PROCESSING → SUCCESS): the mark leaves the status as it is and still
/// writes the record's coordinates, so an operator finds the event's record from its row.
#[tokio::test]
async fn a_mark_after_the_consumer_moved_the_row_on_still_records_where_it_went() {
    let Some((schema, mut conn)) = setup().await else {
        return;
    };
    let topic = sluice_testkit::unique("outbox-claims");
    let event = NewEvent::new(&topic, "user", "k", "e", json!({}));
    enqueue(&mut conn, &event).await.unwrap();
    let claimed = claim_batch(&mut conn, "d", 10).await.unwrap();
    let claim = claimed[0].claim_id;
    for status in ["UNDER_PROCESSING", "SUCCESS"] {
        sqlx::query("UPDATE outbox_events SET status = $1 WHERE id = $2")
            .bind(status)
            .bind(event.id)
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let settled = settle_published(&mut conn, Some(claim), &[(event.id, 2, 42)])
        .await
        .unwrap();
    assert_eq!(
        settled,
        Settled {
            published: 0,
            already_past: 1,
            lost: 0
        }
    );
    assert_eq!(
        row(&mut conn, event.id).await,
        ("SUCCESS".to_owned(), Some(claim), Some(42))
    );
    teardown(schema, conn).await;
}
