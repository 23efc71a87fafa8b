//! The alert rules and the dashboards under `deploy/` parse, every metric they query is one
//! sluice exports, and every exported metric is queried. The rules are also checked by
//! Prometheus's own rule-file parser (`tools/rulecheck`, the check `promtool check rules`
//! runs: YAML, PromQL, templates), built with Go from the module proxy.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

use prometheus_client::registry::Registry;
use sluice_dispatch::metrics::DispatchMetrics;
use sluice_storage::StorageMetrics;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

fn deploy(file: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every series name sluice exports: the storage consumer, the dispatcher and the capture (histograms
/// with their suffixes). The mailbox example's series (`sluice_mailbox_*`, on the outbox
/// dashboard) are checked by the example's own `tests/deploy_files.rs`.
fn exported() -> BTreeSet<String> {
    let mut registry = Registry::default();
    DispatchMetrics::register(&mut registry, Duration::from_secs(60));
    sluice_capture::metrics::CaptureMetrics::register(&mut registry);
    let metrics = StorageMetrics::register(&mut registry, &["reviews"]);
    let p = metrics.pipeline("reviews", "unknown_application");
    p.set_up(true);
    p.retrying(Some("57P01"), "x");
    p.commit_failed();
    p.set_lag(&[("crawl.reviews".into(), 0, 1)], &[], 1.0);
    let mut tables = sluice_storage::by_table::ByTable::default();
    tables.of(&std::sync::Arc::from("reviews"));
    p.batch(&Default::default(), &tables, 1, [Duration::ZERO; 4]);
    p.rebalanced([1, 0, 0], &mut [0; 3]);
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, &registry).unwrap();
    let mut names: BTreeSet<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_owned())
        .collect();
    // Registered by the binary itself.
    names.insert("sluice_build_info".into());
    names
}

/// A series of the mailbox example (checked by the example's tests).
fn is_example(metric: &str) -> bool {
    metric.starts_with("sluice_mailbox_")
}

fn referenced(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("sluice_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

#[test]
fn alert_rules_parse_and_query_only_exported_metrics() {
    let exported = exported();
    let rules: serde_yaml::Value =
        serde_yaml::from_str(&deploy("prometheus/sluice-alerts.yml")).expect("valid YAML");
    let mut alerts = 0;
    for group in rules["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let name = rule["alert"].as_str().expect("every rule is an alert");
            let expr = rule["expr"].as_str().expect("expr");
            assert!(
                rule["annotations"]["summary"].is_string(),
                "{name}: summary"
            );
            let used = referenced(expr);
            assert!(!used.is_empty(), "{name} queries a sluice metric");
            for metric in used {
                assert!(
                    exported.contains(&metric),
                    "{name}: {metric} is not exported"
                );
            }
            alerts += 1;
        }
    }
    assert!(alerts >= 12, "{alerts} alerts");
}

#[test]
fn prometheus_accepts_the_alert_rules() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let rules = root.join("deploy/prometheus/sluice-alerts.yml");
    let out = match std::process::Command::new("go")
        .args(["run", "."])
        .arg(&rules)
        .current_dir(root.join("tools/rulecheck"))
        .output()
    {
        Ok(out) => out,
        Err(error) if std::env::var("CI").as_deref() != Ok("true") => {
            eprintln!("skipped: go is not installed ({error})");
            return;
        }
        Err(error) => panic!("go (needed to run tools/rulecheck): {error}"),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "rulecheck: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let parsed: serde_yaml::Value =
        serde_yaml::from_str(&deploy("prometheus/sluice-alerts.yml")).expect("valid YAML");
    let rules: usize = parsed["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .map(|g| g["rules"].as_sequence().map_or(0, Vec::len))
        .sum();
    assert!(
        stdout.contains(&format!("SUCCESS: {rules} rules found")),
        "{stdout}"
    );
}

#[test]
fn dashboards_parse_and_query_only_exported_metrics() {
    let exported = exported();
    for file in ["grafana/sluice-storage.json", "grafana/sluice-outbox.json"] {
        let dashboard: serde_json::Value = serde_json::from_str(&deploy(file)).expect("valid JSON");
        let panels = dashboard["panels"].as_array().expect("panels");
        assert!(!panels.is_empty(), "{file}");
        for panel in panels {
            let targets = panel["targets"].as_array().expect("targets");
            assert!(!targets.is_empty(), "{file}: {}", panel["title"]);
            for target in targets {
                let expr = target["expr"].as_str().expect("expr");
                let used = referenced(expr);
                assert!(
                    !used.is_empty(),
                    "{file}: {} queries sluice",
                    panel["title"]
                );
                for metric in used.into_iter().filter(|m| !is_example(m)) {
                    assert!(
                        exported.contains(&metric),
                        "{file}: {}: {metric}",
                        panel["title"]
                    );
                }
            }
        }
    }
}

#[test]
fn every_contract_metric_has_an_alert_or_a_panel() {
    let mut queried = BTreeSet::new();
    let rules = deploy("prometheus/sluice-alerts.yml");
    queried.extend(referenced(&rules));
    for file in ["grafana/sluice-storage.json", "grafana/sluice-outbox.json"] {
        queried.extend(referenced(&deploy(file)));
    }
    let base = |m: &str| {
        ["_bucket", "_count", "_sum"]
            .iter()
            .fold(m.to_owned(), |m, suffix| {
                m.trim_end_matches(suffix).to_owned()
            })
    };
    let queried: BTreeSet<String> = queried.iter().map(|m| base(m)).collect();
    let missing: Vec<String> = exported()
        .iter()
        .map(|m| base(m))
        .filter(|m| !queried.contains(m))
        .collect();
    assert!(
        missing.is_empty(),
        "exported but never looked at: {missing:?}"
    );
}
