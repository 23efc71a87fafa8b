//! Consistency of a mapping, checked without a database: names, keys, guard column, lists.

use std::collections::{HashMap, HashSet};

use super::model::{ConflictPolicy, Format, OnTombstone, Sink, Source};
use super::names::{is_column_name, is_table_name};
use super::problems::{MappingError, MappingProblem};
use sluice_core::settings::is_topic_name;
use sluice_core::topics::Topics;

/// Longest dead-letter kind (the `error_kind` column is VARCHAR(64)).
const MAX_KIND_CHARS: usize = 64;

/// Every problem of every sink of `file` (empty: the file is consistent).
pub fn check_sinks(file: &str, sinks: &[Sink]) -> Vec<MappingError> {
    let mut errors = Vec::new();
    let mut names = HashSet::new();
    let mut topics: HashMap<&str, &str> = HashMap::new();
    for sink in sinks {
        let mut problems = check_sink(sink);
        if !names.insert(sink.name.as_str()) {
            problems.push(MappingProblem::DuplicateName);
        }
        for topic in sink.topics.named() {
            // A named topic read twice, or covered by another sink's pattern. Two patterns
            // that overlap cannot be told apart without the cluster.
            let other = topics
                .insert(topic.as_str(), sink.name.as_str())
                .or_else(|| {
                    sinks
                        .iter()
                        .find(|s| {
                            s.name != sink.name && s.topics.is_pattern() && s.topics.covers(topic)
                        })
                        .map(|s| s.name.as_str())
                });
            if let Some(other) = other.filter(|o| *o != sink.name) {
                problems.push(MappingProblem::DuplicateTopic {
                    topic: topic.clone(),
                    other: other.to_owned(),
                });
            }
        }
        errors.extend(
            problems
                .into_iter()
                .map(|p| MappingError::invalid(file, &sink.name, p)),
        );
    }
    errors
}

/// Every problem of one sink (of a sink with routes: of each route, named by its number).
pub fn check_sink(sink: &Sink) -> Vec<MappingProblem> {
    if sink.routes.is_empty() {
        return check_table_sink(sink);
    }
    let mut problems = Vec::new();
    for (index, route) in sink.routes.iter().enumerate() {
        let label = format!("#{} (table `{}`)", index + 1, route.sink.table);
        // The whole key compared as text: only a plain key (not framed by a registry, not a
        // Connect envelope) can ever equal a constant.
        let enveloped = matches!(sink.format, Format::Debezium | Format::ConnectJson);
        if route.when.source == crate::WhenSource::Key(None)
            && (sink.key_encoding.is_registry() || enveloped)
        {
            problems.push(
                MappingProblem::BadWhen {
                    reason: "`key = \"\"` compares a plain text key; this sink's keys are \
                             framed by a schema registry or wrapped in a Connect envelope: \
                             name a field of the key (`key = \"id\"`)"
                        .into(),
                }
                .in_route(label.clone()),
            );
        }
        problems.extend(
            check_table_sink(&route.sink)
                .into_iter()
                .map(|problem| problem.in_route(label.clone())),
        );
    }
    problems
}

/// Every problem of a sink that writes by one mapping (a route's sink, or a sink without
/// routes).
fn check_table_sink(sink: &Sink) -> Vec<MappingProblem> {
    let mut problems = names(sink);
    // With `columns = "auto"` the key, its columns and what is updated are known only
    // against the table: checked again with them filled in (`auto.rs`).
    if sink.key.is_empty() && !sink.auto_columns {
        problems.push(MappingProblem::NoKey);
    }
    if sink.batch_size == 0 {
        problems.push(MappingProblem::ZeroBatchSize);
    }
    if sink.batch_bytes == 0 {
        problems.push(MappingProblem::ZeroBatchBytes);
    }
    duplicates(sink, &mut problems);
    if !sink.auto_columns {
        column_roles(sink, &mut problems);
    }
    if sink.conflict != ConflictPolicy::InsertIgnore
        && !sink.auto_columns
        && sink.updated_columns().next().is_none()
    {
        problems.push(MappingProblem::NothingToUpdate {
            policy: sink.conflict.to_string(),
        });
    }
    rule_problems(sink, &mut problems);
    template_problems(sink, &mut problems);
    problems
}

