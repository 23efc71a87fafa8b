//! A pipeline's memory is bounded in bytes, whatever the record size
//! (docs/operations.md#deploy, Memory): records of ~1 KB, ~100 KB and ~900 KB, produced
//! uncompressed to a 3-partition topic before `sluice run` starts, go through one declared
//! always-update sink with the default settings; every row lands and the process's peak RSS
//! (`VmHWM`) stays within [`PEAK_RSS_LIMIT_MIB`].
//! Before batches and the read-ahead were bounded in bytes, 1,000 records of 900 KB took the
//! process to 2.6 GB (500-record batches, four of them read ahead per writer).
//!
//! The outbox likewise: 1,200 events of 900 KB through three `sluice dispatch` processes are
//! each published once, and each process stays within the same bound (claims bounded in bytes,
//! `OUTBOX_BATCH_BYTES`, and the producer's queue with them).
//!
//! The cases run one after the other (a lock): each measures its own processes, and two
//! drains at once on two cores would only slow both.
//!
//! sluice-test: floods-wal (it writes gigabytes of WAL, which every logical replication slot
//! of the server decodes: the capture and Debezium tests beside it slowed tenfold):
//! `scripts/test-all` never runs this binary beside a `decodes-wal` one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::FutureRecord;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::case::Case;
use support::{Env, Running};

/// The acceptance bound on `sluice run`'s peak RSS with the defaults (issue 41).
const PEAK_RSS_LIMIT_MIB: u64 = 256;

/// One size at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const DDL: &str = "CREATE TABLE docs (id INT PRIMARY KEY, v TEXT NOT NULL);";

/// The sink as a new user writes it: no batch size, no byte budget (the defaults).
const MAPPING: &str = r#"
[[sink]]
name = "docs"
topic = "{prefix}-docs"
table = "docs"
key = ["id"]
conflict = "always-update"
[sink.columns]
id = { field = "id" }
v = { field = "v" }
"#;

/// `n` pseudo-random lowercase letters (PostgreSQL's and Kafka's compression gain little).
fn letters(n: usize, seed: u64) -> String {
    let mut x = seed.wrapping_mul(2_654_435_761) + 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from(b'a' + (x % 26) as u8)
        })
        .collect()
}

/// A record's value: `{"id": <id>, "v": "<text>"}` of about `size` bytes (plain ASCII text,
/// different per record, so nothing is shared and nothing compresses on the way).
fn value(id: usize, size: usize) -> Vec<u8> {
    let head = head(id);
    let mut out = Vec::with_capacity(size + 16);
    out.extend_from_slice(head.as_bytes());
    let body = text_length(id, size);
    let mut x = id as u64 * 2_654_435_761 + 1;
    for _ in 0..body {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(b'a' + (x % 26) as u8);
    }
    out.extend_from_slice(b"\"}");
    out
}

fn head(id: usize) -> String {
    format!(r#"{{"id": {id}, "v": ""#)
}

/// The length of record `id`'s text (`v`).
fn text_length(id: usize, size: usize) -> usize {
    size.saturating_sub(head(id).len() + 2).max(1)
}

/// Produces `count` records of about `size` bytes, uncompressed, generated one at a time
/// (the test process does not hold the whole topic), and waits for every delivery.
async fn produce(case: &Case, count: usize, size: usize) {
    let topic = case.topic("docs");
    let producer = sluice_testkit::producer(&case.env.stack);
    let mut pending = Vec::new();
    for id in 0..count {
        let key = id.to_string();
        let payload = value(id, size);
        let mut record = FutureRecord::to(&topic)
            .key(key.as_bytes())
            .payload(payload.as_slice());
        loop {
            match producer.send_result(record) {
                Ok(delivery) => {
                    pending.push(delivery);
                    break;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(10));
                }
                Err((error, _)) => panic!("produce to {topic}: {error}"),
            }
        }
        if pending.len() >= 2_000 {
            for delivery in pending.drain(..) {
                delivery.await.unwrap().map_err(|(e, _)| e).unwrap();
            }
        }
    }
    for delivery in pending {
        delivery.await.unwrap().map_err(|(e, _)| e).unwrap();
    }
}

/// A process's peak resident set (`VmHWM`), in MiB.
fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM in /proc/<pid>/status");
    kib / 1024
}

/// `count` records of about `size` bytes through `sluice run` with the defaults: every row
/// lands and the peak RSS stays within the bound.
async fn drain(count: usize, size: usize) {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(case) = Case::with_partitions(&["docs"], DDL, MAPPING, 3).await else {
        return;
    };
    case.assert_valid();
    let produced = Instant::now();
    produce(&case, count, size).await;
    let produced = produced.elapsed();

    let file = case.file.display().to_string();
    let mut run = case.env.spawn_run(
        &format!("docs-{size}"),
        &[("SLUICE_SINKS_FILE", file.as_str())],
    );
    let started = Instant::now();
    let (group, topic) = (case.env.group("docs"), case.topic("docs"));
    let deadline = started + Duration::from_secs(300);
    loop {
        run.assert_alive();
        let offsets = case.env.admin().group_offsets(&group, &topic).unwrap();
        let end: i64 = offsets.iter().map(|p| p.high).sum();
        let committed: i64 = offsets.iter().map(|p| p.committed.unwrap_or(0)).sum();
        if end as usize == count && committed == end {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{group}: committed {committed}/{end}\n{}",
            run.tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drained = started.elapsed();
    let peak = peak_rss_mib(run.pid());
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(60)).success(),
        "{}",
        run.tail()
    );
    let rows = case
        .rows("SELECT count(*) || ' ' || coalesce(sum(length(v)), 0) FROM docs")
        .await;
    let batches = run.events_named("batch committed").len();
    eprintln!(
        "{count} records of ~{size} bytes: produced in {produced:.1?}, drained in \
         {drained:.1?} in {batches} batches, peak RSS {peak} MiB"
    );
    // Gone before the verdict, failed or not: a gigabyte of topic and table is no help in
    // reading it, and several left behind fill a disk.
    case.cleanup().await;
    let text: usize = (0..count).map(|id| text_length(id, size)).sum();
    assert_eq!(rows, [format!("{count} {text}")], "every row lands, whole");
    assert!(
        peak <= PEAK_RSS_LIMIT_MIB,
        "{count} records of ~{size} bytes: sluice run's peak RSS {peak} MiB, over \
         {PEAK_RSS_LIMIT_MIB} MiB"
    );
}

