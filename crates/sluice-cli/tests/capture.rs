//! `sluice capture` → Kafka → a `debezium` sink, with no JVM (issue 46): a source table
//! replicated through sluice's own capture while `sluice run` applies the events into a
//! replica. At the end the replica equals the source (a digest of every row's text), and
//! `sluice capture` stops on SIGTERM with exit 0. (Kills and restarts: not yet, see below.)
//!
//! The workload: two writers, each on its own keys, inserting rows (a 3,200-byte TOASTed
//! `big` in most), updating other columns (so `big` arrives as Debezium's placeholder and the
//! sink keeps the stored value), updating `big`, changing keys (a `d` + tombstone + `c`
//! whose `big` is the placeholder) and deleting. The source table has `REPLICA IDENTITY
//! DEFAULT`, as in the Debezium fixtures.
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

use debezium_source::Source;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sqlx::{Connection, PgConnection};
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::database::table_digest;
use support::{Env, Running};

/// Operations per writer.
const OPERATIONS: usize = 1_500;
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

/// The source's big values: md5 hex that pglz does not compress, so they are stored out of
/// line (TOASTed) and an update that leaves them alone sends the placeholder.
const BIG: &str = "(SELECT string_agg(md5($1 || i), '' ORDER BY i) FROM generate_series(1, 100) i)";

fn spawn_capture(env: &Env, source: &Source, name: &str) -> Running {
    let log = env.dir.join(format!("{name}.log"));
    let mut cmd = env.sluice(&["capture"]);
    cmd.envs([
        ("DATABASE_URL", source.url.as_str()),
        ("CAPTURE_SLOT", source.slot.as_str()),
        ("CAPTURE_PUBLICATION", source.publication.as_str()),
        ("CAPTURE_TOPIC_PREFIX", source.topic_prefix.as_str()),
        ("CAPTURE_STATUS_INTERVAL_MS", "100"),
    ])
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&log).unwrap());
    Running {
        child: cmd.spawn().unwrap(),
        log,
    }
}

/// One writer's operations on its own keys (`id % WRITERS == w`).
async fn write(url: String, w: i64, seed: u64) {
    let mut conn = PgConnection::connect(&url).await.unwrap();
    let mut rng = StdRng::seed_from_u64(seed + w as u64);
    let mut live: Vec<i64> = Vec::new();
    let mut next = w + WRITERS;
    for n in 0..OPERATIONS {
        let pick = rng.random_range(0..100);
        let target = (!live.is_empty()).then(|| live[rng.random_range(0..live.len())]);
        let statement = match (pick, target) {
            (0..35, _) | (_, None) => {
                let id = next;
                next += WRITERS;
                live.push(id);
                let big = if rng.random_bool(0.8) {
                    BIG.replace("$1", &format!("'{id}-{n}'"))
                } else {
                    "'small'".to_owned()
                };
                format!(
                    "INSERT INTO items VALUES ({id}, 'title {n}', {amount}, '{{\"n\": {n}, \"w\": [1, 2.5]}}', {big}, \
                     now() - interval '{n} seconds', DATE '2026-01-01' + {n}, TIMESTAMP '2026-01-01 00:00:00.123456' + interval '{n} minutes', \
                     {ratio}, gen_random_uuid(), '\\x{n:04x}'::bytea)",
                    amount = f64::from(rng.random_range(-99_999..99_999)) / 100.0,
                    ratio = rng.random_range(-1.0e6..1.0e6_f64),
                )
            }
            (35..65, Some(id)) => format!(
                "UPDATE items SET title = 'updated {n}', amount = amount + 1, doc = '[{n}]' WHERE id = {id}"
            ),
            (65..75, Some(id)) => format!(
                "UPDATE items SET big = {} WHERE id = {id}",
                BIG.replace("$1", &format!("'b{n}'"))
            ),
            (75..88, Some(id)) => {
                let new_id = next;
                next += WRITERS;
                live.retain(|&k| k != id);
                live.push(new_id);
                format!("UPDATE items SET id = {new_id}, title = 'moved {n}' WHERE id = {id}")
            }
            (_, Some(id)) => {
                live.retain(|&k| k != id);
                format!("DELETE FROM items WHERE id = {id}")
            }
        };
        if let Err(e) = sqlx::query(&statement).execute(&mut conn).await {
            panic!("{statement}: {e}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sluice_capture_replicates_a_table() {
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
    sqlx::raw_sql(&format!(
        "CREATE PUBLICATION {} FOR TABLE public.items",
        source.publication
    ))
    .execute(&mut source_conn)
    .await
    .unwrap();
    let mut target = env.schema.connect().await;
    sqlx::raw_sql(&format!("CREATE TABLE {schema}.items ({COLUMNS})"))
        .execute(&mut target)
        .await
        .unwrap();
    let topic = source.topic("public", "items");
    sluice_testkit::create_topic(&env.stack, &topic, 3).await;

    // The capture makes its slot at its first start: changes from then on are captured.
    let mut capture = spawn_capture(&env, &source, "capture-1");
    let mut admin = PgConnection::connect(&env.stack.database_url)
        .await
        .unwrap();
    support::slots::wait_active(&mut admin, &source.slot, Duration::from_secs(60), || {
        capture.assert_alive();
        capture.tail()
    })
    .await;

    let mapping = env.dir.join("sinks.toml");
    std::fs::write(
        &mapping,
        format!(
            "[[sink]]\nname = \"items\"\ntopic = \"{topic}\"\ntable = \"{schema}.items\"\nformat = \"debezium\"\ncolumns = \"auto\"\n"
        ),
    )
    .unwrap();
    let mapping = mapping.display().to_string();
    let mut run = env.spawn_run("run", &[("SLUICE_SINKS_FILE", mapping.as_str())]);

    let seed = u64::try_from(started.elapsed().as_nanos() % 1_000_000).unwrap();
    println!("workload seed {seed}");
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| tokio::spawn(write(source.url.clone(), w, seed)))
        .collect();
    // Not yet: a SIGKILL of the capture mid-stream. Its restart re-sends what the slot had
    // not confirmed, and the sink dead-letters a re-sent key change's create whose old row's
    // image the first one already took (docs/capture.md#what-remains).
    for writer in writers {
        writer.await.unwrap();
    }

    let want = table_digest(&mut source_conn, "public.items").await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        capture.assert_alive();
        run.assert_alive();
        let have = table_digest(&mut target, &format!("{schema}.items")).await;
        if have == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "replica {have:?} != source {want:?} after 120 s\ncapture:\n{}\nrun:\n{}",
            capture.tail(),
            run.tail()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "replica equals source ({} rows) after {:?}",
        want.0,
        started.elapsed()
    );
    assert!(want.0 > 100, "a workload that leaves rows: {want:?}");

    capture.signal("TERM");
    let status = capture.wait(Duration::from_secs(40));
    assert_eq!(status.code(), Some(0), "{}", capture.tail());
    run.signal("TERM");
    run.wait(Duration::from_secs(40));
}
