//! A whole source schema replicated through Debezium and ONE `debezium` sink (issue 45's
//! acceptance test, docs/sinks.md#many-tables): `topic_pattern` over the connector's topics,
//! `table = "{source.schema}.{source.table}"`, `columns = "auto"`.
//!
//! The source: a database of its own, one schema (named as the test's schema in the test
//! database, where the replicas are) of 20 tables, each a different mix of the types a
//! `debezium` sink reads (bigint, integer, smallint, text, varchar(n), numeric(p,s), boolean,
//! jsonb, date, time, timestamp, timestamptz, uuid, bytea, double precision, integer[],
//! text[], a TOASTed text over 2 kB), keys of one and of two columns, one table partitioned
//! by hash (its partitions in another schema; the publication `publish_via_partition_root =
//! true`, so Debezium publishes the changes under the root's name; its replica is partitioned
//! too) and one named `order`, with columns `user`, `select`, `group`, `desc`. Debezium runs
//! in a Kafka Connect standalone worker (JsonConverter with schemas), a 2-partition topic per
//! table.
//!
//! The run: 20 rows a table in the snapshot, then 50,000 random operations (inserts, updates
//! of a random subset of columns — so a TOASTed value left alone is Debezium's placeholder —,
//! deletes, re-inserts of deleted keys) by two writers in transactions of 1-4, spread over the
//! tables, while `sluice run` applies them; `sluice run` is SIGKILLed once and started again.
//! Meanwhile a 21st table is created in the source and added to the publication: its first
//! records are dead letters of kind `unknown_table` (asserted, and nothing else is dead-
//! lettered); its replica is created, and once the sink looks the table up again (10 s,
//! docs/sinks.md#many-tables) `sluice dlq replay --kind unknown_table` brings them back; then
//! more operations on it. At the end every replica equals its source (a digest of its rows'
//! texts), and again after `sluice replay --to earliest` and a run to the end; the dead
//! letters are the 21st table's, all replayed, none new.
//!
//! The replication slot, the publication (with the source database) and the topics are
//! dropped at the end, the slot and the database also when the test fails.
//!
//! sluice-test: decodes-wal (Debezium streams a slot through schema changes, under deadlines):
//! `scripts/test-all` never runs this binary beside a `floods-wal` one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

#[path = "support/debezium_source.rs"]
mod debezium_source;
#[path = "support/schema_tables.rs"]
mod schema_tables;
#[path = "support/schema_workload.rs"]
mod schema_workload;
mod support;

use debezium_source::{Source, records_in};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::{BaseConsumer, Consumer};
use schema_tables::{LATE_TABLE, TABLES, Table, quote};
use schema_workload::{Keys, Writer, seed, write_late};
use sqlx::{Connection, PgConnection};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use support::database::table_digest;
use support::{Env, Running};

/// Random operations of the workload on the 20 tables, all writers together.
const OPERATIONS: usize = 50_000;
/// Concurrent writers; writer `w` owns the keys it made (its own key range), so no two
/// writers touch one row.
const WRITERS: usize = 2;
/// Operations on the 21st table before its replica exists (all dead letters), and after.
const LATE_BEFORE: usize = 150;
const LATE_AFTER: usize = 300;
/// Partitions of each Debezium topic.
const PARTITIONS: i32 = 2;
/// The sink's name (its group is `<prefix>.schema`).
const SINK: &str = "schema";
/// How long a missing table is remembered before the sink looks it up again
/// (`MISSING_FOR`, docs/sinks.md#many-tables), and a second more.
const MISSING_FOR: Duration = Duration::from_secs(11);

const MAPPING: &str = r#"
[[sink]]
name = "schema"
topic_pattern = "{pattern}"
table = "{source.schema}.{source.table}"
format = "debezium"
columns = "auto"
batch_size = 1000
"#;

// ---------------------------------------------------------------------------------------
// Comparing the tables
// ---------------------------------------------------------------------------------------

async fn row_texts(conn: &mut PgConnection, table: &str) -> BTreeSet<String> {
    let rows: Vec<(String,)> = sqlx::query_as(&format!("SELECT t::text FROM {table} t"))
        .fetch_all(conn)
        .await
        .unwrap_or_else(|e| panic!("rows of {table}: {e}"));
    rows.into_iter().map(|(r,)| r).collect()
}

