//! A schema registry topic's faults, through `sluice run` against the real Kafka, PostgreSQL
//! and schema registry (records by the Confluent Python client, `tests/data/registry`):
//!
//! - an id the registry does not know, a wrong magic byte, bytes that do not decode with
//!   their schema → one dead letter each, naming the reason and the schema id; the records
//!   around them land;
//! - the registry frozen (`SIGSTOP`: connections hang) for 10 s, then stopped (connections
//!   refused) for 10 s, each while a new process meets ids it has not fetched → no dead
//!   letter, the process stays up and says it waits (its log, `/health/ready`), and every
//!   record lands once the registry answers again;
//! - a registry of its own that takes connections and never answers, with requests of two
//!   minutes → the heartbeat stays fresh while the writer waits, and SIGTERM ends the wait at
//!   once with nothing stored or committed.
//!
//! Its own test binary: freezing the shared registry must not stall the other registry tests.
//!
//! sluice-test: freezes-registry (it freezes and stops the shared registry):
//! `scripts/test-all` never runs this binary beside a `uses-registry` one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use std::time::{Duration, Instant};
use support::case::Case;
use support::registry::{extend, produce, registry, registry_case};

/// The table `name` and an Avro sink of the same name into it; `topic` is its topic line
/// (a topic pattern's subjects are not checked at start).
fn avro_sink(name: &str, topic: &str) -> (String, String) {
    let ddl = format!("CREATE TABLE {name} (id BIGINT PRIMARY KEY, s TEXT);");
    let mapping = format!(
        "[[sink]]\nname = \"{name}\"\n{topic}\ntable = \"{name}\"\nkey = [\"id\"]\n\
         format = \"avro\"\n[sink.columns]\nid = {{ field = \"id\" }}\ns = {{ field = \"s\" }}\n"
    );
    (ddl, mapping)
}

/// The stack script, whose `registry freeze|thaw` stops and continues the registry.
fn stack_script() -> String {
    std::env::var("SLUICE_STACK").expect("SLUICE_STACK (from scripts/stack env)")
}

/// The registry frozen while this lives; thawed on drop, also when a failing test unwinds.
struct Frozen;

impl Frozen {
    fn new() -> Self {
        let status = std::process::Command::new(stack_script())
            .args(["registry", "freeze"])
            .status()
            .unwrap();
        assert!(status.success(), "registry freeze: {status}");
        Frozen
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let status = std::process::Command::new(stack_script())
            .args(["registry", "thaw"])
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("registry thaw failed: {status:?}");
        }
    }
}

#[tokio::test]
async fn bad_records_are_dead_letters_and_an_unreachable_registry_is_waited_for() {
    let (ddl, mapping) = avro_sink("faults", "topic = \"{prefix}-faults\"");
    let Some(mut case) = registry_case(&["faults"], &ddl, &mapping).await else {
        return;
    };
    case.env
        .vars
        .insert("SCHEMA_REGISTRY_TIMEOUT_MS".into(), "1000".into());
    let topic = case.topic("faults");
    let mut expected = produce(&case, "avro", "faults", (0, 100), 1);
    let v1 = latest_id(&format!("{topic}-value"));
    let header = |magic: u8, id: i32| {
        let mut bytes = vec![magic];
        bytes.extend(id.to_be_bytes());
        bytes
    };
    let unknown = 2_000_000_000;
    let mut truncated = header(0, v1);
    truncated.extend([0x02]); // id = 1, then nothing of the rest
    let bad = [
        (
            Some(b"bad-1".to_vec()),
            Some([header(0, unknown), vec![2, 4]].concat()),
        ),
        (
            Some(b"bad-2".to_vec()),
            Some([header(1, v1), vec![2, 4]].concat()),
        ),
        (Some(b"bad-3".to_vec()), Some(truncated)),
    ];
    sluice_testkit::produce(&case.env.stack, &topic, &bad).await;
    extend(
        &mut expected,
        produce(&case, "avro", "faults", (100, 100), 1),
    );
    case.run_to_end("faults").await;
    let dead = case.dead_letters().await;
    let reasons: Vec<(i64, &str)> = dead.iter().map(|d| (d.1, d.3.as_str())).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(
        reasons[0].0 == 100
            && reasons[0].1.contains(&format!("schema id {unknown}"))
            && reasons[0].1.contains("not in the schema registry"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].0 == 101 && reasons[1].1.contains("magic byte is 1"),
        "{reasons:?}"
    );
    assert!(
        reasons[2].0 == 102 && reasons[2].1.contains(&format!("schema id {v1}")),
        "{reasons:?}"
    );
    assert_eq!(
        case.rows("SELECT count(*)::text FROM faults").await,
        ["200"]
    );

    // Version 2 registered and written while no process runs; the next process meets its
    // id with the registry frozen (connections hang), then, after more records, stopped
    // (connections refused; it keeps its schemas across the restart).
    extend(
        &mut expected,
        produce(&case, "avro", "faults", (200, 300), 2),
    );
    let frozen = Frozen::new();
    outage(&case, "frozen", frozen, 200).await;
    extend(
        &mut expected,
        produce(&case, "avro", "faults", (500, 100), 2),
    );
    let stopped = Stopped::new();
    outage(&case, "stopped", stopped, 500).await;
    let dead = case.dead_letters().await;
    let reasons: Vec<(i64, &str)> = dead.iter().map(|d| (d.1, d.3.as_str())).collect();
    assert_eq!(reasons.len(), 3, "no new dead letter: {reasons:?}");
    let texts = case.rows("SELECT s FROM faults ORDER BY id").await;
    assert_eq!(texts, expected["s"], "every record's text, once");
    case.cleanup().await;
}

