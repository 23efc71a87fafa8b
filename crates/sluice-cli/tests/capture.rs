//! `sluice capture` → Kafka → a `debezium` sink, with no JVM (issue 46): a source table
//! replicated through sluice's own capture while `sluice run` applies the events into a
//! replica, through faults. 20,000 operations by two writers; meanwhile the capture and the
//! sink are each SIGKILLed twice and PostgreSQL (source and replica share the server) crashes
//! once (`pg-restart immediate`). At the end the replica equals the source (a digest of every
//! row's text), no record is a dead letter and no row waits, every change reached Kafka at
//! least once, and `sluice capture` stops on SIGTERM with exit 0.
//!
//! The workload: two writers, each on its own keys, inserting rows (a 3,200-byte TOASTed
//! `big` in most), updating other columns (so `big` arrives as Debezium's placeholder and the
//! sink keeps the stored value), updating `big`, changing keys (a `d` + tombstone + `c`
//! whose `big` is the placeholder) and deleting. The source table has `REPLICA IDENTITY
//! DEFAULT`, as in the Debezium fixtures. The replica has an `lsn` column and the sink the
//! LSN guard (`newest-wins = "lsn"`): what a restarted capture re-sends is skipped where the
//! replica holds newer, and a re-sent key change reads the old row its first delete set aside.
//!
//! A binary of its own: the crash must not meet another test's connection to the server.
//!
//! sluice-test: alone (it crashes the shared PostgreSQL):
//! `scripts/test-all` runs this binary with no other test binary beside it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

// The source database, its publication and slot (dropped with it); not its Connect worker.
#[allow(dead_code)]
#[path = "support/debezium_source.rs"]
mod debezium_source;
mod support;

use debezium_source::{Source, records_in};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sqlx::{Connection, PgConnection};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::database::{crash_postgres, table_digest};
use support::{Env, Running};

/// Rows in the table before the capture starts.
const SNAPSHOT_ROWS: i64 = 3_000;

/// Operations per writer.
const OPERATIONS: usize = 10_000;
const WRITERS: i64 = 2;

const COLUMNS: &str = "
  id bigint PRIMARY KEY,
  title text,
  amount numeric(12,2),
  doc jsonb,
  big text,
  at timestamptz,
  day date,
  ts timestamp,
  ratio double precision,
  ref uuid,
  raw bytea";

/// The source's columns, in order: what the digests compare (the replica adds `lsn`).
const COMPARED: &str = "id, title, amount, doc, big, at, day, ts, ratio, ref, raw";

/// The source's big values: md5 hex that pglz does not compress, so they are stored out of
/// line (TOASTed) and an update that leaves them alone sends the placeholder.
const BIG: &str = "(SELECT string_agg(md5($1 || i), '' ORDER BY i) FROM generate_series(1, 100) i)";

/// What strikes when the writers are this far (of every writer's operations), in order.
const FAULTS: [(f64, Fault); 5] = [
    (0.10, Fault::KillCapture),
    (0.25, Fault::KillSink),
    (0.40, Fault::CrashPostgres),
    (0.60, Fault::KillCapture),
    (0.75, Fault::KillSink),
];

#[derive(Debug, Clone, Copy)]
enum Fault {
    KillCapture,
    KillSink,
    CrashPostgres,
}

/// The sink's `sluice run`, with retries that outlast a crash of PostgreSQL.
fn spawn_sink(env: &Env, mapping: &str, name: &str) -> Running {
    env.spawn_run(
        name,
        &[
            ("SLUICE_SINKS_FILE", mapping),
            ("STORAGE_DB_RETRY_MAX_ATTEMPTS", "8"),
            ("STORAGE_DB_RETRY_BASE_MS", "250"),
        ],
    )
}

