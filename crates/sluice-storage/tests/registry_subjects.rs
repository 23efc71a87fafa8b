//! The start-time check of a registry sink's mapped fields (docs/ARCHITECTURE.md#registry-formats)
//! against the stack's schema registry, read through a proxy that fails the requests it is
//! told to: a field only an older version has is found there, and a registry that cannot
//! say which versions there are leaves the subject not checked — never a refused mapping
//! (`sluice run` would exit 2 and consume nothing for a registry's passing failure); a
//! misspelt subject is reported with the subjects near it.
//!
//! sluice-test: uses-registry (it registers subjects in the registry):
//! `scripts/test-all` never runs this binary beside a `freezes-registry` one.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};

use sluice_registry::{Registry, RegistrySettings};
use sluice_sinks::parse_sinks;
use sluice_storage::subjects::{Checked, check_subjects};

/// Version 1 has `old`; version 2 removed it.
const V1: &str = r#"{"type":"record","name":"Item","fields":[{"name":"id","type":"long"},{"name":"old","type":["null","string"],"default":null}]}"#;
const V2: &str = r#"{"type":"record","name":"Item","fields":[{"name":"id","type":"long"}]}"#;

fn register(url: &str, subject: &str, schema: &str) {
    ureq::post(&format!("{url}/subjects/{subject}/versions"))
        .header("Content-Type", "application/vnd.schemaregistry.v1+json")
        .send_json(serde_json::json!({ "schema": schema }))
        .unwrap();
}

fn registry(url: &str) -> Registry {
    let vars = HashMap::from([("SCHEMA_REGISTRY_URL", url.to_owned())]);
    Registry::new(&RegistrySettings::from_lookup(&|name| vars.get(name).cloned()).unwrap()).unwrap()
}

/// A proxy in front of the registry at `upstream` that answers 503 to every request whose
/// path ends with `failing`, and passes the others on; its URL (with the registry's base
/// path, which it passes on as asked).
fn failing_proxy(upstream: &str, failing: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    // `http://host:port` and the base path (`/apis/ccompat/v6`).
    let after_scheme = upstream.find("://").map_or(0, |i| i + 3);
    let split = upstream[after_scheme..]
        .find('/')
        .map_or(upstream.len(), |i| after_scheme + i);
    let (origin, base_path) = upstream.split_at(split);
    let origin = origin.to_owned();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { break };
            answer(stream, &origin, failing);
        }
    });
    format!("http://{address}{base_path}")
}

fn answer(mut stream: TcpStream, upstream: &str, failing: &str) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
    }
    let path = request_line.split(' ').nth(1).unwrap_or("/").to_owned();
    let (status, body) = if path.ends_with(failing) {
        (
            503,
            "{\"error_code\":50301,\"message\":\"not now\"}".to_owned(),
        )
    } else {
        let mut response = ureq::get(&format!("{upstream}{path}"))
            .config()
            .http_status_as_error(false)
            .build()
            .call()
            .unwrap();
        let status = response.status().as_u16();
        (status, response.body_mut().read_to_string().unwrap())
    };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
}

#[test]
fn a_registry_failing_to_list_versions_leaves_the_subject_unchecked_not_refused() {
    let Some(url) = sluice_testkit::schema_registry_url() else {
        return;
    };
    let topic = format!("registry-subjects-{}", uuid::Uuid::new_v4().simple());
    let subject = format!("{topic}-value");
    register(&url, &subject, V1);
    register(&url, &subject, V2);
    let mapping = format!(
        "[[sink]]\nname = \"items\"\ntopic = \"{topic}\"\ntable = \"items\"\nkey = [\"id\"]\n\
         format = \"avro\"\n[sink.columns]\nid = {{ field = \"id\" }}\nold = {{ field = \"old\" }}\n"
    );
    let sinks = parse_sinks("registry.toml", &mapping).unwrap();
    let sinks: Vec<&sluice_sinks::Sink> = sinks.iter().collect();

    // The registry answering: `old` is in version 1.
    let checks = check_subjects(&sinks, &registry(&url));
    assert!(
        matches!(&checks[0].outcome, Checked::Fits { older, .. } if older.len() == 1),
        "{}",
        checks[0]
    );

    // The registry failing to list the versions: nothing is known of the older versions.
    let proxy = failing_proxy(&url, "/versions");
    let checks = check_subjects(&sinks, &registry(&proxy));
    assert!(
        !checks[0].refuses() && matches!(checks[0].outcome, Checked::NotChecked(_)),
        "a registry's failure refused the mapping: {}",
        checks[0]
    );
    assert!(checks[0].to_string().contains("503"), "{}", checks[0]);
}

/// A sink whose `subject` is misspelt is not checked (the subject has no version: nothing may
/// have been produced yet), and the report names the registry's subjects near it.
#[test]
fn a_misspelt_subject_is_reported_with_the_subjects_near_it() {
    let Some(url) = sluice_testkit::schema_registry_url() else {
        return;
    };
    let topic = format!("registry-near-{}", uuid::Uuid::new_v4().simple());
    let subject = format!("{topic}-value");
    register(&url, &subject, V2);
    let misspelt = subject.replace("-value", "-vaule");
    let mapping = format!(
        "[[sink]]\nname = \"items\"\ntopic = \"{topic}\"\ntable = \"items\"\nkey = [\"id\"]\n\
         format = \"avro\"\nsubject = \"{misspelt}\"\n[sink.columns]\nid = {{ field = \"id\" }}\n"
    );
    let sinks = parse_sinks("registry.toml", &mapping).unwrap();
    let sinks: Vec<&sluice_sinks::Sink> = sinks.iter().collect();
    let checks = check_subjects(&sinks, &registry(&url));
    let report = checks[0].to_string();
    assert!(
        matches!(checks[0].outcome, Checked::NotChecked(_)) && !checks[0].refuses(),
        "{report}"
    );
    assert!(
        report.contains("no version yet")
            && report.contains(&format!("the registry has `{subject}`")),
        "{report}"
    );
}