#[tokio::test]
async fn records_of_900_kb_keep_sluice_run_within_the_memory_bound() {
    drain(1_000, 900 * 1024).await;
}

#[tokio::test]
async fn records_of_100_kb_keep_sluice_run_within_the_memory_bound() {
    drain(5_000, 100 * 1024).await;
}

#[tokio::test]
async fn records_of_1_kb_keep_sluice_run_within_the_memory_bound() {
    drain(200_000, 1024).await;
}

/// Events of the outbox case, their size, and the dispatchers draining them.
const OUTBOX_EVENTS: usize = 1_200;
const OUTBOX_EVENT_BYTES: usize = 900 * 1024;
const DISPATCHERS: usize = 3;

#[tokio::test]
async fn events_of_900_kb_keep_each_dispatcher_within_the_memory_bound() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(env) = Env::new().await else {
        return;
    };
    let topic = format!("{}-outbox-big", env.prefix);
    sluice_testkit::create_topic(&env.stack, &topic, 3).await;
    let migrated = env.output(&["migrate"], &[]);
    assert!(
        migrated.status.success(),
        "sluice migrate: {}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    // Enqueued before any dispatcher runs, 100 events a statement, built by the server from
    // one block of random letters (each event a different window of it: PostgreSQL's
    // compression, whose history is 4 KB, finds nothing to compress).
    let enqueued = Instant::now();
    {
        let block = letters(OUTBOX_EVENT_BYTES + 65_536, 7);
        let mut conn = env.schema.connect().await;
        for from in (0..OUTBOX_EVENTS as i64).step_by(100) {
            sqlx::query(
                "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, topic, \
                 partition_key, payload) \
                 SELECT 'doc', g::text, 'doc.saved', $1, 'doc-' || g, \
                        jsonb_build_object('n', g, 'v', substr($2, (1 + (g * 7919) % 65536)::int, $3)) \
                 FROM generate_series($4::bigint, $5::bigint) AS g",
            )
            .bind(&topic)
            .bind(&block)
            .bind(OUTBOX_EVENT_BYTES as i32)
            .bind(from)
            .bind(from + 99)
            .execute(&mut conn)
            .await
            .unwrap();
        }
    }
    let enqueued = enqueued.elapsed();

    // The dispatchers with the defaults but the bench's batch size (300 events).
    let mut dispatchers: Vec<Running> = (0..DISPATCHERS)
        .map(|d| {
            let log = env.dir.join(format!("dispatch-{d}.log"));
            let mut cmd = env.sluice(&["dispatch"]);
            cmd.env("OUTBOX_DISPATCHER_ID", format!("d{d}"))
                .env("OUTBOX_BATCH_SIZE", "300")
                .env("OUTBOX_POLL_INTERVAL_MS", "100")
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap());
            Running {
                child: cmd.spawn().unwrap(),
                log,
            }
        })
        .collect();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(600);
    let mut conn = env.schema.connect().await;
    loop {
        for d in &mut dispatchers {
            d.assert_alive();
        }
        let published: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM outbox_events WHERE topic = $1 AND status = 'PUBLISHED'",
        )
        .bind(&topic)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        if published == OUTBOX_EVENTS as i64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{published}/{OUTBOX_EVENTS} published\n{}",
            dispatchers[0].tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let drained = started.elapsed();
    let peaks: Vec<u64> = dispatchers.iter().map(|d| peak_rss_mib(d.pid())).collect();
    for d in &mut dispatchers {
        d.signal("TERM");
    }
    for d in &mut dispatchers {
        assert!(d.wait(Duration::from_secs(60)).success(), "{}", d.tail());
    }
    // Each published once: as many records in the topic as events, each at its own place.
    let records: i64 = env
        .admin()
        .watermarks(&topic)
        .unwrap()
        .iter()
        .map(|m| m.high - m.low)
        .sum();
    let places: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT (published_partition, published_offset)) FROM outbox_events \
         WHERE topic = $1",
    )
    .bind(&topic)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    eprintln!(
        "{OUTBOX_EVENTS} events of ~{OUTBOX_EVENT_BYTES} bytes: enqueued in {enqueued:.1?}, \
         published by {DISPATCHERS} dispatchers in {drained:.1?}, peak RSS {peaks:?} MiB"
    );
    // Gone before the verdict (see `drain`).
    drop(conn);
    sluice_testkit::delete_topics(&env.stack, &[&topic]).await;
    env.cleanup().await;
    assert_eq!(
        (records, places),
        (OUTBOX_EVENTS as i64, OUTBOX_EVENTS as i64),
        "each event published once"
    );
    for (d, peak) in peaks.iter().enumerate() {
        assert!(
            *peak <= PEAK_RSS_LIMIT_MIB,
            "dispatcher d{d}: peak RSS {peak} MiB, over {PEAK_RSS_LIMIT_MIB} MiB (all: {peaks:?})"
        );
    }
}
