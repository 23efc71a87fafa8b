//! The offset claim against a PostgreSQL whose stored offset is not where this process's
//! fetch continued from (docs/ARCHITECTURE.md#offsets), through the `sluice` binary on the
//! real stack, with the `counted` table whose trigger logs every applied row:
//!
//! 1. the stored offset *ahead* of a batch's first record (another owner applied part of
//!    it): the rest is stored in the same batch, no restart (issue 40, item 5);
//! 2. the stored offset *behind* where the fetch continued (it went back): the partition is
//!    rewound to it and the records from there are applied, once (item 6);
//! 3. a transactional producer's commit markers (offsets without a record) are no gap;
//! 4. a topic deleted and created again while `sluice run` runs: no spurious restart, and with
//!    `STORAGE_AUTO_OFFSET_RESET=latest` the new topic's records are not skipped (item 8);
//! 5. a topic deleted and created again while no `sluice run` runs, given more records than
//!    PostgreSQL's offset: read from its start, each record once; the same topic whose
//!    group's offsets Kafka no longer holds (expired) keeps PostgreSQL's.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use std::time::{Duration, Instant};
use support::Running;
use support::case::Case;
use support::counted::{DDL, MAPPING, records, slow_ddl};

/// What `sluice run` logs when a pipeline starts again after `Rewound` (or an unknown start).
const RESTART: &str = "starting the pipeline again from PostgreSQL's offsets";

fn spawn(case: &Case, label: &str, extra: &[(&str, &str)]) -> Running {
    let file = case.file.display().to_string();
    let mut vars = vec![("SLUICE_SINKS_FILE", file.as_str())];
    vars.extend_from_slice(extra);
    case.env.spawn_run(label, &vars)
}