/// A process started while `fault` lasts: it logs that a batch waits for the registry, stores
/// nothing for 10 s (the table keeps `before` rows), then, once `fault` is dropped, stores
/// every record and stops cleanly.
async fn outage<F>(case: &Case, label: &str, fault: F, before: usize) {
    let file = case.file.display().to_string();
    let port = support::http::free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut run = case.env.spawn_run(
        label,
        &[
            ("SLUICE_SINKS_FILE", file.as_str()),
            ("SLUICE_HTTP_ADDR", addr.as_str()),
        ],
    );
    let started = Instant::now();
    wait_logged(&mut run);
    // Readiness says why.
    let (status, body) = support::http::get(port, "/health/ready", "text/plain");
    assert!(
        status == 503 && body.contains("faults: retrying the schema registry: "),
        "{label}: /health/ready {status}: {body}"
    );
    while started.elapsed() < Duration::from_secs(10) {
        run.assert_alive();
        std::thread::sleep(Duration::from_millis(200));
    }
    let count = |n: usize| vec![n.to_string()];
    assert_eq!(
        case.rows("SELECT count(*)::text FROM faults").await,
        count(before),
        "{label}: nothing stored while the registry is out"
    );
    drop(fault);
    registry_holds_what_the_records_name(case, label, &mut run);
    let (group, topic) = (case.env.group("faults"), case.topic("faults"));
    support::wait_for(
        "every record stored",
        Duration::from_secs(120),
        &mut run,
        || {
            let offsets = case.env.admin().group_offsets(&group, &topic).unwrap();
            let end: i64 = offsets.iter().map(|p| p.high).sum();
            let committed: i64 = offsets.iter().map(|p| p.committed.unwrap_or(0)).sum();
            (committed == end).then_some(())
        },
    );
    no_new_dead_letter(case, label, &run).await;
    run.signal("TERM");
    assert!(
        run.wait(Duration::from_secs(60)).success(),
        "{}",
        run.tail()
    );
}

