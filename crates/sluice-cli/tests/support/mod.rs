//! Support for the end-to-end tests of the `sluice` binary: a per-test environment
//! (schema, topics, group prefix, heartbeat dir) and the binary run as a child process.
#![allow(dead_code, reason = "each test file uses a different part")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

pub mod case;
pub mod console;
pub mod counted;
pub mod database;
pub mod http;
pub mod registry;
pub mod slots;

use rdkafka::consumer::Consumer;
use rdkafka::message::{Headers, Message};
use serde_json::Value;
use sluice_kafka::Admin;
use sluice_testkit::{Stack, TestSchema};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

pub const PIPELINES: [&str; 3] = ["app-stats", "reviews", "network-metrics"];

/// The `sluice` binary: Cargo's own path in sluice-cli's tests; elsewhere (the mailbox
/// example's tests, which include this module) the one beside the test's target directory,
/// which `cargo test --workspace` (`make test`) builds with them.
pub fn sluice_binary() -> PathBuf {
    if let Some(path) = option_env!("CARGO_BIN_EXE_sluice") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test's own path");
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test runs from <target>/<profile>/deps")
        .join("sluice");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build -p sluice-cli` (make test builds it)",
        path.display()
    );
    path
}

pub struct Env {
    pub stack: Stack,
    pub schema: TestSchema,
    pub prefix: String,
    pub dir: PathBuf,
    pub vars: BTreeMap<String, String>,
}

impl Env {
    /// A schema with the applications fixture, three 3-partition topics, a group prefix.
    pub async fn new() -> Option<Env> {
        let stack = sluice_testkit::stack()?;
        let schema = TestSchema::create(&stack).await;
        let prefix = sluice_testkit::unique("e2e");
        let dir = std::env::temp_dir().join(&prefix);
        std::fs::create_dir_all(&dir).unwrap();
        let mut vars = BTreeMap::new();
        vars.insert("KAFKA_BOOTSTRAP_SERVERS".into(), stack.bootstrap.clone());
        vars.insert("DATABASE_URL".into(), schema.url.clone());
        vars.insert("STORAGE_GROUP_PREFIX".into(), prefix.clone());
        vars.insert(
            "STORAGE_HEARTBEAT_DIR".into(),
            dir.join("heartbeat").display().to_string(),
        );
        vars.insert("STORAGE_SESSION_TIMEOUT_MS".into(), "10000".into());
        vars.insert("STORAGE_POLL_TIMEOUT_MS".into(), "200".into());
        vars.insert("SLUICE_LOG_FORMAT".into(), "json".into());
        for p in PIPELINES {
            let topic = format!("{prefix}-{p}");
            sluice_testkit::create_topic(&stack, &topic, 3).await;
            vars.insert(
                p.parse::<sluice_core::PipelineKind>()
                    .expect("a pipeline name")
                    .topic_variable(),
                topic,
            );
        }
        Some(Env {
            stack,
            schema,
            prefix,
            dir,
            vars,
        })
    }

    pub fn topic(&self, pipeline: &str) -> String {
        format!("{}-{pipeline}", self.prefix)
    }

    pub fn group(&self, pipeline: &str) -> String {
        format!("{}.{pipeline}", self.prefix)
    }

    /// A `sluice` command with this environment (and nothing inherited that could leak).
    pub fn sluice(&self, args: &[&str]) -> Command {
        self.command(&sluice_binary(), args)
    }

    /// `program` with `args`, in the same clean environment as [`Env::sluice`].
    pub fn command(&self, program: &std::path::Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default());
        cmd.envs(&self.vars);
        cmd
    }

    /// Runs a command to completion.
    pub fn output(&self, args: &[&str], extra: &[(&str, &str)]) -> Output {
        let mut cmd = self.sluice(args);
        cmd.envs(extra.iter().copied());
        cmd.output().unwrap()
    }

    /// Starts `sluice run` with its stderr (JSON log) in a file.
    pub fn spawn_run(&self, name: &str, extra: &[(&str, &str)]) -> Running {
        let log = self.dir.join(format!("{name}.log"));
        let mut cmd = self.sluice(&["run"]);
        cmd.envs(extra.iter().copied());
        cmd.stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        Running {
            child: cmd.spawn().unwrap(),
            log,
        }
    }

    pub fn admin(&self) -> Admin {
        Admin::new(
            &sluice_core::KafkaClientSettings::new(&self.stack.bootstrap),
            Duration::from_secs(10),
        )
        .unwrap()
    }

    /// (end offsets, committed offsets) summed over the topic's partitions. Retries for a
    /// while: right after a broker restart, metadata calls fail until leaders are elected.
    pub fn offsets(&self, pipeline: &str) -> (i64, i64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let admin = self.admin();
            let attempt = admin.watermarks(&self.topic(pipeline)).and_then(|marks| {
                let committed =
                    admin.committed_offsets(&self.group(pipeline), &self.topic(pipeline))?;
                Ok((
                    marks.iter().map(|m| m.high).sum(),
                    committed.iter().map(|(_, o)| o.unwrap_or(0)).sum(),
                ))
            });
            match attempt {
                Ok(offsets) => return offsets,
                Err(error) if Instant::now() < deadline => {
                    eprintln!("offsets of {pipeline}: {error}; retrying");
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(error) => panic!("offsets of {pipeline}: {error}"),
            }
        }
    }

    pub fn group_members_now(&self, pipeline: &str) -> usize {
        self.admin().group_members(&self.group(pipeline)).unwrap()
    }

    pub async fn wait_caught_up(&self, pipeline: &str, running: &mut Running, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let (end, committed) = self.offsets(pipeline);
            if end > 0 && committed == end {
                return;
            }
            if let Some(status) = running.child.try_wait().unwrap() {
                panic!(
                    "sluice run exited with {status} while catching up:\n{}",
                    running.tail()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{pipeline}: committed {committed}/{end}\n{}",
                running.tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until `sql` counts at least `at_least` rows, `run` still alive. An error counts
    /// as "not yet" (the binary may not have created the table yet) until the deadline.
    pub async fn wait_rows(
        &self,
        sql: &str,
        at_least: i64,
        run: &mut Running,
        timeout: Duration,
    ) -> i64 {
        let deadline = Instant::now() + timeout;
        let mut conn = self.schema.connect().await;
        loop {
            run.assert_alive();
            let n: Result<i64, _> = sqlx::query_scalar(sql).fetch_one(&mut conn).await;
            if let Ok(n) = n
                && n >= at_least
            {
                return n;
            }
            assert!(
                Instant::now() < deadline,
                "{sql}: {n:?} after {timeout:?}, expected at least {at_least} rows"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn count(&self, sql: &str) -> i64 {
        let mut conn = self.schema.connect().await;
        sqlx::query_scalar(sql)
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    pub async fn produce_json(&self, pipeline: &str, messages: &[(String, Value)]) {
        let records: Vec<sluice_testkit::RawRecord> = messages
            .iter()
            .map(|(k, v)| {
                (
                    Some(k.clone().into_bytes()),
                    Some(v.to_string().into_bytes()),
                )
            })
            .collect();
        sluice_testkit::produce(&self.stack, &self.topic(pipeline), &records).await;
    }

    pub async fn cleanup(self) {
        let topics: Vec<String> = PIPELINES.iter().map(|p| self.topic(p)).collect();
        let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        sluice_testkit::delete_topics(&self.stack, &refs).await;
        let _ = std::fs::remove_dir_all(&self.dir);
        self.schema.clone().drop_schema().await;
    }
}

impl Drop for Env {
    /// On a failing test, print the tail of every `sluice run` log and keep the schema and
    /// topics for diagnosis.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let mut logs: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        logs.retain(|p| p.extension().is_some_and(|e| e == "log"));
        logs.sort();
        for log in logs {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(40)..].join("\n");
            eprintln!("--- last lines of {} ---\n{tail}", log.display());
        }
        eprintln!(
            "(schema {} and topics {}-* are left for diagnosis)",
            self.schema.name, self.prefix
        );
    }
}

/// A running `sluice run`.
pub struct Running {
    pub child: Child,
    pub log: PathBuf,
}

impl Running {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Panics (with the log's tail) if the process has exited.
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "sluice run exited on its own with {status}:\n{}",
                self.tail()
            );
        }
    }

    pub fn signal(&self, signal: &str) {
        let ok = Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status()
            .unwrap();
        assert!(ok.success(), "kill -{signal}");
    }

    /// Waits for the process to exit, at most `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "sluice run did not exit within {timeout:?}:\n{}",
                    self.tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The JSON log events.
    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The events with this message.
    pub fn events_named(&self, message: &str) -> Vec<Value> {
        self.events()
            .into_iter()
            .filter(|e| e["message"] == message)
            .collect()
    }

    /// Waits for the first committed batch that held records; returns the time since
    /// `since` (the process's start: the restart-to-first-batch figure).
    pub fn first_batch(&mut self, since: Instant, timeout: Duration) -> Duration {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self
                .events_named("batch committed")
                .iter()
                .any(|e| e["records"].as_u64().is_some_and(|n| n > 0));
            if found {
                return since.elapsed();
            }
            self.assert_alive();
            assert!(
                Instant::now() < deadline,
                "no batch committed within {timeout:?}:\n{}",
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `check` every 500 ms until it returns `Some`, or panics after `timeout` with
/// `what` and the child's log tail (or at once if the child exited).
pub fn wait_for<T>(
    what: &str,
    timeout: Duration,
    child: &mut Running,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let started = Instant::now();
    loop {
        child.assert_alive();
        if let Some(found) = check() {
            return found;
        }
        assert!(
            started.elapsed() < timeout,
            "{what}: not within {timeout:?}\n{}",
            child.tail()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub fn review(i: usize, package: &str, synced: &str) -> Value {
    serde_json::json!({
        "review_id": format!("r-{i}"),
        "package_name": package,
        "score": (i % 5) + 1,
        "content": format!("text {i}"),
        "thumbs_up_count": i % 100,
        "at": "2026-11-01T10:00:00Z",
        "last_synced_at": synced,
    })
}

/// One record read back: (partition, offset, key, event id).
pub type OutboxRecord = (i32, i64, String, uuid::Uuid);

/// Every record of an outbox topic, sorted, with the event id from its header.
pub fn read_outbox_topic(bootstrap: &str, topic: &str) -> Vec<OutboxRecord> {
    let mut records = read_topic(bootstrap, topic, |m| {
        let id = m
            .headers()
            .and_then(|h| h.iter().find(|h| h.key == sluice_outbox::EVENT_ID_HEADER))
            .and_then(|h| h.value)
            .map(|v| uuid::Uuid::parse_str(std::str::from_utf8(v).unwrap()).unwrap())
            .unwrap_or_else(uuid::Uuid::nil);
        let key = String::from_utf8(m.key().unwrap_or_default().to_vec()).unwrap();
        (m.partition(), m.offset(), key, id)
    });
    records.sort();
    records
}

/// `each` of every record of a topic, read from its start to its end (at most 120 s), in
/// the order they arrive (per partition, by offset).
pub fn read_topic<T>(
    bootstrap: &str,
    topic: &str,
    mut each: impl FnMut(&rdkafka::message::BorrowedMessage<'_>) -> T,
) -> Vec<T> {
    let reader: rdkafka::consumer::BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "test-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .unwrap();
    let metadata = reader
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let partitions = metadata.topics()[0].partitions().len() as i32;
    let mut list = rdkafka::TopicPartitionList::new();
    let mut open = std::collections::BTreeSet::new();
    for p in 0..partitions {
        let (low, high) = reader
            .fetch_watermarks(topic, p, Duration::from_secs(10))
            .unwrap();
        if high > low {
            list.add_partition_offset(topic, p, rdkafka::Offset::Offset(low))
                .unwrap();
            open.insert(p);
        }
    }
    let mut records = vec![];
    if open.is_empty() {
        return records;
    }
    reader.assign(&list).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !open.is_empty() {
        assert!(Instant::now() < deadline, "reading {topic} took too long");
        match reader.poll(Duration::from_millis(500)) {
            None => {}
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                open.remove(&p);
            }
            Some(Err(e)) => panic!("read {topic}: {e}"),
            Some(Ok(m)) => records.push(each(&m)),
        }
    }
    records
}

/// Produces `lines` (`key<TAB>value`) with Kafka's Java console producer and `codec`.
pub fn java_produce(env: &Env, topic: &str, codec: &str, lines: &[String]) {
    let mut child =
        Command::new(std::env::var("SLUICE_STACK").expect("SLUICE_STACK (from scripts/stack env)"))
            .args([
                "kafka-tool",
                "org.apache.kafka.tools.ConsoleProducer",
                "--bootstrap-server",
                &env.stack.bootstrap,
                "--topic",
                topic,
                "--compression-codec",
                codec,
                "--reader-property",
                "parse.key=true",
                "--reader-property",
                "key.separator=\t",
                "--producer-property",
                "linger.ms=50",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for line in lines {
            writeln!(stdin, "{line}").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "console producer ({codec}) failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