fn shorten(text: &str) -> String {
    if text.chars().count() > 300 {
        let head: String = text.chars().take(300).collect();
        format!("{head}…({} chars)", text.chars().count())
    } else {
        text.to_owned()
    }
}

/// Compares `tables` on both sides; panics naming each differing table with its first
/// differing rows.
async fn assert_replicas(
    source: &mut PgConnection,
    target: &mut PgConnection,
    schema: &str,
    tables: &[&Table],
    when: &str,
) {
    let mut differing = vec![];
    let mut rows = 0;
    for table in tables {
        let name = table.qualified(schema);
        let want = table_digest(source, &name).await;
        let have = table_digest(target, &name).await;
        rows += want.0;
        if want == have {
            continue;
        }
        let want_rows = row_texts(source, &name).await;
        let have_rows = row_texts(target, &name).await;
        let missing: Vec<String> = want_rows
            .difference(&have_rows)
            .take(5)
            .map(|r| shorten(r))
            .collect();
        let extra: Vec<String> = have_rows
            .difference(&want_rows)
            .take(5)
            .map(|r| shorten(r))
            .collect();
        differing.push(format!(
            "{name}: source {} rows ({}), replica {} rows ({}); source rows not in the \
             replica: {missing:#?}; replica rows not in the source: {extra:#?}",
            want.0, want.1, have.0, have.1
        ));
    }
    assert!(
        differing.is_empty(),
        "{when}: {} of {} tables differ:\n{}",
        differing.len(),
        tables.len(),
        differing.join("\n")
    );
    println!("{when}: {} tables, {rows} rows, equal", tables.len());
}

// ---------------------------------------------------------------------------------------
// Running the sink
// ---------------------------------------------------------------------------------------

/// The sink's group's progress over the topics, read by one client that never joins the
/// group (one coordinator lookup, not one per topic).
struct Progress {
    reader: BaseConsumer,
    partitions: TopicPartitionList,
}

impl Progress {
    fn new(env: &Env, topics: &[String]) -> Progress {
        let reader: BaseConsumer = rdkafka::ClientConfig::new()
            .set("bootstrap.servers", &env.stack.bootstrap)
            .set("group.id", env.group(SINK))
            .set("enable.auto.commit", "false")
            .create()
            .unwrap();
        let mut partitions = TopicPartitionList::new();
        for topic in topics {
            for p in 0..PARTITIONS {
                partitions.add_partition(topic, p);
            }
        }
        Progress { reader, partitions }
    }

    /// (committed, end) summed over the partitions.
    fn now(&self) -> (i64, i64) {
        let timeout = Duration::from_secs(10);
        let committed = self
            .reader
            .committed_offsets(self.partitions.clone(), timeout)
            .unwrap();
        let committed: i64 = committed
            .elements()
            .iter()
            .map(|e| match e.offset() {
                rdkafka::Offset::Offset(o) => o,
                _ => 0,
            })
            .sum();
        let end: i64 = self
            .partitions
            .elements()
            .iter()
            .map(|e| {
                self.reader
                    .fetch_watermarks(e.topic(), e.partition(), timeout)
                    .unwrap()
                    .1
            })
            .sum();
        (committed, end)
    }
}

