//! The mailbox example end to end with real `kill -9`s (issue 7, acceptance 4): 50 users ×
//! 20 commands (every 10th rejected) sent in four waves through the outbox, `sluice
//! dispatch` and `sluice-mailbox consume` as child processes; the consumer is SIGKILLed
//! three times (each after some progress) and the dispatcher once, each restarted → every
//! user's projection holds its applied commands exactly once, in send order; the running
//! state matches; one processed row per event; no FAILURE row.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

#[path = "../../../crates/sluice-cli/tests/support/mod.rs"]
mod support;

use serde_json::{Value, json};
use sluice_mailbox as mailbox;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::*;

const USERS: usize = 50;
const COMMANDS: i64 = 20;
const CAP: i32 = 10;
const WAVES: i64 = 4;

/// The dispatcher's settings: short polls, a 3 s stale timeout (the smallest the settings
/// accept with a 1 s delivery timeout).
const DISPATCH_VARS: [(&str, &str); 5] = [
    ("OUTBOX_POLL_INTERVAL_MS", "50"),
    ("OUTBOX_BATCH_SIZE", "100"),
    ("OUTBOX_BACKOFF_BASE_MS", "100"),
    ("OUTBOX_STALE_DISPATCH_SECONDS", "3"),
    ("OUTBOX_DELIVERY_TIMEOUT_MS", "1000"),
];

fn user_id(i: usize) -> String {
    format!("mbx-kill-{i:03}")
}

fn command(seq: i64) -> Value {
    if seq % 10 == 0 {
        json!({"op": "reject"})
    } else {
        json!({"op": "send", "text": format!("message {seq} ✓")})
    }
}

/// Starts `sluice <args>` (`sluice-mailbox <args>` for `["mailbox", …]`) with extra variables and its JSON log in `<dir>/<name>.log`.
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

/// SIGKILLs a child and checks it died of it.
fn sigkill(running: &mut Running, what: &str) {
    running.assert_alive();
    running.signal("KILL");
    let status = running.wait(Duration::from_secs(10));
    assert_eq!(status.signal(), Some(9), "{what}: {status}");
}

/// Sends commands `seqs` of every user, one transaction per user, in seq order.
async fn send_wave(env: &Env, topic: &str, seqs: std::ops::RangeInclusive<i64>) {
    let mut conn = env.schema.connect().await;
    for i in 0..USERS {
        let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
        for seq in seqs.clone() {
            mailbox::send_command(&mut tx, topic, &user_id(i), seq, command(seq))
                .await
                .expect("send command");
        }
        tx.commit().await.unwrap();
    }
}

