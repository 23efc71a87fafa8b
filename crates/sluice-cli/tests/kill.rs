//! `kill -9` in the middle of an ingest, again and again (acceptance item 8; docs/ARCHITECTURE.md#guarantees,
//! S3.1): the real `sluice run` binary is SIGKILLed while it writes reviews, restarted,
//! killed again, and finally left to catch up and stopped with SIGTERM. Whatever a kill
//! interrupted (a batch before its COMMIT, or between its COMMIT and the offset commit) is
//! redelivered; the end state is exactly the newest version of every review, once, with no
//! dead letter.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};
use support::*;

/// Distinct review ids.
const DISTINCT: usize = 40_000;
/// Extra versions of existing reviews (a re-crawl), newer or older than the original.
const RECRAWLS: usize = 10_000;
/// How many times the binary is SIGKILLed.
const KILLS: usize = 3;
/// Rows a run must add before it is killed: the kill comes mid-ingest, after progress.
const PROGRESS: i64 = 3_000;

/// One version of a review; `version` picks the values, `synced_us` orders the versions.
fn review(id: usize, package: &str, version: usize, synced_us: i64) -> Value {
    let synced = chrono::DateTime::from_timestamp_micros(synced_us).unwrap();
    json!({
        "review_id": format!("gp:kill-{id}"),
        "package_name": package,
        "user_name": format!("user {id}"),
        "score": version % 5 + 1,
        "content": format!("review {id}, version {version}"),
        "thumbs_up_count": version,
        "app_version": "4.5.6",
        "at": "2026-11-01T10:00:00Z",
        "last_synced_at": synced.to_rfc3339(),
    })
}

/// What a review's row must end as: (score, content, thumbs_up_count, last_synced_at µs).
type Want = (i16, String, i32, i64);

