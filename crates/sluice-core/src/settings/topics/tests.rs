#![allow(clippy::unwrap_used, reason = "tests panic with a clear message")]
use super::*;
use std::collections::BTreeMap;

fn parse(pairs: &[(&str, &str)]) -> Result<TopicSettings, SettingsError> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    TopicSettings::from_vars(
        &|name| map.get(name).cloned(),
        map.keys().map(String::as_str),
    )
}

fn plan(s: &TopicSettings, brokers: usize) -> Result<TopicPlan, SettingsError> {
    s.plan_for(PipelineKind::Reviews, brokers)
}

#[test]
fn defaults_follow_the_cluster_size() {
    let s = parse(&[]).unwrap();
    assert_eq!(s, TopicSettings::default());
    let three = plan(&s, 3).unwrap();
    assert_eq!(
        (
            three.partitions,
            three.replication_factor,
            three.min_insync_replicas
        ),
        (3, 3, 2)
    );
    assert_eq!((three.retention_ms, three.reduced), (None, None));
    assert_eq!(plan(&s, 5).unwrap().replication_factor, 3);
    let one = plan(&s, 1).unwrap();
    assert_eq!((one.replication_factor, one.min_insync_replicas), (1, 1));
    assert!(one.reduced.unwrap().contains("1 broker"), "says why");
    let two = plan(&s, 2).unwrap();
    assert_eq!((two.replication_factor, two.min_insync_replicas), (2, 2));
    assert!(two.reduced.is_some());
}

#[test]
fn explicit_values_win() {
    let s = parse(&[
        ("STORAGE_TOPIC_PARTITIONS", "6"),
        ("STORAGE_TOPIC_REPLICATION_FACTOR", "2"),
        ("STORAGE_TOPIC_MIN_INSYNC_REPLICAS", "1"),
        ("STORAGE_TOPIC_RETENTION_MS", "-1"),
    ])
    .unwrap();
    let plan = plan(&s, 3).unwrap();
    assert_eq!(
        (
            plan.partitions,
            plan.replication_factor,
            plan.min_insync_replicas
        ),
        (6, 2, 1)
    );
    assert_eq!((plan.retention_ms, plan.reduced), (Some(-1), None));
}

#[test]
fn a_pipelines_own_values_win_over_the_shared_ones() {
    let s = parse(&[
        ("STORAGE_TOPIC_PARTITIONS", "6"),
        ("STORAGE_TOPIC_RETENTION_MS", "1000"),
        ("STORAGE_TOPIC_PARTITIONS_REVIEWS", "12"),
        ("STORAGE_TOPIC_MIN_INSYNC_REPLICAS_REVIEWS", "1"),
        ("STORAGE_TOPIC_RETENTION_MS_NETWORK_METRICS", "-1"),
    ])
    .unwrap();
    let reviews = s.plan_for(PipelineKind::Reviews, 3).unwrap();
    assert_eq!(
        (
            reviews.partitions,
            reviews.min_insync_replicas,
            reviews.retention_ms
        ),
        (12, 1, Some(1000))
    );
    assert_eq!(
        reviews.partitions_from.as_deref(),
        Some("STORAGE_TOPIC_PARTITIONS_REVIEWS")
    );
    let metrics = s.plan_for(PipelineKind::NetworkMetrics, 3).unwrap();
    assert_eq!(
        (
            metrics.partitions,
            metrics.min_insync_replicas,
            metrics.retention_ms
        ),
        (6, 2, Some(-1))
    );
    assert_eq!(
        metrics.partitions_from.as_deref(),
        Some("STORAGE_TOPIC_PARTITIONS")
    );
    let stats = s.plan_for(PipelineKind::AppStats, 1).unwrap();
    assert_eq!((stats.partitions, stats.replication_factor), (6, 1));
    assert_eq!(stats.replication_factor_from, None);
}

