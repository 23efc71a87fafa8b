//! Exactly once through crashes of PostgreSQL itself: with `STORAGE_SYNCHRONOUS_COMMIT=off`,
//! three crashes of PostgreSQL (`pg-restart immediate`) and two SIGKILLs of sluice during an
//! ingest → exact rows, exact applications (a trigger logs each), no dead letters. A binary of
//! its own: the crashes must not meet another test's connection to the shared server.
//!
//! sluice-test: alone (it crashes the shared PostgreSQL):
//! `scripts/test-all` runs this binary with no other test binary beside it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use std::time::{Duration, Instant};
use support::case::Case;
use support::counted::{DDL, MAPPING};

/// With `STORAGE_SYNCHRONOUS_COMMIT=off` a crash of PostgreSQL loses the last batches it
/// acknowledged — rows and offsets together — while Kafka's committed offsets may have moved
/// past them. PostgreSQL's offsets win: three crashes of PostgreSQL and two SIGKILLs of sluice
/// during an ingest, and every record is applied exactly once, none dead-lettered.
#[tokio::test]
async fn crashes_of_postgresql_without_synchronous_commit_lose_and_repeat_nothing() {
    const WAVES: i64 = 10;
    const WAVE: i64 = 4_000;
    let Some(case) = Case::with_partitions(&["counted"], DDL, MAPPING, 3).await else {
        return;
    };
    let topic = case.topic("counted");
    let file = case.file.display().to_string();
    let spawn = |n: u32| {
        case.env.spawn_run(
            &format!("crash-{n}"),
            &[
                ("SLUICE_SINKS_FILE", file.as_str()),
                ("STORAGE_SYNCHRONOUS_COMMIT", "off"),
                ("STORAGE_DB_RETRY_MAX_ATTEMPTS", "8"),
                ("STORAGE_DB_RETRY_BASE_MS", "250"),
            ],
        )
    };
    let mut runs = 0;
    let mut run = spawn(runs);
    let (mut crashes, mut kills) = (0, 0);
    for wave in 0..WAVES {
        let records: Vec<sluice_testkit::RawRecord> = (wave * WAVE..(wave + 1) * WAVE)
            .map(|id| {
                (
                    Some(id.to_string().into_bytes()),
                    Some(format!(r#"{{"id": {id}, "v": {}}}"#, id * 7).into_bytes()),
                )
            })
            .collect();
        sluice_testkit::produce(&case.env.stack, &topic, &records).await;
        // Let the wave start landing, then strike in the middle of it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        match wave {
            1 | 4 | 7 => {
                support::database::crash_postgres(&case.env.stack);
                crashes += 1;
            }
            3 | 6 => {
                run.signal("KILL");
                let _ = run.wait(Duration::from_secs(10));
                kills += 1;
                runs += 1;
                run = spawn(runs);
            }
            _ => {}
        }
        run.assert_alive();
    }
    let (group, end) = (case.env.group("counted"), WAVES * WAVE);
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        run.assert_alive();
        let offsets = case.env.admin().group_offsets(&group, &topic).unwrap();
        let committed: i64 = offsets.iter().map(|p| p.committed.unwrap_or(0)).sum();
        let applied = case.rows("SELECT count(*)::text FROM counted").await;
        if committed == end && applied == [end.to_string()] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "committed {committed}/{end}, {applied:?} rows\n{}",
            run.tail()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(60)).success(),
        "{}",
        run.tail()
    );
    let restarts: usize = (0..=runs)
        .map(|n| {
            let log = case.env.dir.join(format!("crash-{n}.log"));
            std::fs::read_to_string(log)
                .unwrap_or_default()
                .matches("starting the pipeline again from PostgreSQL's offsets")
                .count()
        })
        .sum();
    eprintln!(
        "{end} records, {crashes} crashes of PostgreSQL, {kills} SIGKILLs; \
         {restarts} in-process restarts from PostgreSQL's offsets"
    );
    assert_eq!(
        case.rows("SELECT count(*) || ' ' || sum(v) FROM counted")
            .await,
        [format!("{end} {}", (0..end).map(|id| id * 7).sum::<i64>())]
    );
    assert_eq!(
        case.rows("SELECT count(*)::text FROM applications").await,
        [end.to_string()],
        "every record applied exactly once"
    );
    assert_eq!(
        case.rows("SELECT count(*)::text FROM dead_letter_events")
            .await,
        ["0"]
    );
    case.cleanup().await;
}