/// The statement of one operation, and how many records Debezium writes for it.
fn operation(rng: &mut StdRng, live: &mut Vec<i64>, next: &mut i64, n: usize) -> (String, i64) {
    let pick = rng.random_range(0..100);
    let target = (!live.is_empty()).then(|| live[rng.random_range(0..live.len())]);
    match (pick, target) {
        (0..35, _) | (_, None) => {
            let id = *next;
            *next += WRITERS;
            live.push(id);
            let big = if rng.random_bool(0.8) {
                BIG.replace("$1", &format!("'{id}-{n}'"))
            } else {
                "'small'".to_owned()
            };
            let insert = format!(
                "INSERT INTO items VALUES ({id}, 'title {n}', {amount}, '{{\"n\": {n}, \"w\": [1, 2.5]}}', {big}, \
                 now() - interval '{n} seconds', DATE '2026-01-01' + {n}, TIMESTAMP '2026-01-01 00:00:00.123456' + interval '{n} minutes', \
                 {ratio}, gen_random_uuid(), '\\x{n:04x}'::bytea)",
                amount = f64::from(rng.random_range(-99_999..99_999)) / 100.0,
                ratio = rng.random_range(-1.0e6..1.0e6_f64),
            );
            (insert, 1)
        }
        (35..65, Some(id)) => (
            format!(
                "UPDATE items SET title = 'updated {n}', amount = amount + 1, doc = '[{n}]' WHERE id = {id}"
            ),
            1,
        ),
        (65..75, Some(id)) => (
            format!(
                "UPDATE items SET big = {} WHERE id = {id}",
                BIG.replace("$1", &format!("'b{n}'"))
            ),
            1,
        ),
        (75..88, Some(id)) => {
            let new_id = *next;
            *next += WRITERS;
            live.retain(|&k| k != id);
            live.push(new_id);
            // `d` + tombstone + `c`.
            let change =
                format!("UPDATE items SET id = {new_id}, title = 'moved {n}' WHERE id = {id}");
            (change, 3)
        }
        (_, Some(id)) => {
            live.retain(|&k| k != id);
            (format!("DELETE FROM items WHERE id = {id}"), 2) // `d` + tombstone
        }
    }
}

/// Runs `statement`, on a new connection while the server is away (its crash): an insert
/// whose first try committed before the connection broke meets its own row and is done.
async fn execute(conn: &mut PgConnection, url: &str, statement: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let error = match sqlx::query(statement).execute(&mut *conn).await {
            Ok(_) => return,
            Err(e) => e,
        };
        if let sqlx::Error::Database(db) = &error
            && db.code().as_deref() == Some("23505")
        {
            return; // its first try committed
        }
        assert!(Instant::now() < deadline, "{statement}: {error}");
        tokio::time::sleep(Duration::from_millis(250)).await;
        if let Ok(fresh) = PgConnection::connect(url).await {
            *conn = fresh;
        }
    }
}

/// One writer's operations on its own keys (`id % WRITERS == w`); the records Debezium
/// writes for them (at least: an update retried after its first try committed writes two).
async fn write(url: String, w: i64, seed: u64, done: Arc<AtomicUsize>) -> i64 {
    let mut conn = PgConnection::connect(&url).await.unwrap();
    let mut rng = StdRng::seed_from_u64(seed + w as u64);
    let mut live: Vec<i64> = Vec::new();
    let mut next = w + WRITERS;
    let mut records = 0;
    for n in 0..OPERATIONS {
        let (statement, events) = operation(&mut rng, &mut live, &mut next, n);
        execute(&mut conn, &url, &statement).await;
        records += events;
        done.fetch_add(1, Ordering::Relaxed);
    }
    records
}

