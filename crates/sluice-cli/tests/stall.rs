//! A topic never stalls silently, and static membership behaves: the real `sluice run`
//! binary against the real broker.
//!
//! - Record batches compressed by another client (Kafka's own Java console producer) with
//!   every codec a producer may choose are read.
//! - A topic deleted under a running pipeline stops the process with exit 1 naming it,
//!   within the bound, and `sluice health` fails meanwhile.
//! - Two live processes with one `STORAGE_INSTANCE_ID`: the older is fenced and exits 1
//!   with a message naming the setting; the newer one goes on.
//! - A writer blocked on a row lock another session holds stalls only its batch's partition:
//!   the other partitions drain meanwhile through the other writer, SIGTERM during the wait
//!   ends the process promptly with exit 0, nothing of the blocked batch committed, and once
//!   the lock is released everything lands once.
//! - A topic of 48 partitions, 47 of them without a record, keeps pace with its busy one
//!   (the lag measurement waits on no broker round trip per partition).
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

/// A review with an id of its own (`id`), `thumbs` thumbs up.
fn review_of(id: &str, package: &str, synced: &str, thumbs: i64) -> serde_json::Value {
    serde_json::json!({
        "review_id": id,
        "package_name": package,
        "score": 3,
        "content": format!("text {id}"),
        "thumbs_up_count": thumbs,
        "at": "2026-11-01T10:00:00Z",
        "last_synced_at": synced,
    })
}

async fn produce_reviews(env: &Env, partition: i32, values: &[serde_json::Value]) {
    let records: Vec<sluice_testkit::RawRecord> = values
        .iter()
        .map(|v| (None, Some(v.to_string().into_bytes())))
        .collect();
    sluice_testkit::produce_to_partition(&env.stack, &env.topic("reviews"), partition, &records)
        .await;
}

/// PostgreSQL's stored offset of a partition of the reviews topic.
async fn stored_offset(env: &Env, partition: i32) -> i64 {
    env.count(&format!(
        "SELECT next_offset FROM consumer_offsets
         WHERE consumer_group = '{}' AND topic = '{}' AND partition = {partition}",
        env.group("reviews"),
        env.topic("reviews")
    ))
    .await
}

