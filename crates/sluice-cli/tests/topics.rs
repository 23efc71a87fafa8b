//! `sluice topics ensure` with per-topic overrides and `sluice topics describe`, on the
//! stack's single broker: what ensure reports (created, partitions grown, configs altered,
//! unchanged), its refusal to shrink a topic (nothing changed), a bad override's exit 2, and
//! describe's partitions, leaders, replicas, ISR and configs in both forms.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic with a clear message"
)]

mod support;

use serde_json::Value;
use std::process::Output;
use support::*;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The line of `topic` in ensure's output.
fn line_of<'a>(stdout: &'a str, topic: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(&format!("{topic}: ")))
        .unwrap_or_else(|| panic!("no line for {topic} in:\n{stdout}"))
}

fn describe_json(env: &Env, vars: &[(&str, &str)], topics: &[&str]) -> (Output, Vec<Value>) {
    let mut args = vec!["topics", "describe", "--json"];
    args.extend_from_slice(topics);
    let out = env.output(&args, vars);
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)));
    (out, json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_applies_per_topic_overrides_reports_each_change_and_refuses_to_shrink() {
    let Some(env) = Env::new().await else { return };
    // Fresh topic names: ensure creates them.
    let names: Vec<(String, String)> = PIPELINES
        .iter()
        .map(|p| {
            (
                format!("STORAGE_TOPIC_{}", p.replace('-', "_").to_uppercase()),
                format!("{}-ensure-{p}", env.prefix),
            )
        })
        .collect();
    let [stats, reviews, metrics] = [0, 1, 2].map(|i| names[i].1.clone());
    let with = |extra: &[(&'static str, &'static str)]| -> Vec<(String, String)> {
        let mut vars = names.clone();
        vars.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        vars
    };
    let run = |vars: &[(String, String)]| -> (Option<i32>, String) {
        let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let out = env.output(&["topics", "ensure"], &refs);
        let stdout = text(&out.stdout);
        println!("$ topics ensure\n{stdout}{}", text(&out.stderr));
        (out.status.code(), format!("{stdout}{}", text(&out.stderr)))
    };

    // 1. Created, each with its own values.
    let first = with(&[
        ("STORAGE_TOPIC_PARTITIONS_REVIEWS", "4"),
        ("STORAGE_TOPIC_RETENTION_MS_APP_STATS", "3600000"),
    ]);
    let (code, out) = run(&first);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        line_of(&out, &stats).ends_with(
            "created with 3 partitions, replication factor 1, min.insync.replicas 1, \
             retention.ms 3600000"
        ),
        "{out}"
    );
    assert!(
        line_of(&out, &reviews)
            .ends_with("created with 4 partitions, replication factor 1, min.insync.replicas 1"),
        "{out}"
    );
    assert!(
        line_of(&out, &metrics).contains("created with 3 partitions"),
        "{out}"
    );

    // 2. The same settings again: unchanged.
    let (code, out) = run(&first);
    assert_eq!(code, Some(0), "{out}");
    for topic in [&stats, &reviews, &metrics] {
        assert!(line_of(&out, topic).ends_with("; unchanged"), "{out}");
    }

    // 3. Grown and altered, each topic by its own variable.
    let grow = with(&[
        ("STORAGE_TOPIC_PARTITIONS_REVIEWS", "6"),
        ("STORAGE_TOPIC_RETENTION_MS_APP_STATS", "3600000"),
        ("STORAGE_TOPIC_RETENTION_MS_NETWORK_METRICS", "-1"),
    ]);
    let (code, out) = run(&grow);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        line_of(&out, &reviews).ends_with("; partitions grown from 4 to 6"),
        "{out}"
    );
    assert!(
        line_of(&out, &metrics).ends_with("; retention.ms 604800000 -> -1"),
        "{out}"
    );
    assert!(line_of(&out, &stats).ends_with("; unchanged"), "{out}");

    // 4. A shrink is refused before anything changes: the retention asked for app-stats in
    //    the same run is not applied either.
    let shrink = with(&[
        ("STORAGE_TOPIC_PARTITIONS_REVIEWS", "2"),
        ("STORAGE_TOPIC_RETENTION_MS_APP_STATS", "1000"),
    ]);
    let (code, out) = run(&shrink);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        line_of(&out, &reviews).contains(
            "refused: it has 6 partitions and STORAGE_TOPIC_PARTITIONS_REVIEWS=2 would shrink it"
        ),
        "{out}"
    );
    assert!(out.contains("nothing was changed"), "{out}");

    // 5. A bad or misspelt override: exit 2 naming the variable, before any Kafka call.
    let (code, out) = run(&with(&[("STORAGE_TOPIC_PARTITIONS_REVEIWS", "6")]));
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("STORAGE_TOPIC_PARTITIONS_REVEIWS"), "{out}");
    let (code, out) = run(&with(&[("STORAGE_TOPIC_MIN_INSYNC_REPLICAS_REVIEWS", "0")]));
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("STORAGE_TOPIC_MIN_INSYNC_REPLICAS_REVIEWS"),
        "{out}"
    );
    let (code, out) = run(&with(&[(
        "STORAGE_TOPIC_REPLICATION_FACTOR_APP_STATS",
        "2",
    )]));
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("STORAGE_TOPIC_REPLICATION_FACTOR_APP_STATS")
            && out.contains("broker count (1)"),
        "{out}"
    );

    // describe (default topics: the configured ones) shows the result of 1-3, untouched by 4.
    let refs: Vec<(&str, &str)> = names
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let (out, json) = describe_json(&env, &refs, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let by_topic = |t: &str| json.iter().find(|d| d["topic"] == t).unwrap().clone();
    let (s, r, m) = (by_topic(&stats), by_topic(&reviews), by_topic(&metrics));
    assert_eq!(r["partition_count"], 6);
    assert_eq!(r["partitions"].as_array().unwrap().len(), 6);
    assert_eq!(s["partition_count"], 3);
    assert_eq!(
        s["configs"]["retention.ms"],
        serde_json::json!({"value": "3600000", "source": "topic"})
    );
    assert_eq!(m["configs"]["retention.ms"]["value"], "-1");
    assert_eq!(r["configs"]["retention.ms"]["source"], "default");
    for d in [&s, &r, &m] {
        assert_eq!(d["replication_factor"], 1);
        assert_eq!(d["configs"]["min.insync.replicas"]["value"], "1");
        assert_eq!(d["configs"]["cleanup.policy"]["value"], "delete");
        assert_eq!(
            d["configs"]["unclean.leader.election.enable"]["value"],
            "false"
        );
        for p in d["partitions"].as_array().unwrap() {
            assert_eq!(p["leader"], 1, "{d}");
            assert_eq!(p["replicas"], serde_json::json!([1]));
            assert_eq!(p["isr"], serde_json::json!([1]));
        }
    }

    let topics: Vec<&str> = [&stats, &reviews, &metrics]
        .iter()
        .map(|t| t.as_str())
        .collect();
    sluice_testkit::delete_topics(&env.stack, &topics).await;
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_prints_a_table_per_topic_and_fails_on_a_missing_one() {
    let Some(env) = Env::new().await else { return };
    let reviews = env.topic("reviews");
    let out = env.output(&["topics", "describe", &reviews], &[]);
    let stdout = text(&out.stdout);
    println!("{stdout}");
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.starts_with(&format!(
            "{reviews}: 3 partitions, replication factor 1, 0 under-replicated\n"
        )),
        "{stdout}"
    );
    for config in [
        "retention.ms",
        "min.insync.replicas",
        "cleanup.policy",
        "unclean.leader.election.enable",
    ] {
        assert!(
            stdout.lines().any(|l| l.trim_start().starts_with(config)),
            "{config}: {stdout}"
        );
    }
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("partition"))
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        vec![
            vec!["0", "1", "1", "1"],
            vec!["1", "1", "1", "1"],
            vec!["2", "1", "1", "1"]
        ]
    );

    let missing = format!("{}-missing", env.prefix);
    let (out, json) = describe_json(&env, &[], &[&reviews, &missing]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(&missing),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(json.len(), 2);
    assert_eq!(json[0]["exists"], true);
    assert_eq!(
        json[1],
        serde_json::json!({"topic": missing, "exists": false})
    );
    env.cleanup().await;
}