fn want(id: usize, version: usize, synced_us: i64) -> Want {
    (
        (version % 5 + 1) as i16,
        format!("review {id}, version {version}"),
        version as i32,
        synced_us,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_ingest_then_restart_loses_and_duplicates_nothing() {
    let Some(env) = Env::new().await else {
        return;
    };
    let apps: Vec<String> = (0..20)
        .map(|i| format!("com.{}.app{i}", env.prefix.replace('-', "_")))
        .collect();
    env.schema.register_apps(&apps).await;

    // Originals of every review, plus re-crawls of some: half newer, half older than the
    // original, a third of them produced before it. The key is the package name, so all
    // versions of a review share a partition; the monotonic guard must keep the newest
    // whatever the order and however often a batch is redelivered.
    let base_us = 1_793_700_000_000_000; // 2026-11-03
    let day_us = 86_400_000_000;
    let mut expected: BTreeMap<String, Want> = BTreeMap::new();
    let mut early = Vec::new();
    let mut recrawls_of: BTreeMap<usize, (String, Value)> = BTreeMap::new();
    for j in 0..RECRAWLS {
        let id = j * 7 % DISTINCT; // distinct for j < DISTINCT (7 and 40,000 are coprime)
        let app = &apps[id % apps.len()];
        let version = 100_000 + j;
        let synced = if j % 2 == 0 {
            base_us + day_us + j as i64
        } else {
            base_us - day_us + j as i64
        };
        if j % 2 == 0 {
            expected.insert(format!("gp:kill-{id}"), want(id, version, synced));
        }
        let message = (app.clone(), review(id, app, version, synced));
        if j % 3 == 0 {
            early.push(message);
        } else {
            recrawls_of.insert(id, message);
        }
    }
    let mut messages = early;
    for id in 0..DISTINCT {
        let app = &apps[id % apps.len()];
        let version = id % 1000;
        let synced = base_us + id as i64;
        messages.push((app.clone(), review(id, app, version, synced)));
        expected
            .entry(format!("gp:kill-{id}"))
            .or_insert_with(|| want(id, version, synced));
        if let Some(recrawl) = recrawls_of.remove(&id) {
            messages.push(recrawl);
        }
    }
    assert_eq!(messages.len(), DISTINCT + RECRAWLS);
    assert_eq!(expected.len(), DISTINCT);
    env.produce_json("reviews", &messages).await;

    let extra = [
        ("STORAGE_PIPELINES", "reviews"),
        ("STORAGE_MAX_POLL_RECORDS_REVIEWS", "200"),
        // The default session timeout: the dead process's membership outlives it by 45 s,
        // and static membership (the same STORAGE_INSTANCE_ID) must make that irrelevant.
        ("STORAGE_SESSION_TIMEOUT_MS", "45000"),
        ("STORAGE_INSTANCE_ID", "kill-test"),
    ];
    // Restart to first committed batch, asserted loosely (the target is 5 s).
    let restart_bound = Duration::from_secs(15);
    let count = "SELECT count(*) FROM reviews";
    let started = Instant::now();
    let mut rows = 0;
    for k in 1..=KILLS {
        let spawned = Instant::now();
        let mut run = env.spawn_run(&format!("run-{k}"), &extra);
        if k > 1 {
            let first = run.first_batch(spawned, Duration::from_secs(120));
            println!(
                "run-{k}: first committed batch {:.2} s after the restart",
                first.as_secs_f64()
            );
            assert!(first < restart_bound, "run-{k} resumed after {first:?}");
        }
        let seen = env
            .wait_rows(count, rows + PROGRESS, &mut run, Duration::from_secs(120))
            .await;
        run.child.kill().unwrap(); // SIGKILL
        let status = run.wait(Duration::from_secs(10));
        assert_eq!(status.signal(), Some(9), "run-{k} was SIGKILLed: {status}");
        rows = env.count(count).await;
        let (end, committed) = env.offsets("reviews");
        println!(
            "run-{k} SIGKILLed after {:.2} s with {seen}+ rows: {rows} rows, \
             committed {committed} of {end} offsets",
            started.elapsed().as_secs_f64()
        );
        assert!(
            rows < DISTINCT as i64,
            "run-{k} was killed mid-ingest ({rows} of {DISTINCT} rows)"
        );
    }

    // The last run: catch up, then a graceful stop.
    let spawned = Instant::now();
    let mut run = env.spawn_run("final", &extra);
    let first = run.first_batch(spawned, Duration::from_secs(120));
    println!(
        "final run: first committed batch {:.2} s after the restart",
        first.as_secs_f64()
    );
    assert!(
        first < restart_bound,
        "the final run resumed after {first:?}"
    );
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(300))
        .await;
    run.signal("TERM");
    let status = run.wait(Duration::from_secs(30));
    assert_eq!(
        status.code(),
        Some(0),
        "exit status after SIGTERM: {status}"
    );
    println!(
        "caught up and stopped after {:.2} s",
        started.elapsed().as_secs_f64()
    );

    let (end, committed) = env.offsets("reviews");
    assert_eq!(end, (DISTINCT + RECRAWLS) as i64);
    assert_eq!(committed, end, "every offset committed");
    assert_eq!(
        env.count("SELECT count(*) FROM dead_letter_events").await,
        0,
        "no dead letter"
    );

    // Exactly one row per review id, each holding its newest version.
    let mut conn = env.schema.connect().await;
    let got: Vec<(String, i16, String, i32, i64)> = sqlx::query_as(
        "SELECT review_id, score, content, thumbs_up_count,
                (extract(epoch FROM last_synced_at) * 1000000)::bigint
         FROM reviews",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(got.len(), DISTINCT, "one row per distinct review_id");
    let got: BTreeMap<String, Want> = got
        .into_iter()
        .map(|(id, score, content, thumbs, synced)| (id, (score, content, thumbs, synced)))
        .collect();
    let wrong: Vec<_> = expected
        .iter()
        .filter(|(id, want)| got.get(*id) != Some(want))
        .take(5)
        .map(|(id, want)| format!("{id}: want {want:?}, got {:?}", got.get(id)))
        .collect();
    assert!(
        wrong.is_empty(),
        "rows differ from the newest versions:\n{}",
        wrong.join("\n")
    );

    // The final run inserted exactly the rows that were missing; everything else it saw
    // again (redelivered after a kill) changed nothing or moved a row forward.
    let totals = run.events_named("pipeline totals");
    assert_eq!(totals.len(), 1, "one totals line for the reviews pipeline");
    println!("final run: {}", totals[0]);
    assert_eq!(
        totals[0]["inserted"],
        json!(DISTINCT as i64 - rows),
        "the final run inserted the missing rows: {}",
        totals[0]
    );
    assert_eq!(totals[0]["dead_lettered"], json!(0));
    env.cleanup().await;
}
