//! `sluice dlq list|show|replay`: inspect dead letters and re-publish them after a fix.
//!
//! `replay` is a dry run unless `--execute`. For each chosen row it marks the row replayed
//! with a compare-and-set (`replay_count < --max-replays`) inside a transaction, publishes
//! the original key, payload and headers (in order) to the original topic with a
//! `sluice-replay-count` header in place of the record's own, waits for the broker's acknowledgement, and only then commits the mark. A record that
//! fails again is dead-lettered with the carried-over count, so it cannot loop forever.
//! It takes the oldest rows first (`--limit` of them) and re-publishes them in the order their
//! records had, so a key's changes land in their order.
//!
//! Keys, payloads, headers and reasons hold bytes from the message: printed escaped (see
//! `cmd::dead_letters`), so printing a dead letter cannot drive the terminal.

use super::dead_letters::{
    Payload, ReplayReport, print_headers, print_json, print_key_and_payload, would_republish,
};
use anyhow::{Context, anyhow};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use serde::Serialize;
use sluice_core::DeadLetterKind;
use sluice_core::topics::Topics;
use sluice_core::untrusted::escape_controls;
use sluice_kafka::ResilientProducer;
use sluice_postgres::ops::{
    DeadLetterFilter, DeadLetterRow, count_dead_letters, list_dead_letters,
};
use sluice_process::Failure;
use sluice_storage::StorageSettings;
use sluice_storage::dead_letter_replay::{
    DEFAULT_MAX_REPLAYS, Replayed, in_record_order, is_truncated, refusal, replay_one,
};
use sqlx::PgConnection;

