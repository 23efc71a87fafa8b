//! The storage consumer's settings, end to end: defaults, precedence, every refusal.

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use super::*;
use sluice_core::pipeline::PipelineKind;
use sluice_core::retry::Backoff;
use std::collections::BTreeMap;
use std::time::Duration;

/// A test environment: a valid `DATABASE_URL` and `pairs` (which may replace it).
fn with_database_url(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut map: BTreeMap<String, String> = [(
        "DATABASE_URL".to_owned(),
        "postgres://u@127.0.0.1:5432/db".to_owned(),
    )]
    .into();
    for (k, v) in pairs {
        map.insert((*k).to_owned(), (*v).to_owned());
    }
    map
}

fn settings(pairs: &[(&str, &str)]) -> Result<StorageSettings, SettingsError> {
    StorageSettings::from_map(&with_database_url(pairs))
}

fn failing_variable(pairs: &[(&str, &str)]) -> String {
    match settings(pairs) {
        Ok(s) => panic!("expected an error for {pairs:?}, got {s:?}"),
        Err(e) => e.variable().to_owned(),
    }
}

#[test]
fn defaults_match_the_spec() {
    let s = settings(&[]).unwrap();
    assert_eq!(s.kafka.bootstrap_servers, "127.0.0.1:9092");
    let batches: Vec<(&str, &str, &str, usize)> = s
        .pipelines
        .iter()
        .map(|p| {
            (
                p.kind.name(),
                p.topic.as_str(),
                p.group.as_str(),
                p.batch_size,
            )
        })
        .collect();
    // The seed topics' defaults; a topic added after them is not pinned here.
    assert_eq!(
        batches[..3],
        vec![
            ("app-stats", "app-stats", "storage-consumer.app-stats", 200),
            ("reviews", "reviews", "storage-consumer.reviews", 500),
            (
                "network-metrics",
                "network-metrics",
                "storage-consumer.network-metrics",
                50
            ),
        ]
    );
    assert_eq!(s.auto_offset_reset, OffsetReset::Earliest);
    assert_eq!(s.poll_timeout, Duration::from_millis(1000));
    assert_eq!(s.max_poll_interval, Duration::from_millis(300_000));
    assert_eq!(s.session_timeout, Duration::from_millis(45_000));
    assert_eq!(s.db_retry, Backoff::DEFAULT);
    assert_eq!(s.app_cache_ttl, Duration::from_secs(300));
    assert_eq!(s.shutdown_timeout, Duration::from_secs(30));
    assert_eq!(s.heartbeat_dir, "/tmp/sluice-heartbeat");
    assert_eq!(s.applications_table, "apps_registry_application");
    assert_eq!(s.linger, Duration::from_millis(20));
}

#[test]
fn the_linger_may_be_turned_off_and_is_at_most_a_second() {
    let off = settings(&[("STORAGE_LINGER_MS", "0")]).unwrap();
    assert_eq!(off.linger, Duration::ZERO);
    let longest = settings(&[("STORAGE_LINGER_MS", "1000")]).unwrap();
    assert_eq!(longest.linger, Duration::from_secs(1));
}

#[test]
fn batch_size_precedence_is_pipeline_then_shared_then_builtin() {
    let s = settings(&[
        ("STORAGE_MAX_POLL_RECORDS", "100"),
        ("STORAGE_MAX_POLL_RECORDS_REVIEWS", "1000"),
    ])
    .unwrap();
    let sizes: Vec<usize> = s.pipelines.iter().map(|p| p.batch_size).collect();
    assert_eq!(sizes[..3], [100, 1000, 100]);
    assert!(sizes[3..].iter().all(|&size| size == 100));
    let s = settings(&[("STORAGE_MAX_POLL_RECORDS_NETWORK_METRICS", "7")]).unwrap();
    let sizes: Vec<usize> = s.pipelines.iter().map(|p| p.batch_size).collect();
    assert_eq!(sizes[..3], [200, 500, 7]);
}

#[test]
fn writers_precedence_is_pipeline_then_shared_then_builtin() {
    let s = settings(&[]).unwrap();
    assert!(s.pipelines.iter().all(|p| p.writers == DEFAULT_WRITERS));
    let s = settings(&[("STORAGE_WRITERS", "3"), ("STORAGE_WRITERS_REVIEWS", "1")]).unwrap();
    let writers: Vec<usize> = s.pipelines.iter().map(|p| p.writers).collect();
    assert_eq!(writers[..3], [3, 1, 3]);
}