/// Waits until the registry, back after the outage `label`, answers the id of the topic's
/// latest schema (the one the records of the outage name): a registry that came back without
/// it is a broken test stack, said as such, not a sluice that refused records it should keep.
fn registry_holds_what_the_records_name(case: &Case, label: &str, run: &mut support::Running) {
    let (url, _) = registry().expect("checked by the caller");
    let subject = format!("{}-value", case.topic("faults"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let id = ureq::get(&format!("{url}/subjects/{subject}/versions/latest"))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_json::<serde_json::Value>().ok())
            .and_then(|v| v["id"].as_i64());
        let status = id.map(|id| {
            ureq::get(&format!("{url}/schemas/ids/{id}"))
                .call()
                .map_or_else(|e| e.to_string(), |r| r.status().to_string())
        });
        if status.as_deref().is_some_and(|s| s.starts_with("200")) {
            return;
        }
        run.assert_alive();
        if Instant::now() >= deadline {
            eprintln!(
                "DIAGNOSIS {label}: the registry back after the outage does not answer the \
                 latest schema of {subject}: id {id:?}, /schemas/ids: {status:?}"
            );
            panic!("{label}: the registry came back without the schema its records name");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Fails at once when the outage `label` dead-lettered a record (three were before it). The
/// first line of a CI failure's output is all that is sure to be read: the reason, what the
/// registry says of that id now and the process's schema events go on one line, first.
async fn no_new_dead_letter(case: &Case, label: &str, run: &support::Running) {
    let dead = case.dead_letters().await;
    if dead.len() == 3 {
        return;
    }
    let (url, _) = registry().expect("checked by the caller");
    let ids: std::collections::BTreeSet<i32> = run
        .events_named("schema fetched from the registry")
        .iter()
        .filter_map(|event| event["schema_id"].as_i64())
        .filter_map(|id| i32::try_from(id).ok())
        .collect();
    let now: Vec<String> = ids
        .iter()
        .map(|id| {
            let status = ureq::get(&format!("{url}/schemas/ids/{id}"))
                .call()
                .map_or_else(|e| e.to_string(), |r| r.status().to_string());
            format!("id {id}: {status}")
        })
        .collect();
    let reasons: Vec<String> = dead
        .iter()
        .skip(3)
        .map(|d| format!("{}: {}", d.1, d.3))
        .collect();
    let refused: Vec<String> = run
        .events_named("schema refused: its records are dead-lettered")
        .iter()
        .map(|event| event["error"].to_string())
        .collect();
    eprintln!(
        "DIAGNOSIS {label}: {} new dead letter(s), first {:?}; refused by the process: \
         {refused:?}; the registry now: {now:?}; the process fetched {ids:?}",
        reasons.len(),
        reasons.first()
    );
    panic!(
        "{label}: the outage dead-lettered {} record(s): {reasons:?}\n{}",
        reasons.len(),
        run.tail()
    );
}

/// Waits until the process logs that a batch waits for the registry.
fn wait_logged(run: &mut support::Running) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while run
        .events_named("schema registry unavailable; the batch waits for it")
        .is_empty()
    {
        run.assert_alive();
        assert!(
            Instant::now() < deadline,
            "no wait for the registry logged:\n{}",
            run.tail()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The registry stopped while this lives; started again (waiting until it answers) on drop,
/// also when a failing test unwinds.
struct Stopped;

impl Stopped {
    fn new() -> Self {
        registry_command("stop");
        Stopped
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        registry_command("start");
    }
}

fn registry_command(what: &str) {
    let status = std::process::Command::new(stack_script())
        .args(["registry", what])
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        eprintln!("registry {what} failed: {status:?}");
    }
}

/// The latest schema id of `subject`.
pub fn latest_id(subject: &str) -> i32 {
    let (url, _) = registry().expect("checked by the caller");
    let body: serde_json::Value = ureq::get(&format!("{url}/subjects/{subject}/versions/latest"))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    i32::try_from(body["id"].as_i64().unwrap()).unwrap()
}

/// A registry that takes connections and never answers (a hung server, a black-holed route)
/// with requests of two minutes: the writer waits for it with the heartbeat fresh (a liveness
/// probe must not kill a process that waits, as it must not during a PostgreSQL outage), and
/// SIGTERM ends the wait at once — nothing stored, nothing committed, nothing dead-lettered.
#[tokio::test]
async fn a_registry_that_never_answers_keeps_the_heartbeat_and_sigterm_stops_the_wait() {
    // A topic pattern: its subject is not checked at start, so the only request to the
    // registry is the writer's fetch of the record's schema.
    let (ddl, mapping) = avro_sink("hung", "topic_pattern = '{prefix}-hung'");
    let Some(case) = Case::new(&["hung"], &ddl, &mapping).await else {
        return;
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (asked, requests) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            held.push(stream); // read nothing, answer nothing
            if asked.send(()).is_err() {
                break;
            }
        }
    });
    let topic = case.topic("hung");
    let mut value = vec![0u8];
    value.extend(7i32.to_be_bytes());
    value.extend([2, 2, b'x']);
    sluice_testkit::produce(
        &case.env.stack,
        &topic,
        &[(Some(b"1".to_vec()), Some(value))],
    )
    .await;

    let file = case.file.display().to_string();
    let vars = [
        ("SLUICE_SINKS_FILE", file.as_str()),
        ("SCHEMA_REGISTRY_URL", url.as_str()),
        ("SCHEMA_REGISTRY_TIMEOUT_MS", "120000"),
    ];
    let mut run = case.env.spawn_run("hung", &vars);
    let deadline = Instant::now() + Duration::from_secs(60);
    while requests.try_recv().is_err() {
        run.assert_alive();
        assert!(
            Instant::now() < deadline,
            "the schema never asked for:\n{}",
            run.tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The writer's request hangs. A writer stuck for 5 s stops the heartbeat; one that waits
    // for the registry keeps it: `sluice health` passes throughout 15 s of the hang.
    let hung = Instant::now();
    let health = || {
        case.env.output(
            &["health", "--max-age-seconds", "4"],
            &[("SLUICE_SINKS_FILE", file.as_str())],
        )
    };
    while hung.elapsed() < Duration::from_secs(15) {
        run.assert_alive();
        let out = health();
        assert!(
            out.status.success(),
            "health failed {:.1} s into the registry's hang: {}\n{}",
            hung.elapsed().as_secs_f64(),
            String::from_utf8_lossy(&out.stdout),
            run.tail()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let stopping = Instant::now();
    run.signal("TERM");
    let status = run.wait(Duration::from_secs(60));
    assert!(
        status.success() && stopping.elapsed() < Duration::from_secs(10),
        "SIGTERM during the registry's hang: {status} after {:.1} s\n{}",
        stopping.elapsed().as_secs_f64(),
        run.tail()
    );
    assert!(case.dead_letters().await.is_empty(), "no dead letter");
    assert_eq!(case.rows("SELECT count(*)::text FROM hung").await, ["0"]);
    let offsets = case
        .env
        .admin()
        .group_offsets(&case.env.group("hung"), &topic)
        .unwrap();
    assert!(
        offsets.iter().all(|p| p.committed.unwrap_or(0) == 0),
        "nothing committed: {offsets:?}"
    );
    case.cleanup().await;
}
