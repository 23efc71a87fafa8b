//! The migrations' copy of the state machine must equal the core's: these tests read the
//! migration files as text and compare the status list, the initial statuses and the edge
//! table, each from the newest migration that (re)defines it, with `crate::status`.
//! (`tests/outbox.rs` also tries every pair against the trigger of a migrated database.)
//! The migrations are the ones the build discovered, so a new file needs no list here.

use crate::status::{EDGES, OutboxStatus};
use sluice_postgres::migrate::MIGRATIONS;
use std::collections::BTreeSet;

/// The migration that creates the outbox table (the first edge block is in it).
fn outbox_migration() -> &'static str {
    MIGRATIONS
        .iter()
        .find(|m| m.sql.contains("CREATE TABLE outbox_events ("))
        .expect("a migration creating outbox_events")
        .sql
}

/// Every migration, oldest first, as the build discovered them
/// (`sluice_postgres::migrate::MIGRATIONS`): applied files are never edited, so a changed
/// edge table or status list arrives as a new file, seen here without a list to update.
fn migrations() -> impl DoubleEndedIterator<Item = &'static str> {
    MIGRATIONS.iter().map(|m| m.sql)
}

/// The newest migration with an edge block: the transition check the database runs (a
/// trigger function's CASE up to 0011, the trigger's WHEN condition from 0012 on).
fn newest_edges_migration() -> &'static str {
    migrations()
        .rev()
        .find(|m| m.contains("-- edges:begin"))
        .expect("a migration with an edge block")
}

/// The single-quoted words of a line, before any `--` comment.
fn quoted(line: &str) -> Vec<OutboxStatus> {
    let code = line.split("--").next().unwrap_or_default();
    code.split('\'')
        .skip(1)
        .step_by(2)
        .map(|word| OutboxStatus::parse(word).unwrap_or_else(|e| panic!("{e} in {line:?}")))
        .collect()
}

/// The one line carrying `marker` as its trailing comment, in the newest migration that has
/// one.
fn marked_line(marker: &str) -> &'static str {
    let lines: Vec<&str> = migrations()
        .rev()
        .map(|m| {
            m.lines()
                .filter(|l| l.trim_end().ends_with(marker))
                .collect::<Vec<_>>()
        })
        .find(|lines| !lines.is_empty())
        .unwrap_or_default();
    assert_eq!(lines.len(), 1, "exactly one line marked {marker:?}");
    lines[0]
}

#[test]
fn status_check_lists_every_status() {
    let listed = quoted(marked_line("-- statuses"));
    assert_eq!(listed, OutboxStatus::ALL.to_vec());
}

#[test]
fn insert_trigger_accepts_exactly_the_initial_statuses() {
    let listed: BTreeSet<_> = quoted(marked_line("-- initial statuses"))
        .into_iter()
        .collect();
    assert_eq!(listed, OutboxStatus::INITIAL.into_iter().collect());
}

#[test]
fn trigger_edges_equal_the_core_edges() {
    let migration = newest_edges_migration();
    assert!(
        migration.contains("CREATE OR REPLACE FUNCTION outbox_events_before_update()")
            || migration.contains("CREATE TRIGGER outbox_events_status_transition")
            || std::ptr::eq(migration, outbox_migration()),
        "the newest edge block replaces the transition check"
    );
    let begin = migration
        .find("-- edges:begin")
        .expect("edges:begin marker");
    let end = migration.find("-- edges:end").expect("edges:end marker");
    let mut edges = BTreeSet::new();
    let mut sources = BTreeSet::new();
    for line in migration[begin..end].lines().skip(1) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        assert!(
            line.starts_with("WHEN '") && line.contains("THEN NEW.status IN ("),
            "unexpected line in the edge block: {line:?}"
        );
        let statuses = quoted(line);
        let (from, targets) = statuses.split_first().expect("a source status");
        assert!(sources.insert(*from), "{from} listed twice");
        assert!(!targets.is_empty(), "{from} has an empty target list");
        for &to in targets {
            assert!(edges.insert((*from, to)), "{from} -> {to} listed twice");
        }
    }
    assert_eq!(edges, EDGES.into_iter().collect::<BTreeSet<_>>());
    // The block ends with `ELSE false`: every other source is terminal.
    assert!(
        migration[end..]
            .lines()
            .nth(1)
            .is_some_and(|l| l.trim() == "ELSE false")
    );
}
