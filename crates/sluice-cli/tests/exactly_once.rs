//! Exactly once, not just effectively once: a batch's offsets are stored in PostgreSQL in the
//! batch's own transaction, so a crash between the database commit and the Kafka commit does
//! not apply the batch a second time. Against the real Kafka and PostgreSQL, through the
//! `sluice` binary (built with the `failpoints` feature by the dev-dependencies):
//!
//! 1. an always-update sink onto a table whose trigger logs every applied row; `sluice run` is
//!    killed by a failpoint after a batch's database commit and before its Kafka commit, again
//!    and again, during 100,000 records → the log holds exactly 100,000 applications;
//! 2. `replay --to earliest --execute` re-applies everything once: the log doubles exactly;
//! 3. a group with Kafka offsets only (the previous version's state) resumes where they are;
//! 4. with `STORAGE_SYNCHRONOUS_COMMIT=off`, three crashes of PostgreSQL (`pg-restart
//!    immediate`) and two SIGKILLs of sluice during an ingest: exact rows, exact applications,
//!    no dead letters.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use std::time::{Duration, Instant};
use support::case::{Case, text};

const RECORDS: i64 = 100_000;
/// Batches an incarnation of `sluice run` stores before the failpoint kills it.
const KILL_AFTER: u64 = 25;

const DDL: &str = r"
    CREATE TABLE counted (id BIGINT PRIMARY KEY, v BIGINT NOT NULL);
    CREATE TABLE applications (id BIGINT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());
    CREATE FUNCTION log_application() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO applications (id) VALUES (NEW.id);
        RETURN NEW;
    END $$;
    CREATE TRIGGER counted_applied AFTER INSERT OR UPDATE ON counted
        FOR EACH ROW EXECUTE FUNCTION log_application();";

const MAPPING: &str = r#"
[[sink]]
name = "counted"
topic = "{prefix}-counted"
table = "counted"
key = ["id"]
conflict = "always-update"
batch_size = 500
[sink.columns]
id = { field = "id" }
v = { field = "v" }
"#;

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

/// `scripts/stack pg-restart immediate`: PostgreSQL crashes (no checkpoint, no flush of
/// asynchronous commits) and comes back.
fn crash_postgres(case: &Case) {
    let script = std::env::var("SLUICE_STACK").expect("SLUICE_STACK (from scripts/stack env)");
    let mut command = std::process::Command::new(&script);
    command.args(["pg-restart", "immediate"]);
    if let Some(port) = case
        .env
        .stack
        .database_url
        .rsplit(':')
        .next()
        .and_then(|rest| rest.split('/').next())
    {
        command.env("SLUICE_PG_PORT", port);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "pg-restart immediate: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

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
                crash_postgres(&case);
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