/// The replica's table and the sink reading the capture's topic into it under the LSN guard.
fn sink_file(env: &Env, topic: &str, schema: &str) -> String {
    let mapping = env.dir.join("sinks.toml");
    std::fs::write(
        &mapping,
        format!(
            "[[sink]]\nname = \"items\"\ntopic = \"{topic}\"\ntable = \"{schema}.items\"\n\
             format = \"debezium\"\nconflict = {{ newest-wins = \"lsn\" }}\n\n\
             [sink.columns]\n\"*\" = \"auto\"\nlsn = {{ cdc = \"lsn\" }}\n"
        ),
    )
    .unwrap();
    mapping.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sluice_capture_replicates_a_table_through_kills_and_a_crash() {
    let Some(env) = Env::new().await else {
        return;
    };
    let started = Instant::now();
    let schema = env.schema.name.clone();
    let source = Source::create(
        &env,
        &format!("CREATE TABLE public.items ({COLUMNS}); ALTER TABLE public.items REPLICA IDENTITY DEFAULT;"),
    )
    .await;
    let mut source_conn = source.connect().await;
    support::slots::publish(&mut source_conn, &source.publication, "public.items").await;
    let mut target = env.schema.connect().await;
    sqlx::raw_sql(&format!(
        "CREATE TABLE {schema}.items ({COLUMNS}, lsn bigint)"
    ))
    .execute(&mut target)
    .await
    .unwrap();
    let topic = source.topic("public", "items");
    sluice_testkit::create_topic(&env.stack, &topic, 3).await;
    // Rows from before the capture: its initial snapshot sends them (the writers never touch
    // their negative ids).
    sqlx::raw_sql(&format!(
        "INSERT INTO public.items SELECT -g, 'before ' || g, g / 100.0, jsonb_build_object('g', g), \
         CASE WHEN g % 2 = 0 THEN {big} ELSE NULL END, now() - g * interval '1 minute', \
         DATE '2026-01-01' + g, TIMESTAMP '2026-01-01' + g * interval '1 second', g * 1.5, \
         gen_random_uuid(), int8send(g) FROM generate_series(1, {SNAPSHOT_ROWS}) g",
        big = BIG.replace("$1", "g::text"),
    ))
    .execute(&mut source_conn)
    .await
    .unwrap();

    // The capture makes its slot at its first start: changes from then on are captured.
    let mut capture = source.spawn_capture(&env, "capture-0", &[]);
    let mut admin = PgConnection::connect(&env.stack.database_url)
        .await
        .unwrap();
    support::slots::wait_active(&mut admin, &source.slot, Duration::from_secs(60), || {
        capture.assert_alive();
        capture.tail()
    })
    .await;
    drop(admin);
    let mapping = sink_file(&env, &topic, &schema);
    let mut sink = spawn_sink(&env, &mapping, "run-0");

    let seed = u64::try_from(started.elapsed().as_nanos() % 1_000_000).unwrap();
    println!("workload seed {seed}");
    let done = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| tokio::spawn(write(source.url.clone(), w, seed, done.clone())))
        .collect();
    let total = OPERATIONS * usize::try_from(WRITERS).unwrap();
    let (mut captures, mut sinks) = (0, 0);
    for (at, fault) in FAULTS {
        while (done.load(Ordering::Relaxed) as f64) < at * total as f64 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        println!(
            "{fault:?} after {} operations",
            done.load(Ordering::Relaxed)
        );
        match fault {
            Fault::KillCapture => {
                capture.signal("KILL");
                capture.wait(Duration::from_secs(10));
                captures += 1;
                capture = source.spawn_capture(&env, &format!("capture-{captures}"), &[]);
            }
            Fault::KillSink => {
                sink.signal("KILL");
                sink.wait(Duration::from_secs(10));
                sinks += 1;
                sink = spawn_sink(&env, &mapping, &format!("run-{sinks}"));
            }
            Fault::CrashPostgres => crash_postgres(&env.stack),
        }
    }
    let mut records = SNAPSHOT_ROWS;
    for writer in writers {
        records += writer.await.unwrap();
    }

    // Both connections broke with the crash.
    let mut source_conn = source.connect().await;
    let mut target = env.schema.connect().await;
    let want = table_digest(
        &mut source_conn,
        &format!("(SELECT {COMPARED} FROM public.items)"),
    )
    .await;
    let replica = format!("(SELECT {COMPARED} FROM {schema}.items)");
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        capture.assert_alive();
        sink.assert_alive();
        let have = table_digest(&mut target, &replica).await;
        if have == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "replica {have:?} != source {want:?} after 180 s\ncapture:\n{}\nrun:\n{}",
            capture.tail(),
            sink.tail()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let sent = records_in(&env.stack.bootstrap, std::slice::from_ref(&topic));
    println!(
        "replica equals source ({} rows) after {:?}; {records} records for the snapshot and \
         the operations, {sent} in Kafka ({} re-sent by restarts)",
        want.0,
        started.elapsed(),
        sent - records
    );
    assert!(want.0 > 1_000, "a workload that leaves rows: {want:?}");
    assert!(
        sent >= records,
        "{sent} records in Kafka, fewer than the {records} written"
    );
    let left: (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM dead_letter_events), (SELECT count(*) FROM debezium_held_rows)",
    )
    .fetch_one(&mut target)
    .await
    .unwrap();
    assert_eq!(left, (0, 0), "(dead letters, rows waiting)");

    capture.signal("TERM");
    let status = capture.wait(Duration::from_secs(40));
    assert_eq!(status.code(), Some(0), "{}", capture.tail());
    sink.signal("TERM");
    sink.wait(Duration::from_secs(40));
}