#[test]
fn a_per_pipeline_override_of_no_pipeline_is_refused() {
    for name in [
        "STORAGE_WRITERS_REVEIWS",
        "STORAGE_WRITERS_MY_SINK",
        "STORAGE_MAX_POLL_RECORDS_NOSUCH",
    ] {
        assert_eq!(failing_variable(&[(name, "4")]), name);
    }
    let error = settings(&[("STORAGE_WRITERS_MY_SINK", "4")]).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("APP_STATS, REVIEWS, NETWORK_METRICS"),
        "{error}"
    );
    // An empty value counts as unset.
    assert!(settings(&[("STORAGE_WRITERS_MY_SINK", "")]).is_ok());
    // The real ones still apply.
    let s = settings(&[
        ("STORAGE_WRITERS_NETWORK_METRICS", "1"),
        ("STORAGE_MAX_POLL_RECORDS_APP_STATS", "7"),
    ])
    .unwrap();
    assert_eq!(s.pipelines[2].writers, 1);
    assert_eq!(s.pipelines[0].batch_size, 7);
}

#[test]
fn subset_and_prefix() {
    let s = settings(&[
        ("STORAGE_PIPELINES", " reviews ,reviews"),
        ("STORAGE_GROUP_PREFIX", "sc"),
        ("STORAGE_TOPIC_REVIEWS", "reviews-v2"),
    ])
    .unwrap();
    assert_eq!(s.pipelines.len(), 1);
    assert_eq!(s.pipelines[0].group, "sc.reviews");
    assert_eq!(s.pipelines[0].topic, "reviews-v2");
    assert!(s.pipeline(PipelineKind::AppStats).is_none());
}

#[test]
fn each_invalid_value_names_its_variable() {
    let long_prefix = "p".repeat(240);
    let cases: &[(&str, &str)] = &[
        ("STORAGE_MAX_POLL_RECORDS", "abc"),
        ("STORAGE_MAX_POLL_RECORDS", "0"),
        ("STORAGE_MAX_POLL_RECORDS", "-5"),
        ("STORAGE_MAX_POLL_RECORDS_REVIEWS", "0"),
        ("STORAGE_MAX_POLL_RECORDS_APP_STATS", "1e3"),
        ("STORAGE_MAX_POLL_RECORDS_APP_STATS", "100001"),
        ("STORAGE_WRITERS", "0"),
        ("STORAGE_WRITERS", "9"),
        ("STORAGE_WRITERS", "two"),
        ("STORAGE_WRITERS_REVIEWS", "-1"),
        ("STORAGE_PIPELINES", "reviews,payments"),
        ("STORAGE_PIPELINES", ","),
        ("DATABASE_URL", "mysql://x@y/z"),
        ("DATABASE_URL", "postgres://"),
        ("DATABASE_URL", "postgres://u@host:notaport/db"),
        ("DATABASE_URL", "postgres:///db?host="),
        ("DATABASE_URL", "postgres://u@/db?host=/run/pg"),
        ("KAFKA_BOOTSTRAP_SERVERS", "localhost"),
        ("KAFKA_BOOTSTRAP_SERVERS", "a:1,b:x"),
        ("STORAGE_AUTO_OFFSET_RESET", "beginning"),
        ("STORAGE_POLL_TIMEOUT_MS", "fast"),
        ("STORAGE_LINGER_MS", "1001"),
        ("STORAGE_LINGER_MS", "-1"),
        ("STORAGE_LINGER_MS", "20ms"),
        ("STORAGE_SESSION_TIMEOUT_MS", "0"),
        ("STORAGE_DB_RETRY_MAX_ATTEMPTS", "-1"),
        ("STORAGE_DB_RETRY_BASE_MS", "0"),
        ("STORAGE_APP_CACHE_TTL_SECONDS", "5m"),
        ("STORAGE_SHUTDOWN_TIMEOUT_SECONDS", "-30"),
        ("STORAGE_APPLICATIONS_TABLE", "apps; drop table x"),
        ("STORAGE_TOPIC_REVIEWS", "bad topic"),
        ("STORAGE_GROUP_PREFIX", "a/b"),
        ("STORAGE_GROUP_PREFIX", long_prefix.as_str()),
    ];
    for (name, value) in cases {
        assert_eq!(failing_variable(&[(name, value)]), *name, "{name}={value}");
    }
}

#[test]
fn poll_interval_must_exceed_session_timeout() {
    assert_eq!(
        failing_variable(&[("STORAGE_MAX_POLL_INTERVAL_MS", "1000")]),
        "STORAGE_MAX_POLL_INTERVAL_MS"
    );
}

#[test]
fn the_longest_group_prefix_that_fits_the_dead_letter_column_is_accepted() {
    let prefix = "p".repeat(239);
    let s = settings(&[("STORAGE_GROUP_PREFIX", prefix.as_str())]).unwrap();
    assert!(s.pipelines.iter().all(|p| p.group.len() <= 255));
}

