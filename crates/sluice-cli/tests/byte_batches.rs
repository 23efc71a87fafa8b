//! Batches bounded in bytes (issue 41, docs/ARCHITECTURE.md#memory) lose and repeat nothing,
//! against the real Kafka and PostgreSQL through the `sluice` binary, on the table whose
//! trigger logs every applied row (`support::counted`), with records of mixed sizes so that
//! batches close on their bytes, records larger than the budget go alone and one poll holds
//! several batches' bytes:
//!
//! 1. a sink whose `batch_bytes` is below librdkafka's `message.max.bytes` (1,000,000) starts
//!    and stores every record once;
//! 2. so does a `sluice run` whose `KAFKA_MESSAGE_MAX_BYTES` is above a sink's `batch_bytes`;
//! 3. two `sluice run` in one group, each killed again and again by the failpoint after a
//!    batch's database commit (before its Kafka commit), and so rebalancing all the time:
//!    every record is applied exactly once.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use std::time::{Duration, Instant};
use support::Running;
use support::case::Case;
use support::counted::DDL;

/// The counted sink with batches of up to 50 records and `{bytes}` bytes.
const MAPPING: &str = r#"
[[sink]]
name = "counted"
topic = "{prefix}-counted"
table = "counted"
key = ["id"]
conflict = "always-update"
batch_size = 50
batch_bytes = {bytes}
[sink.columns]
id = { field = "id" }
v = { field = "v" }
"#;

fn mapping(batch_bytes: usize) -> String {
    MAPPING.replace("{bytes}", &batch_bytes.to_string())
}