/// Waits until `run` has logged `message` at least `times` times.
fn wait_logged(run: &mut Running, message: &str, times: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while run_events(run, message) < times {
        run.assert_alive();
        assert!(
            Instant::now() < deadline,
            "{times} x `{message}`: not within {timeout:?}\n{}",
            run.tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn run_events(run: &Running, message: &str) -> usize {
    run.events_named(message).len()
}

fn restarts(run: &Running) -> usize {
    std::fs::read_to_string(&run.log)
        .unwrap_or_default()
        .matches(RESTART)
        .count()
}

/// How many times each id was applied, as "id:times" for ids applied other than once, and
/// the total.
async fn applications(case: &Case) -> (i64, Vec<String>) {
    let total = case.env.count("SELECT count(*) FROM applications").await;
    let odd = case
        .rows(
            "SELECT id || ':' || count(*) FROM applications GROUP BY id \
             HAVING count(*) <> 1 ORDER BY id",
        )
        .await;
    (total, odd)
}

async fn stored_offset(case: &Case) -> i64 {
    case.env
        .count("SELECT coalesce(sum(next_offset), -1)::bigint FROM consumer_offsets")
        .await
}

/// Item 5: PostgreSQL's offset raised by 5 (another owner applied records 10–14) before the
/// batch 10–19: records 15–19 are stored by that batch, 10–14 counted as skipped, and the
/// pipeline does not start again.
#[tokio::test]
async fn a_batch_partly_applied_by_another_owner_stores_the_rest_without_a_restart() {
    let Some(case) = Case::new(&["counted"], DDL, MAPPING).await else {
        return;
    };
    let topic = case.topic("counted");
    let mut run = spawn(&case, "overlap", &[]);
    sluice_testkit::produce(&case.env.stack, &topic, &records(0..10)).await;
    let timeout = Duration::from_secs(60);
    case.env
        .wait_rows("SELECT count(*) FROM counted", 10, &mut run, timeout)
        .await;
    // Another owner (a rebalance while this process had a batch in flight) applied 10–14.
    case.rows("UPDATE consumer_offsets SET next_offset = next_offset + 5 RETURNING ''")
        .await;
    sluice_testkit::produce(&case.env.stack, &topic, &records(10..20)).await;
    case.env
        .wait_rows("SELECT count(*) FROM counted", 15, &mut run, timeout)
        .await;
    // The writer's idle check runs one second after its last commit: give it that.
    let settled = Instant::now() + Duration::from_secs(3);
    while Instant::now() < settled {
        run.assert_alive();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(restarts(&run), 0, "no restart:\n{}", run.tail());
    assert_eq!(
        case.rows("SELECT string_agg(id::text, ',' ORDER BY id) FROM counted WHERE id >= 10")
            .await,
        ["15,16,17,18,19"]
    );
    assert_eq!(applications(&case).await, (15, vec![]));
    assert_eq!(stored_offset(&case).await, 20);
    // The batch says what it did: 5 records skipped (applied before), 5 written.
    let batches = run.events_named("batch committed");
    let skipped: u64 = batches
        .iter()
        .map(|e| e["skipped"].as_u64().unwrap_or(0))
        .sum();
    let inserted: u64 = batches
        .iter()
        .map(|e| e["inserted"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!((inserted, skipped), (15, 5), "{batches:#?}");
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(60)).success(),
        "{}",
        run.tail()
    );
    case.cleanup().await;
}

/// Item 6: PostgreSQL's offset lowered from 10 to 5 after this process was assigned the
/// partition at 10 (the stored offset went back: `synchronous_commit = off`, a failover) and
/// before the next batch: the partition is rewound to 5, so records 5–19 are applied, each
/// once more, without a restart of the pipeline.
#[tokio::test]
async fn a_stored_offset_below_where_the_fetch_continued_rewinds_the_partition() {
    let Some(case) = Case::new(&["counted"], DDL, MAPPING).await else {
        return;
    };
    let topic = case.topic("counted");
    sluice_testkit::produce(&case.env.stack, &topic, &records(0..10)).await;
    case.run_to_end("before").await;
    assert_eq!(stored_offset(&case).await, 10);

    let mut run = spawn(&case, "rewound", &[]);
    let timeout = Duration::from_secs(60);
    wait_logged(
        &mut run,
        "partitions assigned at their stored offsets",
        1,
        timeout,
    );
    case.rows("UPDATE consumer_offsets SET next_offset = 5 RETURNING ''")
        .await;
    sluice_testkit::produce(&case.env.stack, &topic, &records(10..20)).await;
    case.env
        .wait_rows("SELECT count(*) FROM applications", 25, &mut run, timeout)
        .await;
    case.env
        .wait_rows(
            "SELECT count(*) FROM consumer_offsets WHERE next_offset = 20",
            1,
            &mut run,
            timeout,
        )
        .await;
    assert_eq!(
        applications(&case).await,
        (25, (5..10).map(|id| format!("{id}:2")).collect::<Vec<_>>()),
        "records 5–9 applied once more, every other once"
    );
    assert_eq!(restarts(&run), 0, "a seek, not a restart:\n{}", run.tail());
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(60)).success(),
        "{}",
        run.tail()
    );
    case.cleanup().await;
}

/// A transactional producer's commit marker takes an offset after each transaction's last
/// record (and an aborted transaction's records are never delivered): the next record is not
/// where the previous batch ended. That is no gap: three rounds of committed and aborted
/// transactions while `sluice run` runs → every committed record applied once, no restart.
#[tokio::test]
async fn transaction_markers_between_batches_are_no_gap() {
    let Some(case) = Case::new(&["counted"], DDL, MAPPING).await else {
        return;
    };
    let topic = case.topic("counted");
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &case.env.stack.bootstrap)
        .set("transactional.id", format!("{}-tx", case.env.prefix))
        .create()
        .unwrap();
    producer.init_transactions(Duration::from_secs(30)).unwrap();
    let mut run = spawn(&case, "transactions", &[]);
    let timeout = Duration::from_secs(60);
    let mut committed = 0;
    for round in 0..3i64 {
        for (tx, abort) in [(0, false), (1, true), (2, false)] {
            producer.begin_transaction().unwrap();
            let first = round * 100 + tx * 10;
            for (key, value) in records(first..first + 10) {
                let (key, value) = (key.unwrap(), value.unwrap());
                let record = FutureRecord::to(&topic).key(&key).payload(&value);
                producer
                    .send(record, Duration::from_secs(30))
                    .await
                    .unwrap();
            }
            if abort {
                producer.abort_transaction(Duration::from_secs(30)).unwrap();
            } else {
                producer
                    .commit_transaction(Duration::from_secs(30))
                    .unwrap();
                committed += 10;
            }
        }
        case.env
            .wait_rows("SELECT count(*) FROM counted", committed, &mut run, timeout)
            .await;
    }
    let settled = Instant::now() + Duration::from_secs(3);
    while Instant::now() < settled {
        run.assert_alive();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(restarts(&run), 0, "{}", run.tail());
    assert_eq!(
        run_events(
            &run,
            "PostgreSQL's offset is behind where this partition was read from; rewinding the partition to it"
        ),
        0,
        "{}",
        run.tail()
    );
    assert_eq!(applications(&case).await, (60, vec![]));
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(60)).success(),
        "{}",
        run.tail()
    );
    case.cleanup().await;
}

async fn admin(case: &Case) -> rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", &case.env.stack.bootstrap)
        .create()
        .unwrap()
}