#[test]
fn overrides_are_validated_and_an_unknown_pipeline_is_an_error() {
    let err = parse(&[("STORAGE_TOPIC_PARTITIONS_REVEIWS", "6")]).unwrap_err();
    assert_eq!(err.variable(), "STORAGE_TOPIC_PARTITIONS_REVEIWS");
    assert!(err.expected().contains("REVIEWS"), "{}", err.expected());
    let err = parse(&[("STORAGE_TOPIC_RETENTION_MS_APP_STATS", "0")]).unwrap_err();
    assert_eq!(err.variable(), "STORAGE_TOPIC_RETENTION_MS_APP_STATS");
    // The pipeline's own min.insync.replicas against the shared replication factor.
    let err = parse(&[
        ("STORAGE_TOPIC_REPLICATION_FACTOR", "2"),
        ("STORAGE_TOPIC_MIN_INSYNC_REPLICAS_REVIEWS", "3"),
    ])
    .unwrap_err();
    assert_eq!(err.variable(), "STORAGE_TOPIC_MIN_INSYNC_REPLICAS_REVIEWS");
    assert!(
        err.expected()
            .contains("STORAGE_TOPIC_REPLICATION_FACTOR (")
    );
    // A pipeline's replication factor the cluster cannot hold names its own variable.
    let s = parse(&[("STORAGE_TOPIC_REPLICATION_FACTOR_REVIEWS", "3")]).unwrap();
    assert_eq!(
        plan(&s, 1).unwrap_err().variable(),
        "STORAGE_TOPIC_REPLICATION_FACTOR_REVIEWS"
    );
    // The topic-name variables are not overrides.
    assert!(parse(&[("STORAGE_TOPIC_REVIEWS", "r")]).is_ok());
}

#[test]
fn only_a_value_that_was_set_refuses_to_shrink_or_to_change_the_replication() {
    let existing = ExistingTopic {
        partitions: 6,
        replication_factor: 1,
    };
    let defaults = plan(&TopicSettings::default(), 3).unwrap();
    assert_eq!(defaults.refusal(existing), None, "defaults never refuse");
    let s = parse(&[
        ("STORAGE_TOPIC_PARTITIONS_REVIEWS", "3"),
        ("STORAGE_TOPIC_REPLICATION_FACTOR", "3"),
    ])
    .unwrap();
    let refusal = plan(&s, 3).unwrap().refusal(existing).unwrap();
    assert!(
        refusal.contains("STORAGE_TOPIC_PARTITIONS_REVIEWS=3 would shrink it"),
        "{refusal}"
    );
    assert!(
        refusal.contains("replication factor is 1 and STORAGE_TOPIC_REPLICATION_FACTOR=3"),
        "{refusal}"
    );
    let grow = parse(&[("STORAGE_TOPIC_PARTITIONS", "8")]).unwrap();
    assert_eq!(plan(&grow, 1).unwrap().refusal(existing), None);
}

#[test]
fn each_invalid_value_names_its_variable() {
    for (variable, value) in [
        ("STORAGE_TOPIC_PARTITIONS", "0"),
        ("STORAGE_TOPIC_PARTITIONS", "three"),
        ("STORAGE_TOPIC_REPLICATION_FACTOR", "0"),
        ("STORAGE_TOPIC_REPLICATION_FACTOR", "-3"),
        ("STORAGE_TOPIC_MIN_INSYNC_REPLICAS", "0"),
        ("STORAGE_TOPIC_RETENTION_MS", "0"),
        ("STORAGE_TOPIC_RETENTION_MS", "-2"),
        ("STORAGE_TOPIC_RETENTION_MS", "1d"),
    ] {
        let err = parse(&[(variable, value)]).unwrap_err();
        assert_eq!((err.variable(), err.value().as_str()), (variable, value));
    }
}

#[test]
fn more_in_sync_replicas_than_replicas_is_its_own_error() {
    let err = parse(&[
        ("STORAGE_TOPIC_REPLICATION_FACTOR", "2"),
        ("STORAGE_TOPIC_MIN_INSYNC_REPLICAS", "3"),
    ])
    .unwrap_err();
    assert_eq!(err.variable(), "STORAGE_TOPIC_MIN_INSYNC_REPLICAS");
    assert!(err.expected().contains("STORAGE_TOPIC_REPLICATION_FACTOR"));
    // With the default replication factor, the cluster decides.
    let s = parse(&[("STORAGE_TOPIC_MIN_INSYNC_REPLICAS", "2")]).unwrap();
    assert_eq!(plan(&s, 3).unwrap().min_insync_replicas, 2);
    let err = plan(&s, 1).unwrap_err();
    assert_eq!(err.variable(), "STORAGE_TOPIC_MIN_INSYNC_REPLICAS");
    // A replication factor the cluster cannot hold.
    let s = parse(&[("STORAGE_TOPIC_REPLICATION_FACTOR", "3")]).unwrap();
    assert_eq!(
        plan(&s, 1).unwrap_err().variable(),
        "STORAGE_TOPIC_REPLICATION_FACTOR"
    );
}