/// Record `id`'s value: `{"id": id, "v": 7 id, "pad": "<letters>"}` of about `size` bytes
/// (`pad` is mapped to no column; the letters keep Kafka's compression out of the sizes).
fn value(id: i64, size: usize) -> Vec<u8> {
    let mut x = (id as u64).wrapping_mul(2_654_435_761) + 1;
    let pad: String = (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect();
    format!(r#"{{"id": {id}, "v": {}, "pad": "{pad}"}}"#, id * 7).into_bytes()
}

/// Produces records 0..n, record `id` of `size(id)` bytes, keyed by `id % 7` (3 partitions:
/// each partition's runs mix sizes).
async fn produce(case: &Case, n: i64, size: impl Fn(i64) -> usize) {
    let records: Vec<sluice_testkit::RawRecord> = (0..n)
        .map(|id| {
            (
                Some((id % 7).to_string().into_bytes()),
                Some(value(id, size(id))),
            )
        })
        .collect();
    for chunk in records.chunks(100) {
        sluice_testkit::produce(&case.env.stack, &case.topic("counted"), chunk).await;
    }
}

/// Every record applied once: `n` rows, their sum, and `n` applications.
async fn assert_each_once(case: &Case, n: i64) {
    assert_eq!(
        case.rows("SELECT count(*) || ' ' || coalesce(sum(v), 0) FROM counted")
            .await,
        [format!("{n} {}", (0..n).map(|id| id * 7).sum::<i64>())],
        "every record's row"
    );
    assert_eq!(
        case.rows("SELECT count(*)::text FROM applications").await,
        [n.to_string()],
        "every record applied exactly once"
    );
}

/// A budget of 64 KiB: batches of a few records, every tenth record (150 KB) alone.
#[tokio::test]
async fn a_sink_whose_batch_bytes_is_below_a_megabyte_stores_every_record_once() {
    let Some(case) = Case::with_partitions(&["counted"], DDL, &mapping(65_536), 3).await else {
        return;
    };
    case.assert_valid();
    const N: i64 = 300;
    produce(&case, N, |id| {
        if id % 10 == 0 {
            150_000
        } else {
            2_000 + (id as usize * 7_919) % 30_000
        }
    })
    .await;
    case.run_to_end("small-budget").await;
    assert_each_once(&case, N).await;
    case.cleanup().await;
}

/// The default budget (4 MiB) with the clients' `message.max.bytes` raised to 8 MiB (as for a
/// topic of large records): the consumer must still start.
#[tokio::test]
async fn a_message_max_bytes_above_the_batch_bytes_still_runs() {
    let Some(mut case) = Case::with_partitions(&["counted"], DDL, &mapping(4 << 20), 3).await
    else {
        return;
    };
    case.env
        .vars
        .insert("KAFKA_MESSAGE_MAX_BYTES".into(), (8 << 20).to_string());
    const N: i64 = 100;
    produce(&case, N, |id| 1_000 + id as usize * 100).await;
    case.run_to_end("large-messages").await;
    assert_each_once(&case, N).await;
    case.cleanup().await;
}

/// Batches stored by an incarnation before the failpoint kills it.
const KILL_AFTER: u64 = 8;

/// Two incarnations of `sluice run` in the sink's group, each killed by the failpoint after
/// its [`KILL_AFTER`]th stored batch (database committed, Kafka not) and started again at
/// once, until the group has committed every record; then one clean incarnation. Returns the
/// kills.
async fn run_with_kills_and_rebalances(case: &Case, n: i64) -> u32 {
    let file = case.file.display().to_string();
    let failpoint = format!("storage-after-db-commit:{KILL_AFTER}");
    let (group, topic) = (case.env.group("counted"), case.topic("counted"));
    let spawn = |label: String| -> Running {
        case.env.spawn_run(
            &label,
            &[
                ("SLUICE_SINKS_FILE", file.as_str()),
                ("SLUICE_FAILPOINT", failpoint.as_str()),
                // A killed member's partitions move on after the session timeout (the
                // broker's least).
                ("STORAGE_SESSION_TIMEOUT_MS", "6000"),
                // Dynamic membership: every incarnation joins anew, and so rebalances.
                ("STORAGE_INSTANCE_ID", "off"),
            ],
        )
    };
    let mut started = 0u32;
    let mut runs: Vec<Running> = (0..2)
        .map(|_| {
            started += 1;
            spawn(format!("kill-{started}"))
        })
        .collect();
    let mut kills = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        for run in &mut runs {
            if let Some(status) = run.child.try_wait().unwrap() {
                assert!(
                    run.tail().contains("failpoint reached"),
                    "sluice run exited on its own with {status}:\n{}",
                    run.tail()
                );
                kills += 1;
                started += 1;
                *run = spawn(format!("kill-{started}"));
            }
        }
        let offsets = case.env.admin().group_offsets(&group, &topic).unwrap();
        let end: i64 = offsets.iter().map(|p| p.high).sum();
        let committed: i64 = offsets.iter().map(|p| p.committed.unwrap_or(0)).sum();
        if end == n && committed == end {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{group}: committed {committed}/{end} after {kills} kills\n{}",
            runs[0].tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for run in &mut runs {
        if run.child.try_wait().unwrap().is_none() {
            run.signal("TERM");
            let status = run.wait(Duration::from_secs(60));
            assert!(
                status.success() || run.tail().contains("failpoint reached"),
                "{}",
                run.tail()
            );
        }
    }
    kills
}

/// A budget of 1 MiB with records up to 700 KB: most batches close on their bytes.
#[tokio::test]
async fn kills_and_rebalances_between_byte_batches_apply_each_record_once() {
    let Some(case) = Case::with_partitions(&["counted"], DDL, &mapping(1 << 20), 3).await else {
        return;
    };
    const N: i64 = 240;
    produce(&case, N, |id| match id % 5 {
        0 => 700_000,
        1 => 300_000,
        _ => 1_000 + (id as usize * 7_919) % 60_000,
    })
    .await;
    let kills = run_with_kills_and_rebalances(&case, N).await;
    eprintln!("{N} records, {kills} kills after a database commit");
    assert!(kills >= 3, "the failpoint fired {kills} times");
    assert_each_once(&case, N).await;
    case.cleanup().await;
}
