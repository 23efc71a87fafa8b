//! `sluice-lab bench capture`: `sluice capture` against the Debezium PostgreSQL connector in a
//! Kafka Connect standalone worker (`scripts/stack connect`, the JVM options of
//! `connect-standalone.sh` unless `--connect-jvm` says otherwise), one after the other, on
//! the same table and the same changes, in one run (docs/capture.md). Not a test: it prints
//! a Markdown table and writes a JSON file.
//!
//! For each relayer, on a table emptied before it starts (so both see the same rows):
//! - it starts on a slot of its own (made at its start, no snapshot) and a warm-up change
//!   goes through it;
//! - **throughput:** the relayer is paused (SIGSTOP) while the backlog (`--changes` changes
//!   in transactions of 1,000: inserts, updates, deletes) commits, then resumed (SIGCONT);
//!   events/s = change events / (the last record's broker append time − the resume). Every
//!   record is read back: the events (key, value without `source` and `ts_*`) must equal the
//!   other relayer's, record for record in each key's order;
//! - **latency:** `--rate` changes/s for `--seconds`, one per transaction from
//!   `--writers` connections; per change, the broker's append time of its record minus the
//!   moment its statement was sent (commit → Kafka, plus the commit itself);
//! - CPU seconds (`/proc/<pid>/stat`) during each phase and the process's peak RSS (VmHWM).
//!
//! The topics are made by the bench with `message.timestamp.type=LogAppendTime`, so a
//! record's timestamp is when the broker appended it, on this machine's clock.

mod events;
mod relayer;
mod report;
mod workload;

use crate::Failure;
use anyhow::{Context, anyhow};
use clap::Args;
use relayer::{Kind, Relayer};
use sluice_core::KafkaClientSettings;
use std::path::PathBuf;
use std::time::Duration;

/// Options of `sluice-lab bench capture`.
#[derive(Debug, Clone, Args)]
pub struct CaptureBenchArgs {
    /// Changes in the throughput backlog (half inserts, 30 % updates, 20 % deletes).
    #[arg(long, default_value_t = 200_000)]
    changes: usize,
    /// Changes per second offered in the latency phase.
    #[arg(long, default_value_t = 1_000.0)]
    rate: f64,
    /// Length of the latency phase, seconds.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Connections writing in the latency phase (each paced to its share of the rate).
    #[arg(long, default_value_t = 4)]
    writers: usize,
    /// Partitions of each relayer's topic.
    #[arg(long, default_value_t = 3)]
    partitions: i32,
    /// The Connect worker's JVM options (`SLUICE_CONNECT_JVM_OPTS` of `scripts/stack
    /// connect`); the default is what Kafka's `connect-standalone.sh` starts it with.
    #[arg(
        long,
        default_value = "-Xms256M -Xmx2G -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
                         -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent"
    )]
    connect_jvm: String,
    /// A property added to the Debezium connector's (`key=value`, repeatable), e.g.
    /// `poll.interval.ms=10` (its default, 500, is how long it waits for a batch to fill).
    #[arg(long = "connector", value_name = "KEY=VALUE")]
    connector: Vec<String>,
    /// A property added to the Connect worker's (`key=value`, repeatable), e.g.
    /// `producer.compression.type=zstd` (Connect's producer does not compress by default;
    /// `sluice capture`'s uses zstd).
    #[arg(long = "worker", value_name = "KEY=VALUE")]
    worker: Vec<String>,
    /// Measure only these relayers, in this order (`debezium`, `sluice`).
    #[arg(long, value_delimiter = ',', default_value = "debezium,sluice")]
    only: Vec<Kind>,
    /// Where the JSON results go.
    #[arg(long, default_value = "bench-capture-results.json")]
    out: PathBuf,
}

/// Goals of the comparison: sluice's events/s at least this many times Debezium's …
const TARGET_RATE_RATIO: f64 = 2.0;
/// … its peak RSS at most this share of Debezium's …
const TARGET_MEMORY_SHARE: f64 = 0.1;
/// … and its commit → Kafka p99 at most this, milliseconds.
const TARGET_P99_MS: f64 = 50.0;

