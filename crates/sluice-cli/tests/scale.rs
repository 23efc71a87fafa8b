//! Scale-out: several `sluice run` processes share the reviews group, each with its own
//! `STORAGE_INSTANCE_ID` (static membership). One is SIGKILLed in the middle of a
//! 300,000-review ingest and never comes back; a fourth joins. Every review lands exactly
//! once, nothing is dead-lettered, and every partition is drained and committed.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};
use support::*;

const REVIEWS: usize = 300_000;
const PARTITIONS: i32 = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_share_a_group_through_a_kill_and_a_join() {
    let Some(env) = Env::new().await else { return };
    let apps: Vec<String> = (0..20)
        .map(|i| format!("com.{}.scale{i}", env.prefix.replace('-', "_")))
        .collect();
    env.schema.register_apps(&apps).await;
    let topic = env.topic("reviews");
    env.admin().grow_topic(&topic, PARTITIONS).await.unwrap();

    let records: Vec<sluice_testkit::RawRecord> = (0..REVIEWS)
        .map(|i| {
            let app = &apps[i % apps.len()];
            let value = review(i, app, "2026-11-02T10:00:00Z");
            (
                Some(format!("r-{i}").into_bytes()),
                Some(value.to_string().into_bytes()),
            )
        })
        .collect();
    let producing = Instant::now();
    sluice_testkit::produce(&env.stack, &topic, &records).await;
    drop(records);
    println!(
        "produced {REVIEWS} reviews in {:.1} s",
        producing.elapsed().as_secs_f64()
    );

    let common = [
        ("STORAGE_PIPELINES", "reviews"),
        ("STORAGE_MAX_POLL_RECORDS_REVIEWS", "200"),
        // A member that is gone for good (no restart with its id) keeps its partitions
        // until its session times out; keep that short here.
        ("STORAGE_SESSION_TIMEOUT_MS", "10000"),
    ];
    let spawn = |id: &str| {
        let mut extra = common.to_vec();
        extra.push(("STORAGE_INSTANCE_ID", id));
        env.spawn_run(id, &extra)
    };
    let started = Instant::now();
    let mut a = spawn("scale-a");
    let mut b = spawn("scale-b");
    let mut c = spawn("scale-c");
    let count = "SELECT count(*) FROM reviews";
    let seen = env
        .wait_rows(count, 30_000, &mut b, Duration::from_secs(120))
        .await;
    let members = env.group_members_now("reviews");
    b.child.kill().unwrap(); // SIGKILL, never restarted
    let status = b.wait(Duration::from_secs(10));
    assert_eq!(status.signal(), Some(9));
    let at_kill = env.count(count).await;
    println!(
        "scale-b SIGKILLed after {:.1} s with {seen}+ rows ({members} members in the group)",
        started.elapsed().as_secs_f64()
    );
    assert!(
        at_kill < REVIEWS as i64,
        "the kill came mid-ingest ({at_kill} rows)"
    );
    let mut d = spawn("scale-d");
    env.wait_caught_up("reviews", &mut d, Duration::from_secs(300))
        .await;
    println!(
        "caught up {:.1} s after the start",
        started.elapsed().as_secs_f64()
    );
    for run in [&mut a, &mut c, &mut d] {
        run.assert_alive();
        run.signal("TERM");
    }
    for run in [&mut a, &mut c, &mut d] {
        let status = run.wait(Duration::from_secs(60));
        assert_eq!(status.code(), Some(0), "clean stop: {status}");
    }

    assert_eq!(env.count(count).await, REVIEWS as i64, "every review once");
    assert_eq!(
        env.count("SELECT count(DISTINCT review_id) FROM reviews")
            .await,
        REVIEWS as i64
    );
    assert_eq!(
        env.count("SELECT count(*) FROM dead_letter_events").await,
        0
    );
    let admin = env.admin();
    let marks = admin.watermarks(&topic).unwrap();
    let committed = admin
        .committed_offsets(&env.group("reviews"), &topic)
        .unwrap();
    assert_eq!(marks.len(), PARTITIONS as usize);
    for m in &marks {
        let c = committed
            .iter()
            .find(|(p, _)| *p == m.partition)
            .and_then(|(_, o)| *o);
        assert_eq!(c, Some(m.high), "partition {} drained", m.partition);
    }
    let per_process: Vec<String> = [&a, &c, &d]
        .iter()
        .map(|r| {
            let totals = r.events_named("pipeline totals");
            format!(
                "{}",
                totals
                    .first()
                    .map_or(0, |t| t["records"].as_u64().unwrap_or(0))
            )
        })
        .collect();
    println!("records per surviving process (a, c, d): {per_process:?}");
    env.cleanup().await;
}
