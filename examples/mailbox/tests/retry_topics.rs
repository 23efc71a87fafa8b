//! Retry topics end to end (issue 16, part 1) with `sluice dispatch` and `sluice-mailbox
//! consume` as child processes, tiers shortened to 1 s / 2 s / 3 s:
//! - a command that fails twice then succeeds is applied once, in the second tier, while
//!   the commands of another partition (and the user's later command) are applied meanwhile;
//! - a command that always fails ends in `<topic>.dlt` with every retry header after the
//!   last tier; `sluice dlt list/show` show it and `dlt replay --execute` re-publishes it
//!   once; `sluice retry status` agrees;
//! - the process SIGKILLed by the failpoint between a tier's forward and its commit: after
//!   the restart the command is applied once, and the duplicate forward is in the topic.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

#[path = "../../../crates/sluice-cli/tests/support/mod.rs"]
mod support;

use serde_json::{Value, json};
use sluice_core::KafkaClientSettings;
use sluice_mailbox as mailbox;
use sluice_retry::headers::{self, RetryHeaders};
use sluice_retry::read::{Range, read_ranges};
use sluice_retry::{OwnedRecord, Tiers, dlt_topic, retry_topic};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::*;

const TIERS: &str = "1s,2s,3s";

const DISPATCH_VARS: [(&str, &str); 5] = [
    ("OUTBOX_POLL_INTERVAL_MS", "50"),
    ("OUTBOX_BATCH_SIZE", "100"),
    ("OUTBOX_BACKOFF_BASE_MS", "100"),
    ("OUTBOX_STALE_DISPATCH_SECONDS", "3"),
    ("OUTBOX_DELIVERY_TIMEOUT_MS", "1000"),
];

fn spawn(env: &Env, args: &[&str], name: &str, extra: &[(&str, &str)]) -> Running {
    let log = env.dir.join(format!("{name}.log"));
    let mut cmd = match args {
        ["mailbox", rest @ ..] => env.command(
            std::path::Path::new(env!("CARGO_BIN_EXE_sluice-mailbox")),
            rest,
        ),
        _ => env.sluice(args),
    };
    cmd.envs(extra.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    Running {
        child: cmd.spawn().unwrap(),
        log,
    }
}

/// The mailbox topic with `users` users pinned one per partition; migrated, tables set up.
struct Mailbox {
    topic: String,
    group: String,
}

impl Mailbox {
    async fn new(env: &Env, users: &[&str]) -> Mailbox {
        let topic = format!("{}-mailbox", env.prefix);
        let group = format!("{}.mailbox", env.prefix);
        sluice_testkit::create_topic(&env.stack, &topic, 1).await;
        let migrated = env.output(&["migrate"], &[]);
        assert!(
            migrated.status.success(),
            "sluice migrate: {}",
            String::from_utf8_lossy(&migrated.stderr)
        );
        let mut conn = env.schema.connect().await;
        mailbox::setup(&mut conn).await.expect("mailbox setup");
        let admin = env.admin();
        for (i, user) in users.iter().enumerate() {
            let partition = mailbox::create_user(&mut conn, &admin, &topic, user, 1)
                .await
                .expect("create user");
            assert_eq!(partition, i as i32, "{user}");
        }
        Mailbox { topic, group }
    }

    fn vars(&self) -> Vec<(&str, &str)> {
        vec![
            ("MAILBOX_TOPIC", self.topic.as_str()),
            ("MAILBOX_GROUP", self.group.as_str()),
            ("MAILBOX_RETRY_TIERS", TIERS),
            ("RUST_LOG", "info,sluice_retry=debug"),
        ]
    }

    fn tier_topic(&self, index: usize) -> String {
        retry_topic(&self.topic, &Tiers::parse(TIERS).unwrap().as_slice()[index])
    }

    fn topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = (0..3).map(|i| self.tier_topic(i)).collect();
        topics.push(dlt_topic(&self.topic));
        topics.push(self.topic.clone());
        topics
    }
}

/// Enqueues one command; returns its event id.
async fn send(env: &Env, topic: &str, user: &str, seq: i64, command: Value) -> uuid::Uuid {
    let mut conn = env.schema.connect().await;
    let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
    let id = mailbox::send_command(&mut tx, topic, user, seq, command)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    id
}

/// Every record of `topic`, with headers.
fn records(env: &Env, topic: &str) -> Vec<OwnedRecord> {
    let ranges: Vec<Range> = env
        .admin()
        .watermarks(topic)
        .unwrap()
        .iter()
        .map(|m| Range {
            partition: m.partition,
            from: m.low,
            to: m.high,
        })
        .collect();
    read_ranges(
        &KafkaClientSettings::new(&env.stack.bootstrap),
        topic,
        &ranges,
        10_000,
        Duration::from_secs(30),
    )
    .unwrap()
}