/// A table template whose placeholders the sink cannot fill: the source block of a sink
/// that does not read change events, a capture without `topic_pattern` or beyond its groups.
fn template_problems(sink: &Sink, problems: &mut Vec<MappingProblem>) {
    let Some(template) = &sink.table_template else {
        return;
    };
    let bad = |reason: String| MappingProblem::BadTableTemplate {
        table: sink.table.clone(),
        reason,
    };
    if template.reads_source() && sink.format != Format::Debezium {
        problems.push(bad(
            "`{source.schema}` and `{source.table}` need `format = \"debezium\"`".into(),
        ));
    } else if template.reads_source() && sink.on_tombstone != OnTombstone::Ignore {
        problems.push(bad(
            "a tombstone carries no source block to name its table: `{source.*}` needs \
             `on_tombstone = \"ignore\"` (the delete event before it deletes the row)"
                .into(),
        ));
    }
    let wanted = template.highest_capture();
    if wanted > 0 {
        let groups = match &sink.topics {
            Topics::Pattern(pattern) => Topics::compile(pattern)
                .map(|regex| regex.captures_len().saturating_sub(1))
                .unwrap_or(0),
            Topics::Named(_) => {
                problems.push(bad("a capture `{N}` needs `topic_pattern`".into()));
                return;
            }
        };
        if wanted > groups {
            problems.push(bad(format!(
                "`{{{wanted}}}` but `topic_pattern` has {groups} capture group(s)"
            )));
        }
    }
}

/// A column named twice in the key, `insert_only`, `never_written` or the mapped columns.
fn duplicates(sink: &Sink, problems: &mut Vec<MappingProblem>) {
    for (list, columns) in [
        ("key", &sink.key),
        ("insert_only", &sink.insert_only),
        ("never_written", &sink.never_written),
    ] {
        let mut seen = HashSet::new();
        for column in columns.iter().filter(|c| !seen.insert(c.as_str())) {
            problems.push(MappingProblem::Duplicate {
                column: column.clone(),
                list,
            });
        }
    }
    let mut seen = HashSet::new();
    for mapping in sink.columns.iter().filter(|m| !seen.insert(&m.column)) {
        problems.push(MappingProblem::Duplicate {
            column: mapping.column.clone(),
            list: "columns",
        });
    }
}

/// A column whose roles do not fit together: a key or guard column not mapped, a guard or
/// `never_written` column in the key, a `never_written` column mapped, an `insert_only`
/// column in the key or not mapped.
fn column_roles(sink: &Sink, problems: &mut Vec<MappingProblem>) {
    let is_key = |column: &str| sink.key.iter().any(|k| k == column);
    for column in &sink.key {
        if sink.mapping(column).is_none() {
            problems.push(MappingProblem::KeyNotMapped {
                column: column.clone(),
            });
        }
    }
    if let ConflictPolicy::NewestWins { column } = &sink.conflict {
        if sink.mapping(column).is_none() {
            problems.push(MappingProblem::GuardNotMapped {
                column: column.clone(),
            });
        }
        if is_key(column) {
            problems.push(MappingProblem::GuardIsKey {
                column: column.clone(),
            });
        }
    }
    for column in &sink.never_written {
        if is_key(column) {
            problems.push(MappingProblem::NeverWrittenIsKey {
                column: column.clone(),
            });
        } else if sink.mapping(column).is_some() {
            problems.push(MappingProblem::NeverWrittenIsMapped {
                column: column.clone(),
            });
        }
    }
    for column in &sink.insert_only {
        if is_key(column) || sink.mapping(column).is_none() {
            problems.push(MappingProblem::BadInsertOnly {
                column: column.clone(),
            });
        }
    }
}

