//! A test of declared sinks through the `sluice` binary: its sinks (one topic each, one
//! partition, so records keep their order), a mapping file, the tables its DDL makes.

use super::{Env, Running};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

/// The sinks of a test: one topic each (one partition, so records keep their order) named
/// `<prefix>-<sink>`, one mapping file (`{prefix}` in it replaced), the tables made by `ddl`.
pub struct Case {
    pub env: Env,
    pub sinks: Vec<String>,
    pub file: PathBuf,
}

impl Case {
    pub async fn new(sinks: &[&str], ddl: &str, mapping: &str) -> Option<Case> {
        Self::with_partitions(sinks, ddl, mapping, 1).await
    }

    /// As [`Case::new`], with `partitions` partitions per topic (records keep their order per
    /// key only).
    pub async fn with_partitions(
        sinks: &[&str],
        ddl: &str,
        mapping: &str,
        partitions: i32,
    ) -> Option<Case> {
        let env = Env::new().await?;
        {
            let mut conn = env.schema.connect().await;
            sqlx::raw_sql(ddl).execute(&mut conn).await.unwrap();
        }
        for sink in sinks {
            sluice_testkit::create_topic(&env.stack, &format!("{}-{sink}", env.prefix), partitions)
                .await;
        }
        let file = env.dir.join("sinks.toml");
        std::fs::write(&file, mapping.replace("{prefix}", &env.prefix)).unwrap();
        Some(Case {
            env,
            sinks: sinks.iter().map(|s| (*s).to_owned()).collect(),
            file,
        })
    }

    pub fn topic(&self, sink: &str) -> String {
        format!("{}-{sink}", self.env.prefix)
    }

    /// `sluice sinks validate` of a mapping file.
    pub fn validate(&self, file: &std::path::Path) -> Output {
        self.env
            .output(&["sinks", "validate", &file.display().to_string()], &[])
    }

    /// Asserts the mapping validates; its plan.
    pub fn assert_valid(&self) -> String {
        let out = self.validate(&self.file);
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{stdout}\n{}",
            text(&out.stderr)
        );
        stdout
    }

    /// Produces JSON values to `sink`'s topic.
    pub async fn produce(&self, sink: &str, values: &[Value]) {
        let texts: Vec<String> = values.iter().map(Value::to_string).collect();
        self.produce_text(sink, &texts).await;
    }

    /// Produces records with keys and headers, in order: (key, value, headers).
    pub async fn produce_full(&self, sink: &str, records: &[sluice_testkit::FullRecord]) {
        sluice_testkit::produce_full(&self.env.stack, &self.topic(sink), records).await;
    }

    /// Produces record values written as text (numbers no `Value` can hold exactly).
    pub async fn produce_text(&self, sink: &str, values: &[String]) {
        let records: Vec<sluice_testkit::RawRecord> = values
            .iter()
            .map(|v| (Some(sink.as_bytes().to_vec()), Some(v.clone().into_bytes())))
            .collect();
        sluice_testkit::produce(&self.env.stack, &self.topic(sink), &records).await;
    }

    /// Runs the sinks until each has committed every record of its topic, then stops them
    /// with SIGTERM and asserts a clean exit (the process never exits on its own meanwhile).
    pub async fn run_to_end(&self, label: &str) -> Running {
        let file = self.file.display().to_string();
        let mut run = self
            .env
            .spawn_run(label, &[("SLUICE_SINKS_FILE", file.as_str())]);
        let deadline = Instant::now() + Duration::from_secs(120);
        for sink in &self.sinks {
            let (group, topic) = (self.env.group(sink), self.topic(sink));
            loop {
                run.assert_alive();
                let offsets = self.env.admin().group_offsets(&group, &topic).unwrap();
                let end: i64 = offsets.iter().map(|p| p.high).sum();
                let committed: i64 = offsets.iter().map(|p| p.committed.unwrap_or(0)).sum();
                if end > 0 && committed == end {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{group}: committed {committed}/{end}\n{}",
                    run.tail()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        run.signal("TERM");
        assert!(
            run.wait(Duration::from_secs(60)).success(),
            "{}",
            run.tail()
        );
        run
    }

    /// Waits until `group` has committed every record of `topic` (at least one), while
    /// `run` stays up.
    pub async fn wait_committed(&self, run: &mut Running, group: &str, topic: &str) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            run.assert_alive();
            let offsets = self.env.admin().group_offsets(group, topic).unwrap();
            let end: i64 = offsets.iter().map(|p| p.high).sum();
            let done: i64 = offsets.iter().map(|p| p.committed.unwrap_or(0)).sum();
            if end > 0 && done == end {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{topic}: {done}/{end}\n{}",
                run.tail()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The rows of a one-column text query.
    pub async fn rows(&self, sql: &str) -> Vec<String> {
        let mut conn = self.env.schema.connect().await;
        sqlx::query_scalar(sql)
            .fetch_all(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// The dead letters as (topic, offset, kind, reason), in topic and offset order.
    pub async fn dead_letters(&self) -> Vec<(String, i64, String, String)> {
        let mut conn = self.env.schema.connect().await;
        sqlx::query_as(
            "SELECT topic, kafka_offset, error_kind, reason FROM dead_letter_events \
             ORDER BY topic, kafka_offset",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap()
    }

    pub async fn cleanup(self) {
        let topics: Vec<String> = self.sinks.iter().map(|s| self.topic(s)).collect();
        let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
        sluice_testkit::delete_topics(&self.env.stack, &topics).await;
        self.env.cleanup().await;
    }
}

/// Bytes as text (lossy).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
