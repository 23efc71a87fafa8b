//! sluice over the secured endpoints of the real stack: Kafka SASL_SSL (SCRAM-SHA-512, CA
//! verified) and PostgreSQL `sslmode=verify-full`, configured only by the variables of
//! `scripts/stack env --tls`.
//!
//! - 100,000 reviews ingested over TLS land exactly; `pg_stat_ssl` shows the writer's
//!   connection (`sluice-reviews`) encrypted; the rate is printed next to plaintext's.
//! - `lag`, `replay` and `dlq` work over the same endpoints.
//! - A wrong SASL password, a CA that did not sign the broker, and a database host name the
//!   certificate does not hold are refused with a clear error.
//! - A property sluice's guarantees depend on is refused with exit 2 naming it.
//! - sluice's producer and Kafka's Java producer put the same keys on the same partitions.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer};
use sluice_core::KafkaClientSettings;
use sluice_kafka::ResilientProducer;
use sluice_kafka::producer::Outgoing;
use sluice_testkit::TestSchema;
use std::collections::BTreeMap;
use std::net::ToSocketAddrs;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::*;

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} (from scripts/stack env)"))
}

/// The variables of `scripts/stack env --tls` for a schema's URL.
fn tls_vars(schema: &TestSchema) -> Vec<(String, String)> {
    let plain = &schema.url;
    let options = plain.split_once("options=").map(|(_, o)| o).unwrap();
    let url = format!("{}&options={options}", var("SLUICE_TLS_TEST_DATABASE_URL"));
    vec![
        (
            "KAFKA_BOOTSTRAP_SERVERS".into(),
            var("SLUICE_KAFKA_SASL_SSL_BOOTSTRAP"),
        ),
        ("KAFKA_SECURITY_PROTOCOL".into(), "SASL_SSL".into()),
        ("KAFKA_SASL_MECHANISM".into(), "SCRAM-SHA-512".into()),
        (
            "KAFKA_SASL_USERNAME".into(),
            var("SLUICE_KAFKA_SASL_USERNAME"),
        ),
        (
            "KAFKA_SASL_PASSWORD".into(),
            var("SLUICE_KAFKA_SASL_PASSWORD"),
        ),
        ("KAFKA_SSL_CA_LOCATION".into(), var("SLUICE_TLS_CA")),
        ("DATABASE_URL".into(), url),
    ]
}

