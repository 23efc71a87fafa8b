//! The HTTP endpoint of `sluice run` on the real stack (issue 13): the metrics, read with
//! an independent Prometheus text-format parser, agree with the pipeline's own totals, the
//! tables and `sluice lag`; readiness names a pipeline retrying the database while liveness
//! stays up.
//!
//! The database is made unreachable through a TCP proxy this test owns (the stack script
//! has no `pg-stop`, and `pg-restart` is over too fast to observe a back-off): stopping the
//! proxy closes every connection and refuses new ones, exactly what a stopped server does to
//! the client, and touches nothing outside this test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::http::*;
use support::*;
use tokio_util::sync::CancellationToken;

/// A TCP proxy to PostgreSQL that can be stopped (every connection closed, new ones
/// refused) and started again on the same port.
struct Proxy {
    port: u16,
    target: String,
    stop: CancellationToken,
}

impl Proxy {
    async fn start(port: u16, target: &str) -> Proxy {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = CancellationToken::new();
        let (token, to) = (stop.clone(), target.to_owned());
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    a = listener.accept() => a,
                    () = token.cancelled() => return,
                };
                let Ok((mut client, _)) = accepted else {
                    continue;
                };
                let (token, to) = (token.clone(), to.clone());
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&to).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        () = token.cancelled() => {}
                    }
                });
            }
        });
        Proxy {
            port,
            target: target.to_owned(),
            stop,
        }
    }

    fn stop(&self) {
        self.stop.cancel();
    }
}