/// Waits until `mailbox_projection` has more than `than` rows (both children alive).
async fn wait_progress(
    env: &Env,
    than: i64,
    consumer: &mut Running,
    dispatcher: &mut Running,
) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        consumer.assert_alive();
        dispatcher.assert_alive();
        let n = env.count("SELECT count(*) FROM mailbox_projection").await;
        if n > than {
            return n;
        }
        assert!(
            Instant::now() < deadline,
            "no projection progress past {than} rows:\n{}",
            consumer.tail()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_killed_three_times_dispatcher_once_each_command_applied_once_in_order() {
    let Some(env) = Env::new().await else {
        return;
    };
    let started = Instant::now();
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
    for i in 0..USERS {
        mailbox::create_user(&mut conn, &admin, &topic, &user_id(i), CAP)
            .await
            .expect("create user");
    }

    let consumer_vars = [("MAILBOX_TOPIC", topic.as_str()), ("MAILBOX_GROUP", &group)];
    let consume = |n: usize| {
        spawn(
            &env,
            &["mailbox", "consume"],
            &format!("consumer-{n}"),
            &consumer_vars,
        )
    };
    let dispatch = |n: usize| {
        spawn(
            &env,
            &["dispatch"],
            &format!("dispatcher-{n}"),
            &DISPATCH_VARS,
        )
    };
    let mut consumer = consume(0);
    let mut dispatcher = dispatch(0);
    let (mut consumers, mut dispatchers) = (1, 1);

    // Four waves of five commands per user; after each of the first three, the consumer is
    // killed once it has made progress; during the last, the dispatcher is killed.
    let per_wave = COMMANDS / WAVES;
    let mut seen = 0;
    for wave in 0..WAVES {
        let first = wave * per_wave + 1;
        send_wave(&env, &topic, first..=first + per_wave - 1).await;
        if wave < 3 {
            seen = wait_progress(&env, seen, &mut consumer, &mut dispatcher).await;
            sigkill(&mut consumer, "consumer");
            consumer = consume(consumers);
            consumers += 1;
        } else {
            // Kill the dispatcher with part of the wave still unpublished.
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                dispatcher.assert_alive();
                let dispatched = env
                    .count("SELECT count(*) FROM outbox_events WHERE status <> 'PENDING'")
                    .await;
                if dispatched > (wave * per_wave) * USERS as i64 {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "the last wave was not dispatched"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            sigkill(&mut dispatcher, "dispatcher");
            dispatcher = dispatch(dispatchers);
            dispatchers += 1;
        }
    }
    assert_eq!((consumers, dispatchers), (4, 2));

    // Run until every row is final.
    let total = USERS as i64 * COMMANDS;
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        consumer.assert_alive();
        dispatcher.assert_alive();
        let (left, failed): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE status NOT IN ('SUCCESS', 'PUSHED_FAILURE')),
                    count(*) FILTER (WHERE status = 'FAILURE')
             FROM outbox_events",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!(failed, 0, "outbox rows ended FAILURE");
        if left == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{left} rows not final after 90 s:\n{}",
            consumer.tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = started.elapsed();
    for (running, what) in [(&mut consumer, "consumer"), (&mut dispatcher, "dispatcher")] {
        running.signal("TERM");
        let status = running.wait(Duration::from_secs(30));
        assert_eq!(
            status.code(),
            Some(0),
            "{what} SIGTERM exit:\n{}",
            running.tail()
        );
    }
    println!("mailbox kill: {USERS} users x {COMMANDS} commands final after {elapsed:?}");

    // Every outbox row ended as its command deserved.
    let statuses: BTreeMap<String, i64> =
        sqlx::query_as("SELECT status, count(*) FROM outbox_events GROUP BY status")
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .into_iter()
            .collect();
    let rejected = USERS as i64 * (COMMANDS / 10);
    assert_eq!(
        statuses,
        BTreeMap::from([
            ("PUSHED_FAILURE".to_owned(), rejected),
            ("SUCCESS".to_owned(), total - rejected),
        ])
    );
    let bad: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM outbox_events
         WHERE (status = 'PUSHED_FAILURE') <> ((payload->>'seq')::bigint % 10 = 0)",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(bad, 0, "rows whose final status does not fit their command");
    let processed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM processed_outbox_events WHERE consumer_group = $1",
    )
    .bind(&group)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(processed, total, "one processed row per event");

    // Each user's projection: its applied commands, in send order, once each.
    let applied_seqs: Vec<i64> = (1..=COMMANDS).filter(|s| s % 10 != 0).collect();
    let projection: Vec<(String, i64, String, i64)> = sqlx::query_as(
        "SELECT user_id, seq, command, position FROM mailbox_projection ORDER BY user_id, position",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let mut per_user: BTreeMap<String, Vec<(i64, String, i64)>> = BTreeMap::new();
    for (user, seq, text, position) in projection {
        per_user
            .entry(user)
            .or_default()
            .push((seq, text, position));
    }
    assert_eq!(per_user.len(), USERS);
    let positions: Vec<i64> = (1..=applied_seqs.len() as i64).collect();
    for (user, log) in &per_user {
        let seqs: Vec<i64> = log.iter().map(|e| e.0).collect();
        assert_eq!(
            seqs, applied_seqs,
            "{user}: applied out of order or not once"
        );
        let got: Vec<i64> = log.iter().map(|e| e.2).collect();
        assert_eq!(got, positions, "{user}");
        for (seq, text, _) in log {
            let stored: Value = serde_json::from_str(text).unwrap();
            assert_eq!(stored, command(*seq), "{user} seq {seq}");
        }
    }
    let states: Vec<(String, i64, i64, Option<i64>)> =
        sqlx::query_as("SELECT user_id, applied, rejected, last_seq FROM mailbox_state")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(states.len(), USERS);
    let expected = (applied_seqs.len() as i64, COMMANDS / 10, Some(COMMANDS));
    for (user, applied, rejected, last_seq) in states {
        assert_eq!((applied, rejected, last_seq), expected, "{user}");
    }
    println!("mailbox kill: checked after {:?}", started.elapsed());

    drop(conn);
    drop((consumer, dispatcher));
    sluice_testkit::delete_topics(&env.stack, &[topic.as_str()]).await;
    env.cleanup().await;
}