fn end_offsets(env: &Env, topic: &str) -> i64 {
    env.admin()
        .watermarks(topic)
        .unwrap()
        .iter()
        .map(|m| m.high)
        .sum()
}

async fn wait_until(
    what: &str,
    timeout: Duration,
    running: &mut Running,
    mut done: impl AsyncFnMut() -> bool,
) {
    let deadline = Instant::now() + timeout;
    loop {
        if done().await {
            return;
        }
        running.assert_alive();
        assert!(
            Instant::now() < deadline,
            "{what} not within {timeout:?}:\n{}",
            running.tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `sluice retry status --json`.
fn status(env: &Env, mailbox: &Mailbox) -> Value {
    let out = env.output(&["retry", "status", "--json"], &mailbox.vars());
    assert!(
        out.status.success(),
        "retry status: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn waiting(status: &Value) -> Vec<i64> {
    status["tiers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["waiting"].as_i64().unwrap())
        .collect()
}

fn event_id(record: &OwnedRecord) -> Option<&str> {
    record.header_str(sluice_outbox::EVENT_ID_HEADER)
}

fn stdout(out: &std::process::Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flaky_applied_once_in_the_second_tier_and_failing_ends_in_the_dlt_and_replays_once() {
    let Some(env) = Env::new().await else {
        return;
    };
    let mailbox = Mailbox::new(&env, &["flaky-user", "steady-user", "doomed-user"]).await;
    let mut dispatcher = spawn(&env, &["dispatch"], "dispatcher", &DISPATCH_VARS);
    let mut consumer = spawn(&env, &["mailbox", "consume"], "consumer", &mailbox.vars());
    let mut conn = env.schema.connect().await;

    let t0: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let flaky = send(
        &env,
        &mailbox.topic,
        "flaky-user",
        1,
        json!({"op": "flaky", "fail_times": 2}),
    )
    .await;
    send(
        &env,
        &mailbox.topic,
        "flaky-user",
        2,
        json!({"op": "send", "text": "after"}),
    )
    .await;
    for seq in 1..=5 {
        send(
            &env,
            &mailbox.topic,
            "steady-user",
            seq,
            json!({"op": "send", "n": seq}),
        )
        .await;
    }
    let doomed = send(
        &env,
        &mailbox.topic,
        "doomed-user",
        1,
        json!({"op": "fail"}),
    )
    .await;

    // (a) Applied once, after the second tier.
    let schema = env.schema.clone();
    wait_until(
        "the flaky command applied",
        Duration::from_secs(60),
        &mut consumer,
        async || {
            let mut c = schema.connect().await;
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM mailbox_projection WHERE user_id = 'flaky-user' AND seq = 1",
            )
            .fetch_one(&mut c)
            .await
            .unwrap()
                == 1
        },
    )
    .await;
    let applied: Vec<(String, i64, f64)> = sqlx::query_as(
        "SELECT user_id, seq, extract(epoch FROM applied_at - $1)::float8
         FROM mailbox_projection ORDER BY applied_at",
    )
    .bind(t0)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    for (user, seq, at) in &applied {
        println!("applied {user} #{seq} at +{at:.3} s");
    }
    let at = |user: &str, seq: i64| {
        applied
            .iter()
            .find(|a| a.0 == user && a.1 == seq)
            .unwrap_or_else(|| panic!("{user} #{seq} not applied: {applied:?}"))
            .2
    };
    let flaky_at = at("flaky-user", 1);
    assert!(
        flaky_at >= 3.0,
        "applied {flaky_at} s after sending: before 1 s + 2 s of tiers"
    );
    for seq in 1..=5 {
        assert!(
            at("steady-user", seq) < flaky_at - 1.0,
            "the other partition waited for the retried record: {applied:?}"
        );
    }
    // A retried record leaves its key's order: the user's next command went first.
    assert!(at("flaky-user", 2) < flaky_at);
    let once: (i64, i64, String) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM mailbox_projection WHERE user_id = 'flaky-user' AND seq = 1),
                (SELECT count(*) FROM processed_outbox_events WHERE event_id = $1),
                (SELECT status FROM outbox_events WHERE id = $1)",
    )
    .bind(flaky)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(once, (1, 1, "SUCCESS".to_owned()));
    let in_tier = |i: usize| {
        records(&env, &mailbox.tier_topic(i))
            .into_iter()
            .filter(|r| event_id(r) == Some(&flaky.to_string()))
            .map(|r| headers::attempt_of(&r))
            .collect::<Vec<u32>>()
    };
    assert_eq!(
        (in_tier(0), in_tier(1), in_tier(2)),
        (vec![1], vec![2], vec![])
    );

    // (b) Always fails: in the dead-letter topic after the last tier, with every header.
    let dlt = dlt_topic(&mailbox.topic);
    wait_until(
        "the failing command dead-lettered",
        Duration::from_secs(60),
        &mut consumer,
        async || end_offsets(&env, &dlt) >= 1,
    )
    .await;
    let dead = records(&env, &dlt);
    assert_eq!(dead.len(), 1, "{dead:?}");
    let dead = &dead[0];
    assert_eq!(event_id(dead), Some(doomed.to_string().as_str()));
    let retry = RetryHeaders::decode(dead).expect("every retry header");
    println!("dead letter: {retry:?}");
    let original = records(&env, &mailbox.topic)
        .into_iter()
        .find(|r| event_id(r) == Some(&doomed.to_string()))
        .unwrap();
    assert_eq!(retry.original_topic, mailbox.topic);
    assert_eq!(
        (
            retry.original_partition,
            retry.original_offset,
            retry.original_timestamp_ms
        ),
        (original.partition, original.offset, original.timestamp_ms)
    );
    assert_eq!(
        (retry.error_class.as_str(), retry.attempt),
        ("retryable", 4)
    );
    assert!(
        retry.error_message.contains("demo op fail"),
        "{}",
        retry.error_message
    );
    assert!(
        retry.due_ms - retry.first_failure_ms >= 6_000,
        "1 s + 2 s + 3 s of tiers"
    );
    assert_eq!(
        (&dead.key, &dead.payload),
        (&original.key, &original.payload)
    );
    for name in [
        headers::ORIGINAL_TOPIC,
        headers::ORIGINAL_PARTITION,
        headers::ORIGINAL_OFFSET,
        headers::ORIGINAL_TIMESTAMP,
        headers::ERROR_CLASS,
        headers::ERROR_MESSAGE,
        headers::ATTEMPT,
        headers::FIRST_FAILURE,
        headers::DUE,
    ] {
        assert!(dead.header(name).is_some(), "{name} missing");
    }
    let (doomed_status, doomed_error): (String, Option<String>) =
        sqlx::query_as("SELECT status, last_error FROM outbox_events WHERE id = $1")
            .bind(doomed)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    // Not final, and not PUBLISHED either (retention purges those): in the consumer's hands.
    assert_eq!(
        doomed_status, "UNDER_PROCESSING",
        "a dead-lettered command's row is not final"
    );
    assert!(doomed_error.is_some_and(|e| !e.is_empty()));

    // Every tier drained (its group committed everything).
    wait_until(
        "every tier committed",
        Duration::from_secs(20),
        &mut consumer,
        async || waiting(&status(&env, &mailbox)) == vec![0, 0, 0],
    )
    .await;
    let now = status(&env, &mailbox);
    assert_eq!(now["dlt_records"], 1, "{now}");

    // Stop the consumer, then the operator's view and the replay.
    consumer.signal("TERM");
    let exit = consumer.wait(Duration::from_secs(30));
    assert_eq!(
        exit.code(),
        Some(0),
        "consumer SIGTERM exit:\n{}",
        consumer.tail()
    );
    let vars = mailbox.vars();
    let list = stdout(&env.output(&["dlt", "list"], &vars), "dlt list");
    println!("{list}");
    let original_coords = format!(
        "{}[{}]@{}",
        mailbox.topic, original.partition, original.offset
    );
    assert!(
        list.contains(&original_coords) && list.contains("retryable"),
        "{list}"
    );
    assert!(list.contains("1 record(s)"), "{list}");
    let (p, o) = (dead.partition.to_string(), dead.offset.to_string());
    let show = stdout(
        &env.output(&["dlt", "show", "--partition", &p, "--offset", &o], &vars),
        "dlt show",
    );
    println!("{show}");
    for name in [
        headers::ATTEMPT,
        headers::DUE,
        headers::FIRST_FAILURE,
        sluice_outbox::EVENT_ID_HEADER,
    ] {
        assert!(show.contains(name), "{name} not shown:\n{show}");
    }
    let dry = stdout(&env.output(&["dlt", "replay"], &vars), "dlt replay");
    assert!(
        dry.contains("would re-publish") && dry.contains("dry run"),
        "{dry}"
    );
    let before = end_offsets(&env, &mailbox.topic);
    let executed = stdout(
        &env.output(&["dlt", "replay", "--execute"], &vars),
        "dlt replay --execute",
    );
    println!("{executed}");
    assert!(executed.contains("re-published to"), "{executed}");
    let again = stdout(
        &env.output(&["dlt", "replay", "--execute"], &vars),
        "dlt replay again",
    );
    assert!(again.contains("nothing to replay"), "{again}");
    assert_eq!(
        end_offsets(&env, &mailbox.topic),
        before + 1,
        "re-published exactly once"
    );
    let copies: Vec<OwnedRecord> = records(&env, &mailbox.topic)
        .into_iter()
        .filter(|r| event_id(r) == Some(&doomed.to_string()))
        .collect();
    assert_eq!(copies.len(), 2);
    assert_eq!(
        copies[1].header_str(sluice_kafka::REPLAY_COUNT_HEADER),
        Some("1")
    );
    assert!(
        copies[1].header(headers::ATTEMPT).is_none(),
        "replayed as a first delivery"
    );
    assert_eq!(copies[1].payload, original.payload);

    dispatcher.signal("TERM");
    dispatcher.wait(Duration::from_secs(30));
    drop(conn);
    let topics = mailbox.topics();
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    sluice_testkit::delete_topics(&env.stack, &refs).await;
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_between_a_tier_forward_and_its_commit_the_command_is_applied_once() {
    let Some(env) = Env::new().await else {
        return;
    };
    let mailbox = Mailbox::new(&env, &["killed-user"]).await;
    let mut dispatcher = spawn(&env, &["dispatch"], "dispatcher", &DISPATCH_VARS);
    let mut failing_vars = mailbox.vars();
    failing_vars.push(("SLUICE_FAILPOINT", "retry-after-forward"));
    let mut killed = spawn(
        &env,
        &["mailbox", "consume"],
        "consumer-killed",
        &failing_vars,
    );
    let id = send(
        &env,
        &mailbox.topic,
        "killed-user",
        1,
        json!({"op": "flaky", "fail_times": 2}),
    )
    .await;

    // Main fails it -> tier 1 s fails it -> forwarded to tier 2 s -> SIGKILL before the commit.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status_code = loop {
        if let Some(status) = killed.child.try_wait().unwrap() {
            break status;
        }
        dispatcher.assert_alive();
        assert!(
            Instant::now() < deadline,
            "the failpoint never fired:\n{}",
            killed.tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        status_code.signal(),
        Some(9),
        "{status_code}:\n{}",
        killed.tail()
    );
    let before = status(&env, &mailbox);
    println!("after the kill: {before}");
    assert_eq!(
        waiting(&before)[..2],
        [1, 1],
        "tier 1 s uncommitted, tier 2 s holds the forward"
    );
    assert!(before["tiers"][1]["oldest_due"].is_string(), "{before}");
    assert_eq!(records(&env, &mailbox.tier_topic(1)).len(), 1);

    let mut consumer = spawn(
        &env,
        &["mailbox", "consume"],
        "consumer-restarted",
        &mailbox.vars(),
    );
    wait_until(
        "the command applied and every tier drained",
        Duration::from_secs(90),
        &mut consumer,
        async || {
            waiting(&status(&env, &mailbox)) == vec![0, 0, 0]
                && env
                    .count("SELECT count(*) FROM mailbox_projection WHERE user_id = 'killed-user'")
                    .await
                    == 1
        },
    )
    .await;
    // Tier 2 s holds the forward made before the kill, and a second copy when the restarted
    // tier 1 s reached its redelivered record before tier 2 s applied the first copy; when
    // tier 2 s was first, the redelivered record is already processed and is committed
    // without a forward. Either way: attempt 2 only, at most one duplicate, applied once.
    let copies: Vec<u32> = records(&env, &mailbox.tier_topic(1))
        .iter()
        .filter(|r| event_id(r) == Some(&id.to_string()))
        .map(headers::attempt_of)
        .collect();
    println!("copies in tier 2 s after the restart: {copies:?}");
    assert!(
        copies == vec![2] || copies == vec![2, 2],
        "the forward before the kill, at most one duplicate: {copies:?}"
    );
    let once: (i64, i64, String) = {
        let mut conn = env.schema.connect().await;
        sqlx::query_as(
            "SELECT (SELECT count(*) FROM mailbox_projection WHERE user_id = 'killed-user'),
                    (SELECT count(*) FROM processed_outbox_events WHERE event_id = $1),
                    (SELECT status FROM outbox_events WHERE id = $1)",
        )
        .bind(id)
        .fetch_one(&mut conn)
        .await
        .unwrap()
    };
    assert_eq!(once, (1, 1, "SUCCESS".to_owned()), "applied once");
    let applied: i64 = env
        .count("SELECT applied FROM mailbox_state WHERE user_id = 'killed-user'")
        .await;
    assert_eq!(applied, 1);
    assert_eq!(end_offsets(&env, &dlt_topic(&mailbox.topic)), 0);

    consumer.signal("TERM");
    assert_eq!(
        consumer.wait(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        consumer.tail()
    );
    dispatcher.signal("TERM");
    dispatcher.wait(Duration::from_secs(30));
    let topics = mailbox.topics();
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    sluice_testkit::delete_topics(&env.stack, &refs).await;
    env.cleanup().await;
}