/// A scrape once `sluice_records_total` of the reviews pipeline has reached `handled`, within
/// 10 s.
fn scrape_handled(http: u16, handled: usize) -> Vec<prometheus_parse::Sample> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let samples = scrape(http);
        let counted = sum(&samples, "sluice_records_total", &[("pipeline", "reviews")]);
        if counted as usize >= handled || Instant::now() >= deadline {
            return samples;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The lag gauge per partition: (partition, records).
fn lag_gauge(samples: &[prometheus_parse::Sample]) -> BTreeMap<String, i64> {
    samples
        .iter()
        .filter(|s| s.metric == "sluice_consumer_lag")
        .map(|s| {
            (
                s.labels.get("partition").unwrap().to_owned(),
                value(s) as i64,
            )
        })
        .collect()
}

/// `sluice lag --json` for the reviews pipeline: (partition, records not committed).
fn cli_lag(env: &Env) -> BTreeMap<String, i64> {
    let out = env.output(&["lag", "--json"], &[("STORAGE_PIPELINES", "reviews")]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    json[0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["partition"].to_string(), p["lag"].as_i64().unwrap()))
        .collect()
}

/// Lag per partition: the gauge before, `sluice lag`, the gauge after.
type LagBracket = (
    BTreeMap<String, i64>,
    BTreeMap<String, i64>,
    BTreeMap<String, i64>,
);

/// While the pipeline drains a backlog (nothing is produced meanwhile, so the true lag only
/// falls), `sluice lag` taken between two scrapes lies between the gauges: the gauge read
/// before it was measured earlier, so it is at least the uncommitted lag minus what the
/// pipeline holds of the partition past its committed offset — its batch being stored (or
/// stored and not yet committed to Kafka), its queue full at two batches, and the poll that
/// found it full (up to a batch more): four batches of 100 records here; the gauge read a
/// lag interval (2 s) after it was measured later, so it is at most the uncommitted lag.
/// `None` when the backlog is too small to compare.
fn lag_while_running(
    env: &Env,
    http: u16,
    before: &[prometheus_parse::Sample],
) -> Option<LagBracket> {
    const IN_FLIGHT: i64 = 4 * 100;
    let before = lag_gauge(before);
    if before.values().sum::<i64>() < 10_000 {
        return None;
    }
    let cli = cli_lag(env);
    std::thread::sleep(Duration::from_millis(3_000));
    let after = lag_gauge(&scrape(http));
    assert!(
        cli.values().sum::<i64>() > 0,
        "compared while running: {cli:?}"
    );
    for (partition, committed) in &cli {
        let (early, late) = (before[partition], after[partition]);
        assert!(
            late <= *committed && *committed <= early + IN_FLIGHT,
            "partition {partition}: gauge {early} then {late}, sluice lag {committed} between"
        );
    }
    Some((before, cli, after))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_agree_with_totals_tables_and_lag_and_readiness_follows_the_database() {
    let Some(env) = Env::new().await else { return };
    let apps: Vec<String> = (0..20)
        .map(|i| format!("com.{}.app{i}", env.prefix.replace('-', "_")))
        .collect();
    env.schema.register_apps(&apps).await;

    // 50,000 reviews with poison mixed in: 100 undecodable, 100 of an unknown package.
    let n = 50_000;
    let unknown = format!("com.{}.unknown", env.prefix.replace('-', "_"));
    let mut records: Vec<sluice_testkit::RawRecord> = Vec::with_capacity(n + 200);
    for i in 0..n {
        let app = &apps[i % apps.len()];
        let value = review(i, app, "2026-11-03T08:00:00Z");
        records.push((
            Some(app.clone().into_bytes()),
            Some(value.to_string().into_bytes()),
        ));
        if i % 500 == 7 {
            records.push((Some(app.clone().into_bytes()), Some(b"{not json".to_vec())));
            let poison = review(n + i, &unknown, "2026-11-03T08:00:00Z");
            records.push((
                Some(unknown.clone().into_bytes()),
                Some(poison.to_string().into_bytes()),
            ));
        }
    }
    let total = records.len();
    assert_eq!(total, n + 200);
    sluice_testkit::produce(&env.stack, &env.topic("reviews"), &records).await;

    // The pipeline reaches PostgreSQL through the proxy.
    let url = env.schema.url.clone();
    let (before_at, after_at) = url.rsplit_once('@').unwrap();
    let host_port = after_at.split('/').next().unwrap().to_owned();
    let mut proxy = Proxy::start(0, &host_port).await;
    let proxied = format!(
        "{before_at}@{}",
        after_at.replacen(&host_port, &format!("127.0.0.1:{}", proxy.port), 1)
    );
    let http = free_port();
    let addr = format!("127.0.0.1:{http}");
    let vars = [
        ("STORAGE_PIPELINES", "reviews"),
        // Small batches: the ingest lasts long enough to compare the lag while running.
        ("STORAGE_MAX_POLL_RECORDS_REVIEWS", "100"),
        ("DATABASE_URL", proxied.as_str()),
        ("SLUICE_HTTP_ADDR", addr.as_str()),
        ("STORAGE_DB_RETRY_MAX_ATTEMPTS", "8"),
        ("STORAGE_DB_RETRY_BASE_MS", "250"),
    ];
    let mut run = env.spawn_run("observe", &vars);

    // Scrape during the ingest: every scrape parses, and the counters only grow.
    let started = Instant::now();
    let mut last = 0.0;
    let mut scrapes = 0;
    let mut compared_running = None;
    loop {
        run.assert_alive();
        if let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", http)) {
            drop(stream);
            let samples = scrape(http);
            let handled = sum(&samples, "sluice_records_total", &[("pipeline", "reviews")]);
            assert!(handled >= last, "counters never go down");
            last = handled;
            scrapes += 1;
            if handled as usize >= total {
                break;
            }
            if compared_running.is_none() && lag_gauge(&samples).len() == 3 {
                compared_running = lag_while_running(&env, http, &samples);
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(240),
            "ingest too slow: {last}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("{scrapes} scrapes during the ingest of {total} records");
    let (before, cli, after) = compared_running.expect("the lag was compared while running");
    println!("lag while running: gauge {before:?} >= sluice lag {cli:?} >= gauge {after:?}");
    // A second process on the same address (held by the first, which is serving) is
    // refused at start, exit 2, naming the variable.
    let busy = env.output(&["run"], &vars);
    assert_eq!(busy.status.code(), Some(2), "{busy:?}");
    assert!(String::from_utf8_lossy(&busy.stderr).contains("SLUICE_HTTP_ADDR"));

    env.wait_caught_up("reviews", &mut run, Duration::from_secs(60))
        .await;

    // (1) Counters agree with the tables.
    let samples = scrape(http);
    let outcome = |o: &str| {
        sum(
            &samples,
            "sluice_records_total",
            &[("pipeline", "reviews"), ("outcome", o)],
        ) as i64
    };
    let rows = env.count("SELECT count(*) FROM reviews").await;
    assert_eq!(outcome("inserted"), rows);
    assert_eq!(outcome("inserted"), n as i64);
    assert_eq!(outcome("updated") + outcome("skipped"), 0);
    assert_eq!(outcome("dead_lettered"), 200);
    for kind in [
        "decode_error",
        "unknown_application",
        "constraint_violation",
    ] {
        let table = env
            .count(&format!(
                "SELECT count(*) FROM dead_letter_events WHERE error_kind = '{kind}'"
            ))
            .await;
        let metric = sum(&samples, "sluice_dead_letters_total", &[("kind", kind)]) as i64;
        println!("dead letters {kind}: table {table}, metric {metric}");
        assert_eq!(metric, table, "dead letters of kind {kind}");
    }
    assert_eq!(
        sum(&samples, "sluice_pipeline_up", &[("pipeline", "reviews")]),
        1.0
    );
    assert!(samples.iter().any(|s| s.metric == "sluice_build_info"));
    for phase in ["poll", "decode", "store", "commit"] {
        assert!(
            samples
                .iter()
                .any(|s| s.metric.starts_with("sluice_batch_duration_seconds")
                    && s.labels.get("phase") == Some(phase)),
            "phase {phase} measured"
        );
    }

    // (2) The lag gauge agrees with `sluice lag --json` once the batch settled (measured
    // every 5 s).
    let deadline = Instant::now() + Duration::from_secs(20);
    let ours = loop {
        let samples = scrape(http);
        let lag: Vec<(String, f64)> = samples
            .iter()
            .filter(|s| s.metric == "sluice_consumer_lag")
            .map(|s| (s.labels.get("partition").unwrap().to_owned(), value(s)))
            .collect();
        if lag.len() == 3 && lag.iter().all(|(_, v)| *v == 0.0) {
            break lag;
        }
        assert!(
            Instant::now() < deadline,
            "lag gauge never settled: {lag:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let cli = env.output(&["lag", "--json"], &[("STORAGE_PIPELINES", "reviews")]);
    let cli: Value = serde_json::from_slice(&cli.stdout).unwrap();
    for p in cli[0]["partitions"].as_array().unwrap() {
        let partition = p["partition"].to_string();
        let gauge = ours.iter().find(|(q, _)| *q == partition).unwrap().1;
        assert_eq!(p["lag"], json!(gauge as i64), "partition {partition}");
    }
    let (status, body) = get(http, "/health/ready", "*/*");
    assert_eq!(status, 200, "{body}");

    // (3) The database goes away: not ready, naming the retrying pipeline; still live.
    proxy.stop();
    let more: Vec<(String, Value)> = (n..n + 100)
        .map(|i| (apps[0].clone(), review(i, &apps[0], "2026-11-03T08:00:00Z")))
        .collect();
    env.produce_json("reviews", &more).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let (status, body) = get(http, "/health/ready", "*/*");
        if status == 503 && body.contains("reviews: retrying the database") {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "never not-ready: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!("while the database is away: {body}");
    assert_eq!(get(http, "/health/live", "*/*").0, 200);
    let retries = sum(
        &scrape(http),
        "sluice_db_retries_total",
        &[("pipeline", "reviews")],
    );
    assert!(retries >= 1.0, "retries counted: {retries}");

    // Back: ready again, and the 100 records land.
    let away = Instant::now();
    proxy = Proxy::start(proxy.port, &proxy.target).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = get(http, "/health/ready", "*/*");
        if status == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never ready again: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "ready again {:?} after the database came back",
        away.elapsed()
    );
    env.wait_caught_up("reviews", &mut run, Duration::from_secs(60))
        .await;
    // The reader counts a batch just after its Kafka commit: the scrape waits for the last.
    let samples = scrape_handled(http, total + 100);
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(30)).success(),
        "{}",
        run.tail()
    );
    let totals = &run.events_named("pipeline totals")[0];
    for o in ["inserted", "updated", "skipped", "dead_lettered"] {
        let metric = sum(
            &samples,
            "sluice_records_total",
            &[("pipeline", "reviews"), ("outcome", o)],
        );
        assert_eq!(
            totals[o],
            json!(metric as i64),
            "outcome {o}: totals vs metric"
        );
    }
    assert_eq!(totals["inserted"], json!(n + 100));
    assert_eq!(
        env.count("SELECT count(*) FROM reviews").await,
        (n + 100) as i64
    );
    proxy.stop();
    env.cleanup().await;
}

/// A `.env` in the working directory is read; the process environment wins over it.
#[test]
fn dotenv_fills_in_and_the_environment_wins() {
    let dir = std::env::temp_dir().join(sluice_testkit::unique("dotenv"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(".env"),
        "# test\nDATABASE_URL=postgres://u@127.0.0.1:1/db\nSLUICE_HTTP_ADDR=from-dotenv\n",
    )
    .unwrap();
    let run = |extra: &[(&str, &str)]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("run")
            .current_dir(&dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(extra.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = run(&[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("SLUICE_HTTP_ADDR=\"from-dotenv\""),
        "{stderr}"
    );
    let (code, stderr) = run(&[("SLUICE_HTTP_ADDR", "from-environment")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("SLUICE_HTTP_ADDR=\"from-environment\""),
        "{stderr}"
    );
    // Only the working directory's: a parent's file is not read (here it would fail the
    // start), and a file that cannot be parsed is named by its path.
    let below = dir.join("below");
    std::fs::create_dir_all(&below).unwrap();
    let version = |at: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("version")
            .current_dir(at)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .output()
            .unwrap()
    };
    std::fs::write(dir.join(".env"), "NOT A SETTING LINE\n").unwrap();
    let out = version(&below);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = version(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{}", dir.join(".env").display())),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