/// Entry point.
pub fn run(args: &CaptureBenchArgs) -> Result<(), Failure> {
    let settings = super::super::settings()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(bench(&settings.database_url, &settings.kafka, args))
}

/// The run's names and where it talks to.
struct Env {
    /// The run's id: its schema, the prefix of its slots, publication and topics.
    id: String,
    /// `DATABASE_URL` (the schema is named in every statement).
    url: String,
    kafka: KafkaClientSettings,
    /// `scripts/stack` (or `SLUICE_STACK`), which runs the Connect worker.
    stack: PathBuf,
    /// The `sluice` executable beside this one.
    sluice: PathBuf,
    /// Where the relayers' logs and the worker's files go.
    dir: PathBuf,
}

impl Env {
    /// The captured table, schema-qualified.
    fn table(&self) -> String {
        format!("{}.items", self.id)
    }
    fn publication(&self) -> String {
        format!("{}_pub", self.id)
    }
}

/// One relayer's figures.
#[derive(Debug, Clone, serde::Serialize)]
struct Measured {
    relayer: &'static str,
    /// Change events of the backlog (tombstones not counted) and the records with them.
    events: usize,
    records: usize,
    /// Change events per second from the resume to the last record's append.
    events_per_second: f64,
    /// Seconds from the resume to the first record's append.
    first_record_s: f64,
    /// CPU seconds of the drain, and from the process start to the drain's end.
    drain_cpu_s: f64,
    total_cpu_s: f64,
    /// Commit → Kafka at the steady rate, milliseconds.
    latency: workload::Latency,
    /// CPU seconds of the steady phase.
    steady_cpu_s: f64,
    /// Backlog records not in the partition Kafka's Java producer gives their key.
    misplaced: usize,
    /// Peak RSS of the process (the JVM for Debezium), MiB.
    peak_rss_mib: f64,
}