/// Dead-letter actions.
#[derive(Debug, Subcommand)]
pub enum DlqAction {
    /// List dead letters, newest first.
    List(FilterArgs),
    /// Show one dead letter with its headers and payload (text, or hex for invalid UTF-8).
    Show {
        /// The row id.
        id: i64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Re-publish chosen dead letters to their original topic (dry run without --execute).
    Replay(ReplayArgs),
}

/// Filters shared by `list` and `replay`.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// Only this pipeline's topic (a seed, or a sink of the mapping file).
    #[arg(long)]
    pipeline: Option<String>,
    /// The mapping file (or folder) of declared sinks; default `SLUICE_SINKS_FILE`.
    #[arg(long = "sinks", value_name = "FILE|DIR")]
    sinks: Option<String>,
    /// Only this error kind: decode_error, unknown_application, constraint_violation, or a
    /// kind a mapping file names for its lookups.
    #[arg(long, value_parser = parse_kind)]
    kind: Option<String>,
    /// Only the dead letters of records going to this table, as the sink names it
    /// (`[schema.]table`): e.g. a table's `unknown_table` dead letters once it is created.
    #[arg(long, value_name = "NAME")]
    table: Option<String>,
    /// Recorded at or after this RFC 3339 time.
    #[arg(long)]
    since: Option<DateTime<Utc>>,
    /// Recorded before this RFC 3339 time.
    #[arg(long)]
    until: Option<DateTime<Utc>>,
    /// Only these row ids (repeat or comma-separate).
    #[arg(long = "id", value_delimiter = ',')]
    ids: Vec<i64>,
    /// At most this many rows.
    #[arg(long, default_value_t = 100)]
    limit: i64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `dlq replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    filter: FilterArgs,
    /// Refuse rows already replayed this many times.
    #[arg(long, default_value_t = DEFAULT_MAX_REPLAYS)]
    max_replays: i32,
    /// Publish and mark (without it, only print what would be replayed).
    #[arg(long)]
    execute: bool,
}

fn parse_kind(s: &str) -> Result<String, String> {
    let named = !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if DeadLetterKind::parse(s).is_some() || named {
        Ok(s.to_owned())
    } else {
        Err(
            "expected decode_error, unknown_application, constraint_violation or a mapping's \
             kind (1-64 of a-z, 0-9, _)"
                .to_owned(),
        )
    }
}

/// A dead letter as printed.
#[derive(Debug, Serialize)]
struct Shown {
    id: i64,
    topic: String,
    partition: i32,
    kafka_offset: i64,
    consumer_group: String,
    /// The table the record was going to; `null` when none was chosen (or recorded before
    /// sluice kept it).
    table: Option<String>,
    error_kind: String,
    reason: String,
    recorded_at: DateTime<Utc>,
    kafka_timestamp: Option<DateTime<Utc>>,
    replay_count: i32,
    replayed_at: Option<DateTime<Utc>>,
    payload_size: i32,
    truncated: bool,
    /// The record's headers in order: name, and value as text or hex (`null`: no value);
    /// `null` when they were not kept (a dead letter recorded before migration 0015).
    headers: Option<Vec<(String, Option<Payload>)>>,
    key: Option<Payload>,
    payload: Option<Payload>,
}

fn shown(row: &DeadLetterRow) -> Shown {
    Shown {
        id: row.id,
        topic: row.topic.clone(),
        partition: row.partition,
        kafka_offset: row.kafka_offset,
        consumer_group: row.consumer_group.clone(),
        table: row.target_table.clone(),
        error_kind: row.error_kind.clone(),
        reason: row.reason.clone(),
        recorded_at: row.recorded_at,
        kafka_timestamp: row.kafka_timestamp,
        replay_count: row.replay_count,
        replayed_at: row.replayed_at,
        payload_size: row.payload_size,
        truncated: is_truncated(row),
        headers: row.headers_kept().then(|| {
            row.headers()
                .map(|(name, value)| (name.to_owned(), value.map(Payload::of)))
                .collect()
        }),
        key: row.key.as_deref().map(Payload::of),
        payload: row.payload.as_deref().map(Payload::of),
    }
}

fn filter(args: &FilterArgs) -> Result<DeadLetterFilter, Failure> {
    let (topics, groups) = match &args.pipeline {
        Some(name) => {
            let pipelines = super::pipelines::Pipelines::load(args.sinks.as_deref())?;
            let (topics, group) = pipelines
                .names()?
                .into_iter()
                .find(|(n, ..)| n == name)
                .map(|(_, topics, group)| (topics, group))
                .ok_or_else(|| {
                    Failure::config(anyhow!(
                        "pipeline `{name}` does not run in this environment (STORAGE_PIPELINES \
                         and the mapping file)"
                    ))
                })?;
            match topics {
                Topics::Named(topics) => (topics, Vec::new()),
                Topics::Pattern(_) => (Vec::new(), vec![group]),
            }
        }
        None => (Vec::new(), Vec::new()),
    };
    Ok(DeadLetterFilter {
        topics,
        groups,
        kind: args.kind.clone(),
        table: args.table.clone(),
        since: args.since,
        until: args.until,
        ids: args.ids.clone(),
        limit: args.limit.max(1),
        oldest_first: false,
        replayable_under: None,
        unreplayable_under: None,
    })
}

async fn connect(settings: &StorageSettings) -> Result<PgConnection, Failure> {
    Ok(sluice_postgres::connect(&settings.database_url, "dlq")
        .await
        .context("cannot connect to DATABASE_URL")?)
}

/// Entry point.
pub fn run(action: DlqAction) -> Result<(), Failure> {
    let settings = super::settings()?;
    sluice_process::runtime()?.block_on(async {
        let mut conn = connect(&settings).await?;
        match action {
            DlqAction::List(args) => list(&mut conn, &filter(&args)?, args.json).await,
            DlqAction::Show { id, json } => show(&mut conn, id, json).await,
            DlqAction::Replay(args) => replay(&settings, &mut conn, &args).await,
        }
    })
}

async fn list(
    conn: &mut PgConnection,
    filter: &DeadLetterFilter,
    json: bool,
) -> Result<(), Failure> {
    let rows = list_dead_letters(conn, filter).await?;
    let reached = limit_reached(rows.len(), filter.limit);
    if json {
        let shown: Vec<Shown> = rows.iter().map(shown).collect();
        print_json(&shown)?;
        if let Some(note) = reached {
            eprintln!("{note}");
        }
        return Ok(());
    }
    println!(
        "{:>8}  {:<20} {:<28} {:<20} {:<21} {:>7}  reason",
        "id", "recorded_at", "record", "table", "kind", "replays"
    );
    for row in &rows {
        let record = format!("{}[{}]@{}", row.topic, row.partition, row.kafka_offset);
        let reason: String = row.reason.chars().take(100).collect();
        println!(
            "{:>8}  {:<20} {:<28} {:<20} {:<21} {:>7}  {}",
            row.id,
            row.recorded_at.format("%Y-%m-%d %H:%M:%S"),
            escape_controls(&record),
            row.target_table
                .as_deref()
                .map_or("-".into(), escape_controls),
            escape_controls(&row.error_kind),
            row.replay_count,
            escape_controls(&reason)
        );
    }
    println!("{} row(s)", rows.len());
    if let Some(note) = reached {
        eprintln!("{note}");
    }
    Ok(())
}

async fn show(conn: &mut PgConnection, id: i64, json: bool) -> Result<(), Failure> {
    let filter = DeadLetterFilter {
        ids: vec![id],
        limit: 1,
        ..DeadLetterFilter::default()
    };
    let row = list_dead_letters(conn, &filter)
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("no dead letter with id {id}"))?;
    let s = shown(&row);
    if json {
        print_json(&s)?;
        return Ok(());
    }
    println!("id:           {}", s.id);
    println!(
        "record:       {}[{}]@{} (group {})",
        escape_controls(&s.topic),
        s.partition,
        s.kafka_offset,
        escape_controls(&s.consumer_group)
    );
    println!(
        "table:        {}",
        s.table
            .as_deref()
            .map_or("- (none chosen)".into(), escape_controls)
    );
    println!("kind:         {}", escape_controls(&s.error_kind));
    println!("reason:       {}", escape_controls(&s.reason));
    println!("recorded at:  {}", s.recorded_at.to_rfc3339());
    println!("replays:      {}", s.replay_count);
    println!(
        "payload size: {} bytes{}",
        s.payload_size,
        if s.truncated {
            " (stored truncated)"
        } else {
            ""
        }
    );
    match &s.headers {
        Some(headers) => print_headers(headers),
        None => {
            println!("headers: (not kept: recorded before sluice kept a dead letter's headers)")
        }
    }
    print_key_and_payload(s.key.as_ref(), s.payload.as_ref());
    Ok(())
}

#[derive(Debug, Serialize)]
struct ReplayLine {
    id: i64,
    record: String,
    action: String,
}

async fn replay(
    settings: &StorageSettings,
    conn: &mut PgConnection,
    args: &ReplayArgs,
) -> Result<(), Failure> {
    // The oldest rows first, re-published in their records' order: a key's changes land in
    // the order they had (docs/operations.md). Rows a replay must refuse are left out, unless
    // named by `--id`, where the refusal says why: taken oldest first, they would fill
    // `--limit` on every run. Those replayed already (a copy that failed again is a row of
    // its own) are done; the others (tombstones, truncated payloads, at the replay limit) are
    // counted.
    let by_id = !args.filter.ids.is_empty();
    let chosen = DeadLetterFilter {
        oldest_first: true,
        replayable_under: (!by_id).then_some(args.max_replays),
        ..filter(&args.filter)?
    };
    let left_out = if by_id {
        0
    } else {
        left_out(conn, &chosen, args.max_replays).await?
    };
    let mut rows = list_dead_letters(conn, &chosen).await?;
    let reached = limit_reached(rows.len(), chosen.limit);
    in_record_order(&mut rows);
    let producer = if args.execute {
        Some(ResilientProducer::new(
            &settings.kafka,
            "sluice-dlq-replay",
        )?)
    } else {
        None
    };
    let mut report = ReplayReport::with_capacity(rows.len());
    for row in &rows {
        let record = format!("{}[{}]@{}", row.topic, row.partition, row.kafka_offset);
        let action = match (refusal(row, args.max_replays), &producer) {
            (Some(why), _) => report.refuse(&why),
            (None, None) => would_republish(&row.topic, row.replay_count + 1),
            (None, Some(producer)) => {
                match replay_one(conn, producer, row, args.max_replays).await? {
                    Replayed::RefusedConcurrently => {
                        report.refuse("replay limit reached concurrently")
                    }
                    Replayed::Published { partition, offset } => {
                        format!("re-published to {}[{}]@{}", row.topic, partition, offset)
                    }
                }
            }
        };
        report.lines.push(ReplayLine {
            id: row.id,
            record,
            action,
        });
    }
    report.print(
        args.filter.json,
        args.execute,
        |line| {
            format!(
                "{:>8}  {:<28} {}",
                line.id,
                escape_controls(&line.record),
                escape_controls(&line.action)
            )
        },
        Some("no dead letter to replay matches"),
        "dead letter",
    )?;
    if let Some(note) = reached {
        eprintln!("{note}");
    }
    left_out_note(left_out, args.max_replays, rows.is_empty())
}

/// How many rows of `chosen`'s filter, never replayed, a replay under `max_replays` must
/// refuse (tombstones, truncated payloads, lineages at the limit).
async fn left_out(
    conn: &mut PgConnection,
    chosen: &DeadLetterFilter,
    max_replays: i32,
) -> Result<i64, Failure> {
    let refused = DeadLetterFilter {
        replayable_under: None,
        unreplayable_under: Some(max_replays),
        ..chosen.clone()
    };
    Ok(count_dead_letters(conn, &refused).await?)
}

/// The note on the rows a replay left out: an error when it took none.
fn left_out_note(left_out: i64, max_replays: i32, took_none: bool) -> Result<(), Failure> {
    if left_out == 0 {
        return Ok(());
    }
    let note = format!(
        "{left_out} dead letter(s) matching the filter, never replayed, cannot be replayed \
         (tombstones, truncated payloads, or at --max-replays {max_replays}): `dlq list` shows \
         them, and `--id` says why for each"
    );
    if took_none {
        return Err(anyhow!("none of the matching dead letters can be replayed: {note}").into());
    }
    eprintln!("note: {note}");
    Ok(())
}

/// The note for a listing or replay that took `--limit` rows: more may match.
fn limit_reached(taken: usize, limit: i64) -> Option<String> {
    (i64::try_from(taken).unwrap_or(i64::MAX) >= limit).then(|| {
        format!(
            "note: --limit {limit} reached: more dead letters may match (raise --limit, narrow \
             the filter, or run it again)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::limit_reached;

    #[test]
    fn a_listing_that_took_its_limit_says_more_may_match() {
        assert!(limit_reached(100, 100).is_some_and(|n| n.contains("--limit 100 reached")));
        assert_eq!(limit_reached(99, 100), None);
        assert_eq!(limit_reached(0, 1), None);
    }
}