#[test]
fn passwords_never_reach_the_message() {
    let err = settings(&[("DATABASE_URL", "postgres://u:s3cret@host:notaport/db")]).unwrap_err();
    assert!(!err.to_string().contains("s3cret"), "{err}");
    let err = settings(&[("DATABASE_URL", "postgres://u:ab/cd@host:notaport/db")]).unwrap_err();
    assert!(!err.to_string().contains("ab/cd"), "{err}");
    let err = settings(&[("DATABASE_URL", "mysql://u:p@ss@h/db")]).unwrap_err();
    assert!(!err.to_string().contains("p@ss"), "{err}");
}

#[test]
fn two_pipelines_may_not_share_a_topic() {
    let err = settings(&[("STORAGE_TOPIC_REVIEWS", "app-stats")]).unwrap_err();
    assert_eq!(err.variable(), "STORAGE_TOPIC_REVIEWS");
}

#[test]
fn retries_must_fit_in_the_poll_interval() {
    let err = settings(&[("STORAGE_DB_RETRY_MAX_ATTEMPTS", "12")]).unwrap_err();
    assert_eq!(err.variable(), "STORAGE_DB_RETRY_MAX_ATTEMPTS");
    assert!(settings(&[("STORAGE_DB_RETRY_MAX_ATTEMPTS", "8")]).is_ok());
}

#[test]
fn missing_database_url_is_named() {
    let err = StorageSettings::from_map(&BTreeMap::new()).unwrap_err();
    assert_eq!(err.variable(), "DATABASE_URL");
    assert!(err.to_string().contains("DATABASE_URL"));
}

#[test]
fn the_instance_id_defaults_to_the_host_name_and_may_be_turned_off() {
    let s = settings(&[("HOSTNAME", "worker-7.example")]).unwrap();
    assert_eq!(s.instance_id.as_deref(), Some("worker-7.example"));
    assert_eq!(
        s.group_instance_id(PipelineKind::Reviews).as_deref(),
        Some("worker-7.example-reviews")
    );
    let s = settings(&[
        ("HOSTNAME", "odd host/name"),
        ("STORAGE_PIPELINES", "reviews"),
    ]);
    assert_eq!(s.unwrap().instance_id.as_deref(), Some("odd-host-name"));
    assert_eq!(
        settings(&[]).unwrap().instance_id.as_deref(),
        Some("sluice")
    );
    let s = settings(&[("HOSTNAME", "h"), ("STORAGE_INSTANCE_ID", "a-1")]).unwrap();
    assert_eq!(s.instance_id.as_deref(), Some("a-1"));
    let s = settings(&[("STORAGE_INSTANCE_ID", "OFF")]).unwrap();
    assert_eq!(s.group_instance_id(PipelineKind::Reviews), None);
    for bad in ["a b", "x/y", &"i".repeat(234)] {
        assert_eq!(
            failing_variable(&[("STORAGE_INSTANCE_ID", bad)]),
            "STORAGE_INSTANCE_ID",
            "{bad}"
        );
    }
    assert_eq!(
        settings(&[]).unwrap().consumer_error_timeout,
        Duration::from_secs(30)
    );
    assert_eq!(
        failing_variable(&[("STORAGE_CONSUMER_ERROR_TIMEOUT_SECONDS", "0")]),
        "STORAGE_CONSUMER_ERROR_TIMEOUT_SECONDS"
    );
}

#[test]
fn kafka_client_properties_pass_through_and_guarantees_are_refused() {
    let s = settings(&[("KAFKA_SECURITY_PROTOCOL", "SSL")]).unwrap();
    assert_eq!(
        s.kafka
            .properties
            .get("security.protocol")
            .map(String::as_str),
        Some("SSL")
    );
    assert_eq!(
        failing_variable(&[("KAFKA_ENABLE_AUTO_COMMIT", "true")]),
        "KAFKA_ENABLE_AUTO_COMMIT"
    );
    let s = settings(&[("KAFKA_SASL_PASSWORD", "hunter2")]).unwrap();
    assert!(!format!("{s:?}").contains("hunter2"));
}

