//! Exactly once, not just effectively once: a batch's offsets are stored in PostgreSQL in the
//! batch's own transaction, so a crash between the database commit and the Kafka commit does
//! not apply the batch a second time. Against the real Kafka and PostgreSQL, through the
//! `sluice` binary (built with the `failpoints` feature by the dev-dependencies):
//!
//! 1. an always-update sink onto a table whose trigger logs every applied row; `sluice run` is
//!    killed by a failpoint after a batch's database commit and before its Kafka commit, again
//!    and again, during 100,000 records → the log holds exactly 100,000 applications;
//! 2. `replay --to earliest --execute` re-applies everything once: the log doubles exactly;
//! 3. a group with Kafka offsets only (the previous version's state) resumes where they are.
//!
//! The crashes of PostgreSQL under `synchronous_commit = off` are in `exactly_once_crash.rs`, a
//! test binary of their own: a crash of the shared server must not meet these tests' starts.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use std::time::{Duration, Instant};
use support::case::{Case, text};
use support::counted::{DDL, MAPPING};

const RECORDS: i64 = 100_000;
/// Batches an incarnation of `sluice run` stores before the failpoint kills it.
const KILL_AFTER: u64 = 25;

/// Runs `sluice run` (with the failpoint armed when `kill` is set) until an incarnation
/// survives and the group has committed every record; returns how many incarnations the
/// failpoint killed.
async fn run_through_kills(case: &Case, label: &str, kill: bool) -> u32 {
    let file = case.file.display().to_string();
    let failpoint = if kill {
        format!("storage-after-db-commit:{KILL_AFTER}")
    } else {
        String::new()
    };
    let (group, topic) = (case.env.group("counted"), case.topic("counted"));
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut kills = 0;
    loop {
        let mut run = case.env.spawn_run(
            &format!("{label}-{kills}"),
            &[
                ("SLUICE_SINKS_FILE", file.as_str()),
                ("SLUICE_FAILPOINT", failpoint.as_str()),
            ],
        );
        loop {
            if let Some(status) = run.child.try_wait().unwrap() {
                assert!(
                    run.tail().contains("failpoint reached"),
                    "sluice run exited on its own with {status}:\n{}",
                    run.tail()
                );
                kills += 1;
                break;
            }
            let offsets = case.env.admin().group_offsets(&group, &topic).unwrap();
            let end: i64 = offsets.iter().map(|p| p.high).sum();
            let committed: i64 = offsets.iter().map(|p| p.committed.unwrap_or(0)).sum();
            if end == RECORDS && committed == end {
                run.signal("TERM");
                assert!(
                    run.wait(Duration::from_secs(60)).success(),
                    "{}",
                    run.tail()
                );
                return kills;
            }
            assert!(
                Instant::now() < deadline,
                "{group}: committed {committed}/{end} after {kills} kills\n{}",
                run.tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test]
async fn a_crash_between_the_database_and_the_kafka_commit_applies_nothing_twice() {
    let Some(case) = Case::with_partitions(&["counted"], DDL, MAPPING, 3).await else {
        return;
    };
    case.assert_valid();
    let topic = case.topic("counted");
    let records: Vec<sluice_testkit::RawRecord> = (0..RECORDS)
        .map(|id| {
            (
                Some(id.to_string().into_bytes()),
                Some(format!(r#"{{"id": {id}, "v": {}}}"#, id * 7).into_bytes()),
            )
        })
        .collect();
    sluice_testkit::produce(&case.env.stack, &topic, &records).await;

    let kills = run_through_kills(&case, "ingest", true).await;
    let applied = case.rows("SELECT count(*)::text FROM applications").await;
    let rows = case
        .rows("SELECT count(*) || ' ' || sum(v) FROM counted")
        .await;
    eprintln!(
        "{RECORDS} records, {kills} kills after a database commit: {} applications",
        applied[0]
    );
    assert!(kills >= 5, "the failpoint fired {kills} times");
    assert_eq!(
        rows,
        [format!(
            "{RECORDS} {}",
            (0..RECORDS).map(|id| id * 7).sum::<i64>()
        )]
    );
    assert_eq!(
        applied,
        [RECORDS.to_string()],
        "every record applied exactly once"
    );

    // A replay from the beginning applies everything once more: the log doubles exactly.
    let file = case.file.display().to_string();
    let replay = case.env.output(
        &["replay", "counted", "--to", "earliest", "--execute"],
        &[("SLUICE_SINKS_FILE", file.as_str())],
    );
    assert_eq!(
        replay.status.code(),
        Some(0),
        "{}{}",
        text(&replay.stdout),
        text(&replay.stderr)
    );
    assert_eq!(run_through_kills(&case, "replayed", false).await, 0);
    assert_eq!(
        case.rows("SELECT count(*)::text FROM applications").await,
        [(2 * RECORDS).to_string()],
        "a replay re-applies each record once"
    );
    case.cleanup().await;
}

/// An existing deployment upgrades in place: a group whose offsets live in Kafka only (the
/// state before this version: no rows in `consumer_offsets`) resumes where Kafka's committed
/// offsets are — no record read again, none skipped.
#[tokio::test]
async fn a_group_with_kafka_offsets_only_resumes_where_they_are() {
    let mapping = MAPPING.replace("batch_size = 500", "batch_size = 100");
    let Some(case) = Case::with_partitions(&["counted"], DDL, &mapping, 3).await else {
        return;
    };
    let topic = case.topic("counted");
    let records = |range: std::ops::Range<i64>| -> Vec<sluice_testkit::RawRecord> {
        range
            .map(|id| {
                (
                    Some(id.to_string().into_bytes()),
                    Some(format!(r#"{{"id": {id}, "v": 1}}"#).into_bytes()),
                )
            })
            .collect()
    };
    sluice_testkit::produce(&case.env.stack, &topic, &records(0..1_000)).await;
    case.run_to_end("before").await;
    // What the previous version leaves behind: Kafka's committed offsets, nothing here.
    case.rows(
        "WITH gone AS (DELETE FROM consumer_offsets RETURNING 1), \
              groups AS (DELETE FROM consumer_offset_groups RETURNING 1) \
         SELECT (SELECT count(*) FROM gone) || ' ' || (SELECT count(*) FROM groups)",
    )
    .await;
    sluice_testkit::produce(&case.env.stack, &topic, &records(1_000..1_500)).await;
    let upgraded = case.run_to_end("upgraded").await;
    assert_eq!(
        case.rows("SELECT count(*)::text FROM applications").await,
        ["1500"],
        "the first 1,000 not applied again, the next 500 each once"
    );
    let adopted = upgraded.events_named(
        "the group's offsets now live in PostgreSQL (Kafka's committed offsets copied)",
    );
    assert_eq!(adopted.len(), 1, "{}", upgraded.tail());
    assert_eq!(adopted[0]["partitions"], 3, "{}", upgraded.tail());
    assert_eq!(
        case.rows("SELECT sum(next_offset)::text FROM consumer_offsets")
            .await,
        ["1500"]
    );
    case.cleanup().await;
}