async fn delete(case: &Case, topic: &str) {
    let options =
        rdkafka::admin::AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    admin(case)
        .await
        .delete_topics(&[topic], &options)
        .await
        .unwrap();
}

/// Creates `topic` again with one partition, retrying while the broker finishes deleting it.
async fn create_again(case: &Case, topic: &str) {
    use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
    let admin = admin(case).await;
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let new = NewTopic::new(topic, 1, TopicReplication::Fixed(1));
        match &admin.create_topics([&new], &options).await.unwrap()[0] {
            Ok(_) => break,
            Err((_, error)) => {
                assert!(Instant::now() < deadline, "re-create {topic}: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// `sluice run` with `STORAGE_AUTO_OFFSET_RESET=latest` that has stored records 0–9 of its
/// one-partition topic (PostgreSQL's offset 10).
async fn running_with_ten_stored(case: &Case, label: &str) -> Running {
    let topic = case.topic("counted");
    let mut run = spawn(case, label, &[("STORAGE_AUTO_OFFSET_RESET", "latest")]);
    let timeout = Duration::from_secs(60);
    wait_logged(
        &mut run,
        "partitions assigned at their stored offsets",
        1,
        timeout,
    );
    sluice_testkit::produce(&case.env.stack, &topic, &records(0..10)).await;
    case.env
        .wait_rows("SELECT count(*) FROM counted", 10, &mut run, timeout)
        .await;
    run
}

/// After the topic came back: records 100–109 produced to it land, each once, and the
/// pipeline never started again.
async fn the_new_topics_records_land(case: &Case, mut run: Running) {
    let topic = case.topic("counted");
    sluice_testkit::produce(&case.env.stack, &topic, &records(100..110)).await;
    let timeout = Duration::from_secs(60);
    case.env
        .wait_rows("SELECT count(*) FROM counted", 20, &mut run, timeout)
        .await;
    let settled = Instant::now() + Duration::from_secs(3);
    while Instant::now() < settled {
        run.assert_alive();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(restarts(&run), 0, "{}", run.tail());
    assert_eq!(applications(case).await, (20, vec![]));
    assert_eq!(stored_offset(case).await, 10, "the new log's offset");
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(60)).success(),
        "{}",
        run.tail()
    );
}

/// Item 8, the topic created again at once: the consumer keeps its assignment and the client
/// resets its position on the new, empty partition (to its end, 0: `latest`). The records
/// produced right after land, although PostgreSQL's offset (10) is of the old log.
#[tokio::test]
async fn a_topic_created_again_at_once_while_running_loses_nothing() {
    let Some(case) = Case::new(&["counted"], DDL, MAPPING).await else {
        return;
    };
    let topic = case.topic("counted");
    let mut run = running_with_ten_stored(&case, "at-once").await;
    delete(&case, &topic).await;
    create_again(&case, &topic).await;
    // The client finds offset 10 out of range on the new partition and resets to its end.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&run.log)
        .unwrap_or_default()
        .contains("offset reset (at offset 10")
    {
        run.assert_alive();
        assert!(
            Instant::now() < deadline,
            "no offset reset:\n{}",
            run.tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    the_new_topics_records_land(&case, run).await;
    case.cleanup().await;
}

/// The warning of a stored offset discarded because the topic is another now.
const DISCARDED: &str = "the stored offset is no position in the partition as it is now (the topic \
     was created again, or its records removed): the partition starts at its beginning";

/// Deletes `group` in Kafka (its committed offsets with it, as Kafka's retention expires
/// them), retrying while the stopped process's static membership has not timed out yet.
async fn delete_group(case: &Case, group: &str) {
    let admin = admin(case).await;
    let options =
        rdkafka::admin::AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match &admin.delete_groups(&[group], &options).await.unwrap()[0] {
            Ok(_) => return,
            Err((_, error)) => {
                assert!(Instant::now() < deadline, "delete group {group}: {error}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// A topic created again while nothing ran, then given 25 records: PostgreSQL's offset (10)
/// lies inside the new log, so only two signs together tell: Kafka holds no committed offset
/// of the group any more, and the record at 9 is not the one read there (another timestamp).
/// The offset is discarded and the new log is read from its start, although
/// `STORAGE_AUTO_OFFSET_RESET=latest`. Then the group's Kafka offsets are deleted with the
/// topic left alone (what Kafka's offset retention does to a group stopped for a week):
/// PostgreSQL's offset is kept, nothing is applied twice.
#[tokio::test]
async fn a_topic_created_again_while_stopped_is_read_from_its_start() {
    let Some(mut case) = Case::new(&["counted"], DDL, MAPPING).await else {
        return;
    };
    let topic = case.topic("counted");
    sluice_testkit::produce(&case.env.stack, &topic, &records(0..10)).await;
    case.run_to_end("before").await;
    assert_eq!(stored_offset(&case).await, 10);
    // The reset position is for a partition never stored: a log that replaced the one read
    // is read from its start whatever it says.
    case.env
        .vars
        .insert("STORAGE_AUTO_OFFSET_RESET".into(), "latest".into());
    delete(&case, &topic).await;
    create_again(&case, &topic).await;
    sluice_testkit::produce(&case.env.stack, &topic, &records(100..125)).await;
    let run = case.run_to_end("created-again").await;
    let discarded = run.events_named(DISCARDED);
    assert!(
        discarded.len() == 1
            && discarded[0]["sign"]
                .as_str()
                .is_some_and(|s| s.contains("Kafka holds no committed offset")),
        "{discarded:?}\n{}",
        run.tail()
    );
    assert_eq!(applications(&case).await, (35, vec![]));
    assert_eq!(case.env.count("SELECT count(*) FROM counted").await, 35);
    assert_eq!(stored_offset(&case).await, 25);

    delete_group(&case, &case.env.group("counted")).await;
    sluice_testkit::produce(&case.env.stack, &topic, &records(200..205)).await;
    let run = case.run_to_end("expired").await;
    assert!(run.events_named(DISCARDED).is_empty(), "{}", run.tail());
    assert_eq!(
        applications(&case).await,
        (40, vec![]),
        "nothing applied twice"
    );
    assert_eq!(stored_offset(&case).await, 30);
    case.cleanup().await;
}

/// Item 5 under load, as it was seen: two `sluice run` processes share the group, every
/// batch's transaction lasts at least 0.5 s (a statement trigger sleeps: the longer a batch is
/// in flight, the likelier a rebalance meets one), and a third process
/// joins and leaves mid-stream (three rebalances, batches in flight at each). Every record is
/// applied exactly once and no process starts its pipeline again.
#[tokio::test]
async fn rebalances_with_batches_in_flight_apply_once_and_restart_nothing() {
    const RECORDS: i64 = 6_000;
    let ddl = slow_ddl(0.5);
    let mapping = MAPPING.replace("batch_size = 500", "batch_size = 100");
    let Some(case) = Case::with_partitions(&["counted"], &ddl, &mapping, 6).await else {
        return;
    };
    let topic = case.topic("counted");
    sluice_testkit::produce(&case.env.stack, &topic, &records(0..RECORDS)).await;
    let member = |id: &str| spawn(&case, id, &[("STORAGE_INSTANCE_ID", id)]);
    let mut a = member("load-a");
    let mut b = member("load-b");
    let timeout = Duration::from_secs(300);
    let applied = "SELECT count(*) FROM applications";
    case.env.wait_rows(applied, 500, &mut a, timeout).await;
    let mut c = member("load-c");
    wait_logged(&mut c, "batch committed", 3, timeout);
    let at_leave = case.env.count(applied).await;
    c.signal("TERM");
    assert!(c.wait(Duration::from_secs(60)).success(), "{}", c.tail());
    assert!(
        at_leave < RECORDS,
        "the third process left mid-stream ({at_leave} applied)"
    );
    // PostgreSQL's offsets, not Kafka's: a Kafka commit refused during a rebalance is not
    // made again until the partition's next batch, and there may be none.
    case.env
        .wait_rows(
            &format!("SELECT count(*) FROM consumer_offsets HAVING sum(next_offset) = {RECORDS}"),
            1,
            &mut a,
            timeout,
        )
        .await;
    // The writers' idle check runs one second after their last commit: give it that.
    let settled = Instant::now() + Duration::from_secs(3);
    while Instant::now() < settled {
        b.assert_alive();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for run in [&mut a, &mut b] {
        run.assert_alive();
        run.signal("TERM");
    }
    for run in [&mut a, &mut b] {
        assert!(
            run.wait(Duration::from_secs(60)).success(),
            "{}",
            run.tail()
        );
    }
    let restarted: Vec<usize> = [&a, &b, &c].iter().map(|r| restarts(r)).collect();
    let skipped: u64 = [&a, &b, &c]
        .iter()
        .flat_map(|r| r.events_named("batch committed"))
        .map(|e| e["skipped"].as_u64().unwrap_or(0))
        .sum();
    eprintln!(
        "{RECORDS} records; restarts per process {restarted:?}; {skipped} records skipped as \
         applied before"
    );
    assert_eq!(
        restarted,
        [0, 0, 0],
        "no process started its pipeline again"
    );
    assert_eq!(applications(&case).await, (RECORDS, vec![]));
    assert_eq!(
        case.env.count("SELECT count(*) FROM counted").await,
        RECORDS
    );
    case.cleanup().await;
}