/// A column's value rules that contradict each other.
fn rule_problems(sink: &Sink, problems: &mut Vec<MappingProblem>) {
    for mapping in &sink.columns {
        let rules = &mapping.rules;
        let bad = |rule: String| MappingProblem::BadRule {
            column: mapping.column.clone(),
            rule,
        };
        for (name, bound) in [("min", rules.min), ("max", rules.max)] {
            if let Some(bound) = bound.filter(|b| !b.as_f64().is_finite()) {
                problems.push(bad(format!("`{name}` {bound} is not a finite number")));
            }
        }
        if let (Some(min), Some(max)) = (rules.min, rules.max)
            && min.as_f64() > max.as_f64()
        {
            problems.push(bad(format!("`min` {min} is above `max` {max}")));
        }
        if let (Some(min), Some(max)) = (rules.min_length, rules.max_length)
            && min > max
        {
            problems.push(bad(format!(
                "`min_length` {min} is above `max_length` {max}"
            )));
        }
        if rules.items.is_some() && rules.max_items.is_some() {
            problems.push(bad("`items` and `max_items` exclude each other".into()));
        }
    }
}

/// The names of a sink: the sink, topic, group, tables, columns and dead-letter kinds.
fn names(sink: &Sink) -> Vec<MappingProblem> {
    let mut problems = Vec::new();
    let mut require = |ok: bool, what: &'static str, name: &str, rule: &'static str| {
        if !ok {
            problems.push(MappingProblem::IllegalName {
                what,
                name: name.to_owned(),
                rule,
            });
        }
    };
    const TOPIC_RULE: &str = "1–249 of letters, digits, '.', '_', '-'";
    const TABLE_RULE: &str = "[schema.]table, each name 1–63 bytes without '.' or U+0000";
    const COLUMN_RULE: &str = "1–63 bytes without U+0000, as the table has it";
    require(
        is_topic_name(&sink.name),
        "sink name",
        &sink.name,
        TOPIC_RULE,
    );
    for topic in sink.topics.named() {
        require(is_topic_name(topic), "topic", topic, TOPIC_RULE);
    }
    if let Some(group) = &sink.group {
        require(
            !group.is_empty() && group.len() <= 255,
            "group",
            group,
            "1–255 characters",
        );
    }
    if sink.table_template.is_none() {
        require(is_table_name(&sink.table), "table", &sink.table, TABLE_RULE);
    }
    let listed = sink
        .key
        .iter()
        .chain(&sink.insert_only)
        .chain(&sink.never_written);
    let mapped = sink.columns.iter().map(|m| &m.column);
    for column in listed.chain(mapped) {
        require(is_column_name(column), "column", column, COLUMN_RULE);
    }
    if let ConflictPolicy::NewestWins { column } = &sink.conflict {
        require(is_column_name(column), "column", column, COLUMN_RULE);
    }
    for mapping in &sink.columns {
        if let Source::Lookup(lookup) = &mapping.source {
            require(
                is_table_name(&lookup.table),
                "table",
                &lookup.table,
                TABLE_RULE,
            );
            require(
                is_column_name(&lookup.key_column),
                "column",
                &lookup.key_column,
                COLUMN_RULE,
            );
            require(
                is_column_name(&lookup.value_column),
                "column",
                &lookup.value_column,
                COLUMN_RULE,
            );
            require(
                is_kind(&lookup.unknown_kind),
                "dead-letter kind",
                &lookup.unknown_kind,
                "1–64 of lower-case letters, digits, '_'",
            );
        }
    }
    problems
}

fn is_kind(kind: &str) -> bool {
    !kind.is_empty()
        && kind.len() <= MAX_KIND_CHARS
        && kind
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