/// Waits until the group has committed every record `topics` hold now (at least
/// `at_least` of them), `run` alive meanwhile; (committed, end).
async fn wait_committed(
    env: &Env,
    progress: &Progress,
    run: &mut Running,
    at_least: i64,
    timeout: Duration,
) -> (i64, i64) {
    let deadline = Instant::now() + timeout;
    loop {
        run.assert_alive();
        let (committed, end) = progress.now();
        if end >= at_least && committed == end {
            return (committed, end);
        }
        assert!(
            Instant::now() < deadline,
            "{}: committed {committed}/{end} (at least {at_least} expected) after {timeout:?}\n{}",
            env.group(SINK),
            run.tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `topics` hold at least `records` records (the connector sent them).
async fn wait_streamed(env: &Env, source: &mut Source, topics: &[String], records: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        source.assert_alive();
        let total = records_in(&env.stack.bootstrap, topics);
        if total >= records {
            return total;
        }
        assert!(
            Instant::now() < deadline,
            "{total} of {records} records in the topics after 180 s (per topic: {:?}):\n{}",
            topics
                .iter()
                .map(|t| (t, records_in(&env.stack.bootstrap, std::slice::from_ref(t))))
                .collect::<Vec<_>>(),
            source.tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Stops `run` with SIGTERM, asserting a clean exit.
fn stop(mut run: Running) {
    run.signal("TERM");
    let status = run.wait(Duration::from_secs(60));
    assert!(status.success(), "{status}\n{}", run.tail());
}

async fn wait_group_empty(env: &Env, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while env.admin().group_members(&env.group(SINK)).unwrap() > 0 {
        assert!(
            Instant::now() < deadline,
            "{} still has members after {timeout:?}",
            env.group(SINK)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The dead letters: (topic, kind, replayed) with their count.
async fn dead_letters(target: &mut PgConnection) -> Vec<(String, String, bool, i64)> {
    sqlx::query_as(
        "SELECT topic, error_kind, replayed_at IS NOT NULL, count(*) FROM dead_letter_events \
         GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    )
    .fetch_all(target)
    .await
    .unwrap()
}

/// The batches a run committed: how many, their records, and where their time went.
fn batch_stats(run: &Running) -> String {
    let events = run.events();
    let at = |e: &serde_json::Value| {
        e["timestamp"]
            .as_str()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    let first = events.first().and_then(at);
    let batches = run.events_named("batch committed");
    let since_start = |e: Option<&serde_json::Value>| {
        e.and_then(at)
            .zip(first)
            .map(|(t, f)| format!("{:.1} s", (t - f).as_seconds_f64()))
            .unwrap_or_default()
    };
    let sum = |field: &str| -> u64 { batches.iter().filter_map(|b| b[field].as_u64()).sum() };
    format!(
        "{} batches of {} records, the first {} and the last {} after the process's first \
         line; poll {} ms, decode {} ms, writer wait {} ms, store {} ms, commit {} ms",
        batches.len(),
        sum("records"),
        since_start(batches.first()),
        since_start(batches.last()),
        sum("poll_us") / 1000,
        sum("decode_us") / 1000,
        sum("writer_wait_us") / 1000,
        sum("store_us") / 1000,
        sum("commit_us") / 1000
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn debezium_replicates_a_schema_of_20_tables_through_one_sink() {
    let Some(env) = Env::new().await else {
        return;
    };
    let started = Instant::now();
    let seed = seed();
    println!("workload seed {seed} (REPLICATE_SEED={seed} repeats it)");
    // The source schema is named as the test's schema: the replicas are in it.
    let schema = env.schema.name.clone();
    let parts = format!("{schema}_parts");
    let tables: Vec<&Table> = TABLES.iter().collect();

    // The replicas (the 21st comes later).
    let mut target = env.schema.connect().await;
    sqlx::raw_sql("SET TIME ZONE 'UTC'")
        .execute(&mut target)
        .await
        .unwrap();
    let replica_ddl: String = TABLES.iter().map(|t| t.ddl(&schema, &schema)).collect();
    sqlx::raw_sql(&replica_ddl)
        .execute(&mut target)
        .await
        .unwrap_or_else(|e| panic!("replica DDL: {e}"));

    // The source: its schema, the publication, the snapshot's rows.
    let source_ddl = format!(
        "CREATE SCHEMA {s}; CREATE SCHEMA {p}; {ddl}",
        s = quote(&schema),
        p = quote(&parts),
        ddl = TABLES
            .iter()
            .map(|t| t.ddl(&schema, &parts))
            .collect::<String>()
    );
    let mut source = Source::create(&env, &source_ddl).await;
    let mut source_conn = source.connect().await;
    sqlx::raw_sql("SET TIME ZONE 'UTC'")
        .execute(&mut source_conn)
        .await
        .unwrap();
    let published: Vec<String> = TABLES.iter().map(|t| t.qualified(&schema)).collect();
    let for_tables = format!(
        "{} WITH (publish_via_partition_root = true)",
        published.join(", ")
    );
    support::slots::publish(&mut source_conn, &source.publication, &for_tables).await;
    let mut writers: Vec<Writer> = (0..WRITERS).map(|w| Writer::new(w, seed)).collect();
    let mut snapshot = 0;
    for writer in &mut writers {
        snapshot += writer.initial(&mut source_conn, &schema).await;
    }
    let mut topics: Vec<String> = TABLES
        .iter()
        .map(|t| source.topic(&schema, t.name))
        .collect();
    let late_topic = source.topic(&schema, LATE_TABLE.name);
    topics.push(late_topic.clone());
    for topic in &topics {
        sluice_testkit::create_topic(&env.stack, topic, PARTITIONS).await;
    }
    let group = Progress::new(&env, &topics);
    let late = Progress::new(&env, std::slice::from_ref(&late_topic));
    source
        .start_connector(
            &env,
            // `\\.` in a properties file is the regular expression's `\.`: the partitions'
            // schema (`<schema>_parts`) does not match.
            &format!("{schema}\\\\..*"),
            "poll.interval.ms=100\n",
        )
        .await;
    // The workload starts once the snapshot's rows are in the topics: every later change
    // is an event of its own, so the records can be counted.
    wait_streamed(&env, &mut source, &topics, snapshot as i64).await;
    let streaming_after = started.elapsed();

    let mapping = env.dir.join("sinks.toml");
    let pattern = format!("{}.{schema}", source.topic_prefix).replace('.', "\\.") + "\\..*";
    std::fs::write(
        &mapping,
        MAPPING.replace("{pattern}", &pattern.replace('\\', "\\\\")),
    )
    .unwrap();
    let mapping = mapping.display().to_string();
    // Four writers: a batch holds one partition's records, and with 42 partitions two
    // writers leave batches waiting while the other decodes or the server stores.
    let sinks = [
        ("SLUICE_SINKS_FILE", mapping.as_str()),
        ("STORAGE_WRITERS", "4"),
    ];
    let validated = env.output(&["sinks", "validate", &mapping], &[]);
    assert_eq!(
        validated.status.code(),
        Some(0),
        "{}\n{}",
        text(&validated.stdout),
        text(&validated.stderr)
    );

    // The workload, applied as it streams.
    let workload_started = Instant::now();
    let done = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = writers
        .into_iter()
        .map(|writer| {
            tokio::spawn(writer.run(
                source.url.clone(),
                schema.clone(),
                OPERATIONS / WRITERS,
                Arc::clone(&done),
            ))
        })
        .collect();
    let mut run = env.spawn_run("run-1", &sinks);
    let wait_ops = |fraction: usize| {
        let done = Arc::clone(&done);
        async move {
            while done.load(Ordering::Relaxed) < OPERATIONS * fraction / 100 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };

    // The 21st table, created in the source mid-run; its replica does not exist yet.
    wait_ops(10).await;
    sqlx::raw_sql(&format!(
        "{} ALTER PUBLICATION {} ADD TABLE {};",
        LATE_TABLE.ddl(&schema, &parts),
        source.publication,
        LATE_TABLE.qualified(&schema)
    ))
    .execute(&mut source_conn)
    .await
    .unwrap();
    let late_created = workload_started.elapsed();
    let mut late_keys = Keys::new(0);
    let mut late_rng = StdRng::seed_from_u64(seed.wrapping_add(100));
    let (mut late_records, before_deletes) = write_late(
        &mut source_conn,
        &schema,
        &mut late_keys,
        &mut late_rng,
        LATE_BEFORE,
    )
    .await;

    // One SIGKILL mid-run (the sink is behind the writers: batches are in flight).
    wait_ops(25).await;
    let (committed, end) = group.now();
    run.signal("KILL");
    run.wait(Duration::from_secs(10));
    let kill = format!(
        "SIGKILL at {committed} committed of {end} ({:.1?})",
        workload_started.elapsed()
    );
    let mut run = env.spawn_run("run-2", &sinks);

    // Every change event of the 21st table is a dead letter (its tombstones are ignored),
    // once; nothing else is.
    let late_only = std::slice::from_ref(&late_topic);
    wait_streamed(&env, &mut source, late_only, late_records as i64).await;
    wait_committed(
        &env,
        &late,
        &mut run,
        late_records as i64,
        Duration::from_secs(120),
    )
    .await;
    let dead_before = (late_records - before_deletes) as i64;
    assert_eq!(
        dead_letters(&mut target).await,
        [(
            late_topic.clone(),
            "unknown_table".to_owned(),
            false,
            dead_before
        )],
        "only the 21st table's records are dead letters, each once"
    );

    // Its replica created; once the sink looks the table up again, the dead letters
    // replayed (in their records' order: a key's later change lands after its earlier one).
    sqlx::raw_sql(&LATE_TABLE.ddl(&schema, &schema))
        .execute(&mut target)
        .await
        .unwrap();
    let replica_created = workload_started.elapsed();
    tokio::time::sleep(MISSING_FOR).await;
    let replay = env.output(
        &[
            "dlq",
            "replay",
            "--kind",
            "unknown_table",
            "--limit",
            "100000",
            "--execute",
        ],
        &sinks,
    );
    assert!(
        replay.status.success(),
        "{}{}",
        text(&replay.stdout),
        text(&replay.stderr)
    );
    late_records += dead_before as usize;
    wait_committed(
        &env,
        &late,
        &mut run,
        late_records as i64,
        Duration::from_secs(120),
    )
    .await;
    assert_replicas(
        &mut source_conn,
        &mut target,
        &schema,
        &[&LATE_TABLE],
        "the 21st table after its dead letters were replayed",
    )
    .await;
    let late_replayed = workload_started.elapsed();
    // More changes of it, beside the rest of the workload.
    let late_after = {
        let url = source.url.clone();
        let schema = schema.clone();
        tokio::spawn(async move {
            let mut conn = PgConnection::connect(&url).await.unwrap();
            write_late(
                &mut conn,
                &schema,
                &mut late_keys,
                &mut late_rng,
                LATE_AFTER,
            )
            .await
            .0
        })
    };

    let mut records = 0;
    for handle in handles {
        records += handle.await.unwrap();
    }
    late_records += late_after.await.unwrap();
    let workload_took = workload_started.elapsed();
    let expected = (snapshot + records + late_records) as i64;
    let streamed = wait_streamed(&env, &mut source, &topics, expected).await;
    let streamed_after = workload_started.elapsed();
    wait_committed(&env, &group, &mut run, expected, Duration::from_secs(180)).await;
    let applied_after = workload_started.elapsed();
    stop(run);
    let mut all = tables.clone();
    all.push(&LATE_TABLE);
    assert_replicas(
        &mut source_conn,
        &mut target,
        &schema,
        &all,
        "after the apply",
    )
    .await;
    assert_eq!(
        dead_letters(&mut target).await,
        [(
            late_topic.clone(),
            "unknown_table".to_owned(),
            true,
            dead_before
        )],
        "after the apply: the 21st table's dead letters, all replayed, nothing else"
    );

    // A replay of everything changes nothing.
    wait_group_empty(&env, Duration::from_secs(30)).await;
    let replay_started = Instant::now();
    let replay = env.output(&["replay", SINK, "--to", "earliest", "--execute"], &sinks);
    assert!(
        replay.status.success(),
        "{}\n{}",
        text(&replay.stdout),
        text(&replay.stderr)
    );
    let moved_in = replay_started.elapsed();
    assert_eq!(group.now().0, 0, "the group is back at the start");
    let mut run = env.spawn_run("run-replay", &sinks);
    wait_committed(&env, &group, &mut run, streamed, Duration::from_secs(180)).await;
    let reapplied_in = replay_started.elapsed();
    let batches = batch_stats(&run);
    stop(run);
    let replayed_in = replay_started.elapsed();
    assert_replicas(
        &mut source_conn,
        &mut target,
        &schema,
        &all,
        "after the replay",
    )
    .await;
    assert_eq!(
        dead_letters(&mut target).await,
        [(
            late_topic.clone(),
            "unknown_table".to_owned(),
            true,
            dead_before
        )],
        "after the replay: no new dead letter"
    );

    println!(
        "{OPERATIONS} operations on 20 tables by {WRITERS} writers after {snapshot} snapshot \
         rows, {} on the 21st: {streamed} records; connector streaming after \
         {streaming_after:.1?}; 21st table created at {late_created:.1?}, its replica at \
         {replica_created:.1?}, its {dead_before} dead letters replayed and applied by \
         {late_replayed:.1?}; workload {workload_took:.1?}; all streamed {streamed_after:.1?} \
         and applied {applied_after:.1?} after its start; {kill}; replay to earliest and \
         re-apply {replayed_in:.1?} (offsets moved after {moved_in:.1?}, all committed again after {reapplied_in:.1?}; {batches}); test wall time {:.1?}",
        LATE_BEFORE + LATE_AFTER,
        started.elapsed()
    );

    drop(source_conn);
    drop(target);
    drop(source);
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    sluice_testkit::delete_topics(&env.stack, &refs).await;
    env.cleanup().await;
}
