//! sluice on the stack's three-broker KRaft cluster (`scripts/stack up --brokers 3`):
//!
//! - `sluice verify --strict` fails on the single broker's replication-factor-1 topics and
//!   passes on the topics `sluice topics ensure` creates on the cluster (RF 3, min.insync 2);
//! - the leader of a reviews partition is SIGKILLed in the middle of a 200,000-review ingest
//!   and started again later: exact rows, no dead letters, the same `sluice run` throughout;
//! - the same kill during 20,000 outbox events with two `sluice dispatch` processes: each
//!   event id exactly once in the topic.
//!
//! One test function: the scenarios kill brokers of the one shared cluster. No other test
//! binary uses the cluster, so `scripts/test-all` runs this one in its pool.
//!
//! sluice-test: uses-registry (its `scripts/stack up --brokers 3` starts the shared registry
//! if it is stopped, and holds the stack's lock while the cluster starts: never beside the
//! binary that stops and freezes the registry on purpose).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::json;
use sluice_core::{KafkaClientSettings, TopicSettings};
use sluice_kafka::Admin;
use sluice_outbox::{NewEvent, enqueue};
use sluice_testkit::Stack;
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;
use uuid::Uuid;

const REVIEWS: usize = 200_000;
const EVENTS: usize = 20_000;

/// `$SLUICE_STACK <args>`; panics if it fails.
fn stack(script: &str, args: &[&str]) {
    let status = Command::new(script)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("{script} {args:?}: {e}"));
    assert!(status.success(), "{script} {args:?} failed: {status}");
}

/// A cluster node SIGKILLed while this lives; dropping it (also while unwinding) starts it.
struct NodeKilled {
    script: String,
    node: i32,
}

impl NodeKilled {
    fn kill(script: &str, node: i32) -> Self {
        stack(script, &["kafka-kill", &node.to_string()]);
        Self {
            script: script.to_owned(),
            node,
        }
    }

    /// Starts the node and waits until it is back in every ISR.
    fn start(self) -> Duration {
        let started = Instant::now();
        stack(&self.script, &["kafka-start", &self.node.to_string()]);
        std::mem::forget(self);
        started.elapsed()
    }
}

impl Drop for NodeKilled {
    fn drop(&mut self) {
        let status = Command::new(&self.script)
            .args(["kafka-start", &self.node.to_string()])
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("kafka-start {} failed: {status:?}", self.node);
        }
    }
}

/// The broker (node id) leading partition 0 of `topic`.
fn leader(bootstrap: &str, topic: &str) -> i32 {
    let client: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let metadata = client
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let partition = metadata.topics()[0]
        .partitions()
        .iter()
        .find(|p| p.id() == 0)
        .expect("partition 0");
    assert!(partition.leader() >= 1, "partition 0 has a leader");
    partition.leader()
}

