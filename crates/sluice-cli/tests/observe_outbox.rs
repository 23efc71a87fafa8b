//! The HTTP endpoint of `sluice dispatch` on the real stack (issue 13): with the broker
//! stopped, 5,000 enqueued events show as PENDING with a growing oldest-pending age and the
//! dispatcher is not ready (naming the broker) while it stays alive; with the broker back,
//! the gauges fall to 0, `sluice_outbox_published_total` reaches 5,000 and every event is
//! in the topic once (the mailbox consumer's endpoint is tested with the example, in
//! `examples/mailbox/tests/observe.rs`). Its own binary: it stops the shared broker.
//!
//! sluice-test: alone (it stops the shared broker):
//! `scripts/test-all` runs this binary with no other test binary beside it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::json;
use sluice_outbox::{NewEvent, enqueue};
use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::http::*;
use support::*;

const EVENTS: usize = 5_000;
const KEYS: usize = 50;

fn outbox_gauges(port: u16) -> (f64, f64, f64, f64) {
    let samples = scrape(port);
    (
        sum(&samples, "sluice_outbox_events", &[("status", "PENDING")]),
        sum(
            &samples,
            "sluice_outbox_events",
            &[("status", "DISPATCHING")],
        ),
        sum(&samples, "sluice_outbox_oldest_pending_age_seconds", &[]),
        sum(&samples, "sluice_outbox_published_total", &[]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_metrics_and_readiness_follow_a_broker_outage() {
    let Some(env) = Env::new().await else { return };
    let migrated = env.output(&["migrate"], &[]);
    assert!(
        migrated.status.success(),
        "sluice migrate: {}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let script = std::env::var("SLUICE_STACK").expect("SLUICE_STACK (from scripts/stack env)");
    let topic = format!("{}-observe-outbox", env.prefix);
    sluice_testkit::create_topic(&env.stack, &topic, 3).await;

    let port = free_port();
    let log = env.dir.join("dispatch.log");
    let mut cmd = env.sluice(&["dispatch"]);
    cmd.envs([
        ("SLUICE_HTTP_ADDR", format!("127.0.0.1:{port}").as_str()),
        ("OUTBOX_DISPATCHER_ID", "observed"),
        ("OUTBOX_POLL_INTERVAL_MS", "100"),
        ("OUTBOX_BATCH_SIZE", "500"),
        ("OUTBOX_BACKOFF_BASE_MS", "100"),
        ("OUTBOX_MAX_ATTEMPTS", "1000"),
        ("OUTBOX_DELIVERY_TIMEOUT_MS", "2000"),
        ("OUTBOX_STALE_DISPATCH_SECONDS", "5"),
    ])
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&log).unwrap());
    let mut dispatch = Running {
        child: cmd.spawn().unwrap(),
        log,
    };
    wait_for(
        "ready before the outage",
        Duration::from_secs(60),
        &mut dispatch,
        || (status_of(port, "/health/ready") == Some(200)).then_some(()),
    );
    let (pending, _, age, published) = outbox_gauges(port);
    assert_eq!((pending, age, published), (0.0, 0.0, 0.0));

    let stopped = sluice_testkit::BrokerStopped::stop(&script);
    let mut conn = env.schema.connect().await;
    for chunk in (0..EVENTS).collect::<Vec<_>>().chunks(500) {
        let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
        for &i in chunk {
            let event = NewEvent::new(
                topic.as_str(),
                "user",
                format!("key-{}", i % KEYS),
                "observe.test",
                json!({"i": i}),
            );
            enqueue(&mut tx, &event).await.unwrap();
        }
        tx.commit().await.unwrap();
    }
    let enqueued = Instant::now();

    // The probe refreshes every 5 s: PENDING rises, then the oldest age grows between two
    // refreshes, and readiness names the broker.
    let (pending_high, age_first) = wait_for(
        "PENDING and the oldest age during the outage",
        Duration::from_secs(30),
        &mut dispatch,
        || {
            let (pending, dispatching, age, _) = outbox_gauges(port);
            (pending + dispatching >= EVENTS as f64 && pending > 0.0 && age > 0.0)
                .then_some((pending, age))
        },
    );
    let age_later = wait_for(
        "the oldest pending age growing",
        Duration::from_secs(30),
        &mut dispatch,
        || {
            let (_, _, age, _) = outbox_gauges(port);
            (age >= age_first + 4.0).then_some(age)
        },
    );
    let (status, body) = get(port, "/health/ready", "text/plain");
    assert_eq!(status, 503, "not ready while the broker is down: {body}");
    assert!(body.contains("broker: unreachable"), "{body}");
    let (live, live_body) = get(port, "/health/live", "text/plain");
    assert_eq!(live, 200, "alive during the outage: {live_body}");
    let failures = sum(&scrape(port), "sluice_outbox_failures_total", &[]);
    println!(
        "outage: PENDING {pending_high}, oldest pending age {age_first:.1} s -> {age_later:.1} s, \
         {failures} failed publishes, {:.1} s after enqueueing; ready: {}",
        enqueued.elapsed().as_secs_f64(),
        body.replace('\n', " | ")
    );

    drop(stopped); // kafka-start waits until the broker is ready
    let back = Instant::now();
    wait_for(
        "the outbox drained",
        Duration::from_secs(120),
        &mut dispatch,
        || {
            let (pending, dispatching, age, published) = outbox_gauges(port);
            (pending == 0.0 && dispatching == 0.0 && age == 0.0 && published >= EVENTS as f64)
                .then_some(())
        },
    );
    let drained = back.elapsed();
    let samples = scrape(port);
    assert_eq!(
        sum(&samples, "sluice_outbox_published_total", &[]),
        EVENTS as f64
    );
    assert_eq!(
        sum(&samples, "sluice_outbox_events", &[("status", "PUBLISHED")]),
        EVENTS as f64
    );
    assert_eq!(
        sum(&samples, "sluice_outbox_publish_latency_seconds_count", &[]),
        EVENTS as f64,
        "one latency observation per published event"
    );
    wait_for(
        "ready after the outage",
        Duration::from_secs(30),
        &mut dispatch,
        || (status_of(port, "/health/ready") == Some(200)).then_some(()),
    );

    let records = read_outbox_topic(&env.stack.bootstrap, &topic);
    let mut seen: HashMap<uuid::Uuid, usize> = HashMap::new();
    for (_, _, _, id) in &records {
        *seen.entry(*id).or_default() += 1;
    }
    assert_eq!(seen.len(), EVENTS, "every event in the topic");
    assert!(seen.values().all(|n| *n == 1), "each event once");
    println!(
        "broker back: drained in {:.1} s, {} records in the topic, published_total {}",
        drained.as_secs_f64(),
        records.len(),
        sum(&samples, "sluice_outbox_published_total", &[])
    );

    dispatch.signal("TERM");
    let status = dispatch.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "clean stop: {status}");
    env.cleanup().await;
}
