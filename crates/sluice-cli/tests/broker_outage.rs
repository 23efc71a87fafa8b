//! A broker outage is ridden out, however long, even with a short stall bound: the errors
//! librdkafka reports while the broker is down heal by themselves when it comes back, so
//! they never stop a pipeline. (Errors that cannot heal are covered by `stall.rs`.)
//!
//! Stops the shared broker with `$SLUICE_STACK kafka-stop`; a guard starts it again when the
//! test ends, panics included. This test binary holds this one test so that no other test
//! runs while the broker is down.
//!
//! sluice-test: alone (it stops the shared broker):
//! `scripts/test-all` runs this binary with no other test binary beside it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use std::time::{Duration, Instant};
use support::*;

const REVIEWS: usize = 20_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_outage_longer_than_the_stall_bound_is_ridden_out() {
    let Some(env) = Env::new().await else { return };
    let script = std::env::var("SLUICE_STACK").expect("SLUICE_STACK (from scripts/stack env)");
    let app = format!("com.{}.outage", env.prefix.replace('-', "_"));
    env.schema.register_apps(std::slice::from_ref(&app)).await;
    let messages: Vec<_> = (0..REVIEWS)
        .map(|i| (app.clone(), review(i, &app, "2026-11-02T10:00:00Z")))
        .collect();
    env.produce_json("reviews", &messages).await;

    let extra = [
        ("STORAGE_PIPELINES", "reviews"),
        ("STORAGE_MAX_POLL_RECORDS_REVIEWS", "100"),
        // Far shorter than the outage: transient errors must not count against it.
        ("STORAGE_CONSUMER_ERROR_TIMEOUT_SECONDS", "5"),
    ];
    let mut run = env.spawn_run("outage", &extra);
    let count = "SELECT count(*) FROM reviews";
    env.wait_rows(count, 2_000, &mut run, Duration::from_secs(120))
        .await;

    let outage = Duration::from_secs(20);
    let stopped = sluice_testkit::BrokerStopped::stop(&script);
    let down = Instant::now();
    let at_stop = env.count(count).await;
    while down.elapsed() < outage {
        run.assert_alive();
        std::thread::sleep(Duration::from_millis(500));
    }
    drop(stopped); // kafka-start waits until the broker is ready
    println!(
        "broker down {:.1} s with {at_stop} of {REVIEWS} rows written",
        down.elapsed().as_secs_f64()
    );
    assert!(at_stop < REVIEWS as i64, "the outage came mid-ingest");

    env.wait_caught_up("reviews", &mut run, Duration::from_secs(180))
        .await;
    run.signal("TERM");
    let status = run.wait(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "clean stop: {status}");
    assert_eq!(env.count(count).await, REVIEWS as i64);
    assert_eq!(
        env.count("SELECT count(*) FROM dead_letter_events").await,
        0
    );
    let errors = run
        .events()
        .into_iter()
        .filter(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("consumer error"))
        })
        .count();
    let rejoins = run
        .events()
        .into_iter()
        .filter(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("fenced right after"))
        })
        .count();
    println!("consumer errors logged during the outage: {errors}; self-fencing rejoins: {rejoins}");
    env.cleanup().await;
}
