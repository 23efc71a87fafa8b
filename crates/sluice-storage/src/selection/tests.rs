//! Which pipelines run with a mapping file: the file's sinks, the built-ins only when
//! `STORAGE_PIPELINES` names them, and no name or group twice.

#![allow(clippy::unwrap_used, reason = "tests")]

use super::{Selection, SelectionError, select};
use crate::settings::StorageSettings;
use sluice_sinks::{Sink, parse_sinks};
use std::collections::BTreeMap;

fn settings(vars: &[(&str, &str)]) -> StorageSettings {
    let mut map: BTreeMap<String, String> = [
        ("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
        ("DATABASE_URL", "postgres://u@127.0.0.1/db"),
        ("STORAGE_INSTANCE_ID", "host-1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for (k, v) in vars {
        map.insert((*k).to_owned(), (*v).to_owned());
    }
    StorageSettings::from_map(&map).unwrap_or_else(|e| panic!("{e}"))
}

fn sink(name: &str, group: Option<&str>) -> Sink {
    let group = group.map_or(String::new(), |g| format!("group = \"{g}\"\n"));
    let text = format!(
        "[[sink]]\nname = \"{name}\"\n{group}table = \"t\"\nkey = [\"id\"]\n\
         conflict = \"insert-ignore\"\n[sink.columns]\nid = {{ field = \"id\" }}\n"
    );
    parse_sinks("m.toml", &text)
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0)
}

fn names(selection: &Selection<'_>) -> Vec<String> {
    selection
        .names("sc")
        .into_iter()
        .map(|(name, _, group)| format!("{name}@{group}"))
        .collect()
}

#[test]
fn without_a_file_the_built_ins_run_and_with_one_only_if_named() {
    let all = settings(&[("STORAGE_GROUP_PREFIX", "sc")]);
    assert_eq!(
        names(&select(&all, false, "sc", "m.toml", &[]).unwrap()),
        [
            "app-stats@sc.app-stats",
            "reviews@sc.reviews",
            "network-metrics@sc.network-metrics"
        ]
    );
    let sinks = [sink("reviews", None), sink("app-permissions", None)];
    assert_eq!(
        names(&select(&all, false, "sc", "m.toml", &sinks).unwrap()),
        ["reviews@sc.reviews", "app-permissions@sc.app-permissions"],
        "the mapping of `reviews` runs instead of the built-in"
    );
    let named = settings(&[
        ("STORAGE_GROUP_PREFIX", "sc"),
        ("STORAGE_PIPELINES", "app-stats"),
    ]);
    let fourth = [sink("app-permissions", None)];
    assert_eq!(
        names(&select(&named, true, "sc", "m.toml", &fourth).unwrap()),
        [
            "app-stats@sc.app-stats",
            "app-permissions@sc.app-permissions"
        ]
    );
}

#[test]
fn a_name_or_a_group_used_twice_is_refused() {
    let named = settings(&[
        ("STORAGE_GROUP_PREFIX", "sc"),
        ("STORAGE_PIPELINES", "reviews"),
    ]);
    let same_name = [sink("reviews", Some("other"))];
    let error = select(&named, true, "sc", "m.toml", &same_name).unwrap_err();
    assert!(matches!(error, SelectionError::SameName { .. }), "{error}");
    assert_eq!(error.sink(), "reviews");
    assert!(error.to_string().contains("STORAGE_PIPELINES"), "{error}");

    let same_group = [sink("my-reviews", Some("sc.reviews"))];
    let error = select(&named, true, "sc", "m.toml", &same_group).unwrap_err();
    assert_eq!(
        error.to_string(),
        "sink `my-reviews` of m.toml: consumer group `sc.reviews` is the group of pipeline \
         `reviews` too; two pipelines in one group would split its partitions (set the sink's \
         `group`)"
    );
    let two_sinks = [sink("a", Some("g")), sink("b", Some("g"))];
    let error = select(&named, true, "sc", "m.toml", &two_sinks).unwrap_err();
    assert_eq!(error.sink(), "b");

    let long = "x".repeat(256);
    let error = select(&named, true, "sc", "m.toml", &[sink("ok", Some(&long))]).unwrap_err();
    assert!(
        matches!(
            error,
            SelectionError::TooLong {
                what: "consumer group",
                ..
            }
        ),
        "{error}"
    );
}
