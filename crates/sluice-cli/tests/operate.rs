//! Operating the binary on the real stack (issue 4): graceful SIGTERM, fatal errors,
//! invalid settings, heartbeat health, lag, replay, dead-letter replay, verify.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::*;

fn apps(env: &Env, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("com.{}.app{i}", env.prefix.replace('-', "_")))
        .collect()
}

fn reviews(apps: &[String], range: std::ops::Range<usize>) -> Vec<(String, Value)> {
    range
        .map(|i| {
            let app = &apps[i % apps.len()];
            (app.clone(), review(i, app, "2026-11-03T08:00:00Z"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_ingest_commits_what_it_wrote_and_a_restart_processes_nothing_twice() {
    let Some(env) = Env::new().await else { return };
    let apps = apps(&env, 20);
    env.schema.register_apps(&apps).await;
    let n = 100_000;
    env.produce_json("reviews", &reviews(&apps, 0..n)).await;

    let only_reviews = [
        ("STORAGE_PIPELINES", "reviews"),
        ("STORAGE_MAX_POLL_RECORDS_REVIEWS", "200"),
    ];
    let mut run = env.spawn_run("first", &only_reviews);
    // (wait_rows tolerates the table not existing until the binary has migrated)
    env.wait_rows(
        "SELECT count(*) FROM reviews",
        10_000,
        &mut run,
        Duration::from_secs(120),
    )
    .await;
    run.signal("TERM");
    let status = run.wait(Duration::from_secs(30));
    assert!(
        status.success(),
        "exit after SIGTERM: {status}\n{}",
        run.tail()
    );
    let rows = env.count("SELECT count(*) FROM reviews").await;
    let (end, committed) = env.offsets("reviews");
    assert!(rows < n as i64, "SIGTERM came mid-ingest ({rows} of {n})");
    assert_eq!(
        committed, rows,
        "committed offsets equal what was written at stop"
    );
    assert_eq!(
        env.group_members_now("reviews"),
        0,
        "the consumer left the group"
    );

    let mut run = env.spawn_run("second", &only_reviews);
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(300))
        .await;
    run.signal("TERM");
    assert!(run.wait(Duration::from_secs(30)).success());
    let totals = &run.events_named("pipeline totals")[0];
    assert_eq!(
        totals["inserted"],
        json!(end - rows),
        "the restart inserted only the rest"
    );
    assert_eq!(
        totals["skipped"],
        json!(0),
        "no message was processed twice"
    );
    assert_eq!(env.count("SELECT count(*) FROM reviews").await, n as i64);
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fatal_error_in_one_pipeline_stops_them_all_with_exit_1() {
    let Some(env) = Env::new().await else { return };
    let apps = apps(&env, 3);
    env.schema.register_apps(&apps).await;
    // Migrate as the superuser, then run as a role whose INSERT on reviews we can revoke.
    assert!(env.output(&["migrate", "--seeds"], &[]).status.success());
    let role = env.schema.name.clone() + "_app";
    let mut conn = env.schema.connect().await;
    for sql in [
        format!("CREATE ROLE {role} LOGIN"),
        format!(
            "GRANT USAGE, CREATE ON SCHEMA {} TO {role}",
            env.schema.name
        ),
        format!(
            "GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA {} TO {role}",
            env.schema.name
        ),
        format!(
            "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {} TO {role}",
            env.schema.name
        ),
    ] {
        sqlx::query(&sql).execute(&mut conn).await.unwrap();
    }
    let url = env
        .schema
        .url
        .replacen("://sluice@", &format!("://{role}@"), 1);
    assert_ne!(
        url, env.schema.url,
        "the test database URL names the sluice user"
    );
    let mut run = env.spawn_run("fatal", &[("DATABASE_URL", &url)]);
    env.produce_json(
        "app-stats",
        &[(
            apps[0].clone(),
            json!({"package_name": apps[0], "crawled_at": "2026-11-01T00:00:00Z"}),
        )],
    )
    .await;
    env.wait_caught_up("app-stats", &mut run, Duration::from_secs(60))
        .await;

    sqlx::query(&format!("REVOKE INSERT ON reviews FROM {role}"))
        .execute(&mut conn)
        .await
        .unwrap();
    env.produce_json("reviews", &reviews(&apps, 0..5)).await;
    let status = run.wait(Duration::from_secs(60));
    assert_eq!(
        status.code(),
        Some(1),
        "exit 1 after a fatal error\n{}",
        run.tail()
    );
    let failed = run.events_named("pipeline failed");
    assert_eq!(failed.len(), 1, "{}", run.tail());
    assert_eq!(failed[0]["pipeline"], "reviews");
    assert!(
        failed[0]["error"].as_str().unwrap().contains("42501"),
        "{}",
        failed[0]
    );
    let stopped: Vec<String> = run
        .events_named("pipeline stopped")
        .iter()
        .map(|e| e["pipeline"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        stopped.contains(&"app-stats".to_owned())
            && stopped.contains(&"network-metrics".to_owned()),
        "the others stopped cleanly: {stopped:?}"
    );
    assert_eq!(env.count("SELECT count(*) FROM reviews").await, 0);
    assert_eq!(
        env.count("SELECT count(*) FROM dead_letter_events").await,
        0,
        "a privilege error is not a dead letter"
    );
    drop(conn);
    let mut conn = sluice_testkit::TestSchema::connect(&env.schema).await;
    sqlx::query(&format!("DROP OWNED BY {role}"))
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query(&format!("DROP ROLE {role}"))
        .execute(&mut conn)
        .await
        .unwrap();
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_invalid_setting_exits_2_naming_the_variable_and_consumes_nothing() {
    let Some(env) = Env::new().await else { return };
    let apps = apps(&env, 1);
    env.schema.register_apps(&apps).await;
    env.produce_json("reviews", &reviews(&apps, 0..3)).await;
    let cases = [
        ("STORAGE_MAX_POLL_RECORDS", "lots"),
        ("STORAGE_MAX_POLL_RECORDS_REVIEWS", "0"),
        ("STORAGE_MAX_POLL_RECORDS", "-5"),
        ("STORAGE_PIPELINES", "reviews,payments"),
        ("DATABASE_URL", "postgres//nohost"),
        ("STORAGE_POLL_TIMEOUT_MS", "1s"),
        // A per-pipeline override of no pipeline (a typo) is refused, not ignored.
        ("STORAGE_WRITERS_REVEIWS", "4"),
        ("SLUICE_LOG_FORMAT", "xml"),
        ("RUST_LOG", "info,==bad"),
        ("STORAGE_HEARTBEAT_DIR", "/proc/no-such-heartbeat-dir"),
    ];
    for (name, value) in cases {
        let out = env.output(&["run"], &[(name, value)]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}={value}: {stderr}");
        assert!(
            stderr.contains(name),
            "{name}={value}: the message names the variable: {stderr}"
        );
    }
    // A URL parameter the client would ignore, an unknown sslmode, a certificate file that
    // cannot be read: exit 2 naming it, never printing a parameter's value.
    let url = &env.schema.url;
    let with = |param: &str| format!("{url}{}{param}", if url.contains('?') { '&' } else { '?' });
    for (param, named) in [
        ("sslpassword=keypass123", "`sslpassword`"),
        ("sslmod=verify-full", "`sslmod`"),
        ("sslmode=bogus", "`sslmode`"),
        (
            "sslmode=verify-full&sslrootcert=/nonexistent/ca.crt",
            "/nonexistent/ca.crt",
        ),
        ("channel_binding=require", "`channel_binding`"),
    ] {
        let bad = with(param);
        for command in [&["run"][..], &["dlq", "list"][..], &["migrate"][..]] {
            let out = env.output(command, &[("DATABASE_URL", bad.as_str())]);
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(out.status.code(), Some(2), "{command:?} {param}: {said}");
            assert!(said.contains(named), "{command:?} {param}: {said}");
            assert!(!said.contains("keypass123"), "{command:?} {param}: {said}");
        }
    }
    let mut missing = env.sluice(&["run"]);
    missing.env_remove("DATABASE_URL");
    let out = missing.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("DATABASE_URL"));
    assert_eq!(env.offsets("reviews").1, 0, "nothing was consumed");
    assert_eq!(env.count("SELECT count(*) FROM pg_tables WHERE tablename = 'reviews' AND schemaname = current_schema()").await, 0, "not even migrated");
    // Parameters sluice does not read and whose loss weakens nothing (libpq's timeout, an
    // ORM's schema in a shared .env) are ignored with a warning naming them, not their values.
    let shared = with("connect_timeout=10&schema=secretish");
    let out = env.output(&["migrate"], &[("DATABASE_URL", shared.as_str())]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("connect_timeout") && !said.contains("secretish"),
        "{said}"
    );
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_fails_while_the_process_is_stopped_and_recovers_after_sigcont() {
    let Some(env) = Env::new().await else { return };
    let mut run = env.spawn_run("health", &[]);
    let health = |max_age: &str| env.output(&["health", "--max-age-seconds", max_age], &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !health("3").status.success() {
        assert!(Instant::now() < deadline, "never healthy:\n{}", run.tail());
        assert!(run.child.try_wait().unwrap().is_none(), "{}", run.tail());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    run.signal("STOP");
    let stopped = Instant::now();
    // The three pipelines' heartbeats go stale within a few milliseconds of each other;
    // wait until the reviews pipeline is among the stale ones.
    let out = loop {
        let out = health("3");
        if !out.status.success() && String::from_utf8_lossy(&out.stdout).contains("reviews: STALE")
        {
            break out;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(10),
            "health still passes 10 s after SIGSTOP"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("reviews: STALE"),
        "names the stale pipeline: {text}"
    );
    println!(
        "health failed {:?} after SIGSTOP (threshold 3 s)",
        stopped.elapsed()
    );
    run.signal("CONT");
    let resumed = Instant::now();
    while !health("3").status.success() {
        assert!(
            resumed.elapsed() < Duration::from_secs(10),
            "not healthy again after SIGCONT"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    run.signal("TERM");
    assert!(run.wait(Duration::from_secs(30)).success());
    env.cleanup().await;
}

/// Parses `kafka-consumer-groups --describe` output into (partition → (current, end, lag)).
fn parse_describe(
    text: &str,
    topic: &str,
) -> std::collections::BTreeMap<i32, (String, String, String)> {
    let mut rows = std::collections::BTreeMap::new();
    let mut header: Vec<&str> = Vec::new();
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.first() == Some(&"GROUP") {
            header = cols;
            continue;
        }
        let col = |name: &str| {
            header
                .iter()
                .position(|h| *h == name)
                .and_then(|i| cols.get(i))
                .map(|s| s.to_string())
        };
        if col("TOPIC").as_deref() == Some(topic) {
            let partition: i32 = col("PARTITION").unwrap().parse().unwrap();
            rows.insert(
                partition,
                (
                    col("CURRENT-OFFSET").unwrap(),
                    col("LOG-END-OFFSET").unwrap(),
                    col("LAG").unwrap(),
                ),
            );
        }
    }
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_agrees_with_kafka_consumer_groups_and_replay_is_safe() {
    let Some(env) = Env::new().await else { return };
    let stack_script =
        std::env::var("SLUICE_STACK").expect("SLUICE_STACK (from scripts/stack env)");
    let apps = apps(&env, 5);
    env.schema.register_apps(&apps).await;
    env.produce_json("reviews", &reviews(&apps, 0..3000)).await;
    let mut run = env.spawn_run("lag", &[("STORAGE_PIPELINES", "reviews")]);
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(120))
        .await;

    // Replay while the consumer runs: refused, nothing moved.
    let out = env.output(&["replay", "reviews", "--to", "earliest", "--execute"], &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("active member"));
    assert_eq!(env.offsets("reviews").1, 3000);

    run.signal("TERM");
    assert!(run.wait(Duration::from_secs(30)).success());
    env.produce_json("reviews", &reviews(&apps, 3000..3500))
        .await; // 500 records of lag

    // Without PostgreSQL the stored lag is not known: Kafka's is shown, and the command fails.
    let blind = env.output(
        &["lag", "--json"],
        &[
            ("STORAGE_PIPELINES", "reviews"),
            ("DATABASE_URL", "postgres://sluice@127.0.0.1:1/nowhere"),
        ],
    );
    let said = String::from_utf8_lossy(&blind.stderr);
    assert_eq!(blind.status.code(), Some(1), "{said}");
    assert!(said.contains("the stored lag is not known"), "{said}");
    let ours = env.output(&["lag", "--json"], &[("STORAGE_PIPELINES", "reviews")]);
    assert!(ours.status.success());
    let ours: Value = serde_json::from_slice(&ours.stdout).unwrap();
    let theirs = std::process::Command::new(&stack_script)
        .args([
            "kafka-tool",
            "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            "--bootstrap-server",
            &env.stack.bootstrap,
            "--describe",
            "--group",
            &env.group("reviews"),
        ])
        .output()
        .unwrap();
    let theirs_text = String::from_utf8_lossy(&theirs.stdout);
    println!("kafka-consumer-groups --describe:\n{theirs_text}");
    let theirs = parse_describe(&theirs_text, &env.topic("reviews"));
    // Kafka's tool lists the partitions the group has committed; the keys of a few apps may
    // all hash to two of the three partitions, so compare partition by partition.
    assert!(
        !theirs.is_empty(),
        "Kafka's own output lists the group's partitions"
    );
    let mut total_lag = 0;
    for p in ours[0]["partitions"].as_array().unwrap() {
        let partition = p["partition"].as_i64().unwrap() as i32;
        let Some((current, end, lag)) = theirs.get(&partition) else {
            assert_eq!(
                p["committed"],
                Value::Null,
                "partition {partition}: Kafka lists no commit"
            );
            assert_eq!(p["end"], 0, "partition {partition} holds no records");
            continue;
        };
        assert_eq!(
            p["committed"].to_string(),
            *current,
            "partition {partition} committed"
        );
        assert_eq!(p["end"].to_string(), *end, "partition {partition} end");
        assert_eq!(p["lag"].to_string(), *lag, "partition {partition} lag");
        total_lag += p["lag"].as_i64().unwrap();
    }
    assert_eq!(total_lag, 500);
    assert_eq!(ours[0]["members"], 0);

    // Dry run changes nothing; --execute moves only the reviews group.
    let dry = env.output(&["replay", "reviews", "--to", "earliest"], &[]);
    assert!(dry.status.success());
    assert!(String::from_utf8_lossy(&dry.stdout).contains("dry run"));
    assert_eq!(env.offsets("reviews").1, 3000);
    let before_other = env.offsets("app-stats").1;
    let digest = "SELECT md5(string_agg(t::text, ',' ORDER BY id)) FROM reviews t";
    let mut conn = env.schema.connect().await;
    let snapshot: String = sqlx::query_scalar(digest)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    let out = env.output(&["replay", "reviews", "--to", "earliest", "--execute"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(env.offsets("reviews").1, 0);
    assert_eq!(
        env.offsets("app-stats").1,
        before_other,
        "other groups untouched"
    );

    let mut run = env.spawn_run("replayed", &[("STORAGE_PIPELINES", "reviews")]);
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(120))
        .await;
    run.signal("TERM");
    assert!(run.wait(Duration::from_secs(30)).success());
    let totals = &run.events_named("pipeline totals")[0];
    assert_eq!(
        (totals["inserted"].as_i64(), totals["skipped"].as_i64()),
        (Some(500), Some(3000))
    );
    let after: String = sqlx::query_scalar("SELECT md5(string_agg(t::text, ',' ORDER BY id)) FROM reviews t WHERE id <= (SELECT max(id) FROM reviews) AND review_id::text NOT IN (SELECT 'r-' || g FROM generate_series(3000, 3499) g)").fetch_one(&mut conn).await.unwrap();
    assert_eq!(after, snapshot, "the replay changed no existing row");
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_replayed_after_the_fix_lands_and_the_limit_holds() {
    let Some(env) = Env::new().await else { return };
    let late = format!("com.{}.late", env.prefix.replace('-', "_"));
    env.produce_json(
        "reviews",
        &[(late.clone(), review(1, &late, "2026-11-03T08:00:00Z"))],
    )
    .await;
    let mut run = env.spawn_run("dlq1", &[("STORAGE_PIPELINES", "reviews")]);
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(60))
        .await;
    assert_eq!(
        env.count(
            "SELECT count(*) FROM dead_letter_events WHERE error_kind = 'unknown_application'"
        )
        .await,
        1
    );
    let id = env
        .count("SELECT id FROM dead_letter_events")
        .await
        .to_string();

    let listed = env.output(
        &[
            "dlq",
            "list",
            "--pipeline",
            "reviews",
            "--kind",
            "unknown_application",
            "--json",
        ],
        &[],
    );
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let shown = env.output(&["dlq", "show", &id], &[]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains(&late));

    env.schema.register_apps(std::slice::from_ref(&late)).await;
    let dry = env.output(&["dlq", "replay", "--id", &id], &[]);
    assert!(String::from_utf8_lossy(&dry.stdout).contains("would re-publish"));
    assert_eq!(
        env.count("SELECT replay_count::bigint FROM dead_letter_events")
            .await,
        0,
        "dry run changes nothing"
    );
    let out = env.output(
        &[
            "dlq",
            "replay",
            "--id",
            &id,
            "--execute",
            "--max-replays",
            "1",
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(60))
        .await;
    assert_eq!(
        env.count("SELECT count(*) FROM reviews").await,
        1,
        "the replayed record landed"
    );
    assert_eq!(
        env.count("SELECT replay_count::bigint FROM dead_letter_events")
            .await,
        1
    );
    assert_eq!(
        env.count("SELECT count(*) FROM dead_letter_events WHERE replayed_at IS NOT NULL")
            .await,
        1
    );

    let again = env.output(
        &[
            "dlq",
            "replay",
            "--id",
            &id,
            "--execute",
            "--max-replays",
            "1",
        ],
        &[],
    );
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stdout).contains("refused"));
    run.signal("TERM");
    assert!(run.wait(Duration::from_secs(30)).success());
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_passes_on_a_healthy_deployment_and_names_the_failing_step() {
    let Some(env) = Env::new().await else { return };
    let out = env.output(&["verify"], &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "before migrations the schema step fails"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("schema version"));
    assert!(env.output(&["migrate", "--seeds"], &[]).status.success());
    // A dead letter of another deployment's group in the same database is not this one's.
    env.count(
        "WITH d AS (INSERT INTO dead_letter_events (topic, partition, kafka_offset, \
         consumer_group, payload_size, error_kind, reason) VALUES ('elsewhere', 0, 0, \
         'another-deployment', 0, 'decode_error', 'not ours') RETURNING 1) SELECT count(*) FROM d",
    )
    .await;
    let out = env.output(&["verify", "--json"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let dead = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "dead letters")
        .unwrap()
        .to_string();
    assert!(!dead.contains("elsewhere"), "{dead}");
    let steps: Vec<&str> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        [
            "schema version",
            "applications table",
            "topics",
            "topic durability",
            "messages produced",
            "rows written",
            "dead letters",
            "lag"
        ]
    );

    sluice_testkit::delete_topics(&env.stack, &[&env.topic("network-metrics")]).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = env.output(&["verify"], &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(1) && stderr.contains("`topics`") {
            assert!(String::from_utf8_lossy(&out.stdout).contains("network-metrics"));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "verify never failed at topics: {stderr}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_topic_fails_the_start_naming_its_variable() {
    let Some(env) = Env::new().await else { return };
    let missing = format!("{}-no-such-topic", env.prefix);
    let mut run = env.spawn_run("missing", &[("STORAGE_TOPIC_NETWORK_METRICS", &missing)]);
    let status = run.wait(Duration::from_secs(60));
    assert_eq!(
        status.code(),
        Some(1),
        "a typo in a topic name is fatal, not a silent idle pipeline"
    );
    let failed = run.events_named("pipeline failed");
    assert_eq!(failed.len(), 1, "{}", run.tail());
    let error = failed[0]["error"].as_str().unwrap();
    assert!(
        error.contains("STORAGE_TOPIC_NETWORK_METRICS") && error.contains(&missing),
        "{error}"
    );
    env.cleanup().await;
}

/// Brokers that cannot be reached: exit 1 once the first metadata request gives up, the error
/// naming the variable and the address it holds (not only the client's "transport failure").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_brokers_fail_the_start_naming_kafka_bootstrap_servers() {
    let Some(env) = Env::new().await else { return };
    let nowhere = format!("127.0.0.1:{}", support::http::free_port());
    let mut run = env.spawn_run(
        "unreachable",
        &[
            ("KAFKA_BOOTSTRAP_SERVERS", nowhere.as_str()),
            ("KAFKA_SECURITY_PROTOCOL", "plaintext"),
            ("STORAGE_PIPELINES", "network-metrics"),
        ],
    );
    let status = run.wait(Duration::from_secs(90));
    assert_eq!(status.code(), Some(1), "{}", run.tail());
    let failed = run.events_named("pipeline failed");
    assert_eq!(failed.len(), 1, "{}", run.tail());
    let error = failed[0]["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("KAFKA_BOOTSTRAP_SERVERS={nowhere}")),
        "{error}"
    );

    // A stop signal while the brokers are still tried ends the process at once, cleanly
    // (it waited out the 15 s check and exited 1).
    let mut stopped = env.spawn_run(
        "unreachable-stopped",
        &[
            ("KAFKA_BOOTSTRAP_SERVERS", nowhere.as_str()),
            ("KAFKA_SECURITY_PROTOCOL", "plaintext"),
            ("STORAGE_PIPELINES", "network-metrics"),
        ],
    );
    // Migrations take about a second; the brokers are tried for 15.
    std::thread::sleep(Duration::from_secs(5));
    let asked = std::time::Instant::now();
    stopped.signal("TERM");
    let status = stopped.wait(Duration::from_secs(30));
    let took = asked.elapsed();
    assert_eq!(status.code(), Some(0), "{}", stopped.tail());
    assert!(
        took < Duration::from_secs(5),
        "{took:?}\n{}",
        stopped.tail()
    );
    assert_eq!(
        stopped
            .events_named("stop signal before the pipeline started")
            .len(),
        1,
        "{}",
        stopped.tail()
    );
    env.cleanup().await;
}

/// A container's health check runs `sluice health` without the process's arguments: it
/// checks the pipelines the running `sluice run --sinks FILE` listed, not the seed ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_without_arguments_checks_the_pipelines_the_running_process_runs() {
    const MAPPING: &str = r#"
[[sink]]
name = "things"
topic = "{prefix}-things"
table = "things"
key = ["id"]

[sink.columns]
id = { field = "id" }
"#;
    let Some(case) = support::case::Case::new(
        &["things"],
        "CREATE TABLE things (id BIGINT PRIMARY KEY);",
        MAPPING,
    )
    .await
    else {
        return;
    };
    let file = case.file.display().to_string();
    let mut run = {
        let log = case.env.dir.join("health-sinks.log");
        let mut cmd = case.env.sluice(&["run", "--sinks", &file]);
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        support::Running {
            child: cmd.spawn().unwrap(),
            log,
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = case.env.output(&["health", "--max-age-seconds", "5"], &[]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            assert!(text.contains("things: ok"), "{text}");
            assert!(
                !text.contains("reviews"),
                "the seed pipelines are not checked: {text}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never healthy: {text}\n{}",
            run.tail()
        );
        run.assert_alive();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(30)).success(),
        "{}",
        run.tail()
    );
    case.cleanup().await;
}

/// `outbox release` and `outbox retry-failed --id` name each given event they could not
/// move: one in another status by that status, an unknown id as unknown (a mistyped id
/// used to pass as "re-opened 0").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_moves_name_the_events_they_could_not_move() {
    let Some(env) = Env::new().await else { return };
    let migrated = env.output(&["migrate"], &[]);
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    let mut conn = env.schema.connect().await;
    let insert = |status: &'static str| {
        sqlx::query_scalar::<_, uuid::Uuid>(
            "INSERT INTO outbox_events (aggregate_type, aggregate_id, event_type, topic, \
             partition_key, payload, status) VALUES ('a', '1', 't', 'nowhere', 'k', '{}', $1) \
             RETURNING id",
        )
        .bind(status)
    };
    let held = insert("PREQUEUED").fetch_one(&mut conn).await.unwrap();
    let pending = insert("PENDING").fetch_one(&mut conn).await.unwrap();
    let failed = insert("PENDING").fetch_one(&mut conn).await.unwrap();
    for status in ["DISPATCHING", "FAILURE"] {
        sqlx::query("UPDATE outbox_events SET status = $1 WHERE id = $2")
            .bind(status)
            .bind(failed)
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let unknown = uuid::Uuid::nil();

    let released = env.output(
        &["outbox", "release", &format!("{held},{pending},{unknown}")],
        &[],
    );
    let (out, err) = (
        String::from_utf8_lossy(&released.stdout),
        String::from_utf8_lossy(&released.stderr),
    );
    assert!(released.status.success(), "{err}");
    assert_eq!(out.trim(), "released 1 of 3 events");
    assert!(
        err.contains(&format!(
            "not released: event {pending} is PENDING, not PREQUEUED"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("not released: no event {unknown}")),
        "{err}"
    );
    assert!(!err.contains(&held.to_string()), "{err}");

    let reopened = env.output(
        &[
            "outbox",
            "retry-failed",
            "--id",
            &format!("{failed},{held},{unknown}"),
        ],
        &[],
    );
    let (out, err) = (
        String::from_utf8_lossy(&reopened.stdout),
        String::from_utf8_lossy(&reopened.stderr),
    );
    assert!(reopened.status.success(), "{err}");
    assert_eq!(out.trim(), "re-opened 1 of 3 FAILURE events");
    assert!(
        err.contains(&format!(
            "not re-opened: event {held} is PENDING, not FAILURE"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("not re-opened: no event {unknown}")),
        "{err}"
    );
    assert!(!err.contains(&failed.to_string()), "{err}");
    let status: String = sqlx::query_scalar("SELECT status FROM outbox_events WHERE id = $1")
        .bind(failed)
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(status, "PENDING");
}
