//! Server-side limits are transient (issue 10, item 4): a `lock_timeout` that fires while
//! another session holds a lock on a target row is retried on a fresh connection with the
//! back-off, and the batch lands once the lock is released. The pipeline never exits.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod common;

use common::*;
use sluice_core::PipelineKind;
use sqlx::Connection;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const REVIEW_ID: &str = "gp:review-1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_locked_past_lock_timeout_is_retried_until_the_lock_is_released() {
    let Some(fx) = Fixture::new().await else {
        return;
    };
    let apps = app_names(&fx.prefix, 1);
    fx.schema.register_apps(&apps).await;
    let app = &apps[0];
    let kind = PipelineKind::Reviews;

    // The pipeline's sessions give up on a lock after 200 ms (SQLSTATE 55P03).
    let url = format!("{}%20-c%20lock_timeout%3D200", fx.schema.url);
    let settings = fx.settings(
        &[kind],
        &[
            ("DATABASE_URL", url.as_str()),
            ("STORAGE_DB_RETRY_BASE_MS", "100"),
            ("STORAGE_DB_RETRY_MAX_ATTEMPTS", "8"),
        ],
    );
    fx.produce_json(
        kind,
        &[(app.clone(), review(1, app, "2026-11-03T08:00:00Z", 1))],
    )
    .await;
    let mut running = Some(fx.start(settings));
    fx.wait_caught_up(kind, Duration::from_secs(60)).await;

    // Another session locks the row, then a newer version of it arrives: its upsert must
    // wait for that lock, and lock_timeout ends each attempt after 200 ms.
    let mut holder = fx.conn().await;
    let holder_pid = sluice_testkit::backend_pid(&mut holder).await;
    let mut tx = holder.begin().await.unwrap();
    let thumbs: i32 =
        sqlx::query_scalar("SELECT thumbs_up_count FROM reviews WHERE review_id = $1 FOR UPDATE")
            .bind(REVIEW_ID)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    assert_eq!(thumbs, 1);
    fx.produce_json(
        kind,
        &[(app.clone(), review(1, app, "2026-11-04T08:00:00Z", 99))],
    )
    .await;

    // Hold the lock until two different backends have waited for it: an attempt timed out
    // and its retry came on a fresh connection. (Each wait lasts 200 ms: on a loaded machine
    // an observer polling every 10 ms can still miss one, and the retries are bounded, so
    // the test does not ask to see more of them.)
    let mut observer = fx.conn().await;
    let mut waiters = BTreeSet::new();
    let locked_at = Instant::now();
    while waiters.len() < 2 {
        assert_still_running(&mut running, locked_at, &waiters);
        waiters.extend(sluice_testkit::lock_waiters(&mut observer, holder_pid).await);
        assert!(
            locked_at.elapsed() < Duration::from_secs(60),
            "the pipeline did not retry on a fresh connection (waiters: {waiters:?})"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let held = locked_at.elapsed();
    tx.commit().await.unwrap();
    println!(
        "lock held {:.2} s; backends that waited for it: {waiters:?}",
        held.as_secs_f64()
    );

    // Released: the batch lands and its offset is committed, with the process still up.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert_still_running(&mut running, locked_at, &waiters);
        let thumbs = fx
            .count("SELECT thumbs_up_count::bigint FROM reviews WHERE review_id = 'gp:review-1'")
            .await;
        if thumbs == 99 {
            break;
        }
        assert!(Instant::now() < deadline, "the newer version never landed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    fx.wait_caught_up(kind, Duration::from_secs(60)).await;
    let landed = locked_at.elapsed();
    let totals = stop(running.take().unwrap());
    let report = totals[&kind].report;
    println!(
        "landed {:.2} s after the lock was taken; retries = {}",
        landed.as_secs_f64(),
        report.retries
    );
    assert!(report.retries >= 1, "{report:?}");
    assert_eq!(
        report.dead_lettered(),
        0,
        "a lock wait is never a dead letter"
    );
    assert_eq!(report.write.updated, 1, "{report:?}");
    assert_eq!(fx.count("SELECT count(*) FROM dead_letter_events").await, 0);
    fx.cleanup().await;
}

/// Panics with the pipelines' error if the supervisor has already returned (a line first
/// says how long after the lock, with which waiters seen: the start of a CI failure's output
/// is what is sure to be read).
fn assert_still_running(
    running: &mut Option<Running>,
    locked_at: Instant,
    waiters: &BTreeSet<i32>,
) {
    if running
        .as_ref()
        .is_some_and(|(_, handle)| handle.is_finished())
    {
        eprintln!(
            "DIAGNOSIS: the pipelines ended {:.2} s after the lock was taken; waiters seen: \
             {waiters:?}",
            locked_at.elapsed().as_secs_f64()
        );
        let (_, handle) = running.take().unwrap();
        match handle.join() {
            Ok(Ok(totals)) => panic!("the pipelines stopped on their own: {totals:?}"),
            Ok(Err(error)) => panic!("the pipelines failed: {error}"),
            Err(_) => panic!("the supervisor thread panicked"),
        }
    }
}
