//! `sluice sinks validate --sample N`: the last N records of each topic a sink reads, decoded
//! as the running sink would decode them — how many become rows (of which table, for a sink of
//! many tables: each record routed and its table planned against the catalog as `sluice run`
//! would), which would be dead letters and why, and which record fields no column reads. It
//! reads Kafka, the schema registry and the catalog only: nothing is consumed in a group,
//! committed or written.

use anyhow::anyhow;
use serde::Serialize;
use sluice_kafka::{Admin, Record};
use sluice_process::Failure;
use sluice_retry::read::{Range, read_ranges};
use sluice_sinks::Format;
use sluice_sinks::messages::DecodeError;
use sluice_storage::Pipeline;
use sluice_storage::sink::{Declared, Route, Tables};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// How long reading one topic's sample may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The most records a sample reads per topic.
pub(super) const MAX_SAMPLE: usize = 10_000;
/// How many reasons and ignored fields are listed per sink.
const LISTED: usize = 10;

/// What a sample of one sink's records came to.
#[derive(Debug, Serialize)]
pub(super) struct Sample {
    sink: String,
    table: String,
    topics: Vec<String>,
    records: usize,
    rows: usize,
    /// Rows by table (a sink of many tables).
    tables: Vec<(String, usize)>,
    /// Records a sink of many tables skips (tombstones naming no table, unrouted records
    /// with `unrouted = "ignore"`).
    skipped: usize,
    dead_letters: usize,
    /// Each reason a record would be dead-lettered, how often, and the first record's
    /// coordinates.
    reasons: Vec<Reason>,
    /// Record fields no column reads, and in how many records (JSON values only).
    ignored_fields: Vec<(String, usize)>,
    /// What the sample could not show.
    notes: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Reason {
    reason: String,
    count: usize,
    first: String,
}

/// The last `n` records of each of `pipeline`'s topics, decoded by it.
pub(super) fn sample(
    pipeline: &Pipeline,
    n: usize,
    settings: &sluice_storage::StorageSettings,
) -> Result<Sample, Failure> {
    let tables = pipeline
        .tables(settings.app_cache_ttl, settings.registry.as_ref())
        .map_err(|e| Failure::config(anyhow!("{e}")))?;
    let mut planner = Planner::default();
    let admin = Admin::new(&settings.kafka, Duration::from_secs(15))?;
    let topics = admin.topics_of(&pipeline.sink.topics)?;
    let mut records = Vec::new();
    for topic in &topics {
        records.extend(last_records(&admin, settings, topic, n)?);
    }
    let mut sample = Sample {
        sink: pipeline.sink.name.clone(),
        table: pipeline.plan.table.clone(),
        topics,
        records: records.len(),
        rows: 0,
        tables: Vec::new(),
        skipped: 0,
        dead_letters: 0,
        reasons: Vec::new(),
        ignored_fields: Vec::new(),
        notes: Vec::new(),
    };
    let mut reasons: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let mut by_table: BTreeMap<String, usize> = BTreeMap::new();
    let mut sinks: Vec<(&Record, Arc<Declared>)> = Vec::new();
    for record in &records {
        let routed = match routed(&tables, record, &mut planner)? {
            Routed::Sink(sink) => decoded(&sink, record)?.map(|()| sink),
            Routed::Skipped => {
                sample.skipped += 1;
                continue;
            }
            Routed::Rejected(reason) => Err(reason),
        };
        match routed {
            Ok(sink) => {
                sample.rows += 1;
                *by_table.entry(sink.plan().table.clone()).or_default() += 1;
                sinks.push((record, sink));
            }
            Err(reason) => {
                sample.dead_letters += 1;
                let entry = reasons.entry(reason).or_insert_with(|| {
                    (
                        0,
                        format!("{}[{}]@{}", record.topic, record.partition, record.offset),
                    )
                });
                entry.0 += 1;
            }
        }
    }
    sample.reasons = most_frequent(reasons);
    sample
        .notes
        .extend(unlisted(&sample.reasons, sample.dead_letters));
    if pipeline.sink.many_tables() {
        sample.tables = by_table.into_iter().collect();
    }
    sample.ignored_fields = ignored_fields(&pipeline.sink, &sinks);
    if sinks.iter().any(|(_, sink)| sink.has_lookups()) {
        sample.notes.push(
            "lookups are not resolved in a sample (an unknown key is found only when written)"
                .into(),
        );
    }
    if pipeline.sink.value_encoding.is_registry() {
        sample
            .notes
            .push("record fields with no column are counted for JSON values only".into());
    }
    Ok(sample)
}

/// What the listed reasons leave out of `dead_letters`, if anything.
fn unlisted(listed: &[Reason], dead_letters: usize) -> Option<String> {
    let shown: usize = listed.iter().map(|r| r.count).sum();
    (shown < dead_letters).then(|| {
        format!(
            "{} more dead letter(s) for reasons not listed (the {LISTED} most frequent are)",
            dead_letters - shown
        )
    })
}

/// The reasons, most frequent first, at most [`LISTED`].
fn most_frequent(reasons: BTreeMap<String, (usize, String)>) -> Vec<Reason> {
    let mut reasons: Vec<Reason> = reasons
        .into_iter()
        .map(|(reason, (count, first))| Reason {
            reason,
            count,
            first,
        })
        .collect();
    reasons.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
    reasons.truncate(LISTED);
    reasons
}

/// The last `n` records of `topic` (about `n / partitions` of each partition, at most `n`).
fn last_records(
    admin: &Admin,
    settings: &sluice_storage::StorageSettings,
    topic: &str,
    n: usize,
) -> Result<Vec<Record>, Failure> {
    let partitions = admin.watermarks(topic)?;
    let count = i64::try_from(partitions.len().max(1)).unwrap_or(1);
    let wanted = i64::try_from(n).unwrap_or(i64::MAX);
    let per = (wanted + count - 1) / count;
    let ranges: Vec<Range> = partitions
        .iter()
        .map(|p| Range {
            partition: p.partition,
            from: (p.high - per).max(p.low),
            to: p.high,
        })
        .collect();
    let limit = usize::try_from(per).unwrap_or(usize::MAX);
    let read = read_ranges(&settings.kafka, topic, &ranges, limit, READ_TIMEOUT)
        .map_err(|e| anyhow!("reading the sample of topic `{topic}`: {e}"))?;
    let mut records: Vec<Record> = read
        .into_iter()
        .map(|r| Record {
            topic: r.topic,
            partition: r.partition,
            offset: r.offset,
            key: r.key,
            payload: r.payload,
            timestamp_ms: r.timestamp_ms,
            replay_count: 0,
            headers: r.headers,
        })
        .collect();
    // The newest `n` across partitions.
    records.sort_by_key(|r| std::cmp::Reverse(r.timestamp_ms));
    records.truncate(n);
    Ok(records)
}

/// Where a sampled record goes.
enum Routed {
    Sink(Arc<Declared>),
    Skipped,
    Rejected(String),
}

/// A connection to the catalog, opened when a sink of many tables first meets a table.
#[derive(Default)]
struct Planner {
    open: Option<(tokio::runtime::Runtime, sqlx::PgConnection)>,
}

impl Planner {
    /// Plans `table` of `tables` on the catalog, as a running sink does when a record first
    /// names it.
    fn plan(
        &mut self,
        tables: &Tables,
        table: sluice_storage::sink::PendingTable,
    ) -> Result<(), Failure> {
        if self.open.is_none() {
            let url = sluice_process::env_lookup("DATABASE_URL")
                .filter(|u| !u.is_empty())
                .ok_or_else(|| Failure::config(anyhow!("DATABASE_URL is required")))?;
            let runtime = sluice_process::runtime()?;
            let conn = runtime
                .block_on(sluice_postgres::connect(&url, "sinks-validate"))
                .map_err(|e| anyhow!("cannot connect to the database: {e}"))?;
            self.open = Some((runtime, conn));
        }
        let Some((runtime, conn)) = self.open.as_mut() else {
            return Ok(());
        };
        runtime
            .block_on(tables.plan(conn, std::slice::from_ref(&table)))
            .map_err(|e| anyhow!("cannot read the catalog: {e}").into())
    }
}

/// The sink `record` goes to (its table planned, the writer's schema its route reads
/// fetched), or why it goes nowhere.
fn routed(tables: &Tables, record: &Record, planner: &mut Planner) -> Result<Routed, Failure> {
    // A table is planned, or a schema fetched, at most once per record: the next route is
    // final (a table that cannot be planned is remembered as missing).
    for _ in 0..3 {
        match tables.route(record) {
            Route::To(sink) => return Ok(Routed::Sink(sink)),
            Route::Ignore => return Ok(Routed::Skipped),
            Route::Unknown(_, reason) | Route::Unrouted(reason) | Route::Undecodable(reason) => {
                return Ok(Routed::Rejected(reason));
            }
            Route::Plan(table) => planner.plan(tables, table)?,
            Route::Schema(id) => tables
                .fetch_schemas(&[id])
                .map_err(|e| anyhow!("the schema registry: {e}"))?,
        }
    }
    Ok(Routed::Rejected(
        "its table could not be planned (see the log)".into(),
    ))
}

/// A record decoded by the sink: `Ok(Ok(()))` a row (or a delete), `Ok(Err(reason))` a dead
/// letter's reason; writers' schemas it needs are fetched first.
fn decoded(sink: &Declared, record: &Record) -> Result<Result<(), String>, Failure> {
    match sink.decode(record) {
        Ok(_) => Ok(Ok(())),
        Err(DecodeError::SchemaPending { schema_id }) => {
            sink.fetch_schemas(&[schema_id])
                .map_err(|e| anyhow!("the schema registry: {e}"))?;
            Ok(sink.decode(record).map(|_| ()).map_err(|e| e.to_string()))
        }
        Err(error) => Ok(Err(error.to_string())),
    }
}

/// The top-level fields of JSON record values (a change event's row image) that no column
/// reads, by how many records have them.
fn ignored_fields(
    declared: &sluice_sinks::Sink,
    records: &[(&Record, Arc<Declared>)],
) -> Vec<(String, usize)> {
    if declared.value_encoding.is_registry() {
        return Vec::new();
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (record, sink) in records {
        let read: HashSet<&str> = sink.fields_read().iter().map(String::as_str).collect();
        let Some(value) = record
            .payload
            .as_deref()
            .and_then(|p| serde_json::from_slice::<serde_json::Value>(p).ok())
        else {
            continue;
        };
        let object = match declared.format {
            Format::Debezium => {
                let payload = value.get("payload").unwrap_or(&value);
                payload
                    .get("after")
                    .filter(|a| a.is_object())
                    .or_else(|| payload.get("before"))
                    .cloned()
            }
            Format::ConnectJson => value.get("payload").cloned(),
            _ => Some(value),
        };
        let Some(serde_json::Value::Object(fields)) = object else {
            continue;
        };
        for name in fields.keys().filter(|k| !read.contains(k.as_str())) {
            *counts.entry(name.clone()).or_default() += 1;
        }
    }
    let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts.truncate(LISTED);
    counts
}

/// The sample as lines of text.
pub(super) fn print(sample: &Sample) {
    println!(
        "\nsample of sink {}: {} record(s) of {} → table {}",
        sample.sink,
        sample.records,
        sample.topics.join(", "),
        sample.table
    );
    println!(
        "  {} would be rows, {} dead letters",
        sample.rows, sample.dead_letters
    );
    for (table, rows) in &sample.tables {
        println!("    {rows} row(s) → table {table}");
    }
    if sample.skipped > 0 {
        println!("  {} skipped", sample.skipped);
    }
    for reason in &sample.reasons {
        println!(
            "    {} × {} (first: {})",
            reason.count, reason.reason, reason.first
        );
    }
    if !sample.ignored_fields.is_empty() {
        let fields: Vec<String> = sample
            .ignored_fields
            .iter()
            .map(|(name, count)| format!("{name} ({count})"))
            .collect();
        println!("  record fields no column reads: {}", fields.join(", "));
    }
    for note in &sample.notes {
        println!("  note: {note}");
    }
}

#[cfg(test)]
mod tests {
    use super::{LISTED, most_frequent, unlisted};
    use std::collections::BTreeMap;

    #[test]
    fn reasons_past_the_listed_ones_are_counted_in_a_note() {
        let reasons: BTreeMap<String, (usize, String)> = (0..15)
            .map(|i| {
                (
                    format!("reason {i:02}"),
                    (1 + usize::from(i == 3), format!("t[0]@{i}")),
                )
            })
            .collect();
        let listed = most_frequent(reasons);
        assert_eq!(listed.len(), LISTED);
        assert_eq!(listed[0].reason, "reason 03", "the most frequent first");
        assert_eq!(
            unlisted(&listed, 16).as_deref(),
            Some("5 more dead letter(s) for reasons not listed (the 10 most frequent are)")
        );
        assert_eq!(unlisted(&listed[..2], 3), None);
    }
}