fn pairs(vars: &[(String, String)]) -> Vec<(&str, &str)> {
    vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_ingested_over_sasl_ssl_and_verify_full_land_exactly() {
    const REVIEWS: usize = 100_000;
    let Some(env) = Env::new().await else { return };
    let apps: Vec<String> = (0..20)
        .map(|i| format!("com.{}.tls{i}", env.prefix.replace('-', "_")))
        .collect();
    env.schema.register_apps(&apps).await;
    let tls_schema = TestSchema::create(&env.stack).await;
    tls_schema.register_apps(&apps).await;
    let messages: Vec<_> = (0..REVIEWS)
        .map(|i| {
            let app = &apps[i % apps.len()];
            (app.clone(), review(i, app, "2026-11-01T10:00:00Z"))
        })
        .collect();
    env.produce_json("reviews", &messages).await;
    let count = "SELECT count(*) FROM reviews";

    // Plaintext first: the baseline rate.
    let started = Instant::now();
    let mut run = env.spawn_run("plain", &[("STORAGE_PIPELINES", "reviews")]);
    let rows = env
        .wait_rows(count, REVIEWS as i64, &mut run, Duration::from_secs(300))
        .await;
    let plain = started.elapsed();
    run.signal("TERM");
    assert_eq!(run.wait(Duration::from_secs(30)).code(), Some(0));
    assert_eq!(rows, REVIEWS as i64);

    // The same topic over SASL_SSL into another schema over verify-full, in its own group.
    let mut secure = tls_vars(&tls_schema);
    let tls_prefix = format!("{}-tls", env.prefix);
    secure.push(("STORAGE_GROUP_PREFIX".into(), tls_prefix.clone()));
    secure.push(("STORAGE_PIPELINES".into(), "reviews".into()));
    let mut conn = tls_schema.connect().await;
    let started = Instant::now();
    let mut run = env.spawn_run("tls", &pairs(&secure));
    let mut encrypted = false;
    let deadline = Instant::now() + Duration::from_secs(300);
    let rows = loop {
        run.assert_alive();
        if !encrypted {
            encrypted = sqlx::query_scalar::<_, bool>(
                "SELECT coalesce(bool_and(s.ssl), false) FROM pg_stat_activity a
                 JOIN pg_stat_ssl s USING (pid)
                 WHERE a.application_name = 'sluice-reviews' AND a.query ILIKE '%reviews%'
                   AND a.datname = current_database()",
            )
            .fetch_one(&mut conn)
            .await
            .unwrap();
        }
        let n: Option<i64> = sqlx::query_scalar(count).fetch_one(&mut conn).await.ok();
        if n == Some(REVIEWS as i64) {
            break REVIEWS as i64;
        }
        assert!(Instant::now() < deadline, "{n:?} rows\n{}", run.tail());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let secured = started.elapsed();
    assert_eq!(rows, REVIEWS as i64, "exact rows over TLS");
    assert!(
        encrypted,
        "pg_stat_ssl shows the sluice-reviews connection encrypted"
    );
    let names: Vec<(String, bool)> = sqlx::query_as(
        "SELECT a.application_name, s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
         WHERE a.application_name LIKE 'sluice-%' AND a.datname = current_database()",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    println!("sluice connections (application_name, ssl): {names:?}");

    // The operator commands over the same endpoints.
    let secure_env: Vec<(&str, &str)> = pairs(&secure);
    let lag = env.output(&["lag", "--json"], &secure_env);
    assert!(
        lag.status.success(),
        "lag over TLS: {}",
        String::from_utf8_lossy(&lag.stderr)
    );
    run.signal("TERM");
    assert_eq!(run.wait(Duration::from_secs(30)).code(), Some(0));

    // With the group empty: `replay --execute` moves the TLS group back to the start.
    let replay = env.output(
        &["replay", "reviews", "--to", "earliest", "--execute"],
        &secure_env,
    );
    assert!(
        replay.status.success(),
        "replay over TLS: {}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let committed: i64 = env
        .admin()
        .committed_offsets(&format!("{tls_prefix}.reviews"), &env.topic("reviews"))
        .unwrap()
        .iter()
        .map(|(_, o)| o.unwrap_or(0))
        .sum();
    assert_eq!(
        committed, 0,
        "the TLS group was moved to the earliest offsets"
    );

    // `dlq replay --execute` re-publishes a dead letter over SASL_SSL.
    let payload = review(REVIEWS, &apps[0], "2026-11-01T10:00:00Z").to_string();
    sqlx::query(
        "INSERT INTO dead_letter_events (topic, partition, kafka_offset, consumer_group, key,
             payload, payload_size, error_kind, reason)
         VALUES ($1, 0, 999999, $2, NULL, $3, $4, 'unknown_application', 'test dead letter')",
    )
    .bind(env.topic("reviews"))
    .bind(format!("{tls_prefix}.reviews"))
    .bind(payload.as_bytes())
    .bind(payload.len() as i32)
    .execute(&mut conn)
    .await
    .unwrap();
    let (end_before, _) = env.offsets("reviews");
    let dlq = env.output(&["dlq", "replay", "--execute"], &secure_env);
    assert!(
        dlq.status.success(),
        "dlq replay over TLS: {}\n{}",
        String::from_utf8_lossy(&dlq.stdout),
        String::from_utf8_lossy(&dlq.stderr)
    );
    let (end_after, _) = env.offsets("reviews");
    assert_eq!(
        end_after,
        end_before + 1,
        "one record re-published over SASL_SSL"
    );
    let rate = |d: Duration| REVIEWS as f64 / d.as_secs_f64();
    println!(
        "{REVIEWS} reviews: plaintext {:.0} reviews/s ({:.1} s), SASL_SSL + verify-full {:.0} \
         reviews/s ({:.1} s)",
        rate(plain),
        plain.as_secs_f64(),
        rate(secured),
        secured.as_secs_f64()
    );
    tls_schema.drop_schema().await;
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_certificates_and_host_names_are_refused() {
    let Some(env) = Env::new().await else { return };
    let secure = tls_vars(&env.schema);
    let run = |what: &str, change: &[(&str, String)]| {
        let mut cmd = env.sluice(&["run"]);
        cmd.envs(secure.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        cmd.envs(change.iter().map(|(k, v)| (*k, v.as_str())));
        let started = Instant::now();
        let out = cmd.output().unwrap();
        let took = started.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        println!("{what}: {} after {:.1} s", out.status, took.as_secs_f64());
        (out.status.code(), took, stderr)
    };

    let (code, took, stderr) = run(
        "wrong SASL password",
        &[("KAFKA_SASL_PASSWORD", "not-the-password".into())],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    assert!(
        stderr.contains("Authentication") && stderr.contains("invalid credentials"),
        "{stderr}"
    );

    // A CA that did not sign the broker's certificate (the client certificate is no CA).
    let (code, _, stderr) = run(
        "a CA that does not match",
        &[("KAFKA_SSL_CA_LOCATION", var("SLUICE_TLS_CLIENT_CERT"))],
    );
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("certificate verify failed"), "{stderr}");

    // verify-full against a name of this machine that the certificate does not hold.
    let port = var("SLUICE_PG_PORT");
    let other = ["vm", "runsc", "localhost.localdomain", "ip6-localhost"]
        .into_iter()
        .chain(
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .as_deref(),
        )
        .find(|name| {
            (*name, 1)
                .to_socket_addrs()
                .is_ok_and(|mut a| a.any(|a| a.ip().to_string() == "127.0.0.1"))
        })
        .map(|name| name.trim().to_owned())
        .expect("a name other than localhost for 127.0.0.1");
    let url = format!(
        "postgres://sluice@{other}:{port}/sluice_test?sslmode=verify-full&sslrootcert={}",
        var("SLUICE_TLS_CA")
    );
    let (code, _, stderr) = run(
        "verify-full against a name not in the certificate",
        &[("DATABASE_URL", url)],
    );
    assert_ne!(code, Some(0), "{stderr}");
    assert!(stderr.contains("not valid for name"), "{stderr}");

    // A property a guarantee depends on: exit 2 naming it, before anything connects.
    let (code, _, stderr) = run(
        "KAFKA_ENABLE_AUTO_COMMIT=true",
        &[("KAFKA_ENABLE_AUTO_COMMIT", "true".into())],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("KAFKA_ENABLE_AUTO_COMMIT"), "{stderr}");
    let (code, _, stderr) = run(
        "an unknown property",
        &[("KAFKA_NO_SUCH_THING", "1".into())],
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("KAFKA_NO_SUCH_THING"), "{stderr}");
    env.cleanup().await;
}

/// key → partition of every record of `topic`.
fn partitions_of(bootstrap: &str, topic: &str, expected: usize) -> BTreeMap<String, i32> {
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", sluice_testkit::unique("partitioner"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut found = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while found.len() < expected {
        assert!(Instant::now() < deadline, "{} of {expected}", found.len());
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            let message = message.unwrap();
            let key = String::from_utf8_lossy(message.key().unwrap()).into_owned();
            found.insert(key, message.partition());
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_and_the_java_producer_put_a_key_on_the_same_partition() {
    const KEYS: usize = 1_000;
    let Some(env) = Env::new().await else { return };
    let java_topic = format!("{}-java", env.prefix);
    let sluice_topic = format!("{}-sluice", env.prefix);
    sluice_testkit::create_topic(&env.stack, &java_topic, 6).await;
    sluice_testkit::create_topic(&env.stack, &sluice_topic, 6).await;
    let keys: Vec<String> = (0..KEYS).map(|i| format!("user-{i}")).collect();

    let lines: Vec<String> = keys.iter().map(|key| format!("{key}\tv")).collect();
    java_produce(&env, &java_topic, "none", &lines);

    let producer = ResilientProducer::new(
        &KafkaClientSettings::new(&env.stack.bootstrap),
        "partitioner",
    )
    .unwrap();
    let mut deliveries = Vec::new();
    for key in &keys {
        deliveries.push(
            producer
                .enqueue(Outgoing {
                    topic: &sluice_topic,
                    key: Some(key.as_bytes()),
                    payload: b"v",
                    partition: None,
                    headers: &[],
                })
                .unwrap(),
        );
    }
    for delivery in deliveries {
        delivery.await.unwrap();
    }

    let java = partitions_of(&env.stack.bootstrap, &java_topic, KEYS);
    let ours = partitions_of(&env.stack.bootstrap, &sluice_topic, KEYS);
    let used: std::collections::BTreeSet<i32> = ours.values().copied().collect();
    let differ: Vec<_> = keys
        .iter()
        .filter(|k| java.get(*k) != ours.get(*k))
        .collect();
    println!(
        "{KEYS} keys over 6 partitions: {} on a different partition, partitions used {used:?}",
        differ.len()
    );
    assert!(differ.is_empty(), "keys on other partitions: {differ:?}");
    assert_eq!(used.len(), 6);
    sluice_testkit::delete_topics(&env.stack, &[&java_topic, &sluice_topic]).await;
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispatch_publishes_outbox_events_over_sasl_ssl_and_verify_full() {
    use rdkafka::message::Headers;
    const EVENTS: usize = 1_000;
    let Some(env) = Env::new().await else { return };
    let topic = format!("{}-outbox-tls", env.prefix);
    sluice_testkit::create_topic(&env.stack, &topic, 3).await;
    let migrated = env.output(&["migrate"], &[]);
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let mut conn = env.schema.connect().await;
    let mut tx = sqlx::Connection::begin(&mut conn).await.unwrap();
    let mut ids = std::collections::BTreeSet::new();
    for i in 0..EVENTS {
        let event = sluice_outbox::NewEvent::new(
            &topic,
            "user",
            format!("tls-{i}"),
            "mailbox.command",
            serde_json::json!({"n": i}),
        );
        ids.insert(sluice_outbox::enqueue(&mut tx, &event).await.unwrap());
    }
    tx.commit().await.unwrap();

    // Only the secured endpoints: SASL_SSL to Kafka, verify-full to PostgreSQL.
    let mut secure = tls_vars(&env.schema);
    secure.push(("OUTBOX_POLL_INTERVAL_MS".into(), "100".into()));
    let log = env.dir.join("dispatch-tls.log");
    let mut cmd = env.sluice(&["dispatch"]);
    cmd.envs(secure.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut dispatch = Running {
        child: cmd.spawn().unwrap(),
        log,
    };
    let started = Instant::now();
    let published = format!(
        "SELECT count(*) FROM outbox_events WHERE topic = '{topic}' AND status = 'PUBLISHED'"
    );
    env.wait_rows(
        &published,
        EVENTS as i64,
        &mut dispatch,
        Duration::from_secs(120),
    )
    .await;
    let took = started.elapsed();
    let encrypted: bool = sqlx::query_scalar(
        "SELECT coalesce(bool_and(s.ssl), false) AND count(*) > 0 FROM pg_stat_activity a
         JOIN pg_stat_ssl s USING (pid)
         WHERE a.application_name = 'sluice-dispatch' AND a.datname = current_database()",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    dispatch.signal("TERM");
    assert_eq!(
        dispatch.wait(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        dispatch.tail()
    );
    assert!(encrypted, "pg_stat_ssl shows sluice-dispatch encrypted");

    // Read back over plaintext: every event id once.
    let reader: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &env.stack.bootstrap)
        .set("group.id", sluice_testkit::unique("outbox-tls"))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let end: i64 = (0..3)
        .map(|p| {
            reader
                .fetch_watermarks(&topic, p, Duration::from_secs(10))
                .unwrap()
                .1
        })
        .sum();
    assert_eq!(end, EVENTS as i64, "records in {topic}");
    reader.subscribe(&[&topic]).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < EVENTS {
        assert!(Instant::now() < deadline, "{} of {EVENTS} read", seen.len());
        if let Some(message) = reader.poll(Duration::from_millis(200)) {
            let message = message.unwrap();
            let id = message
                .headers()
                .and_then(|h| h.iter().find(|h| h.key == sluice_outbox::EVENT_ID_HEADER))
                .and_then(|h| h.value)
                .map(|v| uuid::Uuid::parse_str(std::str::from_utf8(v).unwrap()).unwrap())
                .expect("event id header");
            assert!(seen.insert(id), "event {id} twice");
        }
    }
    assert_eq!(seen, ids);
    println!(
        "{EVENTS} outbox events dispatched over SASL_SSL + verify-full in {:.1} s, each id once",
        took.as_secs_f64()
    );
    drop(conn);
    sluice_testkit::delete_topics(&env.stack, &[&topic]).await;
    env.cleanup().await;
}
