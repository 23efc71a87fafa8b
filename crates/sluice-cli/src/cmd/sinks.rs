//! `sluice sinks validate`: a mapping file of declared sinks checked against the live schema,
//! and the plan of each sink printed — its statement and each column's source and checks.
//!
//! It reads the catalog only (with `--sample N`, the last N records of each topic too,
//! decoded as the sink would: `sample.rs`): it never joins a consumer group and never writes. Exit 0 when every
//! sink is valid, 2 naming the sink, the column and the reason of each error.

use super::pipelines::{SINKS_FILE_VAR, group_prefix, plan_sinks, read_sinks};
use super::sample;
use anyhow::{Context, anyhow};
use clap::{Args, Subcommand};
use serde::Serialize;
use sluice_core::untrusted::redact_url;
use sluice_process::Failure;
use sluice_sinks::{MappingError, SinkPlan};

/// Subcommands of `sluice sinks`.
#[derive(Debug, Subcommand)]
pub enum SinksAction {
    /// Check a mapping file against the database's schema and print each sink's plan.
    Validate(ValidateArgs),
}

/// Options of `sluice sinks validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The mapping file (default: `--sinks`, then `SLUICE_SINKS_FILE`).
    file: Option<String>,
    /// The mapping file, as `sluice run` will take it.
    #[arg(long = "sinks", value_name = "FILE")]
    sinks: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also decode the last N records of each topic (1–10000) as the sink would: the rows,
    /// the dead letters and why, the record fields no column reads. Reads Kafka (and the
    /// schema registry) with the `KAFKA_*` settings; nothing is consumed in a group or written.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=sample::MAX_SAMPLE as i64))]
    sample: Option<u32>,
}

/// One error of a file, for `--json`.
#[derive(Debug, Serialize)]
struct ErrorLine {
    sink: Option<String>,
    column: Option<String>,
    reason: String,
}

/// Entry point.
pub fn run(action: SinksAction) -> Result<(), Failure> {
    match action {
        SinksAction::Validate(args) => validate(&args),
    }
}

fn validate(args: &ValidateArgs) -> Result<(), Failure> {
    let file = mapping_file(args)?;
    let sinks = read_sinks(&file)
        .map_err(|errors| invalid(args, &file, errors.iter().map(mapping_line).collect()))?;
    let url = sluice_process::env_lookup("DATABASE_URL")
        .filter(|u| !u.is_empty())
        .ok_or_else(|| Failure::config(anyhow!("DATABASE_URL is required")))?;
    let planned = sluice_process::runtime()?.block_on(async {
        let mut conn = sluice_postgres::connect(&url, "sinks-validate")
            .await
            .with_context(|| format!("cannot connect to {}", redact_url(&url)))?;
        // Planned, and every generated statement prepared against the live schema.
        plan_sinks(&mut conn, &sinks, &group_prefix()).await
    })?;
    let pipelines = planned.map_err(|errors| {
        let lines = errors
            .iter()
            .map(|e| ErrorLine {
                sink: Some(e.sink().to_owned()),
                column: e.column().map(str::to_owned),
                reason: e.to_string(),
            })
            .collect();
        invalid(args, &file, lines)
    })?;
    let subjects = registry_subjects(args, &file, &sinks)?;
    let samples = match args.sample {
        Some(n) => {
            let settings = super::settings()?;
            let n = usize::try_from(n).unwrap_or(sample::MAX_SAMPLE);
            pipelines
                .iter()
                .map(|pipeline| sample::sample(pipeline, n, &settings))
                .collect::<Result<Vec<_>, _>>()?
        }
        None => Vec::new(),
    };
    let plans: Vec<&SinkPlan> = pipelines.iter().map(|p| &p.plan).collect();
    if args.json {
        let subjects: Vec<String> = subjects.iter().map(ToString::to_string).collect();
        let routes: Vec<serde_json::Value> = pipelines
            .iter()
            .flat_map(|p| {
                p.routes.iter().map(|r| {
                    serde_json::json!({"sink": p.name(), "when": r.when, "table": r.table,
                        "plan": r.plan})
                })
            })
            .collect();
        let out = serde_json::json!({"file": file, "valid": true, "sinks": plans,
            "routes": routes, "subjects": subjects, "samples": samples});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{file}: {} sink(s) valid", plans.len());
        for pipeline in &pipelines {
            print_plan(&pipeline.plan);
            print_routes(pipeline);
        }
        for check in &subjects {
            println!("{check}");
        }
        for sample in &samples {
            sample::print(sample);
        }
    }
    Ok(())
}

/// The sinks reading a registry format checked against their subjects' latest versions
/// (`SCHEMA_REGISTRY_URL` and the rest from the environment).
fn registry_subjects(
    args: &ValidateArgs,
    file: &str,
    sinks: &[sluice_sinks::Sink],
) -> Result<Vec<sluice_storage::subjects::SubjectCheck>, Failure> {
    let sinks: Vec<&sluice_sinks::Sink> = sinks
        .iter()
        .filter(|s| s.value_encoding.is_registry())
        .collect();
    if sinks.is_empty() {
        return Ok(Vec::new());
    }
    let settings = sluice_registry::RegistrySettings::from_lookup(&sluice_process::env_lookup)
        .map_err(|e| Failure::config(anyhow!("{e}")))?;
    let registry =
        sluice_registry::Registry::new(&settings).map_err(|e| Failure::config(anyhow!("{e}")))?;
    let checks = sluice_storage::subjects::check_subjects(&sinks, &registry);
    let refused: Vec<ErrorLine> = checks
        .iter()
        .filter(|c| c.refuses())
        .map(|c| ErrorLine {
            sink: Some(c.sink.clone()),
            column: None,
            reason: c.to_string(),
        })
        .collect();
    if refused.is_empty() {
        Ok(checks)
    } else {
        Err(invalid(args, file, refused))
    }
}

