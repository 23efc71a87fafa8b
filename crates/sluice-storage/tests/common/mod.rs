//! Shared fixture of the storage integration tests: a unique schema, unique topics and
//! group prefix, and the pipelines running in-process on their own threads.
#![allow(
    dead_code,
    reason = "each test file uses a different part of the fixture"
)]

use serde_json::{Value, json};
use sluice_core::PipelineKind;
use sluice_storage::PipelineTotals;
use sluice_storage::StorageSettings;
use sluice_storage::run_pipelines;
use sluice_testkit::{Stack, TestSchema};
use sqlx::PgConnection;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub struct Fixture {
    pub stack: Stack,
    pub schema: TestSchema,
    pub prefix: String,
    pub topics: BTreeMap<PipelineKind, String>,
    pub heartbeat_dir: String,
}

pub type Running = (
    CancellationToken,
    JoinHandle<Result<Vec<(String, PipelineTotals)>, sluice_storage::SupervisorError>>,
);

impl Fixture {
    /// Schema with migrations applied, and 3-partition topics for every pipeline.
    pub async fn new() -> Option<Fixture> {
        let stack = sluice_testkit::stack()?;
        let schema = TestSchema::create(&stack).await;
        let prefix = sluice_testkit::unique("it");
        let mut topics = BTreeMap::new();
        for kind in PipelineKind::ALL {
            let topic = format!("{prefix}-{}", kind.name());
            sluice_testkit::create_topic(&stack, &topic, 3).await;
            topics.insert(kind, topic);
        }
        let mut conn = schema.connect().await;
        sluice_postgres::migrate(&mut conn, "apps_registry_application")
            .await
            .expect("migrate");
        let heartbeat_dir = std::env::temp_dir().join(&prefix).display().to_string();
        Some(Fixture {
            stack,
            schema,
            prefix,
            topics,
            heartbeat_dir,
        })
    }

    pub fn topic(&self, kind: PipelineKind) -> &str {
        &self.topics[&kind]
    }

    pub fn group(&self, kind: PipelineKind) -> String {
        format!("{}.{}", self.prefix, kind.name())
    }

    /// StorageSettings for the given pipelines; `extra` overrides any variable.
    pub fn settings(&self, kinds: &[PipelineKind], extra: &[(&str, &str)]) -> StorageSettings {
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        let mut map: BTreeMap<String, String> = BTreeMap::new();
        let mut set = |k: &str, v: &str| map.insert(k.to_owned(), v.to_owned());
        set("KAFKA_BOOTSTRAP_SERVERS", &self.stack.bootstrap);
        set("DATABASE_URL", &self.schema.url);
        set("STORAGE_PIPELINES", &names.join(","));
        set("STORAGE_GROUP_PREFIX", &self.prefix);
        for kind in PipelineKind::ALL {
            set(&kind.topic_variable(), self.topic(kind));
        }
        set("STORAGE_HEARTBEAT_DIR", &self.heartbeat_dir);
        set("STORAGE_SESSION_TIMEOUT_MS", "10000");
        set("STORAGE_POLL_TIMEOUT_MS", "200");
        for (k, v) in extra {
            set(k, v);
        }
        StorageSettings::from_map(&map).expect("test settings")
    }

    /// Starts the pipelines on their threads.
    pub fn start(&self, settings: StorageSettings) -> Running {
        let stop = CancellationToken::new();
        let token = stop.clone();
        let handle = std::thread::spawn(move || {
            let names: Vec<_> = settings.pipelines.iter().map(|p| p.kind.name()).collect();
            let mut registry = prometheus_client::registry::Registry::default();
            let metrics = sluice_storage::StorageMetrics::register(&mut registry, &names);
            run_pipelines(Arc::new(settings), &metrics, token)
        });
        (stop, handle)
    }

    pub async fn conn(&self) -> PgConnection {
        self.schema.connect().await
    }

    /// What `sluice replay <kind> --to earliest --execute` does: the group's offsets in
    /// PostgreSQL (the ones a pipeline starts from) and in Kafka back to each partition's start.
    pub async fn replay_to_earliest(&self, kind: PipelineKind) {
        let admin = sluice_kafka::Admin::new(
            &sluice_core::KafkaClientSettings::new(&self.stack.bootstrap),
            Duration::from_secs(10),
        )
        .unwrap();
        let lows: Vec<(i32, i64)> = admin
            .watermarks(self.topic(kind))
            .unwrap()
            .iter()
            .map(|m| (m.partition, m.low))
            .collect();
        let offsets: Vec<(String, i32, i64)> = lows
            .iter()
            .map(|(p, low)| (self.topic(kind).to_owned(), *p, *low))
            .collect();
        let mut conn = self.conn().await;
        sluice_postgres::offsets::set_offsets(&mut conn, &self.group(kind), &offsets)
            .await
            .unwrap();
        admin
            .commit_group_offsets(&self.group(kind), self.topic(kind), &lows)
            .unwrap();
        assert_eq!(self.offsets(kind).1, 0, "{kind} reset");
    }