async fn bench(
    database_url: &str,
    kafka: &KafkaClientSettings,
    args: &CaptureBenchArgs,
) -> Result<(), Failure> {
    let id = format!("benchcap{}", std::process::id());
    let env = Env {
        url: database_url.to_owned(),
        kafka: kafka.clone(),
        stack: std::env::var_os("SLUICE_STACK").map_or_else(|| "scripts/stack".into(), Into::into),
        sluice: crate::sluice_exe()?,
        dir: PathBuf::from(format!(".stack/bench-capture-{id}")),
        id,
    };
    if args.only.is_empty() {
        return Err(Failure::config(anyhow!("--only names no relayer")));
    }
    std::fs::create_dir_all(&env.dir).context("the bench's folder under .stack")?;
    println!(
        "== capture: {} changes, then {:.0} changes/s for {} s; schema {}; load average {} at the start",
        args.changes,
        args.rate,
        args.seconds,
        env.id,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    workload::create(&env).await?;
    let mut measured = Vec::new();
    let mut streams = Vec::new();
    let run = async {
        for kind in &args.only {
            let (figures, stream) = measure(&env, args, *kind).await?;
            measured.push(figures);
            streams.push((*kind, stream));
        }
        Ok::<_, Failure>(())
    };
    // Ctrl-C drops the run (a relayer's drop kills its process, even a paused one), then the
    // slots, topics and schema go as after a finished run.
    let result = tokio::select! {
        result = run => result,
        _ = tokio::signal::ctrl_c() => Err(anyhow!("interrupted").into()),
    };
    workload::drop_all(&env).await;
    result?;
    let same = events::compare(&streams)?;
    report::report(args, &measured, same)
}

/// One relayer through both phases, on the table emptied before it starts.
async fn measure(
    env: &Env,
    args: &CaptureBenchArgs,
    kind: Kind,
) -> Result<(Measured, events::Stream), Failure> {
    workload::empty(env).await?;
    let topic = events::topic(env, kind);
    events::create_topic(&env.kafka, &topic, args.partitions).await?;
    println!("-- {kind}: starting");
    let mut relayer = Relayer::start(env, kind, args)?;
    let outcome = phases(env, args, &mut relayer, &topic).await;
    let stopped = relayer.stop(env).await;
    let deleted = events::delete_topic(&env.kafka, &topic).await;
    let measured = outcome?;
    stopped?;
    deleted?;
    Ok(measured)
}

/// What the backlog phase measured.
struct Backlog {
    expected: workload::Expected,
    throughput: events::Throughput,
    stream: events::Stream,
    /// The topic's ends after the backlog.
    ends: Vec<i64>,
    drain_cpu_s: f64,
    total_cpu_s: f64,
}

async fn phases(
    env: &Env,
    args: &CaptureBenchArgs,
    relayer: &mut Relayer,
    topic: &str,
) -> Result<(Measured, events::Stream), Failure> {
    let kind = relayer.kind;
    let warm = workload::warm_up(env, &env.kafka, topic, relayer).await?;
    println!("   streaming ({warm:.1} s to the warm-up record); pausing it for the backlog");
    let backlog = backlog(env, args, relayer, topic).await?;
    let cpu_before_steady = relayer.cpu_seconds()?;
    let latency = workload::steady(env, args, topic, relayer, &backlog.ends).await?;
    let cpu_after_steady = relayer.cpu_seconds()?;
    println!(
        "   {kind}: commit → Kafka p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms over {} changes; {:.2} CPU-s",
        latency.p50_ms,
        latency.p99_ms,
        latency.max_ms,
        latency.changes,
        cpu_after_steady - cpu_before_steady
    );
    let peak = relayer.peak_rss_mib()?;
    Ok((
        Measured {
            relayer: kind.name(),
            events: backlog.expected.events,
            records: backlog.expected.records,
            events_per_second: backlog.throughput.events_per_second,
            first_record_s: backlog.throughput.first_record_s,
            drain_cpu_s: backlog.drain_cpu_s,
            total_cpu_s: backlog.total_cpu_s,
            latency,
            steady_cpu_s: cpu_after_steady - cpu_before_steady,
            misplaced: backlog.stream.misplaced,
            peak_rss_mib: peak,
        },
        backlog.stream,
    ))
}

/// The backlog: committed while the relayer is paused, then drained; read back and checked.
async fn backlog(
    env: &Env,
    args: &CaptureBenchArgs,
    relayer: &mut Relayer,
    topic: &str,
) -> Result<Backlog, Failure> {
    let kind = relayer.kind;
    let start = events::ends(&env.kafka, topic)?;
    relayer.pause()?;
    let written = std::time::Instant::now();
    let write = workload::backlog(env, args.changes).await;
    let write_seconds = written.elapsed().as_secs_f64();
    let resumed_at = relayer.resume()?;
    let expected = write?;
    workload::check_pause(env, write_seconds).await?;
    let cpu_at_resume = relayer.cpu_seconds()?;
    let ends = events::wait_for(
        &env.kafka,
        topic,
        &start,
        expected.records,
        relayer,
        DRAIN_TIMEOUT,
    )
    .await?;
    let total_cpu_s = relayer.cpu_seconds()?;
    // Nothing more comes: the window holds the backlog exactly.
    tokio::time::sleep(Duration::from_secs(1)).await;
    if events::ends(&env.kafka, topic)? != ends {
        let records = expected.records;
        return Err(anyhow!("{kind}: more records than the backlog's {records}").into());
    }
    let prefix = relayer::prefix(env, kind);
    let stream = events::read(&env.kafka, topic, &prefix, (&start, &ends))?;
    if stream.warm_ups > 0 {
        let leaked = stream.warm_ups;
        return Err(anyhow!("{kind}: {leaked} warm-up records inside the backlog's window").into());
    }
    let throughput = stream.throughput(resumed_at, expected.events)?;
    let drain_cpu_s = total_cpu_s - cpu_at_resume;
    println!(
        "   {kind}: {} events ({} records) in {:.2} s after the resume = {:.0} events/s, {drain_cpu_s:.2} CPU-s",
        expected.events, expected.records, throughput.seconds, throughput.events_per_second,
    );
    if stream.misplaced > 0 {
        let misplaced = stream.misplaced;
        println!("   {kind}: {misplaced} records not in the partition of their key's murmur2 hash");
    }
    Ok(Backlog {
        expected,
        throughput,
        stream,
        ends,
        drain_cpu_s,
        total_cpu_s,
    })
}

/// How long a backlog may take to arrive.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(600);