/// The file: the argument, `--sinks`, or `SLUICE_SINKS_FILE`.
fn mapping_file(args: &ValidateArgs) -> Result<String, Failure> {
    match (&args.file, &args.sinks) {
        (Some(a), Some(b)) if a != b => Err(Failure::config(anyhow!(
            "two mapping files given ({a} and --sinks {b}); give one"
        ))),
        (Some(file), _) | (None, Some(file)) => Ok(file.clone()),
        (None, None) => sluice_process::env_lookup(SINKS_FILE_VAR)
            .filter(|f| !f.is_empty())
            .ok_or_else(|| {
                Failure::config(anyhow!(
                    "no mapping file: give FILE, --sinks FILE or {SINKS_FILE_VAR}"
                ))
            }),
    }
}

fn mapping_line(error: &MappingError) -> ErrorLine {
    let sink = match error {
        MappingError::Key { sink, .. } | MappingError::Invalid { sink, .. } => Some(sink.clone()),
        _ => None,
    };
    ErrorLine {
        sink,
        column: None,
        reason: error.to_string(),
    }
}

/// Exit 2: each error on its own line (stderr, or stdout as JSON with `--json`).
fn invalid(args: &ValidateArgs, file: &str, lines: Vec<ErrorLine>) -> Failure {
    if args.json {
        let out = serde_json::json!({"file": file, "valid": false, "errors": lines});
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        for line in &lines {
            eprintln!("sluice: invalid: {}", line.reason);
        }
    }
    Failure::config(anyhow!(
        "{file}: {} error(s); nothing was consumed",
        lines.len()
    ))
}

/// Each route of a sink with routes: its condition, its table, and its plan when the table
/// is fixed and exists.
fn print_routes(pipeline: &sluice_storage::Pipeline) {
    if pipeline.routes.is_empty() {
        return;
    }
    for (index, route) in pipeline.routes.iter().enumerate() {
        println!();
        let conflict = route
            .plan
            .as_ref()
            .map(|plan| format!(", {}", plan.conflict))
            .unwrap_or_default();
        println!(
            "  route #{} when {} -> table {}{conflict}",
            index + 1,
            route.when,
            route.table
        );
        match &route.plan {
            Some(plan) => print_columns(plan),
            None => println!(
                "    planned when a record first goes to it (the table is named by each record, \
                 or does not exist yet: its records are unknown_table dead letters until it does)"
            ),
        }
    }
    println!();
    println!(
        "  a record no route takes: {}",
        match pipeline.sink.unrouted {
            sluice_sinks::Unrouted::DeadLetter => "a dead letter of kind unrouted",
            sluice_sinks::Unrouted::Ignore => "ignored (committed, counted as skipped)",
        }
    );
}

fn print_plan(plan: &SinkPlan) {
    println!();
    let topics = match plan.topics.named().len() {
        0 => plan.topics.to_string(),
        1 => format!("topic {}", plan.topics),
        _ => format!("topics {}", plan.topics),
    };
    println!(
        "sink {}: {topics}, group {}, table {}, {}, batch {} records or {} bytes",
        plan.name, plan.group, plan.table, plan.conflict, plan.batch_size, plan.batch_bytes
    );
    let mut format = plan.format.clone();
    if let Some(values) = &plan.value_format {
        format.push_str(&format!(", values {values}"));
    }
    if let Some(keys) = &plan.key_format {
        format.push_str(&format!(", keys {keys}"));
    }
    println!(
        "  format {format}, a tombstone: {}",
        match plan.on_tombstone.as_str() {
            "delete" => "deletes its key's row",
            "ignore" => "ignored (committed, no row changes)",
            _ => "dead-lettered",
        }
    );
    if let Some(modes) = &plan.modes {
        println!("  values without a schema: {modes}");
    }
    if plan.statement.is_empty() && plan.table.contains('{') {
        println!(
            "  tables: named by each record ({}), each planned against the catalog when a \
             record first names it; one that does not exist dead-letters its records as \
             unknown_table",
            plan.table
        );
        return;
    }
    if plan.statement.is_empty() {
        println!("  each record to the table of the first route it meets:");
        return;
    }
    print_columns(plan);
}

/// A planned table's columns, statements and checks.
fn print_columns(plan: &SinkPlan) {
    let width = |f: fn(&sluice_sinks::ColumnPlan) -> usize, min: usize| {
        plan.columns.iter().map(f).max().unwrap_or(0).max(min)
    };
    let (c, t, s) = (
        width(|c| c.column.len(), 6),
        width(|c| c.sql_type.len(), 4),
        width(|c| c.source.len(), 6),
    );
    println!(
        "  {:c$}  {:t$}  {:s$}  {:7}  checks",
        "column", "type", "source", "update"
    );
    for column in &plan.columns {
        let checks: Vec<String> = column.checks.iter().map(ToString::to_string).collect();
        println!(
            "  {:c$}  {:t$}  {:s$}  {:7}  {}",
            column.column,
            column.sql_type,
            column.source,
            if column.updated { "yes" } else { "no" },
            if checks.is_empty() {
                "checked here".to_owned()
            } else {
                checks.join("; ")
            }
        );
    }
    if !plan.never_written.is_empty() {
        println!("  never written: {}", plan.never_written.join(", "));
    }
    println!("  statement:");
    for line in plan.statement.lines() {
        println!("    {line}");
    }
    if let Some(delete) = &plan.delete_statement {
        println!("  delete statement:");
        for line in delete.lines() {
            println!("    {line}");
        }
    }
}
