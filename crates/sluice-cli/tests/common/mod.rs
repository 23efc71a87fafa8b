//! Support for the crash tests of the `sluice` binary: a per-test environment (schema with
//! the applications fixture, unique topics, group prefix and temp dir) and `sluice run` as a
//! child process whose stderr goes to a log file. When a test panics, the tail of every log
//! of its environment is printed.
#![allow(dead_code, reason = "each test file uses a different part")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use serde_json::Value;
use sluice_kafka::Admin;
use sluice_testkit::{Stack, TestSchema};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// One test's slice of the stack.
pub struct Env {
    pub stack: Stack,
    pub schema: TestSchema,
    pub prefix: String,
    /// Logs and heartbeat files.
    pub dir: PathBuf,
    /// The environment of every `sluice` started here.
    pub vars: BTreeMap<String, String>,
    pipelines: Vec<String>,
}

impl Env {
    /// A fresh schema, one 3-partition topic per pipeline, a unique group prefix.
    pub async fn new(pipelines: &[&str]) -> Option<Env> {
        let stack = sluice_testkit::stack()?;
        let schema = TestSchema::create(&stack).await;
        let prefix = sluice_testkit::unique("crash");
        let dir = std::env::temp_dir().join(&prefix);
        std::fs::create_dir_all(&dir).unwrap();
        let mut vars = BTreeMap::new();
        let mut set = |k: &str, v: String| vars.insert(k.to_owned(), v);
        set("KAFKA_BOOTSTRAP_SERVERS", stack.bootstrap.clone());
        set("DATABASE_URL", schema.url.clone());
        set("STORAGE_PIPELINES", pipelines.join(","));
        set("STORAGE_GROUP_PREFIX", prefix.clone());
        set(
            "STORAGE_HEARTBEAT_DIR",
            dir.join("heartbeat").display().to_string(),
        );
        set("STORAGE_POLL_TIMEOUT_MS", "200".into());
        set("SLUICE_LOG_FORMAT", "json".into());
        for pipeline in pipelines {
            let topic = format!("{prefix}-{pipeline}");
            sluice_testkit::create_topic(&stack, &topic, 3).await;
            set(&topic_variable(pipeline), topic);
        }
        Some(Env {
            stack,
            schema,
            prefix,
            dir,
            vars,
            pipelines: pipelines.iter().map(|p| (*p).to_owned()).collect(),
        })
    }

    pub fn topic(&self, pipeline: &str) -> String {
        format!("{}-{pipeline}", self.prefix)
    }

    pub fn group(&self, pipeline: &str) -> String {
        format!("{}.{pipeline}", self.prefix)
    }

    /// Starts `sluice run` (nothing inherited from the test's environment but `PATH`), its
    /// stderr in `<dir>/<name>.log`.
    pub fn spawn_run(&self, name: &str, extra: &[(&str, &str)]) -> Sluice {
        let log = self.dir.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("run")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(&self.vars)
            .envs(extra.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Sluice {
            child,
            name: name.to_owned(),
            log,
        }
    }

    pub fn admin(&self) -> Admin {
        Admin::new(&self.stack.bootstrap, Duration::from_secs(10)).unwrap()
    }

    /// (end offsets, committed offsets) of a pipeline's topic and group, summed.
    pub fn offsets(&self, pipeline: &str) -> (i64, i64) {
        let admin = self.admin();
        let end = admin
            .watermarks(&self.topic(pipeline))
            .unwrap()
            .iter()
            .map(|m| m.high)
            .sum();
        let committed = admin
            .committed_offsets(&self.group(pipeline), &self.topic(pipeline))
            .unwrap()
            .iter()
            .map(|(_, o)| o.unwrap_or(0))
            .sum();
        (end, committed)
    }

    /// Waits until the group has committed every offset of its topic, `run` still alive.
    pub async fn wait_caught_up(&self, pipeline: &str, run: &mut Sluice, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            run.assert_alive();
            let (end, committed) = self.offsets(pipeline);
            if end > 0 && committed == end {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{pipeline}: committed {committed} of {end} after {timeout:?}"
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
        run: &mut Sluice,
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

    /// Deletes the topics, the schema and the temp dir (left in place when a test fails).
    pub async fn cleanup(self) {
        let topics: Vec<String> = self.pipelines.iter().map(|p| self.topic(p)).collect();
        let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        sluice_testkit::delete_topics(&self.stack, &refs).await;
        self.schema.clone().drop_schema().await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Env {
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
            eprintln!(
                "--- last lines of {} ---\n{}",
                log.display(),
                tail(&log, 40)
            );
        }
        eprintln!(
            "(schema {} and topics {}-* are left for diagnosis)",
            self.schema.name, self.prefix
        );
    }
}

/// The last `n` lines of a file.
pub fn tail(path: &PathBuf, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A running `sluice run`; killed (SIGKILL) if dropped while still running.
pub struct Sluice {
    pub child: Child,
    pub name: String,
    pub log: PathBuf,
}

impl Sluice {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Panics (with the log's tail) if the process has exited.
    pub fn assert_alive(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "sluice run ({}) exited on its own with {status}:\n{}",
                self.name,
                tail(&self.log, 40)
            );
        }
    }

    /// Sends a signal with `kill(1)`.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {}", self.pid());
    }

    /// Waits for the process to exit, at most `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "sluice run ({}) did not exit within {timeout:?}:\n{}",
                self.name,
                tail(&self.log, 40)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The JSON log events with this message (`SLUICE_LOG_FORMAT=json`).
    pub fn events_named(&self, message: &str) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["message"] == message)
            .collect()
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn topic_variable(pipeline: &str) -> String {
    format!(
        "STORAGE_TOPIC_{}",
        pipeline.replace('-', "_").to_uppercase()
    )
}