#[test]
fn an_alias_of_a_property_sluice_sets_is_refused_naming_the_variable_to_use() {
    // Each of these once slipped past the refused list under its other name.
    for (variable, hint) in [
        (
            "KAFKA_DELIVERY_TIMEOUT_MS",
            "set KAFKA_MESSAGE_TIMEOUT_MS instead",
        ),
        (
            "KAFKA_QUEUE_BUFFERING_MAX_MS",
            "set KAFKA_LINGER_MS instead",
        ),
        (
            "KAFKA_FETCH_MESSAGE_MAX_BYTES",
            "set KAFKA_MAX_PARTITION_FETCH_BYTES instead",
        ),
        (
            "KAFKA_COMPRESSION_CODEC",
            "set KAFKA_COMPRESSION_TYPE instead",
        ),
        (
            "KAFKA_REQUEST_REQUIRED_ACKS",
            "every in-sync replica has it (acks=all)",
        ),
        (
            "KAFKA_AUTO_COMMIT_ENABLE",
            "only after the database transaction",
        ),
    ] {
        let error = settings(&[(variable, "1")]).unwrap_err();
        assert_eq!(error.variable(), variable);
        let text = error.to_string();
        assert!(
            text.contains("librdkafka's other name for") && text.contains(hint),
            "{variable}: {text}"
        );
    }
    // The names sluice itself uses stay tunable; an alias of a property sluice never sets
    // stays free too.
    for ok in [
        "KAFKA_LINGER_MS",
        "KAFKA_MESSAGE_TIMEOUT_MS",
        "KAFKA_RETRIES",
        "KAFKA_MAX_IN_FLIGHT",
    ] {
        assert!(settings(&[(ok, "5")]).is_ok(), "{ok}");
    }
}

#[test]
fn unix_socket_and_tls_urls_are_accepted() {
    for url in [
        "postgres:///sluice?host=/var/run/postgresql",
        "postgres:///sluice?user=sluice&host=%2Frun%2Fpg&sslmode=disable",
        "postgres://u@localhost:5432/db?sslmode=verify-full&sslrootcert=/ca.crt",
    ] {
        assert!(settings(&[("DATABASE_URL", url)]).is_ok(), "{url}");
    }
}

#[test]
fn retries_may_be_disabled() {
    let s = settings(&[("STORAGE_DB_RETRY_MAX_ATTEMPTS", "0")]).unwrap();
    assert_eq!(s.db_retry.max_attempts, 0);
}

#[test]
fn the_table_lists_every_variable_the_parser_reads_and_no_other() {
    let asked = std::cell::RefCell::new(std::collections::BTreeSet::new());
    // The registry's variables are read when its URL is set.
    let map = with_database_url(&[
        ("KAFKA_SECURITY_PROTOCOL", "SSL"),
        ("SCHEMA_REGISTRY_URL", "https://registry.example"),
    ]);
    let lookup = |name: &str| {
        asked.borrow_mut().insert(name.to_owned());
        map.get(name).cloned()
    };
    StorageSettings::from_vars(&lookup, map.keys().map(String::as_str)).unwrap();
    let table = variables();
    let asked = asked.into_inner();
    for name in &asked {
        // The host name is the default of STORAGE_INSTANCE_ID, not a setting of sluice's.
        if name != "HOSTNAME" {
            assert!(
                table.iter().any(|row| row.matches(name)),
                "{name} is not in the table"
            );
        }
    }
    for row in &table {
        assert!(
            asked.iter().any(|name| row.matches(name)),
            "{} is in the table but never read",
            row.name
        );
    }
    let mut names: Vec<&str> = table.iter().map(|row| row.name.as_ref()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), table.len(), "each variable once");
}

#[test]
fn the_defaults_the_table_shows_are_the_defaults_read() {
    let defaults = |name: &str| {
        let row = variables().into_iter().find(|row| row.name == name);
        row.map(|row| row.default.into_owned()).unwrap()
    };
    let s = settings(&[]).unwrap();
    assert_eq!(
        defaults("STORAGE_POLL_TIMEOUT_MS"),
        s.poll_timeout.as_millis().to_string()
    );
    assert_eq!(defaults("STORAGE_WRITERS"), s.writers.to_string());
    assert_eq!(
        defaults("STORAGE_WRITERS_<PIPELINE>"),
        s.writers.to_string()
    );
    let batches: Vec<String> = s
        .pipelines
        .iter()
        .map(|p| p.batch_size.to_string())
        .collect();
    assert_eq!(
        defaults("STORAGE_MAX_POLL_RECORDS_<PIPELINE>"),
        batches.join("/")
    );
    assert_eq!(defaults("STORAGE_MAX_POLL_RECORDS"), batches.join("/"));
    assert_eq!(defaults("STORAGE_PIPELINES"), PipelineKind::all_names());
    assert_eq!(defaults("STORAGE_TOPIC_REVIEWS"), "reviews");
    assert_eq!(defaults("DATABASE_URL"), "(required)");
    assert!(
        variables()
            .iter()
            .any(|row| row.name == "DATABASE_URL" && row.secret)
    );
}