/// Produces `n` reviews `{label}-{partition}-{i}` to each of `partitions` and returns how
/// long they took to land.
async fn drain_time(
    env: &Env,
    run: &mut Running,
    partitions: &[i32],
    label: &str,
    app: &str,
    n: usize,
) -> Duration {
    let started = Instant::now();
    for partition in partitions {
        let values: Vec<_> = (0..n)
            .map(|i| {
                let id = format!("{label}-{partition}-{i}");
                review_of(&id, app, "2026-11-02T10:00:00Z", 1)
            })
            .collect();
        produce_reviews(env, *partition, &values).await;
    }
    let sql = format!("SELECT count(*) FROM reviews WHERE review_id LIKE '{label}-%'");
    let all = (n * partitions.len()) as i64;
    env.wait_rows(&sql, all, run, Duration::from_secs(90)).await;
    started.elapsed()
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_blocked_on_a_lock_stalls_only_its_partition_and_sigterm_ends_the_wait() {
    use sqlx::Connection;
    let Some(env) = Env::new().await else { return };
    let app = format!("com.{}.blocked", env.prefix.replace('-', "_"));
    env.schema.register_apps(std::slice::from_ref(&app)).await;
    // Three partitions, two writers: any free writer takes any partition's next batch.
    let locked = review_of("locked", &app, "2026-11-02T10:00:00Z", 1);
    produce_reviews(&env, 1, &[locked]).await;
    let mut run = env.spawn_run(
        "blocked",
        &[("STORAGE_PIPELINES", "reviews"), ("STORAGE_WRITERS", "2")],
    );
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(120))
        .await;
    let n = 30_000;
    let baseline = drain_time(&env, &mut run, &[0, 2], "free", &app, n).await;

    // Another session holds the row; a newer version of it arrives on partition 1, with
    // 5,000 more records behind it: the writer that takes it waits, partition 1's queue
    // fills up.
    let mut holder = env.schema.connect().await;
    let holder_pid = sluice_testkit::backend_pid(&mut holder).await;
    let mut tx = holder.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM reviews WHERE review_id = 'locked' FOR UPDATE")
        .execute(&mut *tx)
        .await
        .unwrap();
    let mut blocked = vec![review_of("locked", &app, "2026-11-03T10:00:00Z", 99)];
    blocked.extend(
        (0..5_000).map(|i| review_of(&format!("behind-{i}"), &app, "2026-11-03T10:00:00Z", 1)),
    );
    produce_reviews(&env, 1, &blocked).await;
    let mut observer = env.schema.connect().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while sluice_testkit::lock_waiters(&mut observer, holder_pid)
        .await
        .is_empty()
    {
        run.assert_alive();
        assert!(
            Instant::now() < deadline,
            "no writer ever waited for the lock"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Partitions 0 and 2 keep draining while partition 1's writer waits.
    let during = drain_time(&env, &mut run, &[0, 2], "during", &app, n).await;
    println!(
        "{n} records each of partitions 0 and 2: {:.2} s alone, {:.2} s while partition 1 is \
         blocked (ratio {:.2})",
        baseline.as_secs_f64(),
        during.as_secs_f64(),
        during.as_secs_f64() / baseline.as_secs_f64()
    );
    assert!(
        !sluice_testkit::lock_waiters(&mut observer, holder_pid)
            .await
            .is_empty(),
        "partition 1's writer still waits for the lock"
    );

    // SIGTERM during the wait: a prompt, clean exit.
    let signalled = Instant::now();
    run.signal("TERM");
    let status = run.wait(Duration::from_secs(60));
    let exited = signalled.elapsed();
    println!("exit {status} {:.2} s after SIGTERM", exited.as_secs_f64());
    assert!(status.success(), "exit 0 after SIGTERM:\n{}", run.tail());
    assert!(
        exited < Duration::from_secs(10),
        "SIGTERM during a lock wait took {exited:?}"
    );
    // Its statement was cancelled: nobody waits for the lock any more.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sluice_testkit::lock_waiters(&mut observer, holder_pid)
        .await
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the blocked statement still waits"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tx.rollback().await.unwrap();

    // Nothing of the blocked batch, or of what was behind it, was committed.
    assert_eq!(
        env.count("SELECT thumbs_up_count::bigint FROM reviews WHERE review_id = 'locked'")
            .await,
        1
    );
    assert_eq!(
        env.count("SELECT count(*) FROM reviews WHERE review_id LIKE 'behind-%'")
            .await,
        0
    );
    let group = env.group("reviews");
    assert_eq!(
        stored_offset(&env, 1).await,
        1,
        "partition 1's offset stays before the blocked batch"
    );
    let committed = env
        .admin()
        .committed_offsets(&group, &env.topic("reviews"))
        .unwrap();
    assert!(
        committed.contains(&(1, Some(1))),
        "Kafka's offset of partition 1 stays too: {committed:?}"
    );

    // The lock released, the next run lands everything once: the newer version of the row,
    // the 5,000 behind it, and partition 1's offset after them.
    let mut again = env.spawn_run(
        "released",
        &[("STORAGE_PIPELINES", "reviews"), ("STORAGE_WRITERS", "2")],
    );
    env.wait_caught_up("reviews", &mut again, Duration::from_secs(120))
        .await;
    again.signal("TERM");
    assert!(again.wait(Duration::from_secs(60)).success());
    assert_eq!(
        env.count("SELECT thumbs_up_count::bigint FROM reviews WHERE review_id = 'locked'")
            .await,
        99
    );
    assert_eq!(
        env.count("SELECT count(*) FROM reviews WHERE review_id LIKE 'behind-%'")
            .await,
        5_000
    );
    assert_eq!(stored_offset(&env, 1).await, 5_002);
    let inserted: u64 = again
        .events_named("batch committed")
        .iter()
        .map(|e| e["inserted"].as_u64().unwrap_or(0) + e["updated"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(inserted, 5_001, "each record of partition 1 applied once");
    env.cleanup().await;
}

/// A topic of 48 partitions, 47 of which never had a record, keeps pace with its one busy
/// partition: nothing the reader does waits on the broker for each partition. (It did: the
/// lag of a partition the consumer never handed a record was asked of the broker every 2 s,
/// a round trip per partition that waits behind the consumer's fetch long poll on the same
/// connection once it has caught up: 4,000 of 20,000 records in 60 s, SIGTERM in 10 s.)
/// Every partition's lag gauge says 0 once drained, from the client's statistics, and
/// SIGTERM ends the process within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_that_never_had_a_record_do_not_slow_the_reader() {
    use support::case::Case;
    use support::counted::{DDL, MAPPING, records};
    use support::http::{free_port, scrape, status_of};
    let Some(case) = Case::with_partitions(&["counted"], DDL, MAPPING, 48).await else {
        return;
    };
    let (topic, group) = (case.topic("counted"), case.env.group("counted"));
    let http = free_port();
    let (file, addr) = (case.file.display().to_string(), format!("127.0.0.1:{http}"));
    let mut run = case.env.spawn_run(
        "empty-partitions",
        &[
            ("SLUICE_SINKS_FILE", file.as_str()),
            ("SLUICE_HTTP_ADDR", addr.as_str()),
        ],
    );
    let lag_gauge = move || -> Vec<f64> {
        if status_of(http, "/metrics").is_none() {
            return Vec::new();
        }
        scrape(http)
            .iter()
            .filter(|s| s.metric == "sluice_consumer_lag")
            .map(|s| match s.value {
                prometheus_parse::Value::Gauge(v) => v,
                _ => f64::NAN,
            })
            .collect()
    };
    // Caught up on an empty topic: its fetches now wait for records (the long poll).
    wait_for(
        "all 48 partitions assigned",
        Duration::from_secs(60),
        &mut run,
        || (lag_gauge().len() == 48).then_some(()),
    );
    const N: i64 = 10_000;
    let started = Instant::now();
    for chunk in (0..N).step_by(2_000) {
        let batch = records(chunk..chunk + 2_000);
        sluice_testkit::produce_to_partition(&case.env.stack, &topic, 0, &batch).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let produced = Instant::now();
    case.wait_committed(&mut run, &group, &topic).await;
    let (producing, behind) = (produced - started, produced.elapsed());
    eprintln!("{N} records produced in 5 steps in {producing:?}, all stored {behind:?} later");
    assert!(
        behind < Duration::from_secs(15),
        "{N} records of one partition beside 47 empty ones: produced in {producing:?}, \
         stored {behind:?} later\n{}",
        run.tail()
    );
    wait_for(
        "every partition's lag gauge at 0",
        Duration::from_secs(20),
        &mut run,
        || {
            let lags = lag_gauge();
            (lags.len() == 48 && lags.iter().all(|v| *v == 0.0)).then_some(())
        },
    );
    let stopping = Instant::now();
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(30)).success(),
        "{}",
        run.tail()
    );
    let stopped = stopping.elapsed();
    eprintln!("SIGTERM took {stopped:?}");
    assert!(stopped < Duration::from_secs(5), "SIGTERM took {stopped:?}");
    assert_eq!(
        case.rows("SELECT count(*) || ' ' || (SELECT count(*) FROM applications) FROM counted")
            .await,
        [format!("{N} {N}")],
        "every record stored and applied once"
    );
    case.cleanup().await;
}
