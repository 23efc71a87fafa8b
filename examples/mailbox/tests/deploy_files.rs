//! The mailbox example's series on the outbox dashboard (`deploy/grafana/sluice-outbox.json`):
//! every `sluice_mailbox_*` series a panel queries is one the example's consumer exports,
//! and every series it exports is on the dashboard. (The storage consumer's and the
//! dispatcher's series are checked by sluice-cli's `tests/deploy_files.rs`.)
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use prometheus_client::registry::Registry;
use sluice_mailbox::metrics::MailboxMetrics;
use std::collections::BTreeSet;
use std::path::PathBuf;

const DASHBOARD: &str = "grafana/sluice-outbox.json";
const PREFIX: &str = "sluice_mailbox_";

fn dashboard() -> serde_json::Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(DASHBOARD);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("valid JSON")
}

/// Every series the mailbox consumer exports.
fn exported() -> BTreeSet<String> {
    let mut registry = Registry::default();
    MailboxMetrics::register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_owned())
        .collect()
}

/// The `sluice_mailbox_*` series the dashboard's panels query.
fn queried() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let dashboard = dashboard();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let mut rest = target["expr"].as_str().expect("expr");
            while let Some(at) = rest.find(PREFIX) {
                let tail = &rest[at..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                names.insert(tail[..end].to_owned());
                rest = &tail[end..];
            }
        }
    }
    names
}

#[test]
fn dashboard_queries_only_exported_mailbox_series() {
    let exported = exported();
    let queried = queried();
    assert!(
        !queried.is_empty(),
        "{DASHBOARD} shows the mailbox consumer"
    );
    for metric in &queried {
        assert!(
            exported.contains(metric),
            "{DASHBOARD}: {metric} is not exported"
        );
    }
}

#[test]
fn every_mailbox_series_is_on_the_dashboard() {
    let queried = queried();
    let missing: Vec<String> = exported()
        .into_iter()
        .filter(|m| !queried.contains(m))
        .collect();
    assert!(
        missing.is_empty(),
        "exported but never looked at: {missing:?}"
    );
}