/// Every record of `topic` by its `sluice-event-id` header (nil when absent): copies per id.
fn event_ids(bootstrap: &str, topic: &str) -> BTreeMap<Uuid, usize> {
    let mut found: BTreeMap<Uuid, usize> = BTreeMap::new();
    for (_, _, _, id) in read_outbox_topic(bootstrap, topic) {
        *found.entry(id).or_default() += 1;
    }
    found
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_broker_cluster_durable_topics_and_a_leader_killed_mid_flight() {
    let Some(env) = Env::new().await else { return };
    let script = std::env::var("SLUICE_STACK").expect("SLUICE_STACK (from scripts/stack env)");
    let started = Instant::now();
    stack(&script, &["up", "--brokers", "3"]);
    println!(
        "stack up --brokers 3: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let cluster = std::env::var("SLUICE_KAFKA3_BOOTSTRAP_SERVERS")
        .expect("SLUICE_KAFKA3_BOOTSTRAP_SERVERS (from scripts/stack env)");
    let migrated = env.output(&["migrate", "--seeds"], &[]);
    assert!(migrated.status.success(), "{}", text(&migrated.stderr));

    // (c) The single broker's topics (replication factor 1): a warning, a failure if strict.
    let loose = env.output(&["verify"], &[]);
    assert!(loose.status.success(), "{}", text(&loose.stdout));
    assert!(
        text(&loose.stdout).contains("WARN"),
        "{}",
        text(&loose.stdout)
    );
    let strict = env.output(&["verify", "--strict"], &[]);
    let stderr = text(&strict.stderr);
    assert_eq!(strict.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "topic {}: replication factor 1 < 3",
            env.topic("reviews")
        )),
        "{stderr}"
    );
    println!("verify --strict on the single broker: {}", stderr.trim());

    // Topics on the cluster made by `sluice topics ensure`.
    let k3 = format!("{}-k3", env.prefix);
    let mut vars: Vec<(String, String)> = vec![("KAFKA_BOOTSTRAP_SERVERS".into(), cluster.clone())];
    for p in PIPELINES {
        vars.push((
            p.parse::<sluice_core::PipelineKind>()
                .expect("a pipeline name")
                .topic_variable(),
            format!("{k3}-{p}"),
        ));
    }
    let cluster_vars: Vec<(&str, &str)> =
        vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let ensured = env.output(&["topics", "ensure"], &cluster_vars);
    let stdout = text(&ensured.stdout);
    assert!(
        ensured.status.success(),
        "{stdout}{}",
        text(&ensured.stderr)
    );
    assert_eq!(
        stdout
            .matches("created with 3 partitions, replication factor 3, min.insync.replicas 2")
            .count(),
        3,
        "{stdout}"
    );
    assert!(!stdout.contains("note:"), "{stdout}");
    let admin = Admin::new(&KafkaClientSettings::new(&cluster), Duration::from_secs(10)).unwrap();
    for p in PIPELINES {
        let state = admin
            .describe_topic(&format!("{k3}-{p}"))
            .await
            .unwrap()
            .expect("topic exists");
        assert_eq!(
            (
                state.partitions,
                state.replication_factor,
                state.min_insync_replicas
            ),
            (3, 3, Some(2)),
            "{p}"
        );
        assert!(!state.unclean_leader_election);
    }
    // describe on the cluster: three replicas, all in sync, a leader for every partition.
    let described = env.output(&["topics", "describe", "--json"], &cluster_vars);
    assert!(described.status.success(), "{}", text(&described.stderr));
    let described: serde_json::Value = serde_json::from_slice(&described.stdout).unwrap();
    for topic in described.as_array().unwrap() {
        assert_eq!(topic["replication_factor"], 3, "{topic}");
        assert_eq!(topic["under_replicated_partitions"], 0, "{topic}");
        assert_eq!(topic["configs"]["min.insync.replicas"]["value"], "2");
        for p in topic["partitions"].as_array().unwrap() {
            let replicas: BTreeSet<i64> = p["replicas"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect();
            let isr: BTreeSet<i64> = p["isr"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap())
                .collect();
            assert_eq!((replicas.len(), &isr), (3, &replicas), "{p}");
            assert!(replicas.contains(&p["leader"].as_i64().unwrap()), "{p}");
        }
    }
    // A replication factor set to another value than a topic's is refused, nothing changed.
    let mut refuse = cluster_vars.clone();
    refuse.push(("STORAGE_TOPIC_REPLICATION_FACTOR_REVIEWS", "2"));
    let refused = env.output(&["topics", "ensure"], &refuse);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stdout));
    assert!(
        text(&refused.stdout).contains(
            "refused: its replication factor is 3 and STORAGE_TOPIC_REPLICATION_FACTOR_REVIEWS=2"
        ),
        "{}",
        text(&refused.stdout)
    );
    let strict = env.output(&["verify", "--strict"], &cluster_vars);
    assert!(
        strict.status.success(),
        "verify --strict on the cluster: {}{}",
        text(&strict.stdout),
        text(&strict.stderr)
    );

    // (a) 200,000 reviews; partition 0's leader SIGKILLed mid-ingest, started later.
    let reviews_topic = format!("{k3}-reviews");
    let apps: Vec<String> = (0..20)
        .map(|i| format!("com.{}.k3{i}", env.prefix.replace('-', "_")))
        .collect();
    env.schema.register_apps(&apps).await;
    let records: Vec<sluice_testkit::RawRecord> = (0..REVIEWS)
        .map(|i| {
            let app = &apps[i % apps.len()];
            (
                Some(app.clone().into_bytes()),
                Some(
                    review(i, app, "2026-11-01T10:00:00Z")
                        .to_string()
                        .into_bytes(),
                ),
            )
        })
        .collect();
    let cluster_stack = Stack {
        bootstrap: cluster.clone(),
        database_url: env.stack.database_url.clone(),
    };
    sluice_testkit::produce(&cluster_stack, &reviews_topic, &records).await;
    drop(records);
    let mut run_vars = cluster_vars.clone();
    run_vars.push(("STORAGE_PIPELINES", "reviews"));
    let count = "SELECT count(*) FROM reviews";
    let started = Instant::now();
    let mut run = env.spawn_run("cluster-run", &run_vars);
    let pid = run.pid();
    let before = env
        .wait_rows(
            count,
            (REVIEWS / 5) as i64,
            &mut run,
            Duration::from_secs(120),
        )
        .await;
    let node = leader(&cluster, &reviews_topic);
    let killed = NodeKilled::kill(&script, node);
    let killed_at = Instant::now();
    println!("node {node} (leader of {reviews_topic}/0) SIGKILLed at {before} rows");
    let during = env
        .wait_rows(
            count,
            (REVIEWS / 2) as i64,
            &mut run,
            Duration::from_secs(120),
        )
        .await;
    // Keep the node down for at least 10 s so that the ingest rides on the new leaders.
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(killed_at.elapsed())).await;
    let back = killed.start();
    println!(
        "{during} rows with node {node} down; node {node} back in every ISR after {:.1} s",
        back.as_secs_f64()
    );
    let rows = env
        .wait_rows(count, REVIEWS as i64, &mut run, Duration::from_secs(180))
        .await;
    let took = started.elapsed();
    assert_eq!(rows, REVIEWS as i64, "exact rows");
    assert_eq!(run.pid(), pid, "the same sluice run throughout");
    run.assert_alive();
    let dead = env.count("SELECT count(*) FROM dead_letter_events").await;
    assert_eq!(dead, 0, "no dead letters");
    run.signal("TERM");
    assert_eq!(
        run.wait(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        run.tail()
    );
    println!(
        "{REVIEWS} reviews through a leader kill in {:.1} s ({:.0} reviews/s), 0 dead letters",
        took.as_secs_f64(),
        REVIEWS as f64 / took.as_secs_f64()
    );

    // (b) 20,000 outbox events, two dispatchers, the same kill.
    let outbox_topic = format!("{k3}-outbox");
    let plan = TopicSettings::default()
        .plan_for(sluice_core::PipelineKind::Reviews, 3)
        .unwrap();
    admin
        .ensure_durable_topic(&outbox_topic, &plan)
        .await
        .unwrap();
    let mut ids = BTreeSet::new();
    let mut conn = env.schema.connect().await;
    for chunk in 0..EVENTS / 1000 {
        let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
        for i in chunk * 1000..(chunk + 1) * 1000 {
            let event = NewEvent::new(
                &outbox_topic,
                "user",
                format!("k3-{i}"),
                "mailbox.command",
                json!({"n": i}),
            );
            ids.insert(enqueue(&mut tx, &event).await.unwrap());
        }
        tx.commit().await.unwrap();
    }
    assert_eq!(ids.len(), EVENTS);
    let published = format!(
        "SELECT count(*) FROM outbox_events WHERE topic = '{outbox_topic}' AND status = 'PUBLISHED'"
    );
    let dispatch = |name: &str| {
        let log = env.dir.join(format!("{name}.log"));
        let mut cmd = env.sluice(&["dispatch"]);
        cmd.envs(cluster_vars.iter().copied())
            .envs([
                ("OUTBOX_POLL_INTERVAL_MS", "100"),
                ("OUTBOX_BATCH_SIZE", "200"),
                ("OUTBOX_DISPATCHER_ID", name),
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        Running {
            child: cmd.spawn().unwrap(),
            log,
        }
    };
    let started = Instant::now();
    let mut first = dispatch("dispatch-1");
    let mut second = dispatch("dispatch-2");
    let before = env
        .wait_rows(
            &published,
            (EVENTS / 5) as i64,
            &mut first,
            Duration::from_secs(120),
        )
        .await;
    second.assert_alive();
    let node = leader(&cluster, &outbox_topic);
    let killed = NodeKilled::kill(&script, node);
    let killed_at = Instant::now();
    println!("node {node} (leader of {outbox_topic}/0) SIGKILLed at {before} published");
    let during = env
        .wait_rows(
            &published,
            (EVENTS / 2) as i64,
            &mut first,
            Duration::from_secs(120),
        )
        .await;
    tokio::time::sleep(Duration::from_secs(10).saturating_sub(killed_at.elapsed())).await;
    second.assert_alive();
    let back = killed.start();
    println!(
        "{during} published with node {node} down; back in every ISR after {:.1} s",
        back.as_secs_f64()
    );
    let done = env
        .wait_rows(
            &published,
            EVENTS as i64,
            &mut first,
            Duration::from_secs(180),
        )
        .await;
    assert_eq!(done, EVENTS as i64);
    second.assert_alive();
    let took = started.elapsed();
    for running in [&mut first, &mut second] {
        running.signal("TERM");
        assert_eq!(
            running.wait(Duration::from_secs(30)).code(),
            Some(0),
            "{}",
            running.tail()
        );
    }
    let in_kafka = event_ids(&cluster, &outbox_topic);
    let seen: BTreeSet<Uuid> = in_kafka.keys().copied().collect();
    assert_eq!(seen.len(), ids.len(), "every event id, nothing else");
    assert_eq!(seen, ids, "every event id, nothing else");
    let twice: Vec<_> = in_kafka.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        twice.is_empty(),
        "{} ids not exactly once: {twice:?}",
        twice.len()
    );
    println!(
        "{EVENTS} outbox events, two dispatchers, a leader kill: {:.1} s, each id once",
        took.as_secs_f64()
    );

    let k3_topics: Vec<String> = PIPELINES
        .iter()
        .map(|p| format!("{k3}-{p}"))
        .chain([outbox_topic.clone()])
        .collect();
    let refs: Vec<&str> = k3_topics.iter().map(String::as_str).collect();
    sluice_testkit::delete_topics(&cluster_stack, &refs).await;
    drop(conn);
    env.cleanup().await;
}
