//! A topic never stalls silently, and static membership behaves: the real `sluice run`
//! binary against the real broker.
//!
//! - Record batches compressed by another client (Kafka's own Java console producer) with
//!   every codec a producer may choose are read.
//! - A topic deleted under a running pipeline stops the process with exit 1 naming it,
//!   within the bound, and `sluice health` fails meanwhile.
//! - Two live processes with one `STORAGE_INSTANCE_ID`: the older is fenced and exits 1
//!   with a message naming the setting; the newer one goes on.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use std::time::{Duration, Instant};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_in_every_codec_from_the_java_producer_land() {
    let Some(env) = Env::new().await else { return };
    let app = format!("com.{}.codecs", env.prefix.replace('-', "_"));
    env.schema.register_apps(std::slice::from_ref(&app)).await;
    let codecs = ["gzip", "snappy", "lz4", "zstd", "none"];
    for (c, codec) in codecs.iter().enumerate() {
        let lines: Vec<String> = (0..200)
            .map(|i| {
                let n = c * 200 + i;
                let value = review(n, &app, "2026-11-02T10:00:00Z");
                format!("{app}-{}\t{value}", n % 7)
            })
            .collect();
        java_produce(&env, &env.topic("reviews"), codec, &lines);
    }
    let (end, _) = env.offsets("reviews");
    assert_eq!(end, 1000, "the Java producer wrote 5 × 200 records");

    let mut run = env.spawn_run("codecs", &[("STORAGE_PIPELINES", "reviews")]);
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(120))
        .await;
    run.signal("TERM");
    assert!(run.wait(Duration::from_secs(30)).success());
    assert_eq!(env.count("SELECT count(*) FROM reviews").await, 1000);
    assert_eq!(
        env.count("SELECT count(*) FROM dead_letter_events").await,
        0
    );
    let warnings = run
        .events()
        .into_iter()
        .filter(|e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.contains("consumer error"))
        })
        .count();
    assert_eq!(warnings, 0, "no consumer error while reading the codecs");
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_deleted_under_a_running_pipeline_stops_the_process_naming_it() {
    let Some(env) = Env::new().await else { return };
    let app = format!("com.{}.gone", env.prefix.replace('-', "_"));
    env.schema.register_apps(std::slice::from_ref(&app)).await;
    let messages: Vec<_> = (0..500)
        .map(|i| (app.clone(), review(i, &app, "2026-11-02T10:00:00Z")))
        .collect();
    env.produce_json("reviews", &messages).await;
    let bound = 20;
    let bound_s = bound.to_string();
    let extra = [
        ("STORAGE_PIPELINES", "reviews"),
        ("STORAGE_CONSUMER_ERROR_TIMEOUT_SECONDS", bound_s.as_str()),
    ];
    let mut run = env.spawn_run("gone", &extra);
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(120))
        .await;
    let health = || {
        env.output(
            &["health", "--max-age-seconds", "3"],
            &[("STORAGE_PIPELINES", "reviews")],
        )
        .status
        .success()
    };
    assert!(health(), "healthy while the topic exists");

    let topic = env.topic("reviews");
    sluice_testkit::delete_topics(&env.stack, &[topic.as_str()]).await;
    let deleted = Instant::now();
    let mut unhealthy_at = None;
    let status = loop {
        if let Some(status) = run.child.try_wait().unwrap() {
            break status;
        }
        if unhealthy_at.is_none() && !health() {
            unhealthy_at = Some(deleted.elapsed());
        }
        assert!(
            deleted.elapsed() < Duration::from_secs(bound + 30),
            "still running {:?} after the topic was deleted:\n{}",
            deleted.elapsed(),
            run.tail()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let exited = deleted.elapsed();
    println!(
        "topic deleted: unhealthy after {unhealthy_at:?}, exit {status} after {:.1} s (bound {bound} s)",
        exited.as_secs_f64()
    );
    assert_eq!(status.code(), Some(1), "exit 1:\n{}", run.tail());
    assert!(
        unhealthy_at.is_some(),
        "`sluice health` failed before the exit"
    );
    let failure = std::fs::read_to_string(&run.log).unwrap();
    assert!(
        failure.contains(&topic) && failure.contains("pipeline reviews failed"),
        "the failure names the pipeline and the topic:\n{}",
        run.tail()
    );
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_live_processes_with_one_instance_id_fence_the_older_one() {
    let Some(env) = Env::new().await else { return };
    let app = format!("com.{}.fence", env.prefix.replace('-', "_"));
    env.schema.register_apps(std::slice::from_ref(&app)).await;
    let messages: Vec<_> = (0..300)
        .map(|i| (app.clone(), review(i, &app, "2026-11-02T10:00:00Z")))
        .collect();
    env.produce_json("reviews", &messages).await;
    let extra = [
        ("STORAGE_PIPELINES", "reviews"),
        ("STORAGE_INSTANCE_ID", "same-host"),
    ];
    let mut first = env.spawn_run("first", &extra);
    env.wait_caught_up("reviews", &mut first, Duration::from_secs(120))
        .await;
    let mut second = env.spawn_run("second", &extra);
    let status = first.wait(Duration::from_secs(60));
    assert_eq!(status.code(), Some(1), "the fenced process exits 1");
    let log = std::fs::read_to_string(&first.log).unwrap();
    assert!(
        log.contains("fenced") && log.contains("STORAGE_INSTANCE_ID"),
        "a clear message:\n{}",
        first.tail()
    );
    // The newer process owns the group and works on.
    let more: Vec<_> = (300..400)
        .map(|i| (app.clone(), review(i, &app, "2026-11-02T10:00:00Z")))
        .collect();
    env.produce_json("reviews", &more).await;
    env.wait_caught_up("reviews", &mut second, Duration::from_secs(120))
        .await;
    assert_eq!(env.count("SELECT count(*) FROM reviews").await, 400);
    second.signal("TERM");
    assert!(second.wait(Duration::from_secs(30)).success());
    env.cleanup().await;
}
