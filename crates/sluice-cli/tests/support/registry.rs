//! The schema registry of the stack and the independent Python producer
//! (`tests/data/registry/produce.py`: the Confluent client's serializers).

use super::case::Case;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

/// The registry and the Python with the Confluent client, from `scripts/stack env`; `None`
/// (skip) outside CI when the stack does not run them, a failure in CI.
pub fn registry() -> Option<(String, String)> {
    let url = std::env::var("SCHEMA_REGISTRY_URL").ok();
    let python = std::env::var("SLUICE_PYTHON").ok();
    match (url, python) {
        (Some(url), Some(python)) => Some((url, python)),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true but SCHEMA_REGISTRY_URL / SLUICE_PYTHON are not set: run `make test`")
        }
        _ => {
            eprintln!("SKIPPED: no schema registry (run `make test`)");
            None
        }
    }
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/registry/produce.py")
}

/// The values PostgreSQL must hold: column → text per record, in id order.
pub type Expected = BTreeMap<String, Vec<String>>;

/// Produces `count` records from id `first` with the Python producer; what it expects.
pub fn produce(
    case: &Case,
    format: &str,
    sink: &str,
    (first, count): (usize, usize),
    version: u8,
) -> Expected {
    let (url, python) = registry().expect("checked by the caller");
    let out = case.env.dir.join(format!("{sink}-{first}-v{version}.json"));
    let status = Command::new(python)
        .arg(script())
        .args([
            format,
            &case.topic(sink),
            &first.to_string(),
            &count.to_string(),
            &out.display().to_string(),
            &version.to_string(),
        ])
        .env("KAFKA_BOOTSTRAP_SERVERS", &case.env.stack.bootstrap)
        .env("SCHEMA_REGISTRY_URL", url)
        .status()
        .unwrap();
    assert!(status.success(), "produce.py {format} failed: {status}");
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

/// `more` appended to `expected`, column by column (a column `more` lacks is NULL there).
pub fn extend(expected: &mut Expected, more: Expected) {
    let before = expected.get("id").map_or(0, Vec::len);
    let added = more.get("id").map_or(0, Vec::len);
    for (column, values) in more {
        let list = expected
            .entry(column)
            .or_insert_with(|| vec!["NULL".into(); before]);
        list.extend(values);
    }
    for list in expected.values_mut() {
        list.resize(before + added, "NULL".into());
    }
}

/// The registry's URL for the `sluice` processes of `case`.
pub fn with_registry(case: &mut Case) {
    with_registry_env(&mut case.env);
}

/// The registry's URL for the `sluice` processes of `env`.
pub fn with_registry_env(env: &mut super::Env) {
    let (url, _) = registry().expect("checked by the caller");
    env.vars.insert("SCHEMA_REGISTRY_URL".into(), url);
}

/// A [`Case`] whose `sluice` processes read the stack's registry; `None` (skip) as
/// [`registry`] says.
pub async fn registry_case(sinks: &[&str], ddl: &str, mapping: &str) -> Option<Case> {
    registry()?;
    let mut case = Case::new(sinks, ddl, mapping).await?;
    with_registry(&mut case);
    Some(case)
}
