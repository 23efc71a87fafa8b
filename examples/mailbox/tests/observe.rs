//! The HTTP endpoint of `sluice-mailbox consume` on the real stack: 5,000 outbox events
//! (none of them a mailbox command) published by `sluice dispatch`; the consumer, with
//! `SLUICE_HTTP_ADDR` set, is live, ready once it holds partitions, counts every record as
//! rejected, and exits 0 on SIGTERM.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

#[path = "../../../crates/sluice-cli/tests/support/mod.rs"]
mod support;

use serde_json::json;
use sluice_outbox::{NewEvent, enqueue};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use support::http::*;
use support::*;

const EVENTS: usize = 5_000;
const KEYS: usize = 50;

fn spawn(env: &Env, program: &Path, args: &[&str], name: &str, vars: &[(&str, &str)]) -> Running {
    let log = env.dir.join(format!("{name}.log"));
    let mut cmd = env.command(program, args);
    cmd.envs(vars.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    Running {
        child: cmd.spawn().unwrap(),
        log,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mailbox_endpoint_counts_every_record() {
    let Some(env) = Env::new().await else { return };
    let migrated = env.output(&["migrate"], &[]);
    assert!(
        migrated.status.success(),
        "sluice migrate: {}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let topic = format!("{}-observe-mailbox", env.prefix);
    sluice_testkit::create_topic(&env.stack, &topic, 3).await;
    let mut conn = env.schema.connect().await;
    for chunk in (0..EVENTS).collect::<Vec<_>>().chunks(500) {
        let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
        for &i in chunk {
            let event = NewEvent::new(
                topic.as_str(),
                "user",
                format!("key-{}", i % KEYS),
                "observe.test",
                json!({"i": i}),
            );
            enqueue(&mut tx, &event).await.unwrap();
        }
        tx.commit().await.unwrap();
    }
    let mut dispatch = spawn(
        &env,
        &sluice_binary(),
        &["dispatch"],
        "dispatch",
        &[
            ("OUTBOX_POLL_INTERVAL_MS", "100"),
            ("OUTBOX_BATCH_SIZE", "500"),
        ],
    );

    // The mailbox consumer's endpoint over the topic: ready once it holds partitions, and
    // it counts every record (these events are not mailbox commands: rejected).
    let mailbox_port = free_port();
    let addr = format!("127.0.0.1:{mailbox_port}");
    let group = format!("{}-mailbox", env.prefix);
    let mut mailbox = spawn(
        &env,
        Path::new(env!("CARGO_BIN_EXE_sluice-mailbox")),
        &["consume"],
        "mailbox",
        &[
            ("SLUICE_HTTP_ADDR", addr.as_str()),
            ("MAILBOX_TOPIC", topic.as_str()),
            ("MAILBOX_GROUP", group.as_str()),
        ],
    );
    let counted = wait_for(
        "the mailbox consumer counting every record",
        Duration::from_secs(120),
        &mut mailbox,
        || {
            status_of(mailbox_port, "/health/live")?;
            let samples = scrape(mailbox_port);
            let all = sum(&samples, "sluice_mailbox_records_total", &[]);
            (all >= EVENTS as f64).then_some(samples)
        },
    );
    assert_eq!(
        sum(&counted, "sluice_mailbox_records_total", &[]),
        EVENTS as f64
    );
    assert_eq!(
        sum(
            &counted,
            "sluice_mailbox_records_total",
            &[("outcome", "rejected")]
        ),
        EVENTS as f64
    );
    assert_eq!(sum(&counted, "sluice_mailbox_up", &[]), 1.0);
    let (ready, body) = get(mailbox_port, "/health/ready", "text/plain");
    assert_eq!(ready, 200, "mailbox ready: {body}");
    assert_eq!(get(mailbox_port, "/health/live", "text/plain").0, 200);
    mailbox.signal("TERM");
    let status = mailbox.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "mailbox clean stop: {status}");

    dispatch.signal("TERM");
    let status = dispatch.wait(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "dispatch clean stop: {status}");
    env.cleanup().await;
}