    pub async fn count(&self, sql: &str) -> i64 {
        let mut conn = self.conn().await;
        sqlx::query_scalar(sql)
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    pub async fn count_text(&self, sql: &str) -> String {
        let mut conn = self.conn().await;
        sqlx::query_scalar(sql)
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }

    /// Sum over partitions of (end offset) and of the group's committed offset.
    pub fn offsets(&self, kind: PipelineKind) -> (i64, i64) {
        let admin = sluice_kafka::Admin::new(
            &sluice_core::KafkaClientSettings::new(&self.stack.bootstrap),
            Duration::from_secs(10),
        )
        .unwrap();
        let end: i64 = admin
            .watermarks(self.topic(kind))
            .unwrap()
            .iter()
            .map(|m| m.high)
            .sum();
        let committed: i64 = admin
            .committed_offsets(&self.group(kind), self.topic(kind))
            .unwrap()
            .iter()
            .map(|(_, o)| o.unwrap_or(0))
            .sum();
        (end, committed)
    }

    /// Waits until the group's committed offsets reach the end offsets of its topic.
    pub async fn wait_caught_up(&self, kind: PipelineKind, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let (end, committed) = self.offsets(kind);
            if end > 0 && committed == end {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{kind}: committed {committed} of {end} after {timeout:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn produce_json(&self, kind: PipelineKind, messages: &[(String, Value)]) {
        let records: Vec<sluice_testkit::RawRecord> = messages
            .iter()
            .map(|(key, value)| {
                (
                    Some(key.clone().into_bytes()),
                    Some(value.to_string().into_bytes()),
                )
            })
            .collect();
        sluice_testkit::produce(&self.stack, self.topic(kind), &records).await;
    }

    pub async fn cleanup(self) {
        let topics: Vec<&str> = self.topics.values().map(String::as_str).collect();
        sluice_testkit::delete_topics(&self.stack, &topics).await;
        let _ = std::fs::remove_dir_all(&self.heartbeat_dir);
        self.schema.drop_schema().await;
    }
}

/// Stops the pipelines and returns their totals.
pub fn stop(running: Running) -> BTreeMap<PipelineKind, PipelineTotals> {
    let (stop, handle) = running;
    stop.cancel();
    handle
        .join()
        .expect("supervisor thread")
        .expect("pipelines stop cleanly")
        .into_iter()
        .map(|(name, totals)| (name.parse().expect("a built-in pipeline"), totals))
        .collect()
}

pub fn app_names(prefix: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("com.{}.app{i}", prefix.replace('-', "_")))
        .collect()
}

pub fn review(i: usize, package: &str, synced: &str, thumbs: i64) -> Value {
    json!({
        "review_id": format!("gp:review-{i}"),
        "package_name": package,
        "user_name": format!("User {i} Ünïcödé"),
        "score": (i % 5) + 1,
        "content": format!("review text {i} — پیام ✓"),
        "thumbs_up_count": thumbs,
        "app_version": "1.2.3",
        "at": "2026-11-01T10:00:00Z",
        "reply_content": null,
        "last_synced_at": synced,
    })
}

pub fn app_stats(package: &str, crawled_at: &str) -> Value {
    json!({
        "package_name": package,
        "crawled_at": crawled_at,
        "title": "An app",
        "score": 4.25,
        "ratings": 12345,
        "reviews_count": 678,
        "installs_min": 1_000_000,
        "installs_real": 1_234_567,
        "histogram": [1, 2, 3, 4, 5],
        "price": 0.0,
        "free": true,
        "version": "2.0",
        "updated_at": "2026-10-01T00:00:00",
    })
}

pub fn network_metrics(analysis_id: &str, package: &str) -> Value {
    json!({
        "analysis_id": analysis_id,
        "package_name": package,
        "captured_at": "2026-11-02T12:00:00.123456Z",
        "duration_seconds": 12.5,
        "packet_count": 1000,
        "total_bytes": 123456789,
        "bytes_sent": 1000,
        "bytes_received": 2000,
        "dns_queries": 12,
        "tls_handshakes": 3,
        "plaintext_http_requests": 0,
        "domains": ["a.example.com", "b.example.org"],
    })
}
